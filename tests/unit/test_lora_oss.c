/* LoRA on gpt_oss's stacked experts (lib/model/lora.h's stacked adapter,
 * PEFT's ParamWrapper on mlp.experts.gate_up_proj and down_proj): the
 * shared A of gate and up, where each expert's factors lie in PEFT's
 * tensors and their names (gate_up_proj's under "base_layer." beside
 * down_proj's), lora_merge against PEFT's delta computed from those tensors
 * in double, the adapter's forward equal to the merged model's, the
 * refusals (gate without up, dropout), and adapter_dir.c's reading and
 * writing of such an adapter (target_parameters). The gradients against
 * PyTorch autograd with PEFT's delta: tests/ref/train_ref.py's gptoss-lora-
 * experts cases; PEFT itself reading the files: tests/ref/peft_oss_logits.py. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>
#include <unistd.h>

#include "check.h"
#include "helpers.h"
#include "tiny_train.h"
#include "ckpt/adapter_dir.h"
#include "model/lora.h"
#include "model/model.h"
#include "train/trainer.h"

/* tiny_train.h's gpt_oss: every layer 2 of 4 experts of width 32 */
enum { R_LORA = 4, E_TINY = 4, I_TINY = 32, D_TINY = 32 };

static void oss_config(model_config *c) { tiny_config(c, ARCH_GPT_OSS, false); }
static int oss_model(model *m) { return tiny_model(m, ARCH_GPT_OSS, false); }

static bool stacked_lora(lora *l, const model_config *c, const char *names) {
    gerr e = {0};
    unsigned targets;
    if (lora_parse_targets(names, &targets, &e) || lora_alloc(l, c, R_LORA, 8, false, 0, targets, NULL, &e)) {
        printf("# %s\n", e.msg);
        return false;
    }
    lora_init(l, 5);
    fill_uniform(l->memory, l->n_params, 0.3, 0.0, 29, 0);
    return true;
}

static lora_tensor_ref *refs_of(const lora *l, size_t *n) {
    *n = lora_tensor_list(l, NULL);
    lora_tensor_ref *r = calloc(*n, sizeof *r);
    lora_tensor_list(l, r);
    return r;
}

static const lora_tensor_ref *find_ref(const lora_tensor_ref *refs, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(refs[i].name, name)) return &refs[i];
    return NULL;
}

/* PEFT's tensor named peft of l, put together from every ref that lies in it
 * (NULL when none does); *rows, *cols its shape. */
static float *peft_tensor(const lora *l, const lora_tensor_ref *refs, size_t n, const char *peft, int64_t *rows,
                          int64_t *cols) {
    float *t = NULL;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(refs[i].peft, peft)) continue;
        if (!t) {
            *rows = refs[i].peft_rows, *cols = refs[i].peft_cols;
            t = malloc(sizeof(float) * (size_t)(*rows * *cols));
            for (int64_t j = 0; j < *rows * *cols; j++) t[j] = NAN;
        }
        lora_ref_to_peft(&refs[i], l->memory, t);
    }
    return t;
}

