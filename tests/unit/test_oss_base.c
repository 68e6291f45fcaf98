/* An mxfp4 frozen base (grpo-update --base-weights mxfp4, auto's choice for
 * a gpt-oss; lib/ckpt/load.h's model_load_adapter_mxfp4) holds every
 * matrix as its file does: on a tiny gpt-oss whose experts are MXFP4
 * values, written here as a GGUF of Q8_0 matrices (gguf_export's q8_0: the
 * experts MXFP4, the router and vectors F32) and as a Hugging Face
 * directory in bf16 (the experts _blocks and _scales), the held format of
 * each parameter is the file's (MXFP4 experts; q8 or bf16 attention,
 * embeddings and LM head; the router and vectors float32 rows), every
 * packed value the file's exactly (the float32 load's), and the bytes the
 * plan holds are today's less the float32 rows it no longer keeps, the
 * pages past each packed matrix never committed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "helpers.h"
#include "tiny_train.h"
#include "ckpt/load.h"
#include "export/export.h"
#include "formats/quant.h"
#include "ops/packed_bf16.h"

static char dir[] = "/tmp/grpo_test_oss_base_XXXXXX";

/* The tiny gpt-oss of tiny_train.h over a vocabulary that holds the
 * fixture tokenizer's 100 tokens, its experts random MXFP4 blocks'
 * values (so that an export keeps them MXFP4). */
static bool oss_model(model *m) {
    memset(m, 0, sizeof *m);
    tiny_config(&m->cfg, ARCH_GPT_OSS, false);
    m->cfg.vocab_size = 128;
    if (tiny_model_fill(m)) return false;
    size_t nt = model_tensor_list(m, NULL);
    model_tensor_ref *refs = xcalloc(nt, sizeof *refs);
    model_tensor_list(m, refs);
    rng_stream r;
    rng_init(&r, 41, "mxfp4", 5, 0);
    gerr e = {0};
    bool ok = true;
    for (size_t i = 0; i < nt && ok; i++) {
        if (refs[i].expert < 0 || !refs[i].cols) continue;
        size_t n = (size_t)refs[i].rows * (size_t)refs[i].cols, nb = n / MX4W_K_BLOCK;
        unsigned char *b = xmalloc(nb * MX4W_GGUF_BYTES);
        for (size_t j = 0; j < nb * MX4W_GGUF_BYTES; j++)
            b[j] = j % MX4W_GGUF_BYTES ? (unsigned char)rng_below(&r, 256) : (unsigned char)(122 + rng_below(&r, 3));
        ok = quant_dequantize(GGML_TYPE_MXFP4, b, refs[i].dst, n, &e) == 0;
        free(b);
    }
    free(refs);
    if (!ok) printf("# %s\n", e.msg);
    return ok;
}

static bool expert(int p) { return p == P_EXP_GATE || p == P_EXP_UP || p == P_EXP_DOWN; }

/* Whether parameter p is one the file holds in fmt (the attention
 * projections, the embeddings, the head) rather than float32. */
static bool in_file_format(int p) {
    return p == P_WQ || p == P_WK || p == P_WV || p == P_WO || p == P_TOK_EMBD || p == P_LM_HEAD;
}

/* path loaded as an mxfp4 frozen base: held as the file holds it (fmt),
 * the file's values, and fewer bytes than float32 rows would take. */
