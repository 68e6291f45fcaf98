/* lib/ops/packed_q8.{c,h}: the 8-bit weight layout and matmuls against
 * float64 references computed from what the kernels' semantics define (the
 * quantized activations and weights for q8w_matmul, the dequantized
 * weights for q8w_matmul_widen), GGUF Q8_0 blocks taken over verbatim,
 * every kernel this CPU has (AVX-512 VNNI, AVX2) equal to the portable
 * fallback bit for bit, and results that do not depend on the thread count
 * or on the other rows. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "formats/gguf_quant.h"
#include "formats/quant.h"
#include "ops/packed_q8.h"
#include "util/half.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static float uniform(void) { /* xorshift: [-0.5, 0.5) */
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (float)((rng_state >> 11) * 0x1.0p-53 - 0.5);
}

static const double U = 0x1.0p-24; /* float32 unit roundoff */

/* Shapes: m = 1, m not a multiple of the 4-row block nor of the 64-row
 * chunk, n not a multiple of the 16-column panel, k of one and many blocks;
 * every row remainder of the VNNI tiles (1-3 rows past a multiple of 4)
 * beside 1-5 panels per thread, and groups of 4 panels cut short. */
static const int shapes[][3] = {{1, 1, 32},   {1, 49, 64},   {7, 17, 96},   {4, 16, 32},   {9, 33, 160},
                                {130, 40, 64}, {64, 192, 576}, {2, 113, 96}, {3, 65, 32},  {6, 80, 64},
                                {5, 129, 64},  {70, 97, 128}};
enum { SHAPES = sizeof shapes / sizeof shapes[0], CANARY = 16 };

typedef struct {
    int m, n, k;
    float *x, *w, *bias, *deq, *out;
    void *packed;
} fixture;

static void fixture_free(fixture *f) {
    free(f->x), free(f->w), free(f->bias), free(f->deq), free(f->out), free(f->packed);
}

/* Random x, W (a few blocks of each all zero, to cover d = 0), bias; W packed and
 * dequantized. False (and a failed check) when memory runs out. */
static bool fixture_make(fixture *f, int m, int n, int k) {
    *f = (fixture){m, n, k, malloc(sizeof(float) * (size_t)m * k), malloc(sizeof(float) * (size_t)n * k),
                   malloc(sizeof(float) * (size_t)n), malloc(sizeof(float) * (size_t)n * k),
                   malloc(sizeof(float) * ((size_t)m * n + CANARY)), malloc(q8w_bytes(n, k))};
    CHECK(f->x && f->w && f->bias && f->deq && f->out && f->packed);
    if (!f->x || !f->w || !f->bias || !f->deq || !f->out || !f->packed) return false;
    for (size_t i = 0; i < (size_t)m * k; i++) f->x[i] = (i / 32) % 11 == 4 ? 0.0f : uniform();
    for (size_t i = 0; i < (size_t)n * k; i++) f->w[i] = (i / 32) % 7 == 3 ? 0.0f : uniform();
    for (int i = 0; i < n; i++) f->bias[i] = uniform();
    q8w_pack(f->packed, f->w, n, k);
    q8w_unpack(f->deq, f->packed, n, k);
    return true;
}

/* out filled with a pattern, plus CANARY floats past it that must survive. */
static void fill_out(fixture *f) { memset(f->out, 0x7f, sizeof(float) * ((size_t)f->m * f->n + CANARY)); }
static bool canary_intact(const fixture *f) {
    for (int i = 0; i < CANARY; i++) {
        uint32_t bits;
        memcpy(&bits, f->out + (size_t)f->m * f->n + i, sizeof bits);
        if (bits != 0x7f7f7f7fu) return false;
    }
    return true;
}

