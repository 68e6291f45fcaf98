/* Loading a GGUF packed for inference (lib/ckpt/load.h's
 * model_load_for_inference): Q8_0 matrices go straight into q8's packed
 * blocks, checked against the path that widens them to float32 and
 * quantizes again (model_load, then model_pack_for_inference) on tiny GGUFs
 * written here: every packed byte the same for the quantizer's blocks
 * (llama with Q/K rows permuted and its own LM head, qwen2 tied, a head too
 * narrow to pack in place, a file mixing F16 matrices in), the file's exact
 * values for blocks no quantizer wrote, the same error for a non-finite
 * block and for a shape q8 cannot hold, and the other formats untouched;
 * and a Q4_K GGUF as a frozen q4k base (grpo-update's), its blocks taken
 * byte for byte. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sysexits.h>
#include <unistd.h>

#include "check.h"
#include "helpers.h"
#include "ckpt/hf_dir.h"
#include "ckpt/load.h"
#include "formats/gguf.h"
#include "formats/gguf_meta.h"
#include "formats/gguf_write.h"
#include "formats/quant.h"
#include "model/model.h"
#include "ops/ops.h"
#include "ops/packed_q4k.h"
#include "ops/packed_q8.h"

/* ---- tiny models as GGUF files ---------------------------------------------------- */

static const model_config llama_cfg = {.arch = ARCH_LLAMA, .dim = 64, .hidden_dim = 96, .n_layers = 2,
                                       .n_heads = 4, .n_kv_heads = 2, .head_dim = 16, .vocab_size = 40,
                                       .max_seq_len = 64, .rope_theta = 10000, .norm_eps = 1e-5f,
                                       .bos_id = -1, .pad_id = -1};

/* qwen2 (no Q/K permutation) with hidden_dim rows in the gate and up
 * projections, 256 wide (whole Q4_K super-blocks). */
static model_config qwen_like(int hidden_dim) {
    model_config c = llama_cfg;
    c.arch = ARCH_QWEN2, c.qkv_bias = true, c.dim = 256, c.hidden_dim = hidden_dim, c.head_dim = 64;
    return c;
}

static bool make(model *m, const model_config *cfg, uint64_t seed) {
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    gerr e = {0};
    if (model_alloc(m, &e)) return false;
    uint64_t st = 0x9E3779B97F4A7C15ULL ^ seed;
    for (size_t i = 0; i < m->n_params; i++) { /* xorshift: [-0.5, 0.5) */
        st ^= st << 13, st ^= st >> 7, st ^= st << 17;
        m->params_memory[i] = (float)((st >> 11) * 0x1.0p-53 - 0.5);
    }
    return true;
}

/* Vectors F32; matrices `quant` (Q8_0 or Q4_K) where their rows are whole
 * blocks, else F16; mixed: layer 0's wk, layer 1's w_up and the LM head F16 too. */
static uint32_t type_of(const model_tensor_ref *r, bool mixed, uint32_t quant) {
    if (!r->cols) return GGML_TYPE_F32;
    bool f16 = mixed && ((r->param == P_WK && r->layer == 0) || (r->param == P_W_UP && r->layer == 1) ||
                         r->param == P_LM_HEAD);
    return f16 || r->cols % (quant == GGML_TYPE_Q4_K ? 256 : 32) ? GGML_TYPE_F16 : quant;
}

typedef struct {
    const model_tensor_ref *refs;
    int head_dim;
    bool llama;
} source;

/* gguf_write's rows: llama's Q/K a head at a time, permuted as llama.cpp writes them. */
static const float *rows_of(void *ctx, size_t i, size_t row, size_t n, float *tmp) {
    const source *s = ctx;
    const model_tensor_ref *r = &s->refs[i];
    size_t cols = (size_t)(r->cols ? r->cols : 1);
    (void)n;
    if (!s->llama || !r->perm_heads) return r->dst + row * cols;
    qk_permute(tmp, r->dst + row * cols, 1, s->head_dim, cols);
    return tmp;
}

