/* One decoder layer, written once: rollout (with a KV cache, packed
 * weights), the reward model, and training (LoRA, saved activations, the
 * backward) all run layer_forward, and training runs layer_backward beside it.
 *
 * Per layer, as HF's LlamaDecoderLayer / Qwen2 / Qwen3:
 *   xn1 = RMSNorm(x_in); q,k,v = linear(xn1) (+bias); [qwen3] q,k = RMSNorm per head;
 *   RoPE(q, k); [cache] store k,v; att = softmax(q k^T / sqrt(hd)) v  (GQA);
 *   x_mid = x_in + linear_o(att);
 *   xn2 = RMSNorm(x_mid); x_out = x_mid + FFN(xn2), where FFN(x) = ffn(x; W_gate, W_up, W_down) and
 *   ffn(x; G, U, D) = (silu(x G^T) * x U^T) D^T,
 * where linear(x) = x W^T (+ scale * dropout(x) A^T B^T with a LoRA adapter).
 * Every op goes through the pass's backend (lib/ops/backend.h).
 *
 * gpt-oss's attention options (config.h), each on its own:
 *   YaRN RoPE: its frequencies, and q k^T scaled by attention_factor^2 as
 *     well (HF scales cos and sin by the factor);
 *   a sliding layer (config_layer_window): the row at position P attends to
 *     keys P - window + 1 .. P;
 *   sinks: head h's softmax runs over [its scores, sink_h] and drops the
 *     sink's column, so the row's weights sum to less than 1;
 *     d(sink_h) = -sum_rows p_sink (att . d att) (ops.h);
 *   o bias: x_mid = x_in + linear_o(att) + b_o (q, k, v with qkv biases).
 * The sinks and the biases train in full fine-tuning; LoRA leaves them frozen.
 *
 * In a layer with a mixture of experts (config_layer_moe; Qwen3-MoE's
 * Qwen3MoeSparseMoeBlock) the FFN is, per token x (a row of xn2):
 *   p = softmax(x W_router^T) over the E experts;
 *   S = the k experts of largest p (the choice is not differentiated), or
 *     the k given for the row (layer_pass.replay: a routing recorded by the
 *     sampler, replayed in training);
 *   w_e = p_e, or p_e / sum_{e' in S} p_e' with norm_topk_prob, for e in S;
 *   FFN(x) = sum_{e in S} w_e ffn(x; G_e, U_e, D_e).
 * The tokens are grouped by expert (moe_group) so that one forward call
 * multiplies each expert's matrices once, over all the rows routed to it;
 * gate, up and h then hold those rows, k per token ("slots"), by expert.
 * Its backward: each expert's over its rows with d(out) = w_e d(FFN), and
 * d(w_e) = d(FFN) . ffn_e(x) back through the renormalisation, the softmax
 * and the router's product (lib/ops/moe.c). LoRA on gate, up and down
 * adapts each expert with its own factors: G_e's product is x G_e^T +
 * scale * dropout_e(x) A_e^T B_e^T (U_e's and D_e's alike, D_e's over
 * h_e), run as one pair of products over the expert's rows beside its
 * own, each expert with its own dropout masks; its backward gives A_e,
 * B_e and adds d(x) beside the expert's (lora.h's expert sets). On
 * gpt_oss's stacked experts (PEFT's ParamWrapper) G_e and U_e share one
 * A_e and no dropout: the same products, A_e's gradient the sum of both
 * (lora.h's stacked adapter). The router stays frozen under LoRA. With the router's load-balancing loss on (layer_pass.balance_scale), its
 * gradient joins the router's logits' there (moe_balance_backward). */
#ifndef GRPO_MODEL_LAYER_H
#define GRPO_MODEL_LAYER_H

#include <stdbool.h>
#include <stdint.h>

#include "../ops/backend.h"
#include "lora.h"
#include "model.h"

/* What one layer computes (and, in training, keeps for its backward). A
 * forward-only pass may point several of these at one buffer: xn1 and xn2,
 * att and xn1, h and gate. Pointers left NULL mean "not kept": rstd1,
 * rstd2, lse; q_raw/k_raw (q and k are then normed in place); u[t] (no LoRA
 * on target t). */
typedef struct {
    float *xn1, *rstd1;
    float *q_raw, *k_raw, *q_rstd, *k_rstd;
    float *q, *k, *v, *att, *lse;
    float *x_mid, *xn2, *rstd2;
    float *gate, *up, *h; /* dense [R, hidden]; mixture [R*k, moe_hidden] by slot */
    float *u[LORA_N_SETS]; /* dropout(x) A^T, [R, r]; an expert set's [R*k, r] by slot */
    /* a mixture of experts' (NULL in a dense layer): */
    float *probs;    /* [R, E] the router's softmax (its logits first) */
    int32_t *sel;    /* [R, k] each token's experts */
    float *route_w;  /* [R, k] their weights */
    float *xe;       /* [R*k, dim] the tokens by slot (the backward gathers it again: may be shared) */
    float *ye;       /* [R*k, dim] each expert's output by slot */
} layer_acts;

