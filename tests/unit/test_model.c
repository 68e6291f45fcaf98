/* Unit tests of lib/model that need no Python: the ops against hand-computed
 * values, the GGUF Q/K permutation, config parsing and its errors, and the
 * forward's KV-cache paths (prefill, decode, batched with a copied prefix)
 * agreeing on a tiny random model.
 *
 * Driver mode (tests/bats/model.bats): with GRPO_MODEL_DIR (an HF directory
 * or a .gguf), GRPO_MODEL_TOKENS (whitespace-separated ids) and
 * GRPO_MODEL_OUT, loads the model, runs the tokens (a) as one prefill,
 * (b) one token at a time, (c) as two sequences in one batch after a copied
 * prefix, checks the three agree, and writes the prefill's logits at every
 * position as raw float32 [T, vocab] to GRPO_MODEL_OUT. GRPO_MODEL_BENCH=1
 * also prints prefill and batch-8 decode throughput. A load error prints
 * the one-line message and exits with its code. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "helpers.h"
#include "ckpt/load.h"
#include "model/model.h"
#include "ops/ops.h"
#include "util/clock.h"

/* ---- the forward paths, shared by the unit test and the driver --------------- */

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= m)) m = d; /* NaN propagates */
    }
    return m;
}

typedef struct {
    double decode_diff, batch_diff;
} paths_result;

/* (a) prefill into out[T, V]; (b) decode one token at a time; (c) sequence 0
 * prefills the first half, sequence 1 gets it by kv_cache_copy_prefix, then
 * one batch carries the rest of both, interleaved. */
static int run_paths(const model *m, const int32_t *tok, int T, float *out, paths_result *res, gerr *e) {
    int V = m->cfg.vocab_size, rc;
    kv_cache c;
    model_scratch s;
    if ((rc = kv_cache_init(&c, &m->cfg, 2, T, e))) return rc;
    if ((rc = model_scratch_init(&s, &m->cfg, 2 * T, T, e))) {
        kv_cache_free(&c);
        return rc;
    }
    int *seq = calloc(2 * T, sizeof *seq), *pos = calloc(2 * T, sizeof *pos);
    int32_t *tk = calloc(2 * T, sizeof *tk);
    float *lg = malloc((size_t)2 * T * V * sizeof *lg);
    if (!seq || !pos || !tk || !lg) abort();

    for (int t = 0; t < T; t++) seq[t] = 0, pos[t] = t;
    model_forward(m, &c, T, seq, pos, tok, NULL, out, &s);

    res->decode_diff = 0;
    for (int t = 0; t < T; t++) {
        int sq = 1;
        model_forward(m, &c, 1, &sq, &t, &tok[t], NULL, lg, &s);
        double d = max_abs_diff(lg, out + (size_t)t * V, V);
        if (!(d <= res->decode_diff)) res->decode_diff = d;
    }

    int P = T / 2, n = 0;
    for (int t = 0; t < P; t++) seq[t] = 0, pos[t] = t;
    model_forward(m, &c, P, seq, pos, tok, NULL, lg, &s);
    kv_cache_copy_prefix(&c, 1, 0, P);
    bool *want = calloc(2 * T, sizeof *want);
    if (!want) abort();
    for (int t = P; t < T; t++)
        for (int q = 0; q < 2; q++, n++) seq[n] = q, pos[n] = t, tk[n] = tok[t], want[n] = (t % 2 == 0) || q;
    model_forward(m, &c, n, seq, pos, tk, want, lg, &s);
    res->batch_diff = 0;
    for (int i = 0, k = 0; i < n; i++) {
        if (!want[i]) continue;
        double d = max_abs_diff(lg + (size_t)k++ * V, out + (size_t)pos[i] * V, V);
        if (!(d <= res->batch_diff)) res->batch_diff = d;
    }
    free(want);
    free(seq), free(pos), free(tk), free(lg);
    model_scratch_free(&s);
    kv_cache_free(&c);
    return 0;
}

/* Prefill of 128 tokens and decode of 8 sequences (16-token prompts shared
 * by prefix copy, then 32 steps of 8 rows); tokens/s on stdout as comments. */
