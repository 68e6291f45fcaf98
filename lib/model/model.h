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
    P_FFN_NORM, P_W_GATE, P_W_UP, P_W_DOWN, P_ROUTER, P_EXP_GATE, P_EXP_UP, P_EXP_DOWN, P_OUT_NORM, P_LM_HEAD,
    P_SCORE,
    /* gpt_oss's, last: every other family's layout (and numbering) as it was */
    P_SINKS, P_BO, P_ROUTER_B, P_EXP_GATE_B, P_EXP_UP_B, P_EXP_DOWN_B, MODEL_N_PARAMS
};

/* L = n_layers, q_dim = n_heads * head_dim, kv_dim = n_kv_heads * head_dim;
 * Ld and Lm the layers with a dense FFN and with a mixture of experts
 * (config_layer_moe; a dense model's Ld is L), E = n_experts,
 * I = moe_hidden_dim. Tensors the architecture lacks are NULL (size 0). */
typedef union {
    struct {
        float *tok_embd;   /* [vocab, dim] */
        float *attn_norm;  /* [L, dim] */
        float *wq;         /* [L, q_dim, dim] */
        float *wk;         /* [L, kv_dim, dim] */
        float *wv;         /* [L, kv_dim, dim] */
        float *bq;         /* [L, q_dim]   qwen2, gpt_oss */
        float *bk;         /* [L, kv_dim]  qwen2, gpt_oss */
        float *bv;         /* [L, kv_dim]  qwen2, gpt_oss */
        float *q_norm;     /* [L, head_dim] qwen3 */
        float *k_norm;     /* [L, head_dim] qwen3 */
        float *wo;         /* [L, dim, q_dim] */
        float *ffn_norm;   /* [L, dim] */
        float *w_gate;     /* [Ld, hidden, dim] */
        float *w_up;       /* [Ld, hidden, dim] */
        float *w_down;     /* [Ld, dim, hidden] */
        float *router;     /* [Lm, E, dim]     mlp.gate: the router's logits */
        float *exp_gate;   /* [Lm, E, I, dim]  each expert's gate_proj */
        float *exp_up;     /* [Lm, E, I, dim] */
        float *exp_down;   /* [Lm, E, dim, I] */
        float *out_norm;   /* [dim] */
        float *lm_head;    /* [vocab, dim]; points at tok_embd when tied; NULL in a classifier */
        float *score;      /* [num_labels, dim]; classifiers only */
        float *sinks;      /* [L, n_heads]  gpt_oss: each head's sink logit */
        float *bo;         /* [L, dim]     gpt_oss */
        float *router_b;   /* [Lm, E]         gpt_oss: the router's bias */
        float *exp_gate_b; /* [Lm, E, I]      gpt_oss: each expert's biases */
        float *exp_up_b;   /* [Lm, E, I] */
        float *exp_down_b; /* [Lm, E, dim] */
    };
    float *t[MODEL_N_PARAMS];
} model_params;

/* How a tensor is held once packed (pack.c, below). */
typedef enum {
    HOLD_ROWS,        /* float32 rows, as loaded */
    HOLD_PACKED,      /* packed in its format in the tensor's own place */
    HOLD_PACKED_COPY, /* packed into a buffer of its own, the rows kept (the LM head only) */
} weight_hold;

/* One tensor of the model by name (model_tensor_list, below). */
typedef struct model_tensor_ref model_tensor_ref;

/* The weights as a device backend holds them (model_dev.c, defined in
 * layer.h): that backend's memory, its weight format. */
typedef struct model_dev model_dev;