static void test_layout(void) {
    TEST("stacked adapter: gate and up share A_e, every factor lies once in PEFT's ParamWrapper tensors");
    model_config c;
    oss_config(&c);
    lora l;
    if (!stacked_lora(&l, &c, "all")) {
        CHECK(false);
        return;
    }
    CHECK(l.stacked && l.a[LORA_EXP_UP] == l.a[LORA_EXP_GATE] && l.b[LORA_EXP_UP] != l.b[LORA_EXP_GATE]);
    int qd = c.n_heads * c.head_dim, kvd = c.n_kv_heads * c.head_dim;
    size_t attn = (size_t)R_LORA * ((D_TINY + qd) + 2 * (D_TINY + kvd) + (qd + D_TINY));
    size_t experts = (size_t)E_TINY * R_LORA * (D_TINY + 2 * I_TINY + I_TINY + D_TINY);
    CHECK_EQ_INT(l.n_params, 2 * (attn + experts));
    size_t n;
    lora_tensor_ref *refs = refs_of(&l, &n);
    /* per layer: 4 attention pairs; per expert the shared A, gate's B, up's B, down's A and B */
    CHECK_EQ_INT(n, 2 * (8 + 5 * E_TINY));
    size_t floats = 0;
    for (size_t i = 0; i < n; i++) floats += (size_t)(refs[i].rows * refs[i].cols);
    CHECK_EQ_INT(floats, l.n_params);
    const char *pre = "base_model.model.model.layers.1.mlp.experts.";
    char name[160];
    snprintf(name, sizeof name, "%s2.gate_up_proj.lora_A.weight", pre);
    const lora_tensor_ref *a = find_ref(refs, n, name);
    snprintf(name, sizeof name, "%s2.up_proj.lora_B.weight", pre);
    const lora_tensor_ref *up = find_ref(refs, n, name);
    snprintf(name, sizeof name, "%s3.down_proj.lora_B.weight", pre);
    const lora_tensor_ref *down = find_ref(refs, n, name);
    CHECK(a && up && down);
    if (!a || !up || !down) {
        free(refs);
        lora_free(&l);
        return;
    }
    CHECK(a->data == lora_a_at(&l, LORA_EXP_UP, 1, 2) && a->rows == R_LORA && a->cols == D_TINY);
    CHECK_EQ_STR(a->peft, "base_model.model.model.layers.1.mlp.experts.base_layer.lora_A.weight");
    CHECK(a->peft_rows == E_TINY * R_LORA && a->peft_cols == D_TINY && a->row0 == 2 * R_LORA);
    CHECK_EQ_STR(up->peft, "base_model.model.model.layers.1.mlp.experts.base_layer.lora_B.weight");
    CHECK(up->peft_rows == 2 * I_TINY && up->peft_cols == R_LORA * E_TINY && up->row0 == 1 && up->row_step == 2 &&
          up->col0 == 2 && up->col_step == E_TINY);
    CHECK_EQ_STR(down->peft, "base_model.model.model.layers.1.mlp.experts.lora_B.weight");
    CHECK(down->peft_rows == D_TINY && down->peft_cols == R_LORA * E_TINY && down->col0 == 3);
    /* gate_up's lora_B: row 2j gate's row j, 2j + 1 up's, column k E + e expert e's k */
    int64_t rows, cols;
    float *b = peft_tensor(&l, refs, n, up->peft, &rows, &cols);
    const float *bg = lora_b_at(&l, LORA_EXP_GATE, 1, 2), *bu = lora_b_at(&l, LORA_EXP_UP, 1, 2);
    CHECK(b[(2 * 5) * cols + 3 * E_TINY + 2] == bg[5 * R_LORA + 3] &&
          b[(2 * 5 + 1) * cols + 3 * E_TINY + 2] == bu[5 * R_LORA + 3]);
    /* every value of every PEFT tensor comes from one piece, and reads back to it */
    int nan = 0, tensors = 0;
    float *back = calloc(l.n_params, sizeof *back);
    for (size_t i = 0; i < n; i++) {
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++) seen = !strcmp(refs[j].peft, refs[i].peft);
        if (seen) continue;
        tensors++;
        float *t = peft_tensor(&l, refs, n, refs[i].peft, &rows, &cols);
        for (int64_t j = 0; j < rows * cols; j++) nan += isnan(t[j]);
        for (size_t j = i; j < n; j++)
            if (!strcmp(refs[j].peft, refs[i].peft)) lora_ref_from_peft(&refs[j], t, back);
        free(t);
    }
    CHECK_EQ_INT(tensors, 2 * (8 + 4));
    CHECK_EQ_INT(nan, 0);
    CHECK(!memcmp(back, l.memory, l.n_params * sizeof *back));
    free(back), free(b), free(refs);
    lora_free(&l);
}

static void test_names_alone(void) {
    TEST("gate_up_proj alone or down_proj alone: PEFT's one ParamWrapper, no base_layer");
    model_config c;
    oss_config(&c);
    const char *lists[] = {"gate,up", "down"};
    for (int i = 0; i < 2; i++) {
        lora l;
        if (!stacked_lora(&l, &c, lists[i])) {
        CHECK(false);
        return;
    }
        size_t n;
        lora_tensor_ref *refs = refs_of(&l, &n);
        CHECK_EQ_INT(n, 2 * E_TINY * (i ? 2 : 3));
        CHECK_EQ_STR(refs[0].peft, "base_model.model.model.layers.0.mlp.experts.lora_A.weight");
        CHECK(refs[1].is_b && refs[1].peft_rows == (i ? D_TINY : 2 * I_TINY));
        free(refs);
        lora_free(&l);
    }
}

