/* Matrix products: OpenBLAS's sgemm, and the kernels for weights packed
 * once for inference (packed.c: float32, packed_bf16.c, packed_q8.c,
 * packed_mxfp4.c, packed_q4k.c). */
#include "ops.h"

#include <assert.h>
#include <cblas.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../formats/quant.h"
#include "blas.h"
#include "packed.h"
#include "packed_bf16.h"
#include "packed_mxfp4.h"
#include "packed_q4k.h"
#include "packed_q8.h"

void gemm(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
          float beta, float *C, int ldc) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda,
                B, ldb, beta, C, ldc);
}

void matmul_forward(float *out, const float *in, const float *w, const float *bias, int n, int in_dim,
                    int out_dim) {
    if (n <= 0) return;
    if (blas_shares_openmp()) { /* OpenBLAS parallelizes on our pool */
        if (bias)
            for (int r = 0; r < n; r++) memcpy(out + (size_t)r * out_dim, bias, (size_t)out_dim * sizeof *out);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out_dim, in_dim, 1.0f, in, in_dim, w, in_dim,
                    bias ? 1.0f : 0.0f, out, out_dim);
        return;
    }
    /* Each OpenMP thread takes a band of output columns and calls the
     * single-threaded sgemm on it. */
#pragma omp parallel
    {
        int tid = 0, nt = 1;
#ifdef _OPENMP
        tid = omp_get_thread_num(), nt = omp_get_num_threads();
#endif
        int band = ((out_dim + nt - 1) / nt + 15) / 16 * 16; /* whole SIMD panels */
        int lo = tid * band, hi = lo + band < out_dim ? lo + band : out_dim;
        if (hi > lo) {
            if (bias)
                for (int r = 0; r < n; r++)
                    memcpy(out + (size_t)r * out_dim + lo, bias + lo, (size_t)(hi - lo) * sizeof *out);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, hi - lo, in_dim, 1.0f, in, in_dim,
                        w + (size_t)lo * in_dim, in_dim, bias ? 1.0f : 0.0f, out + lo, out_dim);
        }
    }
}

size_t weights_packed_bytes(weight_format fmt, int n, int k) {
    switch (fmt) {
    case WEIGHTS_BF16: return bf16w_bytes(n, k);
    case WEIGHTS_Q8: return q8w_bytes(n, k);
    case WEIGHTS_MXFP4: return mx4w_bytes(n, k);
    case WEIGHTS_Q4K: return q4kw_bytes(n, k);
    default: return packed_floats(n, k) * sizeof(float);
    }
}

void weights_pack(weight_format fmt, void *dst, const float *w, int n, int k) {
    switch (fmt) {
    case WEIGHTS_BF16: bf16w_pack(dst, w, n, k); return;
    case WEIGHTS_Q8: q8w_pack(dst, w, n, k); return;
    case WEIGHTS_Q4K: q4kw_pack(dst, w, n, k); return;
    case WEIGHTS_MXFP4: assert(!"MXFP4 is packed from blocks only"); return;
    default: packed_pack(dst, w, n, k); return;
    }
}

void weights_unpack(weight_format fmt, float *dst, const void *src, int n, int k) {
    assert(fmt == WEIGHTS_Q8 || fmt == WEIGHTS_Q4K);
    if (fmt == WEIGHTS_Q4K) q4kw_unpack(dst, src, n, k);
    else q8w_unpack(dst, src, n, k);
}

void gather_rows_packed(float *dst, const void *w_packed, weight_format fmt, const int32_t *idx, int n, int k) {
    assert(fmt == WEIGHTS_BF16 || fmt == WEIGHTS_Q8 || fmt == WEIGHTS_Q4K);
    void (*row)(float *, const void *, int, int) = fmt == WEIGHTS_BF16 ? bf16w_unpack_row
                                                   : fmt == WEIGHTS_Q8 ? q8w_unpack_row
                                                                       : q4kw_unpack_row;
#pragma omp parallel for schedule(static) if ((size_t)n * k > 65536)
    for (int i = 0; i < n; i++) row(dst + (size_t)i * k, w_packed, idx[i], k);
}