static int bench(const model *m, const int32_t *tok, int T, gerr *e) {
    enum { PREFILL = 128, B = 8, PROMPT = 16, STEPS = 32 };
    int V = m->cfg.vocab_size, rc;
    kv_cache c;
    model_scratch s;
    if ((rc = kv_cache_init(&c, &m->cfg, B, PREFILL + STEPS, e))) return rc;
    if ((rc = model_scratch_init(&s, &m->cfg, PREFILL, PREFILL + STEPS, e))) {
        kv_cache_free(&c);
        return rc;
    }
    int seq[PREFILL], pos[PREFILL];
    int32_t tk[PREFILL];
    bool want[PREFILL];
    float *lg = malloc((size_t)PREFILL * V * sizeof *lg);
    if (!lg) abort();
    for (int i = 0; i < PREFILL; i++) seq[i] = 0, pos[i] = i, tk[i] = tok[i % T], want[i] = i == PREFILL - 1;
    model_forward(m, &c, PREFILL, seq, pos, tk, want, lg, &s); /* warm-up */
    double t0 = now_seconds();
    int reps = 3;
    for (int r = 0; r < reps; r++) model_forward(m, &c, PREFILL, seq, pos, tk, want, lg, &s);
    double prefill = reps * PREFILL / (now_seconds() - t0);

    model_forward(m, &c, PROMPT, seq, pos, tk, want + PREFILL - PROMPT, lg, &s);
    for (int b = 1; b < B; b++) kv_cache_copy_prefix(&c, b, 0, PROMPT);
    t0 = now_seconds();
    for (int st = 0; st < STEPS; st++) {
        for (int b = 0; b < B; b++) seq[b] = b, pos[b] = PROMPT + st, tk[b] = tok[(b + st) % T];
        model_forward(m, &c, B, seq, pos, tk, NULL, lg, &s);
    }
    double decode = (double)B * STEPS / (now_seconds() - t0);
    printf("# bench: prefill %d tokens: %.1f tokens/s; decode batch %d: %.1f tokens/s (%d threads)\n", PREFILL,
           prefill, B, decode, s.ws.n_threads);
    free(lg);
    model_scratch_free(&s);
    kv_cache_free(&c);
    return 0;
}

static int driver(const char *path, const char *tokens_path, const char *out_path) {
    gerr e = {0};
    model m;
    if (model_load(&m, path, &e)) {
        fprintf(stderr, "test_model: %s\n", e.msg);
        return e.code;
    }
    /* GRPO_MODEL_PACK=1 (f32), bf16 or q8: the weights packed as grpo-rollout runs them */
    const char *pack = getenv("GRPO_MODEL_PACK");
    weight_format fmt = pack && !strcmp(pack, "bf16") ? WEIGHTS_BF16 : pack && !strcmp(pack, "q8") ? WEIGHTS_Q8 : WEIGHTS_F32;
    if (pack && *pack && strcmp(pack, "0") && model_pack_for_inference(&m, fmt, &e)) {
        fprintf(stderr, "test_model: %s\n", e.msg);
        return e.code;
    }
    FILE *f = fopen(tokens_path, "r");
    if (!f) {
        fprintf(stderr, "test_model: %s: %s\n", tokens_path, strerror(errno));
        return EX_NOINPUT;
    }
    int32_t tok[4096];
    int T = 0, x;
    while (T < 4096 && fscanf(f, "%d", &x) == 1) tok[T++] = x;
    fclose(f);
    for (int i = 0; i < T; i++)
        if (tok[i] < 0 || tok[i] >= m.cfg.vocab_size) {
            fprintf(stderr, "test_model: token %d out of range\n", tok[i]);
            return EX_DATAERR;
        }
    printf("# %s: %s, %d layers, dim %d, %d/%d heads of %d, vocab %d, %zu parameters, %d tokens, weights %s%s\n", path,
           model_arch_name(m.cfg.arch), m.cfg.n_layers, m.cfg.dim, m.cfg.n_heads, m.cfg.n_kv_heads,
           m.cfg.head_dim, m.cfg.vocab_size, m.n_params, T, m.packed ? "packed " : "row-major",
           m.packed ? weight_format_name(m.packed_as) : "");
    float *out = malloc((size_t)T * m.cfg.vocab_size * sizeof *out);
    paths_result res;
    if (!out || T < 2 || run_paths(&m, tok, T, out, &res, &e)) {
        fprintf(stderr, "test_model: %s\n", T < 2 ? "need at least 2 tokens" : e.msg);
        return 1;
    }
    double amax = 0;
    for (size_t i = 0; i < (size_t)T * m.cfg.vocab_size; i++) amax = fmax(amax, fabs(out[i]));
    /* The paths differ only in how sgemm splits rows, so in summation order:
     * a few fp32 ulps of the largest logit. bf16 and q8 kernels round their
     * inputs: a value that such a difference moves across a rounding edge
     * differs by one step of bf16 (2^-8) or of its 8-bit block, so 1e-2. */
    double tol = (m.packed && m.packed_as != WEIGHTS_F32 ? 1e-2 : 1e-5) * fmax(1.0, amax);
    TEST("decode one token at a time equals the prefill");
    printf("#   max abs diff %.3g (tol %.3g)\n", res.decode_diff, tol);
    CHECK(res.decode_diff <= tol);
    TEST("two sequences in one batch after a copied prefix equal the prefill");
    printf("#   max abs diff %.3g (tol %.3g)\n", res.batch_diff, tol);
    CHECK(res.batch_diff <= tol);
    TEST("logits written");
    FILE *o = fopen(out_path, "wb");
    CHECK(o && fwrite(out, sizeof *out, (size_t)T * m.cfg.vocab_size, o) == (size_t)T * m.cfg.vocab_size);
    CHECK(o && fclose(o) == 0);
    const char *b = getenv("GRPO_MODEL_BENCH");
    if (b && *b == '1' && bench(&m, tok, T, &e)) printf("# bench: %s\n", e.msg);
    free(out);
    model_free(&m);
    return check_done();
}

