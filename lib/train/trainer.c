/* The training driver (trainer.h): the batch's rows, embeddings and RoPE
 * tables, lib/model/layer.c's layer_forward over every layer with its
 * activations kept (or recomputed), the LM head's log-softmax in chunks, and
 * layer_backward in reverse. The layer and the ops are the ones rollout
 * runs; only what is kept differs. */
#include "trainer.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../model/layer.h"
#include "../util/bigmem.h"

struct trainer_acts {
    float *mem;
    size_t n_floats;
    layer_acts *layer;
    float **x_in; /* [L]: each layer's input */
    float *x_final, *cos_t, *sin_t;
    int *row_pos, *target_row;
    int32_t *target_tok;
    size_t *row_kv;
    uint64_t *row_key;
    /* the batch's rows once shared prompts are counted once (attn_share):
     * n_rows of them, their tokens; share.n_virtual = 0 when none is shared */
    int n_rows;
    int32_t *row_tok, *vrow, *own;
    float *row_mult; /* [rows]: how many sequences each row is a token of (NULL when none is shared) */
    attn_share share;
    float *xraw, *xf, *rstd_f, *logits;
    layer_grad_scratch gs;
    float *dxf, *xdrop, *out_tmp;
    float *lse_head; /* [TRAIN_HEAD_CHUNK]: the backward's chunk of log-sum-exps */
    /* On a device (the model's backend keeps memory of its own, lib/ops/
     * backend.h): the head's outputs and the backward's inputs, [max_targets]
     * each, copied from and to the caller's host arrays. NULL on the CPU,
     * which reads and writes the caller's arrays in place. */
    float *logp_dev, *ent_dev, *dlogp_dev, *dent_dev, *ent_in_dev;
    gerr err; /* the first failure of a copy to or from the device (trainer_check) */
    const backend *mem_be; /* whose memory mem and the gradients are: a device's when it has memory entries */
    attn_workspace ws;
    moe_index moe; /* a mixture of experts' index arrays (none held for a dense model) */
    /* a batch's routing replayed (train_batch.routing): [Lm][max_computed][k]
     * host ints, each computed row's experts (-1s: its own); NULL for a dense model */
    int32_t *replay;
    bool replaying; /* the batch set up has routing */
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

/* n zeroed floats in be's memory: prefaulted host memory on the CPU
 * (bigmem.h), the device's otherwise. NULL when out of memory (on a device
 * e says why). */
static float *alloc_floats(const backend *be, size_t n, gerr *e) {
    if (!be->mem_alloc) return big_calloc(n ? n : 1, sizeof(float));
    void *p = NULL;
    if (be->mem_alloc(&p, (n ? n : 1) * sizeof(float), e)) return NULL;
    be->mem_zero(p, n * sizeof(float));
    return p;
}

static void free_floats(const backend *be, float *p) {
    if (p && be->mem_free)
        be->mem_free(p);
    else
        free(p);
}

static bool on_device(const trainer_acts *ac) { return ac->mem_be->mem_alloc != NULL; }

static int n_threads_now(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* One layer's activations, all kept (the backward reads each): its FFN's
 * for a dense layer, a mixture of experts, or both (shared by layers of
 * either kind). h and xe are shared by every layer (recomputed by the backward). */
typedef enum { FFN_DENSE = 1, FFN_MOE = 2, FFN_EITHER = 3 } ffn_kind;

static void carve_slot(arena *a, layer_acts *s, const model_config *c, const lora *l, int R, float *h, float *xe,
                       ffn_kind ffn) {
    size_t d = c->dim, qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    size_t k = (size_t)c->n_experts_used, width = 0;
    if (ffn & FFN_DENSE) width = c->hidden_dim;
    if ((ffn & FFN_MOE) && k * c->moe_hidden_dim > width) width = k * c->moe_hidden_dim;
    *s = (layer_acts){0};
    s->xn1 = take(a, R * d), s->rstd1 = take(a, R);
    if (c->qk_norm) {
        s->q_raw = take(a, R * qd), s->k_raw = take(a, R * kvd);
        s->q_rstd = take(a, (size_t)R * c->n_heads), s->k_rstd = take(a, (size_t)R * c->n_kv_heads);
    }
    s->q = take(a, R * qd), s->k = take(a, R * kvd), s->v = take(a, R * kvd);
    s->att = take(a, R * qd), s->lse = take(a, (size_t)R * c->n_heads);
    s->x_mid = take(a, R * d), s->xn2 = take(a, R * d), s->rstd2 = take(a, R);
    s->gate = take(a, R * width), s->up = take(a, R * width);
    s->h = h; /* silu(gate) * up is recomputed by the backward */
    for (int t = 0; t < LORA_N_SETS; t++) { /* the FFN's adapters in the layers of their kind */
        bool kept = l && l->a[t] && (t < LORA_GATE || (ffn & (t < LORA_N_TARGETS ? FFN_DENSE : FFN_MOE)));
        s->u[t] = kept ? take(a, (size_t)R * (t < LORA_N_TARGETS ? 1 : k) * l->r) : NULL;
    }
    if (ffn & FFN_MOE) {
        s->probs = take(a, (size_t)R * c->n_experts);
        s->sel = (int32_t *)take(a, R * k); /* int32 in float-sized slots */
        s->route_w = take(a, R * k), s->ye = take(a, R * k * d);
        s->xe = xe;
    }
}

/* Lays out every activation; a->base NULL only counts the floats. Every
 * layer gets its own slot unless nothing needs them afterwards (a forward
 * only) or the backward recomputes them (recompute); its input always has
 * its own when a backward will read it. */
static void carve(arena *a, trainer *t, trainer_acts *ac) {
    const model_config *c = &t->m->cfg;
    size_t R = t->max_computed, Rv = t->max_rows, d = c->dim, qd = (size_t)c->n_heads * c->head_dim;
    size_t kvd = (size_t)c->n_kv_heads * c->head_dim, hid = c->hidden_dim, T = t->max_targets;
    size_t ffn = layer_ffn_width(c);
    bool moe = config_ffn_layers(c, true) > 0;
    size_t slots = moe ? R * c->n_experts_used : 0;
    int L = c->n_layers;
    bool per_layer = t->mode != TRAINER_INFER && !t->recompute;
    float *h = take(a, R * ffn), *xe = moe ? take(a, slots * d) : NULL;
    layer_acts shared;
    ffn_kind either = (config_ffn_layers(c, false) ? FFN_DENSE : 0) | (moe ? FFN_MOE : 0);
    carve_slot(a, &shared, c, t->lora, (int)R, h, xe, per_layer ? (ffn_kind)(config_layer_moe(c, 0) ? FFN_MOE : FFN_DENSE) : either);
    for (int l = 0; l < L; l++) {
        if (per_layer && l > 0)
            carve_slot(a, &ac->layer[l], c, t->lora, (int)R, h, xe, config_layer_moe(c, l) ? FFN_MOE : FFN_DENSE);
        else
            ac->layer[l] = shared;
        ac->x_in[l] = (t->mode != TRAINER_INFER || l == 0) ? take(a, R * d) : ac->x_in[0];
    }
    ac->x_final = take(a, R * d);
    ac->cos_t = take(a, R * c->head_dim / 2), ac->sin_t = take(a, R * c->head_dim / 2);
    ac->xraw = take(a, T * d), ac->xf = take(a, T * d), ac->rstd_f = take(a, T);
    ac->logits = take(a, (size_t)TRAIN_HEAD_CHUNK * c->vocab_size);
    ac->lse_head = take(a, TRAIN_HEAD_CHUNK);
    if (on_device(ac)) {
        ac->logp_dev = take(a, T), ac->ent_dev = take(a, T);
        if (t->mode != TRAINER_INFER)
            ac->dlogp_dev = take(a, T), ac->dent_dev = take(a, T), ac->ent_in_dev = take(a, T);
    }
    ac->out_tmp = take(a, R * d);
    size_t max_in = hid > qd ? hid : qd;
    max_in = max_in > d ? max_in : d;
    if (moe && (size_t)c->moe_hidden_dim > max_in) max_in = c->moe_hidden_dim; /* an expert's down */
    ac->xdrop = t->lora && t->lora->dropout > 0 ? take(a, R * max_in) : NULL;
    if (t->mode != TRAINER_INFER) {
        layer_grad_scratch *g = &ac->gs;
        g->dx = take(a, R * d), g->dtmp = take(a, R * d), g->dxn = take(a, R * (qd > d ? qd : d));
        g->dq = take(a, R * qd), g->dk = take(a, R * kvd), g->dv = take(a, R * kvd), g->datt = take(a, R * qd);
        g->dgate = take(a, R * ffn), g->dup = take(a, R * ffn);
        g->du = t->lora ? take(a, R * t->lora->r) : NULL;
        if (moe) {
            g->dxe = take(a, slots * d), g->dye = take(a, slots * d), g->dw = take(a, slots);
            g->dlogits = take(a, R * c->n_experts);
        }
        ac->dxf = take(a, (size_t)TRAIN_HEAD_CHUNK * d);
    }
    ac->ws.buf = take(a, (size_t)ac->ws.n_threads * ac->ws.stride);
    attn_share *sh = &ac->share;
    sh->k = take(a, Rv * kvd), sh->v = take(a, Rv * kvd);
    if (t->mode != TRAINER_INFER) {
        sh->q = take(a, Rv * qd), sh->out = take(a, Rv * qd), sh->dout = take(a, Rv * qd), sh->dq = take(a, Rv * qd);
        sh->dk = take(a, Rv * kvd), sh->dv = take(a, Rv * kvd), sh->lse = take(a, Rv * (size_t)c->n_heads);
    }
}

int train_batch_targets(const train_batch *b) {
    int n = 0;
    for (int s = 0; s < b->n_seqs; s++) {
        if (!b->target) {
            n += b->start[s + 1] - b->start[s] - b->n_prompt[s];
            continue;
        }
        for (int r = b->start[s] + b->n_prompt[s]; r < b->start[s + 1]; r++) n += b->target[r] != 0;
    }
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
        for (int i = 0; i < LORA_N_SETS; i++) {
            t->grad_a[i] = l->a[i] ? t->grad + (l->a[i] - l->memory) : NULL;
            t->grad_b[i] = l->b[i] ? t->grad + (l->b[i] - l->memory) : NULL;
        }
    }
}

int trainer_compute_backend(const char *compute, const model *m, const backend *cpu_bf16, const backend **be,
                            gerr *e) {
    /* a device runs its own products (policy_load refused f32 there) */
    if (model_backend(m)->mem_alloc || !strcmp(compute, "f32")) {
        *be = model_backend(m);
        return 0;
    }
    if (strcmp(compute, "bf16")) return gerr_set(e, EX_USAGE, "--compute: expected f32 or bf16, got '%s'", compute);
    if (!cpu_bf16)
        return gerr_set(e, EX_UNAVAILABLE, "--compute bf16: this CPU has no AVX-512 BF16 (vdpbf16ps); use --compute f32");
    *be = cpu_bf16;
    return 0;
}

int trainer_init(trainer *t, const model *m, lora *l, trainer_mode mode, bool recompute, int max_rows,
                 int max_computed, int max_len, int max_targets, gerr *e) {
    memset(t, 0, sizeof *t);
    if (mode == TRAINER_LORA && !l) return gerr_set(e, EX_SOFTWARE, "trainer: LoRA mode without an adapter");
    t->m = m, t->be = model_backend(m), t->lora = l, t->mode = mode, t->recompute = recompute;
    t->max_rows = max_rows, t->max_len = max_len, t->max_targets = max_targets > 0 ? max_targets : 1;
    t->max_computed = max_computed > 0 && max_computed < max_rows ? max_computed : max_rows;
    int rows = t->max_computed;
    trainer_acts *ac = calloc(1, sizeof *ac);
    if (!ac) return gerr_set(e, EX_SOFTWARE, "out of memory for the trainer");
    t->acts = ac;
    ac->mem_be = t->be;
    /* the CPU's attention takes a scratch per thread; a device's none */
    ac->ws.n_threads = on_device(ac) ? 1 : n_threads_now();
    ac->ws.stride = attn_workspace_floats(model_attn_shape(&m->cfg), max_len);
    ac->layer = calloc((size_t)m->cfg.n_layers, sizeof *ac->layer);
    ac->x_in = calloc((size_t)m->cfg.n_layers, sizeof *ac->x_in);
    ac->ws.tasks = malloc((size_t)rows * (size_t)m->cfg.n_kv_heads * 3 * sizeof *ac->ws.tasks);
    ac->row_pos = malloc((size_t)rows * sizeof *ac->row_pos);
    ac->row_kv = malloc((size_t)rows * sizeof *ac->row_kv);
    ac->row_key = malloc((size_t)rows * sizeof *ac->row_key);
    ac->row_tok = malloc((size_t)rows * sizeof *ac->row_tok);
    ac->vrow = malloc((size_t)max_rows * sizeof *ac->vrow);
    ac->own = malloc((size_t)rows * sizeof *ac->own);
    ac->row_mult = malloc((size_t)rows * sizeof *ac->row_mult);
    ac->target_row = malloc((size_t)t->max_targets * sizeof *ac->target_row);
    ac->target_tok = malloc((size_t)t->max_targets * sizeof *ac->target_tok);
    size_t n_replay = (size_t)config_ffn_layers(&m->cfg, true) * rows * m->cfg.n_experts_used;
    if (n_replay) ac->replay = malloc(n_replay * sizeof *ac->replay);
    arena a = {NULL, 0};
    carve(&a, t, ac);
    ac->n_floats = a.used;
    t->n_grad = mode == TRAINER_FULL ? m->n_params : mode == TRAINER_LORA ? l->n_params : 0;
    gerr e_moe = {0};
    bool host_ok = ac->layer && ac->x_in && ac->ws.tasks && ac->row_pos && ac->row_kv && ac->row_key && ac->row_tok &&
                   ac->vrow && ac->own && ac->row_mult && ac->target_row && ac->target_tok && (!n_replay || ac->replay) &&
                   !moe_index_alloc(&ac->moe, &m->cfg, rows, &e_moe);
    if (host_ok) ac->mem = alloc_floats(t->be, a.used, e);
    if (host_ok && ac->mem && t->n_grad) t->grad = alloc_floats(t->be, t->n_grad, e);
    if (!host_ok || !ac->mem || (t->n_grad && !t->grad)) {
        bool device_said = on_device(ac) && host_ok;
        trainer_free(t);
        if (device_said) return e->code;
        return gerr_set(e, EX_SOFTWARE, "out of memory for training activations (%.0f MiB; try --micro-batch smaller or --recompute)",
                        (double)a.used * 4 / 1048576);
    }
    a = (arena){ac->mem, 0};
    carve(&a, t, ac);
    point_grads(t);
    return 0;
}

void trainer_free(trainer *t) {
    trainer_acts *ac = t->acts;
    if (ac) {
        free_floats(ac->mem_be, t->grad);
        free(t->grad_sum);
        free_floats(ac->mem_be, ac->mem);
        free(ac->layer);
        free(ac->x_in);
        free(ac->ws.tasks);
        free(ac->row_pos);
        free(ac->row_kv);
        free(ac->row_key);
        free(ac->row_tok);
        free(ac->vrow);
        free(ac->own);
        free(ac->row_mult);
        free(ac->target_row);
        free(ac->target_tok);
        moe_index_free(&ac->moe);
        free(ac->replay);
        free(ac);
    }
    memset(t, 0, sizeof *t);
}

int trainer_rows(const trainer *t) { return t->acts->n_rows; }

size_t trainer_bytes(const trainer *t) {
    return (t->acts->n_floats + t->n_grad) * sizeof(float) + (t->grad_sum ? t->n_grad * sizeof *t->grad_sum : 0);
}

void trainer_zero_grad(trainer *t) {
    if (t->grad) backend_zero(t->be, t->grad, t->n_grad * sizeof(float));
    if (t->grad_sum) memset(t->grad_sum, 0, t->n_grad * sizeof *t->grad_sum);
}

int trainer_keep_sums(trainer *t, gerr *e) {
    if (on_device(t->acts))
        return gerr_set(e, EX_USAGE, "--group-sums: the float64 gradient sums are kept on the host; not with a device");
    t->grad_sum = calloc(t->n_grad ? t->n_grad : 1, sizeof *t->grad_sum);
    if (!t->grad_sum)
        return gerr_set(e, EX_SOFTWARE, "out of memory for --group-sums (%.0f MiB of float64 gradient sums)",
                        (double)t->n_grad * sizeof(double) / (1 << 20));
    return 0;
}

void trainer_fold_grad(trainer *t) {
    double *sum = t->grad_sum;
    float *g = t->grad;
    long n = (long)t->n_grad;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        sum[i] += g[i];
        g[i] = 0.0f;
    }
}

