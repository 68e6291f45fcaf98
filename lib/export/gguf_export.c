/* grpo-export's GGUF: a model as a GGUF v3 file that llama.cpp loads,
 * written by lib/formats/gguf_write.h. This file adds what is the model's:
 * general.* and the architecture's keys as llama.cpp reads them, the
 * tokenizer's keys (gguf_tokmeta.h), the tensor plan in llama.cpp's order
 * with each tensor's type, RoPE scaling as rope_freqs.weight, and Q/K rows
 * permuted into GGUF's interleaved order as they are written. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ckpt/oss_experts.h"
#include "../formats/gguf_meta.h"
#include "../formats/gguf_quant.h"
#include "../formats/gguf_tokmeta.h"
#include "../formats/gguf_write.h"
#include "../formats/quant.h"
#include "../ops/ops.h"
#include "../ops/packed_q4k.h"
#include "export.h"

enum { ALIGN = GGUF_WRITE_ALIGN, BLOCK_FLOATS = 1 << 18 /* rows converted per write: about 1 MiB of floats */ };

/* llama.cpp's LLAMA_FTYPE numbers (general.file_type). */
static uint32_t file_type(export_dtype d) {
    switch (d) {
    case EXPORT_F32: return 0;
    case EXPORT_F16: return 1;
    case EXPORT_Q8_0: return 7;
    case EXPORT_Q4_K: return 14; /* mostly Q4_K (llama.cpp's Q4_K_S) */
    case EXPORT_BF16: return 32;
    }
    return 0;
}

static uint32_t ggml_type(export_dtype d) {
    switch (d) {
    case EXPORT_F32: return GGML_TYPE_F32;
    case EXPORT_F16: return GGML_TYPE_F16;
    case EXPORT_Q8_0: return GGML_TYPE_Q8_0;
    case EXPORT_Q4_K: return GGML_TYPE_Q4_K;
    case EXPORT_BF16: return GGML_TYPE_BF16;
    }
    return GGML_TYPE_F32;
}

export_dtype gguf_export_tensor_dtype(export_dtype dtype, int param, int64_t cols) {
    if (!cols || param == P_ROUTER) return EXPORT_F32;
    if (dtype == EXPORT_Q4_K && cols % Q4KW_K_SUPER) dtype = EXPORT_Q8_0;
    return dtype == EXPORT_Q8_0 && cols % Q8_0_BLOCK ? EXPORT_F16 : dtype;
}

bool gguf_export_mxfp4(const model *m, const model_tensor_ref *r, export_dtype dtype) {
    return dtype != EXPORT_F32 && experts_mxfp4_exact(m, r);
}

/* Where a tensor's rows come from. */
typedef struct {
    const float *src;
    int perm_heads; /* > 0: Q/K rows go out in llama.cpp's interleaved order */
} plan_src;

/* ---- rope_freqs ------------------------------------------------------------------ */

/* llama.cpp keeps llama3 RoPE scaling as per-frequency divisors
 * (rope_freqs.weight) and our loader divides the unscaled frequencies by
 * them, so each factor is the float that gives back m->inv_freq exactly
 * under that float division (base / inv, nudged by an ulp where rounding
 * misses). Returns false when the frequencies are the unscaled ones.
 * (A rope_theta that float32 cannot hold also gets factors, near 1, so the
 * round trip stays exact.) */
static bool rope_factors(const model *m, float *factors) {
    model_config c = m->cfg;
    c.rope_llama3 = false;
    c.rope_theta = (float)c.rope_theta; /* what the loader reads back from rope.freq_base */
    float base[512];
    rope_inv_freq(base, &c);
    int half = c.head_dim / 2;
    bool scaled = false;
    for (int i = 0; i < half; i++) scaled = scaled || base[i] != m->inv_freq[i];
    if (!scaled) return false;
    for (int i = 0; i < half; i++) {
        float want = m->inv_freq[i], f = base[i] / want;
        for (int k = 0; k < 8 && base[i] / f != want; k++) f = nextafterf(f, base[i] / f > want ? INFINITY : 0);
        factors[i] = f;
    }
    return true;
}

