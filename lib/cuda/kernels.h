/* Launchers of the kernels in kernels.cu and attention.cu, with C linkage.
 * Pointers are device memory; each returns the launch's status. Semantics
 * are those of the CPU op of the same name (lib/ops/ops.h). */
#ifndef GRPO_CUDA_KERNELS_H
#define GRPO_CUDA_KERNELS_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out[i] = bf16(x[i]) (round to nearest even). */
cudaError_t cu_to_bf16(uint16_t *out, const float *x, size_t n, cudaStream_t st);
/* out[r, j] += bias[j] for n rows of d. */
cudaError_t cu_bias_add(float *out, const float *bias, int n, int d, cudaStream_t st);
cudaError_t cu_rmsnorm(float *out, float *rstd, const float *x, const float *w, int n, int d, float eps,
                       cudaStream_t st);
cudaError_t cu_rope(float *x, const float *cos_t, const float *sin_t, int n, int n_heads, int head_dim, float sign,
                    cudaStream_t st);
cudaError_t cu_swiglu(float *out, const float *gate, const float *up, size_t n, cudaStream_t st);
cudaError_t cu_add(float *x, const float *y, size_t n, cudaStream_t st);
cudaError_t cu_gather(float *dst, const float *src, const int32_t *idx, int n, int d, cudaStream_t st);
/* Row r's k, v go to position pos[r] of its sequence: kc + row_kv[r] + pos[r] * kv_dim
 * (elements: fp32, or bf16 rounded to nearest even when bf16). */
cudaError_t cu_kv_write(void *kc, void *vc, const float *k, const float *v, const size_t *row_kv, const int *pos,
                        int n, int kv_dim, int bf16, cudaStream_t st);
/* Causal GQA attention, ops.h's attention_forward over a kv_view: row r
 * attends to positions 0..pos[r] at kc/vc + row_kv[r] (the last window of
 * them when window > 0), with a sink logit per head when sinks (device,
 * [n_heads]) is not NULL, scores scaled by scale (0: 1/sqrt(head_dim)). Online softmax, no
 * score matrix in memory. The cache holds fp32, or bf16 (bf16 != 0) widened
 * exactly as it is read. Rows come as n_tiles tiles (tiles[2b] the first
 * row, tiles[2b+1] how many, at most CU_ATT_TILE: consecutive rows of one
 * sequence at consecutive positions, head_dim <= CU_ATT_TILE_HEAD_DIM) and
 * n_rows single rows (rows[i]; NULL: rows 0..n_rows-1). The same
 * arithmetic either way. lse may be NULL. */
enum { CU_ATT_TILE = 8, CU_ATT_TILE_HEAD_DIM = 128 };
cudaError_t cu_attention(float *out, float *lse, const float *q, const void *kc, const void *vc, int bf16,
                         const size_t *row_kv, const int *pos, const int *tiles, int n_tiles, const int *rows,
                         int n_rows, int n_heads, int n_kv_heads, int head_dim, int kv_dim, int window,
                         const float *sinks, float scale, cudaStream_t st);
/* ops.h's attention_backward over a batch's own K/V (dk, dv written, not
 * added to): row r belongs to sequence row_seq[r], whose rows start at
 * start[row_seq[r]]; di is scratch of n_rows * n_heads floats; window and
 * scale as cu_attention's (a sink needs nothing here: lse holds it). */
cudaError_t cu_attention_backward(float *dq, float *dk, float *dv, float *di, const float *dout, const float *out,
                                  const float *lse, const float *q, const float *k, const float *v, const int *row_seq,
                                  const int *start, int n_rows, int n_heads, int n_kv_heads, int head_dim,
                                  int window, float scale, cudaStream_t st);
/* ops.h's head_logsoftmax: z[n, V] scaled by inv_t in place; logp, entropy,
 * lse_out each optional; tok on the device. */
cudaError_t cu_head_logsoftmax(float *z, int n, int V, float inv_t, const int32_t *tok, float *logp, float *entropy,
                               float *lse_out, cudaStream_t st);
