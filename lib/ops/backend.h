/* The backend seam: every operation the transformer layer, the LM head and
 * the optimizer's update run, as one table of functions. The layer
 * (lib/model/layer.c), the inference forward (forward.c), the training
 * driver (lib/train/trainer.c) and the optimizer step (optim.c) call ops only
 * through a backend, so a GPU backend implements this table (and the memory
 * it works on) and nothing else: the layer's wiring is written once. What
 * still runs on the host beside it: the loss over per-token log-probs
 * (lib/train/loss.c), the gradient norm and clipping (optim.c), sampling.
 *
 * Pointers passed to a backend's ops are in that backend's memory (host
 * memory for the CPU). Index arrays (positions, tokens, row offsets) are
 * host arrays; a device backend copies them as it needs.
 * The semantics of each entry are those of the CPU function of the same
 * name in ops.h.
 *
 * A device backend (lib/cuda) also fills the memory entries at the end: the
 * model's weights, the KV cache and the scratch are allocated and filled
 * through them, and its weight matrices are in its own format (bf16 on
 * CUDA): matmul_forward's w is then a handle weight_upload returned, never
 * host fp32 rows. RoPE's inv_freq stays a host array like the index arrays.
 * Ops return nothing; a device backend records its first failure and
 * reports it through sync. */
#ifndef GRPO_BACKEND_H
#define GRPO_BACKEND_H

#include <string.h>

#include "../util/err.h"
#include "ops.h"

