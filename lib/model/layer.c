/* The decoder layer, forward and backward (layer.h). */
#include "layer.h"

#include <assert.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "../util/rng.h"

layer_params model_layer(const model_params *p, const model_config *c, int l) {
    size_t d = c->dim, hd = c->head_dim, qd = (size_t)c->n_heads * hd, kvd = (size_t)c->n_kv_heads * hd;
    size_t hid = c->hidden_dim, E = c->n_experts, I = c->moe_hidden_dim;
    /* the FFN's tensors are strided over the layers of their kind */
    bool moe = config_layer_moe(c, l);
    size_t f = (size_t)config_ffn_slot(c, l);
#define AT(name, size) (p->name ? p->name + (size_t)l * (size) : NULL)
#define FFN(name, size, kind) (p->name && moe == (kind) ? p->name + f * (size) : NULL)
    return (layer_params){
        .attn_norm = AT(attn_norm, d),
        .wq = AT(wq, qd * d),
        .wk = AT(wk, kvd * d),
        .wv = AT(wv, kvd * d),
        .bq = AT(bq, qd),
        .bk = AT(bk, kvd),
        .bv = AT(bv, kvd),
        .q_norm = AT(q_norm, hd),
        .k_norm = AT(k_norm, hd),
        .sinks = AT(sinks, (size_t)c->n_heads),
        .wo = AT(wo, d * qd),
        .bo = AT(bo, d),
        .ffn_norm = AT(ffn_norm, d),
        .w_gate = FFN(w_gate, hid * d, false),
        .w_up = FFN(w_up, hid * d, false),
        .w_down = FFN(w_down, d * hid, false),
        .router = FFN(router, E * d, true),
        .exp_gate = FFN(exp_gate, E * I * d, true),
        .exp_up = FFN(exp_up, E * I * d, true),
        .exp_down = FFN(exp_down, E * d * I, true),
        .router_b = FFN(router_b, E, true),
        .exp_gate_b = FFN(exp_gate_b, E * I, true),
        .exp_up_b = FFN(exp_up_b, E * I, true),
        .exp_down_b = FFN(exp_down_b, E * d, true),
    };
#undef FFN
#undef AT
}

size_t layer_ffn_width(const model_config *c) {
    size_t dense = config_ffn_layers(c, false) ? (size_t)c->hidden_dim : 0;
    size_t moe = config_ffn_layers(c, true) ? (size_t)c->n_experts_used * c->moe_hidden_dim : 0;
    return dense > moe ? dense : moe;
}

int moe_index_alloc(moe_index *x, const model_config *c, int max_rows, gerr *e) {
    memset(x, 0, sizeof *x);
    if (!config_ffn_layers(c, true)) return 0;
    size_t slots = (size_t)max_rows * c->n_experts_used;
    x->row_of = malloc(slots * sizeof *x->row_of);
    x->slot_of = malloc(slots * sizeof *x->slot_of);
    x->offsets = malloc(((size_t)c->n_experts + 1) * sizeof *x->offsets);
    x->key = malloc(slots * sizeof *x->key);
    x->pos = malloc(slots * sizeof *x->pos);
    if (!x->row_of || !x->slot_of || !x->offsets || !x->key || !x->pos) {
        moe_index_free(x);
        return gerr_set(e, EX_SOFTWARE, "out of memory for the experts' index arrays");
    }
    return 0;
}

void moe_index_free(moe_index *x) {
    free(x->row_of);
    free(x->slot_of);
    free(x->offsets);
    free(x->key);
    free(x->pos);
    memset(x, 0, sizeof *x);
}

layer_params model_layer_weights(const model *m, int l) {
    return m->dev ? m->dev->layers[l] : model_layer(&m->w, &m->cfg, l);
}

global_params model_global_weights(const model *m) {
    if (m->dev) return (global_params){m->dev->tok_embd, m->dev->out_norm, m->dev->lm_head};
    return (global_params){m->w.tok_embd, m->w.out_norm, m->w.lm_head};
}

void kv_cache_row_offsets(const kv_cache *c, const int *seq, int n, size_t *row_kv) {
    for (int r = 0; r < n; r++) row_kv[r] = (size_t)seq[r] * c->n_layers * c->max_len * c->kv_dim;
}

