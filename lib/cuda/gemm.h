/* Matrix products on the device (gemm.c). Internal to lib/cuda. */
#ifndef GRPO_CUDA_GEMM_H
#define GRPO_CUDA_GEMM_H

#include <stdbool.h>
#include <stdint.h>

#include "ctx.h"

/* out[n, out_dim] = bf16(in)[n, in_dim] w[out_dim, in_dim]^T (+ bias), fp32
 * accumulation and output; w is bf16 on the device. */
void cuda_matmul_bf16(float *out, const float *in, const uint16_t *w, const float *bias, int n, int in_dim,
                      int out_dim);
/* ops.h's matmul_backward with w bf16 on the device (as the forward reads
 * it): din (= or += with accumulate) bf16(dout) w and dw += bf16(dout)^T
 * bf16(in), fp32 accumulation; db += dout's column sums, in double in row
 * order as the CPU's (its bits). Any of din, dw, db may be NULL. */
void cuda_matmul_backward_bf16(float *din, float *dw, float *db, const float *dout, const float *in,
                               const uint16_t *w, int n, int in_dim, int out_dim, bool accumulate);
/* ops.h's gemm in fp32 on the device (row-major, op = transpose when t*). */
void cuda_gemm_f32(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                   int ldb, float beta, float *C, int ldc);

#endif
