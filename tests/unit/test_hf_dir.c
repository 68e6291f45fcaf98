/* Unit tests of the Hugging Face directory writer (lib/ckpt/hf_*.c) and of
 * LoRA adapter directories (lib/ckpt/adapter_dir.c, lib/ckpt/load.c): config.json generated for every
 * architecture reads back to the same model_config (llama3 RoPE scaling,
 * qwen3 head_dim, several eos ids, RoPE factors recovered from a GGUF's
 * rope_freqs); config.json copied with only torch_dtype changed, in the
 * file's own style; model.safetensors names, shapes, dtypes and values;
 * PEFT names; lora_save's adapter_config.json byte for byte as PEFT writes
 * it, lora_load round trip and its errors; adapter base resolution and the
 * merged load through model_load.
 *
 * Driver modes (tests/bats/export.bats, tests/ref/check_export.py):
 *   --make-adapter BASE OUTDIR [R [TARGETS [ALPHA]]]
 *       an adapter on model BASE (base_model_name_or_path = BASE as given):
 *       A Kaiming-uniform, B random non-zero (seed 7); r 4, all targets,
 *       alpha 8 by default. OUTDIR is created.
 *   --text-files SOURCE OUTDIR   hf_write_text_files (OUTDIR is created)
 *   --encode SOURCE IN.jsonl OUT.txt
 *       the tokenizer of SOURCE (model_text_load: a GGUF or a directory's
 *       tokenizer.json) encodes each line's "text" (special tokens matched)
 *       or "nospecial" (matched as text); one line of ids per record.
 * A failure prints the one-line message and exits with its code. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "helpers.h"
#include "ckpt/adapter_dir.h"
#include "ckpt/hf_dir.h"
#include "ckpt/hf_source.h"
#include "ckpt/load.h"
#include "io/mapped.h"
#include "io/outstream.h"
#include "formats/safetensors.h"
#include "model/lora.h"
#include "ops/ops.h"
#include "tok/model_text.h"
#include "util/half.h"
#include "util/rng.h"

/* ---- helpers -------------------------------------------------------------------------- */

static char root[64];

static char *at(const char *rel) { return path_under(root, rel); }

/* A step the current test needs failed: the test fails, with the reason
 * (never an early return that leaves it "ok"). */
static void setup_failed(const gerr *e) {
    printf("#   setup failed: %s\n", e->msg);
    check_current_failed = 1;
}

static void put_text(const char *path, const char *text) {
    gerr e = {0};
    if (write_file_atomic(path, text, strlen(text), &e)) setup_failed(&e);
}

static char *get_text(const char *path) {
    gerr e = {0};
    char *t = read_whole_file(path, NULL, &e);
    if (!t) setup_failed(&e);
    return t;
}

/* Replaces the first `from` in the file by `to`. */
static void rewrite(const char *path, const char *from, const char *to) {
    char *t = get_text(path);
    char *p = t ? strstr(t, from) : NULL;
    CHECK(p != NULL);
    if (!p) return free(t);
    strbuf b = {0};
    sb_append(&b, t, (size_t)(p - t));
    sb_puts(&b, to);
    sb_puts(&b, p + strlen(from));
    put_text(path, b.data);
    sb_free(&b);
    free(t);
}

static void fill(float *p, size_t n, uint64_t seed, double scale) {
    rng_stream r;
    rng_init(&r, seed, "test_hf_dir", 11, 0);
    for (size_t i = 0; i < n; i++) {
        double u = 2 * rng_uniform(&r) - 1;
        p[i] = (float)(scale * (u + (u < 0 ? -0.05 : 0.05))); /* never zero */
    }
}

static void tiny_cfg(model_config *c, model_arch arch, bool tied) {
    memset(c, 0, sizeof *c);
    c->arch = arch;
    c->dim = 32, c->hidden_dim = 48, c->n_layers = 2, c->n_heads = 4, c->n_kv_heads = 2;
    c->head_dim = arch == ARCH_QWEN3 ? 12 : 8;
    c->vocab_size = 50, c->max_seq_len = 256, c->rope_theta = 500000, c->norm_eps = 1e-6f;
    c->tied_embeddings = tied, c->qkv_bias = arch == ARCH_QWEN2, c->qk_norm = arch == ARCH_QWEN3;
    c->bos_id = 1, c->eos_ids[0] = 2, c->n_eos = 1;
}

static bool tiny_model(model *m, const model_config *c, uint64_t seed) {
    memset(m, 0, sizeof *m);
    m->cfg = *c;
    gerr e = {0};
    if (model_alloc(m, &e)) {
        setup_failed(&e);
        return false;
    }
    fill(m->params_memory, m->n_params, seed, 0.3);
    return true;
}