static void test_layout(void) {
    TEST("q8w_bytes: 16-column panels of k/32 blocks in pairs, a 64-byte line of f16 scales then 2 x 512 quants");
    CHECK_EQ_INT(q8w_bytes(16, 32), 64 + 512);
    CHECK_EQ_INT(q8w_bytes(17, 64), 2 * (64 + 2 * 512));
    CHECK_EQ_INT(q8w_bytes(16, 96), 128 + 3 * 512);
    CHECK_EQ_INT(q8w_bytes(49152, 576), (size_t)3072 * (576 + 18 * 512));

    TEST("the layout byte by byte: pair b/2 at 1088(b/2), scale bits at 32(b%2) + 2j, quant i at 64 + 512(b%2) + 64(i/4) + 4j + i%4, pad zero");
    enum { N = 17, K = 96, NB = K / 32, PANEL = 128 + NB * 512 };
    unsigned char blocks[N * NB * Q8_0_BYTES], packed[2 * PANEL];
    for (int c = 0; c < N; c++)
        for (int b = 0; b < NB; b++) {
            unsigned char *block = blocks + ((size_t)c * NB + b) * Q8_0_BYTES;
            block[0] = (unsigned char)(c * 3 + b), block[1] = (unsigned char)(0x10 + b); /* distinct f16 bits */
            for (int i = 0; i < 32; i++) block[2 + i] = (unsigned char)(c * 7 + b * 32 + i);
        }
    CHECK_EQ_INT(q8w_bytes(N, K), sizeof packed);
    memset(packed, 0xAB, sizeof packed);
    q8w_pack_q8_0(packed, blocks, N, K);
    int wrong = 0;
    for (int c = 0; c < 2 * 16; c++) /* column 17..31: zero scales and quants */
        for (int b = 0; b < NB; b++) {
            const unsigned char *panel = packed + (size_t)(c / 16) * PANEL, *block = blocks + ((size_t)c * NB + b) * Q8_0_BYTES;
            int j = c % 16;
            const unsigned char *pair = panel + 1088 * (b / 2);
            for (int t = 0; t < 2; t++) wrong += pair[32 * (b % 2) + 2 * j + t] != (c < N ? block[t] : 0);
            for (int i = 0; i < 32; i++)
                wrong += pair[64 + 512 * (b % 2) + 64 * (i / 4) + 4 * j + i % 4] != (c < N ? block[2 + i] : 0);
        }
    for (int p = 0; p < 2; p++) /* the third block's line of scales: 32 bytes of padding */
        for (int i = 1088 + 32; i < 1088 + 64; i++) wrong += packed[(size_t)p * PANEL + i] != 0;
    CHECK_EQ_INT(wrong, 0);
}

/* Every element back within half a quantization step of the original: with
 * d32 = max|w| / 127 (float32) and d = d32 rounded to f16, q = round(w /
 * d32) and the unpacked value q * d, so |w - q d| <= d32 / 2 + |q| |d32 - d|
 * (the second term is the f16 rounding of the scale; a few ulps of slack
 * for the float32 division). The values are integer multiples of d. */
static void test_round_trip(void) {
    TEST("q8w_unpack(q8w_pack(W)) is within half a Q8_0 step of W, on the f16 scale's grid");
    for (int s = 0; s < SHAPES; s++) {
        fixture f;
        if (!fixture_make(&f, 1, shapes[s][1], shapes[s][2])) return fixture_free(&f);
        int bad = 0;
        for (int c = 0; c < f.n; c++)
            for (int b = 0; b < f.k / 32; b++) {
                const float *w = f.w + (size_t)c * f.k + b * 32, *deq = f.deq + (size_t)c * f.k + b * 32;
                float amax = 0;
                for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(w[i]));
                float d32 = amax / 127.0f, d = f16_to_f32(f32_to_f16(d32));
                for (int i = 0; i < 32; i++) {
                    double q = d != 0 ? deq[i] / (double)d : 0;
                    double bound = d32 / 2.0 * (1 + 1e-6) + fabs(q) * fabs((double)d32 - d);
                    if (q != round(q) || fabs(q) > 127 || fabs((double)w[i] - deq[i]) > bound) bad++;
                }
            }
        CHECK_EQ_INT(bad, 0);
        fixture_free(&f);
    }
}

/* |error| of a float32 fused multiply-add chain of k terms plus a bias add,
 * against float64: <= (k + 1) u (sum |x w| + |bias|), the textbook bound for
 * recursive summation with one rounding per step. */
static double chain_bound(const float *x, const float *w, int k, double bias) {
    double mag = fabs(bias);
    for (int i = 0; i < k; i++) mag += fabs((double)x[i] * w[i]);
    return (k + 1) * U * mag + 1e-300;
}

