/* lib/ops/packed_mxfp4.{c,h}: the MXFP4 panel layout byte by byte, values
 * worked out by hand from the OCP definition (E2M1 codes, E8M0 scales),
 * GGUF and Hugging Face blocks packed to the same bytes, the matmul against
 * a float64 product over the dequantized weights, bit for bit equal to the
 * float32 packed kernel on those weights and to itself on every path (AVX-512,
 * AVX2, portable), thread count and batch composition.
 *
 * Driver mode, for tests/ref/mxfp4_ref.py (gguf-py's MXFP4 and transformers'
 * rule, tests/bats/mxfp4_ref.bats):
 *   test_packed_mxfp4 --gguf BLOCKS N K OUT         mx4w_unpack(mx4w_pack_gguf(BLOCKS)) as float32
 *   test_packed_mxfp4 --hf BLOCKS SCALES N K OUT    mx4w_unpack(mx4w_pack_hf(BLOCKS, SCALES)) as float32
 *   test_packed_mxfp4 --packed-gguf BLOCKS N K OUT  mx4w_pack_gguf's bytes
 *   test_packed_mxfp4 --packed-hf BLOCKS SCALES N K OUT  mx4w_pack_hf's bytes */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ops/packed.h"
#include "ops/packed_mxfp4.h"
#include "packed_fixture.h"

static uint64_t rng_state = 0x243F6A8885A308D3ULL;
static uint64_t next_u64(void) { return packed_next(&rng_state); }
static float uniform(void) { return packed_uniform(&rng_state); }

static const double U = 0x1.0p-24; /* float32 unit roundoff */

/* The E2M1 values of the 16 codes, from the OCP MX spec's table: sign bit 3,
 * exponent bits 2-1 (bias 1), mantissa bit 0; exponent 0 is subnormal (0 or 0.5). */
static const float E2M1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};

/* Random GGUF blocks: n rows of k/32, scales mostly near 2^0 with every
 * tenth block at an extreme one (subnormal e = 0, 1; e = 140). */
static unsigned char *random_gguf(int n, int k) {
    size_t blocks = (size_t)n * (k / 32);
    unsigned char *b = malloc(blocks * MX4W_GGUF_BYTES + 1);
    if (!b) return NULL;
    for (size_t i = 0; i < blocks; i++) {
        unsigned char *block = b + i * MX4W_GGUF_BYTES;
        block[0] = (unsigned char)(i % 10 == 3 ? 0 : i % 10 == 6 ? 1 : i % 10 == 8 ? 140 : 120 + next_u64() % 12);
        for (int j = 1; j < MX4W_GGUF_BYTES; j++) block[j] = (unsigned char)next_u64();
    }
    return b;
}

typedef struct {
    int m, n, k;
    float *x, *bias, *deq, *out;
    unsigned char *blocks;
    void *packed;
} fixture;

static void fixture_free(fixture *f) { free(f->x), free(f->bias), free(f->deq), free(f->out), free(f->blocks), free(f->packed); }

static bool fixture_make(fixture *f, int m, int n, int k) {
    *f = (fixture){m, n, k, malloc(sizeof(float) * ((size_t)m * k + 1)), malloc(sizeof(float) * ((size_t)n + 1)),
                   malloc(sizeof(float) * ((size_t)n * k + 1)), malloc(sizeof(float) * ((size_t)m * n + PACKED_CANARY)),
                   random_gguf(n, k), malloc(mx4w_bytes(n, k) + 1)};
    CHECK(f->x && f->bias && f->deq && f->out && f->blocks && f->packed);
    if (!f->x || !f->bias || !f->deq || !f->out || !f->blocks || !f->packed) return false;
    for (size_t i = 0; i < (size_t)m * k; i++) f->x[i] = (i / 32) % 9 == 5 ? 0.0f : uniform() * (float)(1 + i % 3);
    for (int i = 0; i < n; i++) f->bias[i] = uniform();
    mx4w_pack_gguf(f->packed, f->blocks, n, k);
    mx4w_unpack(f->deq, f->packed, n, k);
    return true;
}

static void fill_out(fixture *f) { packed_fill(f->out, (size_t)f->m * f->n); }
static bool canary_intact(const fixture *f) { return packed_canary_intact(f->out, (size_t)f->m * f->n); }