/* Copies between the caller's host arrays and the device's; on failure the
 * first is kept for trainer_check. */
static void download(trainer_acts *ac, float *host, const float *dev, size_t n) {
    if (!ac->err.code) ac->mem_be->mem_download(host, dev, n * sizeof *host, &ac->err);
}
static const float *upload(trainer_acts *ac, float *dev, const float *host, size_t n) {
    if (!ac->err.code) ac->mem_be->mem_upload(dev, host, n * sizeof *host, &ac->err);
    return dev;
}

int trainer_check(trainer *t, gerr *e) {
    trainer_acts *ac = t->acts;
    if (ac->err.code) {
        *e = ac->err;
        return e->code;
    }
    return on_device(ac) ? ac->mem_be->sync(e) : 0;
}

/* Whether a pass applies LoRA dropout: its masks are keyed per sequence, so
 * a prompt computed once cannot carry each sequence's own. */
static bool pass_dropout(const trainer *t, bool lora_off, bool dropout) {
    return t->lora && !lora_off && dropout && t->lora->dropout > 0 && t->mode == TRAINER_LORA;
}

/* Whether sequence s has the prompt of sequence o (same length, same tokens,
 * and with a routing replayed the same routing over it). */
static bool same_prompt(const train_batch *b, int s, int o) {
    size_t np = (size_t)b->n_prompt[s], route_w = (size_t)b->routing_width;
    return b->n_prompt[s] == b->n_prompt[o] &&
           !memcmp(b->tokens + b->start[s], b->tokens + b->start[o], np * sizeof *b->tokens) &&
           (!b->routing || !memcmp(b->routing + (size_t)b->start[s] * route_w,
                                   b->routing + (size_t)b->start[o] * route_w, np * route_w * sizeof *b->routing));
}