kv_view kv_cache_view(const kv_cache *c, int layer, const size_t *row_kv) {
    size_t at = (size_t)layer * c->max_len * c->kv_dim;
    kv_view v = {.row_kv = row_kv, .kv_dim = c->kv_dim, .fmt = c->fmt};
    if (c->fmt == KV_BF16)
        v.k_bf16 = c->k_bf16 + at, v.v_bf16 = c->v_bf16 + at;
    else
        v.k = c->k + at, v.v = c->v + at;
    return v;
}

/* ---- linear layers, with an optional LoRA adapter ------------------------------ */

static bool adapted(const layer_pass *p, int set) { return p->lora.on && p->lora.l && p->lora.l->a[set]; }

/* The rows one adapted product runs over: the pass's (a projection of
 * every row), or one expert's slots; with the dropout keys and positions
 * of those rows, and the factors (set, expert) it takes. */
typedef struct {
    int n, set, expert;
    const uint64_t *key;
    const int *pos;
} lora_rows;

static lora_rows pass_rows(const layer_pass *p, int target) {
    return (lora_rows){p->n_rows, target, 0, p->lora.row_key, p->pos};
}

/* This pass's dropout mask of (layer, set, expert) on buf[q->n, n], in
 * place: each expert draws its own, as each of PEFT's expert modules does. */
static void apply_mask(const layer_pass *p, const lora_rows *q, float *buf, int n) {
    const layer_lora *lo = &p->lora;
    uint64_t at = lo->pass * 4096 + (uint64_t)p->layer;
    rng_stream rs;
    if (q->set < LORA_N_TARGETS)
        rng_init(&rs, lo->seed, "lora-dropout", 12, at * LORA_N_TARGETS + (uint64_t)q->set);
    else
        rng_init(&rs, lo->seed, "lora-dropout-expert", 19,
                 (at * 3 + (uint64_t)(q->set - LORA_EXP_GATE)) * (uint64_t)p->m->cfg.n_experts + (uint64_t)q->expert);
    p->be->dropout_rows(buf, q->n, n, q->key, q->pos, rs.key, lo->dropout);
}

/* x[q->n, n] with the mask applied, in the scratch buffer. */
static const float *dropped(const layer_pass *p, const lora_rows *q, const float *x, int n) {
    backend_copy(p->be, p->lora.xdrop, x, (size_t)q->n * n * sizeof *x);
    apply_mask(p, q, p->lora.xdrop, n);
    return p->lora.xdrop;
}

/* out[q->n, out_dim] += scale * dropout(in) A^T B^T, keeping u = dropout(in) A^T [q->n, r]. */
static void lora_forward(const layer_pass *p, const lora_rows *q, float *out, const float *in, int in_dim,
                         int out_dim, float *u) {
    const backend *be = p->be;
    const lora *l = p->lora.l;
    const float *xd = p->lora.dropout > 0 ? dropped(p, q, in, in_dim) : in;
    be->gemm(false, true, q->n, l->r, in_dim, 1.0f, xd, in_dim, lora_a_at(l, q->set, p->layer, q->expert), in_dim,
             0.0f, u, l->r);
    be->gemm(false, true, q->n, out_dim, l->r, l->scale, u, l->r, lora_b_at(l, q->set, p->layer, q->expert), l->r,
             1.0f, out, out_dim);
}

/* Its backward: adds to din[q->n, in_dim] (when not NULL) and, when the
 * adapter trains, to the gradients of A and B; du is [q->n, r] scratch. */
static void lora_backward(const layer_pass *p, const lora_rows *q, float *din, const float *dout, const float *in,
                          int in_dim, int out_dim, const float *u, float *du) {
    const backend *be = p->be;
    const layer_lora *lo = &p->lora;
    const lora *l = lo->l;
    int r = l->r, R = q->n, s = q->set;
    const float *a = lora_a_at(l, s, p->layer, q->expert), *b = lora_b_at(l, s, p->layer, q->expert);
    be->gemm(false, false, R, r, out_dim, l->scale, dout, out_dim, b, r, 0.0f, du, r);
    if (lo->grad_a && lo->grad_b) { /* the gradients sit where the factors do in the adapter's buffer */
        be->gemm(true, false, out_dim, r, R, l->scale, dout, out_dim, u, r, 1.0f, lo->grad_b[s] + (b - l->b[s]), r);
        const float *xd = lo->dropout > 0 ? dropped(p, q, in, in_dim) : in;
        be->gemm(true, false, r, in_dim, R, 1.0f, du, r, xd, in_dim, 1.0f, lo->grad_a[s] + (a - l->a[s]), in_dim);
    }
    if (!din) return;
    if (lo->dropout > 0) {
        /* d(dropout(x))/dx is the same mask: apply it to du A, then add */
        be->gemm(false, false, R, in_dim, r, 1.0f, du, r, a, in_dim, 0.0f, lo->xdrop, in_dim);
        apply_mask(p, q, lo->xdrop, in_dim);
        be->add_inplace(din, lo->xdrop, (size_t)R * in_dim);
    } else {
        be->gemm(false, false, R, in_dim, r, 1.0f, du, r, a, in_dim, 1.0f, din, in_dim);
    }
}

