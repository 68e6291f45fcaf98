/* The GGUF writer (lib/formats/gguf_write.c, gguf_quant.c, gguf_tokmeta.c)
 * and grpo-export's GGUF (lib/export/gguf_export.c): the Q8_0 quantizer on hand-worked blocks;
 * tiny random llama (llama3 RoPE), qwen2 (tied, biases) and qwen3 (q/k
 * norms, a Q8_0 fallback) models exported in every dtype and loaded back
 * with model_load (F32 bit for bit, F16/BF16 exactly their rounding, Q8_0
 * within its block error); the tokenizer metadata built from a tokenizer.json
 * loading back through model_text with the same tokens, ids and template;
 * re-export through the GGUF itself giving the same bytes; the
 * pre-tokenizer families; and the errors.
 *
 * Driver mode (tests/bats/gguf_export.bats; no grpo-export tool yet):
 *   test_gguf_write --export MODEL OUT DTYPE [SOURCE]
 * loads MODEL (HF directory or .gguf), writes OUT with gguf_export and the
 * tokenizer of SOURCE (default MODEL). An error prints its one line and
 * exits with its code. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "helpers.h"
#include "formats/gguf_quant.h"
#include "ops/packed_mxfp4.h"
#include "ckpt/load.h"
#include "export/export.h"
#include "io/mapped.h"
#include "formats/gguf.h"
#include "model/model.h"
#include "tok/model_text.h"
#include "util/half.h"

/* ---- helpers ------------------------------------------------------------------ */

static void write_text(const char *dir, const char *name, const char *text) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        printf("# cannot write %s\n", path);
        exit(1);
    }
}

static char *slurp(const char *path, size_t *len) {
    gerr e = {0};
    char *s = read_whole_file(path, len, &e);
    if (!s) printf("# %s\n", e.msg);
    return s;
}

/* Files named .NAME.tmp-PID left in dir. */
static int temps_left(const char *dir) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "find '%s' -maxdepth 1 -name '.*.tmp-*' | grep -q .", dir);
    return system(cmd) == 0;
}

/* ---- the Q8_0 quantizer ---------------------------------------------------------- */

static void test_q8_0(void) {
    TEST("Q8_0: d = max|x|/127 as f16, q = round half away from zero of x/d; zero blocks are zero");
    float x[64];
    unsigned char out[2 * Q8_0_BYTES];
    /* block 0: max 127 so d = 1 exactly and q = round(x) */
    const float vals[8] = {127, 0.5f, -0.5f, 1.5f, 2.5f, -2.5f, 0.49f, -126.6f};
    for (int j = 0; j < 32; j++) x[j] = j < 8 ? vals[j] : (float)(j - 16);
    for (int j = 0; j < 32; j++) x[32 + j] = 0;
    gguf_quantize_q8_0(x, out, 64);
    CHECK_EQ_INT(out[0] | out[1] << 8, f32_to_f16(1.0f));
    const int want[8] = {127, 1, -1, 2, 3, -3, 0, -127};
    for (int j = 0; j < 8; j++) CHECK_EQ_INT((int8_t)out[2 + j], want[j]);
    for (int j = 8; j < 32; j++) CHECK_EQ_INT((int8_t)out[2 + j], j - 16);
    for (int j = 0; j < Q8_0_BYTES; j++) CHECK_EQ_INT(out[Q8_0_BYTES + j], 0);

    TEST("Q8_0: a block of mixed scale dequantizes within d/2 and its extreme maps to +-127");
    for (int j = 0; j < 32; j++) x[j] = (float)sin(j * 0.7) * 0.037f;
    x[5] = -0.05f;
    gguf_quantize_q8_0(x, out, 32);
    float d = f16_to_f32((uint16_t)(out[0] | out[1] << 8));
    CHECK_NEAR(d, 0.05 / 127, 0.05 / 127 * 1e-3);
    CHECK_EQ_INT((int8_t)out[2 + 5], -127);
    for (int j = 0; j < 32; j++) CHECK_NEAR((int8_t)out[2 + j] * d, x[j], 0.5 * d + 1e-3 * d * 127);
}

/* ---- MXFP4 from its own values ----------------------------------------------------- */

