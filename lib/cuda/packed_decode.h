// A packed matrix's values on the device, read from its blocks as they lie
// (frozen_kernels.cu's rows, frozen_gemm.cu's tiles, moe_kernels.cu's
// MXFP4 expansion): the layouts of lib/ops' packed_bf16.h, packed_q8.h,
// packed_q4k.h and packed_mxfp4.h, each value the float32 the CPU's unpack
// gives (bf16w_unpack_row, q8w_unpack_row, q4kw_unpack_row,
// mx4w_unpack_row), bit for bit:
//   bf16   the panel's 16 bits, widened (exact);
//   q8     q * d, d the block's f16 scale widened (exact: 8 by 11 bits);
//   q4k    (d * sc) * q - dmin * mn, each product and the difference rounded
//          to float32 in that order (__fmul_rn, __fsub_rn: no contraction
//          into a fused multiply-add, as packed_q4k.h says);
//   mxfp4  MX4W_HALF_UNITS[q] * 2^(e - 128) (exact: at most two significant
//          bits, so exact in bf16 too).
// A value is found in two steps: packed_block_of, once per block of 32
// along k (where its codes lie, its scales), then packed_block_value per
// value; packed_value does both. CUDA C++: included by .cu files only;
// inline, so a file that uses some of them warns about none.
#ifndef GRPO_CUDA_PACKED_DECODE_H
#define GRPO_CUDA_PACKED_DECODE_H

#include <cuda_fp16.h>
#include <stddef.h>

#include "kernels.h"