/* ---- unit tests ---------------------------------------------------------------- */

static void test_ops(void) {
    TEST("RoPE rotates pairs (i, i + hd/2) by pos * theta^(-2i/hd)");
    model_config c = {.head_dim = 4, .rope_theta = 10000};
    float inv[2], cs[2], sn[2], x[4] = {1, 2, 3, 4};
    int pos = 3;
    rope_inv_freq(inv, &c);
    CHECK_NEAR(inv[0], 1.0, 0);
    CHECK_NEAR(inv[1], 0.01, 1e-9);
    rope_cos_sin(cs, sn, inv, 2, &pos, 1);
    rope_forward(x, cs, sn, 1, 1, 4);
    CHECK_NEAR(x[0], 1 * cos(3.0) - 3 * sin(3.0), 1e-6);
    CHECK_NEAR(x[1], 2 * cos(0.03) - 4 * sin(0.03), 1e-6);
    CHECK_NEAR(x[2], 3 * cos(3.0) + 1 * sin(3.0), 1e-6);
    CHECK_NEAR(x[3], 4 * cos(0.03) + 2 * sin(0.03), 1e-6);

    TEST("llama3 RoPE scaling: high frequencies kept, low ones divided by factor, the band between smoothed");
    model_config l3 = {.head_dim = 128, .rope_theta = 500000, .rope_llama3 = true, .rope_factor = 8,
                       .rope_low_freq_factor = 1, .rope_high_freq_factor = 4, .rope_original_max_pos = 8192};
    model_config plain = l3;
    plain.rope_llama3 = false;
    float a[64], p[64];
    rope_inv_freq(a, &l3);
    rope_inv_freq(p, &plain);
    int n_hi = 0, n_lo = 0, n_mid = 0;
    for (int i = 0; i < 64; i++) {
        double wl = 2 * M_PI / p[i];
        if (wl < 8192 / 4.0) {
            n_hi++;
            CHECK(a[i] == p[i]);
        } else if (wl > 8192 / 1.0) {
            n_lo++;
            CHECK(a[i] == (float)(p[i] / 8.0));
        } else {
            double sm = (8192 / wl - 1) / 3;
            n_mid++;
            CHECK_NEAR(a[i], (1 - sm) * p[i] / 8 + sm * p[i], 1e-6 * p[i]);
            CHECK(a[i] < p[i] && a[i] > p[i] / 8);
        }
    }
    CHECK(n_hi > 0 && n_lo > 0 && n_mid > 0);

    TEST("RMSNorm: x / sqrt(mean(x^2) + eps) * w, and 1/rms kept");
    float xs[4] = {1, 2, 3, 4}, w[4] = {1, 1, 1, 2}, y[4], rstd;
    rmsnorm_forward(y, &rstd, xs, w, 1, 4, 1e-5f);
    double r = 1 / sqrt(30.0 / 4 + 1e-5);
    CHECK_NEAR(rstd, r, 1e-7);
    CHECK_NEAR(y[0], 1 * r, 1e-6);
    CHECK_NEAR(y[3], 8 * r, 1e-6);

    TEST("softmax: known values and log-sum-exp, no overflow on large inputs");
    float sm[3] = {1, 2, 3}, big[2] = {1000, 1001};
    float lse = softmax_row(sm, 3);
    double z = exp(1) + exp(2) + exp(3);
    CHECK_NEAR(lse, log(z), 1e-6);
    CHECK_NEAR(sm[0], exp(1) / z, 1e-7);
    CHECK_NEAR(sm[2], exp(3) / z, 1e-7);
    CHECK_NEAR(softmax_row(big, 2), 1001 + log(1 + exp(-1.0)), 1e-4);
    CHECK_NEAR(big[1], 1 / (1 + exp(-1.0)), 1e-7);

    TEST("SwiGLU: silu(g) * u");
    float g[2] = {1.5f, -2}, u[2] = {2, 3}, o[2];
    swiglu_forward(o, g, u, 2);
    CHECK_NEAR(o[0], 1.5 / (1 + exp(-1.5)) * 2, 1e-6);
    CHECK_NEAR(o[1], -2 / (1 + exp(2.0)) * 3, 1e-6);

    TEST("GQA: query head h reads kv head h / (n_heads / n_kv_heads)");
    for (int h = 0; h < 8; h++) {
        CHECK_EQ_INT(gqa_kv_head(h, 8, 2), h < 4 ? 0 : 1);
        CHECK_EQ_INT(gqa_kv_head(h, 8, 8), h);
        CHECK_EQ_INT(gqa_kv_head(h, 8, 1), 0);
    }
    CHECK_EQ_INT(gqa_kv_head(8, 9, 3), 2);
}