static bool cfg_same(const model_config *a, const model_config *b) {
    bool ok = a->arch == b->arch && a->dim == b->dim && a->hidden_dim == b->hidden_dim && a->n_layers == b->n_layers &&
              a->n_heads == b->n_heads && a->n_kv_heads == b->n_kv_heads && a->head_dim == b->head_dim &&
              a->vocab_size == b->vocab_size && a->max_seq_len == b->max_seq_len && a->rope_theta == b->rope_theta &&
              a->norm_eps == b->norm_eps && a->rope_llama3 == b->rope_llama3 &&
              a->tied_embeddings == b->tied_embeddings && a->qkv_bias == b->qkv_bias && a->qk_norm == b->qk_norm &&
              a->bos_id == b->bos_id && a->n_eos == b->n_eos;
    if (a->rope_llama3 && b->rope_llama3)
        ok = ok && a->rope_factor == b->rope_factor && a->rope_low_freq_factor == b->rope_low_freq_factor &&
             a->rope_high_freq_factor == b->rope_high_freq_factor && a->rope_original_max_pos == b->rope_original_max_pos;
    for (int i = 0; ok && i < a->n_eos; i++) ok = a->eos_ids[i] == b->eos_ids[i];
    return ok;
}

/* ---- config.json ------------------------------------------------------------------------ */

/* Writes config.json for m as from a GGUF and reads it back. */
static int gen_and_load(const model *m, const char *dir, model_config *back, gerr *e) {
    mkdir(at(dir), 0755);
    char path[600];
    snprintf(path, sizeof path, "%s/config.json", at(dir));
    int rc = hf_write_config(path, m, at("fake.gguf"), "float32", false, e);
    return rc ? rc : config_load_hf(back, at(dir), e);
}

static void test_config_generated(void) {
    TEST("config.json generated for llama/qwen2/qwen3 reads back to the same model_config");
    put_text(at("fake.gguf"), "not read: only its kind (a file) matters");
    struct {
        model_arch arch;
        bool tied, llama3, two_eos;
    } cases[] = {{ARCH_LLAMA, false, false, false}, {ARCH_LLAMA, true, true, true}, {ARCH_QWEN2, true, false, true},
                 {ARCH_QWEN2, false, false, false}, {ARCH_QWEN3, false, false, false}, {ARCH_QWEN3, true, false, true}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        model_config c;
        tiny_cfg(&c, cases[i].arch, cases[i].tied);
        c.norm_eps = i % 2 ? 1e-5f : 1e-6f;
        if (cases[i].llama3)
            c.rope_llama3 = true, c.rope_factor = 32, c.rope_low_freq_factor = 1, c.rope_high_freq_factor = 4,
            c.rope_original_max_pos = 64;
        if (cases[i].two_eos) c.eos_ids[1] = 7, c.n_eos = 2;
        if (i == 3) c.bos_id = -1;
        model m;
        if (!tiny_model(&m, &c, 1 + i)) continue;
        model_config back;
        gerr e = {0};
        char dir[32];
        snprintf(dir, sizeof dir, "cfg%zu", i);
        int rc = gen_and_load(&m, dir, &back, &e);
        if (rc) printf("#   %s\n", e.msg);
        CHECK_EQ_INT(rc, 0);
        if (!rc && !cfg_same(&c, &back)) printf("#   case %zu differs after the round trip\n", i);
        CHECK(!rc && cfg_same(&c, &back));
        model_free(&m);
    }
    char *t = get_text(at("cfg1/config.json"));
    CHECK(t && strstr(t, "  \"rope_scaling\": {\n    \"factor\": 32.0,\n    \"high_freq_factor\": 4.0,\n"
                         "    \"low_freq_factor\": 1.0,\n    \"original_max_position_embeddings\": 64,\n"
                         "    \"rope_type\": \"llama3\"\n  },\n"));
    CHECK(t && strstr(t, "\"architectures\": [\n    \"LlamaForCausalLM\"\n  ],\n  \"attention_bias\": false,"));
    CHECK(t && strstr(t, "\"eos_token_id\": [\n    2,\n    7\n  ],"));
    CHECK(t && strstr(t, "\"rms_norm_eps\": 1e-05,") && strstr(t, "\"rope_theta\": 500000.0,"));
    free(t);
    t = get_text(at("cfg4/config.json"));
    CHECK(t && strstr(t, "\"head_dim\": 12,") && strstr(t, "\"model_type\": \"qwen3\","));
    CHECK(t && strstr(t, "\"torch_dtype\": \"float32\",") && strstr(t, "\"rms_norm_eps\": 1e-06,"));
    free(t);
}