/* out[n, out_dim] = in W^T (+ bias) for W, parameter tensor `param`
 * [out_dim, in_dim]: its float32 rows, or as model_pack packed it (a frozen
 * base's products on float32 activations). */
static void weight_matmul(const layer_pass *p, int param, float *out, const float *in, const float *w,
                          const float *bias, int n, int in_dim, int out_dim) {
    const model *m = p->m;
    if (m->held[param] != HOLD_PACKED)
        p->be->matmul_forward(out, in, w, bias, n, in_dim, out_dim);
    else if (m->packed_frozen)
        p->be->matmul_forward_frozen(out, in, w, m->held_as[param], bias, n, in_dim, out_dim);
    else
        p->be->matmul_forward_packed(out, in, w, m->held_as[param], bias, n, in_dim, out_dim);
}

/* out = in W^T (+ bias) (+ scale * dropout(in) A^T B^T, keeping u = dropout(in) A^T). */
static void linear_forward(const layer_pass *p, float *out, const float *in, const float *w, const float *bias,
                           int in_dim, int out_dim, int target, float *u) {
    weight_matmul(p, lora_set_param(target), out, in, w, bias, p->n_rows, in_dim, out_dim);
    if (!adapted(p, target)) return;
    lora_rows q = pass_rows(p, target);
    lora_forward(p, &q, out, in, in_dim, out_dim, u);
}

/* weight_matmul's backward over n rows: din (written, or accumulated) and,
 * on float32 rows, dw and db (those not NULL); on a packed frozen base din
 * only (nothing of that base trains: dw, db are NULL there). */
static void weight_backward(const layer_pass *p, int param, float *din, float *dw, float *db, const float *dout,
                            const float *in, const float *w, int n, int in_dim, int out_dim, bool accumulate) {
    const model *m = p->m;
    if (m->packed_frozen && m->held[param] == HOLD_PACKED)
        p->be->matmul_backward_frozen(din, dout, w, m->held_as[param], n, in_dim, out_dim, accumulate);
    else
        p->be->matmul_backward(din, dw, db, dout, in, w, n, in_dim, out_dim, accumulate);
}

/* The backward of linear_forward: din (written, or accumulated), and the
 * gradients of whatever trains (W and bias in full fine-tuning, A and B with
 * LoRA). */
static void linear_backward(const layer_pass *p, float *din, const float *dout, const float *in, const float *w,
                            int in_dim, int out_dim, int target, const float *u, float *dw, float *db, bool accumulate,
                            float *du) {
    weight_backward(p, lora_set_param(target), din, dw, db, dout, in, w, p->n_rows, in_dim, out_dim, accumulate);
    if (!adapted(p, target)) return;
    lora_rows q = pass_rows(p, target);
    lora_backward(p, &q, din, dout, in, in_dim, out_dim, u, du);
}

/* ---- the mixture of experts (layer.h) ----------------------------------------- */

/* Expert x's slice of a stacked tensor of per-expert size (NULL stays NULL). */
static float *of_expert(float *t, int x, size_t size) { return t ? t + (size_t)x * size : NULL; }

/* h = the experts' activation of gate and up over n values: SwiGLU, or gpt_oss's clamped one. */
static void expert_act(const layer_pass *p, float *h, const float *gate, const float *up, size_t n) {
    const model_config *c = &p->m->cfg;
    if (c->swiglu_limit > 0) p->be->swiglu_clamped_forward(h, gate, up, n, c->swiglu_alpha, c->swiglu_limit);
    else p->be->swiglu_forward(h, gate, up, n);
}

/* The routing of a->xn2's rows (their own top k, or p->replay's experts)
 * and p->moe's grouping of them (the slots). */
