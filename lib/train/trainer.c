/* The training forward and backward, layer by layer (trainer.h).
 *
 * Per layer, as in lib/model/forward.c, keeping what the backward needs:
 *   xn1 = RMSNorm(x_in); q,k,v = linear(xn1) [+ q/k norm] + RoPE;
 *   att = attention(q, k, v); x_mid = x_in + linear_o(att);
 *   xn2 = RMSNorm(x_mid); x_out = x_mid + linear_down(silu(gate) * up).
 * layer_backward walks the same steps in reverse. */
#include "trainer.h"

#include <assert.h>
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../model/ops.h"
#include "../util/rng.h"
#include "../util/vecmath.h"
#include "attn_train.h"
#include "train_ops.h"

typedef struct {
    float *x_in, *xn1, *rstd1;
    float *q_raw, *k_raw, *q_rstd, *k_rstd; /* qwen3: before the q/k norm */
    float *q, *k, *v, *att, *lse;
    float *x_mid, *xn2, *rstd2;
    float *gate, *up;
    float *u[LORA_N_TARGETS]; /* dropout(x) A^T, [R, r] */
} layer_acts;

struct trainer_acts {
    float *mem;
    size_t n_floats;
    layer_acts *layer;
    float *x_final, *cos_t, *sin_t;
    int *row_seq, *row_pos, *target_row;
    int32_t *target_tok;
    float *xraw, *xf, *rstd_f, *logits;
    /* backward scratch */
    float *dx, *dtmp, *dxn, *dq, *dk, *dv, *datt, *dgate, *dup, *h, *dxf, *xdrop, *du, *out_tmp;
    float *attn_buf;
    int n_threads;
};

/* Carves floats out of one buffer; with base NULL it only counts. */
typedef struct {
    float *base;
    size_t used;
} arena;
static float *take(arena *a, size_t n) {
    float *p = a->base ? a->base + a->used : NULL;
    a->used += n;
    return p;
}

