/* model_to_backend: the inference forward's weights copied once into a
 * device backend's memory, matrices in its own format (model.h), a
 * mixture's MXFP4 experts and a frozen base's packed matrices as their
 * blocks. */
#include <stdlib.h>
#include <string.h>

#include "layer.h"

void model_dev_free(model *m) {
    model_dev *d = m->dev;
    if (!d) return;
    for (size_t i = 0; i < d->n_owned; i++) d->be->mem_free(d->owned[i]);
    free(d->owned);
    free(d->layers);
    free(d);
    m->dev = NULL;
}

static int keep(model_dev *d, void *p) {
    d->owned[d->n_owned++] = p;
    return 0;
}

/* An fp32 vector (norm weights, biases, sinks, the embeddings) as it is. */
static int put_vector(model_dev *d, float **dst, const float *src, size_t n, gerr *e) {
    void *p;
    int rc = d->be->mem_alloc(&p, n * sizeof(float), e);
    if (rc) return rc;
    keep(d, p);
    *dst = p;
    return d->be->mem_upload(p, src, n * sizeof(float), e);
}

/* A weight matrix [rows, cols] in the backend's format (a stack of
 * experts' matrices is one, model_expert_weight slicing it). */
static int put_matrix(model_dev *d, float **dst, const float *src, size_t rows, size_t cols, gerr *e) {
    int rc = d->be->weight_upload(dst, src, rows, cols, e);
    return rc ? rc : keep(d, *dst);
}

/* n matrices [rows, cols] packed in fmt, each in its own float32 place on
 * the host (model_pack's: a layer's experts, or one matrix), one after
 * another on the device. */
static int put_packed(model_dev *d, float **dst, const float *src, weight_format fmt, int n, size_t rows, size_t cols,
                      gerr *e) {
    size_t bytes = weights_packed_bytes(fmt, (int)rows, (int)cols);
    void *p;
    int rc = d->be->mem_alloc(&p, (size_t)n * bytes, e);
    if (rc) return rc;
    keep(d, p);
    *dst = p;
    for (int x = 0; x < n && !rc; x++)
        rc = d->be->mem_upload((char *)p + (size_t)x * bytes, src + (size_t)x * rows * cols, bytes, e);
    return rc;
}

const float *model_expert_weight(const model *m, int param, const float *w, int x, int rows, int cols) {
    size_t n = (size_t)rows * cols;
    if (!m->dev) return w + (size_t)x * n; /* float32 rows, or each packed in its own place */
    if (m->held[param] == HOLD_PACKED)     /* put_packed's */
        return (const float *)(const void *)((const char *)(const void *)w +
                                             (size_t)x * weights_packed_bytes(m->held_as[param], rows, cols));
    return backend_weight_rows(m->dev->be, w, (size_t)x * rows, (size_t)cols);
}

/* Every tensor the forward reads on the device: where its copy's pointer
 * is kept, its host floats (NULL: the model or the layer has none, or a
 * frozen base's tied head, the embeddings' blocks), its kind and shape (a
 * vector: rows floats, kept in fp32; a matrix [rows, cols] in the backend's
 * format; n matrices [rows, cols] packed in fmt, as model_pack held them: a
 * layer's experts, or a frozen base's matrix). Returns the count (3 + 24
 * per layer); fills out when not NULL. */
typedef enum { DEV_VECTOR, DEV_MATRIX, DEV_PACKED } dev_kind;
typedef struct {
    float **dst;
    const float *src;
    dev_kind kind;
    size_t rows, cols;
    int n;
    weight_format fmt;
} dev_tensor;

