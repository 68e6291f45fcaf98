/* Unit tests of what an export dtype holds (lib/export/export_range.c): the
 * check agrees with the converters at each boundary (f16, bf16, q8_0's f16
 * block scale; q4_k's f16 scales, which saturate), names the tensor and a
 * dtype that holds the value; --clamp writes the largest finite value;
 * export_run refuses a model with a weight beyond f16 for hf and gguf
 * before writing anything, and with --clamp writes 65504 where it stood. */
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "helpers.h"
#include "ckpt/hf_dir.h"
#include "ckpt/load.h"
#include "export/export.h"
#include "formats/gguf_quant.h"
#include "formats/quant.h"
#include "ops/packed_q4k.h"
#include "util/half.h"
#include "util/rng.h"

static char root[64];

static char *at(const char *rel) { return path_under(root, rel); }

/* Whether x written as d reads back finite, by the converters themselves. */
static bool converts_finite(float x, export_dtype d) {
    switch (d) {
    case EXPORT_F32: return isfinite(x);
    case EXPORT_F16: return isfinite(f16_to_f32(f32_to_f16(x)));
    case EXPORT_BF16: return isfinite(bf16_to_f32(f32_to_bf16(x)));
    case EXPORT_Q8_0: {
        float block[Q8_0_BLOCK] = {0};
        unsigned char q[Q8_0_BYTES];
        block[3] = x;
        gguf_quantize_q8_0(block, q, Q8_0_BLOCK);
        return isfinite(f16_to_f32((uint16_t)(q[0] | q[1] << 8)));
    }
    case EXPORT_Q4_K: break; /* test_q4_k: its f16 scales saturate, never infinite */
    }
    return false;
}

/* x in a Q4_K super-block of zeros, written and read back. */
static float q4_k_back(float x) {
    float block[Q4KW_K_SUPER] = {0}, back[Q4KW_K_SUPER];
    unsigned char q[Q4KW_GGUF_BYTES];
    block[3] = x;
    q4kw_quantize_gguf(q, block, Q4KW_K_SUPER);
    gerr e = {0};
    if (quant_dequantize(GGML_TYPE_Q4_K, q, back, Q4KW_K_SUPER, &e)) return NAN;
    return back[3];
}

static void test_q4_k(void) {
    TEST("q4_k: a value the check passes reads back within a code step (the f16 scales not saturated); at twice "
         "the bound the writer's saturated dmin reads a negative one back far off, and the check refuses it");
    float lim = export_dtype_limit(EXPORT_Q4_K);
    gerr e = {0};
    for (int sign = -1; sign <= 1; sign += 2) {
        float x = (float)sign * lim, y = q4_k_back(x);
        printf("#   %g reads back %g\n", x, y);
        CHECK(fabsf(y - x) <= fabsf(x) / 15 / 2 * 1.01f);
        CHECK_EQ_INT(export_range_check("m", "t", &x, 1, EXPORT_Q4_K, &e), 0);
    }
    float far = -2 * lim, y = q4_k_back(far);
    printf("#   %g reads back %g\n", far, y);
    CHECK(fabsf(y - far) > fabsf(far) / 4);
    CHECK_EQ_INT(export_range_check("m", "t", &far, 1, EXPORT_Q4_K, &e), EX_DATAERR);
    CHECK(strstr(e.msg, "beyond what q4_k holds"));
}

static void test_boundaries(void) {
    TEST("the check agrees with the f16, bf16 and q8_0 writers around each dtype's largest value");
    const export_dtype ds[] = {EXPORT_F16, EXPORT_BF16, EXPORT_Q8_0};
    for (size_t k = 0; k < 3; k++) {
        export_dtype d = ds[k];
        float lim = export_dtype_limit(d);
        CHECK(converts_finite(lim, d));
        /* from the limit up through the first value that overflows, and one past */
        float x = lim;
        int overflowed = 0, steps = 0;
        while (overflowed < 2 && steps++ < (1 << 22)) {
            for (int sign = -1; sign <= 1; sign += 2) {
                gerr e = {0};
                float v = (float)sign * x;
                bool ok = export_range_check("m", "t", &v, 1, d, &e) == 0;
                if (ok != converts_finite(v, d)) {
                    printf("#   %s %g: check %d, writer %d\n", export_dtype_name(d), v, ok, !ok);
                    check_current_failed = 1;
                }
            }
            if (!converts_finite(x, d)) overflowed++;
            x = nextafterf(x, INFINITY);
            if (d == EXPORT_BF16 && !isfinite(x)) break;
        }
        CHECK(overflowed >= 1 || d == EXPORT_BF16);
    }
    gerr e = {0};
    float big = FLT_MAX;
    CHECK_EQ_INT(export_range_check("m", "t", &big, 1, EXPORT_F32, &e), 0);
    CHECK_EQ_INT(export_range_check("m", "t", &big, 1, EXPORT_BF16, &e), EX_DATAERR);
}

