/* Matrix products: OpenBLAS's sgemm, and the packed kernel for weights
 * packed once for inference (packed.c). */
#include "ops.h"

#include <cblas.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "blas.h"
#include "packed.h"

/* The training products run as fixed tiles of C, one single-threaded
 * sgemm each (over the whole K), the tiles shared out over the OpenMP
 * threads. OpenBLAS's own threading can change an element's summation order
 * with the thread count (seen on AMD Zen: 2e-6 relative), so the tiles are
 * the same for every --threads and a result depends on the shapes alone.
 * Inside a parallel region of two or more threads the OpenMP OpenBLAS runs on
 * one thread; a region of one thread is what --threads 1 asks for. */
enum { TILE_ROWS = 256, TILE_COLS = 128 };

static int tiles(int n, int per) { return (n + per - 1) / per; }

void gemm(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
          float beta, float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    const int tr = tiles(M, TILE_ROWS), tc = tiles(N, TILE_COLS);
#pragma omp parallel for schedule(dynamic, 1)
    for (int t = 0; t < tr * tc; t++) {
        int r0 = t / tc * TILE_ROWS, c0 = t % tc * TILE_COLS;
        int m = M - r0 < TILE_ROWS ? M - r0 : TILE_ROWS, n = N - c0 < TILE_COLS ? N - c0 : TILE_COLS;
        const float *a = ta ? A + r0 : A + (size_t)r0 * lda, *b = tb ? B + (size_t)c0 * ldb : B + c0;
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, K, alpha, a,
                    lda, b, ldb, beta, C + (size_t)r0 * ldc + c0, ldc);
    }
}

void matmul_forward_tiled(float *out, const float *in, const float *w, const float *bias, int n, int in_dim,
                          int out_dim) {
    if (n <= 0) return;
    if (bias)
        for (int r = 0; r < n; r++) memcpy(out + (size_t)r * out_dim, bias, (size_t)out_dim * sizeof *out);
    gemm(false, true, n, out_dim, in_dim, 1.0f, in, in_dim, w, in_dim, bias ? 1.0f : 0.0f, out, out_dim);
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

void matmul_forward_packed(float *out, const float *in, const float *w_packed, const float *bias, int n, int in_dim,
                           int out_dim) {
    packed_matmul(out, in, w_packed, bias, n, in_dim, out_dim);
}

void matmul_backward(float *din, float *dw, float *db, const float *dout, const float *in, const float *w, int n,
                     int in_dim, int out_dim, bool accumulate) {
    if (n <= 0) return;
    if (din) gemm(false, false, n, in_dim, out_dim, 1.0f, dout, out_dim, w, in_dim, accumulate ? 1.0f : 0.0f, din, in_dim);
    if (dw) gemm(true, false, out_dim, in_dim, n, 1.0f, dout, out_dim, in, in_dim, 1.0f, dw, in_dim);
    if (db) {
#pragma omp parallel for schedule(static) if ((size_t)n * out_dim > 65536)
        for (int o = 0; o < out_dim; o++) {
            double acc = 0;
            for (int r = 0; r < n; r++) acc += dout[(size_t)r * out_dim + o];
            db[o] += (float)acc;
        }
    }
}