static void test_mxfp4_exact(void) {
    TEST("MXFP4: blocks of every scale and code back from their values exactly, in GGUF's and Hugging Face's order; "
         "other values refused");
    enum { NB = 255 * 4 };
    static unsigned char src[NB * MX4W_GGUF_BYTES], out[NB * MX4W_GGUF_BYTES];
    static float x[NB * 32], y[NB * 32];
    uint64_t r = 42;
    for (int b = 0; b < NB; b++) {
        unsigned char *blk = src + (size_t)b * MX4W_GGUF_BYTES;
        blk[0] = (unsigned char)(b / 4); /* every scale byte but the NaN, four blocks each */
        for (int j = 1; j < MX4W_GGUF_BYTES; j++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            blk[j] = (unsigned char)(r >> 56);
            if (blk[0] >= 253) blk[j] &= 0x33; /* small codes only: the largest scales overflow the others */
            if (b % 4 == 3) blk[j] &= 0x77;    /* no negative code, no -0, small codes: several scales fit */
        }
    }
    gerr e = {0};
    CHECK(quant_dequantize(GGML_TYPE_MXFP4, src, x, NB * 32, &e) == 0);
    CHECK(gguf_mxfp4_exact(x, out, NB * 32));
    CHECK(quant_dequantize(GGML_TYPE_MXFP4, out, y, NB * 32, &e) == 0);
    CHECK(memcmp(x, y, sizeof x) == 0);
    /* a block whose largest code is 12 halves keeps its scale */
    int kept = 0, full = 0;
    for (int b = 0; b < NB; b++) {
        bool big = false;
        for (int j = 1; j < MX4W_GGUF_BYTES; j++)
            big = big || (src[b * MX4W_GGUF_BYTES + j] & 7) == 7 || (src[b * MX4W_GGUF_BYTES + j] >> 4 & 7) == 7;
        full += big;
        kept += big && out[b * MX4W_GGUF_BYTES] == src[b * MX4W_GGUF_BYTES];
    }
    CHECK(full > 0 && kept == full);
    /* the same blocks in gpt-oss's Hugging Face order: value 2j in byte j's low nibble, 2j + 1 in its high one */
    static unsigned char hb[NB * MX4W_HF_BYTES], hs[NB];
    CHECK(hf_mxfp4_exact(x, hb, hs, NB * 32));
    bool same = true;
    for (int b = 0; b < NB; b++)
        for (int v = 0; v < 32; v++) {
            const unsigned char *g = out + (size_t)b * MX4W_GGUF_BYTES, *h = hb + (size_t)b * MX4W_HF_BYTES;
            int gc = v < 16 ? g[1 + v] & 15 : g[1 + v - 16] >> 4, hc = v % 2 ? h[v / 2] >> 4 : h[v / 2] & 15;
            same = same && gc == hc && hs[b] == g[0];
        }
    CHECK(same);
    float z[32] = {0};
    CHECK(gguf_mxfp4_exact(z, out, 32) && out[0] == 0);
    z[5] = -0.0f, z[7] = 0.5f; /* -0 as code 8: transformers' negative zero */
    CHECK(gguf_mxfp4_exact(z, out, 32) && out[1 + 5] == 0x08 && out[1 + 7] == 0x06); /* 0.5 = 8 halves of 2^-4 */
    CHECK(hf_mxfp4_exact(z, hb, hs, 32) && hb[2] == 0x80 && hb[3] == 0x60 && hs[0] == out[0]);
    z[5] = 0, z[7] = 0;
    z[3] = 0.3f; /* no code times a power of two */
    CHECK(!gguf_mxfp4_exact(z, out, 32));
    z[3] = 1.0f, z[4] = 0x1p-20f; /* both MXFP4 values, but 2^20 apart: no one scale */
    CHECK(!gguf_mxfp4_exact(z, out, 32));
    z[4] = INFINITY;
    CHECK(!gguf_mxfp4_exact(z, out, 32));
}

/* ---- a tokenizer directory ------------------------------------------------------- */

/* 100 ids: 0-2 special added tokens, 3 = "Ġ" (space), 4..95 the byte-level
 * symbols of 0x21..0x7C, 96 "Ġa" and 97 "Ġb" (merges in both JSON forms),
 * 98 a non-special added token, 99 unused. pre_tokenizer is given. */
enum { TOK_V = 100 };

