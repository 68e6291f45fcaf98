/* 8-bit weights for the inference matmul y = x W^T (grpo-rollout --weights q8).
 *
 * Quantization is GGUF Q8_0's: each block of 32 consecutive values along K
 * of one row of W has d = max|w| / 127 rounded to f16 and q = round(w / d)
 * (lib/formats/gguf_quant.c's quantizer, so a GGUF's Q8_0 blocks are taken
 * over verbatim by q8w_pack_q8_0). The dequantized weight is q * d.
 *
 * Layout: W [N, K] becomes ceil(N/16) panels of 16 columns (zero past N);
 * a panel is its K/32 blocks in pairs, each pair a 64-byte line of the two
 * blocks' 16 columns' d (f16 bits, little-endian: block 2i's 16, then block
 * 2i+1's) followed by each block's 512 quants as [8 groups][16 columns][4
 * consecutive k] (Q8W_QUANT_BYTES); an odd last block pads its line of
 * scales with 32 zero bytes. One 64-byte group is 16 columns x 4 k: one zmm
 * for vpdpbusd (4 k per 32-bit lane), two ymm for the AVX2 kernels; the
 * scales sit beside the quants they scale, so one panel streams front to
 * back (scales all at a panel's front measured 2x slower from memory at m =
 * 1: a second stream), and every group stays line-aligned. 544 bytes per
 * block, 34 per 32 weights: Q8_0's own size (float32 scales would take 576).
 *
 * Numerics (q8w_matmul): int8 weights x int8 activations. Each row of x
 * is quantized per 32-block like the weights but in float32 throughout
 * (dx = max|x| / 127, qx = round(x * (1/dx)), half away from zero); each
 * block's dot sum(qx * q) is exact in int32; then, over blocks in order,
 * acc = fma((float)dot, dx * d, acc) in float32, and out = acc (+ bias).
 * The error against x W^T is the two quantizations' (each value off by at
 * most half its block's step); the arithmetic after them is fixed, so
 * results are the same whatever m, the other rows or the thread count, and
 * the same bits in every kernel: AVX-512 VNNI, AVX2 and the portable
 * fallback.
 *
 * Why int8 x int8: on an AVX2 machine (Zen 1, no VNNI) it measured 1.4-2.7x
 * faster than widening the weights to float32 at m = 1 and 1.2-1.6x at
 * m = 16..128 on 1 thread (bench/bench_q8.c prints both); the widening
 * kernel, whose numerics are an exact float32 matmul against q8w_unpack's
 * weights, stays as q8w_matmul_widen for that comparison.
 *
 * Why VNNI where the CPU has it (avx512_vnni with avx512bw/vl): vpdpbusd
 * does vpmaddubsw + vpmaddwd + vpaddd on 64 bytes in one instruction. On
 * AMD Zen 4, 1 thread (bench/README.md): 2.5-3x the AVX2
 * kernel from m = 4 on (~300-340 GFLOP/s at SmolLM2's in-cache shapes, ~3/4
 * of the measured vpdpbusd peak of 445: the per-block convert, scale product
 * and fma cost a slot each beside the 8 dpbusd), 1.4-1.6x at m = 1 from
 * cache, and level with it at m = 1 from memory, where both stream the
 * weights at the memory's speed (packed_q8_vnni.c says how it tiles).
 *
 * Callers guarantee k % 32 == 0 and k <= Q8W_MAX_K (asserted): each thread
 * quantizes rows of x into a fixed stack scratch, so q8w_matmul allocates
 * nothing and cannot fail. x must be finite: a NaN or infinity has no int8
 * value, and its row's outputs are then meaningless (but no UB). */
#ifndef GRPO_OPS_PACKED_Q8_H
#define GRPO_OPS_PACKED_Q8_H

#include <stdbool.h>
#include <stddef.h>

#include "packed_isa.h"

enum {
    Q8W_NR = 16,                            /* columns per panel */
    Q8W_K_BLOCK = 32,                       /* k per quantization block */
    Q8W_SCALE_BYTES = Q8W_NR * 2,           /* one block's 16 f16 scales */
    Q8W_QUANT_BYTES = Q8W_NR * Q8W_K_BLOCK, /* one block's 512 quants */
    Q8W_MAX_K = 65536                       /* the scratch holds one row */
};

