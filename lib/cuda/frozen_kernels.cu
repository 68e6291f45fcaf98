// A frozen packed base's blocks on the device (frozen.c), each value
// packed_decode.h's: the float32 the CPU's unpack gives, bit for bit;
// MXFP4 through moe_kernels.cu's k_mx4w_to_bf16. Two kernels, a thread per
// output element (coalesced writes; a block's scales are read again by each
// of its 32 threads, from cache):
//   k_packed_to_bf16  W [n, k] in bf16 for the GEMM (rounded to nearest
//                     even: exact for bf16, q8's and q4k's values rounded);
//   k_packed_rows     rows of W in float32 (gather_rows_packed).
#include <cuda_bf16.h>

#include "kernel_util.h"
#include "kernels.h"
#include "packed_decode.h"

namespace {

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