static void moe_route(const layer_pass *p, const layer_acts *a, const layer_params *w) {
    const model_config *c = &p->m->cfg;
    int R = p->n_rows, E = c->n_experts, k = c->n_experts_used;
    assert(p->moe);
    p->be->matmul_forward(a->probs, a->xn2, w->router, w->router_b, R, c->dim, E);
    if (p->replay)
        p->be->moe_route_replay_forward(a->probs, a->sel, a->route_w, a->probs, p->replay, R, E, k, c->moe_norm_topk);
    else
        p->be->moe_route_forward(a->probs, a->sel, a->route_w, a->probs, R, E, k, c->moe_norm_topk);
    p->be->moe_group(p->moe->row_of, p->moe->slot_of, p->moe->offsets, a->sel, R, k, E);
}

/* The rows of expert x's slots s0 .. s0 + n for set s's adapter. */
static lora_rows expert_rows(const layer_pass *p, int set, int x, int s0, int n) {
    return (lora_rows){n, set, x, p->moe->key + s0, p->moe->pos + s0};
}

/* With LoRA dropout on an expert set: each slot's dropout key and position,
 * its token's (p->moe's grouping made). */
static void slot_keys(const layer_pass *p) {
    const model_config *c = &p->m->cfg;
    if (!(p->lora.dropout > 0) ||
        !(adapted(p, LORA_EXP_GATE) || adapted(p, LORA_EXP_UP) || adapted(p, LORA_EXP_DOWN)))
        return;
    for (int s = 0; s < p->n_rows * c->n_experts_used; s++) {
        int row = p->moe->row_of[s];
        p->moe->key[s] = p->lora.row_key[row], p->moe->pos[s] = p->pos[row];
    }
}

/* Expert x's product of set s over its n slots from s0: out = in W_x^T
 * (+ bias) (+ its adapter's, keeping u's rows). */
static void expert_forward(const layer_pass *p, const layer_acts *a, int set, int x, int s0, int n, float *out,
                           const float *in, const float *w, const float *bias, int in_dim, int out_dim) {
    int param = lora_set_param(set);
    weight_matmul(p, param, out + (size_t)s0 * out_dim, in + (size_t)s0 * in_dim,
                  model_expert_weight(p->m, param, w, x, out_dim, in_dim), bias, n, in_dim, out_dim);
    if (!adapted(p, set)) return;
    lora_rows q = expert_rows(p, set, x, s0, n);
    lora_forward(p, &q, out + (size_t)s0 * out_dim, in + (size_t)s0 * in_dim, in_dim, out_dim,
                 a->u[set] + (size_t)s0 * p->lora.l->r);
}

/* Its backward: din's rows written (or accumulated), and the gradients of
 * what trains (W_x and its bias from g, or the adapter's). */
static void expert_backward(const layer_pass *p, const layer_acts *a, const layer_grad_scratch *s, int set, int x,
                            int s0, int n, float *din, const float *dout, const float *in, const float *w, float *gw,
                            float *gb, int in_dim, int out_dim, bool accumulate) {
    size_t wsz = (size_t)out_dim * in_dim;
    int param = lora_set_param(set);
    din += (size_t)s0 * in_dim, dout += (size_t)s0 * out_dim, in += (size_t)s0 * in_dim;
    /* the gradients are float32 rows wherever they are */
    weight_backward(p, param, din, of_expert(gw, x, wsz), of_expert(gb, x, (size_t)out_dim), dout, in,
                    model_expert_weight(p->m, param, w, x, out_dim, in_dim), n, in_dim, out_dim, accumulate);
    if (!adapted(p, set)) return;
    lora_rows q = expert_rows(p, set, x, s0, n);
    lora_backward(p, &q, din, dout, in, in_dim, out_dim, a->u[set] + (size_t)s0 * p->lora.l->r, s->du);
}

/* out[R, dim] = FFN(xn2) of a mixture of experts, each expert's matrices
 * (and adapters) multiplied once over the slots routed to it. */