/* The AVX2 kernels (AVX2, FMA, F16C) run on this CPU (runtime check). When
 * false q8w_matmul runs the portable fallback: the same bits, slower; when
 * true it may run the faster VNNI kernel (q8w_kernel_used says). */
bool q8w_supported(void);

/* Bytes of W [n, k] in this layout (n rounded up to whole panels). */
size_t q8w_bytes(int n, int k);

/* Quantizes W [n, k] (row-major, HF [out, in]) into dst[q8w_bytes(n, k)]. */
void q8w_pack(void *dst, const float *w, int n, int k);

/* The same from GGUF Q8_0 rows: per row k/32 blocks of 34 bytes (f16 d,
 * 32 int8), copied without requantizing. For blocks written by the Q8_0
 * quantizer (some |q| == 127 in every block) the result is byte-identical
 * to q8w_pack of the dequantized rows; for any blocks, q8w_unpack gives the
 * dequantized rows exactly. */
void q8w_pack_q8_0(void *dst, const void *blocks, int n, int k);

/* Dequantizes back to W [n, k] float32 (q * d, exact). */
void q8w_unpack(float *dst, const void *src, int n, int k);
/* Row `row` of it alone into dst[k]: the same values, bit for bit (a
 * frozen base's embedding lookup). */
void q8w_unpack_row(float *dst, const void *src, int row, int k);

/* out[m, n] = in[m, k] @ W^T (+ bias[n]); OpenMP over panels, through the
 * fastest kernel this CPU has (q8w_kernel_used). */
void q8w_matmul(float *out, const float *in, const void *w, const float *bias, int m, int k, int n);

/* The portable fallback q8w_matmul runs without q8w_supported(), callable
 * everywhere so tests compare it with the SIMD kernels bit for bit. */
void q8w_matmul_scalar(float *out, const float *in, const void *w, const float *bias, int m, int k, int n);

/* q8w_matmul's kernels, slowest first; every one gives the same bits. */
typedef enum { Q8W_SCALAR, Q8W_AVX2, Q8W_VNNI, Q8W_KERNELS } q8w_kernel;

/* The kernel q8w_matmul runs on this CPU: the fastest it has. */
q8w_kernel q8w_kernel_used(void);

/* "scalar", "avx2" or "vnni". */
const char *q8w_kernel_name(q8w_kernel kernel);

/* q8w_matmul through the given kernel, so tests and bench_q8 can compare
 * them: false (nothing written) when this CPU lacks its instructions. */
bool q8w_matmul_kernel(q8w_kernel kernel, float *out, const float *in, const void *w, const float *bias, int m, int k,
                       int n);

/* For training on a frozen q8 base (packed_tile.h: one float32 fused
 * multiply-add chain per output on the exact dequantized W, q8w_unpack's
 * values; the same bits on every path, thread count and batch):
 *
 * out[m, n] = in[m, k] @ W^T (+ bias[n]) with in float32, not quantized:
 * the bits of packed_matmul on the dequantized W and of q8w_matmul_widen. */
void q8w_matmul_f32(float *out, const float *in, const void *w, const float *bias, int m, int k, int n);

/* dX [m, k] = dY [m, n] W (+ dX when accumulate), dY and dX float32: the
 * input gradient of the product above. */
void q8w_matmul_t(float *dx, const float *dy, const void *w, int m, int k, int n, bool accumulate);

/* The same two on the given path: false (nothing written) when this CPU lacks it. */
bool q8w_matmul_f32_isa(packed_isa isa, float *out, const float *in, const void *w, const float *bias, int m, int k,
                        int n);
bool q8w_matmul_t_isa(packed_isa isa, float *dx, const float *dy, const void *w, int m, int k, int n,
                      bool accumulate);

/* The alternative measured against q8w_matmul by bench_q8: the weights
 * widened to float32 (q * d, exact) and a fused multiply-add chain over k in
 * order with the unquantized x, i.e. a float32 matmul with q8w_unpack's W:
 * q8w_matmul_f32's bits, from a kernel that reads the panels directly.
 * AVX2 only: returns false (nothing written) without q8w_supported(). */
bool q8w_matmul_widen(float *out, const float *in, const void *w, const float *bias, int m, int k, int n);

#endif
