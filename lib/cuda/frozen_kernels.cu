// A frozen packed base's embeddings on the device (frozen.c's
// gather_rows_packed): rows of W, packed as bf16, q8 or q4k, dequantized to
// float32 by packed_decode.h's packed_value, the CPU's unpack bit for bit.
// A thread per output element (coalesced writes; a block's scales are read
// again by each of its 32 threads, from cache). The products over such a
// base read the same blocks in frozen_gemm.cu.
#include "kernel_util.h"
#include "kernels.h"
#include "packed_decode.h"

namespace {

__global__ void k_packed_rows(float *dst, const unsigned char *src, cu_packed_fmt fmt, const int32_t *idx, int n,
                              int k) {
    GRID_LOOP(e, (size_t)n * k) {
        const int r = (int)(e / (size_t)k), i = (int)(e % (size_t)k);
        dst[e] = packed_value(src, fmt, idx[r], i, k);
    }
}

} // namespace

extern "C" {

cudaError_t cu_packed_rows(float *dst, const void *src, cu_packed_fmt fmt, const int32_t *idx, int n, int k,
                           cudaStream_t st) {
    if (fmt == CU_PACKED_MXFP4 || !takes_width(fmt, k)) return cudaErrorInvalidValue;
    const size_t total = (size_t)n * k;
    if (total) k_packed_rows<<<blocks_for(total), kThreads, 0, st>>>(dst, (const unsigned char *)src, fmt, idx, n, k);
    return cudaGetLastError();
}

} // extern "C"