static void test_messages(void) {
    TEST("the error names the model, the tensor, the index, the value and a dtype that holds it");
    float x[40] = {0};
    x[37] = -70000;
    gerr e = {0};
    CHECK_EQ_INT(export_range_check("ck", "model.layers.0.mlp.down_proj.weight", x, 40, EXPORT_F16, &e), EX_DATAERR);
    CHECK(strstr(e.msg, "ck: tensor 'model.layers.0.mlp.down_proj.weight': value 37 is -70000") == e.msg);
    CHECK(strstr(e.msg, "beyond what f16 holds") && strstr(e.msg, "--dtype bf16 holds it"));
    CHECK(strstr(e.msg, "--clamp"));
    x[37] = 3.4e38f;
    CHECK_EQ_INT(export_range_check("ck", "w", x, 40, EXPORT_BF16, &e), EX_DATAERR);
    CHECK(strstr(e.msg, "--dtype f32 holds it"));
    CHECK_EQ_INT(export_range_check("ck", "w", x, 40, EXPORT_Q8_0, &e), EX_DATAERR);
    CHECK(strstr(e.msg, "--dtype f32 holds it"));
    x[37] = 1e6f; /* beyond f16, inside q8_0 (max / 127 < 65504) */
    CHECK_EQ_INT(export_range_check("ck", "w", x, 40, EXPORT_Q8_0, &e), 0);
    x[37] = NAN;
    CHECK_EQ_INT(export_range_check("ck", "w", x, 40, EXPORT_F32, &e), EX_DATAERR);
    CHECK(strstr(e.msg, "non-finite"));
}

static void test_clamp(void) {
    TEST("--clamp writes +-the largest value, counts what it changed, leaves the rest and NaN");
    float x[5] = {1e5f, -65520, 65504, 0.5f, NAN};
    CHECK_EQ_INT(export_range_clamp(x, 5, EXPORT_F16), 2);
    CHECK(x[0] == 65504 && x[1] == -65504 && x[2] == 65504 && x[3] == 0.5f && isnan(x[4]));
    gerr e = {0};
    CHECK_EQ_INT(export_range_check("m", "t", x, 4, EXPORT_F16, &e), 0);
    CHECK_EQ_INT(export_range_check("m", "t", x, 5, EXPORT_F16, &e), EX_DATAERR);
    float q[2] = {1e7f, -2e7f};
    CHECK_EQ_INT(export_range_clamp(q, 2, EXPORT_Q8_0), 2);
    CHECK(converts_finite(q[0], EXPORT_Q8_0) && converts_finite(q[1], EXPORT_Q8_0));
}

