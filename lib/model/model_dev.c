/* model_to_backend: the inference forward's weights copied once into a
 * device backend's memory, matrices in its own format (model.h). */
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

/* An fp32 vector (norm weights, biases, the embeddings) as it is. */
static int put_vector(model_dev *d, float **dst, const float *src, size_t n, gerr *e) {
    *dst = NULL;
    if (!src) return 0;
    void *p;
    int rc = d->be->mem_alloc(&p, n * sizeof(float), e);
    if (rc) return rc;
    keep(d, p);
    *dst = p;
    return d->be->mem_upload(p, src, n * sizeof(float), e);
}

/* A weight matrix [rows, cols] in the backend's format. */
static int put_matrix(model_dev *d, float **dst, const float *src, size_t rows, size_t cols, gerr *e) {
    int rc = d->be->weight_upload(dst, src, rows, cols, e);
    return rc ? rc : keep(d, *dst);
}

/* Every tensor the forward reads on the device: where its copy's pointer
 * is kept, its host floats (NULL: the model has none), its shape (cols 0:
 * a vector of rows floats, kept in fp32; else a matrix in the backend's
 * format). Returns the count (3 + 14 per layer); fills out when not NULL. */
typedef struct {
    float **dst;
    const float *src;
    size_t rows, cols;
} dev_tensor;

static size_t dev_tensors(const model *m, model_dev *d, dev_tensor *out) {
    const model_config *c = &m->cfg;
    size_t L = (size_t)c->n_layers, d_ = (size_t)c->dim, hd = (size_t)c->head_dim, hid = (size_t)c->hidden_dim;
    size_t qd = (size_t)c->n_heads * hd, kvd = (size_t)c->n_kv_heads * hd, V = (size_t)c->vocab_size, n = 0;
#define PUT(d_ptr, s_ptr, r, k) (out ? (void)(out[n] = (dev_tensor){(d_ptr), (s_ptr), (r), (k)}) : (void)0, n++)
    PUT(&d->tok_embd, m->w.tok_embd, V * d_, 0);
    PUT(&d->out_norm, m->w.out_norm, d_, 0);
    PUT(&d->lm_head, m->w.lm_head, V, d_); /* a classifier has none */
    for (size_t l = 0; l < L; l++) {
        layer_params h = model_layer(&m->w, c, (int)l), *o = &d->layers[l];
        PUT(&o->attn_norm, h.attn_norm, d_, 0), PUT(&o->bq, h.bq, qd, 0), PUT(&o->bk, h.bk, kvd, 0);
        PUT(&o->bv, h.bv, kvd, 0), PUT(&o->q_norm, h.q_norm, hd, 0), PUT(&o->k_norm, h.k_norm, hd, 0);
        PUT(&o->ffn_norm, h.ffn_norm, d_, 0), PUT(&o->wq, h.wq, qd, d_), PUT(&o->wk, h.wk, kvd, d_);
        PUT(&o->wv, h.wv, kvd, d_), PUT(&o->wo, h.wo, d_, qd), PUT(&o->w_gate, h.w_gate, hid, d_);
        PUT(&o->w_up, h.w_up, hid, d_), PUT(&o->w_down, h.w_down, d_, hid);
    }
#undef PUT
    return n;
}

int model_to_backend(model *m, const backend *be, gerr *e) {
    if (m->packed) return gerr_set(e, EX_SOFTWARE, "model_to_backend: the weights are packed for the CPU");
    if (!be->mem_alloc || !be->weight_upload)
        return gerr_set(e, EX_SOFTWARE, "backend %s keeps no memory of its own", be->name);
    /* the layer groups the tokens by expert in host arrays (layer.h) */
    if (m->cfg.n_experts > 0)
        return gerr_set(e, EX_USAGE, "--device %s: a mixture of experts (%s) runs on the CPU only (--device cpu)",
                        be->name, m->cfg.architecture);
    /* the device's attention has neither (ops.h's attn_shape) */
    if (m->cfg.attn_sinks || m->cfg.attn_o_bias || m->cfg.sliding_window > 0 || m->cfg.rope_yarn)
        return gerr_set(e, EX_USAGE,
                        "--device %s: attention sinks, an o_proj bias, sliding windows and YaRN (%s) run on the CPU only (--device cpu)",
                        be->name, m->cfg.architecture);
    model_dev *d = xcalloc(1, sizeof *d);
    d->be = be;
    d->layers = xcalloc((size_t)m->cfg.n_layers, sizeof *d->layers);
    size_t n = dev_tensors(m, d, NULL);
    dev_tensor *t = xcalloc(n, sizeof *t);
    dev_tensors(m, d, t);
    d->owned = xcalloc(n, sizeof *d->owned);
    m->dev = d; /* model_dev_free undoes a partial copy */
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++)
        rc = !t[i].src ? 0 /* left NULL */
             : t[i].cols ? put_matrix(d, t[i].dst, t[i].src, t[i].rows, t[i].cols, e)
                       : put_vector(d, t[i].dst, t[i].src, t[i].rows, e);
    free(t);
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
        if (!t[i].src) continue;
        const float *src = params + (t[i].src - m->params_memory);
        if (t[i].cols)
            d->be->weight_refresh(*t[i].dst, src, t[i].rows, t[i].cols);
        else
            d->be->mem_copy(*t[i].dst, src, t[i].rows * sizeof(float));
    }
    free(t);
}
