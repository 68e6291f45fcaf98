/* The frozen-base entries of backend_cuda() (frozen.c): LoRA over a base
 * packed as bf16, q8, q4k or MXFP4 (lib/model/pack.c's frozen plan), whose
 * blocks model_to_backend put on the device as the host holds them.
 * backend.h's semantics, with the device's numerics: the products' operands
 * bf16, their sums float32 (lib/cuda/README says which values are exact).
 * Internal to lib/cuda. */
#ifndef GRPO_CUDA_FROZEN_H
#define GRPO_CUDA_FROZEN_H

#include "../ops/backend.h"

/* out = bf16(in) bf16(W)^T (+ bias): W [out_dim, in_dim] packed in fmt,
 * its blocks decoded to bf16 tile by tile in shared memory by
 * frozen_gemm.cu's kernel (no copy of the whole matrix). */
void cuda_matmul_forward_frozen(float *out, const float *in, const void *w_packed, weight_format fmt,
                                const float *bias, int n, int in_dim, int out_dim);
/* din (= or += with accumulate) bf16(dout) bf16(W), the same tiles read
 * the other way. */
void cuda_matmul_backward_frozen(float *din, const float *dout, const void *w_packed, weight_format fmt, int n,
                                 int in_dim, int out_dim, bool accumulate);
/* Rows idx (host) of packed embeddings [*, d] in float32: the CPU's
 * gather_rows_packed bit for bit (bf16, q8, q4k; another format fails). */
void cuda_gather_rows_packed(float *dst, const void *w_packed, weight_format fmt, const int32_t *idx, int n, int d);

#endif