static void test_permute(void) {
    TEST("GGUF Q/K permutation: rotate-half pairs become adjacent rows; unpermute inverts it");
    /* one head of 4 rows (HF: first half r0 r1, second half r2 r3), 2 columns */
    float hf[8] = {0, 0.5f, 1, 1.5f, 2, 2.5f, 3, 3.5f}, gg[8], back[8];
    qk_permute(gg, hf, 1, 4, 2);
    float want[8] = {0, 0.5f, 2, 2.5f, 1, 1.5f, 3, 3.5f};
    CHECK(!memcmp(gg, want, sizeof gg));
    qk_unpermute(back, gg, 1, 4, 2);
    CHECK(!memcmp(back, hf, sizeof hf));
    enum { NH = 3, HD = 8, COLS = 5 };
    float m0[NH * HD * COLS], m1[NH * HD * COLS], m2[NH * HD * COLS];
    for (int i = 0; i < NH * HD * COLS; i++) m0[i] = (float)((i * 7919) % 1000) / 7 + 1;
    qk_unpermute(m1, m0, NH, HD, COLS);
    qk_permute(m2, m1, NH, HD, COLS);
    CHECK(!memcmp(m0, m2, sizeof m0));
    CHECK(memcmp(m0, m1, sizeof m0) != 0);

    TEST("GGUF Q/K permutation: rows of any bytes (blocks of a quantized row) move as their floats do");
    unsigned char b1[sizeof m0];
    qk_unpermute_rows(b1, m0, NH, HD, COLS * sizeof(float));
    CHECK(!memcmp(b1, m1, sizeof m1));
    unsigned char r0[NH * HD * 34], r1[NH * HD * 34]; /* one 34-byte Q8_0 block per row */
    for (size_t i = 0; i < sizeof r0; i++) r0[i] = (unsigned char)(i * 131 % 251);
    qk_unpermute_rows(r1, r0, NH, HD, 34);
    for (int h = 0; h < NH; h++) /* HF row h*HD + j*HD/2 + i is GGUF row h*HD + 2i + j */
        for (int i = 0; i < HD / 2; i++)
            for (int j = 0; j < 2; j++)
                CHECK(!memcmp(r1 + (h * HD + j * HD / 2 + i) * 34, r0 + (h * HD + 2 * i + j) * 34, 34));
}

static int parse(model_config *c, const char *json, gerr *e) {
    return config_parse_hf(c, json, "config.json", e);
}