/* The sequence whose prompt rows s reads (s itself when it keeps its own),
 * given the last sequence that kept its own. */
static int prompt_owner(const train_batch *b, int s, int owner, bool share) {
    return share && owner >= 0 && same_prompt(b, s, owner) ? owner : s;
}

int train_batch_rows(const train_batch *b, bool share) {
    int rows = 0, owner = -1;
    for (int s = 0; s < b->n_seqs; s++) {
        int o = prompt_owner(b, s, owner, share);
        rows += b->start[s + 1] - b->start[s] - (o == s ? 0 : b->n_prompt[s]);
        owner = o;
    }
    return rows;
}

/* Computed row R replays batch row v's routing (none when last: the
 * sequence's last row, which the sampler never ran). */
static void set_replay(trainer *t, const train_batch *b, int R, int v, bool last) {
    const model_config *c = &t->m->cfg;
    int Lm = config_ffn_layers(c, true), k = c->n_experts_used;
    assert(b->routing_width == Lm * k);
    for (int f = 0; f < Lm; f++) {
        int32_t *to = t->acts->replay + ((size_t)f * t->max_computed + (size_t)R) * k;
        const uint16_t *from = b->routing + (size_t)v * b->routing_width + (size_t)f * k;
        for (int j = 0; j < k; j++) to[j] = last ? -1 : from[j];
    }
}

