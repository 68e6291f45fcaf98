/* lib/ops/gemm_bf16.c against a float64 product of the bf16-rounded
 * operands: every transpose combination, shapes with partial register
 * tiles, partial panels, odd K and K across blocks, leading dimensions wider
 * than the matrices, alpha and beta; the same bits with 1 and 3 threads.
 * Skipped (reported) on a CPU without AVX-512 BF16. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "check.h"
#include "ops/gemm_bf16.h"
#include "util/half.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static float uniform(void) { /* xorshift: [-1, 1) */
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (float)((rng_state >> 11) * 0x1.0p-52 - 1.0);
}
static double bf(float x) { return bf16_to_f32(f32_to_bf16(x)); }

typedef struct {
    bool ta, tb;
    int M, N, K;
    float alpha, beta;
} gcase;

/* One case: A, B, C with leading dimensions 3 wider than needed and a canary
 * in C's margin. Returns the worst error against the bf16 reference in units
 * of its bound (> 1 fails), and in *vs_f32 the worst relative error against
 * the float32 operands (what rounding to bf16 costs: must be seen). */
static double run_case(const gcase *g, double *vs_f32) {
    int ar = g->ta ? g->K : g->M, ac = g->ta ? g->M : g->K; /* A as stored */
    int br = g->tb ? g->N : g->K, bc = g->tb ? g->K : g->N;
    int lda = ac + 3, ldb = bc + 3, ldc = g->N + 3;
    float *A = malloc(sizeof(float) * (size_t)ar * lda), *B = malloc(sizeof(float) * (size_t)br * ldb);
    float *C = malloc(sizeof(float) * (size_t)g->M * ldc), *C0 = malloc(sizeof(float) * (size_t)g->M * ldc);
    CHECK(A && B && C && C0);
    if (!A || !B || !C || !C0) exit(1);
    for (size_t i = 0; i < (size_t)ar * lda; i++) A[i] = uniform();
    for (size_t i = 0; i < (size_t)br * ldb; i++) B[i] = uniform();
    for (size_t i = 0; i < (size_t)g->M * ldc; i++) C0[i] = g->beta == 0 ? NAN : uniform(); /* beta 0: never read */
    for (int i = 0; i < g->M; i++)
        for (int j = g->N; j < ldc; j++) C0[(size_t)i * ldc + j] = 12345.0f;
    memcpy(C, C0, sizeof(float) * (size_t)g->M * ldc);
    gemm_bf16(g->ta, g->tb, g->M, g->N, g->K, g->alpha, A, lda, B, ldb, g->beta, C, ldc);
    double worst = 0;
    *vs_f32 = 0;
    for (int i = 0; i < g->M; i++) {
        for (int j = 0; j < g->N; j++) {
            double ref = 0, ref32 = 0, mag = 0;
            for (int k = 0; k < g->K; k++) {
                float a = g->ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                float b = g->tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
                ref += bf(a) * bf(b), ref32 += (double)a * b, mag += fabs(bf(a) * bf(b));
            }
            double c0 = g->beta == 0 ? 0 : C0[(size_t)i * ldc + j];
            double want = g->alpha * ref + g->beta * c0, want32 = g->alpha * ref32 + g->beta * c0;
            double got = C[(size_t)i * ldc + j];
            /* float32 sums of K exact products, one more rounding per block of
             * K and for alpha and beta: (K + 8) units of 2^-24 of the magnitudes */
            double bound = (g->K + 8) * 0x1.0p-24 * (fabs(g->alpha) * mag + fabs(g->beta * c0)) + 1e-30;
            double err = isfinite(got) ? fabs(got - want) / bound : INFINITY;
            if (err > worst) worst = err;
            double rel = fabs(got - want32) / (fabs(g->alpha) * mag + fabs(g->beta * c0) + 1e-30);
            if (rel > *vs_f32) *vs_f32 = rel;
        }
        for (int j = g->N; j < ldc; j++)
            if (C[(size_t)i * ldc + j] != 12345.0f) worst = INFINITY; /* the margin was written */
    }
    free(A), free(B), free(C), free(C0);
    return worst;
}

