/* bf16 weights for the inference matmul y = x W^T (grpo-rollout --weights bf16).
 *
 * W [N, K] (row-major, HF [out, in]) is rounded to bf16 (round to nearest
 * even; subnormals flushed to zero, as vdpbf16ps reads them) and laid out in
 * panels of BF16W_NR columns: panel p holds columns NR*p .. NR*p+NR-1 as
 * [ceil(K/2)][NR][2] bf16, i.e. for each pair of consecutive k the NR
 * columns' two values side by side (zero past N and past K): the operand
 * order of vdpbf16ps, two 64-byte loads per pair of k.
 *
 * Numerics (bf16w_matmul): x is rounded to bf16 too (nearest even,
 * subnormals to zero); each output is, over pairs of k in order,
 * acc += x[2i+1]*w[2i+1]; acc += x[2i]*w[2i] in float32 (each product of two
 * bf16 is exact in float32, so each step rounds once), then out = acc (+
 * bias). Results therefore do not depend on m, on the other rows or on the
 * thread count, and the AVX512-BF16 kernel, the AVX-512F and AVX2
 * emulations and the portable fallback give the same bits (except where a
 * sum passes through the float32 subnormal range, which vdpbf16ps flushes).
 *
 * Rounding is lib/util/half.h's f32_to_bf16 with subnormals flushed.
 *
 * Measured on AMD Zen 4 (tests/unit/test_packed_bf16.c checks the first two
 * on every CPU that has the instructions): vdpbf16ps adds the odd product,
 * then the even one, each rounded to nearest even (not the pair summed
 * first, not one rounding); vcvtne2ps2bf16 rounds as f32_to_bf16 with
 * float32 subnormals flushed to a signed zero, NaN included (truncated, bit
 * 6 set); vdpbf16ps also flushes a subnormal accumulator or intermediate sum
 * to zero, where the emulations keep it. One vdpbf16ps per cycle, 6 cycles'
 * latency: twice the float32 fma's peak, which the kernel reaches from m = 3
 * (bench/bench_bf16.c).
 *
 * Callers guarantee k <= BF16W_MAX_K (asserted): rows of x are rounded into a
 * fixed per-thread stack scratch, so bf16w_matmul allocates nothing. */
#ifndef GRPO_OPS_PACKED_BF16_H
#define GRPO_OPS_PACKED_BF16_H

#include <stdbool.h>
#include <stddef.h>

#include "packed_isa.h"

enum {
    BF16W_NR = 32,      /* columns per panel */
    BF16W_MAX_K = 65536 /* the scratch holds one row */
};

/* The fastest kernel this CPU runs: "avx512bf16", "avx512f" or "avx2" (bf16
 * widened to float32, same bits) or "scalar". */
const char *bf16w_kernel(void);
/* The CPU has AVX512-BF16 (vdpbf16ps): bf16 pays off here. */
bool bf16w_native(void);

/* Bytes of W [n, k] in this layout (n rounded up to whole panels, k to even). */
size_t bf16w_bytes(int n, int k);

/* Rounds W [n, k] into dst[bf16w_bytes(n, k)]; dst must not overlap w. */
void bf16w_pack(void *dst, const float *w, int n, int k);

/* Back to W [n, k] float32 (the bf16 values, exactly). */
void bf16w_unpack(float *dst, const void *src, int n, int k);
/* Row `row` of it alone into dst[k]: the same values, bit for bit (a
 * frozen base's embedding lookup). */
void bf16w_unpack_row(float *dst, const void *src, int row, int k);

/* out[m, n] = in[m, k] @ W^T (+ bias[n]) as above; OpenMP over panels. */
void bf16w_matmul(float *out, const float *in, const void *w, const float *bias, int m, int k, int n);

/* For training on a frozen bf16 base (packed_tile.h: one float32 fused
 * multiply-add chain per output on the bf16 weights, bf16w_unpack's values;
 * the same bits on every path, thread count and batch):
 *
 * out[m, n] = in[m, k] @ W^T (+ bias[n]) with in float32, not rounded to
 * bf16 (bf16w_matmul rounds it): the bits of packed_matmul on the unpacked W. */
void bf16w_matmul_f32(float *out, const float *in, const void *w, const float *bias, int m, int k, int n);

/* dX [m, k] = dY [m, n] W (+ dX when accumulate), dY and dX float32: the
 * input gradient of the product above. */
void bf16w_matmul_t(float *dx, const float *dy, const void *w, int m, int k, int n, bool accumulate);

/* The same two on the given path: false (nothing written) when this CPU lacks it. */
bool bf16w_matmul_f32_isa(packed_isa isa, float *out, const float *in, const void *w, const float *bias, int m, int k,
                          int n);
bool bf16w_matmul_t_isa(packed_isa isa, float *dx, const float *dy, const void *w, int m, int k, int n,
                        bool accumulate);

/* The portable fallback, callable everywhere so that tests compare it with
 * the SIMD kernels bit for bit. */
void bf16w_matmul_scalar(float *out, const float *in, const void *w, const float *bias, int m, int k, int n);

#endif