/* Row bookkeeping, embeddings and RoPE tables of a batch. With share, a
 * sequence whose prompt equals that of the last sequence that kept its own
 * (a GRPO group's K completions, packed one after another) keeps only its
 * completion rows and reads its prompt from that one's rows (attn_share). */
static void batch_setup(trainer *t, const train_batch *b, bool share) {
    const model *m = t->m;
    const backend *be = t->be;
    trainer_acts *ac = t->acts;
    int Rv = b->start[b->n_seqs], kvd = m->cfg.n_kv_heads * m->cfg.head_dim;
    assert(Rv <= t->max_rows && train_batch_targets(b) <= t->max_targets);
    int rows = train_batch_rows(b, share);
    if (rows > t->max_computed) { /* sized for sharing, run without it */
        fprintf(stderr, "trainer: %d rows to compute, sized for %d\n", rows, t->max_computed);
        abort();
    }
    int n_t = 0, R = 0, owner = -1, n_shared = 0;
    for (int s = 0; s < b->n_seqs; s++) {
        int L = b->start[s + 1] - b->start[s], np = b->n_prompt[s];
        assert(L <= t->max_len && np >= 1 && np <= L);
        int o = prompt_owner(b, s, owner, share);
        bool borrows = o != s;
        owner = o;
        n_shared += borrows;
        for (int i = 0; i < L; i++) {
            int v = b->start[s] + i;
            if (borrows && i < np) { /* the owner's row at this position */
                ac->vrow[v] = ac->vrow[b->start[owner] + i];
                continue;
            }
            ac->vrow[v] = R;
            ac->own[R] = v;
            ac->row_tok[R] = b->tokens[v];
            ac->row_pos[R] = i;
            ac->row_kv[R] = (size_t)b->start[s] * kvd;
            ac->row_key[R] = b->key ? b->key[s] : (uint64_t)s;
            if (b->routing) set_replay(t, b, R, v, i == L - 1);
            R++;
        }
        for (int i = np; i < L; i++) {
            if (b->target && !b->target[b->start[s] + i]) continue; /* context only */
            ac->target_row[n_t] = ac->vrow[b->start[s] + i - 1];
            ac->target_tok[n_t++] = b->tokens[b->start[s] + i];
        }
    }
    ac->n_rows = R;
    ac->replaying = b->routing != NULL;
    for (int r = 0; r < R; r++) ac->row_mult[r] = 0;
    for (int v = 0; v < Rv; v++) ac->row_mult[ac->vrow[v]] += 1;
    ac->share.n_virtual = n_shared ? Rv : 0;
    ac->share.vrow = ac->vrow, ac->share.own = ac->own;
    for (int r = 0; r < R; r++) assert(ac->row_tok[r] >= 0 && ac->row_tok[r] < m->cfg.vocab_size);
    model_embed(m, be, ac->x_in[0], ac->row_tok, R);
    be->rope_cos_sin(ac->cos_t, ac->sin_t, m->inv_freq, m->cfg.head_dim / 2, ac->row_pos, R);
}