/* Floats per row of the FFN's gate, up and h (and their gradients) in the
 * model's widest layer: hidden_dim, or k slots of moe_hidden_dim. */
size_t layer_ffn_width(const model_config *c);

/* The host's index arrays of a mixture-of-experts layer (moe_group's), one
 * set that every layer reuses; zeroed (nothing held) for a dense model. */
typedef struct moe_index {
    int32_t *row_of, *slot_of; /* [R*k] */
    int *offsets;              /* [E+1] */
    uint64_t *key;             /* [R*k] each slot's token's LoRA dropout key */
    int *pos;                  /* [R*k] and position */
} moe_index;
int moe_index_alloc(moe_index *x, const model_config *c, int max_rows, gerr *e);
void moe_index_free(moe_index *x);

/* The backward's scratch, shared by every layer. */
typedef struct {
    float *dx;   /* [R, dim]: d(loss)/d(x_out) in, d(loss)/d(x_in) out */
    float *dtmp; /* [R, dim] */
    float *dxn;  /* [R, max(dim, q_dim)] */
    float *dq, *dk, *dv, *datt, *dgate, *dup; /* dgate, dup [R, layer_ffn_width] */
    float *du; /* [R, lora r] (an expert's rows one expert at a time) */
    /* a mixture of experts': [R*k, dim] dxe, dye; [R*k] dw; [R, E] dlogits */
    float *dxe, *dye, *dw, *dlogits;
} layer_grad_scratch;

/* LoRA on a pass: the adapter, whether it applies, its dropout (masks keyed
 * by (seed, pass, layer, target, row key, position)) and, when it trains,
 * the gradients of its factors. */
typedef struct {
    const lora *l; /* NULL: no adapter */
    bool on;
    double dropout; /* 0: none */
    uint64_t seed, pass;
    const uint64_t *row_key; /* [R] */
    float *xdrop;            /* [R, max in_dim] scratch when dropout > 0 (an expert's moe_hidden_dim included) */
    float *const *grad_a, *const *grad_b; /* [LORA_N_SETS] or NULL: frozen */
} layer_lora;

/* Sequences of a training batch that share their prompt (trainer.c): the
 * prompt's rows are computed once, by the first sequence that has it, and
 * the others hold their completion rows only. Attention still runs over the
 * batch's whole ("virtual") layout, every sequence with its own copy of the
 * prompt's keys and values, gathered from the rows that hold them; in the
 * backward a borrowed prompt row is a query with no gradient of its own
 * (d out = 0, so it adds exactly nothing), and the keys' and values'
 * gradients of every copy are summed back into the shared rows. */
typedef struct {
    int n_virtual;        /* rows of the whole layout (p->start's) */
    const int32_t *vrow;  /* [n_virtual]: the row that holds each virtual row */
    const int32_t *own;   /* [R]: each row's own virtual row */
    float *k, *v;         /* [n_virtual, kv_dim] scratch */
    /* backward scratch: [n_virtual, q_dim] q, out, dout, dq; [n_virtual, kv_dim]
     * dk, dv; [n_virtual, n_heads] lse */
    float *q, *out, *dout, *dq, *dk, *dv, *lse;
} attn_share;

typedef struct {
    const backend *be;
    const model *m;
    int layer, n_rows;
    const int *pos;             /* [R] position of each row */
    const float *cos_t, *sin_t; /* [R, head_dim/2] */
    /* Where attention reads K and V. With a cache the layer first writes its
     * rows' K and V there (kv_cache_view); otherwise kv.k/kv.v are NULL and
     * the rows attend to their own K and V (a training batch, kv.row_kv
     * locating each row's sequence). */
    kv_view kv;
    attn_workspace *ws;
    layer_lora lora;
    /* NULL, or the prompts shared between the batch's sequences (kv.row_kv
     * then locates each row's sequence in share's virtual layout) */
    const attn_share *share;
    /* backward only (attention over the batch's sequences: with share, the
     * virtual layout's starts) */
    int n_seqs;
    const int *start;
    model_params *grad; /* full fine-tuning's gradients, or NULL */
    moe_index *moe;     /* a mixture of experts' index arrays (NULL: a dense model) */
    /* NULL, or in a layer with a mixture of experts the experts each row is
     * routed to, [R, k] host ints (a row whose first is -1 chooses its own):
     * a recorded routing replayed (grpo-update --routing replay) */
    const int32_t *replay;
    /* backward only, the router's load-balancing loss (0: off): the scale
     * moe_balance_backward takes (ops.h), each row's count (NULL: 1 each),
     * and *balance_sum += balance_weight * each layer's balance */
    double balance_scale, balance_weight;
    const float *row_mult;
    double *balance_sum;
} layer_pass;