static void moe_forward(const layer_pass *p, const layer_acts *a, const layer_params *w, float *out) {
    const backend *be = p->be;
    const model_config *c = &p->m->cfg;
    int R = p->n_rows, d = c->dim, k = c->n_experts_used, I = c->moe_hidden_dim;
    const int *at = p->moe->offsets;
    moe_route(p, a, w);
    slot_keys(p);
    be->gather_rows(a->xe, a->xn2, p->moe->row_of, R * k, d);
    for (int x = 0; x < c->n_experts; x++) {
        int s0 = at[x], n = at[x + 1] - at[x];
        if (!n) continue;
        expert_forward(p, a, LORA_EXP_GATE, x, s0, n, a->gate, a->xe, w->exp_gate, of_expert(w->exp_gate_b, x, I), d, I);
        expert_forward(p, a, LORA_EXP_UP, x, s0, n, a->up, a->xe, w->exp_up, of_expert(w->exp_up_b, x, I), d, I);
    }
    expert_act(p, a->h, a->gate, a->up, (size_t)R * k * I);
    for (int x = 0; x < c->n_experts; x++) {
        int s0 = at[x], n = at[x + 1] - at[x];
        if (n) expert_forward(p, a, LORA_EXP_DOWN, x, s0, n, a->ye, a->h, w->exp_down, of_expert(w->exp_down_b, x, d), I, d);
    }
    be->moe_combine_forward(out, a->ye, a->route_w, p->moe->slot_of, R, k, d);
}

/* Its backward: reads s->dx = d(loss)/d(out), writes d(loss)/d(xn2) to s->dxn,
 * adds the router's and experts' gradients to g's (those not NULL), or the
 * experts' adapters'. */
static void moe_backward(const layer_pass *p, const layer_acts *a, const layer_params *w, const layer_params *g,
                         const layer_grad_scratch *s) {
    const backend *be = p->be;
    const model_config *c = &p->m->cfg;
    int R = p->n_rows, d = c->dim, E = c->n_experts, k = c->n_experts_used, I = c->moe_hidden_dim;
    const int *at = p->moe->offsets;
    p->be->moe_group(p->moe->row_of, p->moe->slot_of, p->moe->offsets, a->sel, R, k, E);
    slot_keys(p);
    be->moe_combine_backward(s->dye, s->dw, s->dx, a->ye, a->route_w, p->moe->slot_of, R, k, d);
    expert_act(p, a->h, a->gate, a->up, (size_t)R * k * I);
    for (int x = 0; x < E; x++) {
        int s0 = at[x], n = at[x + 1] - at[x];
        if (n)
            expert_backward(p, a, s, LORA_EXP_DOWN, x, s0, n, s->dgate, s->dye, a->h, w->exp_down, g->exp_down,
                            g->exp_down_b, I, d, false);
    }
    if (c->swiglu_limit > 0)
        be->swiglu_clamped_backward(s->dgate, s->dup, s->dgate, a->gate, a->up, (size_t)R * k * I, c->swiglu_alpha,
                                    c->swiglu_limit);
    else
        be->swiglu_backward(s->dgate, s->dup, s->dgate, a->gate, a->up, (size_t)R * k * I);
    be->gather_rows(a->xe, a->xn2, p->moe->row_of, R * k, d);
    for (int x = 0; x < E; x++) {
        int s0 = at[x], n = at[x + 1] - at[x];
        if (!n) continue;
        expert_backward(p, a, s, LORA_EXP_GATE, x, s0, n, s->dxe, s->dgate, a->xe, w->exp_gate, g->exp_gate,
                        g->exp_gate_b, d, I, false);
        expert_backward(p, a, s, LORA_EXP_UP, x, s0, n, s->dxe, s->dup, a->xe, w->exp_up, g->exp_up, g->exp_up_b, d, I,
                        true);
    }
    backend_zero(be, s->dxn, (size_t)R * d * sizeof *s->dxn);
    be->scatter_add_rows(s->dxn, s->dxe, p->moe->row_of, R * k, d);
    be->moe_route_backward(s->dlogits, s->dw, a->probs, a->sel, a->route_w, R, E, k, c->moe_norm_topk);
    if (p->balance_scale > 0) {
        double b = be->moe_balance_backward(s->dlogits, a->probs, a->sel, p->row_mult, R, E, k, p->balance_scale);
        if (p->balance_sum) *p->balance_sum += p->balance_weight * b;
    }
    be->matmul_backward(s->dxn, g->router, g->router_b, s->dlogits, a->xn2, w->router, R, d, E, true);
}

/* ---- the layer ------------------------------------------------------------------ */

/* The heads layer l's attention runs over, with its window, sinks and scale. */
static attn_shape layer_attn_shape(const layer_pass *p, const layer_params *w) {
    const model_config *c = &p->m->cfg;
    attn_shape sh = model_attn_shape(c);
    sh.window = config_layer_window(c, p->layer);
    sh.sinks = w->sinks;
    if (c->rope_yarn) sh.scale = (float)(rope_score_scale(c) / sqrt((double)c->head_dim));
    return sh;
}

