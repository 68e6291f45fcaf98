/* Inference weights in bf16 and 8-bit blocks (model_pack_for_inference with
 * WEIGHTS_BF16 / WEIGHTS_Q8, lib/runner/weights.c): a packed model's logits
 * against the same model in float32, exactly against the float32 model whose
 * matrices hold the rounded values where the format allows it, the shapes a
 * format refuses, --weights' values, and MXFP4 on the seam (its bytes a
 * weight, its products the kernel's). The kernels themselves are checked
 * against float64 in test_packed_bf16.c, test_packed_q8.c and
 * test_packed_mxfp4.c. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "formats/quant.h"
#include "model/model.h"
#include "ops/ops.h"
#include "ops/packed_bf16.h"
#include "ops/packed_mxfp4.h"
#include "ops/packed_q4k.h"
#include "ops/packed_q8.h"
#include "runner/weights.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static float uniform(void) { /* xorshift: [-0.5, 0.5) */
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (float)((rng_state >> 11) * 0x1.0p-53 - 0.5);
}

static bool make(model *m, const model_config *cfg, uint64_t seed) {
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    gerr e = {0};
    if (model_alloc(m, &e)) return false;
    rng_state = seed;
    for (size_t i = 0; i < m->n_params; i++) m->params_memory[i] = uniform();
    return true;
}

enum { T = 9, V = 96 };

/* Logits of a prefill of T tokens, then of one decode row, into out[(T + 1) * V]. */
static void logits(model *m, float *out) {
    int32_t tok[T + 1];
    int seq[T + 1], pos[T + 1];
    for (int i = 0; i <= T; i++) tok[i] = (i * 29 + 7) % V, seq[i] = 0, pos[i] = i;
    kv_cache c;
    model_scratch s;
    gerr e = {0};
    CHECK_EQ_INT(kv_cache_init(&c, &m->cfg, 1, T + 1, &e), 0);
    CHECK_EQ_INT(model_scratch_init(&s, &m->cfg, T, T + 1, &e), 0);
    model_forward(m, &c, T, seq, pos, tok, NULL, out, &s);
    model_forward(m, &c, 1, seq + T, pos + T, tok + T, NULL, out + T * V, &s);
    model_scratch_free(&s);
    kv_cache_free(&c);
}

static const model_config base_cfg = {.arch = ARCH_LLAMA, .dim = 64, .hidden_dim = 96, .n_layers = 2, .n_heads = 4,
                                      .n_kv_heads = 2, .head_dim = 16, .vocab_size = V, .max_seq_len = 64,
                                      .rope_theta = 10000, .norm_eps = 1e-5f, .bos_id = -1, .pad_id = -1};

/* The packed model's logits against the float32 model's: the formats'
 * rounding moves them by a few per cent of their scale (bound below), never
 * by nothing (which would mean float32 ran). */
static void test_close(weight_format fmt, bool tied, double bound) {
    static char name[160];
    check_end_test(); /* the previous test is reported under its own name first */
    snprintf(name, sizeof name, "%s weights (%s head): logits within %.2g of float32's scale, and not equal",
             weight_format_name(fmt), tied ? "tied" : "untied", bound);
    TEST(name);
    model_config cfg = base_cfg;
    cfg.tied_embeddings = tied;
    model a, b;
    if (!make(&a, &cfg, 77) || !make(&b, &cfg, 77)) {
        CHECK(0);
        return;
    }
    gerr e = {0};
    CHECK_EQ_INT(model_pack_for_inference(&b, fmt, &e), 0);
    CHECK(b.packed && b.packed_as == fmt && b.head_packed);
    CHECK(tied ? b.head_packed == b.head_packed_own : b.head_packed == (const void *)b.w.lm_head);
    CHECK_EQ_INT(model_pack_for_inference(&b, fmt, &e), 0); /* a second call changes nothing */
    CHECK(memcmp(a.w.tok_embd, b.w.tok_embd, sizeof(float) * V * 64) == 0); /* the embeddings stay float32 */
    static float la[(T + 1) * V], lb[(T + 1) * V];
    logits(&a, la);
    logits(&b, lb);
    double worst = 0, biggest = 0;
    for (int i = 0; i < (T + 1) * V; i++) worst = fmax(worst, fabs(la[i] - lb[i])), biggest = fmax(biggest, fabs(la[i]));
    printf("#   max abs diff %.3g of logits up to %.3g\n", worst, biggest);
    CHECK(worst <= bound * biggest);
    CHECK(worst > 0);
    CHECK(biggest > 0.1);
    model_free(&a), model_free(&b);
}

