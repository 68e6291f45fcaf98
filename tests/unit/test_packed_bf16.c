/* lib/ops/packed_bf16.{c,h}: the bf16 panel layout, rounding bit for bit
 * as vcvtne2ps2bf16, matmuls against a float64 reference computed from the
 * bf16-rounded x and W, every kernel this CPU runs equal to the portable
 * one bit for bit, and results that do not depend on the thread count or on
 * the other rows. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ops/packed_bf16.h"
#include "ops/packed_bf16_kernels.h"
#include "util/half.h"

#if BF16W_X86
#include <immintrin.h>
#endif

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static uint64_t next_bits(void) { /* xorshift */
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return rng_state;
}
static float uniform(void) { return (float)((next_bits() >> 11) * 0x1.0p-53 - 0.5); } /* [-0.5, 0.5) */
static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static const double U = 0x1.0p-24; /* float32 unit roundoff */

/* The reference rounding the header states: f32_to_bf16, subnormals flushed. */
static uint16_t reference_round(float f) {
    return (bits_of(f) & 0x7F800000u) == 0 ? (uint16_t)(bits_of(f) >> 16 & 0x8000u) : f32_to_bf16(f);
}
static float rounded(float f) { return bf16_to_f32(reference_round(f)); }

/* Random floats that stress rounding: any bits, exponents at both ends,
 * exact ties and near-ties, signed zeros, infinities and NaNs. */
static float edge_float(void) {
    static const uint32_t edges[] = {0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x00800000, 0x00807FFF,
                                     0x00808000, 0x7F7FFFFF, 0x7F7F7FFF, 0x7F7F8000, 0x7F800000, 0xFF800000,
                                     0x7F800001, 0xFFBFFFFF, 0x7FC00000, 0x3F808000, 0x3F818000, 0x3F807FFF};
    uint32_t r = (uint32_t)next_bits();
    switch (next_bits() % 4) {
    case 0: return from_bits(r);
    case 1:
        return from_bits(edges[next_bits() % (sizeof edges / sizeof edges[0])] ^ (next_bits() % 2 ? r & 0xFFFF : 0));
    case 2: return from_bits((r & 0x80FFFFFFu) | (next_bits() % 2 ? 0x7F000000u : 0)); /* exponent 0/1 or 254/255 */
    default: return from_bits((r & 0xFFFF0000u) | 0x8000u | (next_bits() % 2 ? 0 : r & 0x7FFF)); /* ties */
    }
}

#if BF16W_X86
__attribute__((target("avx512f,avx512bf16"))) static void hardware_round(const float *x, uint16_t *out) {
    __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + 16), _mm512_loadu_ps(x));
    memcpy(out, &v, 64);
}
#endif

