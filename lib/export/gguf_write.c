/* The GGUF writer: metadata first (general.*, the architecture's keys as
 * llama.cpp reads them, the tokenizer's), then the tensor infos with
 * offsets planned up front, then each tensor's data converted a block of
 * rows at a time, so memory stays at one block however large the model.
 *
 * Layout (lib/model/gguf.h): "GGUF", u32 3, u64 tensor count, u64 KV count,
 * KVs, tensor infos (name, n_dims, dims innermost first, ggml type, offset
 * in the data section), zero padding to ALIGN, the data section with every
 * tensor starting at a multiple of ALIGN. */
#include "gguf_write.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../io/outstream.h"
#include "../ops/ops.h"
#include "../model/quant.h"
#include "gguf_meta.h"
#include "gguf_quant.h"
#include "gguf_tokmeta.h"

enum { ALIGN = 32, BLOCK_FLOATS = 1 << 18 /* rows converted per write: about 1 MiB of floats */ };

/* llama.cpp's LLAMA_FTYPE numbers (general.file_type). */
static uint32_t file_type(export_dtype d) {
    switch (d) {
    case EXPORT_F32: return 0;
    case EXPORT_F16: return 1;
    case EXPORT_Q8_0: return 7;
    case EXPORT_BF16: return 32;
    }
    return 0;
}

static uint32_t ggml_type(export_dtype d) {
    switch (d) {
    case EXPORT_F32: return GGML_TYPE_F32;
    case EXPORT_F16: return GGML_TYPE_F16;
    case EXPORT_Q8_0: return GGML_TYPE_Q8_0;
    case EXPORT_BF16: return GGML_TYPE_BF16;
    }
    return GGML_TYPE_F32;
}

/* One tensor of the file. */
typedef struct {
    char name[64];
    int64_t rows, cols; /* HF shape; cols 0 for a vector */
    const float *src;
    int perm_heads; /* > 0: Q/K rows go out in llama.cpp's interleaved order */
    uint32_t type;
    uint64_t offset, nbytes;
} plan_tensor;

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
    const char *arch = model_arch_name(c->arch);
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
#undef KEY
}

/* ---- the tensor plan ------------------------------------------------------------------ */

static void plan_add(plan_tensor *t, const char *name, int64_t rows, int64_t cols, const float *src, int perm,
                     export_dtype dtype) {
    snprintf(t->name, sizeof t->name, "%s", name);
    t->rows = rows;
    t->cols = cols;
    t->src = src;
    t->perm_heads = perm;
    /* vectors (norms, biases, rope factors) stay F32, as llama.cpp keeps
     * them; Q8_0 needs rows of whole 32-value blocks, else F16 (what
     * convert_hf_to_gguf.py falls back to) */
    t->type = cols ? ggml_type(dtype) : GGML_TYPE_F32;
    if (t->type == GGML_TYPE_Q8_0 && cols % Q8_0_BLOCK) t->type = GGML_TYPE_F16;
    t->nbytes = quant_row_bytes(t->type, (size_t)(cols ? cols : rows)) * (uint64_t)(cols ? rows : 1);
}

/* Tensors in llama.cpp's usual order: token_embd, rope_freqs, each block's
 * tensors, output_norm, output. Returns the count (at most refs + 1). */
static size_t make_plan(const model *m, const model_tensor_ref *refs, size_t n_refs, const float *factors,
                        export_dtype dtype, plan_tensor *plan) {
    size_t n = 0;
    bool llama = m->cfg.arch == ARCH_LLAMA;
    for (size_t i = 0; i < n_refs; i++)
        if (refs[i].param == P_TOK_EMBD)
            plan_add(&plan[n++], refs[i].gguf, refs[i].rows, refs[i].cols, refs[i].dst, 0, dtype);
    if (factors) plan_add(&plan[n++], "rope_freqs.weight", m->cfg.head_dim / 2, 0, factors, 0, dtype);
    for (int l = 0; l < m->cfg.n_layers; l++)
        for (size_t i = 0; i < n_refs; i++)
            if (refs[i].layer == l)
                /* llama.cpp permutes Q/K for the llama architecture only (the
                 * loader undoes exactly that) */
                plan_add(&plan[n++], refs[i].gguf, refs[i].rows, refs[i].cols, refs[i].dst,
                         llama ? refs[i].perm_heads : 0, dtype);
    for (int p = P_OUT_NORM; p <= P_LM_HEAD; p++)
        for (size_t i = 0; i < n_refs; i++)
            if (refs[i].param == p)
                plan_add(&plan[n++], refs[i].gguf, refs[i].rows, refs[i].cols, refs[i].dst, 0, dtype);
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        plan[i].offset = off;
        off += (plan[i].nbytes + ALIGN - 1) / ALIGN * ALIGN;
    }
    return n;
}

