/* lib/ops/packed_t.{c,h} through the formats' entry points
 * (q8w_matmul_t, bf16w_matmul_t, mx4w_matmul_t): dX = dY W (+ dX) on the
 * packed weights against a float64 product over the dequantized weights,
 * and the same bits on every path (portable, AVX2, AVX-512), thread count
 * and batch composition. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ops/packed_bf16.h"
#include "ops/packed_mxfp4.h"
#include "ops/packed_q8.h"
#include "packed_fixture.h"

static uint64_t rng_state = 0x13198A2E03707344ULL;
static uint64_t next_u64(void) { return packed_next(&rng_state); }
static float uniform(void) { return packed_uniform(&rng_state); }

static const double U = 0x1.0p-24; /* float32 unit roundoff */

/* ---- the formats ------------------------------------------------------------- */

typedef struct {
    const char *name;
    int k_block; /* k must be a multiple */
    size_t (*bytes)(int n, int k);
    bool (*make)(void *dst, int n, int k); /* random weights, packed */
    void (*unpack)(float *dst, const void *src, int n, int k);
    bool (*run)(packed_isa isa, float *dx, const float *dy, const void *w, int m, int k, int n, bool accumulate);
} format;

/* Random floats (a few all-zero blocks) through the format's quantizer. */
static bool make_from_floats(void *dst, int n, int k, void (*pack)(void *, const float *, int, int)) {
    float *w = malloc(sizeof(float) * ((size_t)n * k + 1));
    if (!w) return false;
    for (size_t i = 0; i < (size_t)n * k; i++) w[i] = (i / 32) % 7 == 3 ? 0.0f : uniform() * (float)(1 + i % 4);
    pack(dst, w, n, k);
    free(w);
    return true;
}
static bool make_q8(void *dst, int n, int k) { return make_from_floats(dst, n, k, q8w_pack); }
static bool make_bf16(void *dst, int n, int k) { return make_from_floats(dst, n, k, bf16w_pack); }

/* Random GGUF MXFP4 blocks, every seventh with a subnormal scale. */
static bool make_mx4(void *dst, int n, int k) {
    size_t blocks = (size_t)n * (k / 32);
    unsigned char *b = malloc(blocks * MX4W_GGUF_BYTES + 1);
    if (!b) return false;
    for (size_t i = 0; i < blocks; i++) {
        b[i * MX4W_GGUF_BYTES] = (unsigned char)(i % 7 == 2 ? i % 2 : 118 + next_u64() % 14);
        for (int j = 1; j < MX4W_GGUF_BYTES; j++) b[i * MX4W_GGUF_BYTES + j] = (unsigned char)next_u64();
    }
    mx4w_pack_gguf(dst, b, n, k);
    free(b);
    return true;
}

static const format formats[] = {
    {"q8", 32, q8w_bytes, make_q8, q8w_unpack, q8w_matmul_t_isa},
    {"bf16", 1, bf16w_bytes, make_bf16, bf16w_unpack, bf16w_matmul_t_isa},
    {"mxfp4", 32, mx4w_bytes, make_mx4, mx4w_unpack, mx4w_matmul_t_isa},
};
enum { FORMATS = sizeof formats / sizeof formats[0] };

/* m, n (W's rows: the sum), k (dX's columns): m = 1 and past the 6- and
 * 8-row tiles and the 64-row task; n of one column, past 16- and 32-column
 * panels and the 128-column chunk; k of one block and many, and for bf16
 * odd and short of a 32-column tile. */
static const int shapes[][3] = {{1, 1, 32},   {1, 200, 64}, {5, 17, 96},  {64, 128, 32}, {65, 129, 160},
                                {130, 300, 64}, {7, 16, 576}, {3, 257, 96}, {13, 47, 1}, {9, 65, 70}, {4, 33, 37}};
enum { SHAPES = sizeof shapes / sizeof shapes[0] };

typedef struct {
    const format *fmt;
    int m, n, k;
    float *dy, *dx0, *deq, *dx;
    void *w;
} fixture;

static void fixture_free(fixture *f) { free(f->dy), free(f->dx0), free(f->deq), free(f->dx), free(f->w); }