static void test_refused(void) {
    TEST("gpt_oss: up without gate, and dropout on its experts, are EX_USAGE in one line naming why");
    model_config c;
    oss_config(&c);
    lora l;
    gerr e = {0};
    CHECK_EQ_INT(lora_alloc(&l, &c, R_LORA, 8, false, 0, 1u << LORA_UP, NULL, &e), EX_USAGE);
    CHECK(strstr(e.msg, "--lora-targets: gate and up are one parameter") && strstr(e.msg, "gate_up_proj") &&
          !strchr(e.msg, '\n'));
    CHECK_EQ_INT(lora_alloc(&l, &c, R_LORA, 8, false, 0.1, 1u << LORA_DOWN | 1u << LORA_Q, NULL, &e), EX_USAGE);
    CHECK(strstr(e.msg, "--lora-dropout 0.1: PEFT's adapter on gpt_oss's stacked experts") && !strchr(e.msg, '\n'));
    CHECK(lora_alloc(&l, &c, R_LORA, 8, false, 0.1, 0xfu, NULL, &e) == 0 && !l.stacked);
    lora_free(&l);
    /* Qwen3-MoE's experts are modules of their own: gate alone, and dropout, are theirs */
    tiny_config(&c, ARCH_QWEN3_MOE, false);
    CHECK(lora_alloc(&l, &c, R_LORA, 8, false, 0.1, 1u << LORA_GATE, NULL, &e) == 0 && !l.stacked);
    lora_free(&l);
}

/* lora_merge against PEFT's delta of expert e, from PEFT's tensors in double:
 * W_e[i, o] += scale sum_k lora_B[o, k E + e] lora_A[e r + k, i] (HF's
 * [E, in, out]; ours holds W_e^T, gate the even o, up the odd). */
static void test_merge(void) {
    TEST("lora_merge: each expert's gate, up and down moved by PEFT's ParamWrapper delta of the stacked tensors");
    model m;
    CHECK(oss_model(&m) == 0);
    size_t per = (size_t)E_TINY * I_TINY * D_TINY;
    float *before[3];
    for (int p = 0; p < 3; p++) {
        before[p] = malloc(sizeof(float) * per);
        memcpy(before[p], model_layer_tensor(&m, P_EXP_GATE + p, 1), sizeof(float) * per);
    }
    lora l;
    if (!stacked_lora(&l, &m.cfg, "gate,up,down")) {
        CHECK(false);
        return;
    }
    size_t n;
    lora_tensor_ref *refs = refs_of(&l, &n);
    int64_t ar, ac, br, bc, dar, dac, dbr, dbc;
    float *A = peft_tensor(&l, refs, n, "base_model.model.model.layers.1.mlp.experts.base_layer.lora_A.weight", &ar, &ac);
    float *B = peft_tensor(&l, refs, n, "base_model.model.model.layers.1.mlp.experts.base_layer.lora_B.weight", &br, &bc);
    float *dA = peft_tensor(&l, refs, n, "base_model.model.model.layers.1.mlp.experts.lora_A.weight", &dar, &dac);
    float *dB = peft_tensor(&l, refs, n, "base_model.model.model.layers.1.mlp.experts.lora_B.weight", &dbr, &dbc);
    lora_merge(&m, &l);
    double worst = 0, moved = 0;
    for (int e = 0; e < E_TINY; e++)
        for (int o = 0; o < 2 * I_TINY; o++)
            for (int i = 0; i < D_TINY; i++) {
                double d = 0;
                for (int k = 0; k < R_LORA; k++)
                    d += (double)B[o * bc + k * E_TINY + e] * A[(e * R_LORA + k) * ac + i];
                int p = o % 2 ? P_EXP_UP : P_EXP_GATE;
                size_t at = ((size_t)e * I_TINY + o / 2) * D_TINY + i;
                float w0 = before[p - P_EXP_GATE][at], w1 = model_layer_tensor(&m, p, 1)[at];
                worst = fmax(worst, fabs(w0 + l.scale * d - w1)), moved = fmax(moved, fabs(l.scale * d));
            }
    for (int e = 0; e < E_TINY; e++)
        for (int o = 0; o < D_TINY; o++)
            for (int i = 0; i < I_TINY; i++) {
                double d = 0;
                for (int k = 0; k < R_LORA; k++)
                    d += (double)dB[o * dbc + k * E_TINY + e] * dA[(e * R_LORA + k) * dac + i];
                size_t at = ((size_t)e * D_TINY + o) * I_TINY + i;
                float w0 = before[2][at], w1 = model_layer_tensor(&m, P_EXP_DOWN, 1)[at];
                worst = fmax(worst, fabs(w0 + l.scale * d - w1));
            }
    CHECK(ar == E_TINY * R_LORA && br == 2 * I_TINY && dbr == D_TINY && dac == I_TINY);
    /* float32 sums of 4 products against double (measured about 1e-7) */
    CHECK(worst < 1e-6 && moved > 1e-2);
    free(A), free(B), free(dA), free(dB), free(refs);
    for (int p = 0; p < 3; p++) free(before[p]);
    lora_free(&l);
    model_free(&m);
}