typedef struct {
    model_config cfg;
    model_params w;
    size_t param_sizes[MODEL_N_PARAMS]; /* floats per tensor (lm_head 0 when tied) */
    size_t n_params;                    /* floats in params_memory */
    float *params_memory;
    float inv_freq[512]; /* RoPE frequencies [head_dim/2], scaling applied */
    /* model_pack: the layer matrices (wq .. w_down; a frozen base's
     * embeddings and LM head too) are held as held[] says (the plan's), those
     * packed in format held_as[] in their own place: packed_as (the plan's
     * fmt), or MXFP4 for experts taken from a file's MXFP4 blocks;
     * head_packed is the LM head's (in lm_head's own place, which is the
     * embeddings' when tied on a frozen base, or head_packed_own when tied to
     * the embeddings or too narrow to pack in place), in held_as[P_LM_HEAD].
     * packed_verbatim of these matrices (the LM head
     * counted) a loader wrote straight from the file's blocks, never widened
     * to float32 (pack_plan's verbatim, lib/ckpt/load.h's
     * model_load_for_inference); 0 for the others. */
    bool packed;
    weight_format packed_as;
    weight_hold held[MODEL_N_PARAMS];
    weight_format held_as[MODEL_N_PARAMS];
    const void *head_packed;
    void *head_packed_own;
    int packed_verbatim;
    /* A loader asked to follow a plan (load.h's model_load_for_inference)
     * found every expert matrix stored as MXFP4 blocks (gpt-oss's Hugging
     * Face _blocks and _scales): the plan may take them as they are. */
    bool experts_mxfp4;
    /* The same loader: the format the file holds each matrix tensor in,
     * where every layer's is the same and a packed format holds its values
     * exactly: WEIGHTS_BF16 for bf16, WEIGHTS_Q8 for Q8_0 blocks, WEIGHTS_MXFP4
     * for MXFP4 experts; WEIGHTS_F32 for any other (F32, F16, mixed). A tied
     * head's is the embeddings'. An mxfp4 frozen base holds its matrices so. */
    weight_format file_as[MODEL_N_PARAMS];
    /* model_pack_frozen: packed as the frozen base of a LoRA run; its
     * products take float32 activations on the CPU (matmul_forward_frozen,
     * the LM head's too; a device's are its own: model_to_backend takes the
     * same bytes), the backward reaches the packed matrices for the input
     * gradient only, and the embeddings' rows are dequantized from their
     * blocks as they are looked up (layer.h's model_embed). */
    bool packed_frozen;
    /* A LoRA adapter kept unmerged over a packed frozen base (lib/ckpt/load.h:
     * a checkpoint run on the base it was trained on): model_forward adds its
     * product to every adapted projection as the trainer's forward does.
     * Owned: model_free frees it. NULL: none. */
    struct lora *adapter;
    /* model_to_backend: the forward reads these weights, on their backend
     * (NULL: w above, on the CPU). */
    model_dev *dev;
} model;

void model_free(model *m);

/* ---- packing for inference (pack.c) ------------------------------------------
 * A model that only runs model_forward / model_forward_hidden (rollout, a
 * reward model) may hold its layer matrices in format fmt (float32 panels of
 * packed.h, bf16 panels of packed_bf16.h, or 8-bit blocks of packed_q8.h,
 * each rounded once from the float32 weights) in their own place, and its
 * LM head packed too (a copy when tied), so no matmul of the forward
 * repacks weights; the embeddings, norms and biases stay float32. Experts a
 * file stores as MXFP4 blocks may stay MXFP4 (packed_mxfp4.h), whatever the
 * other matrices are. Which tensor is held how is decided once, in a plan
 * (model_plan_packing), that a loader follows (lib/ckpt/load.h: a matrix
 * the plan packs in its own place that the file stores in blocks its
 * format takes as they are is written packed straight from them, and
 * marked verbatim) and then model_pack. */

/* What a tool asks for (lib/runner/weights.c makes it from --weights): the
 * matrices in fmt (f32, bf16 or q8), and with keep_mxfp4 the experts a file
 * stores as MXFP4 blocks kept so (auto's rule). fmt WEIGHTS_MXFP4: those
 * experts kept MXFP4 and every other matrix as under WEIGHTS_F32; a model
 * whose experts were not loaded from MXFP4 blocks is refused. With
 * frozen_base (auto's rule too) a LoRA checkpoint trained on a packed frozen
 * base runs on that base whatever fmt is (lib/ckpt/load.h). With frozen the
 * plan is a LoRA run's frozen base (model_pack_frozen's): the base packed
 * whole, the embeddings and the LM head too (each in its own place, a tied
 * head once, as the embeddings), and under WEIGHTS_F32 (or MXFP4) no matrix
 * packed but the MXFP4 experts kept (the embeddings and head float32 rows),
 * float32 panels having no transposed product. With
 * pack_early the loader packs each matrix as it reads it (model_pack_loaded):
 * for a caller that runs model_pack next, nothing reading the float32 rows
 * in between (a LoRA merge does). With on_device the plan is a device
 * backend's (model_to_backend): every matrix float32 rows, the experts kept
 * MXFP4 as fmt and keep_mxfp4 say (their blocks go to the device as they
 * are), fmt's other formats and frozen_base left aside (a LoRA checkpoint
 * merged). */