static void test_widen_matmul(void) {
    TEST("q8w_matmul_widen equals float64 x @ unpack(W)^T within the fp32 chain bound, every shape class");
    if (!q8w_supported()) {
        SKIP("no AVX2+FMA: the widening kernel has no fallback");
        return;
    }
    for (int s = 0; s < SHAPES; s++) {
        fixture f;
        if (!fixture_make(&f, shapes[s][0], shapes[s][1], shapes[s][2])) return fixture_free(&f);
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            fill_out(&f);
            CHECK(q8w_matmul_widen(f.out, f.x, f.packed, with_bias ? f.bias : NULL, f.m, f.k, f.n));
            int bad = 0;
            for (int r = 0; r < f.m; r++)
                for (int c = 0; c < f.n; c++) {
                    const float *x = f.x + (size_t)r * f.k, *w = f.deq + (size_t)c * f.k;
                    double ref = with_bias ? f.bias[c] : 0;
                    for (int i = 0; i < f.k; i++) ref += (double)x[i] * w[i];
                    if (!(fabs(ref - f.out[(size_t)r * f.n + c]) <= chain_bound(x, w, f.k, with_bias ? f.bias[c] : 0)))
                        bad++;
                }
            if (bad) printf("#   %dx%dx%d bias %d: %d outputs off\n", f.m, f.n, f.k, with_bias, bad);
            CHECK_EQ_INT(bad, 0);
            CHECK(canary_intact(&f));
        }
        fixture_free(&f);
    }
}

/* The SIMD kernels this CPU runs, by q8w_matmul_kernel. */
static bool kernel_available(q8w_kernel kernel) { return kernel <= q8w_kernel_used(); }

static void test_dispatch(void) {
    TEST("q8w_matmul runs the fastest kernel this CPU has; q8w_matmul_kernel refuses the others");
    __builtin_cpu_init();
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    bool vnni = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
    CHECK_EQ_INT(q8w_kernel_used(), vnni ? Q8W_VNNI : avx2 ? Q8W_AVX2 : Q8W_SCALAR);
    CHECK_EQ_INT(q8w_supported(), avx2);
    CHECK_EQ_STR(q8w_kernel_name(Q8W_SCALAR), "scalar");
    CHECK_EQ_STR(q8w_kernel_name(Q8W_AVX2), "avx2");
    CHECK_EQ_STR(q8w_kernel_name(Q8W_VNNI), "vnni");
    float x[32] = {1}, out[1] = {42.0f};
    unsigned char w[64 + Q8W_QUANT_BYTES] = {0};
    for (int kernel = Q8W_SCALAR; kernel <= Q8W_KERNELS; kernel++) {
        bool ran = q8w_matmul_kernel((q8w_kernel)kernel, out, x, w, NULL, 1, 32, 1);
        CHECK_EQ_INT(ran, kernel < Q8W_KERNELS && kernel_available((q8w_kernel)kernel));
        CHECK(out[0] == (ran ? 0.0f : 42.0f)); /* nothing written when refused */
        out[0] = 42.0f;
    }
}

static void test_scalar_matches_simd(void) {
    TEST("q8w_matmul_scalar (the portable fallback) equals every SIMD kernel bit for bit, every shape class");
    if (!q8w_supported()) {
        SKIP("no AVX2+FMA: q8w_matmul is the fallback itself");
        return;
    }
    for (int s = 0; s < SHAPES; s++) {
        fixture f;
        if (!fixture_make(&f, shapes[s][0], shapes[s][1], shapes[s][2])) return fixture_free(&f);
        float *scalar = malloc(sizeof(float) * (size_t)f.m * f.n);
        CHECK(scalar != NULL);
        for (int with_bias = 0; scalar && with_bias < 2; with_bias++) {
            const float *bias = with_bias ? f.bias : NULL;
            q8w_matmul_scalar(scalar, f.x, f.packed, bias, f.m, f.k, f.n);
            for (int kernel = Q8W_AVX2; kernel <= (int)q8w_kernel_used(); kernel++) {
                fill_out(&f);
                CHECK(q8w_matmul_kernel((q8w_kernel)kernel, f.out, f.x, f.packed, bias, f.m, f.k, f.n));
                bool same = memcmp(scalar, f.out, sizeof(float) * (size_t)f.m * f.n) == 0;
                if (!same) printf("#   %s %dx%dx%d bias %d differs\n", q8w_kernel_name((q8w_kernel)kernel), f.m, f.n, f.k, with_bias);
                CHECK(same);
                CHECK(canary_intact(&f));
            }
        }
        free(scalar);
        fixture_free(&f);
    }
}

