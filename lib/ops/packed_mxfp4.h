/* MXFP4 weights kept packed (gpt-oss's experts): y = x W^T and the
 * transposed product dX = dY W on the blocks themselves, never widened to
 * float32 in memory.
 *
 * The format (OCP Microscaling MXFP4, as llama.cpp and gpt-oss store it):
 * each block of 32 consecutive values along K of one row of W [N, K] is one
 * E8M0 scale byte e and 32 E2M1 codes of 4 bits (sign, 2 exponent bits, 1
 * mantissa bit). Code q has the value
 *     MX4W_HALF_UNITS[q] * 2^(e - 128),  MX4W_HALF_UNITS = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}
 * (the E2M1 values 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives in units
 * of one half: ggml's kvalues_mxfp4 and ggml_e8m0_to_fp32_half, so
 * mx4w_unpack gives llama.cpp's dequantize_row_mxfp4 bit for bit; the
 * negative zero, code 8, reads as +0). Every value is exact in float32
 * (subnormal where e < 2; infinite where e >= 253 and the code is large,
 * as in ggml). e = 0xFF, which OCP reserves for NaN and llama.cpp's
 * validator refuses, reads as ggml reads it (a scale of 2^127); loaders
 * refuse it (MX4W_NAN_SCALE).
 *
 * Sources, both with the same codes and scales:
 *   GGUF (GGML_TYPE_MXFP4, 39): per row K/32 blocks of 17 bytes, e then 16
 *     bytes qs; value j of the block is qs[j] & 15 for j < 16, qs[j - 16] >> 4
 *     for j >= 16 (ggml-common.h's block_mxfp4).
 *   Hugging Face (gpt-oss safetensors): `<name>_blocks` uint8 [.., N, K/32,
 *     16], byte j of a block holding value 2j in its low nibble and 2j + 1 in
 *     its high one, and `<name>_scales` uint8 [.., N, K/32], the blocks' e
 *     (transformers' convert_moe_packed_tensors: FP4_VALUES[q] * 2^(e - 127)).
 *     N is the output dimension (gate_up_proj: 2 x intermediate, down_proj:
 *     hidden), so one expert's slice is W [N, K] as here.
 *
 * Layout: W becomes ceil(N/16) panels of 16 columns (rows of W; zero past
 * N). A panel holds its K/32 blocks in quads: a 64-byte line of the quad's
 * scales (block 4i + s's 16 columns' e at bytes 16s .. 16s + 15; a short
 * last quad pads with zeros), then each block's codes as 4 groups of 64
 * bytes, group g holding for each column j (bytes 4j .. 4j + 3, a
 * little-endian 32-bit word) the codes of k = 32b + 8g + t at bits 4t ..
 * 4t + 3. A word is one column's 8 codes: one lane of a 16-lane vector, so a
 * shift and a 16-entry table lookup (vpermps) decode 16 columns at once.
 * 64 + 4 x 256 bytes per 128 weights of 16 columns: 4.25 bits a weight.
 *
 * Numerics (mx4w_matmul): x float32, not rounded; each output is one
 * float32 fused multiply-add chain over k in order from +0 with the exact
 * dequantized weights, then + bias: the bits of packed_matmul (packed.h) on
 * packed_pack(mx4w_unpack(W)), whatever m, the other rows or the thread
 * count, on every path (portable, AVX2, AVX-512). Its error against
 * float64 x W^T over the dequantized W is at most (k + 1) u (sum |x w| +
 * |bias|), u = 2^-24. Why float32 activations and not int8 (llama.cpp's
 * choice for MXFP4 on CPUs): the forward of training on a frozen MXFP4
 * base must be exact on the model's weights (its gradients are checked
 * against float64 to 1e-4), and rollout then samples from the very
 * log-probs the trainer computes; gpt-oss itself was trained with bf16
 * activations, which int8 would not reproduce either.
 *
 * mx4w_matmul_t: dX = dY W as packed_tile.h defines it for every format.
 *
 * Callers guarantee k % 32 == 0 (asserted). */
#ifndef GRPO_OPS_PACKED_MXFP4_H
#define GRPO_OPS_PACKED_MXFP4_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "packed_isa.h"

enum {
    MX4W_NR = 16,          /* columns per panel */
    MX4W_K_BLOCK = 32,     /* values per block (per scale) */
    MX4W_GGUF_BYTES = 17,  /* one GGUF block: e and 16 bytes of codes */
    MX4W_HF_BYTES = 16,    /* one Hugging Face block of codes (its e apart) */
    MX4W_NAN_SCALE = 0xFF  /* the E8M0 NaN: a loader refuses a block with it */
};

/* The 16 codes' values in units of one half (above). */
extern const int8_t MX4W_HALF_UNITS[16];

/* 2^(e - 128), ggml_e8m0_to_fp32_half: a block's scale in those units. */
float mx4w_scale(uint8_t e);

/* Why a loader refuses a block of scale e and 16 bytes of codes (two a
 * byte, in either source's order): "is MXFP4's NaN" (e = MX4W_NAN_SCALE),
 * "makes a value beyond float32" (a large code under e >= 253); NULL when
 * the block is taken. */
const char *mx4w_block_fault(uint8_t e, const unsigned char codes[MX4W_HF_BYTES]);

/* Bytes of W [n, k] in this layout (n rounded up to whole panels). */
size_t mx4w_bytes(int n, int k);

/* From GGUF MXFP4 rows (n rows of k/32 17-byte blocks) into
 * dst[mx4w_bytes(n, k)]: the codes and scales moved, not requantized. */
void mx4w_pack_gguf(void *dst, const void *blocks, int n, int k);

/* From gpt-oss's `_blocks` [n, k/32, 16] and `_scales` [n, k/32] (one
 * expert's slices) into dst[mx4w_bytes(n, k)]: the same bytes as
 * mx4w_pack_gguf of the same weights in GGUF's order. */
void mx4w_pack_hf(void *dst, const void *blocks, const void *scales, int n, int k);

/* Dequantizes to W [n, k] float32: the values above, exactly. */
void mx4w_unpack(float *dst, const void *src, int n, int k);

/* out[m, n] = in[m, k] @ W^T (+ bias[n]) as above, through the fastest
 * path (packed_isa_best()); OpenMP over panels and rows. */
void mx4w_matmul(float *out, const float *in, const void *w, const float *bias, int m, int k, int n);

/* The same on the given path: false (nothing written) when this CPU lacks it. */
bool mx4w_matmul_isa(packed_isa isa, float *out, const float *in, const void *w, const float *bias, int m, int k,
                     int n);

/* dX [m, k] = dY [m, n] W (+ dX when accumulate), packed_tile.h's numerics on
 * the dequantized W. */
void mx4w_matmul_t(float *dx, const float *dy, const void *w, int m, int k, int n, bool accumulate);

/* The same on the given path: false (nothing written) when this CPU lacks it. */
bool mx4w_matmul_t_isa(packed_isa isa, float *dx, const float *dy, const void *w, int m, int k, int n,
                       bool accumulate);

#endif