static int n_threads_now(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static void carve_slot(arena *a, layer_acts *s, const model_config *c, const lora *l, int R) {
    size_t d = c->dim, qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    size_t hid = c->hidden_dim;
    s->xn1 = take(a, R * d), s->rstd1 = take(a, R);
    if (c->qk_norm) {
        s->q_raw = take(a, R * qd), s->k_raw = take(a, R * kvd);
        s->q_rstd = take(a, (size_t)R * c->n_heads), s->k_rstd = take(a, (size_t)R * c->n_kv_heads);
    }
    s->q = take(a, R * qd), s->k = take(a, R * kvd), s->v = take(a, R * kvd);
    s->att = take(a, R * qd), s->lse = take(a, (size_t)R * c->n_heads);
    s->x_mid = take(a, R * d), s->xn2 = take(a, R * d), s->rstd2 = take(a, R);
    s->gate = take(a, R * hid), s->up = take(a, R * hid);
    for (int t = 0; t < LORA_N_TARGETS; t++) s->u[t] = l && l->a[t] ? take(a, (size_t)R * l->r) : NULL;
}

/* Lays out every activation; returns the float count (a->base NULL: count only). */
static void carve(arena *a, trainer *t, trainer_acts *ac) {
    const model_config *c = &t->m->cfg;
    size_t R = t->max_rows, d = c->dim, qd = (size_t)c->n_heads * c->head_dim;
    size_t kvd = (size_t)c->n_kv_heads * c->head_dim, hid = c->hidden_dim, T = t->max_targets;
    int L = c->n_layers;
    bool per_layer = t->mode != TRAINER_INFER && !t->recompute;
    layer_acts shared;
    carve_slot(a, &shared, c, t->lora, (int)R);
    for (int l = 0; l < L; l++) {
        if (per_layer && l > 0)
            carve_slot(a, &ac->layer[l], c, t->lora, (int)R);
        else
            ac->layer[l] = shared;
        /* inputs: per layer when a backward will need them */
        ac->layer[l].x_in = (t->mode != TRAINER_INFER || l == 0) ? take(a, R * d) : ac->layer[0].x_in;
    }
    ac->x_final = take(a, R * d);
    ac->cos_t = take(a, R * c->head_dim / 2), ac->sin_t = take(a, R * c->head_dim / 2);
    ac->xraw = take(a, T * d), ac->xf = take(a, T * d), ac->rstd_f = take(a, T);
    ac->logits = take(a, (size_t)TRAIN_HEAD_CHUNK * c->vocab_size);
    ac->out_tmp = take(a, R * d);
    size_t max_in = hid > qd ? hid : qd;
    max_in = max_in > d ? max_in : d;
    ac->xdrop = t->lora && t->lora->dropout > 0 ? take(a, R * max_in) : NULL;
    ac->h = take(a, R * hid);
    if (t->mode != TRAINER_INFER) {
        ac->dx = take(a, R * d), ac->dtmp = take(a, R * d), ac->dxn = take(a, R * (qd > d ? qd : d));
        ac->dq = take(a, R * qd), ac->dk = take(a, R * kvd), ac->dv = take(a, R * kvd), ac->datt = take(a, R * qd);
        ac->dgate = take(a, R * hid), ac->dup = take(a, R * hid), ac->dxf = take(a, (size_t)TRAIN_HEAD_CHUNK * d);
        ac->du = t->lora ? take(a, R * t->lora->r) : NULL;
    }
    ac->attn_buf = take(a, (size_t)ac->n_threads * attn_train_scratch(c, t->max_len));
}

int train_batch_targets(const train_batch *b) {
    int n = 0;
    for (int s = 0; s < b->n_seqs; s++) n += b->start[s + 1] - b->start[s] - b->n_prompt[s];
    return n;
}

static void point_grads(trainer *t) {
    const model *m = t->m;
    if (t->mode == TRAINER_FULL) {
        size_t off = 0;
        for (int i = 0; i < MODEL_N_PARAMS; i++) {
            t->g.t[i] = m->w.t[i] ? t->grad + off : NULL;
            off += m->param_sizes[i];
        }
        if (m->cfg.tied_embeddings) t->g.lm_head = t->g.tok_embd;
    } else if (t->mode == TRAINER_LORA) {
        const lora *l = t->lora;
        for (int i = 0; i < LORA_N_TARGETS; i++) {
            t->grad_a[i] = l->a[i] ? t->grad + (l->a[i] - l->memory) : NULL;
            t->grad_b[i] = l->b[i] ? t->grad + (l->b[i] - l->memory) : NULL;
        }
    }
}

int trainer_init(trainer *t, const model *m, lora *l, trainer_mode mode, bool recompute, int max_rows, int max_len,
                 int max_targets, gerr *e) {
    memset(t, 0, sizeof *t);
    if (mode == TRAINER_LORA && !l) return gerr_set(e, EX_SOFTWARE, "trainer: LoRA mode without an adapter");
    t->m = m, t->lora = l, t->mode = mode, t->recompute = recompute;
    t->max_rows = max_rows, t->max_len = max_len, t->max_targets = max_targets > 0 ? max_targets : 1;
    trainer_acts *ac = calloc(1, sizeof *ac);
    if (!ac) return gerr_set(e, EX_SOFTWARE, "out of memory for the trainer");
    t->acts = ac;
    ac->n_threads = n_threads_now();
    ac->layer = calloc((size_t)m->cfg.n_layers, sizeof *ac->layer);
    ac->row_seq = malloc((size_t)max_rows * sizeof(int));
    ac->row_pos = malloc((size_t)max_rows * sizeof(int));
    ac->target_row = malloc((size_t)t->max_targets * sizeof(int));
    ac->target_tok = malloc((size_t)t->max_targets * sizeof(int32_t));
    arena a = {NULL, 0};
    carve(&a, t, ac);
    ac->n_floats = a.used;
    ac->mem = malloc(a.used * sizeof(float));
    t->n_grad = mode == TRAINER_FULL ? m->n_params : mode == TRAINER_LORA ? l->n_params : 0;
    t->grad = t->n_grad ? calloc(t->n_grad, sizeof(float)) : NULL;
    if (!ac->layer || !ac->row_seq || !ac->row_pos || !ac->target_row || !ac->target_tok || !ac->mem ||
        (t->n_grad && !t->grad)) {
        trainer_free(t);
        return gerr_set(e, EX_SOFTWARE, "out of memory for training activations (%.0f MiB; try --micro-batch smaller or --recompute)",
                        (double)a.used * 4 / 1048576);
    }
    a = (arena){ac->mem, 0};
    carve(&a, t, ac);
    point_grads(t);
    return 0;
}

void trainer_free(trainer *t) {
    if (t->acts) {
        free(t->acts->mem);
        free(t->acts->layer);
        free(t->acts->row_seq);
        free(t->acts->row_pos);
        free(t->acts->target_row);
        free(t->acts->target_tok);
        free(t->acts);
    }
    free(t->grad);
    memset(t, 0, sizeof *t);
}

size_t trainer_bytes(const trainer *t) { return (t->acts->n_floats + t->n_grad) * sizeof(float); }

void trainer_zero_grad(trainer *t) {
    if (t->grad) memset(t->grad, 0, t->n_grad * sizeof(float));
}

/* ---- LoRA dropout: masks regenerated from the keyed RNG, never stored ---- */
static void dropout_apply(const trainer *t, const train_batch *b, float *x, int R, int n, int layer, int target) {
    double p = t->lora->dropout;
    rng_stream rs;
    rng_init(&rs, t->dropout_seed, "lora-dropout", 12, (t->dropout_pass * 4096 + (uint64_t)layer) * LORA_N_TARGETS + target);
    uint32_t threshold = (uint32_t)(p * 4294967296.0);
    float keep_scale = (float)(1.0 / (1.0 - p));
    const int *row_seq = t->acts->row_seq, *row_pos = t->acts->row_pos;
#pragma omp parallel for schedule(static)
    for (int r = 0; r < R; r++) {
        uint64_t key = b->key ? b->key[row_seq[r]] : (uint64_t)row_seq[r];
        float *xr = x + (size_t)r * n;
        for (int c = 0; c < n; c += 4) {
            uint32_t ctr[4] = {(uint32_t)(c / 4), (uint32_t)key, (uint32_t)(key >> 32), (uint32_t)row_pos[r]}, w[4];
            philox4x32_10(ctr, rs.key, w);
            for (int i = 0; i < 4 && c + i < n; i++) xr[c + i] = w[i] < threshold ? 0.0f : xr[c + i] * keep_scale;
        }
    }
}

typedef struct {
    const trainer *t;
    const train_batch *b;
    int R, layer;
    bool lora_on, dropout;
} pass_ctx;

static bool adapted(const pass_ctx *p, int target) { return p->lora_on && p->t->lora && p->t->lora->a[target]; }

/* out = in W^T (+ bias) (+ scale * dropout(in) A^T B^T, keeping u = dropout(in) A^T). */
static void linear_forward(const pass_ctx *p, float *out, const float *in, const float *w, const float *bias,
                           int in_dim, int out_dim, int target, float *u) {
    matmul_forward(out, in, w, bias, p->R, in_dim, out_dim);
    if (!adapted(p, target)) return;
    const lora *l = p->t->lora;
    const float *a = l->a[target] + (size_t)p->layer * l->r * in_dim;
    const float *bm = l->b[target] + (size_t)p->layer * out_dim * l->r;
    const float *xd = in;
    if (p->dropout) {
        float *buf = p->t->acts->xdrop;
        memcpy(buf, in, (size_t)p->R * in_dim * sizeof *buf);
        dropout_apply(p->t, p->b, buf, p->R, in_dim, p->layer, target);
        xd = buf;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, p->R, l->r, in_dim, 1.0f, xd, in_dim, a, in_dim, 0.0f, u, l->r);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, p->R, out_dim, l->r, l->scale, u, l->r, bm, l->r, 1.0f, out,
                out_dim);
}