static void test_scales_and_values(void) {
    TEST("E8M0 scales: mx4w_scale(e) = 2^(e-128), subnormal below e = 2, as ggml_e8m0_to_fp32_half");
    const struct {
        uint8_t e;
        float want;
    } scales[] = {{0, 0x1p-128f}, {1, 0x1p-127f}, {2, 0x1p-126f}, {127, 0.5f}, {128, 1.0f}, {200, 0x1p72f}, {254, 0x1p126f}, {255, 0x1p127f}};
    for (size_t i = 0; i < sizeof scales / sizeof *scales; i++) CHECK(mx4w_scale(scales[i].e) == scales[i].want);
    for (int q = 0; q < 16; q++) CHECK(MX4W_HALF_UNITS[q] == 2 * E2M1[q]);

    TEST("a GGUF block unpacks to values worked out by hand: codes j in low nibbles, 15 - j in high ones");
    enum { N = 3, K = 64 };
    unsigned char blocks[N * 2 * MX4W_GGUF_BYTES];
    const uint8_t es[N * 2] = {127, 128, 131, 0, 254, 255};
    for (int b = 0; b < N * 2; b++) {
        blocks[b * MX4W_GGUF_BYTES] = es[b];
        for (int j = 0; j < 16; j++) blocks[b * MX4W_GGUF_BYTES + 1 + j] = (unsigned char)(j | (15 - j) << 4);
    }
    float got[N * K];
    unsigned char *packed = malloc(mx4w_bytes(N, K));
    CHECK(packed != NULL);
    if (!packed) return;
    mx4w_pack_gguf(packed, blocks, N, K);
    mx4w_unpack(got, packed, N, K);
    int wrong = 0;
    for (int b = 0; b < N * 2; b++)
        for (int i = 0; i < 32; i++) {
            int code = i < 16 ? i : 15 - (i - 16);
            float e2m1 = E2M1[code], want;
            switch (es[b]) { /* 2^(e - 127) times the E2M1 value, by hand */
            case 127: want = e2m1; break;
            case 128: want = 2 * e2m1; break;
            case 131: want = 16 * e2m1; break;
            case 0: want = ldexpf(e2m1, -127); break;              /* subnormal: 0.5 * 2^-127 = 2^-128 is the smallest */
            case 254: want = fabsf(e2m1) >= 2 ? copysignf(INFINITY, e2m1) : ldexpf(e2m1, 127); break; /* 2 * 2^127 overflows */
            default: want = fabsf(e2m1) >= 1 ? copysignf(INFINITY, e2m1) : ldexpf(e2m1, 128); break; /* e = 255 read as ggml does */
            }
            if (want == 0) want = 0.0f; /* code 8, -0, reads as +0 */
            float v = got[(b / 2) * K + (b % 2) * 32 + i];
            wrong += memcmp(&v, &want, sizeof v) != 0;
        }
    CHECK_EQ_INT(wrong, 0);
    CHECK(got[0 * K + 8] == 0.0f && !signbit(got[0 * K + 8])); /* code 8 */
    CHECK(got[0 * K + 15] == -6.0f && got[0 * K + 16] == -6.0f && got[0 * K + 31] == 0.0f && got[1 * K + 32 + 7] == 0x1p-126f * 3);
    free(packed);
}

