/* lib/ops/packed_q4k.{c,h}: the Q4_K panel layout byte by byte, values
 * worked out by hand from ggml's block_q4_K, GGUF blocks unpacked to
 * quant.c's dequantizer bit for bit (gguf-py's, tests/ref/q4k_ref.py checks
 * against it directly), the quantizer's error and edge cases, its paths
 * (portable, AVX2, AVX-512) giving the same blocks, and its GGUF blocks. The products
 * (float64 bound, paths, threads, batch composition) are in
 * test_packed_tile.c with the other formats.
 *
 * Driver mode, for tests/ref/q4k_ref.py (tests/bats/q4k_ref.bats):
 *   test_packed_q4k --gguf BLOCKS N K OUT   q4kw_unpack(q4kw_pack_gguf(BLOCKS)) as float32 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "formats/quant.h"
#include "ops/packed_q4k.h"
#include "packed_fixture.h"
#include "util/half.h"

static uint64_t rng_state = 0xA4093822299F31D0ULL;
static uint64_t next_u64(void) { return packed_next(&rng_state); }
static float uniform(void) { return packed_uniform(&rng_state); }

static void put_half(unsigned char *p, float f) {
    uint16_t h = f32_to_f16(f);
    memcpy(p, &h, sizeof h);
}

/* Random GGUF Q4_K blocks, d and dmin finite f16 of several magnitudes. */
static unsigned char *random_gguf(int n, int k) {
    size_t blocks = (size_t)n * (k / Q4KW_K_SUPER);
    unsigned char *b = malloc(blocks * Q4KW_GGUF_BYTES + 1);
    if (!b) return NULL;
    for (size_t i = 0; i < blocks; i++) {
        unsigned char *block = b + i * Q4KW_GGUF_BYTES;
        for (int j = 0; j < Q4KW_GGUF_BYTES; j++) block[j] = (unsigned char)next_u64();
        put_half(block, ldexpf(uniform(), (int)(next_u64() % 20) - 14));
        put_half(block + 2, i % 5 == 1 ? -0.0f : ldexpf(uniform(), (int)(next_u64() % 20) - 14));
    }
    return b;
}

static void test_values(void) {
    TEST("a hand-made GGUF block: d sc q - dmin mn for sub-blocks below and above 4 (get_scale_min_k4)");
    /* d = 1, dmin = 0.5; sub-block 0: sc 5, mn 3; sub-block 5: sc (byte 9 & 15) | (byte 1 >> 6) << 4 =
     * 2 | 16 = 18, mn (byte 9 >> 4) | (byte 5 >> 6) << 4 = 1 | 32 = 33. Code byte 0 = 0x27: value 0 is
     * 5 * 7 - 1.5 = 33.5; code byte 64's high nibble 3 is value 160 (sub-block 5): 18 * 3 - 16.5 = 37.5 */
    unsigned char b[Q4KW_GGUF_BYTES] = {0};
    put_half(b, 1.0f), put_half(b + 2, 0.5f);
    b[4] = 5, b[8] = 3, b[4 + 9] = 0x12, b[4 + 1] = 0x40, b[4 + 5] = 0x80, b[16] = 0x27, b[16 + 64] = 0x30;
    void *p = malloc(q4kw_bytes(1, 256));
    float y[256];
    CHECK(p != NULL);
    if (!p) return;
    q4kw_pack_gguf(p, b, 1, 256);
    q4kw_unpack(y, p, 1, 256);
    CHECK(y[0] == 33.5f && y[160] == 37.5f && y[1] == -1.5f && y[32] == 0.0f && y[161] == -16.5f);
    CHECK(q4kw_block_fault(b) == NULL);
    put_half(b + 2, INFINITY);
    CHECK(q4kw_block_fault(b) != NULL);
    b[2] = 0x01, b[3] = 0x7E; /* f16 NaN */
    CHECK(q4kw_block_fault(b) != NULL);
    free(p);
}

