/* A LoRA checkpoint trained on a packed frozen base (grpo-update
 * --base-weights q8|bf16; a llama and a qwen3_moe whose experts are packed
 * and adapted too), loaded for inference (lib/ckpt/load.h's
 * model_load_for_inference): with --weights auto (frozen_base) or the
 * base's own format the base is packed frozen and the adapter kept
 * unmerged (the tied embeddings and head packed too, once), and its
 * inference forward (model_forward, the adapter applied unmerged) gives the
 * logits of the adapter merged into the base's rounded values, the
 * embeddings' included (--weights f32) within float32 rounding; the same forward with the
 * adapter merged into the unrounded base is far off (the rounding shows).
 * Another format than the base's, or a checkpoint on an f32 base, merges. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "helpers.h"
#include "ckpt/adapter_dir.h"
#include "ckpt/hf_dir.h"
#include "ckpt/load.h"
#include "model/lora.h"
#include "model/model.h"
#include "util/rng.h"

static char root[64];

static char *at(const char *rel) { return path_under(root, rel); }

static void fill(float *p, size_t n, uint64_t seed, double scale) {
    rng_stream r;
    rng_init(&r, seed, "test_frozen", 11, 0);
    for (size_t i = 0; i < n; i++) p[i] = (float)(scale * (2 * rng_uniform(&r) - 1));
}

/* Widths q8's blocks take (multiples of 32); the norms near 1. A
 * qwen3_moe: q/k norms, 2 of 4 experts of width 32 in both layers (the
 * config the writer generates, as from a GGUF, has no dense layer). */
static int tiny_base(model *m, model_arch arch, gerr *e) {
    memset(m, 0, sizeof *m);
    model_config *c = &m->cfg;
    c->arch = arch, c->dim = 64, c->hidden_dim = 96, c->n_layers = 2, c->n_heads = 4, c->n_kv_heads = 2;
    c->head_dim = 16, c->vocab_size = 61, c->max_seq_len = 64, c->rope_theta = 10000, c->norm_eps = 1e-5f;
    c->tied_embeddings = true, c->bos_id = 1, c->eos_ids[0] = 2, c->n_eos = 1;
    if (arch == ARCH_QWEN3_MOE) {
        c->qk_norm = true, c->n_experts = 4, c->n_experts_used = 2, c->moe_hidden_dim = 32, c->moe_norm_topk = true;
        c->moe_step = 1;
    }
    int rc = model_alloc(m, e);
    if (rc) return rc;
    for (int i = 0; i < MODEL_N_PARAMS; i++) {
        if (!m->param_sizes[i] || (i == P_LM_HEAD && c->tied_embeddings)) continue;
        bool norm = i == P_ATTN_NORM || i == P_FFN_NORM || i == P_OUT_NORM || i == P_Q_NORM || i == P_K_NORM;
        fill(m->w.t[i], m->param_sizes[i], 10 + (uint64_t)i, norm ? 0.1 : i == P_ROUTER ? 1.0 : 0.3);
        if (norm)
            for (size_t j = 0; j < m->param_sizes[i]; j++) m->w.t[i][j] += 1.0f;
    }
    return 0;
}

static void put_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    CHECK(fclose(f) == 0);
}

/* base/ (config.json, model.safetensors) and ad/, an adapter on every
 * target (each expert's too) with B non-zero, whose grpo/state.json names
 * base_weights. */
static int write_checkpoint(model_arch arch, gerr *e) {
    model m;
    int rc = tiny_base(&m, arch, e);
    if (rc) return rc;
    mkdir(at("base"), 0755);
    put_text(at("fake.gguf"), "not read: only its kind (a file) matters");
    if (!(rc = hf_write_config(at("base/config.json"), &m, at("fake.gguf"), "float32", false, e)))
        rc = hf_write_weights(at("base/model.safetensors"), &m, EXPORT_F32, e);
    lora l;
    if (!rc) rc = lora_alloc(&l, &m.cfg, 4, 8, false, 0, (1u << LORA_N_TARGETS) - 1, at("base"), e);
    if (!rc) {
        lora_init(&l, 3);
        for (int t = 0; t < LORA_N_SETS; t++)
            if (l.b[t]) fill(l.b[t], (size_t)l.n_mats[t] * l.out_dim[t] * l.r, 40 + t, 0.2);
        mkdir(at("ad"), 0755);
        mkdir(at("ad/grpo"), 0755);
        rc = lora_save(&l, at("ad"), e);
        lora_free(&l);
    }
    model_free(&m);
    return rc;
}

