/* The per-run state of the forward pass: the KV cache, the scratch
 * activations and the rows' arguments, each allocated once. */
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../ops/blas.h"
#include "layer.h"
#include "model.h"

/* Bytes of one cached element. */
static size_t elem_bytes(kv_format fmt) { return fmt == KV_BF16 ? sizeof(uint16_t) : sizeof(float); }

size_t kv_cache_bytes_as(const model_config *cfg, int n_seqs, int max_len, kv_format fmt) {
    return 2 * (size_t)n_seqs * (size_t)cfg->n_layers * (size_t)max_len * (size_t)cfg->n_kv_heads *
           (size_t)cfg->head_dim * elem_bytes(fmt);
}

size_t kv_cache_bytes(const model_config *cfg, int n_seqs, int max_len) {
    return kv_cache_bytes_as(cfg, n_seqs, max_len, KV_F32);
}

/* A device backend's memory, or NULL for the host's. */
static const backend *device(const backend *be) { return be && be->mem_alloc ? be : NULL; }

int kv_cache_init(kv_cache *c, const model_config *cfg, int n_seqs, int max_len, gerr *e) {
    return kv_cache_init_as(c, NULL, cfg, n_seqs, max_len, KV_F32, e);
}

int kv_cache_init_on(kv_cache *c, const backend *be, const model_config *cfg, int n_seqs, int max_len, gerr *e) {
    return kv_cache_init_as(c, be, cfg, n_seqs, max_len, KV_F32, e);
}

int kv_cache_init_as(kv_cache *c, const backend *be, const model_config *cfg, int n_seqs, int max_len, kv_format fmt,
                     gerr *e) {
    memset(c, 0, sizeof *c);
    if (n_seqs <= 0 || max_len <= 0)
        return gerr_set(e, EX_USAGE, "KV cache: %d sequences of %d positions", n_seqs, max_len);
    if (fmt != KV_F32 && fmt != KV_BF16) return gerr_set(e, EX_USAGE, "KV cache: unknown element format %d", (int)fmt);
    c->be = device(be);
    size_t bytes = kv_cache_bytes_as(cfg, n_seqs, max_len, fmt) / 2;
    if (c->be) {
        void *k = NULL, *v = NULL;
        int rc = c->be->mem_alloc(&k, bytes, e);
        c->k = k;
        if (!rc) rc = c->be->mem_alloc(&v, bytes, e);
        c->v = v;
        if (rc) {
            kv_cache_free(c);
            return rc;
        }
    } else {
        c->k = malloc(bytes);
        c->v = malloc(bytes);
    }
    if (!c->k || !c->v) {
        kv_cache_free(c);
        return gerr_set(e, EX_SOFTWARE, "cannot allocate a KV cache of %zu MiB (%d sequences of %d positions)",
                        2 * bytes >> 20, n_seqs, max_len);
    }
    c->n_seqs = n_seqs;
    c->max_len = max_len;
    c->n_layers = cfg->n_layers;
    c->kv_dim = cfg->n_kv_heads * cfg->head_dim;
    c->fmt = fmt;
    return 0;
}

/* memcpy, or the device backend's copy (ordered with its ops). */
static void copy(const kv_cache *c, void *dst, const void *src, size_t bytes) {
    if (c->be)
        c->be->mem_copy(dst, src, bytes);
    else
        memcpy(dst, src, bytes);
}

/* Element i of K or V, as a byte address. */
static char *at(void *base, size_t i, kv_format fmt) { return (char *)base + i * elem_bytes(fmt); }

void kv_cache_copy_prefix(kv_cache *c, int dst_seq, int src_seq, int n_positions) {
    if (dst_seq == src_seq || n_positions <= 0) return;
    size_t per_layer = (size_t)c->max_len * c->kv_dim, n = (size_t)n_positions * c->kv_dim * elem_bytes(c->fmt);
    for (int l = 0; l < c->n_layers; l++) {
        size_t d = ((size_t)dst_seq * c->n_layers + l) * per_layer, s = ((size_t)src_seq * c->n_layers + l) * per_layer;
        copy(c, at(c->k, d, c->fmt), at(c->k, s, c->fmt), n);
        copy(c, at(c->v, d, c->fmt), at(c->v, s, c->fmt), n);
    }
}

int kv_cache_grow(kv_cache *c, const model_config *cfg, int max_len, gerr *e) {
    if (max_len <= c->max_len) return 0;
    kv_cache bigger;
    int rc = kv_cache_init_as(&bigger, c->be, cfg, c->n_seqs, max_len, c->fmt, e);
    if (rc) return rc;
    size_t old_block = (size_t)c->max_len * c->kv_dim, new_block = (size_t)max_len * c->kv_dim;
    size_t bytes = old_block * elem_bytes(c->fmt);
    for (size_t b = 0; b < (size_t)c->n_seqs * c->n_layers; b++) {
        copy(c, at(bigger.k, b * new_block, c->fmt), at(c->k, b * old_block, c->fmt), bytes);
        copy(c, at(bigger.v, b * new_block, c->fmt), at(c->v, b * old_block, c->fmt), bytes);
    }
    if (c->be && (rc = c->be->sync(e))) { /* the copies read c: done before it goes */
        kv_cache_free(&bigger);
        return rc;
    }
    kv_cache_free(c);
    *c = bigger;
    return 0;
}

void kv_cache_free(kv_cache *c) {
    if (c->be) {
        c->be->mem_free(c->k);
        c->be->mem_free(c->v);
    } else {
        free(c->k);
        free(c->v);
    }
    memset(c, 0, sizeof *c);
}