static void write_tokenizer(const char *dir, const char *pre_tokenizer, const char *unk_json) {
    strbuf b = {0};
    sb_puts(&b, "{\"version\":\"1.0\",\"added_tokens\":["
                "{\"id\":0,\"content\":\"<|endoftext|>\",\"special\":true,\"normalized\":false},"
                "{\"id\":1,\"content\":\"<|im_start|>\",\"special\":true,\"normalized\":false},"
                "{\"id\":2,\"content\":\"<|im_end|>\",\"special\":true,\"normalized\":false},"
                "{\"id\":98,\"content\":\"<think>\",\"special\":false,\"normalized\":false}],"
                "\"normalizer\":null,\"pre_tokenizer\":");
    sb_puts(&b, pre_tokenizer);
    sb_puts(&b, ",\"post_processor\":null,\"decoder\":{\"type\":\"ByteLevel\"},"
                "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":");
    sb_puts(&b, unk_json);
    sb_puts(&b, ",\"vocab\":{\"<|endoftext|>\":0,\"<|im_start|>\":1,\"<|im_end|>\":2,\"\xc4\xa0\":3");
    for (int c = 0x21; c <= 0x7C; c++) {
        char s[8];
        if (c == '"' || c == '\\') snprintf(s, sizeof s, "\\%c", c);
        else snprintf(s, sizeof s, "%c", c);
        sb_printf(&b, ",\"%s\":%d", s, c - 0x21 + 4);
    }
    sb_puts(&b, ",\"\xc4\xa0" "a\":96,\"\xc4\xa0" "b\":97},\"merges\":[[\"\xc4\xa0\",\"a\"],\"\xc4\xa0 b\"]}}");
    write_text(dir, "tokenizer.json", b.data);
    sb_free(&b);
}

static const char TEMPLATE[] =
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

static void write_tok_dir(const char *dir) {
    write_tokenizer(dir, "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true}", "null");
    strbuf b = {0};
    sb_puts(&b, "{\"bos_token\":\"<|im_start|>\",\"eos_token\":{\"content\":\"<|im_end|>\"},"
                "\"pad_token\":\"<|endoftext|>\",\"add_bos_token\":false,\"chat_template\":");
    sb_json_string(&b, TEMPLATE, strlen(TEMPLATE));
    sb_putc(&b, '}');
    write_text(dir, "tokenizer_config.json", b.data);
    sb_free(&b);
    write_text(dir, "generation_config.json", "{\"eos_token_id\":[2,0]}");
}

/* ---- tiny models ---------------------------------------------------------------- */

static int make_model(model *m, model_arch arch, bool tied, bool llama3, uint64_t seed) {
    memset(m, 0, sizeof *m);
    /* qwen3's head_dim 12 gives o_proj rows of 48 values: not whole Q8_0 blocks */
    m->cfg = (model_config){.arch = arch, .dim = 64, .hidden_dim = 96, .n_layers = 2, .n_heads = 4,
                            .n_kv_heads = 2, .head_dim = arch == ARCH_QWEN3 ? 12 : 16, .vocab_size = TOK_V,
                            .max_seq_len = 256, .rope_theta = arch == ARCH_LLAMA ? 500000 : 1000000,
                            .norm_eps = 1e-6f, .tied_embeddings = tied, .qkv_bias = arch == ARCH_QWEN2,
                            .qk_norm = arch == ARCH_QWEN3, .bos_id = -1};
    if (llama3) {
        m->cfg.rope_llama3 = true;
        m->cfg.rope_factor = 8, m->cfg.rope_low_freq_factor = 1, m->cfg.rope_high_freq_factor = 4;
        m->cfg.rope_original_max_pos = 32;
    }
    gerr e = {0};
    if (model_alloc(m, &e)) {
        printf("# %s\n", e.msg);
        return 1;
    }
    uint64_t st = 0x9E3779B97F4A7C15ull ^ seed;
    for (size_t i = 0; i < m->n_params; i++) { /* xorshift, uniform in [-1, 1), never 0 */
        st ^= st << 13, st ^= st >> 7, st ^= st << 17;
        m->params_memory[i] = (float)(((st >> 11) + 0.5) * 0x1.0p-52 - 1.0);
    }
    return 0;
}

/* The largest |got - want| beyond what dtype's rounding allows, over every
 * value of every tensor (0 when all are within). */
static double excess_error(const model *a, const model *b, uint32_t type, const model_tensor_ref *r) {
    size_t cols = (size_t)(r->cols ? r->cols : 1), n = (size_t)r->rows * cols;
    const float *x = r->dst;
    const float *y = b->w.t[r->param] + (r->dst - a->w.t[r->param]);
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double want = x[i], tol = 0;
        if (type == GGML_TYPE_F16) want = f16_to_f32(f32_to_f16(x[i]));
        if (type == GGML_TYPE_BF16) want = bf16_to_f32(f32_to_bf16(x[i]));
        if (type == GGML_TYPE_Q8_0) {
            /* q*d16 - x: half a step of d = amax/127, plus 127 steps of d's f16 rounding */
            size_t b0 = i / 32 * 32;
            float amax = 0;
            for (size_t j = b0; j < b0 + 32; j++) amax = fmaxf(amax, fabsf(x[j]));
            tol = amax / 127 * 0.5 + amax * 0x1.0p-11 + 1e-7;
        }
        double d = fabs(y[i] - want) - tol;
        if (!(d <= worst)) worst = d;
    }
    return worst;
}