/* The backward of linear_forward: din (written, or accumulated), and the
 * gradients of whatever trains (W and bias in full mode, A and B in LoRA). */
static void linear_backward(const pass_ctx *p, float *din, const float *dout, const float *in, const float *w,
                            int in_dim, int out_dim, int target, const float *u, float *dw, float *db, int accumulate) {
    const trainer *t = p->t;
    matmul_backward(din, dw, db, dout, in, w, p->R, in_dim, out_dim, accumulate);
    if (!adapted(p, target)) return;
    const lora *l = t->lora;
    int r = l->r, R = p->R;
    size_t ao = (size_t)p->layer * r * in_dim, bo = (size_t)p->layer * out_dim * r;
    float *du = t->acts->du;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, R, r, out_dim, l->scale, dout, out_dim, l->b[target] + bo, r,
                0.0f, du, r);
    if (t->mode == TRAINER_LORA) {
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out_dim, r, R, l->scale, dout, out_dim, u, r, 1.0f,
                    t->grad_b[target] + bo, r);
        const float *xd = in;
        if (p->dropout) {
            float *buf = t->acts->xdrop;
            memcpy(buf, in, (size_t)R * in_dim * sizeof *buf);
            dropout_apply(t, p->b, buf, R, in_dim, p->layer, target);
            xd = buf;
        }
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, r, in_dim, R, 1.0f, du, r, xd, in_dim, 1.0f,
                    t->grad_a[target] + ao, in_dim);
    }
    if (!din) return;
    if (p->dropout) {
        float *buf = t->acts->xdrop;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, R, in_dim, r, 1.0f, du, r, l->a[target] + ao, in_dim,
                    0.0f, buf, in_dim);
        dropout_apply(t, p->b, buf, R, in_dim, p->layer, target);
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < (size_t)R * in_dim; i++) din[i] += buf[i];
    } else {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, R, in_dim, r, 1.0f, du, r, l->a[target] + ao, in_dim,
                    1.0f, din, in_dim);
    }
}