/* q8 needs input widths that are multiples of 32: refused, nothing changed. */
static void test_q8_refuses(void) {
    TEST("q8 weights: a model with a width not a multiple of 32 is refused (65), unchanged");
    model_config cfg = base_cfg;
    cfg.dim = 48, cfg.n_heads = 3, cfg.n_kv_heads = 1;
    model m;
    if (!make(&m, &cfg, 5)) {
        CHECK(0);
        return;
    }
    float first = m.w.wq[1];
    gerr e = {0};
    CHECK_EQ_INT(model_pack_for_inference(&m, WEIGHTS_Q8, &e), EX_DATAERR);
    printf("#   %s\n", e.msg);
    CHECK(strstr(e.msg, "multiples of 32") && strstr(e.msg, "wq is 48 x 48"));
    CHECK(!m.packed && m.w.wq[1] == first);
    /* bf16 takes any width */
    CHECK_EQ_INT(model_pack_for_inference(&m, WEIGHTS_BF16, &e), 0);
    CHECK(m.packed);
    model_free(&m);
}

static void test_select(void) {
    TEST("--weights: auto (a checkpoint's frozen base followed), f32, bf16, q8, q4k, mxfp4; anything else is a usage "
         "error naming the flag");
    weight_choice f = {.fmt = WEIGHTS_Q8};
    gerr e = {0};
    CHECK_EQ_INT(weights_select("--weights", "f32", &f, &e), 0);
    CHECK(f.fmt == WEIGHTS_F32 && !f.keep_mxfp4 && !f.frozen_base);
    CHECK_EQ_INT(weights_select("--weights", "bf16", &f, &e), 0);
    CHECK(f.fmt == WEIGHTS_BF16 && !f.keep_mxfp4 && !f.frozen_base);
    CHECK_EQ_INT(weights_select("--weights", "q8", &f, &e), 0);
    CHECK(f.fmt == WEIGHTS_Q8 && !f.keep_mxfp4 && !f.frozen_base);
    CHECK_EQ_INT(weights_select("--weights", "q4k", &f, &e), 0);
    CHECK(f.fmt == WEIGHTS_Q4K && !f.keep_mxfp4 && !f.frozen_base);
    CHECK_EQ_INT(weights_select("--weights", "mxfp4", &f, &e), 0);
    CHECK(f.fmt == WEIGHTS_MXFP4 && f.keep_mxfp4 && !f.frozen_base);
    CHECK_EQ_INT(weights_select("--weights", "auto", &f, &e), 0);
    CHECK(f.fmt == (bf16w_native() ? WEIGHTS_BF16 : WEIGHTS_F32) && f.keep_mxfp4 && f.frozen_base);
    CHECK_EQ_INT(weights_select("--rm-weights", "fp16", &f, &e), EX_USAGE);
    CHECK_EQ_STR(e.msg, "--rm-weights: expected one of auto|f32|bf16|q8|q4k|mxfp4, got 'fp16'");
}

