/* lib/ops/packed_tile.{c,h} through the formats' entry points: dX = dY W
 * (+ dX) (q8w_matmul_t, bf16w_matmul_t, mx4w_matmul_t, q4kw_matmul_t) and
 * y = x W^T (+ b) with float32 x (q8w_matmul_f32, bf16w_matmul_f32, and
 * mx4w_matmul and q4kw_matmul, which promise the same numerics from their
 * own kernels), on the packed weights: against a float64 product over the
 * dequantized weights, equal to packed_matmul on those weights (forward),
 * and the same bits on every path (portable, AVX2, AVX-512), thread count
 * and batch composition. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ops/packed.h"
#include "ops/packed_bf16.h"
#include "ops/packed_mxfp4.h"
#include "ops/packed_q4k.h"
#include "ops/packed_q8.h"
#include "packed_fixture.h"

static uint64_t rng_state = 0x13198A2E03707344ULL;
static uint64_t next_u64(void) { return packed_next(&rng_state); }
static float uniform(void) { return packed_uniform(&rng_state); }

static const double U = 0x1.0p-24; /* float32 unit roundoff */

/* ---- the formats ------------------------------------------------------------- */

typedef bool (*run_t_fn)(packed_isa isa, float *dx, const float *dy, const void *w, int m, int k, int n, bool accumulate);
typedef bool (*run_f_fn)(packed_isa isa, float *out, const float *in, const void *w, const float *bias, int m, int k, int n);

typedef struct {
    const char *name;
    int k_block; /* k must be a multiple */
    size_t (*bytes)(int n, int k);
    bool (*make)(void *dst, int n, int k); /* random weights, packed */
    void (*unpack)(float *dst, const void *src, int n, int k);
    run_t_fn run_t;
    run_f_fn run_f;
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
static bool make_q4k(void *dst, int n, int k) { return make_from_floats(dst, n, k, q4kw_pack); }

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
    {"q8", 32, q8w_bytes, make_q8, q8w_unpack, q8w_matmul_t_isa, q8w_matmul_f32_isa},
    {"bf16", 1, bf16w_bytes, make_bf16, bf16w_unpack, bf16w_matmul_t_isa, bf16w_matmul_f32_isa},
    {"mxfp4", 32, mx4w_bytes, make_mx4, mx4w_unpack, mx4w_matmul_t_isa, mx4w_matmul_isa},
    {"q4k", 32, q4kw_bytes, make_q4k, q4kw_unpack, q4kw_matmul_t_isa, q4kw_matmul_isa},
};
enum { FORMATS = sizeof formats / sizeof formats[0] };

/* m, n (W's rows), k (W's columns): m = 1 and past the 6- and 8-row tiles
 * and the 64-row task; n and k each of one column or block, past 16- and
 * 32-column panels and the 128-long chunk, and for bf16 odd and short of a
 * 32-column tile. */
static const int shapes[][3] = {{1, 1, 32},   {1, 200, 64}, {5, 17, 96},  {64, 128, 32}, {65, 129, 160}, {130, 300, 64},
                                {7, 16, 576}, {3, 257, 96}, {13, 47, 1}, {9, 65, 70},   {4, 33, 37},    {70, 40, 288}};
enum { SHAPES = sizeof shapes / sizeof shapes[0] };

/* One product: transposed (dX [m, k] = dY [m, n] W) or forward (y [m, n] = x [m, k] W^T + b). */
typedef struct {
    const format *fmt;
    bool transposed;
    int m, n, k, sum, outs; /* sum, outs: the summed length and the output row's */
    float *in, *start, *bias, *deq, *out;
    void *w;
} fixture;

static void fixture_free(fixture *f) { free(f->in), free(f->start), free(f->bias), free(f->deq), free(f->out), free(f->w); }

static bool fixture_make(fixture *f, const format *fmt, bool transposed, int m, int n, int k) {
    int sum = transposed ? n : k, outs = transposed ? k : n;
    *f = (fixture){fmt, transposed, m, n, k, sum, outs, malloc(sizeof(float) * ((size_t)m * sum + 1)),
                   malloc(sizeof(float) * ((size_t)m * outs + 1)), malloc(sizeof(float) * ((size_t)n + 1)),
                   malloc(sizeof(float) * ((size_t)n * k + 1)), malloc(sizeof(float) * ((size_t)m * outs + PACKED_CANARY)),
                   malloc(fmt->bytes(n, k) + 1)};
    CHECK(f->in && f->start && f->bias && f->deq && f->out && f->w);
    if (!f->in || !f->start || !f->bias || !f->deq || !f->out || !f->w) return false;
    for (size_t i = 0; i < (size_t)m * sum; i++) f->in[i] = i % 13 == 5 ? 0.0f : uniform() * (float)(1 + i % 3);
    for (size_t i = 0; i < (size_t)m * outs; i++) f->start[i] = uniform();
    for (int i = 0; i < n; i++) f->bias[i] = uniform();
    CHECK(fmt->make(f->w, n, k));
    fmt->unpack(f->deq, f->w, n, k);
    return true;
}