static int write_gguf_as(const char *path, const model *m, bool mixed, uint32_t quant) {
    const model_config *c = &m->cfg;
    const char *arch = model_arch_name(c->arch);
    gguf_meta meta = {0};
    char key[128];
    gmeta_str(&meta, "general.architecture", arch, strlen(arch));
    gmeta_u32(&meta, "general.alignment", GGUF_WRITE_ALIGN);
    const struct {
        const char *suffix;
        int v;
    } ints[] = {{"block_count", c->n_layers},         {"embedding_length", c->dim},
                {"feed_forward_length", c->hidden_dim}, {"attention.head_count", c->n_heads},
                {"attention.head_count_kv", c->n_kv_heads}, {"attention.key_length", c->head_dim},
                {"context_length", c->max_seq_len}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        snprintf(key, sizeof key, "%s.%s", arch, ints[i].suffix);
        gmeta_u32(&meta, key, (uint32_t)ints[i].v);
    }
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", arch);
    gmeta_f32(&meta, key, c->norm_eps);
    gmeta_arr_str_begin(&meta, "tokenizer.ggml.tokens", (uint64_t)c->vocab_size);
    for (int i = 0; i < c->vocab_size; i++) {
        char tok[16];
        int len = snprintf(tok, sizeof tok, "t%d", i);
        gmeta_arr_str_item(&meta, tok, (size_t)len);
    }
    size_t n = model_tensor_list(m, NULL);
    model_tensor_ref *refs = xcalloc(n, sizeof *refs);
    gguf_wtensor *t = xcalloc(n, sizeof *t);
    model_tensor_list(m, refs);
    for (size_t i = 0; i < n; i++) {
        snprintf(t[i].name, sizeof t[i].name, "%s", refs[i].gguf);
        t[i].rows = refs[i].rows, t[i].cols = refs[i].cols, t[i].type = type_of(&refs[i], mixed, quant);
        t[i].chunk_rows = refs[i].perm_heads ? (size_t)c->head_dim : (size_t)refs[i].rows;
    }
    source s = {.refs = refs, .head_dim = c->head_dim, .llama = c->arch == ARCH_LLAMA};
    gerr e = {0};
    int rc = gguf_write(path, &meta, t, n, rows_of, &s, &e);
    if (rc) printf("# %s\n", e.msg);
    gmeta_free(&meta);
    free(t);
    free(refs);
    return rc;
}

static int write_gguf(const char *path, const model *m, bool mixed) {
    return write_gguf_as(path, m, mixed, GGML_TYPE_Q8_0);
}

/* Rewrites tensor `name`'s data in the file through edit (its bytes, its size). */
static bool edit_tensor(const char *path, const char *name, void (*edit)(unsigned char *, size_t, const void *),
                        const void *ctx) {
    gguf_file f;
    gerr e = {0};
    if (gguf_open(&f, path, &e)) {
        printf("# %s\n", e.msg);
        return false;
    }
    const gguf_tensor *t = gguf_find_tensor(&f, name);
    size_t at = t ? (size_t)(f.data_offset + t->offset) : 0, len = t ? (size_t)t->nbytes : 0;
    unsigned char *bytes = t ? xmalloc(len) : NULL;
    if (t) memcpy(bytes, t->data, len);
    gguf_close(&f);
    if (!t) return false;
    edit(bytes, len, ctx);
    FILE *out = fopen(path, "r+b");
    bool ok = out && fseek(out, (long)at, SEEK_SET) == 0 && fwrite(bytes, 1, len, out) == len;
    if (out && fclose(out)) ok = false;
    free(bytes);
    return ok;
}

/* ---- the two paths ------------------------------------------------------------------ */

enum { N_MATS = 7 };

/* Layer l's matrix i (wq .. w_down) where it is packed, and its shape. */
static const void *packed_matrix(const model *m, int i, int l, int *rows, int *cols) {
    const model_config *c = &m->cfg;
    int d = c->dim, qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim, h = c->hidden_dim;
    const int mats[N_MATS][3] = {{P_WQ, qd, d}, {P_WK, kvd, d}, {P_WV, kvd, d}, {P_WO, d, qd},
                                 {P_W_GATE, h, d}, {P_W_UP, h, d}, {P_W_DOWN, d, h}};
    *rows = mats[i][1], *cols = mats[i][2];
    return m->w.t[mats[i][0]] + (size_t)l * *rows * *cols;
}

/* Matrices whose packed bytes differ between a and b (both packed in fmt),
 * the LM head counted; the float32 tensors (embeddings, norms, biases) must
 * be equal too (a mismatch there counts as one). */