static void test_config(void) {
    model_config c;
    gerr e = {0};
    TEST("config.json: a Llama 3 config with llama3 rope scaling");
    const char *llama3 =
        "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": 2048,"
        " \"intermediate_size\": 8192, \"num_hidden_layers\": 16, \"num_attention_heads\": 32,"
        " \"num_key_value_heads\": 8, \"vocab_size\": 128256, \"max_position_embeddings\": 131072,"
        " \"rms_norm_eps\": 1e-05, \"rope_theta\": 500000.0, \"tie_word_embeddings\": true,"
        " \"bos_token_id\": 128000, \"eos_token_id\": [128001, 128008, 128009],"
        " \"rope_scaling\": {\"factor\": 32.0, \"high_freq_factor\": 4.0, \"low_freq_factor\": 1.0,"
        " \"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"}}";
    CHECK_EQ_INT(parse(&c, llama3, &e), 0);
    CHECK_EQ_INT(c.arch, ARCH_LLAMA);
    CHECK_EQ_INT(c.dim, 2048);
    CHECK_EQ_INT(c.head_dim, 64);
    CHECK_EQ_INT(c.n_kv_heads, 8);
    CHECK_EQ_INT(c.max_seq_len, 131072);
    CHECK(c.tied_embeddings && c.rope_llama3 && !c.qkv_bias && !c.qk_norm);
    CHECK_NEAR(c.rope_factor, 32, 0);
    CHECK_EQ_INT(c.rope_original_max_pos, 8192);
    CHECK_NEAR(c.rope_theta, 500000, 0);
    CHECK_NEAR(c.norm_eps, 1e-5, 1e-12);
    CHECK_EQ_INT(c.bos_id, 128000);
    CHECK_EQ_INT(c.n_eos, 3);
    CHECK(config_is_eos(&c, 128009) && !config_is_eos(&c, 128000));

    TEST("config.json: qwen3 head_dim from the config, qwen2 bias, defaults");
    CHECK_EQ_INT(parse(&c, "{\"model_type\": \"qwen3\", \"hidden_size\": 1024, \"intermediate_size\": 3072,"
                           " \"num_hidden_layers\": 28, \"num_attention_heads\": 16, \"num_key_value_heads\": 8,"
                           " \"head_dim\": 128, \"vocab_size\": 151936, \"sliding_window\": null,"
                           " \"use_sliding_window\": false}", &e), 0);
    CHECK(c.arch == ARCH_QWEN3 && c.qk_norm && c.head_dim == 128 && !c.tied_embeddings);
    CHECK_NEAR(c.norm_eps, 1e-6, 1e-12);
    CHECK_NEAR(c.rope_theta, 10000, 0);
    CHECK_EQ_INT(parse(&c, "{\"architectures\": [\"Qwen2ForCausalLM\"], \"hidden_size\": 896,"
                           " \"intermediate_size\": 4864, \"num_hidden_layers\": 24, \"num_attention_heads\": 14,"
                           " \"num_key_value_heads\": 2, \"vocab_size\": 151936, \"sliding_window\": 32768,"
                           " \"max_position_embeddings\": 32768, \"use_sliding_window\": false}", &e), 0);
    CHECK(c.arch == ARCH_QWEN2 && c.qkv_bias && c.head_dim == 64 && c.n_eos == 0 && c.bos_id == -1);

    TEST("config.json: Mistral without a sliding window loads, with one is refused");
    const char *mistral = "{\"architectures\": [\"MistralForCausalLM\"], \"hidden_size\": 64,"
                          " \"intermediate_size\": 96, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
                          " \"vocab_size\": 100, \"max_position_embeddings\": 8192, \"sliding_window\": %s}";
    char buf[1024];
    snprintf(buf, sizeof buf, mistral, "null");
    CHECK_EQ_INT(parse(&c, buf, &e), 0);
    CHECK_EQ_INT(c.arch, ARCH_LLAMA);
    snprintf(buf, sizeof buf, mistral, "8192");
    CHECK_EQ_INT(parse(&c, buf, &e), 0);
    snprintf(buf, sizeof buf, mistral, "4096");
    CHECK_EQ_INT(parse(&c, buf, &e), EX_DATAERR);
    CHECK(strstr(e.msg, "sliding window not supported") != NULL);

    TEST("config.json: unsupported architecture, rope type and missing keys are data errors naming them");
    CHECK_EQ_INT(parse(&c, "{\"architectures\": [\"GPT2LMHeadModel\"], \"hidden_size\": 64}", &e), EX_DATAERR);
    CHECK(strstr(e.msg, "unsupported architecture \"GPT2LMHeadModel\"") != NULL);
    CHECK_EQ_INT(parse(&c, "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 96,"
                           " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 100,"
                           " \"rope_scaling\": {\"type\": \"dynamic\", \"factor\": 4.0}}", &e), EX_DATAERR);
    CHECK(strstr(e.msg, "rope_scaling type \"dynamic\" is not supported") != NULL);
    /* yarn: _compute_yarn_parameters' defaults */
    CHECK_EQ_INT(parse(&c, "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 96,"
                           " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 100,"
                           " \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4.0}}", &e), 0);
    CHECK(c.rope_yarn && c.rope_truncate && c.rope_beta_fast == 32 && c.rope_beta_slow == 1);
    CHECK_EQ_INT(c.rope_original_max_pos, 2048);
    CHECK_NEAR(c.rope_attn_factor, 0.1 * log(4.0) + 1, 1e-15);
    CHECK_EQ_INT(parse(&c, "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 96,"
                           " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 100,"
                           " \"rope_scaling\": {\"type\": \"yarn\", \"factor\": -4.0}}", &e), EX_DATAERR);
    CHECK(strstr(e.msg, "yarn: factor, beta_fast and beta_slow must be positive") != NULL);
    CHECK_EQ_INT(parse(&c, "{\"model_type\": \"llama\", \"intermediate_size\": 96}", &e), EX_DATAERR);
    CHECK(strstr(e.msg, "\"hidden_size\" is missing") != NULL);
    CHECK_EQ_INT(parse(&c, "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 96,"
                           " \"num_hidden_layers\": 2, \"num_attention_heads\": 5, \"num_key_value_heads\": 2,"
                           " \"vocab_size\": 100}", &e), EX_DATAERR);
    CHECK_EQ_INT(parse(&c, "[1, 2]", &e), EX_DATAERR);
    CHECK_EQ_INT(parse(&c, "{\"model_type\": ", &e), EX_DATAERR);
    CHECK_EQ_INT(parse(&c, "{\"model_type\": \"llama\", \"hidden_size\": 64.5}", &e), EX_DATAERR);
    CHECK(strstr(e.msg, "hidden_size") != NULL);
}