static void test_kv_select(void) {
    TEST("--kv-cache: f32 and bf16 as named; auto the weights' choice on the CPU, bf16 on a device; else a usage error");
    gerr e = {0};
    kv_format k = KV_BF16;
    CHECK_EQ_INT(kv_cache_select("--kv-cache", "f32", true, WEIGHTS_BF16, &k, &e), 0);
    CHECK(k == KV_F32);
    CHECK_EQ_INT(kv_cache_select("--kv-cache", "bf16", false, WEIGHTS_F32, &k, &e), 0);
    CHECK(k == KV_BF16);
    CHECK_EQ_INT(kv_cache_select("--kv-cache", "auto", true, WEIGHTS_F32, &k, &e), 0);
    CHECK(k == KV_BF16);
    for (int w = WEIGHTS_F32; w <= WEIGHTS_Q8; w++) {
        CHECK_EQ_INT(kv_cache_select("--kv-cache", "auto", false, (weight_format)w, &k, &e), 0);
        CHECK(k == weights_kv_format((weight_format)w));
    }
    CHECK_EQ_INT(kv_cache_select("--kv-cache", "f16", false, WEIGHTS_F32, &k, &e), EX_USAGE);
    CHECK_EQ_STR(e.msg, "--kv-cache f16: expected auto, f32 or bf16");
}

static void test_mxfp4_seam(void) {
    TEST("MXFP4 on the seam: 4.25 bits a weight (gpt-oss-20b's expert shapes within 0.2%); pack, products and dX are packed_mxfp4's");
    /* whole quads of blocks: exactly 4.25 bits; gpt-oss-20b's 2880-wide rows pad their last quad (4.2556) */
    CHECK(weights_packed_bytes(WEIGHTS_MXFP4, 4096, 4096) * 8 == (size_t)4096 * 4096 * 17 / 4);
    double gate = weights_packed_bytes(WEIGHTS_MXFP4, 2880, 2880) * 8.0 / (2880.0 * 2880.0);
    CHECK(gate >= 4.25 && gate < 4.25 * 1.002);
    CHECK(weights_packed_bytes(WEIGHTS_MXFP4, 2880, 2880) * 7 < weights_packed_bytes(WEIGHTS_F32, 2880, 2880));
    CHECK(weights_takes_blocks(WEIGHTS_MXFP4, GGML_TYPE_MXFP4) && !weights_takes_blocks(WEIGHTS_Q8, GGML_TYPE_MXFP4) &&
          !weights_takes_blocks(WEIGHTS_MXFP4, GGML_TYPE_Q8_0));
    enum { N = 40, K = 96, M = 5 };
    unsigned char codes[N * K / 2], scales[N * K / 32];
    rng_state = 77;
    for (size_t i = 0; i < sizeof codes; i++) codes[i] = (unsigned char)(uniform() * 512 + 256);
    for (size_t i = 0; i < sizeof scales; i++) scales[i] = (unsigned char)(120 + (int)(uniform() * 8 + 4));
    size_t bytes = weights_packed_bytes(WEIGHTS_MXFP4, N, K);
    unsigned char *a = malloc(bytes), *b = malloc(bytes);
    float x[M * K], dy[M * N], y1[M * N], y2[M * N], y3[M * N], dx1[M * K], dx2[M * K], bias[N];
    for (int i = 0; i < M * K; i++) x[i] = uniform();
    for (int i = 0; i < M * N; i++) dy[i] = uniform();
    for (int i = 0; i < N; i++) bias[i] = uniform();
    weights_pack_blocks(WEIGHTS_MXFP4, a, codes, scales, N, K);
    mx4w_pack_hf(b, codes, scales, N, K);
    CHECK(memcmp(a, b, bytes) == 0);
    matmul_forward_packed(y1, x, a, WEIGHTS_MXFP4, bias, M, K, N);
    matmul_forward_frozen(y2, x, a, WEIGHTS_MXFP4, bias, M, K, N);
    mx4w_matmul(y3, x, b, bias, M, K, N);
    CHECK(memcmp(y1, y3, sizeof y1) == 0 && memcmp(y2, y3, sizeof y2) == 0);
    matmul_backward_frozen(dx1, dy, a, WEIGHTS_MXFP4, M, K, N, false);
    mx4w_matmul_t(dx2, dy, b, M, K, N, false);
    CHECK(memcmp(dx1, dx2, sizeof dx1) == 0);
    free(a), free(b);
}