/* What type a tensor should have been written as. */
static uint32_t expect_type(const model_tensor_ref *r, export_dtype dt) {
    if (!r->cols) return GGML_TYPE_F32;
    const uint32_t t[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0};
    if (dt == EXPORT_Q8_0 && r->cols % 32) return GGML_TYPE_F16;
    return t[dt];
}

static void check_file_types(const char *path, const model *m, export_dtype dt) {
    gguf_file f;
    gerr e = {0};
    if (gguf_open(&f, path, &e)) {
        printf("# %s\n", e.msg);
        CHECK(0);
        return;
    }
    size_t n = model_tensor_list(m, NULL);
    model_tensor_ref *refs = xcalloc(n, sizeof *refs);
    model_tensor_list(m, refs);
    int wrong = 0;
    for (size_t i = 0; i < n; i++) {
        const gguf_tensor *t = gguf_find_tensor(&f, refs[i].gguf);
        if (!t || t->type != expect_type(&refs[i], dt)) wrong++, printf("# %s: wrong type\n", refs[i].gguf);
    }
    CHECK_EQ_INT(wrong, 0);
    CHECK_EQ_INT(f.n_tensors, n + (m->cfg.rope_llama3 ? 1 : 0));
    CHECK_EQ_INT(f.alignment, 32);
    for (size_t i = 0; i < f.n_tensors; i++) CHECK_EQ_INT((f.data_offset + f.tensors[i].offset) % 32, 0);
    CHECK_EQ_INT(gguf_find_tensor(&f, "output.weight") == NULL, m->cfg.tied_embeddings);
    const uint32_t ftype[] = {0, 1, 32, 7};
    uint32_t v;
    CHECK(gguf_get_u32(&f, "general.file_type", &v, &e) == 0 && v == ftype[dt]);
    free(refs);
    gguf_close(&f);
}

static void test_roundtrip(const char *dir, model_arch arch, bool tied, bool llama3) {
    static char names[16][160]; /* TEST keeps the pointer until the next test */
    static int k;
    model m;
    if (make_model(&m, arch, tied, llama3, (uint64_t)arch * 7 + tied + 1)) {
        CHECK(0);
        return;
    }
    for (int dt = EXPORT_F32; dt <= EXPORT_Q8_0; dt++) {
        char *name = names[k++ % 16];
        snprintf(name, 160, "%s%s%s exported %s loads back %s", model_arch_name(arch), tied ? " tied" : "",
                 llama3 ? " llama3-rope" : "", export_dtype_name((export_dtype)dt),
                 dt == EXPORT_F32 ? "bit for bit" : "within its rounding");
        TEST(name);
        char out[4200];
        snprintf(out, sizeof out, "%s/m-%s-%d.gguf", dir, model_arch_name(arch), dt);
        gerr e = {0};
        int rc = gguf_export(out, &m, dir, (export_dtype)dt, &e);
        if (rc) printf("# %s\n", e.msg);
        CHECK_EQ_INT(rc, 0);
        model b;
        rc = model_load(&b, out, &e);
        if (rc) printf("# %s\n", e.msg);
        CHECK_EQ_INT(rc, 0);
        if (rc) continue;
        check_file_types(out, &m, (export_dtype)dt);
        const model_config *c = &m.cfg, *d = &b.cfg;
        CHECK(d->arch == c->arch && d->dim == c->dim && d->hidden_dim == c->hidden_dim &&
              d->n_layers == c->n_layers && d->n_heads == c->n_heads && d->n_kv_heads == c->n_kv_heads &&
              d->head_dim == c->head_dim && d->vocab_size == c->vocab_size && d->max_seq_len == c->max_seq_len &&
              d->rope_theta == c->rope_theta && d->norm_eps == c->norm_eps &&
              d->tied_embeddings == c->tied_embeddings && d->qkv_bias == c->qkv_bias && d->qk_norm == c->qk_norm);
        CHECK_EQ_INT(b.n_params, m.n_params);
        CHECK(!memcmp(b.inv_freq, m.inv_freq, (size_t)c->head_dim / 2 * sizeof(float)));
        CHECK_EQ_INT(d->bos_id, 1);
        CHECK(d->n_eos >= 1 && d->eos_ids[0] == 2);
        if (b.n_params != m.n_params) {
            model_free(&b);
            continue;
        }
        if (dt == EXPORT_F32) CHECK(!memcmp(b.params_memory, m.params_memory, m.n_params * sizeof(float)));
        size_t n = model_tensor_list(&m, NULL);
        model_tensor_ref *refs = xcalloc(n, sizeof *refs);
        model_tensor_list(&m, refs);
        double worst = 0;
        for (size_t i = 0; i < n; i++) {
            double x = excess_error(&m, &b, expect_type(&refs[i], (export_dtype)dt), &refs[i]);
            if (x > worst) worst = x, printf("# %s: %g beyond its rounding\n", refs[i].gguf, x);
        }
        CHECK(worst == 0);
        free(refs);
        model_free(&b);
        CHECK(!temps_left(dir));
    }
    model_free(&m);
}