/* q8w_matmul's semantics, in float64 where they are exact: each row
 * quantized per block (dx = max|x| / 127 and q = round(x * (1/dx)) in
 * float32), integer block dots, each scaled by the float32 product dx * d.
 * Only the float32 sum over the k/32 blocks rounds: bound (k/32 + 1) u. */
static void test_int8_matmul(void) {
    TEST("q8w_matmul equals its quantized-activation semantics in float64, every shape class");
    for (int s = 0; s < SHAPES; s++) {
        fixture f;
        if (!fixture_make(&f, shapes[s][0], shapes[s][1], shapes[s][2])) return fixture_free(&f);
        int nb = f.k / 32;
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            fill_out(&f);
            q8w_matmul(f.out, f.x, f.packed, with_bias ? f.bias : NULL, f.m, f.k, f.n);
            int bad = 0;
            for (int r = 0; r < f.m; r++)
                for (int c = 0; c < f.n; c++) {
                    double ref = 0, mag = 0, bias = with_bias ? f.bias[c] : 0;
                    for (int b = 0; b < nb; b++) {
                        const float *x = f.x + (size_t)r * f.k + b * 32, *w = f.deq + (size_t)c * f.k + b * 32;
                        float amax = 0, wmax = 0;
                        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[i])), wmax = fmaxf(wmax, fabsf(w[i]));
                        float dx = amax / 127.0f, inv = dx != 0 ? 1.0f / dx : 0.0f;
                        /* the weights' block scale: the f16 d with which every w is a multiple */
                        float dw = f16_to_f32(f32_to_f16(wmax / 127.0f));
                        long dot = 0;
                        for (int i = 0; i < 32; i++)
                            dot += lroundf(x[i] * inv) * (dw != 0 ? lround(w[i] / (double)dw) : 0);
                        double term = (double)dot * (double)(dx * dw);
                        ref += term, mag += fabs(term);
                    }
                    double got = f.out[(size_t)r * f.n + c];
                    if (!(fabs(ref + bias - got) <= (nb + 1) * U * (mag + fabs(bias)) + 1e-300)) bad++;
                }
            if (bad) printf("#   %dx%dx%d bias %d: %d outputs off\n", f.m, f.n, f.k, with_bias, bad);
            CHECK_EQ_INT(bad, 0);
            CHECK(canary_intact(&f));
        }
        fixture_free(&f);
    }
}

/* GGUF Q8_0 rows: n rows of k values, nb blocks of 34 bytes each. */
static unsigned char *q8_0_rows(const float *w, int n, int k) {
    unsigned char *blocks = malloc((size_t)n * (k / 32) * Q8_0_BYTES);
    if (blocks) gguf_quantize_q8_0(w, blocks, (size_t)n * k);
    return blocks;
}

