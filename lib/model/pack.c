/* Packing a model's weights for inference (model.h): the plan, decided
 * once from the config and the format, and the packing that follows it. */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <sysexits.h>

#include "../ops/ops.h"
#include "../ops/packed.h"
#include "../ops/packed_bf16.h"
#include "../ops/packed_bf16_kernels.h"
#include "../ops/packed_isa.h"
#include "../ops/packed_q4k.h"
#include "../ops/packed_q8.h"
#include "../util/bigmem.h"
#include "model.h"

/* The matrices packed in their own place: the layers' (an expert's each in
 * its own; the router stays float32 rows, its product is small). */
static bool layer_matrix(int param) {
    return param == P_WQ || param == P_WK || param == P_WV || param == P_WO || param == P_W_GATE || param == P_W_UP ||
           param == P_W_DOWN || param == P_EXP_GATE || param == P_EXP_UP || param == P_EXP_DOWN;
}

static bool expert_matrix(int param) { return param == P_EXP_GATE || param == P_EXP_UP || param == P_EXP_DOWN; }

/* How many matrices a packed model holds packed (the LM head counted, and
 * a frozen base's embeddings apart from a head not tied to them). */
static int packed_matrices(const model *m) {
    const model_config *c = &m->cfg;
    int n = (m->w.lm_head ? 1 : 0) + (m->held[P_TOK_EMBD] == HOLD_PACKED && m->w.lm_head != m->w.tok_embd ? 1 : 0);
    for (int p = 0; p < MODEL_N_PARAMS; p++)
        if (layer_matrix(p) && m->w.t[p])
            n += model_param_layers(c, p) * (expert_matrix(p) ? c->n_experts : 1);
    return n;
}

/* Why fmt's kernel cannot take an input width of k (NULL: it can). */
static const char *unpackable(weight_format fmt, int k) {
    if (fmt == WEIGHTS_Q8 && (k % Q8W_K_BLOCK || k > Q8W_MAX_K))
        return "8-bit blocks need input widths that are multiples of 32 (at most 65536)";
    if (fmt == WEIGHTS_Q4K && k % Q4KW_K_SUB) return "4-bit k-quant blocks need input widths that are multiples of 32";
    if (fmt == WEIGHTS_BF16 && k > BF16W_MAX_K) return "bf16 panels need input widths of at most 65536";
    return NULL;
}

/* W [n, k] packed fits in W's own place: float32 panels need whole panels;
 * bf16 and q8 fit whenever the padding is smaller than what they save. */
static bool fits_in_place(weight_format fmt, int n, int k) {
    if (fmt == WEIGHTS_F32) return n % PACKED_NR == 0;
    return weights_packed_bytes(fmt, n, k) <= (size_t)n * k * sizeof(float);
}

/* Rows of W packed at a time, when packing in place or from the loader's
 * floats: whole panels of every format (32 columns the widest), a few MB. */
enum { CHUNK_ROWS = 1024 };
_Static_assert(CHUNK_ROWS % PACKED_NR == 0 && CHUNK_ROWS % BF16W_NR == 0 && CHUNK_ROWS % Q8W_NR == 0 &&
                   CHUNK_ROWS % Q4KW_NR == 0,
               "a chunk is whole panels");

/* The rows of W [n, *]'s chunk from row a. */
static int chunk_rows(int n, int a) { return n - a < CHUNK_ROWS ? n - a : CHUNK_ROWS; }

/* The bytes a chunk of W [n, k] takes packed: the scratch pack_in_place needs. */
static size_t chunk_bytes(weight_format fmt, int n, int k) { return weights_packed_bytes(fmt, chunk_rows(n, 0), k); }

/* W [n, k] rewritten in format fmt in its own place, CHUNK_ROWS rows at a
 * time packed into tmp (chunk_bytes of it) and copied to their place, which
 * ends before the rows not yet read (fits_in_place, whole panels). */
static void pack_in_place(weight_format fmt, float *w, void *tmp, int n, int k) {
    for (int a = 0; a < n; a += CHUNK_ROWS) {
        int rows = chunk_rows(n, a);
        weights_pack(fmt, tmp, w + (size_t)a * k, rows, k);
        memcpy((unsigned char *)w + weights_packed_bytes(fmt, a, k), tmp, weights_packed_bytes(fmt, rows, k));
    }
}