static void test_config_rope_freqs(void) {
    TEST("llama3 RoPE scaling recovered from a GGUF's rope_freqs; other factors refused");
    model_config c;
    tiny_cfg(&c, ARCH_LLAMA, true);
    c.head_dim = 32, c.n_heads = 1, c.n_kv_heads = 1, c.rope_theta = 500000;
    model m;
    if (!tiny_model(&m, &c, 9)) return;
    /* what load_gguf leaves: plain config, frequencies divided by rope_freqs */
    model_config scaled = c;
    scaled.rope_llama3 = true, scaled.rope_factor = 8, scaled.rope_low_freq_factor = 1;
    scaled.rope_high_freq_factor = 4, scaled.rope_original_max_pos = 8192;
    float plain[512];
    rope_inv_freq(plain, &c);
    rope_inv_freq(m.inv_freq, &scaled);
    for (int i = 0; i < c.head_dim / 2; i++) m.inv_freq[i] = plain[i] / (float)(plain[i] / m.inv_freq[i]);
    model_config back;
    gerr e = {0};
    int rc = gen_and_load(&m, "rope", &back, &e);
    if (rc) printf("#   %s\n", e.msg);
    CHECK_EQ_INT(rc, 0);
    CHECK(!rc && cfg_same(&scaled, &back));
    m.inv_freq[3] *= 0.9f; /* no llama3 scaling gives this */
    rc = gen_and_load(&m, "rope2", &back, &e);
    CHECK_EQ_INT(rc, EX_DATAERR);
    CHECK(strstr(e.msg, "rope_freqs.weight match no llama3 rope_scaling") != NULL);
    model_free(&m);
}

/* The source directory's config.json text -> the exported one. */
static void edit_case_mx(const char *in, const char *want, int want_rc, bool mxfp4) {
    mkdir(at("edit"), 0755);
    put_text(at("edit/config.json"), in);
    unlink(at("edit-out.json"));
    gerr e = {0};
    int rc = hf_write_config(at("edit-out.json"), NULL, at("edit"), "bfloat16", mxfp4, &e);
    CHECK_EQ_INT(rc, want_rc);
    if (rc || !want) return;
    char *got = get_text(at("edit-out.json"));
    CHECK_EQ_STR(got, want);
    free(got);
}

static void edit_case(const char *in, const char *want, int want_rc) { edit_case_mx(in, want, want_rc, false); }

static void test_config_copied(void) {
    TEST("config.json copied with torch_dtype changed or inserted in sorted place and no quantization_config (but for MXFP4 "
         "experts), in the file's style");
    edit_case("{\n  \"a\": 1,\n  \"torch_dtype\": \"float32\",\n  \"z\": [1, 2e400]\n}\n",
              "{\n  \"a\": 1,\n  \"torch_dtype\": \"bfloat16\",\n  \"z\": [1, 2e400]\n}\n", 0);
    edit_case("{\n  \"architectures\": [\"X\"],\n  \"vocab_size\": 3\n}\n",
              "{\n  \"architectures\": [\"X\"],\n  \"torch_dtype\": \"bfloat16\",\n  \"vocab_size\": 3\n}\n", 0);
    edit_case("{\"a\":1}", "{\"a\":1,\"torch_dtype\":\"bfloat16\"}", 0);
    edit_case("{\"z\" :  1}\n", "{\"torch_dtype\" :  \"bfloat16\",\"z\" :  1}\n", 0);
    edit_case(" { } ", " {\"torch_dtype\": \"bfloat16\"} ", 0);
    edit_case("{\"dtype\": \"float32\", \"x\": {\"torch_dtype\": 1}}",
              "{\"dtype\": \"bfloat16\", \"x\": {\"torch_dtype\": 1}}", 0);
    edit_case("{\"torch_dtype\": null, \"\\u0074orch\": \"\\\"}\"}", "{\"torch_dtype\": \"bfloat16\", \"\\u0074orch\": \"\\\"}\"}", 0);
    /* quantization_config goes (the weights written are never quantized): first, middle, last, alone */
    edit_case("{\n  \"quantization_config\": {\"quant_method\": \"mxfp4\"},\n  \"torch_dtype\": \"bfloat16\"\n}\n",
              "{\n  \"torch_dtype\": \"bfloat16\"\n}\n", 0);
    edit_case("{\"a\": 1, \"quantization_config\": {\"x\": [1, {}]}, \"z\": 2}",
              "{\"a\": 1, \"torch_dtype\": \"bfloat16\",\"z\": 2}", 0);
    edit_case("{\n  \"a\": 1,\n  \"quantization_config\": {}\n}\n",
              "{\n  \"a\": 1,\n  \"torch_dtype\": \"bfloat16\"\n}\n", 0);
    edit_case("{\"quantization_config\": null}", "{\"torch_dtype\": \"bfloat16\"}", 0);
    edit_case("{\"x\": {\"quantization_config\": 1}}", "{\"torch_dtype\": \"bfloat16\",\"x\": {\"quantization_config\": 1}}", 0);
    /* experts written as MXFP4 blocks: the source's kept as it is, else gpt-oss's own added in sorted place */
    edit_case_mx("{\n  \"quantization_config\": {\"quant_method\": \"mxfp4\", \"x\": 1},\n  \"torch_dtype\": \"float32\"\n}\n",
                 "{\n  \"quantization_config\": {\"quant_method\": \"mxfp4\", \"x\": 1},\n  \"torch_dtype\": \"bfloat16\"\n}\n", 0, true);
    edit_case_mx("{\n  \"a\": 1,\n  \"torch_dtype\": \"float32\"\n}\n",
                 "{\n  \"a\": 1,\n  \"quantization_config\": {\"modules_to_not_convert\": [\"model.layers.*.self_attn\", "
                 "\"model.layers.*.mlp.router\", \"model.embed_tokens\", \"lm_head\"], \"quant_method\": \"mxfp4\"},\n"
                 "  \"torch_dtype\": \"bfloat16\"\n}\n", 0, true);
    edit_case("[1]", NULL, EX_DATAERR);
    edit_case("{\"a\": ", NULL, EX_DATAERR);
    edit_case("{\"a\": 1} x", NULL, EX_DATAERR);
    gerr e = {0};
    CHECK_EQ_INT(hf_write_config(at("x.json"), NULL, at("no-such-dir"), "float32", false, &e), EX_NOINPUT);
}