static void test_pack_q8_0(void) {
    TEST("q8w_pack_q8_0 of quantizer-written blocks is byte-identical to q8w_pack of their dequantized rows");
    for (int s = 0; s < SHAPES; s++) {
        fixture f;
        if (!fixture_make(&f, 1, shapes[s][1], shapes[s][2])) return fixture_free(&f);
        size_t bytes = q8w_bytes(f.n, f.k);
        unsigned char *blocks = q8_0_rows(f.w, f.n, f.k);
        float *dequant = malloc(sizeof(float) * (size_t)f.n * f.k);
        void *from_blocks = malloc(bytes), *from_floats = malloc(bytes);
        gerr e = {0};
        CHECK(blocks && dequant && from_blocks && from_floats);
        if (blocks && dequant && from_blocks && from_floats) {
            CHECK_EQ_INT(quant_dequantize(GGML_TYPE_Q8_0, blocks, dequant, (size_t)f.n * f.k, &e), 0);
            q8w_pack_q8_0(from_blocks, blocks, f.n, f.k);
            q8w_pack(from_floats, dequant, f.n, f.k);
            CHECK(memcmp(from_blocks, from_floats, bytes) == 0);
            CHECK(memcmp(from_blocks, f.packed, bytes) == 0); /* and to q8w_pack of W itself */
        }
        free(blocks), free(dequant), free(from_blocks), free(from_floats);
        fixture_free(&f);
    }

    TEST("q8w_pack_q8_0 of any blocks (|q| < 127, q = -128, negative d) unpacks to the dequantized rows exactly");
    enum { N = 19, K = 96 };
    unsigned char blocks[N * (K / 32) * Q8_0_BYTES];
    for (size_t b = 0; b < sizeof blocks / Q8_0_BYTES; b++) {
        unsigned char *block = blocks + b * Q8_0_BYTES;
        uint16_t d = f32_to_f16(uniform() * 0.01f);
        block[0] = (unsigned char)(d & 0xFF), block[1] = (unsigned char)(d >> 8);
        for (int i = 0; i < 32; i++) block[2 + i] = (unsigned char)(int8_t)(b % 3 == 0 ? -128 + i : (int)(uniform() * 100));
    }
    float expect[N * K], got[N * K];
    unsigned char *packed = malloc(q8w_bytes(N, K));
    gerr e = {0};
    CHECK(packed != NULL);
    if (!packed) return;
    CHECK_EQ_INT(quant_dequantize(GGML_TYPE_Q8_0, blocks, expect, N * K, &e), 0);
    q8w_pack_q8_0(packed, blocks, N, K);
    q8w_unpack(got, packed, N, K);
    CHECK(memcmp(expect, got, sizeof got) == 0);

    TEST("every kernel equals the fallback bit for bit on those blocks (q = -128 runs, negative d)");
    enum { M = 6 };
    float x[M * K], scalar[M * N], out[M * N];
    for (int i = 0; i < M * K; i++) x[i] = uniform() * (float)(1 + i % 5);
    q8w_matmul_scalar(scalar, x, packed, NULL, M, K, N);
    for (int kernel = Q8W_AVX2; kernel <= (int)q8w_kernel_used(); kernel++) {
        CHECK(q8w_matmul_kernel((q8w_kernel)kernel, out, x, packed, NULL, M, K, N));
        CHECK(memcmp(out, scalar, sizeof out) == 0);
    }
    free(packed);
}

/* Ties and extremes the random fixtures miss: activations that quantize
 * to exact halves (x * (1/dx) = j + 0.5, rounded away from zero) and GGUF
 * weights of -128, whose |w| = 128 the int8 kernel's sign trick must carry. */
static void test_ties_and_extremes(void) {
    TEST("q8w_matmul rounds activation ties away from zero and carries q = -128 weights, every kernel = integers");
    enum { M = 5, N = 21, K = 64 };
    float x[M * K], out[M * N], scalar[M * N];
    for (int r = 0; r < M; r++)
        for (int i = 0; i < K; i++) /* 127 sets dx = 1, so x * (1/dx) = x: ties at every other value */
            x[r * K + i] = i % 32 == 0 ? 127.0f : ((i * 7 + r) % 50 - 25) + (i % 2 ? 0.5f : 0.0f);
    unsigned char blocks[N * (K / 32) * Q8_0_BYTES];
    for (size_t b = 0; b < sizeof blocks / Q8_0_BYTES; b++) {
        unsigned char *block = blocks + b * Q8_0_BYTES;
        uint16_t d = f32_to_f16(1.0f); /* dw = 1: dx * dw = 1, the outputs are the integer dots */
        block[0] = (unsigned char)(d & 0xFF), block[1] = (unsigned char)(d >> 8);
        for (int i = 0; i < 32; i++) block[2 + i] = (unsigned char)(int8_t)(i % 3 == 0 ? -128 : (int)(b * 31 + i) % 255 - 127);
    }
    unsigned char *packed = malloc(q8w_bytes(N, K));
    CHECK(packed != NULL);
    if (!packed) return;
    q8w_pack_q8_0(packed, blocks, N, K);
    q8w_matmul_scalar(scalar, x, packed, NULL, M, K, N);
    for (int kernel = Q8W_AVX2; kernel <= (int)q8w_kernel_used(); kernel++) {
        CHECK(q8w_matmul_kernel((q8w_kernel)kernel, out, x, packed, NULL, M, K, N));
        CHECK(memcmp(out, scalar, sizeof out) == 0);
    }
    q8w_matmul(out, x, packed, NULL, M, K, N);
    int bad = 0;
    for (int r = 0; r < M; r++)
        for (int c = 0; c < N; c++) {
            long dot = 0; /* exact: both scales are 1 and every partial sum is far below 2^24 */
            for (int i = 0; i < K; i++) {
                float v = x[r * K + i];
                long q = (long)(v < 0 ? -floorf(-v + 0.5f) : floorf(v + 0.5f)); /* exact for these halves */
                dot += q * (int8_t)blocks[((size_t)c * (K / 32) + i / 32) * Q8_0_BYTES + 2 + i % 32];
            }
            bad += out[r * N + c] != (float)dot;
        }
    CHECK_EQ_INT(bad, 0);
    free(packed);

    TEST("q8w_matmul with k = 0: every output is its bias (or 0), every kernel");
    float bias[N];
    unsigned char no_weights[1];
    for (int c = 0; c < N; c++) bias[c] = (float)c - 3.5f;
    int wrong = 0;
    for (int kernel = Q8W_SCALAR; kernel <= (int)q8w_kernel_used(); kernel++) {
        CHECK(q8w_matmul_kernel((q8w_kernel)kernel, out, x, no_weights, bias, M, 0, N));
        for (int r = 0; r < M; r++)
            for (int c = 0; c < N; c++) wrong += out[r * N + c] != bias[c];
        CHECK(q8w_matmul_kernel((q8w_kernel)kernel, scalar, x, no_weights, NULL, 1, 0, N));
        for (int c = 0; c < N; c++) wrong += scalar[c] != 0.0f;
    }
    CHECK_EQ_INT(wrong, 0);
}