/* A buffer the plan keeps across tensors, grown as needed (NULL: no memory). */
static void *plan_scratch(pack_plan *p, size_t bytes) {
    if (bytes > p->scratch_cap) {
        free(p->scratch);
        p->scratch = malloc(bytes);
        p->scratch_cap = p->scratch ? bytes : 0;
    }
    return p->scratch;
}

const char *weight_format_name(weight_format fmt) {
    return fmt == WEIGHTS_BF16    ? "bf16"
           : fmt == WEIGHTS_Q8    ? "q8"
           : fmt == WEIGHTS_MXFP4 ? "mxfp4"
           : fmt == WEIGHTS_Q4K   ? "q4k"
                                  : "f32";
}

static const char *isa_name(void) {
    return packed_isa_best() == PACKED_AVX512 ? "AVX-512" : packed_isa_best() == PACKED_AVX2 ? "AVX2" : "portable";
}

/* "; attention bf16, embeddings q8, LM head q8" for an mxfp4 frozen base
 * that holds matrices besides its experts packed (as the file holds them),
 * into buf; "" when it holds none. */
static const char *file_formats_describe(const model *m, char *buf, size_t size) {
    static const struct {
        int param;
        const char *name;
    } shown[] = {{P_WQ, "attention"}, {P_TOK_EMBD, "embeddings"}, {P_LM_HEAD, "LM head"}};
    size_t at = 0;
    buf[0] = 0;
    bool any = false;
    for (int i = 0; i < MODEL_N_PARAMS; i++) any |= !expert_matrix(i) && m->held[i] == HOLD_PACKED;
    for (size_t i = 0; any && i < sizeof shown / sizeof *shown && at < size; i++) {
        int p = shown[i].param;
        if (!m->w.t[p]) continue;
        at += (size_t)snprintf(buf + at, size - at, "%s%s %s", at ? ", " : "; ", shown[i].name,
                               weight_format_name(m->held[p] == HOLD_PACKED ? m->held_as[p] : WEIGHTS_F32));
    }
    return buf;
}

static const char *kernel_describe(const model *m, char *buf, size_t size) {
    if (m->packed && m->packed_frozen) { /* matmul_forward_frozen: float32 activations on the packed matrices */
        char formats[96];
        snprintf(buf, size, "%s frozen base (float32 activations, %s kernel%s%s", weight_format_name(m->packed_as),
                 isa_name(), m->adapter ? "; LoRA adapter unmerged" : "",
                 m->packed_as == WEIGHTS_MXFP4 ? file_formats_describe(m, formats, sizeof formats) : "");
        return buf;
    }
    if (!m->packed || m->held[P_WQ] == HOLD_ROWS) return "f32 (row-major, OpenBLAS";
    switch (m->packed_as) {
    case WEIGHTS_BF16:
        return !strcmp(bf16w_kernel(), "avx512bf16") ? "bf16 (AVX512-BF16 kernel"
               : !strcmp(bf16w_kernel(), "avx512f") ? "bf16 (emulated on AVX-512F"
               : !strcmp(bf16w_kernel(), "avx2")    ? "bf16 (emulated on AVX2"
                                                    : "bf16 (portable kernel";
    case WEIGHTS_Q8:
        return q8w_kernel_used() == Q8W_VNNI ? "q8 (AVX-512 VNNI kernel"
               : q8w_kernel_used() == Q8W_AVX2 ? "q8 (AVX2 kernel"
                                               : "q8 (portable kernel";
    case WEIGHTS_Q4K:
        return packed_isa_best() == PACKED_AVX512 ? "q4k (AVX-512 kernel"
               : packed_isa_best() == PACKED_AVX2 ? "q4k (AVX2 kernel"
                                                  : "q4k (portable kernel";
    default: return !strcmp(packed_kernel(), "avx2") ? "f32 (packed AVX2 kernel" : "f32 (packed AVX-512 kernel";
    }
}

const char *model_weights_describe(const model *m, char *buf, size_t size) {
    bool mx = m->packed && m->held_as[P_EXP_GATE] == WEIGHTS_MXFP4 && m->held[P_EXP_GATE] == HOLD_PACKED;
    char frozen[192];
    int at = snprintf(buf, size, "%s", kernel_describe(m, frozen, sizeof frozen));
    if (mx && m->packed_as != WEIGHTS_MXFP4 && at >= 0 && (size_t)at < size)
        at += snprintf(buf + at, size - (size_t)at, "; experts mxfp4, %s kernel", isa_name());
    bool q8 = false; /* an mxfp4 frozen base's Q8_0 matrices, the file's blocks too */
    for (int i = 0; mx && i < MODEL_N_PARAMS; i++) q8 |= m->held[i] == HOLD_PACKED && m->held_as[i] == WEIGHTS_Q8;
    if (m->packed && m->packed_verbatim && at >= 0 && (size_t)at < size)
        snprintf(buf + at, size - (size_t)at, "; %d of %d matrices from the file's %s blocks)", m->packed_verbatim,
                 packed_matrices(m),
                 mx ? (q8 ? "MXFP4 and Q8_0" : "MXFP4")
                 : m->packed_as == WEIGHTS_Q8  ? "Q8_0"
                 : m->packed_as == WEIGHTS_Q4K ? "Q4_K"
                                               : "own");
    else if (at >= 0 && (size_t)at < size)
        snprintf(buf + at, size - (size_t)at, ")");
    return buf;
}