static bool fixture_make(fixture *f, const format *fmt, int m, int n, int k) {
    *f = (fixture){fmt, m, n, k, malloc(sizeof(float) * ((size_t)m * n + 1)), malloc(sizeof(float) * ((size_t)m * k + 1)),
                   malloc(sizeof(float) * ((size_t)n * k + 1)), malloc(sizeof(float) * ((size_t)m * k + PACKED_CANARY)),
                   malloc(fmt->bytes(n, k) + 1)};
    CHECK(f->dy && f->dx0 && f->deq && f->dx && f->w);
    if (!f->dy || !f->dx0 || !f->deq || !f->dx || !f->w) return false;
    for (size_t i = 0; i < (size_t)m * n; i++) f->dy[i] = i % 13 == 5 ? 0.0f : uniform() * (float)(1 + i % 3);
    for (size_t i = 0; i < (size_t)m * k; i++) f->dx0[i] = uniform();
    CHECK(fmt->make(f->w, n, k));
    fmt->unpack(f->deq, f->w, n, k);
    return true;
}

/* dx = dx0 (accumulate) or a pattern (not), with CANARY floats past it. */
static void fill_dx(fixture *f, bool accumulate) {
    packed_fill(f->dx, (size_t)f->m * f->k);
    if (accumulate) memcpy(f->dx, f->dx0, sizeof(float) * (size_t)f->m * f->k);
}
static bool canary_intact(const fixture *f) { return packed_canary_intact(f->dx, (size_t)f->m * f->k); }

static bool shape_fits(const format *fmt, const int *shape) { return shape[2] % fmt->k_block == 0; }

/* ---- tests ------------------------------------------------------------------- */

static void test_float64(void) {
    TEST("dX = dY W (+ dX) equals float64 dY @ unpack(W) within (n + 1) u (sum |dy w| + |dx|), every format and shape");
    for (int fi = 0; fi < FORMATS; fi++)
        for (int s = 0; s < SHAPES; s++) {
            if (!shape_fits(&formats[fi], shapes[s])) continue;
            fixture f;
            if (!fixture_make(&f, &formats[fi], shapes[s][0], shapes[s][1], shapes[s][2])) return fixture_free(&f);
            for (int acc = 0; acc < 2; acc++) {
                fill_dx(&f, acc);
                CHECK(f.fmt->run(packed_isa_best(), f.dx, f.dy, f.w, f.m, f.k, f.n, acc));
                int bad = 0;
                for (int r = 0; r < f.m; r++)
                    for (int i = 0; i < f.k; i++) {
                        double start = acc ? f.dx0[(size_t)r * f.k + i] : 0, ref = start, mag = fabs(start);
                        for (int c = 0; c < f.n; c++) {
                            double t = (double)f.dy[(size_t)r * f.n + c] * f.deq[(size_t)c * f.k + i];
                            ref += t, mag += fabs(t);
                        }
                        bad += !(fabs(ref - f.dx[(size_t)r * f.k + i]) <= (f.n + 1) * U * mag + f.n * 0x1p-149);
                    }
                if (bad) printf("#   %s %dx%dx%d accumulate %d: %d outputs off\n", f.fmt->name, f.m, f.n, f.k, acc, bad);
                CHECK_EQ_INT(bad, 0);
                CHECK(canary_intact(&f));
            }
            fixture_free(&f);
        }
}

static void test_paths(void) {
    TEST("AVX2 and AVX-512 give the portable path's bits, every format and shape, accumulating or not");
    int compared = 0;
    for (int fi = 0; fi < FORMATS; fi++)
        for (int s = 0; s < SHAPES; s++) {
            if (!shape_fits(&formats[fi], shapes[s])) continue;
            fixture f;
            if (!fixture_make(&f, &formats[fi], shapes[s][0], shapes[s][1], shapes[s][2])) return fixture_free(&f);
            float *ref = malloc(sizeof(float) * (size_t)f.m * f.k);
            CHECK(ref != NULL);
            for (int acc = 0; ref && acc < 2; acc++) {
                fill_dx(&f, acc);
                CHECK(f.fmt->run(PACKED_SCALAR, f.dx, f.dy, f.w, f.m, f.k, f.n, acc));
                memcpy(ref, f.dx, sizeof(float) * (size_t)f.m * f.k);
                for (int isa = PACKED_AVX2; isa < PACKED_ISAS; isa++) {
                    fill_dx(&f, acc);
                    if (!f.fmt->run((packed_isa)isa, f.dx, f.dy, f.w, f.m, f.k, f.n, acc)) {
                        CHECK(!packed_isa_has((packed_isa)isa));
                        continue;
                    }
                    bool same = memcmp(ref, f.dx, sizeof(float) * (size_t)f.m * f.k) == 0;
                    if (!same)
                        printf("#   %s %s %dx%dx%d accumulate %d differs\n", f.fmt->name, packed_isa_name((packed_isa)isa),
                               f.m, f.n, f.k, acc);
                    CHECK(same);
                    CHECK(canary_intact(&f));
                    compared++;
                }
            }
            free(ref);
            fixture_free(&f);
        }
    if (!compared) SKIP("no AVX2 or AVX-512 here: the portable path alone");
}