static void test_rounding(void) {
    TEST("bf16w_round is f32_to_bf16 with subnormals flushed, and vcvtne2ps2bf16 bit for bit, on 4M edge-heavy floats");
    int bad = 0, hardware_bad = 0;
    for (int batch = 0; batch < 1 << 17; batch++) {
        float x[32];
        uint16_t ours[32];
        for (int i = 0; i < 32; i++) x[i] = edge_float(), ours[i] = bf16w_round(x[i]);
        for (int i = 0; i < 32; i++) bad += ours[i] != reference_round(x[i]);
#if BF16W_X86
        if (bf16w_native()) {
            uint16_t hw[32];
            hardware_round(x, hw);
            hardware_bad += memcmp(hw, ours, sizeof hw) != 0;
        }
#endif
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(hardware_bad, 0);
    if (!bf16w_native()) SKIP("no AVX512-BF16: only the reference definition checked");
}

typedef void (*matmul_fn)(float *, const float *, const void *, const float *, int, int, int);
typedef struct {
    const char *name;
    matmul_fn fn;
} kernel;

/* bf16w_matmul and every SIMD kernel this CPU runs, scalar last. */
static int kernels(kernel out[5]) {
    int n = 0;
    out[n++] = (kernel){"bf16w_matmul", bf16w_matmul};
#if BF16W_X86
    if (bf16w_native()) out[n++] = (kernel){"avx512bf16", bf16w_matmul_avx512bf16};
    if (bf16w_has_avx512f()) out[n++] = (kernel){"avx512f", bf16w_matmul_avx512f};
    if (bf16w_has_avx2()) out[n++] = (kernel){"avx2", bf16w_matmul_avx2};
#endif
    out[n++] = (kernel){"scalar", bf16w_matmul_scalar};
    return n;
}

static void test_identity_rounding(void) {
    TEST("every kernel rounds x as bf16w_round: x @ I gives the rounded x, finite edge values and tails");
    enum { M = 3, K = 77 }; /* 2 x 32 + a tail of 13, odd */
    static float eye[K * K], x[M * K], out[M * K];
    unsigned char *packed = malloc(bf16w_bytes(K, K));
    CHECK(packed != NULL);
    if (!packed) return;
    for (int i = 0; i < K; i++) eye[i * K + i] = 1.0f;
    bf16w_pack(packed, eye, K, K);
    kernel ks[5];
    int nk = kernels(ks), bad = 0;
    for (int trial = 0; trial < 2000; trial++) {
        for (int i = 0; i < M * K; i++) {
            do x[i] = edge_float();
            while (!isfinite(rounded(x[i]))); /* an infinity times 0 is NaN in every other column */
        }
        for (int kk = 0; kk < nk; kk++) {
            ks[kk].fn(out, x, packed, NULL, M, K, K);
            for (int i = 0; i < M * K; i++) bad += out[i] != rounded(x[i]); /* -0 + +0 is +0: == */
        }
    }
    CHECK_EQ_INT(bad, 0);
    free(packed);
}

static void test_layout(void) {
    TEST("bf16w_bytes: 32-column panels of pairs of k, 128 bytes a pair; the element order of the header");
    CHECK_EQ_INT(bf16w_bytes(32, 2), 128);
    CHECK_EQ_INT(bf16w_bytes(33, 3), 2 * 2 * 128);
    CHECK_EQ_INT(bf16w_bytes(49152, 576), (size_t)1536 * 288 * 128);
    enum { N = 35, K = 5 };
    float w[N * K];
    for (int i = 0; i < N * K; i++) w[i] = (float)(i + 1); /* exact in bf16: below 256 */
    size_t bytes = bf16w_bytes(N, K);
    unsigned char *packed = malloc(bytes), *expect = calloc(bytes, 1);
    CHECK(packed && expect);
    if (packed && expect) {
        memset(packed, 0xAB, bytes); /* padding must come out zero */
        bf16w_pack(packed, w, N, K);
        for (int col = 0; col < N; col++)
            for (int i = 0; i < K; i++) {
                uint16_t v = f32_to_bf16(w[col * K + i]);
                size_t at =
                    (size_t)(col / 32) * 3 * 128 + (size_t)(i / 2) * 128 + (size_t)(col % 32) * 4 + (size_t)(i % 2) * 2;
                expect[at] = (unsigned char)(v & 0xFF), expect[at + 1] = (unsigned char)(v >> 8);
            }
        CHECK(memcmp(packed, expect, bytes) == 0);
    }
    free(packed), free(expect);
}

static void test_round_trip(void) {
    TEST("bf16w_unpack(bf16w_pack(W)) is W rounded by f32_to_bf16 with subnormals flushed, exactly");
    static const int sizes[][2] = {{1, 1}, {1, 2}, {33, 3}, {64, 577}, {100, 64}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int n = sizes[s][0], k = sizes[s][1];
        float *w = malloc(sizeof(float) * (size_t)n * k), *back = malloc(sizeof(float) * (size_t)n * k);
        void *packed = malloc(bf16w_bytes(n, k));
        CHECK(w && back && packed);
        if (w && back && packed) {
            for (int i = 0; i < n * k; i++) w[i] = edge_float();
            bf16w_pack(packed, w, n, k);
            bf16w_unpack(back, packed, n, k);
            int bad = 0;
            for (int i = 0; i < n * k; i++) bad += bits_of(back[i]) != (uint32_t)reference_round(w[i]) << 16;
            CHECK_EQ_INT(bad, 0);
        }
        free(w), free(back), free(packed);
    }
}

/* Shapes: m = 1, 2 and 3 (the tiles of several panels), m not a multiple of
 * the 12-row tile (13, 37, 64, 130: tiles of near-equal rows), n not a
 * multiple of 32 nor of 4 panels, k = 2, odd k, k that lets the scratch
 * hold only 16 rows (several passes of rows) and k = BF16W_MAX_K (one row a
 * pass). */
static const int shapes[][3] = {{1, 1, 2},      {1, 49, 64},    {2, 130, 100}, {3, 200, 40},
                                {7, 17, 3},     {12, 32, 2},    {13, 33, 577}, {130, 40, 64},
                                {64, 192, 576}, {37, 20, 4001}, {2, 33, 65536}};
enum { SHAPES = sizeof shapes / sizeof shapes[0], CANARY = 16 };

typedef struct {
    int m, n, k;
    float *x, *w, *bias, *out, *xr, *wr; /* xr, wr: x and W rounded to bf16 */
    void *packed;
} fixture;

static void fixture_free(fixture *f) {
    free(f->x), free(f->w), free(f->bias), free(f->out), free(f->xr), free(f->wr), free(f->packed);
}

/* Random x and W with a few zeros and subnormals (flushed by the
 * rounding), bias; W packed. False (and a failed check) without memory. */
static bool fixture_make(fixture *f, int m, int n, int k) {
    size_t xs = (size_t)m * k, ws = (size_t)n * k;
    *f = (fixture){.m = m, .n = n, .k = k};
    f->x = malloc(sizeof(float) * xs), f->xr = malloc(sizeof(float) * xs), f->bias = malloc(sizeof(float) * n);
    f->w = malloc(sizeof(float) * ws), f->wr = malloc(sizeof(float) * ws), f->packed = malloc(bf16w_bytes(n, k));
    f->out = malloc(sizeof(float) * ((size_t)m * n + CANARY));
    CHECK(f->x && f->w && f->bias && f->out && f->xr && f->wr && f->packed);
    if (!f->x || !f->w || !f->bias || !f->out || !f->xr || !f->wr || !f->packed) return false;
    for (size_t i = 0; i < xs; i++) f->x[i] = i % 53 == 7 ? 0x1p-130f : i % 29 == 3 ? 0.0f : uniform();
    for (size_t i = 0; i < ws; i++) f->w[i] = i % 31 == 5 ? -0x1p-140f : uniform();
    for (int i = 0; i < n; i++) f->bias[i] = uniform();
    for (size_t i = 0; i < xs; i++) f->xr[i] = rounded(f->x[i]);
    bf16w_pack(f->packed, f->w, n, k);
    bf16w_unpack(f->wr, f->packed, n, k);
    return true;
}

static void fill_out(fixture *f) { memset(f->out, 0x7f, sizeof(float) * ((size_t)f->m * f->n + CANARY)); }
static bool canary_intact(const fixture *f) {
    for (int i = 0; i < CANARY; i++)
        if (bits_of(f->out[(size_t)f->m * f->n + i]) != 0x7f7f7f7fu) return false;
    return true;
}

/* |error| against float64 of the rounded operands: the products of two
 * bf16 are exact in float32, so only the k additions (plus the bias add)
 * round, once each: <= (k + 1) u (sum |x w| + |bias|), the textbook bound
 * for recursive summation. */
static void test_matmul_reference(void) {
    TEST("bf16w_matmul equals float64 bf16(x) @ bf16(W)^T within the float32 summation bound, every shape class");
    for (int s = 0; s < SHAPES; s++) {
        fixture f;
        if (!fixture_make(&f, shapes[s][0], shapes[s][1], shapes[s][2])) return fixture_free(&f);
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            fill_out(&f);
            bf16w_matmul(f.out, f.x, f.packed, with_bias ? f.bias : NULL, f.m, f.k, f.n);
            int bad = 0;
            for (int r = 0; r < f.m; r++)
                for (int c = 0; c < f.n; c++) {
                    const float *x = f.xr + (size_t)r * f.k, *w = f.wr + (size_t)c * f.k;
                    double bias = with_bias ? f.bias[c] : 0, ref = bias, mag = fabs(bias);
                    for (int i = 0; i < f.k; i++) ref += (double)x[i] * w[i], mag += fabs((double)x[i] * w[i]);
                    if (!(fabs(ref - f.out[(size_t)r * f.n + c]) <= (f.k + 1) * U * mag + 1e-300)) bad++;
                }
            if (bad) printf("#   %dx%dx%d bias %d: %d outputs off\n", f.m, f.n, f.k, with_bias, bad);
            CHECK_EQ_INT(bad, 0);
            CHECK(canary_intact(&f));
        }
        fixture_free(&f);
    }
}