typedef struct {
    weight_format fmt;
    bool keep_mxfp4;
    bool frozen_base;
    bool frozen;
    bool pack_early;
    bool on_device;
} weight_choice;

typedef struct {
    weight_format fmt; /* the format of every packed tensor but the MXFP4 experts (a frozen plan
                        * that packs these only: WEIGHTS_MXFP4) */
    weight_hold hold[MODEL_N_PARAMS]; /* per parameter tensor (every layer alike) */
    weight_format as[MODEL_N_PARAMS]; /* the format of each packed one: fmt, or WEIGHTS_MXFP4 */
    gerr refused; /* EX_DATAERR: fmt cannot hold the model's shapes; EX_USAGE: no MXFP4 experts to keep */
    size_t n_tensors;                 /* model_tensor_list's count */
    bool *verbatim; /* [n_tensors], model_tensor_list's order: already written packed by the loader */
    bool *early;    /* [n_tensors]: packed from its floats as the loader read it (model_pack_loaded) */
    bool pack_early; /* weight_choice's: model_pack_loaded packs as the loader reads */
    bool frozen;    /* weight_choice's: model_pack makes the model a frozen base */
    void *scratch;  /* model_pack_loaded's and model_pack_rows' chunk, reused */
    size_t scratch_cap;
} pack_plan;

/* The plan for m (allocated: model_alloc) as w asks, nothing verbatim yet.
 * For WEIGHTS_F32 nothing is packed (every hold HOLD_ROWS) when the CPU
 * lacks the packed kernel or a matrix's row count is not a whole number of
 * panels (OpenBLAS then runs the row-major weights); bf16, q8 and q4k
 * always pack (their kernels have portable fallbacks), except a model whose
 * shapes they cannot hold (q8, q4k: an input width not a multiple of 32),
 * refused.
 * Experts kept MXFP4 (m->experts_mxfp4 and w's rule) are HOLD_PACKED in
 * WEIGHTS_MXFP4 whatever the others are; the loader must write them all
 * verbatim. pack_plan_free frees it. */
void model_plan_packing(const model *m, weight_choice w, pack_plan *p);
void pack_plan_free(pack_plan *p);
/* Packs m as p says (p made for m): every HOLD_PACKED tensor not verbatim
 * from its float32 rows, the LM head's copy; a frozen plan's model marked
 * packed_frozen, the pages each packed matrix no longer fills given back. Afterwards m->w's layer
 * matrices are not row-major: export, LoRA merging and training (but a
 * LoRA over a base model_pack_frozen packed, in training or unmerged in
 * model_forward) must not use such a model. Nothing when m is packed
 * already. EX_DATAERR when p was refused, EX_SOFTWARE when memory is short
 * (m then unchanged). */
int model_pack(model *m, const pack_plan *p, gerr *e);
/* Tensor i of p (r: model_tensor_list's i-th) packed now from the float32
 * rows the loader just wrote, its float32 tail given back, and marked early
 * so that model_pack leaves it: loading then never holds the whole model in
 * float32 (the values are model_pack's). A tensor p does not pack in place,
 * MXFP4 experts (blocks only) and a plan model_pack will refuse are left to
 * model_pack. EX_SOFTWARE when the scratch cannot be had. */