/* W's element for summed index s and output index o. */
static double weight(const fixture *f, int s, int o) {
    return f->transposed ? f->deq[(size_t)s * f->k + o] : f->deq[(size_t)o * f->k + s];
}

/* The output (with a canary past it): for accumulate the start, else a pattern. */
static void fill_out(fixture *f, bool accumulate) {
    packed_fill(f->out, (size_t)f->m * f->outs);
    if (accumulate) memcpy(f->out, f->start, sizeof(float) * (size_t)f->m * f->outs);
}
static bool canary_intact(const fixture *f) { return packed_canary_intact(f->out, (size_t)f->m * f->outs); }

/* Variant v: transposed, v = accumulate; forward, v = with bias. */
static bool run(const fixture *f, packed_isa isa, float *out, const float *in, int m, int v) {
    return f->transposed ? f->fmt->run_t(isa, out, in, f->w, m, f->k, f->n, v)
                         : f->fmt->run_f(isa, out, in, f->w, v ? f->bias : NULL, m, f->k, f->n);
}

static bool shape_fits(const format *fmt, const int *shape) { return shape[2] % fmt->k_block == 0; }

static const char *direction(bool transposed) { return transposed ? "dX = dY W" : "y = x W^T"; }

/* ---- tests ------------------------------------------------------------------- */

static void check_float64(fixture *f) {
    for (int v = 0; v < 2; v++) {
        fill_out(f, f->transposed && v);
        CHECK(run(f, packed_isa_best(), f->out, f->in, f->m, v));
        int bad = 0;
        for (int r = 0; r < f->m; r++)
            for (int o = 0; o < f->outs; o++) {
                double start = !v ? 0 : f->transposed ? f->start[(size_t)r * f->outs + o] : f->bias[o], ref = start, mag = fabs(start);
                for (int s = 0; s < f->sum; s++) {
                    double t = f->in[(size_t)r * f->sum + s] * weight(f, s, o);
                    ref += t, mag += fabs(t);
                }
                bad += !(fabs(ref - f->out[(size_t)r * f->outs + o]) <= (f->sum + 1) * U * mag + f->sum * 0x1p-149);
            }
        if (bad) printf("#   %s %s %dx%dx%d variant %d: %d outputs off\n", f->fmt->name, direction(f->transposed), f->m, f->n, f->k, v, bad);
        CHECK_EQ_INT(bad, 0);
        CHECK(canary_intact(f));
    }
}

static int check_paths(fixture *f) {
    int compared = 0;
    size_t outs = (size_t)f->m * f->outs;
    float *ref = malloc(sizeof(float) * outs);
    CHECK(ref != NULL);
    for (int v = 0; ref && v < 2; v++) {
        fill_out(f, f->transposed && v);
        CHECK(run(f, PACKED_SCALAR, f->out, f->in, f->m, v));
        memcpy(ref, f->out, sizeof(float) * outs);
        for (int isa = PACKED_AVX2; isa < PACKED_ISAS; isa++) {
            fill_out(f, f->transposed && v);
            if (!run(f, (packed_isa)isa, f->out, f->in, f->m, v)) {
                CHECK(!packed_isa_has((packed_isa)isa));
                continue;
            }
            bool same = memcmp(ref, f->out, sizeof(float) * outs) == 0;
            if (!same)
                printf("#   %s %s %s %dx%dx%d variant %d differs\n", f->fmt->name, direction(f->transposed),
                       packed_isa_name((packed_isa)isa), f->m, f->n, f->k, v);
            CHECK(same);
            CHECK(canary_intact(f));
            compared++;
        }
        if (!f->transposed && packed_supported()) { /* the float32 packed kernel on the dequantized weights */
            float *panels = malloc(sizeof(float) * packed_floats(f->n, f->k) + 1);
            CHECK(panels != NULL);
            if (panels) {
                packed_pack(panels, f->deq, f->n, f->k);
                packed_matmul(f->out, f->in, panels, v ? f->bias : NULL, f->m, f->k, f->n);
                CHECK(memcmp(ref, f->out, sizeof(float) * outs) == 0);
            }
            free(panels);
        }
    }
    free(ref);
    return compared;
}

/* Calls check on a fixture of every format, direction and shape. */
static int each_fixture(int (*check)(fixture *)) {
    int total = 0;
    for (int fi = 0; fi < FORMATS; fi++)
        for (int t = 0; t < 2; t++)
            for (int s = 0; s < SHAPES; s++) {
                if (!shape_fits(&formats[fi], shapes[s])) continue;
                fixture f;
                if (fixture_make(&f, &formats[fi], t, shapes[s][0], shapes[s][1], shapes[s][2])) total += check(&f);
                fixture_free(&f);
            }
    return total;
}

static int check_float64_counted(fixture *f) {
    check_float64(f);
    return 1;
}

/* Without accumulating; the forward with its bias. */
static bool run_plain(const void *ctx, packed_isa isa, float *out, const float *in, int m) {
    const fixture *f = ctx;
    return run(f, isa, out, in, m, !f->transposed);
}

