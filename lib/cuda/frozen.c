/* The frozen-base entries of backend_cuda() (frozen.h): a packed matrix
 * expanded to bf16 by frozen_kernels.cu into the context's frozen scratch
 * (act16 slot CUDA_ACT16_FROZEN, grown to the largest matrix: the LM head's
 * vocab x dim), then the bf16 products of gemm.c; the embeddings' rows
 * dequantized straight into float32. Failures recorded for sync. */
#include "frozen.h"

#include "ctx.h"
#include "gemm.h"
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

/* W [out_dim, in_dim] packed in fmt as bf16 in the frozen scratch; NULL
 * after a failure. */
static const uint16_t *expand(const void *w_packed, weight_format fmt, int out_dim, int in_dim) {
    cu_packed_fmt f;
    if (!packed_fmt(fmt, &f)) {
        cuda_fail_msg("a frozen base on cuda is bf16, q8, q4k or mxfp4");
        return NULL;
    }
    uint16_t *w16 = cuda_act16_slot(CUDA_ACT16_FROZEN, (size_t)out_dim * in_dim);
    if (!w16 || cuda_failed(cu_packed_to_bf16(w16, w_packed, f, out_dim, in_dim, stream()), "frozen base to bf16"))
        return NULL;
    return w16;
}

void cuda_matmul_forward_frozen(float *out, const float *in, const void *w_packed, weight_format fmt,
                                const float *bias, int n, int in_dim, int out_dim) {
    if (cuda_broken() || n <= 0) return;
    const uint16_t *w16 = expand(w_packed, fmt, out_dim, in_dim);
    if (w16) cuda_matmul_bf16(out, in, w16, bias, n, in_dim, out_dim);
}

void cuda_matmul_backward_frozen(float *din, const float *dout, const void *w_packed, weight_format fmt, int n,
                                 int in_dim, int out_dim, bool accumulate) {
    if (cuda_broken() || n <= 0 || !din) return;
    const uint16_t *w16 = expand(w_packed, fmt, out_dim, in_dim);
    /* dout rounds into slot 1, the scratch is slot 2: neither overwrites the other */
    if (w16) cuda_matmul_backward_bf16(din, NULL, NULL, dout, NULL, w16, n, in_dim, out_dim, accumulate);
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