int model_pack_loaded(pack_plan *p, size_t i, const model_tensor_ref *r, gerr *e);
/* Whether model_pack_loaded packs tensor i (r) now. */
bool model_packs_loaded(const pack_plan *p, size_t i, const model_tensor_ref *r);
/* Tensor i (r), one model_packs_loaded says is packed now, packed straight
 * from the loader's rows: fill writes rows [row0, row0 + rows) of it as
 * float32 into out (0, or its error in e); the rows come a chunk at a time
 * into a scratch of the plan's, so r's float32 place is never written (its
 * pages never taken) and the file's rows need no float32 copy. The same bytes
 * as model_pack_loaded over the whole matrix; marked early. */
typedef int (*pack_rows_fn)(void *ctx, int row0, int rows, float *out, gerr *e);
int model_pack_rows(pack_plan *p, size_t i, const model_tensor_ref *r, pack_rows_fn fill, void *ctx, gerr *e);
/* The bytes m's parameters take in memory once loaded and packed as p says
 * (NULL: float32 throughout): a packed matrix's float32 place past its
 * packed bytes is never written or is given back (model_alloc reserves the
 * whole buffer without committing it). model_fits_memory: 0 when they fit
 * in the machine's memory and swap, else EX_SOFTWARE "cannot allocate". */
size_t model_resident_bytes(const model *m, const pack_plan *p);
int model_fits_memory(const model *m, const pack_plan *p, gerr *e);
/* model_plan_packing and model_pack, for a model loaded as float32 (in
 * f32, bf16, q8 or q4k). */
int model_pack_for_inference(model *m, weight_format fmt, gerr *e);
/* m (float32, loaded whole) as the frozen base of a LoRA run: its layer
 * matrices packed in fmt (bf16, q8 or q4k; f32 leaves m as it is) as
 * model_pack_for_inference packs them (a mixture's experts each apart, the
 * router float32 rows), the embeddings and the LM head packed in fmt too,
 * each in its own place (a tied head is the embeddings, packed once), and
 * the pages each packed matrix no longer fills given back to the system.
 * Errors as model_pack's. An MXFP4 frozen base is a loader's (lib/ckpt/load.h:
 * the plan of weight_choice frozen, its experts verbatim from the file's
 * blocks, then model_pack). */
int model_pack_frozen(model *m, weight_format fmt, gerr *e);
/* The values a frozen base packed in fmt holds, as float32 rows in place:
 * each matrix model_pack_frozen would pack rounded through fmt (q8, q4k:
 * its blocks, what weights_unpack gives back; bf16: bf16w_round's), the
 * rest untouched; f32 and mxfp4 (the file's MXFP4 values, exact in float32)
 * leave m as it is. A matrix the loader wrote in place from the file's
 * blocks (loaded, the plan it followed, not NULL: verbatim, in fmt; a
 * Q4_K GGUF's under a frozen q4k plan) is widened to their values instead,
 * as the trainer takes them. A LoRA checkpoint trained on such a base
 * merges into this (lib/ckpt/load.h). EX_DATAERR when fmt cannot hold the
 * model's shapes, m then unchanged. */
int model_round_frozen(model *m, weight_format fmt, const pack_plan *loaded, gerr *e);
/* "f32", "bf16", "q8", "mxfp4" or "q4k". */
const char *weight_format_name(weight_format fmt);
/* The weights' format and kernel, for progress lines, into buf (returned):
 * "bf16 (AVX512-BF16 kernel)", "q8 (AVX2 kernel; 211 of 211 matrices from
 * the file's Q8_0 blocks)" when packed_verbatim, "f32 (packed AVX2 kernel;
 * experts mxfp4, AVX2 kernel, 48 of 57 matrices from the file's MXFP4
 * blocks)", "q8 frozen base (float32 activations, AVX-512 kernel; LoRA
 * adapter unmerged)". */
const char *model_weights_describe(const model *m, char *buf, size_t size);