/* The adapter's log-probs equal those of the merged model without it. */
static void test_forward_is_merged(void) {
    TEST("the stacked adapter's forward over each expert's rows gives the merged model's log-probs");
    model m, merged;
    CHECK(oss_model(&m) == 0 && oss_model(&merged) == 0);
    lora l;
    if (!stacked_lora(&l, &m.cfg, "all")) {
        CHECK(false);
        return;
    }
    lora_merge(&merged, &l);
    double d, moved;
    lora_vs_merged(&m, &merged, &l, &d, &moved);
    /* float32 sums in two orders (measured about 1e-6); the adapter moved them by far more */
    CHECK(d < 1e-5 && moved > 1e-2);
    lora_free(&l);
    model_free(&m), model_free(&merged);
}

/* ---- adapter directories --------------------------------------------------------------------- */

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *s = calloc(1, 1 << 16);
    size_t n = fread(s, 1, (1 << 16) - 1, f);
    s[n] = 0;
    fclose(f);
    return s;
}

/* dir/adapter_config.json with the first `from` replaced by `to`. */
static void edit_config(const char *dir, const char *from, const char *to) {
    char *s = read_text(path_under(dir, "adapter_config.json")), *at = s ? strstr(s, from) : NULL;
    CHECK(at != NULL);
    if (!at) {
        free(s);
        return;
    }
    FILE *f = fopen(path_under(dir, "adapter_config.json"), "wb");
    fprintf(f, "%.*s%s%s", (int)(at - s), s, to, at + strlen(from));
    fclose(f);
    free(s);
}

/* A stacked adapter on the tiny gpt_oss for names, saved in a new dir
 * (dir: "/tmp/grpo-lora-oss-XXXXXX"), kept in *l. */
static bool saved_adapter(lora *l, const char *names, char *dir) {
    model_config c;
    oss_config(&c);
    gerr e = {0};
    if (!stacked_lora(l, &c, names)) return false;
    bool ok = mkdtemp(dir) != NULL && lora_save(l, dir, &e) == 0;
    if (!ok) lora_free(l);
    return ok;
}