static size_t dev_tensors(const model *m, model_dev *d, dev_tensor *out) {
    const model_config *c = &m->cfg;
    size_t L = (size_t)c->n_layers, d_ = (size_t)c->dim, hd = (size_t)c->head_dim, hid = (size_t)c->hidden_dim;
    size_t qd = (size_t)c->n_heads * hd, kvd = (size_t)c->n_kv_heads * hd, V = (size_t)c->vocab_size, n = 0;
    size_t E = (size_t)c->n_experts, I = (size_t)c->moe_hidden_dim;
#define PUT(d_ptr, s_ptr, r, k)                                                                                      \
    (out ? (void)(out[n] = (dev_tensor){(d_ptr), (s_ptr), (k) ? DEV_MATRIX : DEV_VECTOR, (r), (k), 0, WEIGHTS_F32}) \
         : (void)0,                                                                                                  \
     n++)
/* cnt matrices [r, k] of tensor param (a layer's experts, or one): a stack in
 * the backend's format, or each packed as model_pack held it */
#define HELD(d_ptr, s_ptr, param, cnt, r, k)                                                                         \
    (out ? (void)(out[n] = m->held[param] == HOLD_PACKED                                                             \
                               ? (dev_tensor){(d_ptr), (s_ptr), DEV_PACKED, (r), (k), (int)(cnt), m->held_as[param]}  \
                               : (dev_tensor){(d_ptr), (s_ptr), DEV_MATRIX, (cnt) * (r), (k), 0, WEIGHTS_F32})        \
         : (void)0,                                                                                                  \
     n++)
    if (m->held[P_TOK_EMBD] == HOLD_PACKED) /* a frozen base's */
        HELD(&d->tok_embd, m->w.tok_embd, P_TOK_EMBD, 1, V, d_);
    else
        PUT(&d->tok_embd, m->w.tok_embd, V * d_, 0);
    PUT(&d->out_norm, m->w.out_norm, d_, 0);
    /* a classifier has none; a frozen base's tied head is its embeddings' blocks (model_to_backend) */
    HELD(&d->lm_head, m->head_packed && m->w.lm_head == m->w.tok_embd ? NULL : m->w.lm_head, P_LM_HEAD, 1, V, d_);
    for (size_t l = 0; l < L; l++) {
        layer_params h = model_layer(&m->w, c, (int)l), *o = &d->layers[l];
        PUT(&o->attn_norm, h.attn_norm, d_, 0), PUT(&o->bq, h.bq, qd, 0), PUT(&o->bk, h.bk, kvd, 0);
        PUT(&o->bv, h.bv, kvd, 0), PUT(&o->q_norm, h.q_norm, hd, 0), PUT(&o->k_norm, h.k_norm, hd, 0);
        PUT(&o->sinks, h.sinks, (size_t)c->n_heads, 0), PUT(&o->bo, h.bo, d_, 0);
        PUT(&o->ffn_norm, h.ffn_norm, d_, 0), HELD(&o->wq, h.wq, P_WQ, 1, qd, d_);
        HELD(&o->wk, h.wk, P_WK, 1, kvd, d_), HELD(&o->wv, h.wv, P_WV, 1, kvd, d_), HELD(&o->wo, h.wo, P_WO, 1, d_, qd);
        HELD(&o->w_gate, h.w_gate, P_W_GATE, 1, hid, d_), HELD(&o->w_up, h.w_up, P_W_UP, 1, hid, d_);
        HELD(&o->w_down, h.w_down, P_W_DOWN, 1, d_, hid);
        PUT(&o->router, h.router, E, d_), PUT(&o->router_b, h.router_b, E, 0);
        HELD(&o->exp_gate, h.exp_gate, P_EXP_GATE, E, I, d_), HELD(&o->exp_up, h.exp_up, P_EXP_UP, E, I, d_);
        HELD(&o->exp_down, h.exp_down, P_EXP_DOWN, E, d_, I);
        PUT(&o->exp_gate_b, h.exp_gate_b, E * I, 0), PUT(&o->exp_up_b, h.exp_up_b, E * I, 0);
        PUT(&o->exp_down_b, h.exp_down_b, E * d_, 0);
    }
#undef HELD
#undef PUT
    return n;
}

/* Whether m's packing is one a device takes: none, a frozen base's
 * (refuse_options asks for its ops), or the experts alone in MXFP4
 * (model.h's weight_choice on_device) where be multiplies them. */
