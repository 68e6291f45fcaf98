/* A Llama-family decoder, in the spirit of llm.c's train_gpt2.c: one struct
 * per model, every parameter in ONE float buffer with a struct of pointers
 * into it (model_layer in layer.h views one layer), scratch activations in
 * one buffer. The layer is written once (layer.c) on the ops of a backend
 * (lib/ops/backend.h); rollout, the reward model and training all run it.
 *
 * Internal layout is Hugging Face's: W is [out, in] row-major, Q/K rows in
 * rotate-half order (GGUF's interleaved order is undone on load). */
#ifndef GRPO_MODEL_H
#define GRPO_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../ops/backend.h"
#include "../util/err.h"
#include "config.h"

/* Parameter tensors, in the order they sit in the buffer. */
enum {
    P_TOK_EMBD, P_ATTN_NORM, P_WQ, P_WK, P_WV, P_BQ, P_BK, P_BV, P_Q_NORM, P_K_NORM, P_WO,
    P_FFN_NORM, P_W_GATE, P_W_UP, P_W_DOWN, P_OUT_NORM, P_LM_HEAD, P_SCORE, MODEL_N_PARAMS
};

/* L = n_layers, q_dim = n_heads * head_dim, kv_dim = n_kv_heads * head_dim.
 * Tensors the architecture lacks are NULL (size 0). */
typedef union {
    struct {
        float *tok_embd;   /* [vocab, dim] */
        float *attn_norm;  /* [L, dim] */
        float *wq;         /* [L, q_dim, dim] */
        float *wk;         /* [L, kv_dim, dim] */
        float *wv;         /* [L, kv_dim, dim] */
        float *bq;         /* [L, q_dim]   qwen2 */
        float *bk;         /* [L, kv_dim]  qwen2 */
        float *bv;         /* [L, kv_dim]  qwen2 */
        float *q_norm;     /* [L, head_dim] qwen3 */
        float *k_norm;     /* [L, head_dim] qwen3 */
        float *wo;         /* [L, dim, q_dim] */
        float *ffn_norm;   /* [L, dim] */
        float *w_gate;     /* [L, hidden, dim] */
        float *w_up;       /* [L, hidden, dim] */
        float *w_down;     /* [L, dim, hidden] */
        float *out_norm;   /* [dim] */
        float *lm_head;    /* [vocab, dim]; points at tok_embd when tied; NULL in a classifier */
        float *score;      /* [num_labels, dim]; classifiers only */
    };
    float *t[MODEL_N_PARAMS];
} model_params;

typedef struct {
    model_config cfg;
    model_params w;
    size_t param_sizes[MODEL_N_PARAMS]; /* floats per tensor (lm_head 0 when tied) */
    size_t n_params;                    /* floats in params_memory */
    float *params_memory;
    float inv_freq[512]; /* RoPE frequencies [head_dim/2], scaling applied */
    /* model_pack_for_inference: the layer matrices (wq .. w_down) are
     * packed.h panels in place, and head_packed the LM head's panels (in
     * lm_head's own place, or head_packed_own when tied to the embeddings). */
    bool packed;
    const float *head_packed;
    float *head_packed_own;
} model;

/* Loads a causal LM: an HF directory (config.json, model.safetensors or a
 * sharded model.safetensors.index.json, generation_config.json), a PEFT
 * adapter directory (its base, lora.h's lora_adapter_base_path, with the
 * adapter merged in) or a .gguf file.
 * Errors: EX_NOINPUT missing, EX_DATAERR malformed or unsupported (naming the
 * architecture, dtype, quant type or tensor; a sequence classifier is one),
 * EX_IOERR unreadable. On error m holds nothing to free. */
int model_load(model *m, const char *path, gerr *e);
/* Loads a sequence classifier (a reward model): an HF directory of a
 * *ForSequenceClassification, with score.weight and no lm_head. Anything
 * else (a causal LM, a GGUF file, an adapter) is EX_DATAERR naming its
 * architecture. */
int model_load_classifier(model *m, const char *path, gerr *e);
void model_free(model *m);

/* For a model that only runs model_forward / model_forward_hidden (rollout,
 * a reward model): rewrites the layer matrices in place in the packed.h
 * panel layout, and packs the LM head (a copy when tied), so no matmul of the
 * forward repacks weights. Does nothing (returns 0) when the CPU lacks the
 * packed kernel or a matrix's row count is not a whole number of panels.
 * Afterwards m->w's layer matrices are not row-major: training, export and
 * LoRA merging must not use such a model. EX_SOFTWARE when memory is short
 * (the model is then unchanged). */
int model_pack_for_inference(model *m, gerr *e);

/* Sizes every parameter tensor from m->cfg and allocates the one buffer
 * (zeroed), pointing m->w into it. For loaders and tests. */
int model_alloc(model *m, gerr *e);
/* Name of parameter tensor i ("wq", ...), for messages. */
const char *model_param_name(int i);

/* ---- KV cache ---------------------------------------------------------------
 * One slot per sequence: K and V of every layer and position,
 * [n_seqs][n_layers][max_len][kv_dim] each. */