/* A tiny llama written as an HF directory, one weight at 70000. */
static bool write_model(const char *dir, const char **tensor) {
    model m = {0};
    m.cfg.arch = ARCH_LLAMA;
    m.cfg.dim = 32, m.cfg.hidden_dim = 64, m.cfg.n_layers = 1, m.cfg.n_heads = 4, m.cfg.n_kv_heads = 2;
    m.cfg.head_dim = 8, m.cfg.vocab_size = 40, m.cfg.max_seq_len = 64, m.cfg.rope_theta = 10000;
    m.cfg.norm_eps = 1e-5f, m.cfg.bos_id = 1, m.cfg.eos_ids[0] = 2, m.cfg.n_eos = 1;
    gerr e = {0};
    if (model_alloc(&m, &e)) return printf("#   %s\n", e.msg), false;
    rng_stream r;
    rng_init(&r, 3, "test_export_range", 17, 0);
    for (size_t i = 0; i < m.n_params; i++) m.params_memory[i] = (float)(rng_uniform(&r) - 0.5);
    size_t n = model_tensor_list(&m, NULL);
    model_tensor_ref *refs = calloc(n, sizeof *refs);
    model_tensor_list(&m, refs);
    static char name[96];
    for (size_t i = 0; i < n; i++)
        if (refs[i].cols && refs[i].layer == 0) {
            refs[i].dst[5] = 70000;
            snprintf(name, sizeof name, "%s", refs[i].hf);
            break;
        }
    free(refs);
    *tensor = name;
    char path[600];
    mkdir(dir, 0755);
    /* a file for a source: hf_write_config generates config.json from m */
    FILE *f = fopen(at("kind.gguf"), "w");
    if (f) fclose(f);
    snprintf(path, sizeof path, "%s/config.json", dir);
    int rc = hf_write_config(path, &m, at("kind.gguf"), "float32", false, &e);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (!rc) rc = hf_write_weights(path, &m, EXPORT_F32, &e);
    /* --format hf copies the model's tokenizer: a small byte-level BPE one */
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    f = rc ? NULL : fopen(path, "w");
    if (f) {
        fputs("{\"version\":\"1.0\",\"added_tokens\":[],\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"ByteLevel\","
              "\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true},\"post_processor\":null,"
              "\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,"
              "\"vocab\":{\"a\":0,\"b\":1,\"c\":2},\"merges\":[]}}\n",
              f);
        rc = fclose(f) != 0;
    } else if (!rc) {
        rc = 1;
    }
    if (rc) printf("#   %s\n", e.msg);
    model_free(&m);
    return rc == 0;
}

static void test_export_run(void) {
    TEST("export_run: 70000 in f16 (hf, gguf) is 65 naming the tensor, nothing written; --clamp writes 65504");
    const char *tensor;
    if (!write_model(at("src"), &tensor)) return (void)(check_current_failed = 1);
    char *note = NULL, src[512], hf16[512], gguf[512];
    snprintf(src, sizeof src, "%s", at("src"));
    snprintf(hf16, sizeof hf16, "%s", at("hf16"));
    snprintf(gguf, sizeof gguf, "%s", at("m.gguf"));
    gerr e = {0};
    export_opts o = {.model = src, .out = hf16, .format = EXPORT_HF, .dtype = EXPORT_F16};
    CHECK_EQ_INT(export_run(&o, &note, &e), EX_DATAERR);
    CHECK(strstr(e.msg, tensor) && strstr(e.msg, "f16") && strstr(e.msg, "--dtype bf16 holds it"));
    CHECK(access(hf16, F_OK) != 0);
    CHECK(note == NULL);
    o.format = EXPORT_GGUF, o.out = gguf;
    CHECK_EQ_INT(export_run(&o, &note, &e), EX_DATAERR);
    CHECK(strstr(e.msg, "blk.0.") && strstr(e.msg, "beyond what f16 holds"));
    CHECK(access(gguf, F_OK) != 0);
    o.format = EXPORT_HF, o.out = hf16, o.clamp = true;
    int rc = export_run(&o, &note, &e);
    if (rc) printf("#   %s\n", e.msg);
    CHECK_EQ_INT(rc, 0);
    CHECK(note && strstr(note, "--clamp: 1 weights in 1 tensors") && strstr(note, "65504"));
    free(note);
    model back;
    if (rc || model_load(&back, hf16, &e)) return (void)(check_current_failed = 1);
    size_t n = model_tensor_list(&back, NULL);
    model_tensor_ref *refs = calloc(n, sizeof *refs);
    model_tensor_list(&back, refs);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(refs[i].hf, tensor)) CHECK(refs[i].dst[5] == 65504);
    free(refs);
    model_free(&back);
}

int main(void) {
    snprintf(root, sizeof root, "/tmp/test_export_range.XXXXXX");
    if (!mkdtemp(root)) return perror("mkdtemp"), 1;
    test_boundaries();
    test_messages();
    test_clamp();
    test_q4_k();
    test_export_run();
    remove_tree(root);
    return check_done();
}
