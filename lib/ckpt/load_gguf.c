/* Loading a GGUF file: the config from its metadata, every tensor
 * dequantized to float32 into the model's one buffer, and llama-arch Q/K
 * rows put back in Hugging Face's rotate-half order. Loaded for inference
 * in a weight format (load.h's model_load_for_inference), a matrix the
 * packing plan packs in its own place and the file stores in that format's
 * own blocks is written packed instead, straight from the file's blocks
 * (Q8_0 for q8; Q4_K for q4k; MXFP4 experts, gpt-oss's as llama.cpp's
 * converter keeps them, for mxfp4: packed_mxfp4.h).
 *
 * GGUF dims are innermost first, so HF's [rows, cols] is dims {cols, rows};
 * a layer's experts are one tensor of dims {cols, rows, n_experts}, whose
 * slices are the experts' matrices one after the other as in our buffer.
 * llama.cpp's convert script permutes Q and K (weights and biases) of the
 * llama architecture for its interleaved-pair RoPE; qwen2/qwen3 use NEOX
 * (rotate-half) RoPE in llama.cpp and are stored unpermuted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../formats/gguf.h"
#include "../formats/quant.h"
#include "../io/mapped.h"
#include "../model/model.h"
#include "../ops/ops.h"
#include "../ops/packed_mxfp4.h"
#include "../ops/packed_q4k.h"
#include "../util/bigmem.h"
#include "declared.h"
#include "file_formats.h"
#include "gguf_config.h"
#include "load.h"

/* A buffer reused across tensors, grown as needed. */
typedef struct {
    void *p;
    size_t cap;
} scratch;

static void *scratch_get(scratch *s, size_t bytes) {
    if (bytes > s->cap) {
        free(s->p);
        s->p = xmalloc(bytes);
        s->cap = bytes;
    }
    return s->p;
}