static void test_shapes(void) {
    TEST("gemm_bf16 equals a float64 product of the bf16-rounded operands: every transpose, odd shapes, alpha, beta");
    if (!gemm_bf16_supported()) {
        SKIP("no AVX-512 BF16 on this CPU");
        return;
    }
    const int shapes[][3] = {{1, 1, 1},   {7, 17, 3},    {8, 48, 2},    {9, 49, 31},   {13, 100, 255},
                             {16, 96, 256}, {17, 47, 257}, {130, 200, 600}, {3, 5, 1030}, {64, 1, 64}};
    const float ab[][2] = {{1, 0}, {0.5f, 1}, {-2, 0.25f}, {1, 1}};
    double worst = 0, f32_worst = 0;
    int n = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int t = 0; t < 4; t++) {
            gcase g = {t & 1, t >> 1, shapes[s][0], shapes[s][1], shapes[s][2], ab[n % 4][0], ab[n % 4][1]};
            n++;
            double vs32, w = run_case(&g, &vs32);
            if (w > 1)
                printf("#   ta %d tb %d %dx%dx%d alpha %g beta %g: %.3g of the bound\n", g.ta, g.tb, g.M, g.N, g.K,
                       g.alpha, g.beta, w);
            worst = fmax(worst, w), f32_worst = fmax(f32_worst, vs32);
        }
    printf("#   worst error %.3g of the float32-summation bound; against float32 operands %.3g of the magnitude\n",
           worst, f32_worst);
    CHECK(worst <= 1);
    /* the operands really are bf16: far from the float32 product (2^-9 per operand) */
    CHECK(f32_worst > 1e-4 && f32_worst < 1e-2);
}

static void test_degenerate(void) {
    TEST("gemm_bf16: K = 0 and alpha = 0 scale C by beta (beta 0: C not read); M or N = 0 writes nothing");
    if (!gemm_bf16_supported()) {
        SKIP("no AVX-512 BF16 on this CPU");
        return;
    }
    float A[6] = {1, 2, 3, 4, 5, 6}, B[6] = {1, 1, 1, 1, 1, 1}, C[4] = {1, 2, NAN, 4};
    gemm_bf16(false, false, 2, 2, 0, 1.0f, A, 3, B, 2, 0.0f, C, 2);
    CHECK(C[0] == 0 && C[1] == 0 && C[2] == 0 && C[3] == 0);
    float D[4] = {1, 2, 3, 4};
    gemm_bf16(false, false, 2, 2, 3, 0.0f, A, 3, B, 2, 2.0f, D, 2);
    CHECK(D[0] == 2 && D[1] == 4 && D[2] == 6 && D[3] == 8);
    gemm_bf16(false, false, 0, 2, 3, 1.0f, A, 3, B, 2, 0.0f, D, 2);
    gemm_bf16(false, false, 2, 0, 3, 1.0f, A, 3, B, 2, 0.0f, D, 2);
    CHECK(D[0] == 2 && D[3] == 8);
    /* exact small integers: 1*1 + 2*1 + 3*1 = 6 */
    gemm_bf16(false, false, 2, 2, 3, 1.0f, A, 3, B, 2, 0.0f, D, 2);
    CHECK(D[0] == 6 && D[1] == 6 && D[2] == 15 && D[3] == 15);
}

static void test_threads(void) {
    TEST("gemm_bf16 gives the same bits with 1 and 3 threads (every transpose, several tiles)");
    if (!gemm_bf16_supported()) {
        SKIP("no AVX-512 BF16 on this CPU");
        return;
    }
#ifdef _OPENMP
    int M = 300, N = 250, K = 700;
    size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
    float *A = malloc(sizeof(float) * na), *B = malloc(sizeof(float) * nb);
    float *C1 = malloc(sizeof(float) * nc), *C3 = malloc(sizeof(float) * nc);
    CHECK(A && B && C1 && C3);
    if (!A || !B || !C1 || !C3) return;
    for (size_t i = 0; i < na; i++) A[i] = uniform();
    for (size_t i = 0; i < nb; i++) B[i] = uniform();
    int saved = omp_get_max_threads();
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t >> 1;
        int lda = ta ? M : K, ldb = tb ? K : N;
        for (size_t i = 0; i < nc; i++) C1[i] = C3[i] = (float)i / (float)nc;
        omp_set_num_threads(1);
        gemm_bf16(ta, tb, M, N, K, 0.75f, A, lda, B, ldb, 0.5f, C1, N);
        omp_set_num_threads(3);
        gemm_bf16(ta, tb, M, N, K, 0.75f, A, lda, B, ldb, 0.5f, C3, N);
        CHECK(memcmp(C1, C3, sizeof(float) * nc) == 0);
    }
    omp_set_num_threads(saved);
    free(A), free(B), free(C1), free(C3);
#else
    SKIP("built without OpenMP");
#endif
}

int main(void) {
    test_shapes();
    test_degenerate();
    test_threads();
    return check_done();
}