static void test_kernels_agree(void) {
    TEST("every kernel this CPU runs (avx512bf16, avx512f, avx2) equals bf16w_matmul_scalar bit for bit, every shape class");
    kernel ks[5];
    int nk = kernels(ks);
    for (int s = 0; s < SHAPES; s++) {
        fixture f;
        if (!fixture_make(&f, shapes[s][0], shapes[s][1], shapes[s][2])) return fixture_free(&f);
        float *scalar = malloc(sizeof(float) * (size_t)f.m * f.n);
        CHECK(scalar != NULL);
        for (int with_bias = 0; scalar && with_bias < 2; with_bias++) {
            const float *bias = with_bias ? f.bias : NULL;
            bf16w_matmul_scalar(scalar, f.x, f.packed, bias, f.m, f.k, f.n);
            for (int kk = 0; kk < nk - 1; kk++) {
                fill_out(&f);
                ks[kk].fn(f.out, f.x, f.packed, bias, f.m, f.k, f.n);
                bool same = memcmp(scalar, f.out, sizeof(float) * (size_t)f.m * f.n) == 0;
                if (!same) printf("#   %s differs at %dx%dx%d bias %d\n", ks[kk].name, f.m, f.n, f.k, with_bias);
                CHECK(same);
                CHECK(canary_intact(&f));
            }
        }
        free(scalar);
        fixture_free(&f);
    }
    if (nk < 5) SKIP("not every SIMD kernel runs on this CPU: those that do were compared");
}

