/* 8-bit weight matmul benchmark (grpo-rollout --weights q8): q8w_matmul (int8 x
 * int8) through each SIMD kernel this CPU has (AVX-512 VNNI, AVX2; the line
 * above the table names the one q8w_matmul runs) and q8w_matmul_widen
 * (int8 weights widened to float32) against
 * OpenBLAS sgemm on float32 weights, at SmolLM2-135M's shapes, m = 1, 16,
 * 64, 128 rows, all threads. Prints GFLOP/s (2 m k n per call, the
 * equivalent float work) and the weights' effective GB/s (bytes of W read
 * per call / time), after both kernels' error against float64 at one
 * shape. Best of 100 timed batches of >= 2 ms each: on a shared machine
 * short batches are the ones that run undisturbed. A benchmark, not a
 * test: exits 0 unless it cannot run.
 *
 *   build/bench/bench_q8                     (all threads)
 *   OMP_NUM_THREADS=1 build/bench/bench_q8   (the kernels alone) */
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <omp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops/packed_q8.h"
#include "bench_util.h"

enum { SGEMM, Q8_VNNI, Q8_AVX2, Q8_WIDEN, KINDS };
static const char *const kind_names[KINDS] = {"sgemm f32", "q8 vnni", "q8 avx2", "q8 widen"};

typedef struct {
    int m, k, n;
    const float *x, *w;
    const void *wq;
    float *out;
} problem;

static int run_once(int kind, const void *ctx) {
    const problem *p = ctx;
    switch (kind) {
    case SGEMM:
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, p->m, p->n, p->k, 1.0f, p->x, p->k, p->w, p->k, 0.0f,
                    p->out, p->n);
        return 0;
    case Q8_VNNI: return q8w_matmul_kernel(Q8W_VNNI, p->out, p->x, p->wq, NULL, p->m, p->k, p->n) ? 0 : -1;
    case Q8_AVX2: return q8w_matmul_kernel(Q8W_AVX2, p->out, p->x, p->wq, NULL, p->m, p->k, p->n) ? 0 : -1;
    default: return q8w_matmul_widen(p->out, p->x, p->wq, NULL, p->m, p->k, p->n) ? 0 : -1;
    }
}

static int bench_shape(int k, int n) {
    static const int ms[] = {1, 16, 64, 128};
    float *x = malloc(sizeof(float) * 128 * (size_t)k), *w = malloc(sizeof(float) * (size_t)n * k);
    float *out = malloc(sizeof(float) * 128 * (size_t)n);
    void *wq = malloc(q8w_bytes(n, k));
    if (!x || !w || !out || !wq) {
        fprintf(stderr, "bench_q8: cannot allocate the %dx%d problem\n", n, k);
        free(x), free(w), free(out), free(wq);
        return -1;
    }
    for (size_t i = 0; i < (size_t)128 * k; i++) x[i] = (float)((int)(i % 13) - 6) * 0.01f;
    for (size_t i = 0; i < (size_t)n * k; i++) w[i] = (float)((int)(i % 11) - 5) * 0.01f;
    q8w_pack(wq, w, n, k);
    for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
        problem p = {ms[mi], k, n, x, w, wq, out};
        double flop = 2.0 * p.m * k * n;
        printf("k=%-5d n=%-6d m=%-4d", k, n, p.m);
        for (int kind = 0; kind < KINDS; kind++) {
            /* the best of 100 batches of >= 2 ms: short batches find the moments a shared machine is idle */
            double s = bench_best_seconds(run_once, kind, &p, 0.002, 100, 1e30);
            double bytes = kind == SGEMM ? sizeof(float) * (double)n * k : (double)q8w_bytes(n, k);
            if (s < 0)
                printf("  %s: n/a", kind_names[kind]);
            else
                printf("  %s %6.1f GFLOP/s %5.1f GB/s", kind_names[kind], flop / s / 1e9, bytes / s / 1e9);
        }
        printf("\n");
        fflush(stdout);
    }
    free(x), free(w), free(out), free(wq);
    return 0;
}

/* Relative RMS error against float64 x W^T with the unquantized W, of
 * both kernels, at one shape on pseudo-random data (uniform in [-1, 1)):
 * what each path's quantization costs, beside its speed. */
static int error_report(int m, int k, int n) {
    float *x = malloc(sizeof(float) * (size_t)m * k), *w = malloc(sizeof(float) * (size_t)n * k);
    float *out = malloc(sizeof(float) * (size_t)m * n);
    void *wq = malloc(q8w_bytes(n, k));
    int rc = -1;
    if (x && w && out && wq) {
        uint64_t state = 88172645463325252ULL;
        for (size_t i = 0; i < (size_t)m * k + (size_t)n * k; i++) {
            state ^= state << 13, state ^= state >> 7, state ^= state << 17;
            float v = (float)((state >> 11) * 0x1.0p-52 - 1.0);
            if (i < (size_t)m * k) x[i] = v;
            else w[i - (size_t)m * k] = v;
        }
        q8w_pack(wq, w, n, k);
        printf("relative RMS error against float64 x W^T (m=%d k=%d n=%d):", m, k, n);
        for (int widen = 0; widen < 2; widen++) {
            bool ran = true;
            if (widen)
                ran = q8w_matmul_widen(out, x, wq, NULL, m, k, n);
            else
                q8w_matmul(out, x, wq, NULL, m, k, n);
            if (!ran) {
                printf("  %s: n/a", widen ? "q8 widen" : "q8 int8");
                continue;
            }
            double err = 0, ref2 = 0;
            for (int r = 0; r < m; r++)
                for (int c = 0; c < n; c++) {
                    double ref = 0;
                    for (int i = 0; i < k; i++) ref += (double)x[(size_t)r * k + i] * w[(size_t)c * k + i];
                    err += (out[(size_t)r * n + c] - ref) * (out[(size_t)r * n + c] - ref), ref2 += ref * ref;
                }
            printf("  %s %.2e", widen ? "q8 widen" : "q8 int8", sqrt(err / ref2));
        }
        printf("\n");
        rc = 0;
    } else {
        fprintf(stderr, "bench_q8: cannot allocate the error check\n");
    }
    free(x), free(w), free(out), free(wq);
    return rc;
}

int main(void) {
    static const int shapes[][2] = {{576, 576}, {576, 192}, {576, 1536}, {1536, 576}, {576, 49152}};
    printf("q8 weight matmul, %d threads, q8w_matmul runs the %s kernel (GB/s: weight bytes read per second)\n",
           omp_get_max_threads(), q8w_kernel_name(q8w_kernel_used()));
    if (error_report(16, 576, 576) != 0) return 1;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        if (bench_shape(shapes[s][0], shapes[s][1]) != 0) return 1;
    return 0;
}