/* ---- model.safetensors ---------------------------------------------------------------------- */

static void check_weights(const model *m, export_dtype dt, const char *name) {
    gerr e = {0};
    int rc = hf_write_weights(at(name), m, dt, &e);
    if (rc) printf("#   %s\n", e.msg);
    CHECK_EQ_INT(rc, 0);
    st_file f;
    if (rc) return;
    if (st_open(&f, at(name), &e)) return setup_failed(&e);
    size_t n = model_tensor_list(m, NULL);
    model_tensor_ref *refs = calloc(n, sizeof *refs);
    model_tensor_list(m, refs);
    CHECK_EQ_INT(f.n_tensors, n);
    CHECK_EQ_STR(st_meta_get(&f, "format"), "pt");
    CHECK_EQ_INT(f.n_meta, 1);
    for (size_t i = 1; i < f.n_tensors; i++) CHECK(strcmp(f.tensors[i - 1].name, f.tensors[i].name) < 0);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        const st_tensor *t = st_find(&f, refs[i].hf);
        size_t numel = (size_t)refs[i].rows * (size_t)(refs[i].cols ? refs[i].cols : 1);
        if (!t || t->ndim != (refs[i].cols ? 2 : 1) || t->shape[0] != refs[i].rows ||
            (refs[i].cols && t->shape[1] != refs[i].cols) || (size_t)t->numel != numel) {
            printf("#   %s: missing or mis-shaped\n", refs[i].hf);
            bad++;
            continue;
        }
        CHECK_EQ_INT(t->dtype, dt == EXPORT_F32 ? ST_F32 : dt == EXPORT_F16 ? ST_F16 : ST_BF16);
        for (size_t j = 0; j < numel; j++) {
            float want = refs[i].dst[j], got;
            if (dt == EXPORT_F32) memcpy(&got, (const char *)t->data + 4 * j, 4);
            else {
                uint16_t h;
                memcpy(&h, (const char *)t->data + 2 * j, 2);
                got = dt == EXPORT_F16 ? f16_to_f32(h) : bf16_to_f32(h);
                want = dt == EXPORT_F16 ? f16_to_f32(f32_to_f16(want)) : bf16_to_f32(f32_to_bf16(want));
            }
            if (got != want) bad++;
        }
    }
    CHECK_EQ_INT(bad, 0);
    CHECK((st_find(&f, "lm_head.weight") == NULL) == m->cfg.tied_embeddings);
    free(refs);
    st_close(&f);
}

static void test_weights(void) {
    TEST("model.safetensors: HF names and shapes sorted, F32/F16/BF16 values, no lm_head when tied, q8_0 refused");
    model_config c;
    model m;
    tiny_cfg(&c, ARCH_QWEN2, true);
    if (tiny_model(&m, &c, 21)) {
        check_weights(&m, EXPORT_F32, "w-f32.safetensors");
        check_weights(&m, EXPORT_BF16, "w-bf16.safetensors");
        gerr e = {0};
        CHECK_EQ_INT(hf_write_weights(at("w-q8.safetensors"), &m, EXPORT_Q8_0, &e), EX_USAGE);
        CHECK(access(at("w-q8.safetensors"), F_OK) != 0);
        model_free(&m);
    }
    tiny_cfg(&c, ARCH_QWEN3, false);
    if (tiny_model(&m, &c, 22)) {
        check_weights(&m, EXPORT_F16, "w-f16.safetensors");
        model_free(&m);
    }
}