/* Attention's backward over the virtual layout of shared prompts (attn_share). */
static void shared_attention_backward(const layer_pass *p, const layer_acts *a, const layer_grad_scratch *s,
                                      attn_shape shape) {
    const backend *be = p->be;
    const model_config *c = &p->m->cfg;
    const attn_share *sh = p->share;
    int R = p->n_rows, Rv = sh->n_virtual, nh = c->n_heads, qd = nh * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    be->gather_rows(sh->q, a->q, sh->vrow, Rv, qd);
    be->gather_rows(sh->out, a->att, sh->vrow, Rv, qd);
    be->gather_rows(sh->lse, a->lse, sh->vrow, Rv, nh);
    be->gather_rows(sh->k, a->k, sh->vrow, Rv, kvd);
    be->gather_rows(sh->v, a->v, sh->vrow, Rv, kvd);
    backend_zero(be, sh->dout, (size_t)Rv * qd * sizeof *sh->dout);
    be->scatter_add_rows(sh->dout, s->datt, sh->own, R, qd);
    be->attention_backward(sh->dq, sh->dk, sh->dv, sh->dout, sh->out, sh->lse, sh->q, sh->k, sh->v, p->n_seqs, p->start,
                           shape, p->ws);
    be->gather_rows(s->dq, sh->dq, sh->own, R, qd);
    backend_zero(be, s->dk, (size_t)R * kvd * sizeof *s->dk);
    backend_zero(be, s->dv, (size_t)R * kvd * sizeof *s->dv);
    be->scatter_add_rows(s->dk, sh->dk, sh->vrow, Rv, kvd);
    be->scatter_add_rows(s->dv, sh->dv, sh->vrow, Rv, kvd);
}

void layer_forward(const layer_pass *p, const layer_acts *a, const float *x_in, float *x_out) {
    const backend *be = p->be;
    const model_config *c = &p->m->cfg;
    const layer_params w = model_layer_weights(p->m, p->layer);
    int R = p->n_rows, d = c->dim, hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads;
    int qd = nh * hd, kvd = nkv * hd, hid = c->hidden_dim;
    float eps = c->norm_eps;

    /* attention block */
    be->rmsnorm_forward(a->xn1, a->rstd1, x_in, w.attn_norm, R, d, eps);
    float *q = a->q_raw ? a->q_raw : a->q, *k = a->k_raw ? a->k_raw : a->k;
    linear_forward(p, q, a->xn1, w.wq, w.bq, d, qd, LORA_Q, a->u[LORA_Q]);
    linear_forward(p, k, a->xn1, w.wk, w.bk, d, kvd, LORA_K, a->u[LORA_K]);
    linear_forward(p, a->v, a->xn1, w.wv, w.bv, d, kvd, LORA_V, a->u[LORA_V]);
    if (c->qk_norm) { /* qwen3: RMSNorm over each head, before RoPE */
        be->rmsnorm_forward(a->q, a->q_rstd, q, w.q_norm, R * nh, hd, eps);
        be->rmsnorm_forward(a->k, a->k_rstd, k, w.k_norm, R * nkv, hd, eps);
    }
    be->rope_forward(a->q, p->cos_t, p->sin_t, R, nh, hd);
    be->rope_forward(a->k, p->cos_t, p->sin_t, R, nkv, hd);
    kv_view kv = p->kv;
    if (kv.k) {
        be->kv_write(&kv, a->k, a->v, p->pos, R);
    } else if (p->share) { /* every sequence's keys and values, its prompt's included */
        be->gather_rows(p->share->k, a->k, p->share->vrow, p->share->n_virtual, kvd);
        be->gather_rows(p->share->v, a->v, p->share->vrow, p->share->n_virtual, kvd);
        kv.k = p->share->k, kv.v = p->share->v, kv.kv_dim = kvd;
    } else {
        kv.k = a->k, kv.v = a->v, kv.kv_dim = kvd;
    }
    be->attention_forward(a->att, a->lse, a->q, &kv, p->pos, R, layer_attn_shape(p, &w), p->ws);
    linear_forward(p, a->x_mid, a->att, w.wo, w.bo, qd, d, LORA_O, a->u[LORA_O]);
    be->add_inplace(a->x_mid, x_in, (size_t)R * d);

    /* MLP block */
    be->rmsnorm_forward(a->xn2, a->rstd2, a->x_mid, w.ffn_norm, R, d, eps);
    if (w.router) {
        moe_forward(p, a, &w, x_out);
    } else {
        linear_forward(p, a->gate, a->xn2, w.w_gate, NULL, d, hid, LORA_GATE, a->u[LORA_GATE]);
        linear_forward(p, a->up, a->xn2, w.w_up, NULL, d, hid, LORA_UP, a->u[LORA_UP]);
        be->swiglu_forward(a->h, a->gate, a->up, (size_t)R * hid);
        linear_forward(p, x_out, a->h, w.w_down, NULL, hid, d, LORA_DOWN, a->u[LORA_DOWN]);
    }
    be->add_inplace(x_out, a->x_mid, (size_t)R * d);
}