static void check_base(const char *title, const char *path, weight_format fmt, const char *verbatim_from) {
    TEST(title);
    model b, f;
    lora l;
    bool adapter;
    gerr e = {0};
    if (model_load_adapter_mxfp4(path, &b, &l, &adapter, &e) || model_load(&f, path, &e)) {
        printf("# %s\n", e.msg);
        CHECK(0);
        return;
    }
    CHECK(b.packed && b.packed_frozen && b.packed_as == WEIGHTS_MXFP4 && !adapter);
    int wrong = 0;
    for (int p = 0; p < MODEL_N_PARAMS; p++) {
        if (!b.w.t[p]) continue;
        weight_hold want = expert(p) || in_file_format(p) ? HOLD_PACKED : HOLD_ROWS;
        weight_format as = expert(p) ? WEIGHTS_MXFP4 : fmt;
        if (b.held[p] != want || (want == HOLD_PACKED && b.held_as[p] != as)) {
            printf("# %s: held %d as %s\n", model_param_name(p), b.held[p], weight_format_name(b.held_as[p]));
            wrong++;
        }
        if (expert(p) || in_file_format(p)) CHECK(b.file_as[p] == as);
    }
    CHECK_EQ_INT(wrong, 0);
    /* every packed non-expert matrix the file's values (the float32 load's), exactly; its
     * float32 place past the packed bytes never committed */
    size_t nt = model_tensor_list(&b, NULL), saved = 0;
    model_tensor_ref *rb = xcalloc(nt, sizeof *rb), *rf = xcalloc(nt, sizeof *rf);
    model_tensor_list(&b, rb), model_tensor_list(&f, rf);
    int same = 0, packed = 0, tails = 0;
    for (size_t i = 0; i < nt; i++) {
        int p = rb[i].param, n = (int)rb[i].rows, k = (int)rb[i].cols;
        if (b.held[p] != HOLD_PACKED || expert(p)) continue;
        float *back = xmalloc(sizeof *back * (size_t)n * k);
        if (fmt == WEIGHTS_BF16) bf16w_unpack(back, rb[i].dst, n, k);
        else weights_unpack(fmt, back, rb[i].dst, n, k);
        same += !memcmp(back, rf[i].dst, sizeof *back * (size_t)n * k);
        free(back);
        size_t bytes = weights_packed_bytes(fmt, n, k);
        tails += resident_pages((const char *)rb[i].dst + bytes, (size_t)n * k * sizeof(float) - bytes);
        saved += (size_t)n * k * sizeof(float) - bytes;
        packed++;
    }
    printf("# %d of %d packed matrices besides the experts the file's values; %d pages past them resident\n", same,
           packed, tails);
    CHECK_EQ_INT(packed, 4 * b.cfg.n_layers + 2);
    CHECK_EQ_INT(same, packed);
    CHECK_EQ_INT(tails, 0);
    /* the plan's bytes: float32 rows for those matrices (the file's formats unknown) hold `saved` more */
    f.experts_mxfp4 = true;
    memcpy(f.file_as, b.file_as, sizeof f.file_as);
    pack_plan held, rows;
    weight_choice w = {.fmt = WEIGHTS_F32, .keep_mxfp4 = true, .frozen = true};
    model_plan_packing(&f, w, &held);
    for (int p = 0; p < MODEL_N_PARAMS; p++)
        if (!expert(p)) f.file_as[p] = WEIGHTS_F32;
    model_plan_packing(&f, w, &rows);
    size_t now = model_resident_bytes(&f, &held), before = model_resident_bytes(&f, &rows);
    printf("# parameters held: %zu bytes, %zu with the others float32 rows\n", now, before);
    CHECK_EQ_INT((long long)now, (long long)(before - saved));
    char desc[256];
    printf("# %s\n", model_weights_describe(&b, desc, sizeof desc));
    char want[96];
    snprintf(want, sizeof want, "; attention %s, embeddings %s, LM head %s", weight_format_name(fmt),
             weight_format_name(fmt), weight_format_name(fmt));
    CHECK(strstr(desc, want) != NULL);
    CHECK(strstr(desc, verbatim_from) != NULL);
    weight_format auto_fmt;
    CHECK(model_file_format(path, &auto_fmt, &e) == 0 && auto_fmt == WEIGHTS_MXFP4);
    pack_plan_free(&held), pack_plan_free(&rows);
    free(rb), free(rf);
    model_free(&b), model_free(&f);
}

int main(void) {
    if (!mkdtemp(dir)) return perror("mkdtemp"), 1;
    model m;
    gerr e = {0};
    const char *q8 = path_under(dir, "q8.gguf"), *f32 = path_under(dir, "f32.gguf"), *hf = path_under(dir, "hf");
    export_opts o = {.model = f32, .out = hf, .format = EXPORT_HF, .dtype = EXPORT_BF16};
    char *note = NULL;
    if (!oss_model(&m) || gguf_export(q8, &m, "tests/fixtures/tiny-tokenizer", EXPORT_Q8_0, &e) ||
        gguf_export(f32, &m, "tests/fixtures/tiny-tokenizer", EXPORT_F32, &e) || export_run(&o, &note, &e)) {
        printf("# could not write the files: %s\n", e.msg);
        return 1;
    }
    free(note);
    model_free(&m);
    /* 2 layers x 4 experts x 3 matrices MXFP4, 2 x 4 attention projections, the embeddings, the head */
    check_base("a Q8_0 GGUF (MXFP4 experts): q8 attention, embeddings and head, the file's blocks; the router "
               "float32",
               q8, WEIGHTS_Q8, "; 34 of 34 matrices from the file's MXFP4 and Q8_0 blocks)");
    check_base("a bf16 Hugging Face gpt-oss (MXFP4 experts): bf16 attention, embeddings and head, the file's values",
               hf, WEIGHTS_BF16, "; 24 of 34 matrices from the file's MXFP4 blocks)");
    remove_tree(dir);
    return check_done();
}