/* ---- LoRA adapters -------------------------------------------------------------------------- */

static const char WANT_ADAPTER_CONFIG[] =
    "{\n  \"alpha_pattern\": {},\n  \"auto_mapping\": null,\n  \"base_model_name_or_path\": \"../base\",\n"
    "  \"bias\": \"none\",\n  \"fan_in_fan_out\": false,\n  \"inference_mode\": true,\n  \"init_lora_weights\": true,\n"
    "  \"layers_pattern\": null,\n  \"layers_to_transform\": null,\n  \"lora_alpha\": 8,\n  \"lora_dropout\": 0.05,\n"
    "  \"modules_to_save\": null,\n  \"peft_type\": \"LORA\",\n  \"r\": 4,\n  \"rank_pattern\": {},\n"
    "  \"revision\": null,\n  \"target_modules\": [\n    \"down_proj\",\n    \"q_proj\",\n    \"v_proj\"\n  ],\n"
    "  \"task_type\": \"CAUSAL_LM\",\n  \"use_dora\": false,\n  \"use_rslora\": false\n}";

static bool make_lora(lora *l, const model_config *c, unsigned targets, const char *base, bool rslora) {
    gerr e = {0};
    if (lora_alloc(l, c, 4, 8, rslora, 0.05, targets, base, &e)) {
        setup_failed(&e);
        return false;
    }
    lora_init(l, 5);
    for (int t = 0; t < LORA_N_SETS; t++)
        if (l->b[t]) fill(l->b[t], (size_t)l->n_mats[t] * l->out_dim[t] * l->r, 100 + t, 0.05);
    return true;
}