static void add_into(float *x, const float *y, size_t n) {
#pragma omp parallel for schedule(static) if (n > 4096)
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}

#define LAYER_W(name, size) (w->name ? w->name + (size_t)l * (size) : NULL)

/* One layer forward from A->x_in to x_out. */
static void layer_forward(const pass_ctx *p, float *x_out) {
    const trainer *t = p->t;
    const model_config *c = &t->m->cfg;
    const model_params *w = &t->m->w;
    const trainer_acts *ac = t->acts;
    const layer_acts *A = &ac->layer[p->layer];
    int l = p->layer, R = p->R, d = c->dim, hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads;
    int qd = nh * hd, kvd = nkv * hd, hid = c->hidden_dim;
    float eps = c->norm_eps;

    rmsnorm_forward(A->xn1, A->rstd1, A->x_in, w->attn_norm + (size_t)l * d, R, d, eps);
    float *q = c->qk_norm ? A->q_raw : A->q, *k = c->qk_norm ? A->k_raw : A->k;
    linear_forward(p, q, A->xn1, w->wq + (size_t)l * qd * d, LAYER_W(bq, qd), d, qd, LORA_Q, A->u[LORA_Q]);
    linear_forward(p, k, A->xn1, w->wk + (size_t)l * kvd * d, LAYER_W(bk, kvd), d, kvd, LORA_K, A->u[LORA_K]);
    linear_forward(p, A->v, A->xn1, w->wv + (size_t)l * kvd * d, LAYER_W(bv, kvd), d, kvd, LORA_V, A->u[LORA_V]);
    if (c->qk_norm) {
        rmsnorm_forward(A->q, A->q_rstd, A->q_raw, w->q_norm + (size_t)l * hd, R * nh, hd, eps);
        rmsnorm_forward(A->k, A->k_rstd, A->k_raw, w->k_norm + (size_t)l * hd, R * nkv, hd, eps);
    }
    rope_forward(A->q, ac->cos_t, ac->sin_t, R, nh, hd);
    rope_forward(A->k, ac->cos_t, ac->sin_t, R, nkv, hd);
    attn_train_forward(A->att, A->lse, A->q, A->k, A->v, p->b->n_seqs, p->b->start, c, ac->attn_buf, t->max_len);
    linear_forward(p, A->x_mid, A->att, w->wo + (size_t)l * d * qd, NULL, qd, d, LORA_O, A->u[LORA_O]);
    add_into(A->x_mid, A->x_in, (size_t)R * d);

    rmsnorm_forward(A->xn2, A->rstd2, A->x_mid, w->ffn_norm + (size_t)l * d, R, d, eps);
    linear_forward(p, A->gate, A->xn2, w->w_gate + (size_t)l * hid * d, NULL, d, hid, LORA_GATE, A->u[LORA_GATE]);
    linear_forward(p, A->up, A->xn2, w->w_up + (size_t)l * hid * d, NULL, d, hid, LORA_UP, A->u[LORA_UP]);
    swiglu_forward(ac->h, A->gate, A->up, (size_t)R * hid);
    linear_forward(p, x_out, ac->h, w->w_down + (size_t)l * d * hid, NULL, hid, d, LORA_DOWN, A->u[LORA_DOWN]);
    add_into(x_out, A->x_mid, (size_t)R * d);
}

