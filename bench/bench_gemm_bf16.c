/* The bf16 GEMM (lib/ops/gemm_bf16.c) against OpenBLAS sgemm at the
 * shapes grpo-update runs on SmolLM2-135M (--compute bf16): one
 * micro-batch of R rows (default 1920: 10 sequences of 192 tokens) through
 * a layer's projections, forward (x W^T), backward to the input (dy W) and
 * to the weights (dy^T x), and a 256-row chunk of the LM head (vocabulary
 * 49152). Prints GFLOP/s of each and their ratio, and the ratio of the
 * total time of one layer and of one head chunk. Best of 5 timed batches of
 * >= 20 ms each, all threads (OMP_NUM_THREADS=1: one, timed in CPU seconds,
 * which other load on a shared machine disturbs less). A benchmark, not a test: exits 0 unless it
 * cannot run.
 *
 *   build/bench/bench_gemm_bf16 [ROWS] */
#include <cblas.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include <omp.h>
#include <time.h>

#include "ops/gemm_bf16.h"
#include "util/clock.h"

/* One thread: the process's CPU time, which a shared machine's other load
 * leaves alone; more: wall time. */
static double clock_now(void) {
    if (omp_get_max_threads() > 1) return now_seconds();
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct {
    const char *name;
    bool ta, tb;
    int M, N, K;
    int group; /* 0: a layer, 1: the head chunk */
} shape;

static void run(bool bf16, const shape *s, const float *A, const float *B, float *C) {
    int lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N;
    if (bf16)
        gemm_bf16(s->ta, s->tb, s->M, s->N, s->K, 1.0f, A, lda, B, ldb, 0.0f, C, s->N);
    else
        cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans, s->tb ? CblasTrans : CblasNoTrans, s->M, s->N,
                    s->K, 1.0f, A, lda, B, ldb, 0.0f, C, s->N);
}

static double best_seconds(bool bf16, const shape *s, const float *A, const float *B, float *C) {
    int reps = 1;
    for (;;) {
        double t0 = clock_now();
        for (int r = 0; r < reps; r++) run(bf16, s, A, B, C);
        if (clock_now() - t0 >= 0.02) break;
        reps *= 2;
    }
    double best = 1e30;
    for (int trial = 0; trial < 5; trial++) {
        double t0 = clock_now();
        for (int r = 0; r < reps; r++) run(bf16, s, A, B, C);
        double t = (clock_now() - t0) / reps;
        if (t < best) best = t;
    }
    return best;
}

int main(int argc, char **argv) {
    int R = argc > 1 ? atoi(argv[1]) : 1920;
    if (R <= 0) {
        fprintf(stderr, "usage: bench_gemm_bf16 [ROWS]\n");
        return 64;
    }
    if (!gemm_bf16_supported()) {
        printf("bench_gemm_bf16: no AVX-512 BF16 on this CPU; skipped\n");
        return 0;
    }
    const int d = 576, kv = 192, hid = 1536, V = 49152, H = 256;
    const shape shapes[] = {
        {"fwd q,o", 0, 1, R, d, d, 0},      {"fwd k,v", 0, 1, R, kv, d, 0},     {"fwd gate,up", 0, 1, R, hid, d, 0},
        {"fwd down", 0, 1, R, d, hid, 0},   {"din q,o", 0, 0, R, d, d, 0},      {"din k,v", 0, 0, R, d, kv, 0},
        {"din gate,up", 0, 0, R, d, hid, 0}, {"din down", 0, 0, R, hid, d, 0},  {"dw q,o", 1, 0, d, d, R, 0},
        {"dw k,v", 1, 0, kv, d, R, 0},      {"dw gate,up", 1, 0, hid, d, R, 0}, {"dw down", 1, 0, d, hid, R, 0},
        {"head fwd", 0, 1, H, V, d, 1},     {"head din", 0, 0, H, d, V, 1},     {"head dw", 1, 0, V, d, H, 1},
    };
    /* calls per layer: q,o / k,v / gate,up twice each, down once */
    const int times[] = {2, 2, 2, 1, 2, 2, 2, 1, 2, 2, 2, 1, 1, 1, 1};
    size_t most = (size_t)V * d > (size_t)R * hid ? (size_t)V * d : (size_t)R * hid;
    float *A = malloc(most * sizeof(float)), *B = malloc(most * sizeof(float)), *C = malloc(most * sizeof(float));
    if (!A || !B || !C) {
        fprintf(stderr, "bench_gemm_bf16: out of memory\n");
        return 70;
    }
    for (size_t i = 0; i < most; i++) A[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f, B[i] = A[(i * 7) % most];
    double tot[2][2] = {{0}};
    printf("sgemm (OpenBLAS) against gemm_bf16, %d rows per micro-batch, %d threads\n", R, omp_get_max_threads());
    printf("  %-12s %6s %6s %6s %10s %10s %7s\n", "op", "M", "N", "K", "sgemm GF/s", "bf16 GF/s", "ratio");
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const shape *s = &shapes[i];
        double flops = 2.0 * s->M * s->N * s->K;
        double t32 = best_seconds(false, s, A, B, C), t16 = best_seconds(true, s, A, B, C);
        tot[s->group][0] += times[i] * t32, tot[s->group][1] += times[i] * t16;
        printf("  %-12s %6d %6d %6d %10.1f %10.1f %6.2fx\n", s->name, s->M, s->N, s->K, flops / t32 / 1e9,
               flops / t16 / 1e9, t32 / t16);
    }
    printf("kv layer sgemm_s=%.4f bf16_s=%.4f ratio=%.2f\n", tot[0][0], tot[0][1], tot[0][0] / tot[0][1]);
    printf("kv head sgemm_s=%.4f bf16_s=%.4f ratio=%.2f\n", tot[1][0], tot[1][1], tot[1][0] / tot[1][1]);
    free(A), free(B), free(C);
    return 0;
}