typedef struct backend {
    const char *name;

    void (*rmsnorm_forward)(float *out, float *rstd, const float *x, const float *w, int n, int d, float eps);
    void (*rmsnorm_backward)(float *dx, float *dw, const float *dy, const float *x, const float *w,
                             const float *rstd, int n, int d);

    void (*gemm)(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                 float beta, float *C, int ldc);
    void (*matmul_forward)(float *out, const float *in, const float *w, const float *bias, int n, int in_dim,
                           int out_dim);
    /* NULL in a backend whose weights are never packed; on cuda MXFP4 only
     * (w_packed in its memory, packed_mxfp4.h's layout) */
    void (*matmul_forward_packed)(float *out, const float *in, const void *w_packed, weight_format fmt,
                                  const float *bias, int n, int in_dim, int out_dim);
    void (*matmul_backward)(float *din, float *dw, float *db, const float *dout, const float *in, const float *w,
                            int n, int in_dim, int out_dim, bool accumulate);
    /* a frozen packed base under LoRA (w_packed in the backend's memory:
     * the host's packed bytes as they are; NULL in a backend that trains on
     * no such base, which model_to_backend refuses it). cuda's: bf16
     * operands with float32 sums, lib/cuda/README */
    void (*matmul_forward_frozen)(float *out, const float *in, const void *w_packed, weight_format fmt,
                                  const float *bias, int n, int in_dim, int out_dim);
    void (*matmul_backward_frozen)(float *din, const float *dout, const void *w_packed, weight_format fmt, int n,
                                   int in_dim, int out_dim, bool accumulate);
    /* rows of such a base's packed embeddings, dequantized (NULL likewise;
     * cuda's: the CPU's values, bit for bit) */
    void (*gather_rows_packed)(float *dst, const void *w_packed, weight_format fmt, const int32_t *idx, int n, int d);

    void (*rope_cos_sin)(float *cos_out, float *sin_out, const float *inv_freq, int half, const int *pos, int n);
    void (*rope_forward)(float *x, const float *cos_t, const float *sin_t, int n, int n_heads, int head_dim);
    void (*rope_backward)(float *dx, const float *cos_t, const float *sin_t, int n, int n_heads, int head_dim);

    void (*swiglu_forward)(float *out, const float *gate, const float *up, size_t n);
    void (*swiglu_backward)(float *dg, float *du, const float *dh, const float *g, const float *u, size_t n);
    /* NULL in a backend without gpt-oss's clamped SwiGLU */
    void (*swiglu_clamped_forward)(float *out, const float *gate, const float *up, size_t n, float alpha, float limit);
    void (*swiglu_clamped_backward)(float *dg, float *du, const float *dh, const float *g, const float *u, size_t n,
                                    float alpha, float limit);

    void (*kv_write)(const kv_view *kv, const float *k, const float *v, const int *pos, int n);
    void (*attention_forward)(float *out, float *lse, const float *q, const kv_view *kv, const int *pos, int n,
                              attn_shape sh, attn_workspace *ws);
    void (*attention_backward)(float *dq, float *dk, float *dv, const float *dout, const float *out,
                               const float *lse, const float *q, const float *k, const float *v, int n_seqs,
                               const int *start, attn_shape sh, attn_workspace *ws);
    /* NULL in a backend without sinks or windows (attn_shape's), which refuses such a model */
    void (*attention_sinks_backward)(float *dsinks, const float *out, const float *dout, const float *lse,
                                     const float *sinks, int n, int n_heads, int hd);

    void (*head_logsoftmax)(float *z, int n, int V, float inv_t, const int32_t *tok, float *logp, float *entropy,
                            float *lse_out);
    void (*head_logsoftmax_backward)(float *z, int n, int V, float inv_t, const int32_t *tok, const float *dlogp,
                                     const float *lse, const float *dentropy, const float *entropy);

    void (*add_inplace)(float *x, const float *y, size_t n);
    void (*gather_rows)(float *dst, const float *src, const int32_t *idx, int n, int d);
    void (*scatter_add_rows)(float *dst, const float *src, const int32_t *idx, int n, int d);
    void (*dropout_rows)(float *x, int n_rows, int n, const uint64_t *row_key, const int *row_pos,
                         const uint32_t stream_key[2], double p);

    /* Mixture of experts (NULL in a backend without them, which refuses
     * such a model: model_to_backend). sel is in the backend's memory; slot
     * is a host array like the other index arrays. */
    void (*moe_route_forward)(float *probs, int32_t *sel, float *w, const float *logits, int n, int n_experts, int k,
                              bool norm);
    /* replay is a host array like the other index arrays */
    void (*moe_route_replay_forward)(float *probs, int32_t *sel, float *w, const float *logits, const int32_t *replay,
                                     int n, int n_experts, int k, bool norm);
    void (*moe_route_backward)(float *dlogits, const float *dw, const float *probs, const int32_t *sel,
                               const float *w, int n, int n_experts, int k, bool norm);
    /* mult a host array; NULL in a backend without the router's
     * load-balancing loss (grpo-update refuses --router-aux-coef there) */
    double (*moe_balance_backward)(float *dlogits, const float *probs, const int32_t *sel, const float *mult, int n,
                                   int n_experts, int k, double scale);
    void (*moe_combine_forward)(float *out, const float *ye, const float *w, const int32_t *slot, int n, int k, int d);
    void (*moe_combine_backward)(float *dye, float *dw, const float *dout, const float *ye, const float *w,
                                 const int32_t *slot, int n, int k, int d);
    /* sel in the backend's memory; row_of, slot_of and offsets host arrays
     * (the layer loops over the experts' row counts) */
    void (*moe_group)(int32_t *row_of, int32_t *slot_of, int *offsets, const int32_t *sel, int n, int k,
                      int n_experts);

    void (*adamw_update)(const adamw_consts *k, float *param, const float *grad, float *m, float *v, size_t n);
    void (*sgd_update)(float keep, float neg_lr, float *param, const float *grad, size_t n);

    /* Training on a device (NULL on the CPU, whose gradients lib/train/optim.c
     * reads in host memory): the sum of x[i]^2 over n floats in double (the
     * gradient norm's square; it waits for the ops before it, and a failed
     * device returns NaN, sync says why); x *= f as float multiplies
     * (clipping, as optim.c's grad_scale); and a matrix weight_upload made
     * refreshed from fp32 rows [rows, cols] in the backend's own memory
     * (its weights after an optimizer step). */
    double (*sum_squares)(const float *x, size_t n);
    void (*scale_inplace)(float *x, float f, size_t n);
    void (*weight_refresh)(float *w, const float *src, size_t rows, size_t cols);

    /* Memory: NULL in the CPU backend, whose memory is the host's. */
    int (*mem_alloc)(void **p, size_t bytes, gerr *e);
    void (*mem_free)(void *p);
    int (*mem_upload)(void *dst, const void *src, size_t bytes, gerr *e);
    int (*mem_download)(void *dst, const void *src, size_t bytes, gerr *e);
    void (*mem_copy)(void *dst, const void *src, size_t bytes); /* ordered with the ops */
    void (*mem_zero)(void *p, size_t bytes);                    /* ordered with the ops */
    /* A weight matrix [rows, cols] from host fp32 rows into the backend's
     * format; *dst is what matmul_forward then takes as w (free: mem_free). */
    int (*weight_upload)(float **dst, const float *src, size_t rows, size_t cols, gerr *e);
    /* Rows row0 .. of a matrix weight_upload made with cols columns, as
     * matmul_forward and matmul_backward then take it as w: an expert's
     * matrix in its layer's stacked tensor (backend_weight_rows). */
    const float *(*weight_rows)(const float *w, size_t row0, size_t cols);
    /* Waits for the ops issued so far; the first failure among them, if any. */
    int (*sync)(gerr *e);
} backend;

/* bytes zeroed or copied in be's memory, ordered with its ops: memset and
 * memcpy on the CPU, whose memory entries are NULL. */
static inline void backend_zero(const backend *be, void *p, size_t bytes) {
    if (be->mem_zero)
        be->mem_zero(p, bytes);
    else
        memset(p, 0, bytes);
}
static inline void backend_copy(const backend *be, void *dst, const void *src, size_t bytes) {
    if (be->mem_copy)
        be->mem_copy(dst, src, bytes);
    else
        memcpy(dst, src, bytes);
}

/* Rows row0 .. of weight matrix w of cols columns in be's format: its
 * weight_rows, or float32 rows (the CPU's, whose entry is NULL). */
static inline const float *backend_weight_rows(const backend *be, const float *w, size_t row0, size_t cols) {
    return be->weight_rows ? be->weight_rows(w, row0, cols) : w + row0 * cols;
}

/* The CPU backend: ops.h's functions (OpenBLAS, OpenMP, the packed kernel). */
const backend *backend_cpu(void);
/* The same with gemm, matmul_forward and matmul_backward on bf16 operands
 * with float32 sums (gemm_bf16.h; training with --compute bf16); every other
 * op, and every buffer, float32 as in backend_cpu. NULL when the CPU lacks
 * AVX-512 BF16. */
const backend *backend_cpu_bf16(void);

#endif