static void set_base_weights(const char *fmt) {
    char text[128];
    snprintf(text, sizeof text, "{\"step\":1,\"flags\":{\"base_weights\":\"%s\"}}\n", fmt);
    put_text(at("ad/grpo/state.json"), text);
}

enum { ROWS = 9, PROMPT = 6 };

/* Logits of every row: a prompt of PROMPT tokens prefilled in one call,
 * then the rest decoded a row at a time, through an f32 cache. */
static int run_logits(const model *m, float *logits, gerr *e) {
    kv_cache c;
    model_scratch s;
    int rc = kv_cache_init(&c, &m->cfg, 1, ROWS, e);
    if (rc) return rc;
    if ((rc = model_scratch_init_for(&s, m, ROWS, ROWS, e))) {
        kv_cache_free(&c);
        return rc;
    }
    int seq[ROWS] = {0}, pos[ROWS];
    int32_t tok[ROWS];
    for (int i = 0; i < ROWS; i++) pos[i] = i, tok[i] = (int32_t)((i * 17 + 3) % m->cfg.vocab_size);
    model_forward(m, &c, PROMPT, seq, pos, tok, NULL, logits, &s);
    for (int i = PROMPT; i < ROWS; i++)
        model_forward(m, &c, 1, seq + i, pos + i, tok + i, NULL, logits + (size_t)i * m->cfg.vocab_size, &s);
    model_scratch_free(&s);
    kv_cache_free(&c);
    return 0;
}

static double max_diff(const float *a, const float *b, size_t n, double *scale) {
    double d = 0;
    *scale = 0;
    for (size_t i = 0; i < n; i++) {
        double x = fabs((double)a[i] - b[i]);
        d = x > d ? x : d;
        *scale = fabs(a[i]) > *scale ? fabs(a[i]) : *scale;
    }
    return d;
}

/* How the checkpoint loads for w: frozen (adapter unmerged) or merged. */
static bool loads_frozen(weight_choice w, weight_format *as) {
    model m;
    gerr e = {0};
    int rc = model_load_for_inference(&m, at("ad"), false, w, &e);
    if (rc) printf("#   %s\n", e.msg);
    CHECK_EQ_INT(rc, 0);
    if (rc) return false;
    bool frozen = m.packed_frozen && m.adapter;
    CHECK(frozen == (m.adapter != NULL)); /* an unmerged adapter only over a frozen base */
    /* the base packed whole: the tied head is the embeddings' blocks, packed once */
    if (frozen) CHECK(m.held[P_TOK_EMBD] == HOLD_PACKED && m.head_packed == m.w.tok_embd && !m.head_packed_own);
    *as = m.packed_as;
    model_free(&m);
    return frozen;
}

static void test_which(void) {
    TEST("auto and the base's own format run the frozen base with the adapter unmerged; f32 and other formats merge");
    weight_format as;
    set_base_weights("q8");
    CHECK(loads_frozen((weight_choice){.fmt = WEIGHTS_BF16, .keep_mxfp4 = true, .frozen_base = true}, &as));
    CHECK(as == WEIGHTS_Q8);
    CHECK(loads_frozen((weight_choice){.fmt = WEIGHTS_F32, .frozen_base = true}, &as) && as == WEIGHTS_Q8);
    CHECK(loads_frozen((weight_choice){.fmt = WEIGHTS_Q8}, &as) && as == WEIGHTS_Q8);
    CHECK(!loads_frozen((weight_choice){.fmt = WEIGHTS_F32}, &as));
    CHECK(!loads_frozen((weight_choice){.fmt = WEIGHTS_BF16}, &as));
    set_base_weights("bf16");
    CHECK(loads_frozen((weight_choice){.fmt = WEIGHTS_F32, .frozen_base = true}, &as) && as == WEIGHTS_BF16);
    CHECK(!loads_frozen((weight_choice){.fmt = WEIGHTS_Q8}, &as));
    set_base_weights("f32");
    CHECK(!loads_frozen((weight_choice){.fmt = WEIGHTS_F32, .frozen_base = true}, &as));
}