static void test_layout(void) {
    TEST("mx4w_bytes: 16-column panels, per 4 blocks a 64-byte line of scales then 4 x 256 bytes of codes");
    CHECK_EQ_INT(mx4w_bytes(16, 32), 64 + 256);
    CHECK_EQ_INT(mx4w_bytes(16, 128), 64 + 4 * 256);
    CHECK_EQ_INT(mx4w_bytes(17, 160), 2 * (2 * 64 + 5 * 256));
    CHECK_EQ_INT(mx4w_bytes(5760, 2880), (size_t)360 * (23 * 64 + 90 * 256)); /* gpt-oss-20b's gate_up: 4.25 bits a weight */
    CHECK(mx4w_bytes(5760, 2880) * 8.0 / (5760.0 * 2880) < 4.26);

    TEST("the layout byte by byte: scale at 1088(b/4) + 16(b%4) + j, code i at 1088(b/4) + 64 + 256(b%4) + 64(i/8) + 4j + (i%8)/2, nibble i%2");
    enum { N = 19, K = 160, NB = K / 32, PANEL = 2 * 64 + NB * 256 };
    unsigned char blocks[N * NB * MX4W_GGUF_BYTES], packed[2 * PANEL];
    for (int c = 0; c < N; c++)
        for (int b = 0; b < NB; b++) {
            unsigned char *block = blocks + ((size_t)c * NB + b) * MX4W_GGUF_BYTES;
            block[0] = (unsigned char)(c * 5 + b + 1);
            for (int j = 0; j < 16; j++) block[1 + j] = (unsigned char)(c * 7 + b * 16 + j * 3);
        }
    CHECK_EQ_INT(mx4w_bytes(N, K), sizeof packed);
    memset(packed, 0xAB, sizeof packed);
    mx4w_pack_gguf(packed, blocks, N, K);
    int wrong = 0;
    for (int c = 0; c < 32; c++) /* columns 19..31: zero scales and codes */
        for (int b = 0; b < NB; b++) {
            const unsigned char *panel = packed + (size_t)(c / 16) * PANEL, *block = blocks + ((size_t)c * NB + b) * MX4W_GGUF_BYTES;
            int j = c % 16;
            wrong += panel[1088 * (b / 4) + 16 * (b % 4) + j] != (c < N ? block[0] : 0);
            for (int i = 0; i < 32; i++) {
                int code = c < N ? (i < 16 ? block[1 + i] & 15 : block[1 + i - 16] >> 4) : 0;
                int byte = panel[1088 * (b / 4) + 64 + 256 * (b % 4) + 64 * (i / 8) + 4 * j + (i % 8) / 2];
                wrong += (byte >> 4 * (i % 2) & 15) != code;
            }
        }
    for (int p = 0; p < 2; p++) /* the second quad's line: block 4's 16 bytes, then 48 of padding */
        for (int i = 1088 + 16; i < 1088 + 64; i++) wrong += packed[(size_t)p * PANEL + i] != 0;
    CHECK_EQ_INT(wrong, 0);
}

static void test_pack_hf(void) {
    TEST("mx4w_pack_hf (codes 2j, 2j+1 in byte j; scales apart) gives mx4w_pack_gguf's bytes for the same weights");
    enum { N = 37, K = 288, NB = K / 32 };
    unsigned char *gguf = random_gguf(N, K), *hf = malloc(N * NB * 16), *scales = malloc(N * NB);
    void *a = malloc(mx4w_bytes(N, K)), *b = malloc(mx4w_bytes(N, K));
    CHECK(gguf && hf && scales && a && b);
    if (gguf && hf && scales && a && b) {
        for (int blk = 0; blk < N * NB; blk++) {
            const unsigned char *g = gguf + (size_t)blk * MX4W_GGUF_BYTES;
            uint8_t codes[32];
            for (int j = 0; j < 16; j++) codes[j] = g[1 + j] & 15, codes[16 + j] = g[1 + j] >> 4;
            for (int j = 0; j < 16; j++) hf[blk * 16 + j] = (unsigned char)(codes[2 * j] | codes[2 * j + 1] << 4);
            scales[blk] = g[0];
        }
        mx4w_pack_gguf(a, gguf, N, K);
        mx4w_pack_hf(b, hf, scales, N, K);
        CHECK(memcmp(a, b, mx4w_bytes(N, K)) == 0);
    }
    free(gguf), free(hf), free(scales), free(a), free(b);
}

/* Shapes: m = 1, m not a multiple of the 4- or 8-row tiles nor of the
 * 64-row chunk, n not a multiple of the 16-column panel or the pair of
 * panels, k of one block, of quads and of a short last quad. */
static const int shapes[][3] = {{1, 1, 32},  {1, 49, 64},  {7, 17, 96},   {8, 32, 128},  {9, 33, 160},
                                {130, 40, 64}, {64, 96, 576}, {3, 113, 288}, {13, 16, 32}, {70, 47, 224}};
enum { SHAPES = sizeof shapes / sizeof shapes[0] };

/* |error| of a float32 fused multiply-add chain of k terms plus a bias add
 * against float64: (k + 1) u (sum |x w| + |bias|), and k ulps of the
 * subnormal range for products of subnormal weights. */