static void test_layout(void) {
    TEST("the layout: 2432 bytes per 16 x 256, d and dmin float32 in the head, sc/mn bytes, codes in 32-bit lanes");
    CHECK(q4kw_bytes(16, 256) == 2432 && q4kw_bytes(17, 256) == 2 * 2432);
    CHECK(q4kw_bytes(16, 288) == 2432 + 384 + 256 && q4kw_bytes(1, 32) == 384 + 256);
    enum { N = 20, K = 512 };
    unsigned char *g = random_gguf(N, K), *p = malloc(q4kw_bytes(N, K));
    CHECK(g && p);
    if (!g || !p) return free(g), free(p);
    q4kw_pack_gguf(p, g, N, K);
    /* column 17 (panel 1, lane 1), super-block 1, sub-block 5, k = 256 + 160 + 13 */
    const unsigned char *blk = g + (17 * 2 + 1) * Q4KW_GGUF_BYTES, *panel = p + q4kw_bytes(16, K), *head = panel + 2432;
    float d;
    memcpy(&d, head + 4 * 1, 4);
    uint16_t h;
    memcpy(&h, blk, 2);
    CHECK(d == f16_to_f32(h) || (isnan(d) && isnan(f16_to_f32(h))));
    CHECK(head[128 + 16 * 5 + 1] == ((blk[4 + 9] & 15) | (blk[4 + 1] >> 6) << 4));
    CHECK(head[256 + 16 * 5 + 1] == ((blk[4 + 9] >> 4) | (blk[4 + 5] >> 6) << 4));
    int code = blk[16 + 64 + 13] >> 4; /* sub-block 5: high nibbles of bytes 64 .. 95 */
    const unsigned char *word = head + 384 + 5 * 256 + 1 * 64 + 1 * 4; /* group 1 (k 8..15), lane 1 */
    CHECK((word[(13 % 8) / 2] >> 4 * (13 % 2) & 15) == code);
    /* past n: zeros */
    int zeros = 0;
    for (size_t i = 4 * 4; i < 64; i++) zeros += panel[i] == 0; /* d of lanes 4..15 of panel 1 */
    CHECK_EQ_INT(zeros, 48);
    free(g), free(p);
}

static void test_gguf_values(void) {
    TEST("random GGUF blocks unpack to quant.c's Q4_K dequantizer bit for bit (37 x 768)");
    enum { N = 37, K = 768 };
    unsigned char *g = random_gguf(N, K);
    void *p = malloc(q4kw_bytes(N, K));
    float *ours = malloc(sizeof(float) * N * K), *ref = malloc(sizeof(float) * N * K);
    CHECK(g && p && ours && ref);
    if (g && p && ours && ref) {
        gerr e = {0};
        q4kw_pack_gguf(p, g, N, K);
        q4kw_unpack(ours, p, N, K);
        CHECK(quant_dequantize(GGML_TYPE_Q4_K, g, ref, (size_t)N * K, &e) == 0);
        CHECK(memcmp(ours, ref, sizeof(float) * N * K) == 0);
    }
    free(g), free(p), free(ours), free(ref);
}

/* The quantizer on w [n, k]: its relative RMS error, and whether every
 * value is within its sub-block's step of the original (ranges clamp
 * nothing by more than that). */
static double quantize_error(const float *w, int n, int k) {
    void *p = malloc(q4kw_bytes(n, k));
    float *y = malloc(sizeof(float) * (size_t)n * k);
    double err = 0, mag = 0;
    if (p && y) {
        q4kw_pack(p, w, n, k);
        q4kw_unpack(y, p, n, k);
        for (size_t i = 0; i < (size_t)n * k; i++) err += (y[i] - (double)w[i]) * (y[i] - (double)w[i]), mag += (double)w[i] * w[i];
    }
    free(p), free(y);
    return mag > 0 ? sqrt(err / mag) : sqrt(err);
}