bool weights_takes_blocks(weight_format fmt, uint32_t type) {
    return (fmt == WEIGHTS_Q8 && type == GGML_TYPE_Q8_0) || (fmt == WEIGHTS_MXFP4 && type == GGML_TYPE_MXFP4) ||
           (fmt == WEIGHTS_Q4K && type == GGML_TYPE_Q4_K);
}

void weights_pack_blocks(weight_format fmt, void *dst, const void *rows, const void *scales, int n, int k) {
    assert(fmt == WEIGHTS_Q8 || fmt == WEIGHTS_MXFP4 || fmt == WEIGHTS_Q4K); /* the formats that take blocks */
    assert(!scales || fmt == WEIGHTS_MXFP4);
    if (fmt == WEIGHTS_Q8) q8w_pack_q8_0(dst, rows, n, k);
    else if (fmt == WEIGHTS_Q4K) q4kw_pack_gguf(dst, rows, n, k);
    else if (scales) mx4w_pack_hf(dst, rows, scales, n, k);
    else mx4w_pack_gguf(dst, rows, n, k);
}

void matmul_forward_packed(float *out, const float *in, const void *w_packed, weight_format fmt, const float *bias,
                           int n, int in_dim, int out_dim) {
    switch (fmt) {
    case WEIGHTS_F32: packed_matmul(out, in, w_packed, bias, n, in_dim, out_dim); return;
    case WEIGHTS_BF16: bf16w_matmul(out, in, w_packed, bias, n, in_dim, out_dim); return;
    case WEIGHTS_Q8: q8w_matmul(out, in, w_packed, bias, n, in_dim, out_dim); return;
    case WEIGHTS_MXFP4: mx4w_matmul(out, in, w_packed, bias, n, in_dim, out_dim); return;
    case WEIGHTS_Q4K: q4kw_matmul(out, in, w_packed, bias, n, in_dim, out_dim); return;
    }
}

void matmul_forward_frozen(float *out, const float *in, const void *w_packed, weight_format fmt, const float *bias,
                           int n, int in_dim, int out_dim) {
    assert(fmt != WEIGHTS_F32); /* float32 panels have no transposed kernel */
    if (n <= 0) return;
    if (fmt == WEIGHTS_BF16)
        bf16w_matmul_f32(out, in, w_packed, bias, n, in_dim, out_dim);
    else if (fmt == WEIGHTS_MXFP4)
        mx4w_matmul(out, in, w_packed, bias, n, in_dim, out_dim); /* float32 activations already */
    else if (fmt == WEIGHTS_Q4K)
        q4kw_matmul(out, in, w_packed, bias, n, in_dim, out_dim);
    else
        q8w_matmul_f32(out, in, w_packed, bias, n, in_dim, out_dim);
}

void matmul_backward_frozen(float *din, const float *dout, const void *w_packed, weight_format fmt, int n, int in_dim,
                            int out_dim, bool accumulate) {
    assert(fmt != WEIGHTS_F32);
    if (n <= 0 || !din) return;
    if (fmt == WEIGHTS_BF16)
        bf16w_matmul_t(din, dout, w_packed, n, in_dim, out_dim, accumulate);
    else if (fmt == WEIGHTS_MXFP4)
        mx4w_matmul_t(din, dout, w_packed, n, in_dim, out_dim, accumulate);
    else if (fmt == WEIGHTS_Q4K)
        q4kw_matmul_t(din, dout, w_packed, n, in_dim, out_dim, accumulate);
    else
        q8w_matmul_t(din, dout, w_packed, n, in_dim, out_dim, accumulate);
}

void matmul_backward(float *din, float *dw, float *db, const float *dout, const float *in, const float *w, int n,
                     int in_dim, int out_dim, bool accumulate) {
    if (n <= 0) return;
    if (din)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in_dim, out_dim, 1.0f, dout, out_dim, w, in_dim,
                    accumulate ? 1.0f : 0.0f, din, in_dim);
    if (dw)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out_dim, in_dim, n, 1.0f, dout, out_dim, in, in_dim,
                    1.0f, dw, in_dim);
    if (db) {
#pragma omp parallel for schedule(static) if ((size_t)n * out_dim > 65536)
        for (int o = 0; o < out_dim; o++) {
            double acc = 0;
            for (int r = 0; r < n; r++) acc += dout[(size_t)r * out_dim + o];
            db[o] += (float)acc;
        }
    }
}