static void test_degenerate(void) {
    TEST("k = 0 gives the bias (or +0) on every kernel; m = 0 and n = 0 write nothing");
    enum { M = 3, N = 21 };
    float x[M], bias[N], out[M * N + CANARY];
    unsigned char no_weights[1];
    for (int c = 0; c < N; c++) bias[c] = (float)c - 3.5f;
    kernel ks[5];
    int nk = kernels(ks), wrong = 0;
    for (int kk = 0; kk < nk; kk++)
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            memset(out, 0x7f, sizeof out);
            ks[kk].fn(out, x, no_weights, with_bias ? bias : NULL, M, 0, N);
            for (int i = 0; i < M * N; i++) wrong += bits_of(out[i]) != bits_of(with_bias ? bias[i % N] : 0.0f);
            for (int i = M * N; i < M * N + CANARY; i++) wrong += bits_of(out[i]) != 0x7f7f7f7fu;
        }
    CHECK_EQ_INT(wrong, 0);
    memset(out, 0x7f, sizeof out);
    bf16w_matmul(out, x, no_weights, bias, 0, 1, N);
    bf16w_matmul(out, x, no_weights, bias, M, 1, 0);
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++) wrong += bits_of(out[i]) != 0x7f7f7f7fu;
    CHECK_EQ_INT(wrong, 0);
}

static void run_with(const kernel *kn, const fixture *f, const float *x, int threads, float *out, int m) {
    int before = omp_get_max_threads();
    omp_set_num_threads(threads);
    kn->fn(out, x, f->packed, f->bias, m, f->k, f->n);
    omp_set_num_threads(before);
}

static void test_invariance(void) {
    TEST("every kernel: the same bits on 1, 2 and 3 threads; row r alone (or with one neighbour) equals row r of 64");
    fixture f;
    if (!fixture_make(&f, 64, 200, 577)) return fixture_free(&f);
    size_t outs = (size_t)f.m * f.n;
    float *one = malloc(sizeof(float) * outs), *other = malloc(sizeof(float) * outs);
    CHECK(one && other);
    kernel ks[5];
    int nk = kernels(ks);
    for (int kk = 0; one && other && kk < nk; kk++) {
        run_with(&ks[kk], &f, f.x, 1, one, f.m);
        for (int threads = 2; threads <= 3; threads++) {
            run_with(&ks[kk], &f, f.x, threads, other, f.m);
            CHECK(memcmp(one, other, sizeof(float) * outs) == 0);
        }
        int differing = 0;
        for (int r = 0; r < f.m; r++) { /* m = 1 and m = 2 take the four-panel tiles */
            int rows = r + 1 < f.m ? 2 : 1;
            run_with(&ks[kk], &f, f.x + (size_t)r * f.k, 2, other, rows);
            differing += memcmp(other, one + (size_t)r * f.n, sizeof(float) * f.n * rows) != 0;
        }
        if (differing) printf("#   %s: %d rows differ\n", ks[kk].name, differing);
        CHECK_EQ_INT(differing, 0);
    }
    free(one), free(other);
    fixture_free(&f);
}

static void test_k_contract(void) {
    TEST("k > BF16W_MAX_K breaks the callers' contract: the assertion aborts");
    float x = 0, out = 0;
    CHECK_ABORTS(bf16w_matmul(&out, &x, &x, NULL, 1, BF16W_MAX_K + 1, 1), "k <= BF16W_MAX_K");
}

int main(void) {
    printf("# bf16w_kernel: %s\n", bf16w_kernel());
    test_rounding();
    test_identity_rounding();
    test_layout();
    test_round_trip();
    test_matmul_reference();
    test_kernels_agree();
    test_degenerate();
    test_invariance();
    test_k_contract();
    check_end_test();
    return check_failed_tests ? 1 : 0;
}