static bool takes_packing(const model *m, const backend *be) {
    if (!m->packed) return true;
    if (m->head_packed_own || m->adapter) return false;
    if (m->packed_frozen) return true;
    if (m->head_packed || !be->matmul_forward_packed) return false;
    for (int i = 0; i < MODEL_N_PARAMS; i++) {
        bool expert = i == P_EXP_GATE || i == P_EXP_UP || i == P_EXP_DOWN;
        if (m->held[i] != HOLD_ROWS && !(expert && m->held[i] == HOLD_PACKED && m->held_as[i] == WEIGHTS_MXFP4))
            return false;
    }
    return true;
}

/* The model's options be has no ops for: EX_USAGE naming them (0: none). */
static int refuse_options(const model *m, const backend *be, gerr *e) {
    const model_config *c = &m->cfg;
    if (c->n_experts > 0 &&
        (!be->moe_route_forward || !be->moe_route_replay_forward || !be->moe_group || !be->moe_combine_forward ||
         (c->swiglu_limit > 0 && !be->swiglu_clamped_forward)))
        return gerr_set(e, EX_USAGE, "--device %s: a mixture of experts (%s) runs on the CPU only (--device cpu)",
                        be->name, c->architecture);
    if (m->packed_frozen && (!be->matmul_forward_frozen || !be->matmul_backward_frozen ||
                             (m->held[P_TOK_EMBD] == HOLD_PACKED && !be->gather_rows_packed)))
        return gerr_set(e, EX_USAGE, "--device %s: a frozen base packed as %s trains on the CPU only (--device cpu, or "
                        "--base-weights f32)", be->name, weight_format_name(m->packed_as));
    if ((c->attn_sinks || c->sliding_window > 0) && !be->attention_sinks_backward)
        return gerr_set(e, EX_USAGE,
                        "--device %s: attention sinks and sliding windows (%s) run on the CPU only (--device cpu)",
                        be->name, c->architecture);
    return 0;
}

int model_to_backend(model *m, const backend *be, gerr *e) {
    if (!be->mem_alloc || !be->weight_upload)
        return gerr_set(e, EX_SOFTWARE, "backend %s keeps no memory of its own", be->name);
    if (!takes_packing(m, be)) return gerr_set(e, EX_SOFTWARE, "model_to_backend: the weights are packed for the CPU");
    int rc = refuse_options(m, be, e);
    if (rc) return rc;
    model_dev *d = xcalloc(1, sizeof *d);
    d->be = be;
    d->layers = xcalloc((size_t)m->cfg.n_layers, sizeof *d->layers);
    size_t n = dev_tensors(m, d, NULL);
    dev_tensor *t = xcalloc(n, sizeof *t);
    dev_tensors(m, d, t);
    d->owned = xcalloc(n, sizeof *d->owned);
    m->dev = d; /* model_dev_free undoes a partial copy */
    for (size_t i = 0; i < n && !rc; i++) {
        const dev_tensor *x = &t[i];
        if (!x->src) continue; /* left NULL */
        rc = x->kind == DEV_VECTOR   ? put_vector(d, x->dst, x->src, x->rows, e)
             : x->kind == DEV_MATRIX ? put_matrix(d, x->dst, x->src, x->rows, x->cols, e)
                                     : put_packed(d, x->dst, x->src, x->fmt, x->n, x->rows, x->cols, e);
    }
    free(t);
    if (!rc && m->head_packed && m->w.lm_head == m->w.tok_embd) d->lm_head = d->tok_embd; /* tied: uploaded once */
    if (!rc) rc = be->sync(e);
    if (rc) model_dev_free(m);
    return rc;
}

void model_dev_refresh(model *m, const float *params) {
    model_dev *d = m->dev;
    size_t n = dev_tensors(m, d, NULL);
    dev_tensor *t = xcalloc(n, sizeof *t);
    dev_tensors(m, d, t);
    for (size_t i = 0; i < n; i++) {
        const dev_tensor *x = &t[i];
        if (!x->src) continue;
        const float *src = params + (x->src - m->params_memory);
        if (x->kind == DEV_MATRIX)
            d->be->weight_refresh(*x->dst, src, x->rows, x->cols);
        else if (x->kind == DEV_VECTOR)
            d->be->mem_copy(*x->dst, src, x->rows * sizeof(float));
        /* packed matrices are a frozen base's, which no step changes */
    }
    free(t);
}