static void test_peft_names(void) {
    TEST("PEFT tensor names and shapes of every factor");
    model_config c;
    tiny_cfg(&c, ARCH_QWEN3, false);
    lora l;
    gerr e = {0};
    if (lora_alloc(&l, &c, 4, 8, false, 0, (1u << LORA_N_TARGETS) - 1, NULL, &e)) return setup_failed(&e);
    size_t n = lora_tensor_list(&l, NULL);
    CHECK_EQ_INT(n, 2 * LORA_N_TARGETS * c.n_layers);
    lora_tensor_ref *r = calloc(n, sizeof *r);
    lora_tensor_list(&l, r);
    CHECK_EQ_STR(r[0].name, "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
    CHECK_EQ_INT(r[0].rows, 4);
    CHECK_EQ_INT(r[0].cols, 32);
    CHECK_EQ_STR(r[1].name, "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight");
    CHECK_EQ_INT(r[1].rows, 48); /* 4 heads x 12 */
    CHECK_EQ_STR(r[13].name, "base_model.model.model.layers.0.mlp.down_proj.lora_B.weight");
    CHECK_EQ_INT(r[12].cols, 48);
    CHECK_EQ_STR(r[n - 1].name, "base_model.model.model.layers.1.mlp.down_proj.lora_B.weight");
    free(r);
    lora_free(&l);
}

static bool same_lora(const lora *a, const lora *b) {
    if (a->r != b->r || a->alpha != b->alpha || a->rslora != b->rslora || a->dropout != b->dropout ||
        a->targets != b->targets || a->n_params != b->n_params || a->scale != b->scale)
        return false;
    if ((a->base == NULL) != (b->base == NULL) || (a->base && strcmp(a->base, b->base))) return false;
    return !memcmp(a->memory, b->memory, a->n_params * sizeof(float));
}

static void test_lora_round_trip(void) {
    TEST("lora_save writes PEFT's adapter_config.json byte for byte; lora_load reads both files back exactly");
    model_config c;
    tiny_cfg(&c, ARCH_LLAMA, false);
    lora l, back;
    unsigned targets = 1u << LORA_Q | 1u << LORA_V | 1u << LORA_DOWN;
    if (!make_lora(&l, &c, targets, "../base", false)) return;
    mkdir(at("ad"), 0755);
    gerr e = {0};
    CHECK_EQ_INT(lora_save(&l, at("ad"), &e), 0);
    char *t = get_text(at("ad/adapter_config.json"));
    CHECK_EQ_STR(t, WANT_ADAPTER_CONFIG);
    free(t);
    int rc = lora_load(&back, &c, at("ad"), &e);
    if (rc) printf("#   %s\n", e.msg);
    CHECK_EQ_INT(rc, 0);
    CHECK(!rc && same_lora(&l, &back));
    if (!rc) lora_free(&back);
    st_file f;
    if (!st_open(&f, at("ad/adapter_model.safetensors"), &e)) {
        CHECK_EQ_INT(f.n_tensors, 2 * 3 * c.n_layers);
        CHECK_EQ_STR(st_meta_get(&f, "format"), "pt");
        CHECK(f.tensors[0].dtype == ST_F32);
        st_close(&f);
    } else {
        setup_failed(&e);
    }
    lora_free(&l);

    /* rsLoRA, no base, every target, BF16 factors */
    if (!make_lora(&l, &c, (1u << LORA_N_TARGETS) - 1, NULL, true)) return;
    mkdir(at("ad2"), 0755);
    CHECK_EQ_INT(lora_save_dtype(&l, at("ad2"), ST_BF16, &e), 0);
    t = get_text(at("ad2/adapter_config.json"));
    CHECK(t && strstr(t, "\"base_model_name_or_path\": null,") && strstr(t, "\"use_rslora\": true\n}"));
    free(t);
    rc = lora_load(&back, &c, at("ad2"), &e);
    CHECK_EQ_INT(rc, 0);
    if (!rc) {
        CHECK(back.rslora && back.base == NULL && back.scale == l.scale);
        size_t bad = 0;
        for (size_t i = 0; i < l.n_params; i++) bad += back.memory[i] != bf16_to_f32(f32_to_bf16(l.memory[i]));
        CHECK_EQ_INT(bad, 0);
        lora_free(&back);
    }
    lora_free(&l);
}

/* A fresh copy of the saved adapter "ad" with one edit, loaded. */
static void bad_adapter(const char *file, const char *from, const char *to, int want_rc, const char *want_msg) {
    model_config c;
    tiny_cfg(&c, ARCH_LLAMA, false);
    lora l;
    if (!make_lora(&l, &c, 1u << LORA_Q | 1u << LORA_V | 1u << LORA_DOWN, "../base", false)) return;
    mkdir(at("bad"), 0755);
    gerr e = {0};
    CHECK_EQ_INT(lora_save(&l, at("bad"), &e), 0);
    lora_free(&l);
    char path[600];
    snprintf(path, sizeof path, "%s/%s", at("bad"), file);
    if (from) rewrite(path, from, to);
    else unlink(path);
    lora back;
    int rc = lora_load(&back, &c, at("bad"), &e);
    CHECK_EQ_INT(rc, want_rc);
    if (!strstr(e.msg, want_msg)) printf("#   message: %s\n", e.msg);
    CHECK(strstr(e.msg, want_msg) != NULL);
    if (!rc) lora_free(&back);
}

static void test_lora_errors(void) {
    TEST("lora_load: missing, mis-shaped and extra tensors, unknown modules and unsupported features named");
    const char *cfgf = "adapter_config.json";
    bad_adapter(cfgf, "\"q_proj\",", "\"k_proj\",\n    \"q_proj\",", EX_DATAERR,
                "adapter_model.safetensors: tensor base_model.model.model.layers.0.self_attn.k_proj.lora_A.weight is missing");
    bad_adapter(cfgf, "\"r\": 4", "\"r\": 2", EX_DATAERR,
                "tensor base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight has shape [4, 32], expected [2, 32]");
    bad_adapter(cfgf, "\"down_proj\",\n    ", "", EX_DATAERR,
                "tensor base_model.model.model.layers.0.mlp.down_proj.lora_A.weight is not a LoRA factor");
    bad_adapter(cfgf, "\"q_proj\"", "\"lm_head\"", EX_DATAERR, "target module \"lm_head\" is not supported");
    bad_adapter(cfgf, "\"use_dora\": false", "\"use_dora\": true", EX_DATAERR, "\"use_dora\": true is not supported");
    bad_adapter(cfgf, "\"bias\": \"none\"", "\"bias\": \"all\"", EX_DATAERR, "\"bias\": only \"none\" is supported, got all");
    bad_adapter(cfgf, "\"modules_to_save\": null", "\"modules_to_save\": [\"lm_head\"]", EX_DATAERR,
                "\"modules_to_save\" is not supported");
    bad_adapter(cfgf, "\"layers_to_transform\": null", "\"layers_to_transform\": [0]", EX_DATAERR,
                "\"layers_to_transform\" is not supported");
    bad_adapter(cfgf, "\"peft_type\": \"LORA\"", "\"peft_type\": \"IA3\"", EX_DATAERR, "peft_type: expected \"LORA\", got IA3");
    bad_adapter(cfgf, "\"target_modules\": [", "\"target_modules\": \".*proj\", \"x\": [", EX_DATAERR,
                "regex targets are not supported");
    bad_adapter(cfgf, "{", "{{", EX_DATAERR, "not valid JSON");
    bad_adapter("adapter_model.safetensors", NULL, NULL, EX_NOINPUT, "adapter_model.safetensors: no such file");
    bad_adapter(cfgf, NULL, NULL, EX_NOINPUT, "adapter_config.json");
    /* all-linear is every target: the saved file then lacks k, o, gate, up */
    bad_adapter(cfgf, "\"target_modules\": [", "\"target_modules\": \"all-linear\", \"x\": [", EX_DATAERR,
                "k_proj.lora_A.weight is missing");
}

/* ---- adapter directories and their base --------------------------------------------------- */

static void write_base(const model *m, const char *dir) {
    mkdir(at(dir), 0755);
    char path[600];
    gerr e = {0};
    snprintf(path, sizeof path, "%s/config.json", at(dir));
    CHECK_EQ_INT(hf_write_config(path, m, at("fake.gguf"), "float32", false, &e), 0);
    snprintf(path, sizeof path, "%s/model.safetensors", at(dir));
    CHECK_EQ_INT(hf_write_weights(path, m, EXPORT_F32, &e), 0);
}

static void test_adapter_dirs(void) {
    TEST("adapter directories: base resolved (the adapter's dir, absolute, then cwd), loaded unmerged or merged by model_load");
    model_config c;
    tiny_cfg(&c, ARCH_QWEN2, false);
    model m;
    if (!tiny_model(&m, &c, 31)) return;
    write_base(&m, "base");
    lora l;
    if (!make_lora(&l, &c, (1u << LORA_N_TARGETS) - 1, "../base", false)) return model_free(&m);
    mkdir(at("ad3"), 0755);
    gerr e = {0};
    CHECK_EQ_INT(lora_save(&l, at("ad3"), &e), 0);
    CHECK(lora_is_adapter_dir(at("ad3")));
    CHECK(!lora_is_adapter_dir(at("base")));
    CHECK(!lora_is_adapter_dir(at("fake.gguf")));

    char *bp = NULL;
    CHECK_EQ_INT(lora_adapter_base_path(at("ad3"), &bp, &e), 0);
    char want[600];
    snprintf(want, sizeof want, "%s/../base", at("ad3"));
    CHECK_EQ_STR(bp, want);
    free(bp);
    char *cfg_path = NULL;
    CHECK_EQ_INT(hf_source_file(at("ad3"), "config.json", &cfg_path, &e), 0);
    snprintf(want, sizeof want, "%s/../base/config.json", at("ad3"));
    CHECK_EQ_STR(cfg_path, want);
    free(cfg_path);

    model base;
    lora got;
    bool has = false;
    int rc = model_load_adapter(at("ad3"), &base, &got, &has, &e);
    if (rc) printf("#   %s\n", e.msg);
    CHECK_EQ_INT(rc, 0);
    if (!rc) {
        CHECK(has);
        CHECK(base.n_params == m.n_params && !memcmp(base.params_memory, m.params_memory, m.n_params * sizeof(float)));
        /* the base as found, usable from here; the rest as saved */
        snprintf(want, sizeof want, "%s/../base", at("ad3"));
        CHECK_EQ_STR(got.base, want);
        free(got.base);
        got.base = xstrdup(l.base);
        CHECK(same_lora(&l, &got));
        lora_free(&got);
        model_free(&base);
    }
    /* model_load merges: W + scale * B A */
    model merged;
    rc = model_load(&merged, at("ad3"), &e);
    CHECK_EQ_INT(rc, 0);
    if (!rc) {
        lora_merge(&m, &l);
        CHECK(!memcmp(merged.params_memory, m.params_memory, m.n_params * sizeof(float)));
        model_free(&merged);
    }
    /* a full model: no adapter */
    rc = model_load_adapter(at("base"), &base, &got, &has, &e);
    CHECK(rc == 0 && !has && got.memory == NULL);
    if (!rc) model_free(&base);

    /* an absolute base; a relative one found from the current directory first */
    char abs_base[600];
    snprintf(abs_base, sizeof abs_base, "%s", at("base"));
    free(l.base);
    l.base = xstrdup(abs_base);
    mkdir(at("ad4"), 0755);
    CHECK_EQ_INT(lora_save(&l, at("ad4"), &e), 0);
    CHECK_EQ_INT(lora_adapter_base_path(at("ad4"), &bp, &e), 0);
    CHECK_EQ_STR(bp, abs_base);
    free(bp);
    char cwd[512];
    bool moved = getcwd(cwd, sizeof cwd) && chdir(root) == 0;
    CHECK(moved); /* the relative-base case needs the test directory as cwd */
    if (moved) {
        rewrite("ad4/adapter_config.json", abs_base, "base");
        CHECK_EQ_INT(lora_adapter_base_path("ad4", &bp, &e), 0);
        CHECK_EQ_STR(bp, "base");
        free(bp);
        CHECK(chdir(cwd) == 0);
    }
    /* missing, self-referring, absent */
    rewrite(at("ad4/adapter_config.json"), "\"base\"", "\"org/no-such-model\"");
    CHECK_EQ_INT(lora_adapter_base_path(at("ad4"), &bp, &e), EX_NOINPUT);
    CHECK(strstr(e.msg, "base model \"org/no-such-model\" not found") != NULL);
    CHECK_EQ_INT(model_load(&merged, at("ad4"), &e), EX_NOINPUT);
    strbuf self = {0};
    sb_printf(&self, "\"%s\"", at("ad4"));
    rewrite(at("ad4/adapter_config.json"), "\"org/no-such-model\"", self.data);
    CHECK_EQ_INT(lora_adapter_base_path(at("ad4"), &bp, &e), EX_DATAERR);
    CHECK(strstr(e.msg, "names the adapter directory itself") != NULL);
    rewrite(at("ad4/adapter_config.json"), self.data, "null");
    sb_free(&self);
    CHECK_EQ_INT(lora_adapter_base_path(at("ad4"), &bp, &e), EX_DATAERR);
    CHECK(strstr(e.msg, "base_model_name_or_path is missing") != NULL);
    lora_free(&l);
    model_free(&m);
}

/* ---- driver modes ---------------------------------------------------------------------------- */

static int fail(const gerr *e) {
    fprintf(stderr, "test_hf_dir: %s\n", e->msg);
    return e->code ? e->code : 1;
}

static int drive_make_adapter(int argc, char **argv) {
    gerr e = {0};
    model m;
    if (model_load(&m, argv[2], &e)) return fail(&e);
    unsigned targets = (1u << LORA_N_TARGETS) - 1;
    if (argc > 5 && lora_parse_targets(argv[5], &targets, &e)) return fail(&e);
    lora l;
    if (lora_alloc(&l, &m.cfg, argc > 4 ? atoi(argv[4]) : 4, argc > 6 ? atof(argv[6]) : 8, false, 0, targets, argv[2],
                   &e))
        return fail(&e);
    lora_init(&l, 7);
    for (int t = 0; t < LORA_N_SETS; t++)
        if (l.b[t]) fill(l.b[t], (size_t)l.n_mats[t] * l.out_dim[t] * l.r, 7 + t, 0.05);
    mkdir(argv[3], 0755);
    int rc = lora_save(&l, argv[3], &e);
    lora_free(&l);
    model_free(&m);
    return rc ? fail(&e) : 0;
}

static int drive_encode(char **argv) {
    gerr e = {0};
    model_text mt;
    if (model_text_load(argv[2], &mt, &e)) return fail(&e);
    FILE *in = fopen(argv[3], "r"), *out = fopen(argv[4], "w");
    if (!in || !out) return fprintf(stderr, "test_hf_dir: cannot open %s or %s\n", argv[3], argv[4]), 74;
    char *line = NULL;
    size_t cap = 0;
    int rc = 0;
    while (!rc && getline(&line, &cap, in) > 0) {
        cJSON *o = cJSON_Parse(line);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "text");
        bool special = t != NULL;
        if (!t) t = cJSON_GetObjectItemCaseSensitive(o, "nospecial");
        int32_t *ids = NULL;
        size_t n = 0;
        if (!cJSON_IsString(t)) rc = gerr_set(&e, EX_DATAERR, "%s: a line without \"text\"", argv[3]);
        else rc = tok_encode(mt.tok, t->valuestring, strlen(t->valuestring), special, &ids, &n, &e);
        for (size_t i = 0; i < n; i++) fprintf(out, "%s%d", i ? " " : "", (int)ids[i]);
        fputc('\n', out);
        free(ids);
        cJSON_Delete(o);
    }
    free(line);
    fclose(in);
    if (fclose(out) && !rc) rc = gerr_set(&e, EX_IOERR, "%s: write failed", argv[4]);
    model_text_free(&mt);
    return rc ? fail(&e) : 0;
}

int main(int argc, char **argv) {
    if (argc >= 4 && !strcmp(argv[1], "--make-adapter")) return drive_make_adapter(argc, argv);
    if (argc == 4 && !strcmp(argv[1], "--text-files")) {
        gerr e = {0};
        mkdir(argv[3], 0755);
        return hf_write_text_files(argv[3], argv[2], &e) ? fail(&e) : 0;
    }
    if (argc == 5 && !strcmp(argv[1], "--encode")) return drive_encode(argv);
    if (argc > 1) {
        fprintf(stderr, "usage: test_hf_dir [--make-adapter BASE OUTDIR [R [TARGETS [ALPHA]]] | --text-files SRC OUT "
                        "| --encode SRC IN OUT]\n");
        return 64;
    }
    snprintf(root, sizeof root, "/tmp/test_hf_dir.XXXXXX");
    if (!mkdtemp(root)) return perror("mkdtemp"), 1;
    test_config_generated();
    test_config_rope_freqs();
    test_config_copied();
    test_weights();
    test_peft_names();
    test_lora_round_trip();
    test_lora_errors();
    test_adapter_dirs();
    remove_tree(root);
    return check_done();
}