static void test_invariance(void) {
    TEST("every format, direction and path: the same bits on 1, 2 and 3 threads; a row alone or among other rows equals its row of 150");
    for (int fi = 0; fi < FORMATS; fi++)
        for (int t = 0; t < 2; t++) {
            fixture f;
            if (fixture_make(&f, &formats[fi], t, 150, 300, 96)) {
                char what[64];
                snprintf(what, sizeof what, "%s %s", f.fmt->name, direction(f.transposed));
                packed_check_invariance(run_plain, &f, what, f.in, f.m, f.sum, f.outs, &rng_state);
            }
            fixture_free(&f);
        }
}

static void test_edges(void) {
    TEST("an empty sum: dX is 0 (or unchanged when accumulating), y its bias (or 0); m = 0 writes nothing; every path");
    int wrong = 0;
    for (int fi = 0; fi < FORMATS; fi++) {
        fixture f;
        if (!fixture_make(&f, &formats[fi], true, 3, 1, 64)) return fixture_free(&f);
        float y[3 * 5], bias[5] = {1, -2, 0.5f, 0, 3};
        unsigned char none[1];
        for (int isa = 0; isa < PACKED_ISAS; isa++) {
            fill_out(&f, false);
            if (!f.fmt->run_t((packed_isa)isa, f.out, f.in, f.w, f.m, f.k, 0, false)) continue;
            for (int i = 0; i < f.m * f.k; i++) wrong += f.out[i] != 0.0f || signbit(f.out[i]);
            fill_out(&f, true);
            CHECK(f.fmt->run_t((packed_isa)isa, f.out, f.in, f.w, f.m, f.k, 0, true));
            wrong += memcmp(f.out, f.start, sizeof(float) * (size_t)f.m * f.k) != 0;
            fill_out(&f, false);
            CHECK(f.fmt->run_t((packed_isa)isa, f.out, f.in, f.w, 0, f.k, f.n, false));
            CHECK(f.fmt->run_f((packed_isa)isa, f.out, f.in, f.w, f.bias, 0, f.k, f.n));
            for (int i = 0; i < f.m * f.k; i++) wrong += f.out[i] != f.out[0] || f.out[0] == 0;
            CHECK(canary_intact(&f));
            CHECK(f.fmt->run_f((packed_isa)isa, y, f.in, none, bias, 3, 0, 5));
            for (int i = 0; i < 15; i++) wrong += y[i] != bias[i % 5];
            CHECK(f.fmt->run_f((packed_isa)isa, y, f.in, none, NULL, 3, 0, 5));
            for (int i = 0; i < 15; i++) wrong += y[i] != 0.0f || signbit(y[i]);
        }
        fixture_free(&f);
    }
    CHECK_EQ_INT(wrong, 0);

    TEST("the dispatching entry points run the fastest path; q8w_matmul_widen gives q8w_matmul_f32's bits");
    void (*const entry_t[FORMATS])(float *, const float *, const void *, int, int, int, bool) = {q8w_matmul_t, bf16w_matmul_t,
                                                                                                   mx4w_matmul_t, q4kw_matmul_t};
    void (*const entry_f[FORMATS])(float *, const float *, const void *, const float *, int, int, int) = {
        q8w_matmul_f32, bf16w_matmul_f32, mx4w_matmul, q4kw_matmul};
    for (int fi = 0; fi < FORMATS; fi++)
        for (int t = 0; t < 2; t++) {
            fixture f;
            if (!fixture_make(&f, &formats[fi], t, 9, 70, 64)) return fixture_free(&f);
            float *ref = malloc(sizeof(float) * (size_t)f.m * f.outs);
            CHECK(ref != NULL);
            if (ref) {
                CHECK(run(&f, PACKED_SCALAR, ref, f.in, f.m, t ? 0 : 1));
                if (t)
                    entry_t[fi](f.out, f.in, f.w, f.m, f.k, f.n, false);
                else
                    entry_f[fi](f.out, f.in, f.w, f.bias, f.m, f.k, f.n);
                CHECK(memcmp(ref, f.out, sizeof(float) * (size_t)f.m * f.outs) == 0);
                if (fi == 0 && !t && q8w_matmul_widen(f.out, f.in, f.w, f.bias, f.m, f.k, f.n))
                    CHECK(memcmp(ref, f.out, sizeof(float) * (size_t)f.m * f.outs) == 0);
            }
            free(ref);
            fixture_free(&f);
        }
}

int main(void) {
    printf("# fastest path here: %s\n", packed_isa_name(packed_isa_best()));
    TEST("both directions, every format and shape: float64 over the dequantized W within (s + 1) u (sum |a w| + |start or bias|)");
    each_fixture(check_float64_counted);
    TEST("AVX2 and AVX-512 give the portable path's bits, and the forward packed_matmul's on the dequantized W, every format and shape");
    if (!each_fixture(check_paths)) SKIP("no AVX2 or AVX-512 here: the portable path alone");
    test_invariance();
    test_edges();
    check_end_test();
    return check_failed_tests ? 1 : 0;
}