/* The logits of the adapter merged into the unrounded base (the file's). */
static int unrounded_logits(float *logits, gerr *e) {
    model m;
    lora l;
    bool has;
    int rc = model_load_adapter(at("ad"), &m, &l, &has, e);
    if (rc) return rc;
    lora_merge(&m, &l);
    lora_free(&l);
    rc = model_pack_for_inference(&m, WEIGHTS_F32, e);
    if (!rc) rc = run_logits(&m, logits, e);
    model_free(&m);
    return rc;
}

static void test_forward(const char *fmt, const char *name) {
    TEST(name);
    set_base_weights(fmt);
    size_t n = (size_t)ROWS * 61;
    float *frozen = xcalloc(n, sizeof *frozen), *merged = xcalloc(n, sizeof *merged), *raw = xcalloc(n, sizeof *raw);
    model a, b;
    gerr e = {0};
    int rc = model_load_for_inference(&a, at("ad"), false, (weight_choice){.fmt = WEIGHTS_F32, .frozen_base = true}, &e);
    if (!rc) {
        if (!(rc = model_load_for_inference(&b, at("ad"), false, (weight_choice){.fmt = WEIGHTS_F32}, &e))) {
            CHECK(a.adapter && !b.adapter);
            if (!(rc = run_logits(&a, frozen, &e)) && !(rc = run_logits(&b, merged, &e)))
                rc = unrounded_logits(raw, &e);
            model_free(&b);
        }
        model_free(&a);
    }
    if (rc) printf("#   setup failed: %s\n", e.msg);
    CHECK_EQ_INT(rc, 0);
    if (!rc) {
        double scale, d = max_diff(merged, frozen, n, &scale), scale_raw, far = max_diff(raw, frozen, n, &scale_raw);
        printf("#   %s: max |logit| %.3g, unmerged vs merged %.3g, vs the unrounded base %.3g\n", fmt, scale, d, far);
        /* float32: the adapter's product added after the base's instead of
         * inside it, sums in another order; measured 0.9e-6 to 1.1e-6 of
         * the largest |logit| (q8), 0.7e-6 to 1.0e-6 (bf16) */
        CHECK(d <= 1e-5 * scale);
        CHECK(far >= 100 * d && far > 1e-3 * scale);
    }
    free(frozen), free(merged), free(raw);
}

/* The tests on a checkpoint of arch, in a directory of its own. */
static int run_arch(model_arch arch, const char *name) {
    snprintf(root, sizeof root, "/tmp/test_frozen.XXXXXX");
    if (!mkdtemp(root)) return perror("mkdtemp"), 1;
    gerr e = {0};
    char title[160];
    snprintf(title, sizeof title, "%s: the checkpoint's fixture is written", name);
    TEST(title);
    int rc = write_checkpoint(arch, &e);
    if (rc) printf("#   %s\n", e.msg);
    CHECK_EQ_INT(rc, 0);
    if (!rc) {
        test_which();
        test_forward("q8", "q8 base: the unmerged forward is the merged-into-rounded-values forward within float32 "
                           "rounding; the unrounded base's is not");
        test_forward("bf16", "bf16 base: the same");
    }
    remove_tree(root);
    return 0;
}

int main(void) {
    if (run_arch(ARCH_LLAMA, "llama") || run_arch(ARCH_QWEN3_MOE, "qwen3_moe, LoRA on every expert too")) return 1;
    return check_done();
}