void model_rows_reserve(model_rows *r, size_t n) {
    if (n <= r->cap) return;
    r->cap = n;
    r->seq = xrealloc(r->seq, n * sizeof *r->seq);
    r->pos = xrealloc(r->pos, n * sizeof *r->pos);
    r->tok = xrealloc(r->tok, n * sizeof *r->tok);
    r->want = xrealloc(r->want, n * sizeof *r->want);
}

void model_rows_free(model_rows *r) {
    free(r->seq);
    free(r->pos);
    free(r->tok);
    free(r->want);
    memset(r, 0, sizeof *r);
}

/* The scratch on be for cfg's shapes, with u [R, lora_r] (a mixture of
 * experts': [R * k, lora_r], its slots'; none when lora_r is 0). */
static int scratch_init(model_scratch *s, const backend *be, const model_config *cfg, int lora_r, int max_rows,
                        int max_len, gerr *e) {
    memset(s, 0, sizeof *s);
    if (max_rows <= 0 || max_len <= 0)
        return gerr_set(e, EX_USAGE, "scratch: %d rows, %d positions", max_rows, max_len);
    s->be = device(be);
    blas_setup_threads();
    int n_threads = 1;
#ifdef _OPENMP
    n_threads = omp_get_max_threads();
#endif
    size_t R = (size_t)max_rows, qd = (size_t)cfg->n_heads * cfg->head_dim;
    size_t kvd = (size_t)cfg->n_kv_heads * cfg->head_dim, d = (size_t)cfg->dim, ffn = layer_ffn_width(cfg);
    /* a mixture of experts' activations: none in a dense model */
    size_t E = config_ffn_layers(cfg, true) ? (size_t)cfg->n_experts : 0, K = E ? (size_t)cfg->n_experts_used : 0;
    /* a device's attention keeps its state on the device */
    size_t ws_stride = s->be ? 0 : attn_workspace_floats(model_attn_shape(cfg), max_len);
    size_t sizes[] = {R * d, R * (qd > d ? qd : d), R * qd, R * kvd, R * kvd, R * ffn, R * ffn, R * d,
                      R * (size_t)(cfg->head_dim / 2), R * (size_t)(cfg->head_dim / 2), (size_t)n_threads * ws_stride,
                      R * E, R * K, R * K, R * K * d, R * K * d, R * (K ? K : 1) * (size_t)lora_r};
    float *sel = NULL;
    float **ptrs[] = {&s->x,     &s->xn,    &s->q,        &s->k,       &s->v,   &s->gate, &s->up,  &s->x_mid,
                      &s->cos_t, &s->sin_t, &s->ws.buf,   &s->probs,   &sel,    &s->route_w, &s->xe, &s->ye, &s->u};
    size_t total = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        /* on a device each buffer starts 256-byte aligned: cuBLASLt's
         * algorithms assume it of the matrices they write */
        if (s->be) sizes[i] = (sizes[i] + 63) / 64 * 64;
        total += sizes[i];
    }
    if (s->be) {
        void *mem = NULL;
        int rc = s->be->mem_alloc(&mem, total * sizeof(float), e);
        if (rc) return rc;
        s->mem = mem;
    } else {
        s->mem = malloc(total * sizeof(float));
    }
    s->ws.tasks = malloc(R * (size_t)cfg->n_kv_heads * 3 * sizeof *s->ws.tasks);
    s->row_kv = malloc(R * sizeof *s->row_kv);
    s->pick = malloc(R * sizeof *s->pick);
    s->moe = E ? calloc(1, sizeof *s->moe) : NULL;
    s->routes = E ? malloc(R * (size_t)config_ffn_layers(cfg, true) * K * sizeof *s->routes) : NULL;
    gerr e_moe = {0};
    bool moe_ok = !E || (s->moe && s->routes && !moe_index_alloc(s->moe, cfg, max_rows, &e_moe));
    if (!s->mem || !s->ws.tasks || !s->row_kv || !s->pick || !moe_ok) {
        model_scratch_free(s);
        return gerr_set(e, EX_SOFTWARE, "cannot allocate %zu MiB of scratch", total * sizeof(float) >> 20);
    }
    float *p = s->mem;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        *ptrs[i] = p;
        p += sizes[i];
    }
    s->sel = (int32_t *)sel; /* int32 in float-sized slots */
    if (!lora_r) s->u = NULL;
    s->lora_r = lora_r;
    s->ws.stride = ws_stride;
    s->ws.n_threads = n_threads;
    s->max_rows = max_rows;
    s->max_len = max_len;
    return 0;
}

int model_scratch_init(model_scratch *s, const model_config *cfg, int max_rows, int max_len, gerr *e) {
    return scratch_init(s, NULL, cfg, 0, max_rows, max_len, e);
}

int model_scratch_init_on(model_scratch *s, const backend *be, const model_config *cfg, int max_rows, int max_len,
                          gerr *e) {
    return scratch_init(s, be, cfg, 0, max_rows, max_len, e);
}

int model_scratch_init_for(model_scratch *s, const model *m, int max_rows, int max_len, gerr *e) {
    return scratch_init(s, m->dev ? m->dev->be : NULL, &m->cfg, m->adapter ? m->adapter->r : 0, max_rows, max_len, e);
}

void model_scratch_free(model_scratch *s) {
    if (s->be)
        s->be->mem_free(s->mem);
    else
        free(s->mem);
    free(s->ws.tasks);
    free(s->row_kv);
    free(s->pick);
    if (s->moe) moe_index_free(s->moe);
    free(s->moe);
    free(s->routes);
    memset(s, 0, sizeof *s);
}