static const gguf_tensor *find_tensor(const gguf_file *f, const model_tensor_ref *r, int n_experts, gerr *e) {
    const gguf_tensor *t = gguf_find_tensor(f, r->gguf);
    if (!t) {
        gerr_set(e, EX_DATAERR, "%s: tensor %s is missing", f->name, r->gguf);
        return NULL;
    }
    /* the expected dims, innermost first: a matrix {cols, rows}, a vector
     * {rows}, then the layer's experts when it is an expert's */
    uint64_t want[3] = {(uint64_t)(r->cols ? r->cols : r->rows), (uint64_t)r->rows, (uint64_t)n_experts};
    int ndim = r->cols ? 2 : 1;
    if (r->expert >= 0) want[ndim++] = (uint64_t)n_experts;
    bool ok = t->n_dims == ndim;
    for (int d = 0; d < ndim && ok; d++) ok = t->dims[d] == want[d];
    if (!ok) {
        char got[96] = "", exp[96] = "";
        for (int d = 0; d < t->n_dims && d < 4; d++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%llu", d ? ", " : "", (unsigned long long)t->dims[d]);
        for (int d = 0; d < ndim; d++)
            snprintf(exp + strlen(exp), sizeof exp - strlen(exp), "%s%llu", d ? ", " : "", (unsigned long long)want[d]);
        gerr_set(e, EX_DATAERR, "%s: tensor %s has dims [%s], expected [%s]", f->name, r->gguf, got, exp);
        return NULL;
    }
    return t;
}

static bool permuted(const model *m, const model_tensor_ref *r) {
    return m->cfg.arch == ARCH_LLAMA && r->perm_heads > 0;
}

/* An MXFP4 tensor's blocks (every expert's, rows of {cols, rows[, E]})
 * all taken (packed_mxfp4.h's mx4w_block_fault), else EX_DATAERR naming
 * the first refused block; 0 for any other type. */
static int check_mxfp4(const gguf_file *f, const gguf_tensor *t, gerr *e) {
    if (t->type != GGML_TYPE_MXFP4) return 0;
    uint64_t nb = t->dims[0] / MX4W_K_BLOCK, rows = t->n_dims > 1 ? t->dims[1] : 1;
    const unsigned char *b = t->data;
    for (uint64_t i = 0; i < t->numel / MX4W_K_BLOCK; i++, b += MX4W_GGUF_BYTES) {
        const char *why = mx4w_block_fault(b[0], b + 1);
        if (!why) continue;
        char expert[48] = "";
        if (t->n_dims > 2) snprintf(expert, sizeof expert, "expert %llu, ", (unsigned long long)(i / nb / rows));
        return gerr_set(e, EX_DATAERR, "%s: tensor %s: %srow %llu, block %llu: scale byte %d %s", f->name, t->name,
                        expert, (unsigned long long)(i / nb % rows), (unsigned long long)(i % nb), b[0], why);
    }
    return 0;
}

/* A Q4_K tensor's blocks all taken (packed_q4k.h's q4kw_block_fault: the
 * values the float32 load would refuse as not finite), else EX_DATAERR
 * naming the first refused block. */
static int check_q4k(const gguf_file *f, const gguf_tensor *t, gerr *e) {
    uint64_t nb = t->dims[0] / Q4KW_K_SUPER;
    const unsigned char *b = t->data;
    for (uint64_t i = 0; i < t->numel / Q4KW_K_SUPER; i++, b += Q4KW_GGUF_BYTES) {
        const char *why = q4kw_block_fault(b);
        if (why)
            return gerr_set(e, EX_DATAERR, "%s: tensor %s: row %llu, block %llu %s", f->name, t->name,
                            (unsigned long long)(i / nb), (unsigned long long)(i % nb), why);
    }
    return 0;
}

/* The tensor as float32 into r->dst. */
static int load_floats(model *m, const gguf_file *f, const gguf_tensor *t, const model_tensor_ref *r, scratch *tmp,
                       gerr *e) {
    int rc = check_mxfp4(f, t, e);
    if (rc) return rc;
    big_will_fill(r->dst, t->numel * sizeof *r->dst);
    if (!permuted(m, r)) return gguf_tensor_to_f32_finite(f, t, r->dst, e);
    float *gg = scratch_get(tmp, t->numel * sizeof *gg);
    rc = gguf_tensor_to_f32_finite(f, t, gg, e);
    if (rc) return rc;
    qk_unpermute(r->dst, gg, r->perm_heads, m->cfg.head_dim, r->cols ? (size_t)r->cols : 1);
    return 0;
}

/* model_pack_rows' source: rows of a GGUF tensor, checked finite. */
typedef struct {
    const gguf_file *f;
    const gguf_tensor *t;
} tensor_rows;

static int fill_rows(void *ctx, int row0, int rows, float *out, gerr *e) {
    const tensor_rows *src = ctx;
    return gguf_tensor_rows_to_f32_finite(src->f, src->t, (uint64_t)row0, (uint64_t)rows, out, e);
}

/* Whether tensor i (r) is packed from the file's rows a chunk at a time
 * (model_pack_rows): one the plan packs as it loads, neither an expert's
 * slice nor Q/K rows to un-permute (those are packed once whole). */
static bool packs_rows(const model *m, const pack_plan *plan, size_t i, const model_tensor_ref *r) {
    return plan && r->expert < 0 && !permuted(m, r) && model_packs_loaded(plan, i, r);
}

/* The matrix packed in fmt into r->dst straight from its blocks (whole
 * rows of blocks move in the Q/K un-permutation, as their floats would;
 * an expert's are its slice of its layer's tensor), checked as their
 * floats would be: Q8_0 finite from its scales, MXFP4 by check_mxfp4, Q4_K
 * by check_q4k (the types weights_takes_blocks takes). */
static int load_packed(model *m, const gguf_file *f, const gguf_tensor *t, const model_tensor_ref *r,
                       weight_format fmt, scratch *tmp, gerr *e) {
    int rc = r->expert > 0                       ? 0 /* every slice checked with the first */
             : t->type == GGML_TYPE_MXFP4 ? check_mxfp4(f, t, e)
             : t->type == GGML_TYPE_Q4_K  ? check_q4k(f, t, e)
                                          : gguf_q8_0_check_finite(f, t, e);
    if (rc) return rc;
    const void *rows = t->data;
    if (r->expert >= 0) rows = (const char *)t->data + (size_t)r->expert * (t->nbytes / (size_t)m->cfg.n_experts);
    if (permuted(m, r)) {
        void *hf = scratch_get(tmp, t->nbytes);
        qk_unpermute_rows(hf, t->data, r->perm_heads, m->cfg.head_dim, t->nbytes / (size_t)r->rows);
        rows = hf;
    }
    big_will_fill(r->dst, weights_packed_bytes(fmt, (int)r->rows, (int)r->cols));
    weights_pack_blocks(fmt, r->dst, rows, NULL, (int)r->rows, (int)r->cols);
    return 0;
}

/* llama.cpp keeps llama3-style RoPE scaling as a tensor of per-frequency
 * divisors (rope_freqs.weight, [head_dim/2]) instead of metadata. */
static int load_rope_freqs(model *m, const gguf_file *f, gerr *e) {
    const gguf_tensor *t = gguf_find_tensor(f, "rope_freqs.weight");
    if (!t) return 0;
    int half = m->cfg.head_dim / 2;
    if (t->numel != (uint64_t)half)
        return gerr_set(e, EX_DATAERR, "%s: tensor rope_freqs.weight has %llu values, expected %d", f->name,
                        (unsigned long long)t->numel, half);
    float factors[512];
    int rc = gguf_tensor_to_f32(f, t, factors, e);
    if (rc) return rc;
    for (int i = 0; i < half; i++) {
        if (!(factors[i] > 0))
            return gerr_set(e, EX_DATAERR, "%s: tensor rope_freqs.weight: factor %d is not positive", f->name, i);
        m->inv_freq[i] /= factors[i];
    }
    return 0;
}

/* Whether plan takes tensor r as the file's blocks t: it packs r in its
 * own place, in a format that takes t's blocks as they are. */
static bool takes_verbatim(const pack_plan *plan, const model_tensor_ref *r, const gguf_tensor *t) {
    /* a frozen base's too: its Q8_0, Q4_K and MXFP4 matrices stay the
     * file's blocks, the model it trains (model_round_frozen widens them for
     * a merge: a quantizer would not give every block back) */
    return plan && plan->hold[r->param] == HOLD_PACKED && weights_takes_blocks(plan->as[r->param], t->type);
}

/* The file's pages of t that a load read, out of this process's memory
 * (map_drop): expert `expert`'s slice of n_experts, or all of t (expert
 * -1), so that the file's pages are not held beside the model. */
static void drop_read(const gguf_file *f, const gguf_tensor *t, int expert, int n_experts) {
    if (!f->map) return; /* caller memory, not a mapping */
    size_t slice = expert < 0 ? t->nbytes : t->nbytes / (size_t)n_experts;
    map_drop((const char *)t->data + (size_t)(expert < 0 ? 0 : expert) * slice, slice);
}

/* Every tensor, as float32 or, where plan (NULL: none) takes its blocks,
 * packed and marked verbatim. */
static int load_tensors(model *m, const gguf_file *f, pack_plan *plan, gerr *e) {
    size_t n = model_tensor_list(m, NULL);
    model_tensor_ref *refs = xcalloc(n, sizeof *refs);
    model_tensor_list(m, refs);
    scratch tmp = {0};
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        const gguf_tensor *t = find_tensor(f, &refs[i], m->cfg.n_experts, e);
        if (!t) {
            rc = EX_DATAERR;
        } else if (takes_verbatim(plan, &refs[i], t)) {
            plan->verbatim[i] = !(rc = load_packed(m, f, t, &refs[i], plan->as[refs[i].param], &tmp, e));
            if (!rc) drop_read(f, t, refs[i].expert, m->cfg.n_experts);
        } else if (packs_rows(m, plan, i, &refs[i])) {
            tensor_rows src = {f, t};
            rc = check_mxfp4(f, t, e);
            if (!rc) rc = model_pack_rows(plan, i, &refs[i], fill_rows, &src, e);
            if (!rc) drop_read(f, t, -1, 1);
        } else if (refs[i].expert <= 0) { /* the first expert's place takes the layer's every expert */
            rc = load_floats(m, f, t, &refs[i], &tmp, e);
            if (!rc) drop_read(f, t, -1, 1);
        }
        if (!rc && plan) rc = model_pack_loaded(plan, i, &refs[i], e); /* an expert's once its floats are in */
    }
    free(tmp.p);
    free(refs);
    return rc;
}

