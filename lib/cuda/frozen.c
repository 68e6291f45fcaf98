/* The frozen-base entries of backend_cuda() (frozen.h): the products are
 * frozen_gemm.cu's tiled kernels, which decode the packed blocks into
 * shared memory tile by tile (no bf16 copy of the matrix anywhere); the
 * embeddings' rows are dequantized straight into float32 (frozen_kernels.cu).
 * Failures recorded for sync. */
#include "frozen.h"

#include "ctx.h"
#include "kernels.h"

static cudaStream_t stream(void) { return cuda_ctx_get()->stream; }

/* fmt's layout for the kernels; false for a format they lack. */
static bool packed_fmt(weight_format fmt, cu_packed_fmt *out) {
    switch (fmt) {
    case WEIGHTS_BF16: *out = CU_PACKED_BF16; return true;
    case WEIGHTS_Q8: *out = CU_PACKED_Q8; return true;
    case WEIGHTS_Q4K: *out = CU_PACKED_Q4K; return true;
    case WEIGHTS_MXFP4: *out = CU_PACKED_MXFP4; return true;
    default: return false;
    }
}

/* fmt's layout for the products; false (recorded) for another format. */
static bool product_fmt(weight_format fmt, cu_packed_fmt *out) {
    if (packed_fmt(fmt, out)) return true;
    cuda_fail_msg("a frozen base on cuda is bf16, q8, q4k or mxfp4");
    return false;
}

void cuda_matmul_forward_frozen(float *out, const float *in, const void *w_packed, weight_format fmt,
                                const float *bias, int n, int in_dim, int out_dim) {
    cu_packed_fmt f;
    if (cuda_broken() || n <= 0 || !product_fmt(fmt, &f)) return;
    cuda_failed(cu_frozen_forward(out, in, w_packed, f, bias, n, in_dim, out_dim, stream()), "matmul_forward_frozen");
}

void cuda_matmul_backward_frozen(float *din, const float *dout, const void *w_packed, weight_format fmt, int n,
                                 int in_dim, int out_dim, bool accumulate) {
    cu_packed_fmt f;
    if (cuda_broken() || n <= 0 || !din || !product_fmt(fmt, &f)) return;
    cuda_failed(cu_frozen_backward(din, dout, w_packed, f, n, in_dim, out_dim, accumulate, stream()),
                "matmul_backward_frozen");
}

void cuda_gather_rows_packed(float *dst, const void *w_packed, weight_format fmt, const int32_t *idx, int n, int d) {
    cu_packed_fmt f;
    if (cuda_broken() || n <= 0) return;
    if (fmt == WEIGHTS_MXFP4 || !packed_fmt(fmt, &f)) { /* the CPU's formats of packed rows */
        cuda_fail_msg("packed embeddings on cuda are bf16, q8 or q4k");
        return;
    }
    const int32_t *i = cuda_stage(idx, (size_t)n * sizeof *idx, 0);
    if (i) cuda_failed(cu_packed_rows(dst, w_packed, f, i, n, d, stream()), "gather_rows_packed");
}