/* ac->dx holds d(loss)/d(x_out) of the layer; leaves d(loss)/d(x_in). */
static void layer_backward(const pass_ctx *p) {
    const trainer *t = p->t;
    const model_config *c = &t->m->cfg;
    const model_params *w = &t->m->w;
    const model_params *g = &t->g;
    const trainer_acts *ac = t->acts;
    const layer_acts *A = &ac->layer[p->layer];
    int l = p->layer, R = p->R, d = c->dim, hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads;
    int qd = nh * hd, kvd = nkv * hd, hid = c->hidden_dim;
    bool full = t->mode == TRAINER_FULL;
#define GRAD(name, size) (full && g->name ? g->name + (size_t)l * (size) : NULL)

    /* MLP block */
    swiglu_forward(ac->h, A->gate, A->up, (size_t)R * hid);
    linear_backward(p, ac->dgate, ac->dx, ac->h, w->w_down + (size_t)l * d * hid, hid, d, LORA_DOWN,
                    A->u[LORA_DOWN], GRAD(w_down, (size_t)d * hid), NULL, 0);
    swiglu_backward(ac->dgate, ac->dup, ac->dgate, A->gate, A->up, (size_t)R * hid);
    linear_backward(p, ac->dxn, ac->dgate, A->xn2, w->w_gate + (size_t)l * hid * d, d, hid, LORA_GATE,
                    A->u[LORA_GATE], GRAD(w_gate, (size_t)hid * d), NULL, 0);
    linear_backward(p, ac->dxn, ac->dup, A->xn2, w->w_up + (size_t)l * hid * d, d, hid, LORA_UP, A->u[LORA_UP],
                    GRAD(w_up, (size_t)hid * d), NULL, 1);
    rmsnorm_backward(ac->dtmp, GRAD(ffn_norm, d), ac->dxn, A->x_mid, w->ffn_norm + (size_t)l * d, A->rstd2, R, d);
    add_into(ac->dx, ac->dtmp, (size_t)R * d);

    /* attention block */
    linear_backward(p, ac->datt, ac->dx, A->att, w->wo + (size_t)l * d * qd, qd, d, LORA_O, A->u[LORA_O],
                    GRAD(wo, (size_t)d * qd), NULL, 0);
    attn_train_backward(ac->dq, ac->dk, ac->dv, ac->datt, A->att, A->lse, A->q, A->k, A->v, p->b->n_seqs,
                        p->b->start, c, ac->attn_buf, t->max_len);
    rope_backward(ac->dq, ac->cos_t, ac->sin_t, R, nh, hd);
    rope_backward(ac->dk, ac->cos_t, ac->sin_t, R, nkv, hd);
    if (c->qk_norm) {
        rmsnorm_backward(ac->dq, GRAD(q_norm, hd), ac->dq, A->q_raw, w->q_norm + (size_t)l * hd, A->q_rstd, R * nh, hd);
        rmsnorm_backward(ac->dk, GRAD(k_norm, hd), ac->dk, A->k_raw, w->k_norm + (size_t)l * hd, A->k_rstd, R * nkv, hd);
    }
    linear_backward(p, ac->dxn, ac->dq, A->xn1, w->wq + (size_t)l * qd * d, d, qd, LORA_Q, A->u[LORA_Q],
                    GRAD(wq, (size_t)qd * d), GRAD(bq, qd), 0);
    linear_backward(p, ac->dxn, ac->dk, A->xn1, w->wk + (size_t)l * kvd * d, d, kvd, LORA_K, A->u[LORA_K],
                    GRAD(wk, (size_t)kvd * d), GRAD(bk, kvd), 1);
    linear_backward(p, ac->dxn, ac->dv, A->xn1, w->wv + (size_t)l * kvd * d, d, kvd, LORA_V, A->u[LORA_V],
                    GRAD(wv, (size_t)kvd * d), GRAD(bv, kvd), 1);
    rmsnorm_backward(ac->dtmp, GRAD(attn_norm, d), ac->dxn, A->x_in, w->attn_norm + (size_t)l * d, A->rstd1, R, d);
    add_into(ac->dx, ac->dtmp, (size_t)R * d);
#undef GRAD
}