static double chain_bound(const float *x, const float *w, int k, double bias) {
    double mag = fabs(bias);
    for (int i = 0; i < k; i++) mag += fabs((double)x[i] * w[i]);
    return (k + 1) * U * mag + k * 0x1p-149;
}

static void test_matmul(void) {
    TEST("mx4w_matmul equals float64 x @ unpack(W)^T within the fp32 chain bound, every shape, with and without bias");
    for (int s = 0; s < SHAPES; s++) {
        fixture f;
        if (!fixture_make(&f, shapes[s][0], shapes[s][1], shapes[s][2])) return fixture_free(&f);
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            fill_out(&f);
            mx4w_matmul(f.out, f.x, f.packed, with_bias ? f.bias : NULL, f.m, f.k, f.n);
            int bad = 0;
            for (int r = 0; r < f.m; r++)
                for (int c = 0; c < f.n; c++) {
                    const float *x = f.x + (size_t)r * f.k, *w = f.deq + (size_t)c * f.k;
                    double ref = with_bias ? f.bias[c] : 0;
                    for (int i = 0; i < f.k; i++) ref += (double)x[i] * w[i];
                    bad += !(fabs(ref - f.out[(size_t)r * f.n + c]) <= chain_bound(x, w, f.k, with_bias ? f.bias[c] : 0));
                }
            if (bad) printf("#   %dx%dx%d bias %d: %d outputs off\n", f.m, f.n, f.k, with_bias, bad);
            CHECK_EQ_INT(bad, 0);
            CHECK(canary_intact(&f));
        }
        fixture_free(&f);
    }
}

static void test_paths(void) {
    TEST("every path (portable, AVX2, AVX-512 where the CPU has them) gives the same bits, every shape");
    int compared = 0;
    for (int s = 0; s < SHAPES; s++) {
        fixture f;
        if (!fixture_make(&f, shapes[s][0], shapes[s][1], shapes[s][2])) return fixture_free(&f);
        float *ref = malloc(sizeof(float) * (size_t)f.m * f.n);
        CHECK(ref != NULL);
        for (int with_bias = 0; ref && with_bias < 2; with_bias++) {
            const float *bias = with_bias ? f.bias : NULL;
            CHECK(mx4w_matmul_isa(PACKED_SCALAR, ref, f.x, f.packed, bias, f.m, f.k, f.n));
            for (int isa = PACKED_AVX2; isa < PACKED_ISAS; isa++) {
                fill_out(&f);
                if (!mx4w_matmul_isa((packed_isa)isa, f.out, f.x, f.packed, bias, f.m, f.k, f.n)) {
                    CHECK(!packed_isa_has((packed_isa)isa));
                    continue;
                }
                bool same = memcmp(ref, f.out, sizeof(float) * (size_t)f.m * f.n) == 0;
                if (!same) printf("#   %s %dx%dx%d bias %d differs\n", packed_isa_name((packed_isa)isa), f.m, f.n, f.k, with_bias);
                CHECK(same);
                CHECK(canary_intact(&f));
                compared++;
            }
        }
        free(ref);
        fixture_free(&f);
    }
    if (!compared) SKIP("no AVX2 or AVX-512 here: the portable path alone");

    TEST("mx4w_matmul gives packed_matmul's bits on the dequantized weights (the same float32 chain)");
    if (!packed_supported()) {
        SKIP("no AVX2+FMA: packed_matmul does not run here");
        return;
    }
    for (int s = 0; s < SHAPES; s++) {
        fixture f;
        if (!fixture_make(&f, shapes[s][0], shapes[s][1], shapes[s][2])) return fixture_free(&f);
        float *panels = malloc(sizeof(float) * packed_floats(f.n, f.k)), *ref = malloc(sizeof(float) * (size_t)f.m * f.n);
        CHECK(panels && ref);
        if (panels && ref) {
            packed_pack(panels, f.deq, f.n, f.k);
            packed_matmul(ref, f.x, panels, f.bias, f.m, f.k, f.n);
            mx4w_matmul(f.out, f.x, f.packed, f.bias, f.m, f.k, f.n);
            CHECK(memcmp(ref, f.out, sizeof(float) * (size_t)f.m * f.n) == 0);
        }
        free(panels), free(ref);
        fixture_free(&f);
    }
}

