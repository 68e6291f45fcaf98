/* 4-bit k-quant weights (GGUF's Q4_K) kept packed: y = x W^T and the
 * transposed product dX = dY W on the blocks themselves, never widened to
 * float32 in memory. A frozen LoRA base (grpo-update --base-weights q4k)
 * and rollout (--weights q4k) run on them.
 *
 * The values (ggml's block_q4_K, gguf-py's Q4_K): along K each row of
 * W [N, K] is cut into super-blocks of 256 values, each with two f16
 * scales d and dmin, and those into 8 sub-blocks of 32, each with a 6-bit
 * scale sc and a 6-bit min mn; every value has a 4-bit code q and is
 *     w = (d * sc) * q - dmin * mn
 * with d and dmin widened to float32 and each product and the difference
 * rounded to float32 in that order (gguf-py's numpy dequantizer, and
 * quant.c's, bit for bit; no fused multiply-add).
 *
 * A GGUF Q4_K block (144 bytes): d, dmin (f16, little-endian), 12 bytes of
 * scales and mins, 128 bytes of codes. Sub-block s < 4 has sc = byte s &
 * 63 and mn = byte s + 4 & 63; s >= 4 has sc = (byte s + 4 & 15) | (byte
 * s - 4 >> 6) << 4 and mn = (byte s + 4 >> 4) | (byte s >> 6) << 4
 * (ggml's get_scale_min_k4). Code l of sub-block s is the low nibble of
 * code byte 32 (s / 2) + l for even s, its high nibble for odd s.
 *
 * Layout: W becomes ceil(N/16) panels of 16 columns (rows of W; zero past
 * N). A panel holds its super-blocks one after the other, each a 384-byte
 * head (the 16 columns' d as float32, then their dmin, then sc [8][16] and
 * mn [8][16] as bytes) and then per sub-block 4 groups of 64 bytes, group
 * g holding for each column j (bytes 4j .. 4j + 3, a little-endian 32-bit
 * word) the codes of k = 32 s + 8 g + t at bits 4t .. 4t + 3: one
 * column's 8 codes in one 32-bit lane, so a shift, a mask and a convert
 * decode 16 columns at once. 2432 bytes per 256 x 16 weights, 4.75 bits a
 * weight (GGUF's 4.5, the scales widened for the kernels). K need only be
 * a multiple of 32: a last, short super-block holds K % 256 / 32
 * sub-blocks (our quantizer's; a GGUF row is whole super-blocks).
 *
 * Quantizing float32 (q4kw_pack): per sub-block, the float scale and min
 * (w ~ a q - b, a >= 0, b >= 0) that minimize the squared error over 21
 * candidate code assignments (codes rounded from a range scaled by
 * (15 + t/10) / (max - min), t = -10 .. 10, each fitted by least squares);
 * then d = max a / 63 and dmin = max b / 63 rounded to f16, the 6-bit sc
 * and mn rounded from a / d and b / dmin, and each code the nearest one
 * under those final, rounded scales. Deterministic, row by row; AVX-512,
 * AVX2 or portable C, the same blocks: the portable code
 * (packed_q4k_quant.c), AVX-512's eight sub-blocks side by side and AVX2's
 * four (packed_q4k_quant_lanes.h), each lane the same double arithmetic.
 *
 * Numerics (q4kw_matmul, q4kw_matmul_t): as packed_mxfp4.h's: float32
 * activations, each output one float32 fused multiply-add chain in order
 * from +0 over the exact dequantized weights (then + bias): packed_tile.h's
 * bits, the same on every path (portable, AVX2, AVX-512), thread count and
 * batch composition. q4kw_matmul decodes the codes in registers for every
 * few rows below 16 rows (decode), and from 16 rows (a micro-batch's
 * tokens) once per tile of packed_tile.h for up to 64 rows.
 *
 * Callers guarantee k % 32 == 0 (asserted). */
#ifndef GRPO_OPS_PACKED_Q4K_H
#define GRPO_OPS_PACKED_Q4K_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "packed_isa.h"

enum {
    Q4KW_NR = 16,          /* columns per panel */
    Q4KW_K_SUPER = 256,    /* values per super-block (d, dmin) */
    Q4KW_K_SUB = 32,       /* values per sub-block (sc, mn) */
    Q4KW_GGUF_BYTES = 144  /* one GGUF Q4_K block */
};

/* Bytes of W [n, k] in this layout (n rounded up to whole panels). */
size_t q4kw_bytes(int n, int k);

/* Why a loader refuses a GGUF Q4_K block: "has a scale that is not finite"
 * (d or dmin infinite or NaN); NULL when the block is taken. */
const char *q4kw_block_fault(const unsigned char block[Q4KW_GGUF_BYTES]);

/* From GGUF Q4_K rows (n rows of k/256 blocks; k % 256 == 0) into
 * dst[q4kw_bytes(n, k)]: the codes and scales moved, not requantized. */
void q4kw_pack_gguf(void *dst, const void *blocks, int n, int k);

/* W [n, k] float32 quantized as above into dst[q4kw_bytes(n, k)], on the
 * fastest path; OpenMP over panels. */
void q4kw_pack(void *dst, const float *w, int n, int k);

/* The same on the given path (AVX-512, AVX2 or the portable code: the
 * same blocks): false (nothing written) when this CPU lacks it. */
bool q4kw_pack_isa(packed_isa isa, void *dst, const float *w, int n, int k);

/* n values (a multiple of 256) quantized as q4kw_pack quantizes them,
 * written as n / 256 GGUF Q4_K blocks: q4kw_pack_gguf of rows of them gives
 * q4kw_pack's bytes (a GGUF writer's Q4_K: lib/formats/gguf_quant.h). */
void q4kw_quantize_gguf(void *blocks, const float *x, size_t n);

/* Dequantizes to W [n, k] float32: the values above, exactly. */
void q4kw_unpack(float *dst, const void *src, int n, int k);
/* Row `row` of it alone into dst[k]: the same values, bit for bit (a
 * frozen base's embedding lookup). */
void q4kw_unpack_row(float *dst, const void *src, int row, int k);

/* out[m, n] = in[m, k] @ W^T (+ bias[n]) as above, through the fastest
 * path (packed_isa_best()); OpenMP over panels and rows (over tiles from
 * 16 rows). */
void q4kw_matmul(float *out, const float *in, const void *w, const float *bias, int m, int k, int n);

/* The same on the given path: false (nothing written) when this CPU lacks it. */
bool q4kw_matmul_isa(packed_isa isa, float *out, const float *in, const void *w, const float *bias, int m, int k,
                     int n);

/* dX [m, k] = dY [m, n] W (+ dX when accumulate), packed_tile.h's numerics on
 * the dequantized W. */
void q4kw_matmul_t(float *dx, const float *dy, const void *w, int m, int k, int n, bool accumulate);

/* The same on the given path: false (nothing written) when this CPU lacks it. */
bool q4kw_matmul_t_isa(packed_isa isa, float *dx, const float *dy, const void *w, int m, int k, int n,
                       bool accumulate);

#endif