/* The format the file holds matrix r in (file_formats.h): MXFP4 experts
 * (a gpt-oss as llama.cpp's converter writes one), Q8_0 and BF16 matrices
 * as such, anything else float32's. */
static weight_format tensor_format(const model_tensor_ref *r, const void *src) {
    const gguf_tensor *t = gguf_find_tensor(src, r->gguf);
    uint32_t type = t ? t->type : GGML_TYPE_F32;
    return type == GGML_TYPE_MXFP4  ? WEIGHTS_MXFP4
           : type == GGML_TYPE_Q8_0 ? WEIGHTS_Q8
           : type == GGML_TYPE_BF16 ? WEIGHTS_BF16
                                    : WEIGHTS_F32;
}

int model_gguf_format(const char *path, weight_format *fmt, gerr *e) {
    *fmt = WEIGHTS_F32;
    gguf_file f;
    int rc = gguf_open(&f, path, e);
    if (rc) return rc;
    const gguf_tensor *ex = gguf_find_tensor(&f, "blk.0.ffn_gate_exps.weight");
    const gguf_tensor *q = gguf_find_tensor(&f, "blk.0.attn_q.weight");
    if (ex && ex->type == GGML_TYPE_MXFP4) *fmt = WEIGHTS_MXFP4;
    else if (q && q->type == GGML_TYPE_Q8_0) *fmt = WEIGHTS_Q8;
    else if (q && q->type == GGML_TYPE_Q4_K) *fmt = WEIGHTS_Q4K;
    else if (q && q->type == GGML_TYPE_BF16) *fmt = WEIGHTS_BF16;
    gguf_close(&f);
    return 0;
}

int model_load_gguf(model *m, const char *path, const weight_choice *w, pack_plan *plan, gerr *e) {
    gguf_file f;
    int rc = gguf_open(&f, path, e);
    if (rc) return rc;
    bool planned = false;
    if (!(rc = config_load_gguf(&m->cfg, &f, e)) && !(rc = model_check_declared_gguf(&m->cfg, &f, e)) &&
        !(rc = model_alloc(m, e)) && !(rc = load_rope_freqs(m, &f, e))) {
        if (w) model_note_file_formats(m, tensor_format, &f), model_plan_packing(m, *w, plan), planned = true;
        rc = model_fits_memory(m, planned ? plan : NULL, e);
        if (!rc) rc = load_tensors(m, &f, planned ? plan : NULL, e);
    }
    gguf_close(&f);
    if (rc && planned) pack_plan_free(plan);
    return rc;
}