static int differing(const model *a, const model *b, weight_format fmt) {
    const model_config *c = &a->cfg;
    int diff = 0;
    for (int l = 0; l < c->n_layers; l++)
        for (int i = 0; i < N_MATS; i++) {
            int n, k;
            const void *x = packed_matrix(a, i, l, &n, &k), *y = packed_matrix(b, i, l, &n, &k);
            diff += memcmp(x, y, weights_packed_bytes(fmt, n, k)) != 0;
        }
    if (a->head_packed || b->head_packed)
        diff += !a->head_packed || !b->head_packed ||
                memcmp(a->head_packed, b->head_packed, weights_packed_bytes(fmt, c->vocab_size, c->dim)) != 0;
    const int floats[] = {P_TOK_EMBD, P_ATTN_NORM, P_BQ, P_BK, P_BV, P_Q_NORM, P_K_NORM, P_FFN_NORM, P_OUT_NORM};
    for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++) {
        int p = floats[i];
        diff += a->param_sizes[p] && memcmp(a->w.t[p], b->w.t[p], a->param_sizes[p] * sizeof(float)) != 0;
    }
    return diff;
}

/* Loads path both ways in fmt: *widen by model_load + model_pack_for_inference, *direct by
 * model_load_for_inference. */
static bool load_both(const char *path, weight_format fmt, model *widen, model *direct) {
    gerr e = {0};
    int rc = model_load(widen, path, &e);
    if (!rc && (rc = model_pack_for_inference(widen, fmt, &e))) model_free(widen);
    if (rc) {
        printf("# widen: %s\n", e.msg);
        return false;
    }
    if ((rc = model_load_for_inference(direct, path, false, (weight_choice){.fmt = fmt}, &e))) {
        printf("# direct: %s\n", e.msg);
        model_free(widen);
        return false;
    }
    return true;
}

static char dir[] = "/tmp/grpo-test-load-packed-XXXXXX";

static const char *file(const char *name) {
    static char path[4][256];
    static int k;
    char *p = path[k++ % 4];
    snprintf(p, sizeof path[0], "%s/%s", dir, name);
    return p;
}

/* ---- tests ------------------------------------------------------------------------------ */

/* The quantizer's blocks, straight in: every packed byte as the widening
 * path's, want_verbatim of them from the file's blocks, said so by the
 * weights' description. */
static void check_same(const char *name, const model_config *cfg, bool mixed, int want_verbatim) {
    TEST(name);
    model m, a, b;
    const char *path = file("m.gguf");
    if (!make(&m, cfg, 7) || write_gguf(path, &m, mixed) || !load_both(path, WEIGHTS_Q8, &a, &b)) {
        CHECK(0);
        return;
    }
    CHECK(a.packed && b.packed && b.packed_as == WEIGHTS_Q8);
    CHECK_EQ_INT(differing(&a, &b, WEIGHTS_Q8), 0);
    CHECK_EQ_INT(a.packed_verbatim, 0);
    CHECK_EQ_INT(b.packed_verbatim, want_verbatim);
    char da[160], db[160], want[64];
    snprintf(want, sizeof want, "; %d of %d matrices from the file's Q8_0 blocks)", want_verbatim,
             N_MATS * cfg->n_layers + 1);
    printf("# %s\n", model_weights_describe(&b, db, sizeof db));
    CHECK(strstr(db, want) != NULL);
    CHECK(strstr(model_weights_describe(&a, da, sizeof da), "matrices") == NULL);
    model_free(&m), model_free(&a), model_free(&b);
}

static void test_same_bytes(void) {
    check_same("llama Q8_0 (Q/K permuted, its own LM head): every packed byte as widening and requantizing gives",
               &llama_cfg, false, 15);
    model_config qwen = llama_cfg;
    qwen.arch = ARCH_QWEN2, qwen.qkv_bias = true, qwen.tied_embeddings = true;
    check_same("qwen2 Q8_0 tied: the same bytes; the head, a copy of the embeddings, is packed from their floats",
               &qwen, false, 14);
    model_config narrow = llama_cfg;
    narrow.vocab_size = 4;
    check_same("an LM head too narrow to pack in its own place is packed from its floats into its copy", &narrow,
               false, 14);
    check_same("a GGUF mixing F16 matrices in: the F16 ones (permuted wk among them) widen as before, the same bytes",
               &llama_cfg, true, 12);
}

