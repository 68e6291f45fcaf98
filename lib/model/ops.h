/* The layer operations of the forward pass, one function each, written so a
 * backward can sit beside each later (llm.c style: every op reads its inputs
 * and writes a separate output; what a backward needs, like RMSNorm's 1/rms,
 * can be kept through an optional pointer).
 *
 * Semantics are Hugging Face's (modeling_llama / qwen2 / qwen3) in fp32.
 * Matrices are row-major; a weight W is [out, in] as in HF, so y = x W^T. */
#ifndef GRPO_MODEL_OPS_H
#define GRPO_MODEL_OPS_H

#include <stddef.h>

#include "config.h"

/* out[n, d] = x * rsqrt(mean(x^2) + eps) * w, row by row. rstd[n] (optional)
 * receives each row's 1/rms for the backward. out may alias x. */
void rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int n, int d, float eps);

/* out[n, out_dim] = in[n, in_dim] @ w[out_dim, in_dim]^T (+ bias[out_dim]):
 * sgemm over all rows at once, its output columns split across the OpenMP
 * threads. Call blas_setup_threads() first (model_scratch_init does). */
void matmul_forward(float *out, const float *in, const float *w, const float *bias, int n, int in_dim,
                    int out_dim);

/* RoPE inverse frequencies inv_freq[head_dim/2]: 1/theta^(2i/head_dim),
 * computed in double and rounded to float (HF's float32 inv_freq), then
 * llama3 scaling as HF's _compute_llama3_parameters when c asks for it. */
void rope_inv_freq(float *inv_freq, const model_config *c);

/* cos/sin[n, half] for positions pos[n]: the angle is the float32 product
 * pos * inv_freq (as HF computes it), its cos and sin rounded to float. */
void rope_cos_sin(float *cos_out, float *sin_out, const float *inv_freq, int half, const int *pos, int n);

/* Rotate-half RoPE in place over x[n, n_heads * head_dim], row r using
 * cos/sin row r: for i < h = head_dim/2,
 *   x'[i] = x[i] cos - x[i+h] sin,   x'[i+h] = x[i+h] cos + x[i] sin. */
void rope_forward(float *x, const float *cos_t, const float *sin_t, int n, int n_heads, int head_dim);

/* Softmax of x[n] in place, fp32 with a max shift. */
void softmax_inplace(float *x, int n);

/* out[i] = silu(gate[i]) * up[i]; out may alias gate. */
void swiglu_forward(float *out, const float *gate, const float *up, size_t n);

/* The key/value head a query head reads under grouped-query attention (HF's
 * repeat_kv: query head h uses kv head h / (n_heads / n_kv_heads)). */
static inline int gqa_kv_head(int h, int n_heads, int n_kv_heads) {
    return h / (n_heads / n_kv_heads);
}

/* GGUF's llama-arch Q/K row order (llama.cpp's convert_hf_to_gguf.py
 * permute: rows viewed as [n_head, 2, head_dim/2] are swapped to
 * [n_head, head_dim/2, 2], so each rotated pair sits side by side).
 * qk_permute maps HF rows to GGUF rows, qk_unpermute back; each row has
 * n_cols values (1 for a bias). dst and src must not overlap. */
void qk_permute(float *dst, const float *src, int n_head, int head_dim, size_t n_cols);
void qk_unpermute(float *dst, const float *src, int n_head, int head_dim, size_t n_cols);

#endif