/* Training (train_kernels.cu). ops.h's rmsnorm_backward (dw NULL: none;
 * else added to), swiglu_backward, head_logsoftmax_backward (tok on the
 * device; dentropy and entropy NULL or both given), scatter_add_rows (idx
 * on the device), adamw_update (consts: adamw_consts' fields in their
 * order: keep, beta1, one_minus_beta1, beta2, one_minus_beta2, neg_step,
 * bias2_sqrt, eps) and sgd_update. */
cudaError_t cu_rmsnorm_backward(float *dx, float *dw, const float *dy, const float *x, const float *w,
                                const float *rstd, int n, int d, cudaStream_t st);
cudaError_t cu_swiglu_backward(float *dg, float *du, const float *dh, const float *g, const float *u, size_t n,
                               cudaStream_t st);
cudaError_t cu_head_logsoftmax_backward(float *z, int n, int V, float inv_t, const int32_t *tok, const float *dlogp,
                                        const float *lse, const float *dentropy, const float *entropy,
                                        cudaStream_t st);
cudaError_t cu_scatter_add(float *dst, const float *src, const int32_t *idx, int n, int d, cudaStream_t st);
cudaError_t cu_adamw(const float consts[8], float *param, const float *grad, float *m, float *v, size_t n,
                     cudaStream_t st);
/* db[o] += (float)(sum over rows r in order of dout[r, o], in double). */
cudaError_t cu_colsum_add(float *db, const float *dout, int n, int d, cudaStream_t st);
cudaError_t cu_sgd(float keep, float neg_lr, float *param, const float *grad, size_t n, cudaStream_t st);
/* The sum of x[i]^2 in double into work[CU_SUM_BLOCKS], deterministic (a
 * fixed grid of CU_SUM_BLOCKS blocks whatever the device and n, partials
 * in work[0, CU_SUM_BLOCKS) summed by one block in a fixed order); work
 * holds CU_SUM_BLOCKS + 1 doubles. n == 0 writes nothing. */
enum { CU_SUM_BLOCKS = 1024 };
cudaError_t cu_sum_squares(double *work, const float *x, size_t n, cudaStream_t st);
/* x[i] = x[i] * f, one float rounding (optim.c's grad_scale). */
cudaError_t cu_scale(float *x, float f, size_t n, cudaStream_t st);
/* Philox4x32-10 on the device (lib/util/rng.h): out[4 * i ..] for
 * (counter[4 * i ..], key[2 * i ..]), n blocks. For tests of the sampler's
 * random numbers. */
cudaError_t cu_philox(uint32_t *out, const uint32_t *counter, const uint32_t *key, int n, cudaStream_t st);
/* ops.h's dropout_rows with its threshold and scale computed by the host as
 * rows.c computes them; row_key and row_pos on the device. */
cudaError_t cu_dropout_rows(float *x, int n_rows, int n, const uint64_t *row_key, const int *row_pos,
                            const uint32_t stream_key[2], uint32_t threshold, float keep_scale, cudaStream_t st);
/* Sampling without truncation (sample.h's sample_token with top-k, top-p,
 * min-p off): per row j, z = logits / T, lse, the token whose cumulative
 * probability in id order first exceeds the uniform draw
 * u = rng_uniform of the stream (key[2j..], next block block[j], words used
 * used[j]), and its log-probability. Greedy (inv_t <= 0): the first
 * argmax and its log-probability at T = 1, no draw. */
cudaError_t cu_sample_plain(int32_t *tok_out, float *logp_out, const float *logits, int n, int V, float inv_t,
                            const uint32_t *key, const uint64_t *block, const int *used, cudaStream_t st);

/* The mixture of experts (moe_kernels.cu), moe.c's ops with every array on the
 * device: cu_moe_route is moe_route_forward (replay NULL) or
 * moe_route_replay_forward (probs may be logits); cu_moe_group is
 * moe_group, counts [n_experts] scratch; cu_moe_combine and
 * cu_moe_combine_backward (dw NULL: none) and cu_moe_route_backward as the
 * CPU's. */
