/* bf16 weight matmul benchmark (grpo-rollout --weights bf16): bf16w_matmul beside
 * the float32 packed kernel (packed_matmul) and the 8-bit one (q8w_matmul)
 * at SmolLM2-135M's shapes, m = 1, 16, 64, 128 rows, on one thread (the
 * kernels, not the thread pool). Prints GFLOP/s (2 m k n per call) and the
 * weights' effective GB/s (bytes of W read per call / time), bf16's ratio
 * to each, and the AVX-512F emulation that CPUs without AVX512-BF16 run;
 * first the relative RMS error of each against float64 at one shape. Best
 * of up to 100 timed batches of >= 2 ms each within 0.3 s: the machine may
 * be shared, and short batches find its quiet moments. A benchmark, not a
 * test: exits 0 unless it cannot run.
 *
 *   build/bench/bench_bf16 */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "ops/packed.h"
#include "ops/packed_bf16.h"
#include "ops/packed_bf16_kernels.h"
#include "ops/packed_q8.h"

enum { FP32, Q8, BF16, BF16_EMUL, KINDS };
static const char *const kind_names[KINDS] = {"fp32 packed", "q8 int8", "bf16", "bf16 emul"};

typedef struct {
    int m, k, n;
    const float *x, *w, *wf; /* W row-major, and in float32 panels (packed_pack) */
    const void *wq, *wb;     /* q8 and bf16 panels */
    float *out;
} problem;

static int run_once(int kind, const void *ctx) {
    const problem *p = ctx;
    switch (kind) {
    case FP32:
        if (!packed_supported()) return -1;
        packed_matmul(p->out, p->x, p->wf, NULL, p->m, p->k, p->n);
        return 0;
    case Q8: q8w_matmul(p->out, p->x, p->wq, NULL, p->m, p->k, p->n); return 0;
    case BF16: bf16w_matmul(p->out, p->x, p->wb, NULL, p->m, p->k, p->n); return 0;
    default:
#if BF16W_X86
        if (!bf16w_has_avx512f()) return -1;
        bf16w_matmul_avx512f(p->out, p->x, p->wb, NULL, p->m, p->k, p->n);
        return 0;
#else
        return -1;
#endif
    }
}

static double weight_bytes(int kind, int n, int k) {
    return kind == FP32 ? sizeof(float) * (double)packed_floats(n, k)
           : kind == Q8 ? (double)q8w_bytes(n, k)
                        : (double)bf16w_bytes(n, k);
}

/* x, W in every layout, for up to 128 rows; NULL (message printed) without memory. */
static problem *problem_new(int k, int n, int m_max, uint64_t seed) {
    problem *p = calloc(1, sizeof *p);
    float *x = malloc(sizeof(float) * (size_t)m_max * k), *w = malloc(sizeof(float) * (size_t)n * k);
    float *wf = malloc(sizeof(float) * packed_floats(n, k)), *out = malloc(sizeof(float) * (size_t)m_max * n);
    void *wq = malloc(q8w_bytes(n, k)), *wb = malloc(bf16w_bytes(n, k));
    if (!p || !x || !w || !wf || !out || !wq || !wb) {
        fprintf(stderr, "bench_bf16: cannot allocate the %dx%d problem\n", n, k);
        free(p), free(x), free(w), free(wf), free(out), free(wq), free(wb);
        return NULL;
    }
    bench_fill_uniform(x, (size_t)m_max * k, &seed);
    bench_fill_uniform(w, (size_t)n * k, &seed);
    packed_pack(wf, w, n, k);
    q8w_pack(wq, w, n, k);
    bf16w_pack(wb, w, n, k);
    *p = (problem){m_max, k, n, x, w, wf, wq, wb, out};
    return p;
}

static void problem_free(problem *p) {
    if (!p) return;
    free((void *)p->x), free((void *)p->w), free((void *)p->wf);
    free((void *)p->wq), free((void *)p->wb), free(p->out), free(p);
}

static int bench_shape(int k, int n) {
    static const int ms[] = {1, 16, 64, 128};
    problem *p = problem_new(k, n, 128, 88172645463325252ULL);
    if (!p) return -1;
    for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
        p->m = ms[mi];
        double flop = 2.0 * p->m * k * n, s[KINDS];
        printf("k=%-5d n=%-6d m=%-4d", k, n, p->m);
        for (int kind = 0; kind < KINDS; kind++) {
            s[kind] = bench_best_seconds(run_once, kind, p, 0.002, 100, 0.3);
            if (s[kind] < 0)
                printf("  %s: n/a", kind_names[kind]);
            else
                printf("  %s %6.1f GFLOP/s %5.1f GB/s", kind_names[kind], flop / s[kind] / 1e9,
                       weight_bytes(kind, n, k) / s[kind] / 1e9);
        }
        if (s[BF16] > 0 && s[FP32] > 0) printf("  bf16/fp32 %.2fx", s[FP32] / s[BF16]);
        if (s[BF16] > 0 && s[Q8] > 0) printf("  bf16/q8 %.2fx", s[Q8] / s[BF16]);
        printf("\n");
        fflush(stdout);
    }
    problem_free(p);
    return 0;
}

/* Relative RMS error against float64 x W^T with the unrounded operands,
 * on uniform [-1, 1) data: what each format's rounding costs, beside its
 * speed. */
static int error_report(int m, int k, int n) {
    problem *p = problem_new(k, n, m, 0x2545F4914F6CDD1DULL);
    if (!p) return -1;
    printf("relative RMS error against float64 x W^T (m=%d k=%d n=%d):", m, k, n);
    for (int kind = 0; kind < BF16_EMUL; kind++) {
        if (run_once(kind, p) != 0) {
            printf("  %s: n/a", kind_names[kind]);
            continue;
        }
        double err = 0, ref2 = 0;
        for (int r = 0; r < m; r++)
            for (int c = 0; c < n; c++) {
                double ref = 0, got = p->out[(size_t)r * n + c];
                for (int i = 0; i < k; i++) ref += (double)p->x[(size_t)r * k + i] * p->w[(size_t)c * k + i];
                err += (got - ref) * (got - ref), ref2 += ref * ref;
            }
        printf("  %s %.2e", kind_names[kind], sqrt(err / ref2));
    }
    printf("\n");
    problem_free(p);
    return 0;
}

int main(void) {
    static const int shapes[][2] = {{576, 576}, {576, 1536}, {1536, 576}, {576, 49152}};
    omp_set_num_threads(1);
    printf("bf16 weight matmul, 1 thread, bf16w_kernel=%s packed_supported=%d q8w_supported=%d "
           "(GB/s: weight bytes read per second)\n",
           bf16w_kernel(), packed_supported(), q8w_supported());
    if (error_report(16, 576, 576) != 0) return 1;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        if (bench_shape(shapes[s][0], shapes[s][1]) != 0) return 1;
    return 0;
}