/* Whether fmt packs the layer matrices of refs (the experts apart when
 * they stay MXFP4, mx): false for f32 without its kernel or whole panels
 * (OpenBLAS then runs the row-major weights), and for a shape bf16 or q8
 * cannot hold, which *why (EX_DATAERR) names. */
static bool packs_matrices(const model_tensor_ref *refs, size_t n, weight_format fmt, bool mx, gerr *why) {
    if (fmt == WEIGHTS_F32 && !packed_supported()) return false;
    for (size_t i = 0; i < n; i++) {
        const model_tensor_ref *r = &refs[i];
        if (!layer_matrix(r->param) || (mx && expert_matrix(r->param))) continue;
        const char *no = unpackable(fmt, (int)r->cols);
        if (!no && !fits_in_place(fmt, (int)r->rows, (int)r->cols)) {
            if (fmt == WEIGHTS_F32) return false;
            no = "a matrix too narrow to pack in its own place";
        }
        if (no) {
            gerr_set(why, EX_DATAERR, "%s weights: %s (%s is %d x %d)", weight_format_name(fmt), no,
                     model_param_name(r->param), (int)r->rows, (int)r->cols);
            return false;
        }
    }
    return true;
}

/* Whether the plan keeps m's experts MXFP4 as w asks; *why (EX_USAGE or
 * EX_DATAERR) when w insists on it and m cannot. */
static bool keeps_mxfp4(const model *m, const model_tensor_ref *refs, size_t n, weight_choice w, gerr *why) {
    if (w.fmt != WEIGHTS_MXFP4 && !(w.keep_mxfp4 && m->experts_mxfp4)) return false;
    if (!m->experts_mxfp4) {
        gerr_set(why, EX_USAGE, "mxfp4 weights: the model's experts were not loaded from MXFP4 blocks (gpt-oss's "
                                "Hugging Face _blocks and _scales); choose auto, f32, bf16 or q8");
        return false;
    }
    for (size_t i = 0; i < n; i++)
        if (expert_matrix(refs[i].param) && !fits_in_place(WEIGHTS_MXFP4, (int)refs[i].rows, (int)refs[i].cols)) {
            gerr_set(why, EX_DATAERR, "mxfp4 weights: a matrix too narrow to pack in its own place (%s is %d x %d)",
                     model_param_name(refs[i].param), (int)refs[i].rows, (int)refs[i].cols);
            return false;
        }
    return true;
}

/* Whether fmt holds W [n, k] in its own place: an input width its kernel
 * takes, and bytes that fit in the float32 rows' place. */
static bool holds_in_place(weight_format fmt, int n, int k) { return !unpackable(fmt, k) && fits_in_place(fmt, n, k); }

/* An mxfp4 frozen base's matrices besides its MXFP4 experts, the
 * embeddings and the LM head among them, as the file holds them
 * (m->file_as): bf16 panels where they are bf16 (exact: a bf16 value
 * rounds to itself), q8 blocks where they are Q8_0 (the loader writes the
 * file's blocks as they are), else, and where the format cannot hold a
 * shape, float32 rows; the router stays float32 rows. The values are the
 * file's in every case. */
static void plan_file_formats(const model *m, const model_tensor_ref *refs, size_t n, pack_plan *p) {
    for (int i = 0; i < MODEL_N_PARAMS; i++) {
        weight_format f = m->file_as[i];
        if (!m->w.t[i] || expert_matrix(i) || (f != WEIGHTS_BF16 && f != WEIGHTS_Q8) ||
            !(layer_matrix(i) || i == P_TOK_EMBD || i == P_LM_HEAD))
            continue;
        bool ok = true;
        for (size_t j = 0; j < n && ok; j++)
            if (refs[j].param == i) ok = holds_in_place(f, (int)refs[j].rows, (int)refs[j].cols);
        if (ok) p->hold[i] = HOLD_PACKED, p->as[i] = f;
    }
    if (m->w.lm_head && m->w.lm_head == m->w.tok_embd) /* tied: the embeddings', packed once */
        p->hold[P_LM_HEAD] = p->hold[P_TOK_EMBD], p->as[P_LM_HEAD] = p->as[P_TOK_EMBD];
}