namespace {

// Values per block along k: q8's, q4k's sub-block's and MXFP4's scale.
constexpr int kPackedBlock = 32;
// packed_bf16.h: panels of 32 columns, [ceil(k/2)][32][2] bf16
constexpr int kBf16Nr = 32;
// packed_q8.h: panels of 16 columns, blocks of 32 in pairs (a 64-byte line
// of the pair's scales, then each block's 512 quants as [8][16][4])
constexpr int kQ8Nr = 16, kQ8Scales = 32, kQ8Quants = 512, kQ8Pair = 2 * kQ8Scales + 2 * kQ8Quants;
// packed_q4k.h: panels of 16 columns, super-blocks of 256 (a 384-byte head:
// d [16] and dmin [16] float32, sc [8][16] and mn [8][16] bytes; then per
// sub-block of 32 the codes as 4 groups of 64 bytes)
constexpr int kQ4Nr = 16, kQ4Subs = 8, kQ4Group = 64, kQ4Codes = 4 * kQ4Group;
constexpr int kQ4DminAt = 4 * kQ4Nr, kQ4ScAt = 8 * kQ4Nr, kQ4MnAt = kQ4ScAt + kQ4Subs * kQ4Nr;
constexpr int kQ4Head = kQ4MnAt + kQ4Subs * kQ4Nr, kQ4Super = kQ4Head + kQ4Subs * kQ4Codes;
// packed_mxfp4.h: panels of 16 columns, blocks of 32 in quads (a 64-byte
// line of the quad's scales, block s's at 16s + column; then each block's
// codes as 4 groups of 64 bytes, q4k's order)
constexpr int kMxNr = 16, kMxHead = 64, kMxGroup = 64, kMxCodes = 4 * kMxGroup, kMxQuad = kMxHead + 4 * kMxCodes;

__device__ __forceinline__ unsigned le16(const unsigned char *p) { return p[0] | (unsigned)p[1] << 8; }
__device__ __forceinline__ float le_f32(const unsigned char *p) {
    return __uint_as_float(p[0] | (unsigned)p[1] << 8 | (unsigned)p[2] << 16 | (unsigned)p[3] << 24);
}

__device__ __forceinline__ size_t q8_panel_bytes(int k) {
    const size_t nb = (size_t)(k / kPackedBlock);
    return (nb + 1) / 2 * (2 * kQ8Scales) + nb * kQ8Quants;
}

__device__ __forceinline__ size_t q4_panel_bytes(int k) {
    const int subs = k / kPackedBlock, rest = subs % kQ4Subs;
    return (size_t)(subs / kQ4Subs) * kQ4Super + (rest ? kQ4Head + (size_t)rest * kQ4Codes : 0);
}

__device__ __forceinline__ size_t mx_panel_bytes(int k) {
    const size_t nb = (size_t)(k / kPackedBlock);
    return (nb + 3) / 4 * kMxHead + nb * kMxCodes;
}

// 2^(e - 128) as mx4w_scale: subnormal below e = 2.
__device__ __forceinline__ float mx4_scale(unsigned e) {
    return __uint_as_float(e < 2 ? 0x00200000u << e : (e - 1) << 23);
}

// MX4W_HALF_UNITS[q]: 0, 1, 2, 3, 4, 6, 8, 12, negated for q >= 8 (an int,
// so code 8 is +0 as the table's).
__device__ __forceinline__ int mx4_half_units(unsigned q) {
    const int m = (int)(q & 7u), u = m < 2 ? m : (2 + (m & 1)) << ((m >> 1) - 1);
    return q & 8u ? -u : u;
}

// Whether fmt's layout takes an input width of k: q8's, q4k's and MXFP4's
// blocks need multiples of 32 (the CPU asserts it; the plan refuses other
// shapes).
inline bool takes_width(cu_packed_fmt fmt, int k) { return k > 0 && (fmt == CU_PACKED_BF16 || k % 32 == 0); }

// Block b (values 32b .. 32b + 31 along k) of W's row col, W [*, k]: at
// its first value of the column (bf16, q8) or its first codes byte of the
// column (q4k, MXFP4); d the scale (q8, MXFP4) or d * sc (q4k), m q4k's
// dmin * mn.
struct packed_block {
    const unsigned char *at;
    float d, m;
};

__device__ __forceinline__ packed_block packed_block_of(const unsigned char *w, cu_packed_fmt fmt, int col, int b,
                                                        int k) {
    packed_block r = {nullptr, 0.0f, 0.0f};
    if (fmt == CU_PACKED_BF16) {
        const unsigned char *panel = w + (size_t)(col / kBf16Nr) * ((size_t)(k + 1) / 2 * kBf16Nr * 4);
        r.at = panel + (size_t)b * (kPackedBlock / 2) * kBf16Nr * 4 + (size_t)(col % kBf16Nr) * 4;
    } else if (fmt == CU_PACKED_Q8) {
        const int j = col % kQ8Nr;
        const unsigned char *pair = w + (size_t)(col / kQ8Nr) * q8_panel_bytes(k) + (size_t)(b / 2) * kQ8Pair;
        r.d = __half2float(__ushort_as_half((unsigned short)le16(pair + (b % 2) * kQ8Scales + j * 2)));
        r.at = pair + 2 * kQ8Scales + (b % 2) * kQ8Quants + j * 4;
    } else if (fmt == CU_PACKED_Q4K) {
        const int j = col % kQ4Nr, s = b % kQ4Subs;
        const unsigned char *head = w + (size_t)(col / kQ4Nr) * q4_panel_bytes(k) + (size_t)(b / kQ4Subs) * kQ4Super;
        r.d = __fmul_rn(le_f32(head + 4 * j), (float)head[kQ4ScAt + kQ4Nr * s + j]);
        r.m = __fmul_rn(le_f32(head + kQ4DminAt + 4 * j), (float)head[kQ4MnAt + kQ4Nr * s + j]);
        r.at = head + kQ4Head + (size_t)s * kQ4Codes + (size_t)j * 4;
    } else { // CU_PACKED_MXFP4
        const int j = col % kMxNr;
        const unsigned char *quad = w + (size_t)(col / kMxNr) * mx_panel_bytes(k) + (size_t)(b / 4) * kMxQuad;
        r.d = mx4_scale(quad[(b % 4) * 16 + j]);
        r.at = quad + kMxHead + (size_t)(b % 4) * kMxCodes + (size_t)j * 4;
    }
    return r;
}

// Value t (0 .. 31) of block blk, as a float32.
__device__ __forceinline__ float packed_block_value(const packed_block &blk, cu_packed_fmt fmt, int t) {
    if (fmt == CU_PACKED_BF16) return __uint_as_float(le16(blk.at + (size_t)(t / 2) * kBf16Nr * 4 + (t % 2) * 2) << 16);
    if (fmt == CU_PACKED_Q8) return (float)(signed char)blk.at[(t / 4) * 64 + t % 4] * blk.d;
    const unsigned q = blk.at[(t / 8) * kQ4Group + (t % 8) / 2] >> (4 * (t % 2)) & 15u; // q4k's and MXFP4's nibbles
    if (fmt == CU_PACKED_Q4K) return __fsub_rn(__fmul_rn(blk.d, (float)q), blk.m);
    return (float)mx4_half_units(q) * blk.d;
}

// W[col, i] as a float32, W [*, k] packed in fmt.
__device__ __forceinline__ float packed_value(const unsigned char *w, cu_packed_fmt fmt, int col, int i, int k) {
    return packed_block_value(packed_block_of(w, fmt, col, i / kPackedBlock, k), fmt, i % kPackedBlock);
}

} // namespace

#endif