/* Halves every quant of each block and doubles its scale: values the
 * quantizer would not write (max |q| 63), each exactly representable. */
static void halve_quants(unsigned char *b, size_t len, const void *unused) {
    (void)unused;
    for (size_t at = 0; at + 34 <= len; at += 34) {
        uint16_t d = (uint16_t)(b[at] | b[at + 1] << 8);
        d = (uint16_t)(d + 0x0400); /* exponent + 1: d * 2 for a normal d */
        b[at] = (unsigned char)(d & 0xFF), b[at + 1] = (unsigned char)(d >> 8);
        for (int i = 0; i < 32; i++) b[at + 2 + i] = (unsigned char)((int8_t)b[at + 2 + i] / 2);
    }
}

static void test_any_blocks(void) {
    TEST("blocks no quantizer wrote (max |q| 63): the file's values exactly, where widening rounds them again");
    model m, a, b, f;
    const char *path = file("halved.gguf");
    gerr e = {0};
    if (!make(&m, &llama_cfg, 9) || write_gguf(path, &m, false) ||
        !edit_tensor(path, "blk.0.attn_q.weight", halve_quants, NULL) || !load_both(path, WEIGHTS_Q8, &a, &b)) {
        CHECK(0);
        return;
    }
    CHECK_EQ_INT(model_load(&f, path, &e), 0); /* the file's values as float32, Q rows unpermuted */
    int n, k;
    const void *wq = packed_matrix(&b, 0, 0, &n, &k);
    float *back = xmalloc((size_t)n * k * sizeof *back);
    q8w_unpack(back, wq, n, k);
    CHECK(!memcmp(back, f.w.wq, (size_t)n * k * sizeof *back));
    CHECK_EQ_INT(differing(&a, &b, WEIGHTS_Q8), 1); /* that matrix alone */
    CHECK(memcmp(packed_matrix(&a, 0, 0, &n, &k), wq, q8w_bytes(n, k)) != 0);
    CHECK_EQ_INT(b.packed_verbatim, 15);
    free(back);
    model_free(&m), model_free(&a), model_free(&b), model_free(&f);
}

static void test_any_blocks_frozen(void) {
    TEST("a frozen q8 base (grpo-update --base-weights q8) of blocks no quantizer wrote: the file's blocks byte for "
         "byte, the file's values, never quantized again");
    model m, b, f;
    lora l;
    bool adapter;
    const char *path = file("halved-frozen.gguf");
    gerr e = {0};
    if (!make(&m, &llama_cfg, 9) || write_gguf(path, &m, false) ||
        !edit_tensor(path, "blk.0.attn_q.weight", halve_quants, NULL) ||
        model_load_adapter_frozen(path, WEIGHTS_Q8, &b, &l, &adapter, &e)) {
        printf("# %s\n", e.msg);
        CHECK(0);
        return;
    }
    CHECK(b.packed && b.packed_frozen && b.packed_as == WEIGHTS_Q8 && !adapter);
    CHECK_EQ_INT(model_load(&f, path, &e), 0); /* the file's values as float32, Q rows unpermuted */
    int values = 0;
    for (int layer = 0; layer < llama_cfg.n_layers; layer++)
        for (int i = 0; i < N_MATS; i++) {
            int n, k;
            const void *got = packed_matrix(&b, i, layer, &n, &k);
            float *back = xmalloc((size_t)n * k * sizeof *back);
            q8w_unpack(back, got, n, k);
            values += !memcmp(back, packed_matrix(&f, i, layer, &n, &k), (size_t)n * k * sizeof *back);
            free(back);
        }
    printf("# %d of %d matrices the file's values, %d from its blocks\n", values, N_MATS * llama_cfg.n_layers,
           b.packed_verbatim);
    CHECK_EQ_INT(values, N_MATS * llama_cfg.n_layers);
    CHECK(b.packed_verbatim >= N_MATS * llama_cfg.n_layers);
    model_free(&m), model_free(&b), model_free(&f);
}