static void tensor_infos(strbuf *b, const plan_tensor *plan, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const plan_tensor *t = &plan[i];
        gmeta_gstr(b, t->name, strlen(t->name));
        if (t->cols) { /* dims innermost first: HF [rows, cols] is {cols, rows} */
            gmeta_le32(b, 2);
            gmeta_le64(b, (uint64_t)t->cols);
            gmeta_le64(b, (uint64_t)t->rows);
        } else {
            gmeta_le32(b, 1);
            gmeta_le64(b, (uint64_t)t->rows);
        }
        gmeta_le32(b, t->type);
        gmeta_le64(b, t->offset);
    }
}

/* ---- writing ------------------------------------------------------------------------ */

static int pad(outstream *o, uint64_t len, gerr *e) {
    static const char zeros[ALIGN];
    size_t n = (size_t)((ALIGN - len % ALIGN) % ALIGN);
    return n ? outstream_write(o, zeros, n, e) : 0;
}

/* Rows per converted chunk: one head when rows are permuted, else about
 * BLOCK_FLOATS values (at least one row). */
static size_t chunk_rows(const plan_tensor *t, int head_dim) {
    size_t cols = (size_t)(t->cols ? t->cols : 1);
    if (t->perm_heads) return (size_t)head_dim;
    return BLOCK_FLOATS / cols ? BLOCK_FLOATS / cols : 1;
}

/* Converts and writes one tensor, chunk by chunk. A vector counts as rows
 * of one value (a bias is permuted like a weight with one column); only
 * matrices are quantized, so Q8_0 chunks always hold whole rows. tmp and
 * out hold a chunk's floats and its bytes. */
static int write_tensor(outstream *o, const plan_tensor *t, int head_dim, float *tmp, unsigned char *out,
                        gerr *e) {
    size_t cols = (size_t)(t->cols ? t->cols : 1), rows = (size_t)t->rows, step = chunk_rows(t, head_dim);
    for (size_t r = 0; r < rows; r += step) {
        size_t nr = rows - r < step ? rows - r : step;
        const float *src = t->src + r * cols;
        if (t->perm_heads) {
            qk_permute(tmp, src, 1, head_dim, cols);
            src = tmp;
        }
        gguf_convert(t->type, src, out, nr * cols);
        int rc = outstream_write(o, out, quant_row_bytes(t->type, nr * cols), e);
        if (rc) return rc;
    }
    return pad(o, t->nbytes, e);
}

static int write_file(const char *out_path, const strbuf *head, const plan_tensor *plan, size_t n, int head_dim,
                      gerr *e) {
    size_t cap = 0;
    for (size_t i = 0; i < n; i++) {
        size_t c = chunk_rows(&plan[i], head_dim) * (size_t)(plan[i].cols ? plan[i].cols : 1);
        if (c > cap) cap = c;
    }
    float *tmp = malloc(cap * sizeof *tmp);
    unsigned char *bytes = malloc(cap * sizeof(float));
    if (!tmp || !bytes) {
        free(tmp);
        free(bytes);
        return gerr_set(e, EX_SOFTWARE, "%s: cannot allocate %zu MiB of conversion buffers", out_path,
                        cap * 2 * sizeof(float) >> 20);
    }
    outstream o;
    int rc = outstream_open(&o, out_path, 0, e);
    if (!rc) {
        rc = outstream_write(&o, head->data, head->len, e);
        if (!rc) rc = pad(&o, head->len, e);
        for (size_t i = 0; i < n && !rc; i++) rc = write_tensor(&o, &plan[i], head_dim, tmp, bytes, e);
        if (!rc) rc = outstream_commit(&o, e);
        else outstream_abort(&o);
    }
    free(tmp);
    free(bytes);
    return rc;
}

int gguf_export(const char *out_path, const model *m, const char *source, export_dtype dtype, gerr *e) {
    if (!out_path || !m || !m->params_memory)
        return gerr_set(e, EX_SOFTWARE, "gguf_export: no output path or no model");
    if ((unsigned)dtype > EXPORT_Q8_0) return gerr_set(e, EX_USAGE, "gguf_export: unknown dtype %d", (int)dtype);
    gguf_meta tok = {0}, meta = {0};
    char *name = NULL;
    int rc = gguf_tok_meta(&tok, &name, source, m->cfg.vocab_size, e);
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
    plan_tensor *plan = xcalloc(n_refs + 1, sizeof *plan);
    size_t n = make_plan(m, refs, n_refs, scaled ? factors : NULL, dtype, plan);

    strbuf head = {0};
    sb_append(&head, "GGUF", 4);
    gmeta_le32(&head, 3);
    gmeta_le64(&head, n);
    gmeta_le64(&head, meta.n);
    sb_append(&head, meta.b.data, meta.b.len);
    gmeta_free(&meta);
    tensor_infos(&head, plan, n);
    rc = write_file(out_path, &head, plan, n, m->cfg.head_dim, e);
    sb_free(&head);
    free(plan);
    free(refs);
    return rc;
}