/* ---- metadata ----------------------------------------------------------------------- */

static void arch_meta(gguf_meta *meta, const model *m, const char *name, export_dtype dtype) {
    const model_config *c = &m->cfg;
    const char *arch = model_arch_gguf(c->arch);
    char key[128];
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", arch, suffix), key)
    gmeta_str(meta, "general.architecture", arch, strlen(arch));
    gmeta_str(meta, "general.name", name, strlen(name));
    gmeta_u32(meta, "general.file_type", file_type(dtype));
    gmeta_u32(meta, "general.quantization_version", 2); /* GGML_QNT_VERSION */
    gmeta_u32(meta, "general.alignment", ALIGN);
    gmeta_u32(meta, KEY("vocab_size"), (uint32_t)c->vocab_size);
    gmeta_u32(meta, KEY("context_length"), (uint32_t)c->max_seq_len);
    gmeta_u32(meta, KEY("embedding_length"), (uint32_t)c->dim);
    gmeta_u32(meta, KEY("block_count"), (uint32_t)c->n_layers);
    gmeta_u32(meta, KEY("feed_forward_length"), (uint32_t)c->hidden_dim);
    gmeta_u32(meta, KEY("attention.head_count"), (uint32_t)c->n_heads);
    gmeta_u32(meta, KEY("attention.head_count_kv"), (uint32_t)c->n_kv_heads);
    gmeta_u32(meta, KEY("attention.key_length"), (uint32_t)c->head_dim);
    gmeta_u32(meta, KEY("attention.value_length"), (uint32_t)c->head_dim);
    gmeta_u32(meta, KEY("rope.dimension_count"), (uint32_t)c->head_dim);
    gmeta_f32(meta, KEY("rope.freq_base"), (float)c->rope_theta);
    gmeta_f32(meta, KEY("attention.layer_norm_rms_epsilon"), c->norm_eps);
    if (c->n_experts > 0) {
        gmeta_u32(meta, KEY("expert_count"), (uint32_t)c->n_experts);
        gmeta_u32(meta, KEY("expert_used_count"), (uint32_t)c->n_experts_used);
        gmeta_u32(meta, KEY("expert_feed_forward_length"), (uint32_t)c->moe_hidden_dim);
    }
    if (c->arch != ARCH_GPT_OSS) return;
    /* the sliding layers: llama.cpp's default pattern (l % 2 < 1), else one
     * entry per layer (the layers past MODEL_MAX_DENSE_LAYERS are full in
     * both: llama.cpp's past an array's end) */
    int32_t swa[MODEL_MAX_DENSE_LAYERS];
    int n = c->n_layers < MODEL_MAX_DENSE_LAYERS ? c->n_layers : MODEL_MAX_DENSE_LAYERS;
    bool usual = n == c->n_layers;
    for (int l = 0; l < n; l++) {
        swa[l] = config_layer_window(c, l) > 0;
        usual = usual && swa[l] == (l % 2 < 1);
    }
    gmeta_u32(meta, KEY("attention.sliding_window"), (uint32_t)c->sliding_window);
    if (!usual) gmeta_arr_i32(meta, KEY("attention.sliding_window_pattern"), swa, (size_t)n);
    if (!c->rope_yarn) return;
    /* llama.cpp scales cos and sin by 0.1 ln(factor) + 1 (factor > 1) times attn_factor */
    double f = c->rope_factor, implied = f > 1 ? 0.1 * log(f) + 1 : 1;
    gmeta_str(meta, KEY("rope.scaling.type"), "yarn", 4);
    gmeta_f32(meta, KEY("rope.scaling.factor"), (float)f);
    gmeta_u32(meta, KEY("rope.scaling.original_context_length"), (uint32_t)c->rope_original_max_pos);
    if ((float)(c->rope_attn_factor / implied) != 1.0f)
        gmeta_f32(meta, KEY("rope.scaling.attn_factor"), (float)(c->rope_attn_factor / implied));
    gmeta_f32(meta, KEY("rope.scaling.yarn_beta_fast"), (float)c->rope_beta_fast);
    gmeta_f32(meta, KEY("rope.scaling.yarn_beta_slow"), (float)c->rope_beta_slow);
#undef KEY
}