static bool run_t(const void *ctx, packed_isa isa, float *dx, const float *dy, int m) {
    const fixture *f = ctx;
    return f->fmt->run(isa, dx, dy, f->w, m, f->k, f->n, false);
}

static void test_invariance(void) {
    TEST("every format and path: the same bits on 1, 2 and 3 threads; a row alone or among other rows equals its row of 150");
    for (int fi = 0; fi < FORMATS; fi++) {
        fixture f;
        if (fixture_make(&f, &formats[fi], 150, 300, 96))
            packed_check_invariance(run_t, &f, formats[fi].name, f.dy, f.m, f.n, f.k, &rng_state);
        fixture_free(&f);
    }
}

static void test_edges(void) {
    TEST("n = 0: dX is 0, or unchanged when accumulating; m = 0 writes nothing; every format and path");
    int wrong = 0;
    for (int fi = 0; fi < FORMATS; fi++) {
        fixture f;
        if (!fixture_make(&f, &formats[fi], 3, 1, 64)) return fixture_free(&f);
        for (int isa = 0; isa < PACKED_ISAS; isa++) {
            fill_dx(&f, false);
            if (!f.fmt->run((packed_isa)isa, f.dx, f.dy, f.w, f.m, f.k, 0, false)) continue;
            for (int i = 0; i < f.m * f.k; i++) wrong += f.dx[i] != 0.0f || signbit(f.dx[i]);
            fill_dx(&f, true);
            CHECK(f.fmt->run((packed_isa)isa, f.dx, f.dy, f.w, f.m, f.k, 0, true));
            wrong += memcmp(f.dx, f.dx0, sizeof(float) * (size_t)f.m * f.k) != 0;
            fill_dx(&f, false);
            CHECK(f.fmt->run((packed_isa)isa, f.dx, f.dy, f.w, 0, f.k, f.n, false));
            for (int i = 0; i < f.m * f.k; i++) wrong += f.dx[i] != f.dx[0] || f.dx[0] == 0;
            CHECK(canary_intact(&f));
        }
        fixture_free(&f);
    }
    CHECK_EQ_INT(wrong, 0);

    TEST("the dispatching entry points run the fastest path: q8w_matmul_t, bf16w_matmul_t, mx4w_matmul_t");
    void (*const entry[FORMATS])(float *, const float *, const void *, int, int, int, bool) = {q8w_matmul_t, bf16w_matmul_t,
                                                                                                 mx4w_matmul_t};
    for (int fi = 0; fi < FORMATS; fi++) {
        fixture f;
        if (!fixture_make(&f, &formats[fi], 9, 70, 64)) return fixture_free(&f);
        float *ref = malloc(sizeof(float) * (size_t)f.m * f.k);
        CHECK(ref != NULL);
        if (ref) {
            CHECK(f.fmt->run(PACKED_SCALAR, ref, f.dy, f.w, f.m, f.k, f.n, false));
            entry[fi](f.dx, f.dy, f.w, f.m, f.k, f.n, false);
            CHECK(memcmp(ref, f.dx, sizeof(float) * (size_t)f.m * f.k) == 0);
        }
        free(ref);
        fixture_free(&f);
    }
}

int main(void) {
    printf("# fastest path here: %s\n", packed_isa_name(packed_isa_best()));
    test_float64();
    test_paths();
    test_invariance();
    test_edges();
    check_end_test();
    return check_failed_tests ? 1 : 0;
}