cudaError_t cu_moe_route(float *probs, int32_t *sel, float *w, const float *logits, const int32_t *replay, int n,
                         int n_experts, int k, int norm, cudaStream_t st);
cudaError_t cu_moe_group(int32_t *row_of, int32_t *slot_of, int *offsets, int *counts, const int32_t *sel, int n,
                         int k, int n_experts, cudaStream_t st);
cudaError_t cu_moe_combine(float *out, const float *ye, const float *w, const int32_t *slot, int n, int k, int d,
                           cudaStream_t st);
cudaError_t cu_moe_combine_backward(float *dye, float *dw, const float *dout, const float *ye, const float *w,
                                    const int32_t *slot, int n, int k, int d, cudaStream_t st);
cudaError_t cu_moe_route_backward(float *dlogits, const float *dw, const float *probs, const int32_t *sel,
                                  const float *w, int n, int n_experts, int k, int norm, cudaStream_t st);
/* gpt-oss's clamped SwiGLU and its backward (swiglu.c's; dg may be dh). */
cudaError_t cu_swiglu_clamped(float *out, const float *gate, const float *up, size_t n, float alpha, float limit,
                              cudaStream_t st);
cudaError_t cu_swiglu_clamped_backward(float *dg, float *du, const float *dh, const float *g, const float *u, size_t n,
                                       float alpha, float limit, cudaStream_t st);
/* W [n, k] in bf16 (exactly: every MXFP4 value is a bf16) from src, n rows
 * of k in packed_mxfp4.h's panel layout (mx4w_bytes(n, k) bytes); k % 32 == 0. */
cudaError_t cu_mx4w_to_bf16(uint16_t *dst, const void *src, int n, int k, cudaStream_t st);
/* A frozen base's packed layouts (lib/ops: packed_bf16.h, packed_q8.h,
 * packed_q4k.h, packed_mxfp4.h). */
typedef enum { CU_PACKED_BF16, CU_PACKED_Q8, CU_PACKED_Q4K, CU_PACKED_MXFP4 } cu_packed_fmt;
/* The products over W [out_dim, in_dim] packed in fmt (frozen_gemm.cu),
 * read as its blocks lie: each weight the float32 value the CPU's unpack
 * gives rounded to bf16 (nearest even: exact for bf16 and MXFP4, q8's and
 * q4k's values rounded), each activation rounded to bf16, float32 sums in
 * one order per output whatever n. cu_frozen_forward: out [n, out_dim] =
 * x W^T (+ bias[out_dim]; NULL: none); cu_frozen_backward: din [n, in_dim]
 * = dout W, or added to din when accumulate. in_dim % 32 == 0 but for
 * bf16 (else cudaErrorInvalidValue). */
cudaError_t cu_frozen_forward(float *out, const float *x, const void *w, cu_packed_fmt fmt, const float *bias, int n,
                              int in_dim, int out_dim, cudaStream_t st);
cudaError_t cu_frozen_backward(float *din, const float *dout, const void *w, cu_packed_fmt fmt, int n, int in_dim,
                               int out_dim, int accumulate, cudaStream_t st);
/* dst [n, k] = rows idx[0 .. n) (device) of W [*, k] packed in fmt (bf16,
 * q8 or q4k; MXFP4 is cudaErrorInvalidValue, as the CPU has no such rows),
 * dequantized to float32 (frozen_kernels.cu): gather_rows_packed's
 * values, bit for bit. */
cudaError_t cu_packed_rows(float *dst, const void *src, cu_packed_fmt fmt, const int32_t *idx, int n, int k,
                           cudaStream_t st);
/* attention_sinks_backward (attention.cu): dsinks[h] -= sum over rows in
 * order of exp(sinks[h] - lse) (out . dout), in double, a block per head. */
cudaError_t cu_attention_sinks_backward(float *dsinks, const float *out, const float *dout, const float *lse,
                                        const float *sinks, int n, int n_heads, int head_dim, cudaStream_t st);

#ifdef __cplusplus
}
#endif

#endif