/* ---- the tensor plan ------------------------------------------------------------------ */

typedef struct {
    gguf_wtensor *t;
    plan_src *src;
    size_t n;
    int head_dim;
    progress *pg; /* not NULL: counts the tensors written */
} plan;

/* planes > 1: a layer's experts, the first one's place holding them all. */
static void plan_add(plan *p, const char *name, int param, int64_t rows, int64_t cols, int64_t planes,
                     const float *src, int perm, export_dtype dtype) {
    gguf_wtensor *t = &p->t[p->n];
    p->src[p->n++] = (plan_src){.src = src, .perm_heads = perm};
    snprintf(t->name, sizeof t->name, "%s", name);
    t->rows = rows;
    t->cols = cols;
    t->planes = planes;
    /* vectors (norms, biases, rope factors) stay F32, as llama.cpp keeps
     * them; Q4_K needs rows of whole 256-value super-blocks, else Q8_0;
     * Q8_0 needs rows of whole 32-value blocks, else F16 (what
     * convert_hf_to_gguf.py falls back to) */
    t->type = ggml_type(gguf_export_tensor_dtype(dtype, param, cols));
    /* one head at a time when rows are permuted, else about BLOCK_FLOATS
     * values (at least one row) */
    size_t c = (size_t)(cols ? cols : 1);
    t->chunk_rows = perm ? (size_t)p->head_dim : BLOCK_FLOATS / c ? BLOCK_FLOATS / c : 1;
}

/* Tensors in llama.cpp's usual order: token_embd, rope_freqs, each block's
 * tensors (a layer's experts one tensor each of gate, up and down; MXFP4
 * where gguf_export_mxfp4 says so), output_norm, output (at most refs + 1). */
static void make_plan(const model *m, const model_tensor_ref *refs, size_t n_refs, const float *factors,
                      export_dtype dtype, plan *p) {
    bool llama = m->cfg.arch == ARCH_LLAMA;
    for (size_t i = 0; i < n_refs; i++)
        if (refs[i].param == P_TOK_EMBD)
            plan_add(p, refs[i].gguf, refs[i].param, refs[i].rows, refs[i].cols, 1, refs[i].dst, 0, dtype);
    if (factors) plan_add(p, "rope_freqs.weight", -1, m->cfg.head_dim / 2, 0, 1, factors, 0, dtype);
    for (int l = 0; l < m->cfg.n_layers; l++)
        for (size_t i = 0; i < n_refs; i++)
            if (refs[i].layer == l && refs[i].expert <= 0) {
                /* llama.cpp permutes Q/K for the llama architecture only (the
                 * loader undoes exactly that) */
                plan_add(p, refs[i].gguf, refs[i].param, refs[i].rows, refs[i].cols,
                         refs[i].expert == 0 ? m->cfg.n_experts : 1, refs[i].dst, llama ? refs[i].perm_heads : 0,
                         dtype);
                if (gguf_export_mxfp4(m, &refs[i], dtype)) p->t[p->n - 1].type = GGML_TYPE_MXFP4;
            }
    for (int q = P_OUT_NORM; q <= P_LM_HEAD; q++)
        for (size_t i = 0; i < n_refs; i++)
            if (refs[i].param == q)
                plan_add(p, refs[i].gguf, refs[i].param, refs[i].rows, refs[i].cols, 1, refs[i].dst, 0, dtype);
}

/* What llama.cpp's gpt-oss computes beyond what its keys say: the clamp at
 * 7, YaRN's betas 32 and 1, a sliding layer (it asserts one), an output
 * tensor of its own. */
static int check_llama_oss(const model_config *c, const char *source, gerr *e) {
    const char *why = NULL;
    bool sliding = false;
    for (int l = 0; l < c->n_layers; l++) sliding = sliding || config_layer_window(c, l) > 0;
    if (c->swiglu_limit != 7.0f) why = "its SwiGLU clamp is not llama.cpp's 7";
    else if (c->rope_yarn && (c->rope_beta_fast != 32 || c->rope_beta_slow != 1))
        why = "its YaRN betas are not llama.cpp's 32 and 1";
    else if (!sliding) why = "it has no sliding layer, which llama.cpp's gpt-oss needs";
    else if (c->tied_embeddings) why = "its LM head is tied, and llama.cpp's gpt-oss needs output.weight";
    if (!why) return 0;
    return gerr_set(e, EX_DATAERR, "%s: %s: no GGUF", source, why);
}

