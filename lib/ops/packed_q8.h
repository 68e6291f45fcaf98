/* 8-bit weights for the inference matmul y = x W^T (issue 19, section 1).
 *
 * Quantization is GGUF Q8_0's: each block of 32 consecutive values along K
 * of one row of W has d = max|w| / 127 rounded to f16 and q = round(w / d)
 * (lib/formats/gguf_quant.c's quantizer, so a GGUF's Q8_0 blocks are taken
 * over verbatim by q8w_pack_q8_0). The dequantized weight is q * d.
 *
 * Layout: W [N, K] becomes ceil(N/16) panels of 16 columns (zero past N);
 * a panel is K/32 blocks of Q8W_BLOCK_BYTES: the 16 columns' d widened to
 * float32 (exactly), then the 512 quants as [8 groups][16 columns][4
 * consecutive k]. One 32-byte load is 8 columns x 4 k: the shape both the
 * int8 x int8 dot (vpmaddubsw/vpmaddwd, 4 k per 32-bit lane) and the
 * widening kernel (each k a byte of the lane) consume; the scales sit beside
 * the quants they scale, so one panel streams front to back.
 *
 * Numerics (the widening kernel, q8w_matmul): q * d is exact in float32
 * (8-bit q times an f16 d), so out[r][c] = bias[c] + the float32 fused
 * multiply-add chain over k = 0 .. K-1 in order of x[r][k] * (q * d): an
 * fp32 matmul against the dequantized weights (q8w_unpack), the same
 * arithmetic for every row whatever m, the other rows or the thread count,
 * and the same in the SIMD kernel and the portable fallback (bit for bit).
 * The int8 x int8 kernel (q8w_matmul_int8) measured slower on this AVX2
 * machine and loses more precision; it stays for the benchmark that
 * measured it (bench/bench_q8.c) and is not used by the model.
 *
 * Callers guarantee k % 32 == 0 (asserted). */
#ifndef GRPO_OPS_PACKED_Q8_H
#define GRPO_OPS_PACKED_Q8_H

#include <stdbool.h>
#include <stddef.h>

enum {
    Q8W_NR = 16,                              /* columns per panel */
    Q8W_K_BLOCK = 32,                         /* k per quantization block */
    Q8W_BLOCK_BYTES = Q8W_NR * 4 + Q8W_NR * Q8W_K_BLOCK /* scales, then quants */
};

/* The AVX2+FMA+F16C kernel runs on this CPU (runtime check). When false
 * q8w_matmul runs the portable fallback: same results, slower. */
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

/* out[m, n] = in[m, k] @ W^T (+ bias[n]); OpenMP over panels. */
void q8w_matmul(float *out, const float *in, const void *w, const float *bias, int m, int k, int n);

/* The portable fallback q8w_matmul runs without q8w_supported(), callable
 * everywhere so tests compare it with the SIMD kernel bit for bit. */
void q8w_matmul_scalar(float *out, const float *in, const void *w, const float *bias, int m, int k, int n);

/* The int8 x int8 alternative, measured against q8w_matmul by bench_q8:
 * each row of in quantized per 32-block like the weights (dx = max|x|/127
 * in float32, qx = round(x / dx)), the integer dot of each block exact,
 * then acc = fma((float)dot, dx * d, acc) over blocks in order. Returns
 * false (nothing written) when its scratch cannot be allocated. */
bool q8w_matmul_int8(float *out, const float *in, const void *w, const float *bias, int m, int k, int n);

#endif