static void test_quantizer(void) {
    TEST("q4kw_pack: relative RMS error of uniform and Gaussian-like rows under 9%, short super-blocks, zeros exact");
    enum { N = 33, K = 800 }; /* 3 super-blocks and a short one of 1 sub-block */
    float *w = malloc(sizeof(float) * N * K);
    CHECK(w != NULL);
    if (!w) return;
    for (int i = 0; i < N * K; i++) w[i] = uniform() * (float)(1 + i / K % 5);
    double uni = quantize_error(w, N, K);
    for (int i = 0; i < N * K; i++) w[i] = (uniform() + uniform() + uniform() + uniform()) * 0.02f;
    double gauss = quantize_error(w, N, K);
    printf("#   relative RMS error: uniform %.4f, sum of 4 uniforms %.4f\n", uni, gauss);
    CHECK(uni < 0.09 && gauss < 0.09);
    memset(w, 0, sizeof(float) * N * K);
    CHECK(quantize_error(w, N, K) == 0);
    /* every value the sub-block's min, -63 / 256: dmin = 2^-8 exactly in f16, mn = 63 */
    for (int i = 0; i < N * K; i++) w[i] = -63.0f / 256;
    CHECK(quantize_error(w, N, K) == 0);
    free(w);
}

/* Row r of kind `kind`'s data: the shapes the quantizer's branches take. */
static float path_value(int kind, size_t i, int k) {
    float r = uniform() - 0.5f;
    switch (kind) {
    case 0: return r * (float)(1 + i / (size_t)k % 5);                          /* uniform, scaled per row */
    case 1: return (uniform() + uniform() + uniform() + uniform() - 2) * 0.02f; /* Gaussian-like */
    case 2: return i / 32 % 3 == 0 ? 0.25f : r;                                 /* constant sub-blocks */
    case 3: return -fabsf(r) * 1e-3f;                                           /* every value <= 0 */
    case 4: return ldexpf(r, (int)(next_u64() % 60) - 30);                      /* magnitudes 2^-30 .. 2^30 */
    case 5: return i / 32 % 2 ? 0.0f : r * 1e-38f;                              /* zeros, subnormals */
    case 6: return fabsf(r) + 3;                                                /* every value > 0 */
    case 7: return (float)(int)(r * 8);                                         /* few distinct integers */
    case 8: return r * 6e4f;                                                    /* near f16's largest */
    case 9: return r * 6e37f;                                                   /* past f16's range */
    case 10: return ldexpf(r, -140 - (int)(next_u64() % 9));                    /* subnormals only */
    case 11: /* per sub-block: all -0, one constant < 0, one spike among zeros, or uniform */
        switch (i / 32 % 4) {
        case 0: return -0.0f;
        case 1: return -0.75f * (float)(1 + i / (size_t)k % 3);
        case 2: return i % 32 == 7 ? -r * 1e3f : 0.0f;
        default: return r;
        }
    default: return -fabsf(ldexpf(r, (int)(next_u64() % 200) - 100)); /* negative, 2^-100 .. 2^100 */
    }
}