/* Row bookkeeping, embeddings and RoPE tables of a batch. */
static void batch_setup(trainer *t, const train_batch *b) {
    const model *m = t->m;
    trainer_acts *ac = t->acts;
    int R = b->start[b->n_seqs], d = m->cfg.dim;
    assert(R <= t->max_rows && train_batch_targets(b) <= t->max_targets);
    int n_t = 0;
    for (int s = 0; s < b->n_seqs; s++) {
        int L = b->start[s + 1] - b->start[s];
        assert(L <= t->max_len && b->n_prompt[s] >= 1 && b->n_prompt[s] <= L);
        for (int i = 0; i < L; i++) ac->row_seq[b->start[s] + i] = s, ac->row_pos[b->start[s] + i] = i;
        for (int i = b->n_prompt[s]; i < L; i++, n_t++) {
            ac->target_row[n_t] = b->start[s] + i - 1;
            ac->target_tok[n_t] = b->tokens[b->start[s] + i];
        }
    }
    for (int r = 0; r < R; r++) {
        assert(b->tokens[r] >= 0 && b->tokens[r] < m->cfg.vocab_size);
        memcpy(ac->layer[0].x_in + (size_t)r * d, m->w.tok_embd + (size_t)b->tokens[r] * d, (size_t)d * sizeof(float));
    }
    rope_cos_sin(ac->cos_t, ac->sin_t, m->inv_freq, m->cfg.head_dim / 2, ac->row_pos, R);
}

/* One row of logits z[V]: divided by the temperature in place; returns the
 * log-sum-exp, and in *mean_z the mean of z under softmax(z) (entropy is
 * lse - mean_z). */
VECTOR_CLONES static double row_logsumexp(float *z, int V, float inv_t, double *mean_z) {
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int v = 0; v < V; v++) {
        z[v] *= inv_t;
        mx = z[v] > mx ? z[v] : mx;
    }
    /* float sums over blocks (they vectorize), added up in double */
    double sum = 0, sz = 0;
    for (int v0 = 0; v0 < V; v0 += 256) {
        int v1 = V - v0 < 256 ? V : v0 + 256;
        float bs = 0, bz = 0;
#pragma omp simd reduction(+ : bs, bz)
        for (int v = v0; v < v1; v++) {
            float e = vec_expf(z[v] - mx);
            bs += e;
            bz += e * z[v];
        }
        sum += bs, sz += bz;
    }
    *mean_z = sz / sum;
    return mx + log(sum);
}

/* d logp / d z of one row, times g: z[v] becomes -g softmax(z)_v (the
 * target's +g is added by the caller). */
VECTOR_CLONES static void row_softmax_grad(float *z, int V, float g, float lse) {
#pragma omp simd
    for (int v = 0; v < V; v++) z[v] = -g * vec_expf(z[v] - lse);
}

/* Logits / temperature of one chunk of targets into ac->logits, then each
 * row's log-sum-exp: fills logp, entropy and lse_out where given. */
static void head_chunk(const trainer *t, int j0, int n, float temperature, float *logp, float *entropy, float *lse_out) {
    const model *m = t->m;
    const trainer_acts *ac = t->acts;
    int V = m->cfg.vocab_size, d = m->cfg.dim;
    matmul_forward(ac->logits, ac->xf + (size_t)j0 * d, m->w.lm_head, NULL, n, d, V);
    float inv_t = 1.0f / temperature;
#pragma omp parallel for schedule(static)
    for (int j = 0; j < n; j++) {
        float *z = ac->logits + (size_t)j * V;
        double mean_z, lse = row_logsumexp(z, V, inv_t, &mean_z);
        if (logp) logp[j0 + j] = (float)(z[ac->target_tok[j0 + j]] - lse);
        if (entropy) entropy[j0 + j] = (float)(lse - mean_z);
        if (lse_out) lse_out[j] = (float)lse;
    }
}