/* Exporting what was loaded from an F32 export, with the export itself as
 * the tokenizer source, writes the same bytes: keys copied from a GGUF
 * source, the Q/K permutation and the RoPE factors all invert exactly. */
static void test_reexport(const char *dir) {
    TEST("export(load(export(m))) with the GGUF as source is byte-identical (llama3 RoPE, Q/K permuted)");
    model m, b;
    if (make_model(&m, ARCH_LLAMA, false, true, 99)) {
        CHECK(0);
        return;
    }
    char a_path[4200], b_path[4200];
    snprintf(a_path, sizeof a_path, "%s/tokdir.gguf", dir);
    snprintf(b_path, sizeof b_path, "%s/again.gguf", dir);
    gerr e = {0};
    CHECK_EQ_INT(gguf_export(a_path, &m, dir, EXPORT_F32, &e), 0);
    CHECK_EQ_INT(model_load(&b, a_path, &e), 0);
    CHECK_EQ_INT(gguf_export(b_path, &b, a_path, EXPORT_F32, &e), 0);
    size_t la = 0, lb = 0;
    char *fa = slurp(a_path, &la), *fb = slurp(b_path, &lb);
    CHECK(fa && fb && la == lb && !memcmp(fa, fb, la));
    free(fa);
    free(fb);
    model_free(&b);
    model_free(&m);
}

/* ---- the tokenizer side ------------------------------------------------------------ */