/* Block 5 of the tensor gets scale `scale` (f16 bits) and first quant q0. */
typedef struct {
    uint16_t scale;
    int8_t q0;
} bad_block;
static void spoil_block(unsigned char *b, size_t len, const void *ctx) {
    const bad_block *bad = ctx;
    if (len < 6 * 34) return;
    b[5 * 34] = (unsigned char)(bad->scale & 0xFF), b[5 * 34 + 1] = (unsigned char)(bad->scale >> 8);
    b[5 * 34 + 2] = (unsigned char)bad->q0;
}

static void test_nonfinite(void) {
    TEST("a block whose scale is infinite or NaN: the widening path's error, the same first value, word for word");
    model m;
    if (!make(&m, &llama_cfg, 11)) {
        CHECK(0);
        return;
    }
    const struct {
        uint16_t scale;
        int8_t q0;
        const char *is;
    } cases[] = {{0x7C00, -3, "value 160 is -inf"}, {0x7C00, 0, "value 160 is NaN"}, {0x7E01, 5, "value 160 is NaN"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *path = file("bad.gguf");
        const bad_block bad = {cases[i].scale, cases[i].q0};
        if (write_gguf(path, &m, false) || !edit_tensor(path, "blk.1.attn_k.weight", spoil_block, &bad)) {
            CHECK(0);
            continue;
        }
        model a, b;
        gerr ea = {0}, eb = {0};
        CHECK_EQ_INT(model_load(&a, path, &ea), EX_DATAERR);
        CHECK_EQ_INT(model_load_for_inference(&b, path, false, (weight_choice){.fmt = WEIGHTS_Q8}, &eb), EX_DATAERR);
        printf("# %s\n", eb.msg);
        CHECK_EQ_STR(eb.msg, ea.msg);
        CHECK(strstr(eb.msg, "tensor 'blk.1.attn_k.weight'") && strstr(eb.msg, cases[i].is));
    }
    model_free(&m);
}

static void test_other_formats(void) {
    TEST("f32 and bf16 from a Q8_0 GGUF: widened as before (no block taken as it is), the same bytes");
    model m;
    const char *path = file("q8_0.gguf");
    if (!make(&m, &llama_cfg, 13) || write_gguf(path, &m, false)) {
        CHECK(0);
        return;
    }
    for (weight_format fmt = WEIGHTS_F32; fmt <= WEIGHTS_BF16; fmt++) {
        model a, b;
        if (!load_both(path, fmt, &a, &b)) {
            CHECK(0);
            continue;
        }
        CHECK_EQ_INT(b.packed_verbatim, 0);
        CHECK_EQ_INT(a.packed, b.packed);
        if (a.packed) CHECK_EQ_INT(differing(&a, &b, fmt), 0);
        else CHECK(!memcmp(a.params_memory, b.params_memory, a.n_params * sizeof(float)));
        model_free(&a), model_free(&b);
    }
    model_free(&m);

    TEST("a shape q8 cannot hold (o_proj rows of 48): the widening path's error, naming the file; nothing held");
    model_config odd = llama_cfg;
    odd.head_dim = 12; /* q_dim 48: wo's rows are F16 in the file, the rest Q8_0 */
    gerr ea = {0}, eb = {0};
    model a, b;
    if (!make(&m, &odd, 15) || write_gguf(path, &m, false)) {
        CHECK(0);
        return;
    }
    CHECK_EQ_INT(model_load(&a, path, &ea), 0);
    CHECK_EQ_INT(model_pack_for_inference(&a, WEIGHTS_Q8, &ea), EX_DATAERR);
    CHECK_EQ_INT(model_load_for_inference(&b, path, false, (weight_choice){.fmt = WEIGHTS_Q8}, &eb), EX_DATAERR);
    printf("# %s\n", eb.msg);
    char want[sizeof ea.msg + 300];
    snprintf(want, sizeof want, "%s: %s", path, ea.msg);
    CHECK_EQ_STR(eb.msg, want);
    CHECK(b.params_memory == NULL);
    model_free(&a), model_free(&m);
}

/* Random Q4_K blocks over the tensor's bytes, d and dmin finite f16 near 2^-8 and 2^-7. */
static void random_q4k(unsigned char *b, size_t len, const void *ctx) {
    uint64_t st = *(const uint64_t *)ctx;
    for (size_t i = 0; i < len; i++) {
        st ^= st << 13, st ^= st >> 7, st ^= st << 17;
        b[i] = (unsigned char)(st >> 32);
    }
    for (size_t at = 0; at + Q4KW_GGUF_BYTES <= len; at += Q4KW_GGUF_BYTES)
        b[at + 1] = (unsigned char)(0x1C + (b[at + 1] & 3)), b[at + 3] = (unsigned char)(0x20 + (b[at + 3] & 3));
}

static void test_q4k_frozen(void) {
    TEST("a Q4_K GGUF as a frozen q4k base (grpo-update --base-weights q4k): every Q4_K matrix its file's blocks, "
         "byte for byte, never quantized again; an F16 one quantized; auto takes q4k");
    model_config cfg = llama_cfg;
    cfg.dim = 256, cfg.hidden_dim = 512, cfg.head_dim = 64;
    model m, b, f;
    lora l;
    bool adapter;
    gerr e = {0};
    const char *path = file("q4k.gguf");
    const uint64_t seeds[] = {0x9E3779B97F4A7C15ULL, 0xD1B54A32D192ED03ULL};
    /* blocks no quantizer wrote in layer 0's wq (Q rows permuted in the file) and layer 1's w_down */
    if (!make(&m, &cfg, 17) || write_gguf_as(path, &m, true, GGML_TYPE_Q4_K) ||
        !edit_tensor(path, "blk.0.attn_q.weight", random_q4k, &seeds[0]) ||
        !edit_tensor(path, "blk.1.ffn_down.weight", random_q4k, &seeds[1]) ||
        model_load_adapter_frozen(path, WEIGHTS_Q4K, &b, &l, &adapter, &e)) {
        printf("# %s\n", e.msg);
        CHECK(0);
        return;
    }
    CHECK(b.packed && b.packed_frozen && b.packed_as == WEIGHTS_Q4K && !adapter);
    /* layer 0's wk and layer 1's w_up are F16, the head F16; the token embeddings Q4_K */
    CHECK_EQ_INT(b.packed_verbatim, N_MATS * cfg.n_layers - 2 + 1);
    gguf_file g;
    CHECK_EQ_INT(gguf_open(&g, path, &e), 0);
    CHECK_EQ_INT(model_load(&f, path, &e), 0); /* the file's values as float32, Q/K rows unpermuted */
    int same = 0, values = 0;
    for (int layer = 0; layer < cfg.n_layers; layer++)
        for (int i = 0; i < N_MATS; i++) {
            int n, k;
            const void *got = packed_matrix(&b, i, layer, &n, &k);
            const float *want = packed_matrix(&f, i, layer, &n, &k);
            float *back = xmalloc((size_t)n * k * sizeof *back);
            q4kw_unpack(back, got, n, k);
            values += !memcmp(back, want, (size_t)n * k * sizeof *back);
            free(back);
            char name[64];
            static const char *const names[N_MATS] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up",
                                                      "ffn_down"};
            snprintf(name, sizeof name, "blk.%d.%s.weight", layer, names[i]);
            const gguf_tensor *t = gguf_find_tensor(&g, name);
            if (!t || t->type != GGML_TYPE_Q4_K) continue;
            /* the file's blocks (Q and K rows unpermuted, as the loader moves them) packed: the same bytes */
            unsigned char *rows = xmalloc(t->nbytes), *packed = xmalloc(q4kw_bytes(n, k));
            if (i <= 1) qk_unpermute_rows(rows, t->data, i == 0 ? cfg.n_heads : cfg.n_kv_heads, cfg.head_dim, t->nbytes / (size_t)n);
            else memcpy(rows, t->data, t->nbytes);
            q4kw_pack_gguf(packed, rows, n, k);
            same += !memcmp(packed, got, q4kw_bytes(n, k));
            free(rows), free(packed);
        }
    /* the embeddings too, read by the lookup from the file's blocks: the file's values */
    size_t ne = (size_t)cfg.vocab_size * cfg.dim;
    float *emb = xmalloc(ne * sizeof *emb);
    q4kw_unpack(emb, b.w.t[P_TOK_EMBD], cfg.vocab_size, cfg.dim);
    bool emb_same = !memcmp(emb, f.w.t[P_TOK_EMBD], ne * sizeof *emb);
    free(emb);
    printf("# %d of %d Q4_K matrices the file's blocks byte for byte, %d of %d matrices the file's values, the "
           "embeddings %s\n",
           same, b.packed_verbatim, values, N_MATS * cfg.n_layers, emb_same ? "the file's values" : "moved");
    CHECK_EQ_INT(same + 1, b.packed_verbatim);
    CHECK(emb_same);
    CHECK_EQ_INT(values, N_MATS * cfg.n_layers - 2); /* the F16 ones quantized by ours */
    char desc[160];
    printf("# %s\n", model_weights_describe(&b, desc, sizeof desc));
    CHECK(strstr(desc, "q4k frozen base") && strstr(desc, "; 13 of ") && strstr(desc, "matrices from the file's Q4_K blocks"));
    weight_format auto_fmt;
    CHECK(model_file_format(path, &auto_fmt, &e) == 0 && auto_fmt == WEIGHTS_Q4K);
    gguf_close(&g);
    model_free(&m), model_free(&b), model_free(&f);
}