static void test_save_load(void) {
    TEST("adapter dir: target_parameters in GptOssExperts' order, PEFT's tensors, read back exactly");
    model_config c;
    oss_config(&c);
    lora l, back;
    char dir[] = "/tmp/grpo-lora-oss-XXXXXX";
    gerr e = {0};
    if (!saved_adapter(&l, "q,v,gate,up,down", dir)) {
        CHECK(false);
        return;
    }
    char *cfg = read_text(path_under(dir, "adapter_config.json"));
    CHECK(cfg && strstr(cfg, "\"target_modules\": [\n    \"q_proj\",\n    \"v_proj\"\n  ],\n"
                             "  \"target_parameters\": [\n    \"mlp.experts.gate_up_proj\",\n"
                             "    \"mlp.experts.down_proj\"\n  ],\n  \"task_type\""));
    free(cfg);
    st_file f;
    CHECK(st_open(&f, path_under(dir, "adapter_model.safetensors"), &e) == 0);
    CHECK_EQ_INT(f.n_tensors, 2 * (2 * 2 + 4));
    const st_tensor *t = st_find(&f, "base_model.model.model.layers.0.mlp.experts.base_layer.lora_B.weight");
    CHECK(t && t->shape[0] == 2 * I_TINY && t->shape[1] == R_LORA * E_TINY);
    st_close(&f);
    CHECK(lora_load(&back, &c, dir, &e) == 0);
    CHECK(back.stacked && back.targets == l.targets && back.n_params == l.n_params &&
          !memcmp(back.memory, l.memory, l.n_params * sizeof(float)));
    lora_free(&back);
    /* the experts alone: target_modules [], which PEFT writes so too */
    lora_free(&l);
    if (!stacked_lora(&l, &c, "gate,up,down")) {
        CHECK(false);
        return;
    }
    CHECK(lora_save(&l, dir, &e) == 0);
    cfg = read_text(path_under(dir, "adapter_config.json"));
    CHECK(cfg && strstr(cfg, "\"target_modules\": [],\n  \"target_parameters\": ["));
    free(cfg);
    /* PEFT matches an entry as the end of a parameter's name: the last parts name it too */
    edit_config(dir, "\"mlp.experts.gate_up_proj\"", "\"gate_up_proj\"");
    edit_config(dir, "\"mlp.experts.down_proj\"", "\"experts.down_proj\"");
    CHECK(lora_load(&back, &c, dir, &e) == 0 && !memcmp(back.memory, l.memory, l.n_params * sizeof(float)));
    lora_free(&back);
    lora_free(&l);
    remove_tree(dir);
}

/* An adapter dir of q and the experts, its config edited: EX_DATAERR naming
 * the file and why, in one line. */
static void check_bad_config(const model_config *c, const char *from, const char *to, const char *why) {
    lora l;
    char dir[] = "/tmp/grpo-lora-oss-XXXXXX";
    gerr e = {0};
    if (!saved_adapter(&l, "q,gate,up,down", dir)) {
        CHECK(false);
        return;
    }
    lora_free(&l);
    edit_config(dir, from, to);
    int rc = lora_load(&l, c, dir, &e);
    CHECK_EQ_INT(rc, EX_DATAERR);
    CHECK(strstr(e.msg, "adapter_config.json: ") && strstr(e.msg, why) && !strchr(e.msg, '\n'));
    if (rc != EX_DATAERR || !strstr(e.msg, why)) printf("#   %s\n", e.msg);
    if (!rc) lora_free(&l);
    remove_tree(dir);
}

static void test_bad_configs(void) {
    TEST("adapter dir: a layer's parameter, another parameter, gate_proj as a module of gpt_oss, dropout, "
         "target_parameters on Qwen3-MoE: 65 naming why");
    model_config oss, moe;
    oss_config(&oss);
    tiny_config(&moe, ARCH_QWEN3_MOE, false);
    check_bad_config(&oss, "\"mlp.experts.down_proj\"", "\"model.layers.0.mlp.experts.down_proj\"",
                     "target_parameters entry \"model.layers.0.mlp.experts.down_proj\" is not supported");
    check_bad_config(&oss, "\"mlp.experts.down_proj\"", "\"mlp.router.weight\"", "\"mlp.router.weight\" is not supported");
    check_bad_config(&oss, "\"q_proj\"", "\"gate_proj\"", "target_modules: gate_proj, up_proj and down_proj name no module");
    check_bad_config(&oss, "\"lora_dropout\": 0.0", "\"lora_dropout\": 0.05",
                     "lora_dropout 0.05: PEFT's adapter on gpt_oss's stacked experts");
    check_bad_config(&moe, "\"r\": 4", "\"r\": 4", "target_parameters: supported on gpt_oss's stacked experts only");
}

int main(void) {
    test_layout();
    test_names_alone();
    test_refused();
    test_merge();
    test_forward_is_merged();
    test_save_load();
    test_bad_configs();
    return check_done();
}