static bool run_matmul(const void *ctx, packed_isa isa, float *out, const float *in, int m) {
    const fixture *f = ctx;
    return mx4w_matmul_isa(isa, out, in, f->packed, f->bias, m, f->k, f->n);
}

static void test_invariance(void) {
    TEST("every path: the same bits on 1, 2 and 3 threads, and a row alone or among other rows equals its row of 70");
    fixture f;
    if (fixture_make(&f, 70, 200, 576)) packed_check_invariance(run_matmul, &f, "mxfp4", f.x, f.m, f.k, f.n, &rng_state);
    fixture_free(&f);
}

static void test_edges(void) {
    TEST("k = 0: every output is its bias (or 0); m = 0 and n = 0 write nothing, every path");
    float bias[5] = {1, -2, 3.5f, 0, 0.25f}, out[3 * 5], x[3] = {0};
    unsigned char none[1];
    int wrong = 0;
    for (int isa = 0; isa < PACKED_ISAS; isa++) {
        if (!mx4w_matmul_isa((packed_isa)isa, out, x, none, bias, 3, 0, 5)) continue;
        for (int i = 0; i < 15; i++) wrong += out[i] != bias[i % 5];
        memset(out, 0x7f, sizeof out);
        CHECK(mx4w_matmul_isa((packed_isa)isa, out, x, none, bias, 0, 32, 5));
        CHECK(mx4w_matmul_isa((packed_isa)isa, out, x, none, bias, 3, 32, 0));
        for (int i = 0; i < 15; i++) wrong += out[i] != out[0] || out[0] == 0;
    }
    CHECK_EQ_INT(wrong, 0);

    TEST("k % 32 != 0 breaks the callers' contract: the assertion aborts");
    CHECK_ABORTS((void)mx4w_bytes(16, 48), "k % MX4W_K_BLOCK == 0");
}

/* ---- driver ------------------------------------------------------------------ */

static void *read_all(const char *path, size_t want) {
    FILE *f = fopen(path, "rb");
    void *buf = malloc(want + 1);
    bool ok = f && buf && fread(buf, 1, want + 1, f) == want;
    if (f) fclose(f);
    if (!ok) {
        fprintf(stderr, "test_packed_mxfp4: %s: cannot read %zu bytes\n", path, want);
        free(buf);
        return NULL;
    }
    return buf;
}

static int write_all(const char *path, const void *data, size_t bytes) {
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(data, 1, bytes, f) == bytes;
    if (f && fclose(f)) ok = false;
    if (!ok) fprintf(stderr, "test_packed_mxfp4: %s: cannot write\n", path);
    return ok ? 0 : 1;
}

static int driver(int argc, char **argv) {
    bool hf = !strcmp(argv[1], "--hf") || !strcmp(argv[1], "--packed-hf");
    bool raw = !strncmp(argv[1], "--packed-", 9);
    if (argc != (hf ? 7 : 6)) return 2;
    int n = atoi(argv[hf ? 4 : 3]), k = atoi(argv[hf ? 5 : 4]);
    if (n <= 0 || k <= 0 || k % 32) return 2;
    size_t nb = (size_t)n * (size_t)(k / 32);
    void *blocks = read_all(argv[2], nb * (hf ? MX4W_HF_BYTES : MX4W_GGUF_BYTES)), *scales = hf ? read_all(argv[3], nb) : NULL;
    void *packed = malloc(mx4w_bytes(n, k));
    float *out = malloc(sizeof(float) * (size_t)n * k);
    int rc = 1;
    if (blocks && (!hf || scales) && packed && out) {
        if (hf)
            mx4w_pack_hf(packed, blocks, scales, n, k);
        else
            mx4w_pack_gguf(packed, blocks, n, k);
        mx4w_unpack(out, packed, n, k);
        rc = raw ? write_all(argv[argc - 1], packed, mx4w_bytes(n, k)) : write_all(argv[argc - 1], out, sizeof(float) * (size_t)n * k);
    }
    free(blocks), free(scales), free(packed), free(out);
    return rc;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strncmp(argv[1], "--", 2)) return driver(argc, argv);
    test_scales_and_values();
    test_layout();
    test_pack_hf();
    test_matmul();
    test_paths();
    test_invariance();
    test_edges();
    check_end_test();
    return check_failed_tests ? 1 : 0;
}