/* What llama.cpp's qwen3moe and gpt-oss compute: every layer sparse, the
 * top k renormalised (its graph's norm_w; gpt-oss's softmax over the k).
 * Another mixture has no GGUF. */
static int check_llama_moe(const model *m, const char *source, gerr *e) {
    const model_config *c = &m->cfg;
    if (c->arch == ARCH_GPT_OSS) return check_llama_oss(c, source, e);
    if (c->n_experts <= 0 || (c->moe_norm_topk && !config_ffn_layers(c, false))) return 0;
    return gerr_set(e, EX_DATAERR,
                    "%s: llama.cpp's qwen3moe renormalises the top-k weights and has no dense FFN layers; this model "
                    "(norm_topk_prob %s, dense FFN layers %d) would compute otherwise there: no GGUF",
                    source, c->moe_norm_topk ? "true" : "false", config_ffn_layers(c, false));
}

/* gguf_write's source: rows straight from the model, Q/K ones (a chunk is
 * one head) permuted into tmp. A bias is permuted like a weight with one
 * column. */
static const float *plan_rows(void *ctx, size_t i, size_t row, size_t n, float *tmp) {
    const plan *p = ctx;
    const gguf_wtensor *t = &p->t[i];
    size_t cols = (size_t)(t->cols ? t->cols : 1);
    const float *src = p->src[i].src + row * cols;
    (void)n;
    if (p->pg && row == 0) progress_update(p->pg, (int64_t)i); /* tensor i begun: i written */
    if (!p->src[i].perm_heads) return src;
    qk_permute(tmp, src, 1, p->head_dim, cols);
    return tmp;
}

int gguf_export(const char *out_path, const model *m, const char *source, export_dtype dtype, gerr *e) {
    return gguf_export_progress(out_path, m, source, dtype, NULL, e);
}

int gguf_export_progress(const char *out_path, const model *m, const char *source, export_dtype dtype, progress *pg,
                         gerr *e) {
    if (!out_path || !m || !m->params_memory)
        return gerr_set(e, EX_SOFTWARE, "gguf_export: no output path or no model");
    if ((unsigned)dtype > EXPORT_Q4_K) return gerr_set(e, EX_USAGE, "gguf_export: unknown dtype %d", (int)dtype);
    int rc = check_llama_moe(m, source, e);
    if (rc) return rc;
    gguf_meta tok = {0}, meta = {0};
    char *name = NULL;
    rc = gguf_tok_meta(&tok, &name, source, m->cfg.vocab_size, e);
    if (rc) {
        gmeta_free(&tok);
        return rc;
    }
    arch_meta(&meta, m, name, dtype);
    free(name);
    sb_append(&meta.b, tok.b.data, tok.b.len);
    meta.n += tok.n;
    gmeta_free(&tok);

    size_t n_refs = model_tensor_list(m, NULL);
    model_tensor_ref *refs = xcalloc(n_refs, sizeof *refs);
    model_tensor_list(m, refs);
    float factors[512];
    bool scaled = rope_factors(m, factors);
    plan p = {.t = xcalloc(n_refs + 1, sizeof *p.t), .src = xcalloc(n_refs + 1, sizeof *p.src),
              .head_dim = m->cfg.head_dim, .pg = pg};
    make_plan(m, refs, n_refs, scaled ? factors : NULL, dtype, &p);
    if (pg) pg->total = (int64_t)p.n;
    rc = gguf_write(out_path, &meta, p.t, p.n, plan_rows, &p, e);
    if (!rc && pg) progress_update(pg, (int64_t)p.n);
    gmeta_free(&meta);
    free(p.t);
    free(p.src);
    free(refs);
    return rc;
}