static void test_quantizer_paths(void) {
    TEST("q4kw_pack on every path this CPU has: the portable code's blocks byte for byte (13 kinds of rows, 13 widths)");
    /* every K % 256 / 32 tail (0 .. 7 sub-blocks), alone and after whole super-blocks */
    static const int ks[] = {32, 64, 96, 128, 160, 192, 224, 256, 288, 576, 800, 992, 1024};
    enum { N = 37, KINDS = 13 };
    int compared[PACKED_ISAS] = {0}, differ = 0;
    for (int isa = PACKED_AVX2; isa < PACKED_ISAS; isa++)
        if (!packed_isa_has((packed_isa)isa)) printf("#   skipped %s: this CPU lacks it\n", packed_isa_name((packed_isa)isa));
    for (int kind = 0; kind < KINDS; kind++)
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
            int k = ks[ki];
            float *w = malloc(sizeof(float) * N * k);
            unsigned char *ref = malloc(q4kw_bytes(N, k)), *got = malloc(q4kw_bytes(N, k));
            CHECK(w && ref && got);
            if (w && ref && got) {
                for (size_t i = 0; i < (size_t)N * k; i++) w[i] = path_value(kind, i, k);
                CHECK(q4kw_pack_isa(PACKED_SCALAR, ref, w, N, k));
                for (int isa = PACKED_AVX2; isa < PACKED_ISAS; isa++) {
                    if (!q4kw_pack_isa((packed_isa)isa, got, w, N, k)) continue;
                    compared[isa]++;
                    if (memcmp(ref, got, q4kw_bytes(N, k))) {
                        differ++;
                        printf("#   %s differs: kind %d, k %d\n", packed_isa_name((packed_isa)isa), kind, k);
                    }
                }
            }
            free(w), free(ref), free(got);
        }
    for (int isa = PACKED_AVX2; isa < PACKED_ISAS; isa++)
        printf("#   %s: %d packings compared\n", packed_isa_name((packed_isa)isa), compared[isa]);
    CHECK_EQ_INT(differ, 0);

    TEST("q4kw_quantize_gguf: its blocks, packed (q4kw_pack_gguf), are q4kw_pack's bytes");
    enum { R = 19, K = 768 };
    float *w = malloc(sizeof(float) * R * K);
    unsigned char *blocks = malloc((size_t)R * (K / Q4KW_K_SUPER) * Q4KW_GGUF_BYTES);
    unsigned char *a = malloc(q4kw_bytes(R, K)), *b = malloc(q4kw_bytes(R, K));
    CHECK(w && blocks && a && b);
    if (w && blocks && a && b) {
        for (size_t i = 0; i < (size_t)R * K; i++) w[i] = path_value((int)(i / K % 13), i, K);
        q4kw_quantize_gguf(blocks, w, (size_t)R * K);
        q4kw_pack_gguf(a, blocks, R, K);
        q4kw_pack(b, w, R, K);
        CHECK(memcmp(a, b, q4kw_bytes(R, K)) == 0);
    }
    free(w), free(blocks), free(a), free(b);
}

static void test_edges(void) {
    TEST("k % 32 != 0 breaks the callers' contract: the assertion aborts");
    CHECK_ABORTS((void)q4kw_bytes(16, 48), "k % Q4KW_K_SUB == 0");
}

/* ---- driver ------------------------------------------------------------------ */

static void *read_all(const char *path, size_t want) {
    FILE *f = fopen(path, "rb");
    void *buf = malloc(want + 1);
    bool ok = f && buf && fread(buf, 1, want + 1, f) == want;
    if (f) fclose(f);
    if (!ok) {
        fprintf(stderr, "test_packed_q4k: %s: cannot read %zu bytes\n", path, want);
        free(buf);
        return NULL;
    }
    return buf;
}

static int driver(int argc, char **argv) {
    if (argc != 6 || strcmp(argv[1], "--gguf")) return 2;
    int n = atoi(argv[3]), k = atoi(argv[4]);
    if (n <= 0 || k <= 0 || k % Q4KW_K_SUPER) return 2;
    void *blocks = read_all(argv[2], (size_t)n * (size_t)(k / Q4KW_K_SUPER) * Q4KW_GGUF_BYTES);
    void *packed = malloc(q4kw_bytes(n, k));
    float *out = malloc(sizeof(float) * (size_t)n * k);
    int rc = 1;
    if (blocks && packed && out) {
        q4kw_pack_gguf(packed, blocks, n, k);
        q4kw_unpack(out, packed, n, k);
        FILE *f = fopen(argv[5], "wb");
        bool ok = f && fwrite(out, sizeof(float), (size_t)n * k, f) == (size_t)n * k;
        if (f && fclose(f)) ok = false;
        rc = ok ? 0 : 1;
        if (!ok) fprintf(stderr, "test_packed_q4k: %s: cannot write\n", argv[5]);
    }
    free(blocks), free(packed), free(out);
    return rc;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strncmp(argv[1], "--", 2)) return driver(argc, argv);
    test_values();
    test_layout();
    test_gguf_values();
    test_quantizer();
    test_quantizer_paths();
    test_edges();
    check_end_test();
    return check_failed_tests ? 1 : 0;
}