void trainer_forward(trainer *t, const train_batch *b, float temperature, bool keep, bool lora_off, float *logp,
                     float *entropy) {
    const model_config *c = &t->m->cfg;
    trainer_acts *ac = t->acts;
    int R = b->start[b->n_seqs], d = c->dim, L = c->n_layers;
    batch_setup(t, b);
    pass_ctx p = {t, b, R, 0, !lora_off && t->lora, false};
    p.dropout = keep && p.lora_on && t->lora->dropout > 0 && t->mode == TRAINER_LORA;
    for (int l = 0; l < L; l++) {
        p.layer = l;
        float *x_out = l + 1 < L ? ac->layer[l + 1].x_in : ac->x_final;
        if (x_out == ac->layer[l].x_in) x_out = ac->out_tmp; /* one shared input slot (INFER) */
        layer_forward(&p, x_out);
        if (x_out == ac->out_tmp) memcpy(ac->layer[l].x_in, ac->out_tmp, (size_t)R * d * sizeof(float));
        if (l + 1 == L && x_out != ac->x_final) memcpy(ac->x_final, x_out, (size_t)R * d * sizeof(float));
    }
    int n_t = train_batch_targets(b);
    for (int j = 0; j < n_t; j++)
        memcpy(ac->xraw + (size_t)j * d, ac->x_final + (size_t)ac->target_row[j] * d, (size_t)d * sizeof(float));
    rmsnorm_forward(ac->xf, ac->rstd_f, ac->xraw, t->m->w.out_norm, n_t, d, c->norm_eps);
    for (int j0 = 0; j0 < n_t; j0 += TRAIN_HEAD_CHUNK) {
        int n = n_t - j0 < TRAIN_HEAD_CHUNK ? n_t - j0 : TRAIN_HEAD_CHUNK;
        head_chunk(t, j0, n, temperature, logp, entropy, NULL);
    }
}

void trainer_backward(trainer *t, const train_batch *b, float temperature, const float *dlogp) {
    assert(t->mode != TRAINER_INFER);
    const model *m = t->m;
    const model_config *c = &m->cfg;
    trainer_acts *ac = t->acts;
    int R = b->start[b->n_seqs], d = c->dim, V = c->vocab_size, L = c->n_layers, n_t = train_batch_targets(b);
    bool full = t->mode == TRAINER_FULL;
    float inv_t = 1.0f / temperature;
    pass_ctx p = {t, b, R, 0, t->lora != NULL, t->lora && t->lora->dropout > 0 && t->mode == TRAINER_LORA};

    /* LM head, chunk by chunk: d logp_j / d z_v = (onehot - softmax) / T */
    memset(ac->dx, 0, (size_t)R * d * sizeof(float));
    float lse[TRAIN_HEAD_CHUNK];
    float *dxraw = ac->dtmp; /* [n_t, d]: every target row is a batch row, so n_t < R */
    for (int j0 = 0; j0 < n_t; j0 += TRAIN_HEAD_CHUNK) {
        int n = n_t - j0 < TRAIN_HEAD_CHUNK ? n_t - j0 : TRAIN_HEAD_CHUNK;
        head_chunk(t, j0, n, temperature, NULL, NULL, lse);
#pragma omp parallel for schedule(static)
        for (int j = 0; j < n; j++) {
            float *z = ac->logits + (size_t)j * V, gj = dlogp[j0 + j] * inv_t;
            row_softmax_grad(z, V, gj, lse[j]);
            z[ac->target_tok[j0 + j]] += gj;
        }
        matmul_backward(ac->dxf, full ? t->g.lm_head : NULL, NULL, ac->logits, ac->xf + (size_t)j0 * d, m->w.lm_head,
                        n, d, V, 0);
        memcpy(dxraw + (size_t)j0 * d, ac->dxf, (size_t)n * d * sizeof(float));
    }
    rmsnorm_backward(dxraw, full ? t->g.out_norm : NULL, dxraw, ac->xraw, m->w.out_norm, ac->rstd_f, n_t, d);
    for (int j = 0; j < n_t; j++) {
        float *dst = ac->dx + (size_t)ac->target_row[j] * d, *src = dxraw + (size_t)j * d;
        for (int i = 0; i < d; i++) dst[i] += src[i];
    }

    for (int l = L - 1; l >= 0; l--) {
        p.layer = l;
        if (t->recompute) layer_forward(&p, ac->out_tmp);
        layer_backward(&p);
    }
    if (full)
        for (int r = 0; r < R; r++) {
            float *dst = t->g.tok_embd + (size_t)b->tokens[r] * d, *src = ac->dx + (size_t)r * d;
            for (int i = 0; i < d; i++) dst[i] += src[i];
        }
}