typedef struct {
    int n_seqs, max_len, n_layers, kv_dim;
    float *k, *v;
} kv_cache;

/* Bytes kv_cache_init would allocate. */
size_t kv_cache_bytes(const model_config *cfg, int n_seqs, int max_len);
/* EX_USAGE for non-positive sizes, EX_SOFTWARE when memory is short. */
int kv_cache_init(kv_cache *c, const model_config *cfg, int n_seqs, int max_len, gerr *e);
/* Copies positions [0, n_positions) of every layer from src_seq to dst_seq
 * (K samples share one prefill). */
void kv_cache_copy_prefix(kv_cache *c, int dst_seq, int src_seq, int n_positions);
/* Makes room for max_len positions per sequence, keeping what is cached
 * (no-op when already that long). On error c is unchanged. */
int kv_cache_grow(kv_cache *c, const model_config *cfg, int max_len, gerr *e);
void kv_cache_free(kv_cache *c);

/* ---- rows -------------------------------------------------------------------
 * The per-row arguments of one forward call (model_forward's seq, pos,
 * token, want), kept by a caller across calls and grown as needed. */
typedef struct {
    int *seq, *pos;
    int32_t *tok;
    bool *want;
    size_t cap;
} model_rows;

/* Room for at least n rows (contents kept). */
void model_rows_reserve(model_rows *r, size_t n);
void model_rows_free(model_rows *r);

/* ---- scratch ----------------------------------------------------------------
 * Activations of one forward call over at most max_rows rows, allocated once
 * and reused by every layer (layer.h's layer_acts pointed into them), plus
 * the attention workspace (up to max_len positions). */
typedef struct {
    int max_rows, max_len;
    float *mem;
    float *x;      /* [R, dim]     residual stream */
    float *xn;     /* [R, max(dim, q_dim)] normed input / attention output */
    float *q;      /* [R, q_dim] */
    float *k, *v;  /* [R, kv_dim] */
    float *gate;   /* [R, hidden]  also silu(gate) * up */
    float *up;     /* [R, hidden] */
    float *x_mid;  /* [R, dim]     the residual between the two blocks */
    float *cos_t, *sin_t; /* [R, head_dim/2] */
    size_t *row_kv;       /* [R] each row's place in the KV cache */
    int32_t *pick;        /* [R] the rows the final norm reads */
    attn_workspace ws;
} model_scratch;

int model_scratch_init(model_scratch *s, const model_config *cfg, int max_rows, int max_len, gerr *e);
void model_scratch_free(model_scratch *s);

/* The backend the model's weights live on and its ops run on. */
const backend *model_backend(const model *m);

/* Forward over n_rows rows (n_rows <= s->max_rows): row i is token[i] of
 * sequence seq[i] at position pos[i]. Every row's K and V are written into
 * the cache first, then each row attends to positions 0..pos[i] of its own
 * sequence, so one call may be a prefill (many rows of one sequence), a
 * decode step (one row per sequence), or a mix. Positions below pos[i] not
 * written in this call must be in the cache from earlier calls.
 * For the rows with want_logits[i] (all rows when want_logits is NULL),
 * logits[vocab] are written one after the other in row order.
 * Preconditions (asserted): 0 <= token < vocab, 0 <= seq < c->n_seqs,
 * 0 <= pos < min(c->max_len, s->max_len); the model has an LM head. */
void model_forward(const model *m, kv_cache *c, int n_rows, const int *seq, const int *pos,
                   const int32_t *token, const bool *want_logits, float *logits, model_scratch *s);
/* The decoder without a head, as model_forward: for the rows with want[i]
 * (all when NULL) the final-normed hidden state, hidden[dim] one after the
 * other in row order (what a head multiplies: model_forward is this and the
 * LM head, a classifier's value is this and score). hidden may be s->xn.
 * Returns the number of rows written. */
int model_forward_hidden(const model *m, kv_cache *c, int n_rows, const int *seq, const int *pos,
                         const int32_t *token, const bool *want, float *hidden, model_scratch *s);

/* ---- tensor names -------------------------------------------------------------
 * Every tensor of the model with its Hugging Face and GGUF names, its HF
 * shape ([rows, cols]; cols 0 for a vector) and where it lives in the
 * buffer. Loaders and exporters walk this list. perm_heads is the head count
 * of llama.cpp's Q/K row permutation (0 for other tensors). */
typedef struct {
    char hf[96], gguf[64];
    int param, layer; /* layer -1 for the global tensors */
    int64_t rows, cols;
    float *dst;
    int perm_heads;
} model_tensor_ref;

/* Fills out (when not NULL) and returns the number of tensors. Needs
 * model_alloc first. */
size_t model_tensor_list(const model *m, model_tensor_ref *out);

/* ---- internal to the loaders ------------------------------------------------ */
int model_load_hf(model *m, const char *dir, gerr *e);
int model_load_gguf(model *m, const char *path, gerr *e);
/* Computes m->inv_freq from m->cfg (GGUF rope_freqs factors may refine it). */
void model_init_rope(model *m);

#endif