/* Puts a NaN (f16 0x7E00) at value `at` of an F16 tensor. */
static void nan_at(unsigned char *b, size_t len, const void *ctx) {
    size_t at = *(const size_t *)ctx;
    if (2 * at + 1 < len) b[2 * at] = 0x00, b[2 * at + 1] = 0x7E;
}

/* dir as an HF directory of m: config.json and bf16 model.safetensors. */
static int write_hf(const char *dir_path, const model *m, gerr *e) {
    char config[300], weights[300];
    snprintf(config, sizeof config, "%s/config.json", dir_path);
    snprintf(weights, sizeof weights, "%s/model.safetensors", dir_path);
    if (mkdir(dir_path, 0755) && errno != EEXIST) return gerr_set(e, EX_CANTCREAT, "%s: %s", dir_path, strerror(errno));
    int rc = hf_write_config(config, m, file("big.gguf") /* a file: no source config.json */, "bfloat16", false, e);
    return rc ? rc : hf_write_weights(weights, m, EXPORT_BF16, e);
}

static void test_chunks(void) {
    TEST("matrices of more rows than the loader packs at a time (1,056), from F16 and Q8_0 GGUFs and BF16 safetensors, "
         "packed as they load "
         "(bf16, q8, q4k) and in place after a float32 load: every byte one whole weights_pack's");
    model_config cfg = qwen_like(1056);
    model m;
    if (!make(&m, &cfg, 17)) {
        CHECK(0);
        return;
    }
    const uint32_t types[] = {GGML_TYPE_F16, GGML_TYPE_Q8_0, GGML_TYPE_BF16 /* an HF directory's safetensors */};
    for (size_t t = 0; t < 3; t++) {
        const char *path = types[t] == GGML_TYPE_BF16 ? file("hf") : file("big.gguf");
        model f;
        gerr e = {0};
        int rc = types[t] == GGML_TYPE_BF16 ? write_hf(path, &m, &e) : write_gguf_as(path, &m, false, types[t]);
        if (rc || model_load(&f, path, &e)) {
            printf("# %s\n", e.msg);
            CHECK(0);
            continue;
        }
        for (weight_format fmt = WEIGHTS_BF16; fmt <= WEIGHTS_Q4K; fmt++) {
            if (fmt == WEIGHTS_MXFP4) continue;
            model a, b;
            if (!load_both(path, fmt, &a, &b)) {
                CHECK(0);
                continue;
            }
            int wrong = 0;
            for (int l = 0; l < cfg.n_layers; l++)
                for (int i = 0; i < N_MATS; i++) {
                    int n, k;
                    const void *pa = packed_matrix(&a, i, l, &n, &k), *pb = packed_matrix(&b, i, l, &n, &k);
                    const void *rows = packed_matrix(&f, i, l, &n, &k); /* f: float32 rows */
                    void *want = xmalloc(weights_packed_bytes(fmt, n, k));
                    weights_pack(fmt, want, rows, n, k);
                    wrong += memcmp(pa, want, weights_packed_bytes(fmt, n, k)) != 0;
                    if (!b.packed_verbatim) wrong += memcmp(pb, want, weights_packed_bytes(fmt, n, k)) != 0;
                    free(want);
                }
            printf("# %s from %s: %d of %d matrices differ\n", weight_format_name(fmt),
                   types[t] == GGML_TYPE_F16 ? "F16" : types[t] == GGML_TYPE_Q8_0 ? "Q8_0" : "BF16 safetensors", wrong,
                   2 * N_MATS * cfg.n_layers);
            CHECK_EQ_INT(wrong, 0);
            model_free(&a), model_free(&b);
        }
        model_free(&f);
    }

    TEST("a NaN in a later chunk of rows (row 1,040 of 1,056): the float32 load's error, its index, word for word");
    const char *path = file("big.gguf");
    size_t at = (size_t)1040 * cfg.dim + 3;
    if (write_gguf_as(path, &m, false, GGML_TYPE_F16) || !edit_tensor(path, "blk.1.ffn_up.weight", nan_at, &at)) {
        CHECK(0);
    } else {
        model a, b;
        gerr ea = {0}, eb = {0};
        CHECK_EQ_INT(model_load(&a, path, &ea), EX_DATAERR);
        CHECK_EQ_INT(model_load_for_inference(&b, path, false, (weight_choice){.fmt = WEIGHTS_BF16}, &eb), EX_DATAERR);
        printf("# %s\n", eb.msg);
        CHECK_EQ_STR(eb.msg, ea.msg);
        CHECK(strstr(eb.msg, "value 266243 is NaN") != NULL);
    }
    model_free(&m);
}