/* Copies the weights the inference forward reads (not a classifier's score
 * head, which stays on the host) into be's memory and format (bf16 matrices
 * on CUDA; a mixture's experts one stacked matrix per layer and tensor, or
 * MXFP4 experts as their blocks, which matmul_forward_packed takes);
 * afterwards model_forward runs on be, with a KV cache and scratch made on
 * be too (kv_cache_init_on, model_scratch_init_on) and logits in be's
 * memory. m->w stays as it was. The model must not be packed, but for MXFP4
 * experts (weight_choice's on_device plan) or as a frozen base
 * (packed_frozen: every packed matrix, the embeddings and a packed head
 * among them, goes there as its packed bytes, a tied head once, for be's
 * matmul_forward_frozen, matmul_backward_frozen and gather_rows_packed):
 * EX_SOFTWARE. A model whose options be has no ops for (a mixture of
 * experts, attention sinks or sliding windows, a frozen packed base:
 * backend.h's NULL entries) is EX_USAGE in one line, before anything is
 * copied. */
int model_to_backend(model *m, const backend *be, gerr *e);
void model_dev_free(model *m);
/* After an optimizer step on the device: m->dev's copies made again from
 * params, the model's floats in params_memory's layout in the device's
 * memory (matrices through the backend's weight_refresh, vectors copied).
 * Ordered with the backend's ops; failures come out of its sync. */
void model_dev_refresh(model *m, const float *params);

/* Sizes every parameter tensor from m->cfg and allocates the one buffer
 * (zeroed), pointing m->w into it. For loaders and tests. */
int model_alloc(model *m, gerr *e);
/* Name of parameter tensor i ("wq", ...), for messages. */
const char *model_param_name(int i);
/* Whether per-layer tensor param (P_ATTN_NORM .. P_EXP_DOWN, P_SINKS .. P_EXP_DOWN_B) is in layer l
 * (the FFN's tensors are in the layers of their kind only), and how many
 * layers have it. */
bool model_layer_has(const model_config *c, int param, int l);
int model_param_layers(const model_config *c, int param);
/* One per-layer tensor of one layer that has it (all of its experts). */
float *model_layer_tensor(const model *m, int param, int layer);

/* ---- KV cache ---------------------------------------------------------------
 * One slot per sequence: K and V of every layer and position,
 * [n_seqs][n_layers][max_len][kv_dim] each, in elements of fmt: k/v when
 * KV_F32, k_bf16/v_bf16 when KV_BF16 (half the bytes; attention then runs
 * over K and V rounded to bf16, see ops.h). */
typedef struct {
    int n_seqs, max_len, n_layers, kv_dim;
    kv_format fmt;
    union { float *k; uint16_t *k_bf16; };
    union { float *v; uint16_t *v_bf16; };
    const backend *be; /* whose memory k and v are; NULL: the host's */
} kv_cache;

/* Bytes kv_cache_init would allocate (fp32). */
size_t kv_cache_bytes(const model_config *cfg, int n_seqs, int max_len);
/* Bytes a cache of that format would allocate. */
size_t kv_cache_bytes_as(const model_config *cfg, int n_seqs, int max_len, kv_format fmt);
/* An fp32 cache. EX_USAGE for non-positive sizes, EX_SOFTWARE when memory
 * is short. */
int kv_cache_init(kv_cache *c, const model_config *cfg, int n_seqs, int max_len, gerr *e);
/* The same in a device backend's memory (be NULL or without memory
 * entries: the host's, as kv_cache_init). */
int kv_cache_init_on(kv_cache *c, const backend *be, const model_config *cfg, int n_seqs, int max_len, gerr *e);
/* The same with the element format fmt, on the host or on a device (the
 * CUDA attention reads either). */
int kv_cache_init_as(kv_cache *c, const backend *be, const model_config *cfg, int n_seqs, int max_len, kv_format fmt,
                     gerr *e);
/* Copies positions [0, n_positions) of every layer from src_seq to dst_seq
 * (K samples share one prefill). */