static void test_config_classifier(void) {
    model_config c;
    gerr e = {0};
    const char *fmt = "{\"architectures\": [\"%s\"], \"hidden_size\": 64, \"intermediate_size\": 96,"
                      " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 100%s}";
    char buf[1024];
    TEST("config.json: *ForSequenceClassification is the family's decoder with a score head");
    const char *classes[] = {"LlamaForSequenceClassification", "MistralForSequenceClassification",
                             "Qwen2ForSequenceClassification", "Qwen3ForSequenceClassification"};
    const model_arch archs[] = {ARCH_LLAMA, ARCH_LLAMA, ARCH_QWEN2, ARCH_QWEN3};
    for (int i = 0; i < 4; i++) {
        snprintf(buf, sizeof buf, fmt, classes[i], ", \"num_labels\": 1");
        CHECK_EQ_INT(parse(&c, buf, &e), 0);
        CHECK(c.seq_cls && c.arch == archs[i] && c.num_labels == 1 && c.pad_id == -1);
        CHECK_EQ_STR(c.architecture, classes[i]);
    }
    CHECK(c.qk_norm);
    snprintf(buf, sizeof buf, fmt, "Qwen2ForCausalLM", ", \"num_labels\": 3, \"pad_token_id\": 7");
    CHECK_EQ_INT(parse(&c, buf, &e), 0);
    CHECK(!c.seq_cls && c.num_labels == 0 && c.pad_id == -1 && c.qkv_bias);
    CHECK_EQ_STR(c.architecture, "Qwen2ForCausalLM");

    TEST("config.json: num_labels from id2label (winning, as in transformers), num_labels, or left to the weights");
    snprintf(buf, sizeof buf, fmt, "LlamaForSequenceClassification",
             ", \"num_labels\": 5, \"id2label\": {\"0\": \"bad\", \"1\": \"good\"}, \"pad_token_id\": 9");
    CHECK_EQ_INT(parse(&c, buf, &e), 0);
    CHECK_EQ_INT(c.num_labels, 2);
    CHECK_EQ_INT(c.pad_id, 9);
    snprintf(buf, sizeof buf, fmt, "LlamaForSequenceClassification", ", \"num_labels\": 4, \"pad_token_id\": null");
    CHECK_EQ_INT(parse(&c, buf, &e), 0);
    CHECK(c.num_labels == 4 && c.pad_id == -1);
    snprintf(buf, sizeof buf, fmt, "Qwen3ForSequenceClassification", "");
    CHECK_EQ_INT(parse(&c, buf, &e), 0);
    CHECK(c.seq_cls && c.num_labels == 0);

    TEST("config.json: other heads, bad num_labels and pad_token_id are data errors naming them");
    snprintf(buf, sizeof buf, fmt, "LlamaForTokenClassification", "");
    CHECK_EQ_INT(parse(&c, buf, &e), EX_DATAERR);
    CHECK(strstr(e.msg, "unsupported architecture \"LlamaForTokenClassification\"") != NULL);
    snprintf(buf, sizeof buf, fmt, "Qwen2MoeForSequenceClassification", "");
    CHECK_EQ_INT(parse(&c, buf, &e), EX_DATAERR);
    snprintf(buf, sizeof buf, fmt, "LlamaForSequenceClassification", ", \"num_labels\": 0");
    CHECK_EQ_INT(parse(&c, buf, &e), EX_DATAERR);
    CHECK(strstr(e.msg, "num_labels") != NULL);
    snprintf(buf, sizeof buf, fmt, "LlamaForSequenceClassification", ", \"pad_token_id\": -1");
    CHECK_EQ_INT(parse(&c, buf, &e), EX_DATAERR);
    CHECK(strstr(e.msg, "pad_token_id") != NULL);
}

static void test_config_dir(void) {
    TEST("config_load_hf: generation_config.json's eos list replaces config.json's");
    char dir[] = "/tmp/grpo-test-model-XXXXXX", path[256];
    if (!mkdtemp(dir)) {
        CHECK(0);
        return;
    }
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 96, \"num_hidden_layers\": 2,"
              " \"num_attention_heads\": 4, \"vocab_size\": 100, \"eos_token_id\": 2}", f);
        fclose(f);
    }
    model_config c;
    gerr e = {0};
    CHECK_EQ_INT(config_load_hf(&c, dir, &e), 0);
    CHECK(c.n_eos == 1 && c.eos_ids[0] == 2);
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("{\"eos_token_id\": [7, 9]}", f);
        fclose(f);
    }
    CHECK_EQ_INT(config_load_hf(&c, dir, &e), 0);
    CHECK(c.n_eos == 2 && c.eos_ids[0] == 7 && c.eos_ids[1] == 9);

    TEST("model_load: a directory without weights is an error naming the file");
    model m;
    CHECK_EQ_INT(model_load(&m, dir, &e), EX_NOINPUT);
    CHECK(strstr(e.msg, "model.safetensors") != NULL);
    unlink(path);
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    CHECK_EQ_INT(model_load(&m, dir, &e), EX_NOINPUT);
    CHECK(strstr(e.msg, "config.json") != NULL);
    rmdir(dir);
    CHECK_EQ_INT(model_load(&m, "/nonexistent/model.gguf", &e), EX_NOINPUT);
}