/* The layer pass of this batch; LoRA (unless lora_off) with its dropout when
 * dropout applies. */
static layer_pass batch_pass(const trainer *t, const train_batch *b, bool lora_off, bool dropout) {
    trainer_acts *ac = t->acts;
    layer_pass p = {
        .be = t->be,
        .m = t->m,
        .n_rows = ac->n_rows,
        .pos = ac->row_pos,
        .cos_t = ac->cos_t,
        .sin_t = ac->sin_t,
        .kv = {.row_kv = ac->row_kv},
        .ws = &ac->ws,
        .share = ac->share.n_virtual ? &ac->share : NULL,
        .n_seqs = b->n_seqs,
        .start = b->start,
        .moe = &ac->moe,
    };
    if (t->lora && !lora_off) {
        p.lora = (layer_lora){.l = t->lora, .on = true, .seed = t->dropout_seed, .pass = t->dropout_pass,
                              .row_key = ac->row_key, .xdrop = ac->xdrop};
        if (pass_dropout(t, lora_off, dropout)) p.lora.dropout = t->lora->dropout;
        if (t->mode == TRAINER_LORA) p.lora.grad_a = t->grad_a, p.lora.grad_b = t->grad_b;
    }
    return p;
}

/* p at layer l, with the batch's replayed routing there when it has one. */
static void pass_at(const trainer *t, layer_pass *p, int l) {
    const model_config *c = &t->m->cfg;
    p->layer = l;
    p->replay = NULL;
    if (t->acts->replaying && config_layer_moe(c, l))
        p->replay = t->acts->replay + (size_t)config_ffn_slot(c, l) * t->max_computed * c->n_experts_used;
}