/* out for m rows on `threads` threads, by q8w_matmul_kernel (which <
 * Q8W_KERNELS) or q8w_matmul_widen (which == Q8W_KERNELS). */
static bool run_with(fixture *f, int threads, int which, float *out, int m) {
    int before = omp_get_max_threads();
    omp_set_num_threads(threads);
    bool ran = which == Q8W_KERNELS ? q8w_matmul_widen(out, f->x, f->packed, f->bias, m, f->k, f->n)
                                    : q8w_matmul_kernel((q8w_kernel)which, out, f->x, f->packed, f->bias, m, f->k, f->n);
    omp_set_num_threads(before);
    return ran;
}

static void test_invariance(void) {
    TEST("every kernel and q8w_matmul_widen: the same bits on 1 and 2 threads, and row r alone equals row r of 64");
    fixture f;
    if (!fixture_make(&f, 64, 200, 576)) return fixture_free(&f);
    size_t outs = (size_t)f.m * f.n;
    float *one = malloc(sizeof(float) * outs), *two = malloc(sizeof(float) * outs), *row = malloc(sizeof(float) * f.n);
    CHECK(one && two && row);
    for (int which = 0; one && two && row && which <= Q8W_KERNELS; which++) {
        if (!run_with(&f, 1, which, one, f.m)) {
            CHECK(which == Q8W_KERNELS ? !q8w_supported() : !kernel_available((q8w_kernel)which));
            continue;
        }
        CHECK(run_with(&f, 2, which, two, f.m));
        CHECK(memcmp(one, two, sizeof(float) * outs) == 0);
        int differing = 0;
        for (int r = 0; r < f.m; r++) {
            float *saved_x = f.x;
            f.x += (size_t)r * f.k;
            CHECK(run_with(&f, 2, which, row, 1));
            f.x = saved_x;
            differing += memcmp(row, one + (size_t)r * f.n, sizeof(float) * f.n) != 0;
        }
        CHECK_EQ_INT(differing, 0);
    }
    free(one), free(two), free(row);
    fixture_free(&f);
}

static void test_k_contract(void) {
    TEST("k % 32 != 0 breaks the callers' contract: the assertion aborts");
    CHECK_ABORTS((void)q8w_bytes(16, 33), "k % Q8W_K_BLOCK == 0");
}

int main(void) {
    test_layout();
    test_round_trip();
    test_widen_matmul();
    test_int8_matmul();
    test_dispatch();
    test_scalar_matches_simd();
    test_ties_and_extremes();
    test_pack_q8_0();
    test_invariance();
    test_k_contract();
    check_end_test();
    return check_failed_tests ? 1 : 0;
}