static model_config tiny_config(model_arch arch, bool tied) {
    bool q3 = arch == ARCH_QWEN3 || arch == ARCH_QWEN3_MOE, moe = arch == ARCH_QWEN3_MOE;
    /* qwen3_moe: 3 of 8 experts in every layer */
    return (model_config){.arch = arch, .dim = 32, .hidden_dim = 48, .n_layers = 2, .n_heads = 4,
                          .n_kv_heads = 2, .head_dim = q3 ? 12 : 8, .vocab_size = 50,
                          .max_seq_len = 64, .rope_theta = 10000, .norm_eps = 1e-5f, .tied_embeddings = tied,
                          .qkv_bias = arch == ARCH_QWEN2, .qk_norm = q3, .n_experts = moe ? 8 : 0,
                          .n_experts_used = moe ? 3 : 0, .moe_hidden_dim = moe ? 16 : 0, .moe_step = moe ? 1 : 0,
                          .bos_id = -1, .pad_id = -1};
}

/* A tiny random model built in memory: the three cache paths must agree. */
static void test_forward_paths(model_arch arch, bool tied) {
    model m;
    memset(&m, 0, sizeof m);
    m.cfg = tiny_config(arch, tied);
    gerr e = {0};
    static char names[4][64]; /* TEST keeps the pointer until the next test */
    char *name = names[arch];
    snprintf(name, sizeof names[0], "forward paths agree on a tiny random %s model%s", model_arch_name(arch),
             tied ? " (tied)" : "");
    TEST(name);
    if (model_alloc(&m, &e)) {
        CHECK(0);
        return;
    }
    fill_random_floats(m.params_memory, m.n_params, 88172645463325252ULL + arch);
    int32_t tok[13];
    for (int i = 0; i < 13; i++) tok[i] = (i * 17 + 3) % 50;
    float *out = malloc(13 * 50 * sizeof *out);
    paths_result res;
    CHECK(out != NULL);
    CHECK_EQ_INT(run_paths(&m, tok, 13, out, &res, &e), 0);
    CHECK(res.decode_diff <= 1e-5);
    CHECK(res.batch_diff <= 1e-5);
    bool finite = true;
    for (int i = 0; i < 13 * 50; i++) finite = finite && isfinite(out[i]);
    CHECK(finite);
    free(out);
    model_free(&m);
}

/* model_forward is model_forward_hidden and the LM head: the hidden states of
 * the wanted rows, multiplied by lm_head here in double, give its logits. */
static void test_forward_hidden(void) {
    TEST("model_forward_hidden: the wanted rows' final-normed states; times lm_head they are model_forward's logits");
    model m;
    memset(&m, 0, sizeof m);
    m.cfg = tiny_config(ARCH_QWEN2, false);
    gerr e = {0};
    if (model_alloc(&m, &e)) {
        CHECK(0);
        return;
    }
    fill_random_floats(m.params_memory, m.n_params, 0x9E3779B97F4A7C15ULL);
    enum { T = 11, V = 50, D = 32 };
    int32_t tok[2 * T];
    int seq[2 * T], pos[2 * T];
    bool want[2 * T];
    for (int i = 0; i < 2 * T; i++) /* two sequences packed in one call, as the rm reward does */
        tok[i] = (i * 13 + 5) % V, seq[i] = i / T, pos[i] = i % T, want[i] = i % 3 == 1;
    kv_cache c;
    model_scratch s;
    CHECK_EQ_INT(kv_cache_init(&c, &m.cfg, 2, T, &e), 0);
    CHECK_EQ_INT(model_scratch_init(&s, &m.cfg, 2 * T, T, &e), 0);
    float logits[2 * T * V], hidden[2 * T * D], all[2 * T * D];
    model_forward(&m, &c, 2 * T, seq, pos, tok, want, logits, &s);
    int n = model_forward_hidden(&m, &c, 2 * T, seq, pos, tok, want, hidden, &s);
    CHECK_EQ_INT(n, 7);
    CHECK_EQ_INT(model_forward_hidden(&m, &c, 2 * T, seq, pos, tok, NULL, all, &s), 2 * T);
    double worst = 0, rms_err = 0, biggest = 0;
    for (int r = 0, k = 0; r < 2 * T; r++) {
        if (!want[r]) continue;
        /* the wanted rows come in row order, equal to the same rows of the all-rows call */
        rms_err = fmax(rms_err, max_abs_diff(hidden + (size_t)k * D, all + (size_t)r * D, D));
        /* RMSNorm with weight out_norm: mean((h / w)^2) is 1 (up to eps) */
        double ms = 0;
        for (int j = 0; j < D; j++) ms += pow(hidden[k * D + j] / m.w.out_norm[j], 2);
        CHECK_NEAR(ms / D, 1.0, 1e-3);
        for (int v = 0; v < V; v++) {
            double dot = 0;
            for (int j = 0; j < D; j++) dot += (double)hidden[k * D + j] * m.w.lm_head[(size_t)v * D + j];
            worst = fmax(worst, fabs(dot - logits[k * V + v]));
            biggest = fmax(biggest, fabs(dot));
        }
        k++;
    }
    CHECK(rms_err == 0);
    CHECK(worst <= 1e-5);
    CHECK(biggest > 0.1); /* not a test on zeros */
    model_scratch_free(&s);
    kv_cache_free(&c);
    model_free(&m);
}