/* Logits / temperature of one chunk of targets into ac->logits, then each
 * row's log-softmax: fills logp, entropy and lse_out where given. */
static void head_chunk(const trainer *t, int j0, int n, float temperature, float *logp, float *entropy,
                       float *lse_out) {
    const model *m = t->m;
    const backend *be = t->be;
    const trainer_acts *ac = t->acts;
    int V = m->cfg.vocab_size, d = m->cfg.dim;
    model_head_forward(m, be, ac->logits, ac->xf + (size_t)j0 * d, n);
    be->head_logsoftmax(ac->logits, n, V, 1.0f / temperature, ac->target_tok + j0, logp ? logp + j0 : NULL,
                        entropy ? entropy + j0 : NULL, lse_out);
}

void trainer_forward(trainer *t, const train_batch *b, float temperature, bool keep, bool lora_off, float *logp,
                     float *entropy) {
    const model_config *c = &t->m->cfg;
    const backend *be = t->be;
    trainer_acts *ac = t->acts;
    int d = c->dim, L = c->n_layers;
    batch_setup(t, b, !t->no_prompt_sharing && !pass_dropout(t, lora_off, keep));
    int R = ac->n_rows;
    layer_pass p = batch_pass(t, b, lora_off, keep);
    for (int l = 0; l < L; l++) {
        pass_at(t, &p, l);
        float *x_out = l + 1 < L ? ac->x_in[l + 1] : ac->x_final;
        if (x_out == ac->x_in[l]) x_out = ac->out_tmp; /* one shared input slot (INFER) */
        layer_forward(&p, &ac->layer[l], ac->x_in[l], x_out);
        if (x_out == ac->out_tmp) backend_copy(be, ac->x_in[l], ac->out_tmp, (size_t)R * d * sizeof(float));
        if (l + 1 == L && x_out != ac->x_final) backend_copy(be, ac->x_final, x_out, (size_t)R * d * sizeof(float));
    }
    int n_t = train_batch_targets(b);
    be->gather_rows(ac->xraw, ac->x_final, ac->target_row, n_t, d);
    be->rmsnorm_forward(ac->xf, ac->rstd_f, ac->xraw, model_global_weights(t->m).out_norm, n_t, d, c->norm_eps);
    /* on a device the head writes its own buffers, copied back at the end */
    float *lp = on_device(ac) ? ac->logp_dev : logp, *en = entropy && on_device(ac) ? ac->ent_dev : entropy;
    for (int j0 = 0; j0 < n_t; j0 += TRAIN_HEAD_CHUNK) {
        int n = n_t - j0 < TRAIN_HEAD_CHUNK ? n_t - j0 : TRAIN_HEAD_CHUNK;
        head_chunk(t, j0, n, temperature, lp, en, NULL);
    }
    if (on_device(ac)) {
        download(ac, logp, lp, (size_t)n_t);
        if (entropy) download(ac, entropy, en, (size_t)n_t);
    }
}