/* The layer's weights (or gradients: any model_params) as a view. */
typedef struct {
    float *attn_norm, *wq, *wk, *wv, *bq, *bk, *bv, *q_norm, *k_norm, *sinks, *wo, *bo, *ffn_norm, *w_gate, *w_up, *w_down;
    float *router, *exp_gate, *exp_up, *exp_down; /* a mixture of experts' (w_gate .. w_down then NULL) */
    float *router_b, *exp_gate_b, *exp_up_b, *exp_down_b; /* gpt_oss's */
} layer_params;
layer_params model_layer(const model_params *p, const model_config *c, int layer);
/* The weights the forward reads for one layer: on the model's device
 * backend after model_to_backend, else model_layer of m->w. */
layer_params model_layer_weights(const model *m, int layer);
/* Expert x's matrix [rows, cols] (tensor param, P_EXP_GATE .. P_EXP_DOWN)
 * in w, its layer's stack of them as model_layer_weights gives it: on the
 * host x * rows * cols floats on (float32 rows, or packed each in its own
 * place); on a device as model_to_backend put it there (MXFP4 blocks one
 * expert after another, or rows of one matrix in the backend's format:
 * backend.h's weight_rows). */
const float *model_expert_weight(const model *m, int param, const float *w, int x, int rows, int cols);
/* The weights outside the layers, chosen the same way: the embeddings,
 * the final norm and the LM head (NULL in a classifier; a head packed for
 * the CPU is m->head_packed, and a frozen base's packed embeddings are
 * read through model_embed only). */
typedef struct {
    const float *tok_embd, *out_norm, *lm_head;
} global_params;
global_params model_global_weights(const model *m);
/* x[n, dim] = the embeddings of token[n] on be: their float32 rows, or
 * the rows of a frozen base's packed embeddings dequantized (gather_rows_packed). */
void model_embed(const model *m, const backend *be, float *x, const int32_t *token, int n);
/* logits[n, vocab] = x[n, dim] W_head^T on be: the float32 rows (be's
 * matmul_forward), a frozen base's packed head on float32 activations
 * (matmul_forward_frozen), or an inference-packed one
 * (matmul_forward_packed). */
void model_head_forward(const model *m, const backend *be, float *logits, const float *x, int n);
/* Its backward: dx[n, dim] = dlogits W_head (written), and on float32 rows
 * dw += dlogits^T x (dw NULL: frozen); a frozen base's packed head gives dx
 * on its blocks (matmul_backward_frozen) and trains nothing. */
void model_head_backward(const model *m, const backend *be, float *dx, float *dw, const float *dlogits,
                         const float *x, int n);

/* model_to_backend's copy (model.h): per layer views, the globals, and
 * every allocation made, for model_dev_free. */
struct model_dev {
    const backend *be;
    layer_params *layers; /* [n_layers] */
    float *tok_embd;      /* fp32 [vocab, dim]: gather_rows reads it; a frozen base's packed: gather_rows_packed */
    float *out_norm;      /* fp32 [dim] */
    float *lm_head;       /* the backend's weight format [vocab, dim]; a frozen base's packed (tied: tok_embd) */
    void **owned;
    size_t n_owned;
};

/* x_out[R, dim] from x_in[R, dim] (x_out may be x_in). */
void layer_forward(const layer_pass *p, const layer_acts *a, const float *x_in, float *x_out);
/* After layer_forward of the same rows with activations kept in a: reads
 * s->dx = d(loss)/d(x_out), leaves d(loss)/d(x_in) there and adds weight
 * gradients (p->grad, p->lora.grad_a/b). h must hold swiglu(gate, up)
 * or be a scratch buffer it may overwrite (it is recomputed). */
void layer_backward(const layer_pass *p, const layer_acts *a, const float *x_in, const layer_grad_scratch *s);

/* The kv_view of one layer of a cache, for rows of sequences seq[R]:
 * row_kv[R] is filled here (kv_cache_row_offsets) and kept by the caller. */
void kv_cache_row_offsets(const kv_cache *c, const int *seq, int n, size_t *row_kv);
kv_view kv_cache_view(const kv_cache *c, int layer, const size_t *row_kv);

#endif