static void test_classifier_layout(void) {
    TEST("a classifier's buffer: score [num_labels, dim] and no LM head, even with tied embeddings");
    model m;
    memset(&m, 0, sizeof m);
    m.cfg = tiny_config(ARCH_LLAMA, true);
    m.cfg.seq_cls = true;
    gerr e = {0};
    CHECK_EQ_INT(model_alloc(&m, &e), EX_DATAERR); /* num_labels unknown */
    m.cfg.num_labels = 3;
    if (model_alloc(&m, &e)) {
        CHECK(0);
        return;
    }
    CHECK(m.w.lm_head == NULL && m.w.score != NULL);
    CHECK_EQ_INT((int)m.param_sizes[P_SCORE], 3 * 32);
    CHECK_EQ_INT((int)m.param_sizes[P_LM_HEAD], 0);
    CHECK(m.w.score + 3 * 32 == m.params_memory + m.n_params); /* last in the one buffer */
    size_t n = model_tensor_list(&m, NULL);
    model_tensor_ref *refs = calloc(n, sizeof *refs);
    CHECK(refs != NULL);
    model_tensor_list(&m, refs);
    int n_score = 0, n_head = 0;
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(refs[i].hf, "score.weight")) {
            n_score++;
            CHECK(refs[i].rows == 3 && refs[i].cols == 32 && refs[i].dst == m.w.score && refs[i].layer == -1);
        }
        n_head += !strcmp(refs[i].hf, "lm_head.weight");
    }
    CHECK(n_score == 1 && n_head == 0);
    free(refs);
    model_free(&m);

    TEST("a causal LM's buffer has no score tensor");
    m.cfg = tiny_config(ARCH_LLAMA, false);
    CHECK_EQ_INT(model_alloc(&m, &e), 0);
    CHECK(m.w.score == NULL && m.param_sizes[P_SCORE] == 0 && m.w.lm_head != NULL);
    model_free(&m);
}

/* Growing the cache keeps every sequence's cached positions. */
static void test_kv_grow(void) {
    TEST("kv_cache_grow keeps what is cached, per sequence and layer");
    model_config cfg = {0};
    cfg.n_layers = 3;
    cfg.n_kv_heads = 2;
    cfg.head_dim = 4;
    kv_cache c;
    gerr e = {0};
    CHECK_EQ_INT(kv_cache_init(&c, &cfg, 2, 5, &e), 0);
    size_t n = (size_t)2 * 3 * 5 * 8;
    for (size_t i = 0; i < n; i++) c.k[i] = (float)i + 0.5f, c.v[i] = -(float)i - 0.25f;
    CHECK_EQ_INT(kv_cache_grow(&c, &cfg, 9, &e), 0);
    CHECK_EQ_INT(c.max_len, 9);
    int bad = 0;
    for (int s = 0; s < 2; s++)
        for (int l = 0; l < 3; l++)
            for (int p = 0; p < 5; p++)
                for (int d = 0; d < 8; d++) {
                    size_t old = (((size_t)s * 3 + l) * 5 + p) * 8 + d, now = (((size_t)s * 3 + l) * 9 + p) * 8 + d;
                    bad += c.k[now] != (float)old + 0.5f || c.v[now] != -(float)old - 0.25f;
                }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(kv_cache_grow(&c, &cfg, 4, &e), 0); /* shrinking is a no-op */
    CHECK_EQ_INT(c.max_len, 9);
    kv_cache_free(&c);
}

int main(void) {
    const char *dir = getenv("GRPO_MODEL_DIR");
    if (dir && *dir) {
        const char *tok = getenv("GRPO_MODEL_TOKENS"), *out = getenv("GRPO_MODEL_OUT");
        return driver(dir, tok ? tok : "tokens.txt", out && *out ? out : "logits.f32");
    }
    test_ops();
    test_permute();
    test_config();
    test_config_classifier();
    test_config_dir();
    test_forward_paths(ARCH_LLAMA, false);
    test_forward_paths(ARCH_QWEN2, true);
    test_forward_paths(ARCH_QWEN3, false);
    test_forward_paths(ARCH_QWEN3_MOE, true);
    test_kv_grow();
    test_forward_hidden();
    test_classifier_layout();
    return check_done();
}