static void test_resident(void) {
    TEST("a packed matrix's float32 place past its packed bytes takes no memory, loaded from blocks or widened");
    model_config cfg = llama_cfg;
    cfg.dim = 256, cfg.hidden_dim = 512, cfg.head_dim = 64, cfg.vocab_size = 64;
    model m, a, b;
    const char *path = file("m.gguf");
    if (!make(&m, &cfg, 11) || write_gguf(path, &m, false) || !load_both(path, WEIGHTS_Q8, &a, &b)) {
        CHECK(0);
        return;
    }
    size_t f32 = (size_t)cfg.hidden_dim * cfg.dim * sizeof(float), q8 = weights_packed_bytes(WEIGHTS_Q8, cfg.hidden_dim, cfg.dim);
    for (int l = 0; l < cfg.n_layers; l++) {
        const model *both[2] = {&a, &b}; /* widened and packed in place; from the file's blocks */
        for (int k = 0; k < 2; k++) {
            const char *w = (const char *)model_layer_tensor(both[k], P_W_GATE, l);
            CHECK(resident_pages(w, q8) > 0);
            CHECK_EQ_INT(resident_pages(w + q8, f32 - q8), 0);
        }
    }
    /* what the plan says the model holds: every matrix at its packed size */
    pack_plan p;
    model_plan_packing(&b, (weight_choice){.fmt = WEIGHTS_Q8}, &p);
    size_t want = b.n_params * sizeof(float);
    for (int l = 0; l < cfg.n_layers; l++)
        for (int i = 0; i < N_MATS; i++) {
            int n, k;
            (void)packed_matrix(&b, i, l, &n, &k);
            want -= (size_t)n * k * sizeof(float) - weights_packed_bytes(WEIGHTS_Q8, n, k);
        }
    want -= (size_t)cfg.vocab_size * cfg.dim * sizeof(float) - weights_packed_bytes(WEIGHTS_Q8, cfg.vocab_size, cfg.dim);
    CHECK_EQ_INT((long long)model_resident_bytes(&b, &p), (long long)want);
    CHECK_EQ_INT((long long)model_resident_bytes(&b, NULL), (long long)(b.n_params * sizeof(float)));
    pack_plan_free(&p);
    model_free(&m), model_free(&a), model_free(&b);
}

int main(void) {
    if (!mkdtemp(dir)) {
        printf("# mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    test_same_bytes();
    test_any_blocks();
    test_nonfinite();
    test_other_formats();
    test_resident();
    test_chunks();
    test_any_blocks_frozen();
    test_q4k_frozen();
    const char *names[] = {"m.gguf", "halved.gguf", "bad.gguf", "q8_0.gguf", "big.gguf"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) unlink(file(names[i]));
    unlink(file("hf/config.json")), unlink(file("hf/model.safetensors")), rmdir(file("hf"));
    rmdir(dir);
    return check_done();
}