void kv_cache_copy_prefix(kv_cache *c, int dst_seq, int src_seq, int n_positions);
/* Makes room for max_len positions per sequence, keeping what is cached
 * and the format (no-op when already that long). On error c is unchanged. */
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
    float *gate;   /* [R, ffn width]  also silu(gate) * up (layer.h's layer_ffn_width) */
    float *up;     /* [R, ffn width] */
    float *x_mid;  /* [R, dim]     the residual between the two blocks */
    float *cos_t, *sin_t; /* [R, head_dim/2] */
    size_t *row_kv;       /* [R] each row's place in the KV cache */
    int32_t *pick;        /* [R] the rows the final norm reads */
    /* a mixture of experts' (NULL in a dense model): [R, E] probs, [R, k] sel
     * and route_w, [R*k, dim] xe and ye, and the host's index arrays */
    float *probs, *route_w, *xe, *ye;
    int32_t *sel;
    struct moe_index *moe;
    /* [R, Lm, k] host ints: each row's experts in every layer with a
     * mixture (Lm of them, in layer order), as the last forward call chose
     * them (the sampler's routing, formats/rollout.md); NULL in a dense model */
    int32_t *routes;
    /* [R, lora_r] ([R * k, lora_r] by slot with experts): an unmerged
     * adapter's u = x A^T, one target at a time (model_scratch_init_for;
     * NULL when lora_r is 0) */
    float *u;
    int lora_r;
    attn_workspace ws;
    const backend *be; /* whose memory the activations are; NULL: the host's */
} model_scratch;

int model_scratch_init(model_scratch *s, const model_config *cfg, int max_rows, int max_len, gerr *e);
/* The activations in a device backend's memory (no host attention
 * workspace); be NULL: model_scratch_init. row_kv and pick stay host arrays. */
int model_scratch_init_on(model_scratch *s, const backend *be, const model_config *cfg, int max_rows, int max_len,
                          gerr *e);
/* model_scratch_init_on for model m: on its backend, for its shapes, with
 * room for its unmerged adapter's u when it has one (model.adapter). */
int model_scratch_init_for(model_scratch *s, const model *m, int max_rows, int max_len, gerr *e);
void model_scratch_free(model_scratch *s);

/* The backend the model's weights live on and its ops run on. */
const backend *model_backend(const model *m);
/* The heads its attention runs over (ops.h's attention ops take these). */
static inline attn_shape model_attn_shape(const model_config *c) {
    return (attn_shape){.n_heads = c->n_heads, .n_kv_heads = c->n_kv_heads, .head_dim = c->head_dim};
}

/* Forward over n_rows rows (n_rows <= s->max_rows): row i is token[i] of
 * sequence seq[i] at position pos[i]. Every row's K and V are written into
 * the cache first, then each row attends to positions 0..pos[i] of its own
 * sequence, so one call may be a prefill (many rows of one sequence), a
 * decode step (one row per sequence), or a mix. Positions below pos[i] not
 * written in this call must be in the cache from earlier calls.
 * For the rows with want_logits[i] (all rows when want_logits is NULL),
 * logits[vocab] are written one after the other in row order (in the
 * memory of the model's backend: a device buffer after model_to_backend;
 * the ops run there asynchronously, and its sync reports their failures).
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
 * of llama.cpp's Q/K row permutation (0 for other tensors). An expert's
 * matrix is one tensor in HF (model.layers.L.mlp.experts.X.gate_proj.weight)
 * and slice X of its layer's stacked [E, rows, cols] tensor in GGUF
 * (blk.L.ffn_gate_exps.weight, GGUF dims {cols, rows, E}). */
struct model_tensor_ref {
    /* name: this tensor's own, one per ref (an expert's matrix has its
     * expert's); hf: where it lives in a Hugging Face file, shared by the
     * refs a family stacks into one tensor (gpt_oss's experts). */
    char name[96], hf[96], gguf[64];
    int param, layer; /* layer -1 for the global tensors */
    int expert;       /* the expert of an expert's matrix, else -1 */
    int64_t rows, cols;
    float *dst;
    int perm_heads;
};

/* Fills out (when not NULL) and returns the number of tensors. Needs
 * model_alloc first. */
size_t model_tensor_list(const model *m, model_tensor_ref *out);

/* Computes m->inv_freq from m->cfg (for the loaders of lib/ckpt/load.h;
 * GGUF rope_freqs factors may refine it). */
void model_init_rope(model *m);

#endif