/* A frozen base's embeddings and LM head: packed in the plan's format in
 * their own place (a tied head is the embeddings, packed once) where its
 * layer matrices are packed and the format holds them, so the base is
 * packed whole; float32 rows where its matrices stay rows (f32). An mxfp4
 * base (mx: its experts kept MXFP4, p->fmt then says so) holds them, as
 * its other matrices, as the file does (plan_file_formats). */
static void plan_frozen_globals(const model *m, const model_tensor_ref *refs, size_t n, pack_plan *p, bool mx) {
    p->frozen = true;
    p->hold[P_LM_HEAD] = HOLD_ROWS;
    if (p->refused.code) return;
    if (mx) {
        p->fmt = WEIGHTS_MXFP4;
        plan_file_formats(m, refs, n, p);
        return;
    }
    int V = m->cfg.vocab_size, d = m->cfg.dim;
    if (p->hold[P_WQ] != HOLD_PACKED || p->fmt == WEIGHTS_F32 || !holds_in_place(p->fmt, V, d)) return;
    p->hold[P_TOK_EMBD] = HOLD_PACKED;
    if (m->w.lm_head) p->hold[P_LM_HEAD] = HOLD_PACKED; /* tied: m->w.lm_head is the embeddings' place */
}

void model_plan_packing(const model *m, weight_choice w, pack_plan *p) {
    memset(p, 0, sizeof *p);
    weight_format fmt = w.fmt == WEIGHTS_MXFP4 || w.on_device ? WEIGHTS_F32 : w.fmt;
    p->fmt = fmt;
    p->n_tensors = model_tensor_list(m, NULL);
    model_tensor_ref *refs = xcalloc(p->n_tensors, sizeof *refs);
    model_tensor_list(m, refs);
    p->verbatim = xcalloc(p->n_tensors, sizeof *p->verbatim);
    p->early = xcalloc(p->n_tensors, sizeof *p->early);
    for (int i = 0; i < MODEL_N_PARAMS; i++) p->as[i] = fmt;
    bool mx = keeps_mxfp4(m, refs, p->n_tensors, w, &p->refused);
    /* a frozen base's float32 matrices stay rows: no float32 panels' transposed
     * product; a device's stay rows for its weight_upload */
    bool rows = (w.frozen && fmt == WEIGHTS_F32) || w.on_device;
    if (!p->refused.code && !rows && packs_matrices(refs, p->n_tensors, fmt, mx, &p->refused)) {
        for (int i = 0; i < MODEL_N_PARAMS; i++)
            if (layer_matrix(i)) p->hold[i] = HOLD_PACKED;
        /* the LM head in its own place when it is untied and fits there */
        bool own = m->w.lm_head && m->w.lm_head != m->w.tok_embd;
        if (m->w.lm_head)
            p->hold[P_LM_HEAD] =
                own && fits_in_place(fmt, m->cfg.vocab_size, m->cfg.dim) ? HOLD_PACKED : HOLD_PACKED_COPY;
    }
    for (int i = 0; mx && !p->refused.code && i < MODEL_N_PARAMS; i++)
        if (expert_matrix(i)) p->hold[i] = HOLD_PACKED, p->as[i] = WEIGHTS_MXFP4;
    p->pack_early = w.pack_early;
    if (w.frozen && !w.on_device) /* the head's product on its packed or float32 rows */
        plan_frozen_globals(m, refs, p->n_tensors, p, rows && mx);
    else if (rows && mx && !p->refused.code)
        p->fmt = WEIGHTS_MXFP4;
    free(refs);
}

void pack_plan_free(pack_plan *p) {
    free(p->verbatim);
    free(p->early);
    free(p->scratch);
    memset(p, 0, sizeof *p);
}

/* Whether any matrix is packed under p. */
static bool packs_any(const pack_plan *p) {
    for (int i = 0; i < MODEL_N_PARAMS; i++)
        if (p->hold[i] != HOLD_ROWS) return true;
    return false;
}

/* The whole pages of W [n, k]'s float32 place past its packed bytes back
 * to the system (a failed madvise only keeps them). */