static void test_text_side(const char *dir) {
    TEST("tokenizer metadata from tokenizer.json: model_text of the GGUF has the same tokens, ids, template");
    model m;
    if (make_model(&m, ARCH_QWEN2, true, false, 5)) {
        CHECK(0);
        return;
    }
    char out[4200];
    snprintf(out, sizeof out, "%s/text.gguf", dir);
    gerr e = {0};
    CHECK_EQ_INT(gguf_export(out, &m, dir, EXPORT_BF16, &e), 0);
    model_text a, b;
    int ra = model_text_load(dir, &a, &e), rb = model_text_load(out, &b, &e);
    if (ra || rb) printf("# %s\n", e.msg);
    CHECK(ra == 0 && rb == 0);
    if (!ra && !rb) {
        CHECK_EQ_INT(tok_vocab_size(b.tok), TOK_V);
        int diff = 0;
        for (int32_t i = 0; i < 99; i++) {
            size_t la, lb;
            const char *x = tok_token_bytes(a.tok, i, &la), *y = tok_token_bytes(b.tok, i, &lb);
            diff += !x || !y || la != lb || memcmp(x, y, la) || tok_is_special(a.tok, i) != tok_is_special(b.tok, i);
        }
        CHECK_EQ_INT(diff, 0);
        const char text[] = "<|im_start|>user\n a b ab <think>!{}|<|im_end|>";
        int32_t *ia, *ib;
        size_t na, nb;
        CHECK_EQ_INT(tok_encode(a.tok, text, strlen(text), true, &ia, &na, &e), 0);
        CHECK_EQ_INT(tok_encode(b.tok, text, strlen(text), true, &ib, &nb, &e), 0);
        CHECK(na == nb && !memcmp(ia, ib, na * sizeof *ia));
        bool merged = false, think = false;
        for (size_t i = 0; i < nb; i++) merged |= ib[i] == 96 || ib[i] == 97, think |= ib[i] == 98;
        CHECK(merged && think);
        free(ia);
        free(ib);
        CHECK_EQ_STR(b.chat_template, TEMPLATE);
        CHECK_EQ_INT(b.bos_id, 1);
        CHECK(b.n_eos == 1 && b.eos_ids[0] == 2);
    }
    model_text_free(&a);
    model_text_free(&b);

    gguf_file f;
    CHECK_EQ_INT(gguf_open(&f, out, &e), 0);
    gguf_str s;
    gguf_value types;
    uint32_t pad;
    bool add_bos = true;
    CHECK(gguf_get_string(&f, "tokenizer.ggml.model", &s, &e) == 0 && s.len == 4 && !memcmp(s.ptr, "gpt2", 4));
    CHECK(gguf_get_string(&f, "tokenizer.ggml.pre", &s, &e) == 0 && s.len == 5 && !memcmp(s.ptr, "gpt-2", 5));
    CHECK(gguf_get_string(&f, "general.name", &s, &e) == 0 && s.len > 4 && !memcmp(s.ptr, "gguf", 4));
    CHECK(gguf_get_u32(&f, "tokenizer.ggml.padding_token_id", &pad, &e) == 0 && pad == 0);
    CHECK(!gguf_find_kv(&f, "tokenizer.ggml.unknown_token_id"));
    CHECK(gguf_get_bool(&f, "tokenizer.ggml.add_bos_token", &add_bos, &e) == 0 && !add_bos);
    CHECK_EQ_INT(gguf_get_array(&f, "tokenizer.ggml.token_type", GGUF_I32, &types, &e), 0);
    CHECK(types.count == TOK_V && gguf_array_int(&types, 0) == 3 && gguf_array_int(&types, 3) == 1 &&
          gguf_array_int(&types, 98) == 4 && gguf_array_int(&types, 99) == 5);
    gguf_value toks, merges;
    CHECK_EQ_INT(gguf_get_array(&f, "tokenizer.ggml.tokens", GGUF_STRING, &toks, &e), 0);
    CHECK_EQ_INT(gguf_get_array(&f, "tokenizer.ggml.merges", GGUF_STRING, &merges, &e), 0);
    s = gguf_array_str(&toks, 99);
    CHECK(s.len == 7 && !memcmp(s.ptr, "[PAD99]", 7));
    CHECK(merges.count == 2);
    s = gguf_array_str(&merges, 0);
    CHECK(s.len == 4 && !memcmp(s.ptr, "\xc4\xa0 a", 4));
    gguf_close(&f);
    model_free(&m);
}

