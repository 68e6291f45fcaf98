/* A general matrix product with bf16 operands and float32 accumulation, for
 * training (grpo-update --compute bf16): the CPU's gemm (ops.h)
 * at about twice OpenBLAS's sgemm rate on AVX-512 BF16 (vdpbf16ps).
 *
 * C[M, N] = alpha op(A) op(B) + beta C, row-major, op = transpose when t*,
 * beta 0: C is not read. op(A) and op(B) are rounded to bf16 (nearest even;
 * subnormals read as zero, as vdpbf16ps reads them) while they are copied
 * into the kernel's layout, each call: the callers' matrices stay float32
 * (master weights, activations, gradients).
 *
 * Numerics: over k in blocks of GEMM_BF16_KC (fixed), each output element
 * sums its block in float32 pair by pair in order (acc += a[2i+1] b[2i+1];
 * acc += a[2i] b[2i], each product of two bf16 exact in float32), then
 * C = beta C + alpha acc for the first block and C += alpha acc for each
 * later one. The order does not depend on the thread count, on the tiling or
 * on the other rows and columns: the same inputs give the same bits with any
 * number of OpenMP threads. */
#ifndef GRPO_OPS_GEMM_BF16_H
#define GRPO_OPS_GEMM_BF16_H

#include <stdbool.h>

enum { GEMM_BF16_KC = 256 /* k per block: a panel's block stays in L1 */ };

/* The CPU runs gemm_bf16 (AVX-512F and AVX-512 BF16). */
bool gemm_bf16_supported(void);

/* As above; only when gemm_bf16_supported(). OpenMP-parallel over tiles of
 * C; allocates its bf16 copies (dies, exit 70, when memory is short). */
void gemm_bf16(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
               float beta, float *C, int ldc);

#endif