void layer_backward(const layer_pass *p, const layer_acts *a, const float *x_in, const layer_grad_scratch *s) {
    const backend *be = p->be;
    const model_config *c = &p->m->cfg;
    const layer_params w = model_layer_weights(p->m, p->layer);
    const layer_params none = {0};
    const layer_params g = p->grad ? model_layer(p->grad, c, p->layer) : none;
    int R = p->n_rows, d = c->dim, hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads;
    int qd = nh * hd, kvd = nkv * hd, hid = c->hidden_dim;

    /* MLP block */
    if (w.router) {
        moe_backward(p, a, &w, &g, s);
    } else {
        be->swiglu_forward(a->h, a->gate, a->up, (size_t)R * hid);
        linear_backward(p, s->dgate, s->dx, a->h, w.w_down, hid, d, LORA_DOWN, a->u[LORA_DOWN], g.w_down, NULL, false,
                        s->du);
        be->swiglu_backward(s->dgate, s->dup, s->dgate, a->gate, a->up, (size_t)R * hid);
        linear_backward(p, s->dxn, s->dgate, a->xn2, w.w_gate, d, hid, LORA_GATE, a->u[LORA_GATE], g.w_gate, NULL,
                        false, s->du);
        linear_backward(p, s->dxn, s->dup, a->xn2, w.w_up, d, hid, LORA_UP, a->u[LORA_UP], g.w_up, NULL, true, s->du);
    }
    be->rmsnorm_backward(s->dtmp, g.ffn_norm, s->dxn, a->x_mid, w.ffn_norm, a->rstd2, R, d);
    be->add_inplace(s->dx, s->dtmp, (size_t)R * d);

    /* attention block */
    linear_backward(p, s->datt, s->dx, a->att, w.wo, qd, d, LORA_O, a->u[LORA_O], g.wo, g.bo, false, s->du);
    attn_shape sh = layer_attn_shape(p, &w);
    if (g.sinks) be->attention_sinks_backward(g.sinks, a->att, s->datt, a->lse, w.sinks, R, nh, hd);
    if (p->share)
        shared_attention_backward(p, a, s, sh);
    else
        be->attention_backward(s->dq, s->dk, s->dv, s->datt, a->att, a->lse, a->q, a->k, a->v, p->n_seqs, p->start, sh,
                               p->ws);
    be->rope_backward(s->dq, p->cos_t, p->sin_t, R, nh, hd);
    be->rope_backward(s->dk, p->cos_t, p->sin_t, R, nkv, hd);
    if (c->qk_norm) {
        be->rmsnorm_backward(s->dq, g.q_norm, s->dq, a->q_raw, w.q_norm, a->q_rstd, R * nh, hd);
        be->rmsnorm_backward(s->dk, g.k_norm, s->dk, a->k_raw, w.k_norm, a->k_rstd, R * nkv, hd);
    }
    linear_backward(p, s->dxn, s->dq, a->xn1, w.wq, d, qd, LORA_Q, a->u[LORA_Q], g.wq, g.bq, false, s->du);
    linear_backward(p, s->dxn, s->dk, a->xn1, w.wk, d, kvd, LORA_K, a->u[LORA_K], g.wk, g.bk, true, s->du);
    linear_backward(p, s->dxn, s->dv, a->xn1, w.wv, d, kvd, LORA_V, a->u[LORA_V], g.wv, g.bv, true, s->du);
    be->rmsnorm_backward(s->dtmp, g.attn_norm, s->dxn, x_in, w.attn_norm, a->rstd1, R, d);
    be->add_inplace(s->dx, s->dtmp, (size_t)R * d);
}
