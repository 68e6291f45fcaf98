/* The inference forward over a batch of rows (prefill, decode, or a mix):
 * the embeddings, layer.c's layer over every layer with the KV cache (and
 * the model's unmerged adapter, when it keeps one: model.h), the
 * final RMSNorm on the rows wanted (model_forward_hidden) and the LM head
 * (model_forward). Every layer reuses one set of scratch activations; a
 * mixture of experts' routing is kept for the caller (model_scratch.routes). */
#include <assert.h>

#include "layer.h"
#include "model.h"

const backend *model_backend(const model *m) { return m->dev ? m->dev->be : backend_cpu(); }

/* The experts each of R rows went to in the layer just run, read from its
 * grouping's host arrays (sel may be a device's): row r's j-th choice, in
 * sel's order, at to[r * stride + j]. Assignment r * k + j sits in slot
 * slot_of[r * k + j], which lies in its expert's range of offsets. */
static void keep_routing(const moe_index *x, int R, int k, int E, int32_t *to, size_t stride) {
    for (int r = 0; r < R; r++)
        for (int j = 0; j < k; j++) {
            int slot = x->slot_of[r * k + j], lo = 0, hi = E - 1;
            while (lo < hi) { /* the last expert whose range starts at or before slot */
                int mid = (lo + hi + 1) / 2;
                if (x->offsets[mid] <= slot) lo = mid;
                else hi = mid - 1;
            }
            to[(size_t)r * stride + j] = lo;
        }
}

void model_embed(const model *m, const backend *be, float *x, const int32_t *token, int n) {
    if (m->held[P_TOK_EMBD] == HOLD_PACKED) /* a frozen base's, on the host or a device */
        be->gather_rows_packed(x, model_global_weights(m).tok_embd, m->held_as[P_TOK_EMBD], token, n, m->cfg.dim);
    else
        be->gather_rows(x, model_global_weights(m).tok_embd, token, n, m->cfg.dim);
}

/* The packed head's blocks: the host's, or a frozen base's device copy. */
static const void *head_blocks(const model *m) { return m->dev ? m->dev->lm_head : m->head_packed; }

void model_head_forward(const model *m, const backend *be, float *logits, const float *x, int n) {
    int d = m->cfg.dim, V = m->cfg.vocab_size;
    assert(m->w.lm_head);
    if (!m->head_packed)
        be->matmul_forward(logits, x, model_global_weights(m).lm_head, NULL, n, d, V);
    else if (m->packed_frozen)
        be->matmul_forward_frozen(logits, x, head_blocks(m), m->held_as[P_LM_HEAD], NULL, n, d, V);
    else
        be->matmul_forward_packed(logits, x, head_blocks(m), m->held_as[P_LM_HEAD], NULL, n, d, V);
}

void model_head_backward(const model *m, const backend *be, float *dx, float *dw, const float *dlogits,
                         const float *x, int n) {
    int d = m->cfg.dim, V = m->cfg.vocab_size;
    assert(!m->head_packed || (m->packed_frozen && !dw)); /* a packed head trains nothing */
    if (m->head_packed)
        be->matmul_backward_frozen(dx, dlogits, head_blocks(m), m->held_as[P_LM_HEAD], n, d, V, false);
    else
        be->matmul_backward(dx, dw, NULL, dlogits, x, model_global_weights(m).lm_head, n, d, V, false);
}

int model_forward_hidden(const model *m, kv_cache *c, int n_rows, const int *seq, const int *pos,
                         const int32_t *token, const bool *want, float *hidden, model_scratch *s) {
    const backend *be = model_backend(m);
    const model_config *cf = &m->cfg;
    int R = n_rows, d = cf->dim;
    assert(R >= 0 && R <= s->max_rows && c->kv_dim == cf->n_kv_heads * cf->head_dim && c->n_layers == cf->n_layers);
    if (R == 0) return 0;
    for (int r = 0; r < R; r++) {
        assert(token[r] >= 0 && token[r] < cf->vocab_size);
        assert(seq[r] >= 0 && seq[r] < c->n_seqs);
        assert(pos[r] >= 0 && pos[r] < c->max_len && pos[r] < s->max_len);
    }
    const global_params g = model_global_weights(m);
    model_embed(m, be, s->x, token, R);
    be->rope_cos_sin(s->cos_t, s->sin_t, m->inv_freq, cf->head_dim / 2, pos, R);
    kv_cache_row_offsets(c, seq, R, s->row_kv);

    /* one set of activations for every layer: nothing is kept for a backward */
    layer_acts a = {.xn1 = s->xn, .q = s->q, .k = s->k, .v = s->v, .att = s->xn, .x_mid = s->x_mid, .xn2 = s->xn,
                    .gate = s->gate, .up = s->up, .h = s->gate, .probs = s->probs, .sel = s->sel,
                    .route_w = s->route_w, .xe = s->xe, .ye = s->ye};
    layer_pass p = {.be = be, .m = m, .n_rows = R, .pos = pos, .cos_t = s->cos_t, .sin_t = s->sin_t, .ws = &s->ws,
                    .moe = s->moe};
    if (m->adapter) { /* unmerged over a frozen base: each target's u in turn in one buffer */
        assert(s->u && s->lora_r >= m->adapter->r);
        p.lora = (layer_lora){.l = m->adapter, .on = true};
        for (int t = 0; t < LORA_N_SETS; t++) a.u[t] = s->u; /* an expert set's by slot: [R * k, r] */
    }
    int Lm = config_ffn_layers(cf, true), k = cf->n_experts_used;
    for (int l = 0; l < cf->n_layers; l++) {
        p.layer = l;
        p.kv = kv_cache_view(c, l, s->row_kv);
        layer_forward(&p, &a, s->x, s->x);
        if (config_layer_moe(cf, l))
            keep_routing(s->moe, R, k, cf->n_experts, s->routes + (size_t)config_ffn_slot(cf, l) * k, (size_t)Lm * k);
    }

    /* The final norm only for the rows wanted. */
    int n_want = 0;
    for (int r = 0; r < R; r++)
        if (!want || want[r]) s->pick[n_want++] = r;
    if (n_want) {
        be->gather_rows(hidden, s->x, s->pick, n_want, d);
        be->rmsnorm_forward(hidden, NULL, hidden, g.out_norm, n_want, d, cf->norm_eps);
    }
    return n_want;
}

void model_forward(const model *m, kv_cache *c, int n_rows, const int *seq, const int *pos,
                   const int32_t *token, const bool *want_logits, float *logits, model_scratch *s) {
    assert(m->w.lm_head);
    const backend *be = model_backend(m);
    int n = model_forward_hidden(m, c, n_rows, seq, pos, token, want_logits, s->xn, s);
    if (n) model_head_forward(m, be, logits, s->xn, n);
}