static void release_tail(void *w, weight_format fmt, int n, int k) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)w + weights_packed_bytes(fmt, n, k) + page - 1) / page * page;
    uintptr_t hi = ((uintptr_t)w + (size_t)n * k * sizeof(float)) / page * page;
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

size_t model_resident_bytes(const model *m, const pack_plan *p) {
    size_t bytes = m->n_params * sizeof(float);
    if (!p || p->refused.code) return bytes;
    model_tensor_ref *refs = xcalloc(p->n_tensors, sizeof *refs);
    model_tensor_list(m, refs);
    for (size_t i = 0; i < p->n_tensors; i++) {
        int rows = (int)refs[i].rows, cols = (int)refs[i].cols;
        if (p->hold[refs[i].param] == HOLD_PACKED)
            bytes -= (size_t)rows * cols * sizeof(float) - weights_packed_bytes(p->as[refs[i].param], rows, cols);
    }
    if (p->hold[P_LM_HEAD] == HOLD_PACKED_COPY)
        bytes += weights_packed_bytes(p->fmt, m->cfg.vocab_size, m->cfg.dim);
    free(refs);
    return bytes;
}

int model_fits_memory(const model *m, const pack_plan *p, gerr *e) {
    size_t bytes = model_resident_bytes(m, p);
    if (big_fits(bytes)) return 0;
    return gerr_set(e, EX_SOFTWARE, "cannot allocate %zu MiB for the model's parameters", bytes >> 20);
}

bool model_packs_loaded(const pack_plan *p, size_t i, const model_tensor_ref *r) {
    return p->pack_early && !p->refused.code && p->hold[r->param] == HOLD_PACKED && !p->verbatim[i] && !p->early[i] &&
           p->as[r->param] != WEIGHTS_MXFP4;
}

int model_pack_loaded(pack_plan *p, size_t i, const model_tensor_ref *r, gerr *e) {
    if (!model_packs_loaded(p, i, r)) return 0;
    weight_format fmt = p->as[r->param];
    void *tmp = plan_scratch(p, chunk_bytes(fmt, (int)r->rows, (int)r->cols));
    if (!tmp) return gerr_set(e, EX_SOFTWARE, "out of memory packing the weights");
    pack_in_place(fmt, r->dst, tmp, (int)r->rows, (int)r->cols);
    release_tail(r->dst, fmt, (int)r->rows, (int)r->cols);
    p->early[i] = true;
    return 0;
}

int model_pack_rows(pack_plan *p, size_t i, const model_tensor_ref *r, pack_rows_fn fill, void *ctx, gerr *e) {
    assert(model_packs_loaded(p, i, r));
    weight_format fmt = p->as[r->param];
    int n = (int)r->rows, k = (int)r->cols;
    float *x = plan_scratch(p, (size_t)chunk_rows(n, 0) * k * sizeof *x);
    if (!x) return gerr_set(e, EX_SOFTWARE, "out of memory packing the weights");
    big_will_fill(r->dst, weights_packed_bytes(fmt, n, k));
    for (int a = 0; a < n; a += CHUNK_ROWS) {
        int rows = chunk_rows(n, a);
        int rc = fill(ctx, a, rows, x, e);
        if (rc) return rc;
        weights_pack(fmt, (unsigned char *)r->dst + weights_packed_bytes(fmt, a, k), x, rows, k);
    }
    p->early[i] = true;
    return 0;
}