static void test_q4k_seam(void) {
    TEST("Q4_K on the seam: 4.75 bits a weight; blocks taken from GGUF, pack, unpack, products and dX are packed_q4k's");
    CHECK(weights_packed_bytes(WEIGHTS_Q4K, 4096, 4096) * 8 == (size_t)4096 * 4096 * 19 / 4);
    CHECK(weights_takes_blocks(WEIGHTS_Q4K, GGML_TYPE_Q4_K) && !weights_takes_blocks(WEIGHTS_Q8, GGML_TYPE_Q4_K) &&
          !weights_takes_blocks(WEIGHTS_Q4K, GGML_TYPE_Q8_0));
    enum { N = 40, K = 256, M = 5 };
    unsigned char blocks[N * K / 256 * 144];
    rng_state = 78;
    for (size_t i = 0; i < sizeof blocks; i++) blocks[i] = (unsigned char)(uniform() * 512 + 256);
    for (size_t i = 0; i < sizeof blocks; i += 144) blocks[i + 1] = 0x2C, blocks[i + 3] = 0x2A; /* d, dmin ~ 2^-4, 2^-5 */
    size_t bytes = weights_packed_bytes(WEIGHTS_Q4K, N, K);
    unsigned char *a = malloc(bytes), *b = malloc(bytes);
    float w[N * K], w2[N * K], x[M * K], dy[M * N], y1[M * N], y2[M * N], y3[M * N], dx1[M * K], dx2[M * K], bias[N];
    for (int i = 0; i < M * K; i++) x[i] = uniform();
    for (int i = 0; i < M * N; i++) dy[i] = uniform();
    for (int i = 0; i < N; i++) bias[i] = uniform();
    weights_pack_blocks(WEIGHTS_Q4K, a, blocks, NULL, N, K);
    q4kw_pack_gguf(b, blocks, N, K);
    CHECK(memcmp(a, b, bytes) == 0);
    weights_unpack(WEIGHTS_Q4K, w, a, N, K);
    q4kw_unpack(w2, b, N, K);
    CHECK(memcmp(w, w2, sizeof w) == 0);
    matmul_forward_packed(y1, x, a, WEIGHTS_Q4K, bias, M, K, N);
    matmul_forward_frozen(y2, x, a, WEIGHTS_Q4K, bias, M, K, N);
    q4kw_matmul(y3, x, b, bias, M, K, N);
    CHECK(memcmp(y1, y3, sizeof y1) == 0 && memcmp(y2, y3, sizeof y2) == 0);
    matmul_backward_frozen(dx1, dy, a, WEIGHTS_Q4K, M, K, N, false);
    q4kw_matmul_t(dx2, dy, b, M, K, N, false);
    CHECK(memcmp(dx1, dx2, sizeof dx1) == 0);
    weights_pack(WEIGHTS_Q4K, a, w, N, K);
    q4kw_pack(b, w, N, K);
    CHECK(memcmp(a, b, bytes) == 0);
    free(a), free(b);
}

int main(void) {
    /* bounds: 3x the largest measured (bf16: 0.0083 and 0.0066 of the largest
     * logit, q8: 0.029 and 0.019; q8 quantizes the activations too; q4k:
     * 0.19 and 0.20, 4-bit codes on uniform random weights) */
    test_close(WEIGHTS_BF16, false, 0.025);
    test_close(WEIGHTS_BF16, true, 0.025);
    test_close(WEIGHTS_Q8, false, 0.09);
    test_close(WEIGHTS_Q8, true, 0.09);
    test_close(WEIGHTS_Q4K, false, 0.6);
    test_close(WEIGHTS_Q4K, true, 0.6);
    test_q8_refuses();
    test_select();
    test_kv_select();
    test_mxfp4_seam();
    test_q4k_seam();
    return check_done();
}
