// A frozen packed base's blocks on the device (frozen.c): the layouts of
// lib/ops' packed_bf16.h, packed_q8.h and packed_q4k.h read element by
// element, each value the float32 the CPU's unpack gives (bf16w_unpack_row,
// q8w_unpack_row, q4kw_unpack_row), bit for bit:
//   bf16  the panel's 16 bits, widened (exact);
//   q8    q * d, d the block's f16 scale widened (exact: 8 by 11 bits);
//   q4k   (d * sc) * q - dmin * mn, each product and the difference rounded
//         to float32 in that order (__fmul_rn, __fsub_rn: no contraction
//         into a fused multiply-add, as packed_q4k.h says);
// MXFP4 through moe_kernels.cu's k_mx4w_to_bf16. Two kernels, a thread per
// output element (coalesced writes; a block's scales are read again by each
// of its 32 threads, from cache):
//   k_packed_to_bf16  W [n, k] in bf16 for the GEMM (rounded to nearest
//                     even: exact for bf16, q8's and q4k's values rounded);
//   k_packed_rows     rows of W in float32 (gather_rows_packed).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernel_util.h"
#include "kernels.h"

namespace {

// packed_bf16.h: panels of 32 columns, [ceil(k/2)][32][2] bf16
constexpr int kBf16Nr = 32;
// packed_q8.h: panels of 16 columns, blocks of 32 in pairs (a 64-byte line
// of the pair's scales, then each block's 512 quants as [8][16][4])
constexpr int kQ8Nr = 16, kQ8Block = 32, kQ8Scales = 32, kQ8Quants = 512, kQ8Pair = 2 * kQ8Scales + 2 * kQ8Quants;
// packed_q4k.h: panels of 16 columns, super-blocks of 256 (a 384-byte head:
// d [16] and dmin [16] float32, sc [8][16] and mn [8][16] bytes; then per
// sub-block of 32 the codes as 4 groups of 64 bytes)
constexpr int kQ4Nr = 16, kQ4Sub = 32, kQ4Subs = 8, kQ4Group = 64, kQ4Codes = 4 * kQ4Group;
constexpr int kQ4DminAt = 4 * kQ4Nr, kQ4ScAt = 8 * kQ4Nr, kQ4MnAt = kQ4ScAt + kQ4Subs * kQ4Nr;
constexpr int kQ4Head = kQ4MnAt + kQ4Subs * kQ4Nr, kQ4Super = kQ4Head + kQ4Subs * kQ4Codes;

__device__ __forceinline__ unsigned le16(const unsigned char *p) { return p[0] | (unsigned)p[1] << 8; }
__device__ __forceinline__ float le_f32(const unsigned char *p) {
    return __uint_as_float(p[0] | (unsigned)p[1] << 8 | (unsigned)p[2] << 16 | (unsigned)p[3] << 24);
}

__device__ __forceinline__ size_t q8_panel_bytes(int k) {
    const size_t nb = (size_t)(k / kQ8Block);
    return (nb + 1) / 2 * (2 * kQ8Scales) + nb * kQ8Quants;
}

__device__ __forceinline__ size_t q4_panel_bytes(int k) {
    const int subs = k / kQ4Sub, rest = subs % kQ4Subs;
    return (size_t)(subs / kQ4Subs) * kQ4Super + (rest ? kQ4Head + (size_t)rest * kQ4Codes : 0);
}

// W[col, i] as a float32: the CPU's unpack of fmt (not MXFP4).
__device__ float packed_value(const unsigned char *w, cu_packed_fmt fmt, int col, int i, int k) {
    if (fmt == CU_PACKED_BF16) {
        const unsigned char *panel = w + (size_t)(col / kBf16Nr) * ((size_t)(k + 1) / 2 * kBf16Nr * 4);
        return __uint_as_float(le16(panel + (size_t)(i / 2) * kBf16Nr * 4 + (size_t)(col % kBf16Nr) * 4 +
                                    (size_t)(i % 2) * 2)
                               << 16);
    }
    if (fmt == CU_PACKED_Q8) {
        const unsigned char *panel = w + (size_t)(col / kQ8Nr) * q8_panel_bytes(k);
        const int b = i / kQ8Block, t = i % kQ8Block, j = col % kQ8Nr;
        const unsigned char *pair = panel + (size_t)(b / 2) * kQ8Pair;
        const float d = __half2float(__ushort_as_half((unsigned short)le16(pair + (b % 2) * kQ8Scales + j * 2)));
        const signed char q = (signed char)pair[2 * kQ8Scales + (b % 2) * kQ8Quants + (t / 4) * 64 + j * 4 + t % 4];
        return (float)q * d;
    }
    // CU_PACKED_Q4K
    const unsigned char *panel = w + (size_t)(col / kQ4Nr) * q4_panel_bytes(k);
    const int u = i / kQ4Sub, t = i % kQ4Sub, j = col % kQ4Nr, s = u % kQ4Subs;
    const unsigned char *head = panel + (size_t)(u / kQ4Subs) * kQ4Super;
    const unsigned char *codes = head + kQ4Head + (size_t)s * kQ4Codes + (size_t)j * 4;
    const float d = le_f32(head + 4 * j), dmin = le_f32(head + kQ4DminAt + 4 * j);
    const float ds = __fmul_rn(d, (float)head[kQ4ScAt + kQ4Nr * s + j]);
    const float ms = __fmul_rn(dmin, (float)head[kQ4MnAt + kQ4Nr * s + j]);
    const unsigned q = codes[(t / 8) * kQ4Group + (t % 8) / 2] >> (4 * (t % 2)) & 15u;
    return __fsub_rn(__fmul_rn(ds, (float)q), ms);
}

__global__ void k_packed_to_bf16(uint16_t *dst, const unsigned char *src, cu_packed_fmt fmt, int n, int k) {
    GRID_LOOP(e, (size_t)n * k) {
        const int col = (int)(e / (size_t)k), i = (int)(e % (size_t)k);
        const __nv_bfloat16 b = __float2bfloat16_rn(packed_value(src, fmt, col, i, k));
        dst[e] = *reinterpret_cast<const uint16_t *>(&b);
    }
}

__global__ void k_packed_rows(float *dst, const unsigned char *src, cu_packed_fmt fmt, const int32_t *idx, int n,
                              int k) {
    GRID_LOOP(e, (size_t)n * k) {
        const int r = (int)(e / (size_t)k), i = (int)(e % (size_t)k);
        dst[e] = packed_value(src, fmt, idx[r], i, k);
    }
}

// Whether fmt's layout takes an input width of k: q8's and q4k's blocks need
// multiples of 32 (the CPU asserts it; the plan refuses other shapes).
bool takes_width(cu_packed_fmt fmt, int k) { return k > 0 && (fmt == CU_PACKED_BF16 || k % 32 == 0); }

} // namespace

extern "C" {

cudaError_t cu_packed_to_bf16(uint16_t *dst, const void *src, cu_packed_fmt fmt, int n, int k, cudaStream_t st) {
    if (fmt == CU_PACKED_MXFP4) return cu_mx4w_to_bf16(dst, src, n, k, st);
    if (!takes_width(fmt, k)) return cudaErrorInvalidValue;
    const size_t total = (size_t)n * k;
    if (total) k_packed_to_bf16<<<blocks_for(total), kThreads, 0, st>>>(dst, (const unsigned char *)src, fmt, n, k);
    return cudaGetLastError();
}

cudaError_t cu_packed_rows(float *dst, const void *src, cu_packed_fmt fmt, const int32_t *idx, int n, int k,
                           cudaStream_t st) {
    if (fmt == CU_PACKED_MXFP4 || !takes_width(fmt, k)) return cudaErrorInvalidValue;
    const size_t total = (size_t)n * k;
    if (total) k_packed_rows<<<blocks_for(total), kThreads, 0, st>>>(dst, (const unsigned char *)src, fmt, idx, n, k);
    return cudaGetLastError();
}

} // extern "C"