int model_pack(model *m, const pack_plan *p, gerr *e) {
    if (m->packed) return 0;
    if (p->refused.code) return gerr_set(e, p->refused.code, "%s", p->refused.msg);
    if (!packs_any(p)) return 0; /* nothing to pack */
    const model_config *c = &m->cfg;
    model_tensor_ref *refs = xcalloc(p->n_tensors, sizeof *refs);
    model_tensor_list(m, refs);
    size_t biggest = 0;
    int verbatim = 0;
    for (size_t i = 0; i < p->n_tensors; i++) {
        if (p->hold[refs[i].param] != HOLD_PACKED) continue;
        if (p->verbatim[i]) verbatim++;
        else if (p->early[i]) continue;
        else if (p->as[refs[i].param] == WEIGHTS_MXFP4) biggest = SIZE_MAX; /* MXFP4 comes from blocks only */
        else {
            size_t bytes = chunk_bytes(p->as[refs[i].param], (int)refs[i].rows, (int)refs[i].cols);
            biggest = bytes > biggest ? bytes : biggest;
        }
    }
    if (biggest == SIZE_MAX) {
        free(refs);
        return gerr_set(e, EX_USAGE, "mxfp4 weights: the experts were not written from the file's MXFP4 blocks");
    }
    bool head_copy = p->hold[P_LM_HEAD] == HOLD_PACKED_COPY;
    void *tmp = biggest ? malloc(biggest) : NULL;
    void *head = head_copy ? malloc(weights_packed_bytes(p->fmt, c->vocab_size, c->dim)) : NULL;
    if ((biggest && !tmp) || (head_copy && !head)) {
        free(tmp), free(head), free(refs);
        return gerr_set(e, EX_SOFTWARE, "out of memory packing the weights");
    }
    for (size_t i = 0; i < p->n_tensors; i++) {
        const model_tensor_ref *r = &refs[i];
        if (p->hold[r->param] != HOLD_PACKED || p->early[i]) continue; /* early: model_pack_loaded's, done */
        if (!p->verbatim[i]) pack_in_place(p->as[r->param], r->dst, tmp, (int)r->rows, (int)r->cols);
        release_tail(r->dst, p->as[r->param], (int)r->rows, (int)r->cols);
    }
    if (p->hold[P_LM_HEAD] == HOLD_PACKED) {
        m->head_packed = m->w.lm_head;
    } else if (head_copy) {
        weights_pack(p->fmt, head, m->w.lm_head, c->vocab_size, c->dim);
        m->head_packed = m->head_packed_own = head;
    }
    free(tmp), free(refs);
    m->packed = true;
    m->packed_as = p->fmt;
    memcpy(m->held, p->hold, sizeof m->held);
    memcpy(m->held_as, p->as, sizeof m->held_as);
    m->packed_verbatim = verbatim;
    m->packed_frozen = p->frozen;
    return 0;
}

int model_pack_for_inference(model *m, weight_format fmt, gerr *e) {
    if (m->packed) return 0;
    pack_plan p;
    model_plan_packing(m, (weight_choice){.fmt = fmt}, &p);
    int rc = model_pack(m, &p, e);
    pack_plan_free(&p);
    return rc;
}

int model_pack_frozen(model *m, weight_format fmt, gerr *e) {
    if (fmt == WEIGHTS_F32 || m->packed) return 0;
    pack_plan p;
    model_plan_packing(m, (weight_choice){.fmt = fmt, .frozen = true}, &p);
    int rc = model_pack(m, &p, e);
    pack_plan_free(&p);
    return rc;
}

int model_round_frozen(model *m, weight_format fmt, const pack_plan *loaded, gerr *e) {
    if (fmt == WEIGHTS_F32 || fmt == WEIGHTS_MXFP4) return 0; /* float32's values, or the file's MXFP4 ones */
    pack_plan p;
    model_plan_packing(m, (weight_choice){.fmt = fmt, .frozen = true}, &p);
    int rc = p.refused.code ? gerr_set(e, p.refused.code, "%s", p.refused.msg) : 0;
    model_tensor_ref *refs = xcalloc(p.n_tensors, sizeof *refs);
    model_tensor_list(m, refs);
    void *tmp = NULL;
    size_t cap = 0;
    for (size_t i = 0; i < p.n_tensors && !rc; i++) {
        const model_tensor_ref *r = &refs[i];
        if (p.hold[r->param] != HOLD_PACKED) continue; /* model_pack_frozen's: the embeddings and head too */
        size_t n = (size_t)r->rows * (size_t)r->cols;
        /* the file's blocks, written in place by the loader: their values as they are */
        bool blocks = loaded && i < loaded->n_tensors && loaded->verbatim[i] && loaded->as[r->param] == fmt;
        if (fmt == WEIGHTS_BF16 && !blocks) {
            for (size_t j = 0; j < n; j++) {
                uint32_t bits = (uint32_t)bf16w_round(r->dst[j]) << 16;
                memcpy(&r->dst[j], &bits, sizeof bits);
            }
            continue;
        }
        size_t bytes = weights_packed_bytes(fmt, (int)r->rows, (int)r->cols);
        if (bytes > cap) free(tmp), tmp = xmalloc(cap = bytes);
        if (blocks) memcpy(tmp, r->dst, bytes);
        else weights_pack(fmt, tmp, r->dst, (int)r->rows, (int)r->cols);
        weights_unpack(fmt, r->dst, tmp, (int)r->rows, (int)r->cols);
    }
    free(tmp), free(refs);
    pack_plan_free(&p);
    return rc;
}