void trainer_backward(trainer *t, const train_batch *b, float temperature, const float *dlogp, const float *dentropy,
                      const float *entropy) {
    assert(t->mode != TRAINER_INFER);
    const model *m = t->m;
    const backend *be = t->be;
    const model_config *c = &m->cfg;
    trainer_acts *ac = t->acts;
    int R = ac->n_rows, d = c->dim, V = c->vocab_size, L = c->n_layers, n_t = train_batch_targets(b);
    bool full = t->mode == TRAINER_FULL;
    layer_pass p = batch_pass(t, b, false, true);
    if (full) p.grad = &t->g;
    if (t->balance_coef > 0 && t->balance_tokens > 0 && t->m->cfg.n_experts > 0) {
        /* the pass's share of the batch's balance loss (trainer.h) */
        double L = config_ffn_layers(&t->m->cfg, true);
        p.balance_scale = t->balance_coef / (L * t->balance_tokens);
        p.balance_weight = (double)b->start[b->n_seqs] / (L * t->balance_tokens);
        p.row_mult = ac->share.n_virtual ? ac->row_mult : NULL;
        p.balance_sum = &t->balance_sum;
    }

    /* the loss's gradients where the ops read them */
    if (on_device(ac)) {
        dlogp = upload(ac, ac->dlogp_dev, dlogp, (size_t)n_t);
        if (dentropy) {
            dentropy = upload(ac, ac->dent_dev, dentropy, (size_t)n_t);
            entropy = upload(ac, ac->ent_in_dev, entropy, (size_t)n_t);
        }
    }
    const global_params w = model_global_weights(m);

    /* LM head, chunk by chunk: d logp_j / d z_v = (onehot - softmax) / T */
    backend_zero(be, ac->gs.dx, (size_t)R * d * sizeof(float));
    float *lse = ac->lse_head;
    float *dxraw = ac->gs.dtmp; /* [n_t, d]: every target row is a batch row, so n_t < R */
    for (int j0 = 0; j0 < n_t; j0 += TRAIN_HEAD_CHUNK) {
        int n = n_t - j0 < TRAIN_HEAD_CHUNK ? n_t - j0 : TRAIN_HEAD_CHUNK;
        head_chunk(t, j0, n, temperature, NULL, NULL, lse);
        be->head_logsoftmax_backward(ac->logits, n, V, 1.0f / temperature, ac->target_tok + j0, dlogp + j0, lse,
                                     dentropy ? dentropy + j0 : NULL, dentropy ? entropy + j0 : NULL);
        model_head_backward(m, be, ac->dxf, full ? t->g.lm_head : NULL, ac->logits, ac->xf + (size_t)j0 * d, n);
        backend_copy(be, dxraw + (size_t)j0 * d, ac->dxf, (size_t)n * d * sizeof(float));
    }
    be->rmsnorm_backward(dxraw, full ? t->g.out_norm : NULL, dxraw, ac->xraw, w.out_norm, ac->rstd_f, n_t, d);
    be->scatter_add_rows(ac->gs.dx, dxraw, ac->target_row, n_t, d);

    for (int l = L - 1; l >= 0; l--) {
        pass_at(t, &p, l);
        if (t->recompute) layer_forward(&p, &ac->layer[l], ac->x_in[l], ac->out_tmp);
        layer_backward(&p, &ac->layer[l], ac->x_in[l], &ac->gs);
    }
    if (full) be->scatter_add_rows(t->g.tok_embd, ac->gs.dx, ac->row_tok, R, d);
}