/* tokenizer.ggml.pre of each pre_tokenizer family, in its own directory. */
static void test_pre_families(const char *root) {
    TEST("tokenizer.ggml.pre: smollm, llama-bpe, qwen2, gpt-4o from their pre_tokenizers; others refused; unk id");
    static const char *const pres[][2] = {
        {"{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Digits\",\"individual_digits\":true},"
         "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}]}", "smollm"},
        {"{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":"
         "\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}"
         "\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},\"behavior\":\"Isolated\","
         "\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}]}", "llama-bpe"},
        {"{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":"
         "\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| ?[^\\\\s\\\\p{L}"
         "\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},\"behavior\":\"Isolated\","
         "\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}]}", "qwen2"},
        {"{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":"
         "\"[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?[\\\\p{Lu}\\\\p{Lt}\\\\p{Lm}\\\\p{Lo}\\\\p{M}]*[\\\\p{Ll}\\\\p{Lm}"
         "\\\\p{Lo}\\\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?[\\\\p{Lu}\\\\p{Lt}"
         "\\\\p{Lm}\\\\p{Lo}\\\\p{M}]+[\\\\p{Ll}\\\\p{Lm}\\\\p{Lo}\\\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
         "\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n/]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|"
         "\\\\s+\"},\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\","
         "\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":false}]}", "gpt-4o"},
        {"{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"use_regex\":true}", NULL},
        {"{\"type\":\"Whitespace\"}", NULL},
    };
    model m;
    if (make_model(&m, ARCH_LLAMA, true, false, 3)) {
        CHECK(0);
        return;
    }
    char dir[4200], out[4300];
    snprintf(dir, sizeof dir, "%s/pre", root);
    snprintf(out, sizeof out, "%s/pre.gguf", root);
    CHECK_EQ_INT(mkdir(dir, 0755), 0);
    for (size_t i = 0; i < sizeof pres / sizeof *pres; i++) {
        write_tokenizer(dir, pres[i][0], "\"<|endoftext|>\"");
        gerr e = {0};
        int rc = gguf_export(out, &m, dir, EXPORT_F16, &e);
        if (!pres[i][1]) {
            CHECK_EQ_INT(rc, EX_DATAERR);
            CHECK(strstr(e.msg, "pre_tokenizer") && strstr(e.msg, "tokenizer.json"));
            continue;
        }
        CHECK_EQ_INT(rc, 0);
        gguf_file f;
        gguf_str s;
        uint32_t unk = 99;
        CHECK_EQ_INT(gguf_open(&f, out, &e), 0);
        CHECK(gguf_get_string(&f, "tokenizer.ggml.pre", &s, &e) == 0 && s.len == strlen(pres[i][1]) &&
              !memcmp(s.ptr, pres[i][1], s.len));
        CHECK(gguf_get_u32(&f, "tokenizer.ggml.unknown_token_id", &unk, &e) == 0 && unk == 0);
        gguf_close(&f);
        model_text mt; /* our own tokenizer accepts what was written */
        CHECK_EQ_INT(model_text_load(out, &mt, &e), 0);
        model_text_free(&mt);
    }
    model_free(&m);
}

static void test_errors(const char *dir) {
    TEST("errors: vocabulary mismatch, missing source, unwritable output; nothing left behind");
    model m;
    if (make_model(&m, ARCH_QWEN3, false, false, 4)) {
        CHECK(0);
        return;
    }
    char out[4200], gg[4200];
    snprintf(out, sizeof out, "%s/err.gguf", dir);
    snprintf(gg, sizeof gg, "%s/m-qwen3-0.gguf", dir); /* written by the round trips */
    gerr e = {0};
    m.cfg.vocab_size = 50; /* the tokenizer's ids run to 99 */
    CHECK_EQ_INT(gguf_export(out, &m, dir, EXPORT_F32, &e), EX_DATAERR);
    CHECK(strstr(e.msg, "tokenizer.json") != NULL);
    CHECK_EQ_INT(gguf_export(out, &m, gg, EXPORT_F32, &e), EX_DATAERR);
    CHECK(strstr(e.msg, "100 tokens") != NULL && strstr(e.msg, "50") != NULL);
    m.cfg.vocab_size = TOK_V;
    CHECK_EQ_INT(gguf_export(out, &m, "/nonexistent/tok", EXPORT_F32, &e), EX_NOINPUT);
    CHECK_EQ_INT(gguf_export("/nonexistent/dir/x.gguf", &m, dir, EXPORT_F32, &e), EX_CANTCREAT);
    CHECK(access(out, F_OK) != 0);
    CHECK(!temps_left(dir));
    model_free(&m);
}

/* ---- driver ------------------------------------------------------------------------ */

static int driver(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: test_gguf_write --export MODEL OUT DTYPE [SOURCE]\n");
        return EX_USAGE;
    }
    gerr e = {0};
    export_dtype dt = EXPORT_F32;
    model m;
    int rc = export_dtype_parse(argv[4], &dt, &e);
    if (!rc) rc = model_load(&m, argv[2], &e);
    if (!rc) {
        rc = gguf_export(argv[3], &m, argc > 5 ? argv[5] : argv[2], dt, &e);
        model_free(&m);
    }
    if (rc) fprintf(stderr, "test_gguf_write: %s\n", e.msg);
    return rc;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--export")) return driver(argc, argv);
    char dir[] = "/tmp/gguf_write_XXXXXX";
    if (!mkdtemp(dir)) {
        printf("# mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    write_tok_dir(dir);
    test_q8_0();
    test_mxfp4_exact();
    test_roundtrip(dir, ARCH_LLAMA, false, true);
    test_roundtrip(dir, ARCH_QWEN2, true, false);
    test_roundtrip(dir, ARCH_QWEN3, false, false);
    test_reexport(dir);
    test_text_side(dir);
    test_pre_families(dir);
    test_errors(dir);
    remove_tree(dir);
    return check_done();
}
