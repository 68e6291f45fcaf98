/* LoRA factors: shapes, PEFT names, initialisation, merging. */
#include "lora.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>

#include "../ops/ops.h"
#include "../util/rng.h"

static const struct {
    const char *short_name, *module, *block;
    int param;
    const char *parameter; /* gpt_oss's stacked parameter (target_parameters) */
} targets_info[LORA_N_TARGETS] = {
    [LORA_Q] = {"q", "q_proj", "self_attn", P_WQ, NULL},
    [LORA_K] = {"k", "k_proj", "self_attn", P_WK, NULL},
    [LORA_V] = {"v", "v_proj", "self_attn", P_WV, NULL},
    [LORA_O] = {"o", "o_proj", "self_attn", P_WO, NULL},
    [LORA_GATE] = {"gate", "gate_proj", "mlp", P_W_GATE, "mlp.experts.gate_up_proj"},
    [LORA_UP] = {"up", "up_proj", "mlp", P_W_UP, "mlp.experts.gate_up_proj"},
    [LORA_DOWN] = {"down", "down_proj", "mlp", P_W_DOWN, "mlp.experts.down_proj"},
};
static const unsigned FFN_TARGETS = 1u << LORA_GATE | 1u << LORA_UP | 1u << LORA_DOWN;
static const int expert_param[] = {P_EXP_GATE, P_EXP_UP, P_EXP_DOWN};

/* The target an expert set adapts (LORA_GATE ...), or the set itself. */
static int set_target(int s) { return s < LORA_N_TARGETS ? s : s - LORA_EXP_GATE + LORA_GATE; }

const char *lora_target_module(int t) { return targets_info[t].module; }
const char *lora_target_parameter(int t) { return targets_info[t].parameter; }
int lora_set_param(int s) { return s < LORA_N_TARGETS ? targets_info[s].param : expert_param[s - LORA_EXP_GATE]; }

bool lora_targets_stacked(const model_config *cfg, unsigned targets) {
    return cfg->arch == ARCH_GPT_OSS && (targets & FFN_TARGETS) && config_ffn_layers(cfg, true) > 0;
}

int lora_layer_mats(const lora *l, int s, int layer) {
    if (!l->a[s]) return 0;
    if (s < LORA_GATE) return 1;
    bool moe = config_layer_moe(&l->cfg, layer);
    if (s < LORA_N_TARGETS) return !moe;
    return moe ? l->cfg.n_experts : 0;
}

int lora_parse_targets(const char *list, unsigned *targets, gerr *e) {
    *targets = 0;
    const char *p = list;
    while (*p) {
        size_t n = strcspn(p, ",");
        bool found = false;
        if (n == 3 && !strncmp(p, "all", 3)) {
            *targets = (1u << LORA_N_TARGETS) - 1;
            found = true;
        }
        for (int t = 0; t < LORA_N_TARGETS && !found; t++)
            if ((strlen(targets_info[t].short_name) == n && !strncmp(p, targets_info[t].short_name, n)) ||
                (strlen(targets_info[t].module) == n && !strncmp(p, targets_info[t].module, n))) {
                *targets |= 1u << t;
                found = true;
            }
        if (!found)
            return gerr_set(e, EX_USAGE, "--lora-targets: unknown target '%.*s' (expected q,k,v,o,gate,up,down or all)",
                            (int)n, p);
        p += n;
        if (*p == ',') p++;
    }
    if (!*targets) return gerr_set(e, EX_USAGE, "--lora-targets: empty list");
    return 0;
}

static void set_dims(const model_config *c, int s, int *in, int *out) {
    int qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    switch (s) {
    case LORA_Q: *in = c->dim, *out = qd; break;
    case LORA_K:
    case LORA_V: *in = c->dim, *out = kvd; break;
    case LORA_O: *in = qd, *out = c->dim; break;
    case LORA_GATE:
    case LORA_UP: *in = c->dim, *out = c->hidden_dim; break;
    case LORA_DOWN: *in = c->hidden_dim, *out = c->dim; break;
    case LORA_EXP_GATE:
    case LORA_EXP_UP: *in = c->dim, *out = c->moe_hidden_dim; break;
    default: *in = c->moe_hidden_dim, *out = c->dim; break;
    }
}

/* Whether set s's A is gate's (a stacked adapter's up: gate_up_proj's one A). */
static bool shared_a(const lora *l, int s) { return l->stacked && s == LORA_EXP_UP; }

/* Matrices in set s for the model: its layers, times the experts. */
static int set_mats(const model_config *c, int s) {
    if (s < LORA_GATE) return c->n_layers;
    if (s < LORA_N_TARGETS) return config_ffn_layers(c, false);
    return config_ffn_layers(c, true) * c->n_experts;
}

const char *lora_targets_refused(const model_config *cfg, unsigned targets) {
    bool gate = targets & (1u << LORA_GATE), up = targets & (1u << LORA_UP);
    if (lora_targets_stacked(cfg, targets) && gate != up)
        return "gate and up are one parameter of gpt_oss's experts (mlp.experts.gate_up_proj, one A for both): "
               "name both or neither";
    return NULL;
}

const char *lora_dropout_refused(const model_config *cfg, unsigned targets) {
    if (lora_targets_stacked(cfg, targets))
        return "PEFT's adapter on gpt_oss's stacked experts (target_parameters) has no dropout; use 0, or leave "
               "gate, up and down out";
    return NULL;
}

int lora_alloc(lora *l, const model_config *cfg, int r, double alpha, bool rslora, double dropout,
               unsigned targets, const char *base, gerr *e) {
    memset(l, 0, sizeof *l);
    if (r <= 0) return gerr_set(e, EX_USAGE, "--lora-r: must be positive, got %d", r);
    if (!(alpha > 0)) return gerr_set(e, EX_USAGE, "--lora-alpha: must be positive, got %g", alpha);
    if (!(dropout >= 0 && dropout < 1)) return gerr_set(e, EX_USAGE, "--lora-dropout: must be in [0, 1), got %g", dropout);
    const char *why = lora_targets_refused(cfg, targets);
    if (why) return gerr_set(e, EX_USAGE, "--lora-targets: %s", why);
    if (dropout > 0 && (why = lora_dropout_refused(cfg, targets)))
        return gerr_set(e, EX_USAGE, "--lora-dropout %g: %s", dropout, why);
    l->r = r, l->alpha = alpha, l->rslora = rslora, l->dropout = dropout, l->targets = targets;
    l->stacked = lora_targets_stacked(cfg, targets);
    l->scale = (float)(rslora ? alpha / sqrt((double)r) : alpha / r);
    l->n_layers = cfg->n_layers;
    l->cfg = *cfg;
    for (int s = 0; s < LORA_N_SETS; s++) {
        set_dims(cfg, s, &l->in_dim[s], &l->out_dim[s]);
        if (targets & (1u << set_target(s))) l->n_mats[s] = set_mats(cfg, s);
        size_t in = shared_a(l, s) ? 0 : (size_t)l->in_dim[s];
        l->n_params += (size_t)l->n_mats[s] * r * (in + l->out_dim[s]);
    }
    l->memory = calloc(l->n_params ? l->n_params : 1, sizeof(float));
    if (!l->memory) return gerr_set(e, EX_SOFTWARE, "out of memory for the LoRA adapter (%zu floats)", l->n_params);
    float *p = l->memory;
    for (int s = 0; s < LORA_N_SETS; s++) {
        if (!l->n_mats[s]) continue;
        if (shared_a(l, s)) l->a[s] = l->a[LORA_EXP_GATE];
        else l->a[s] = p, p += (size_t)l->n_mats[s] * r * l->in_dim[s];
        l->b[s] = p, p += (size_t)l->n_mats[s] * l->out_dim[s] * r;
    }
    l->base = base ? xstrdup(base) : NULL;
    return 0;
}

/* The stream of layer `layer`'s A in set s (expert x's). */
static void init_stream(rng_stream *rs, uint64_t seed, int s, int layer, int x, int n_experts) {
    if (s < LORA_N_TARGETS)
        rng_init(rs, seed, "lora-init", 9, (uint64_t)layer * LORA_N_TARGETS + s);
    else
        rng_init(rs, seed, "lora-init-expert", 16,
                 ((uint64_t)layer * 3 + (uint64_t)(s - LORA_EXP_GATE)) * (uint64_t)n_experts + (uint64_t)x);
}

void lora_init(lora *l, uint64_t seed) {
    for (int s = 0; s < LORA_N_SETS; s++) {
        if (!l->a[s]) continue;
        memset(l->b[s], 0, (size_t)l->n_mats[s] * l->out_dim[s] * l->r * sizeof(float));
        if (shared_a(l, s)) continue;
        double bound = 1.0 / sqrt((double)l->in_dim[s]);
        size_t per = (size_t)l->r * l->in_dim[s];
        for (int layer = 0; layer < l->n_layers; layer++)
            for (int x = 0; x < lora_layer_mats(l, s, layer); x++) {
                rng_stream rs;
                init_stream(&rs, seed, s, layer, x, l->cfg.n_experts);
                float *a = lora_a_at(l, s, layer, x);
                for (size_t i = 0; i < per; i++) a[i] = (float)((2 * rng_uniform(&rs) - 1) * bound);
            }
    }
}

void lora_free(lora *l) {
    free(l->memory);
    free(l->base);
    memset(l, 0, sizeof *l);
}

/* Where r, a stacked adapter's factor of target t's expert x, lies in
 * PEFT's ParamWrapper factors (lora.h). */
static void stacked_place(const lora *l, lora_tensor_ref *r, int t, int x) {
    int64_t E = l->cfg.n_experts, R = l->r;
    bool nested = t != LORA_DOWN && (l->targets & (1u << LORA_DOWN)); /* gate_up_proj inside down_proj's */
    snprintf(r->peft, sizeof r->peft, "base_model.model.model.layers.%d.mlp.experts.%slora_%c.weight", r->layer,
             nested ? "base_layer." : "", r->is_b ? 'B' : 'A');
    if (!r->is_b) { /* lora_A [r E, in]: A_x its rows x r .. */
        r->peft_rows = E * R, r->peft_cols = r->cols;
        r->row0 = x * R, r->row_step = 1, r->col0 = 0, r->col_step = 1;
    } else { /* lora_B [out, r E]: B_x its column x of each E, gate's rows the even ones, up's the odd */
        bool fused = t != LORA_DOWN;
        r->peft_rows = fused ? 2 * r->rows : r->rows, r->peft_cols = R * E;
        r->row0 = t == LORA_UP, r->row_step = fused ? 2 : 1, r->col0 = x, r->col_step = E;
    }
}

/* Factor is_b of expert x (0 outside the expert sets) of set s, target t. */
static void fill_ref(const lora *l, lora_tensor_ref *r, int s, int t, int layer, int x, bool is_b) {
    bool expert = s >= LORA_EXP_GATE;
    char where[32] = "";
    if (expert) snprintf(where, sizeof where, "experts.%d.", x);
    /* a stacked adapter's A of gate and up is gate_up_proj's */
    const char *module = l->stacked && expert && t != LORA_DOWN && !is_b ? "gate_up_proj" : targets_info[t].module;
    snprintf(r->name, sizeof r->name, "base_model.model.model.layers.%d.%s.%s%s.lora_%c.weight", layer,
             targets_info[t].block, where, module, is_b ? 'B' : 'A');
    r->set = s, r->layer = layer, r->expert = expert ? x : -1, r->is_b = is_b;
    r->rows = is_b ? l->out_dim[s] : l->r;
    r->cols = is_b ? l->r : l->in_dim[s];
    r->data = is_b ? lora_b_at(l, s, layer, x) : lora_a_at(l, s, layer, x);
    r->at = (size_t)(r->data - l->memory);
    if (l->stacked && expert) {
        stacked_place(l, r, t, x);
    } else {
        memcpy(r->peft, r->name, sizeof r->peft);
        r->peft_rows = r->rows, r->peft_cols = r->cols;
        r->row0 = 0, r->row_step = 1, r->col0 = 0, r->col_step = 1;
    }
}

size_t lora_tensor_list(const lora *l, lora_tensor_ref *out) {
    size_t n = 0;
    for (int layer = 0; layer < l->n_layers; layer++)
        for (int t = 0; t < LORA_N_TARGETS; t++) {
            /* a sparse layer's gate, up and down are its experts' */
            int xs = t - LORA_GATE + LORA_EXP_GATE, s = t >= LORA_GATE && lora_layer_mats(l, xs, layer) ? xs : t;
            int mats = lora_layer_mats(l, s, layer);
            for (int x = 0; x < mats; x++)
                for (int is_b = shared_a(l, s); is_b < 2; is_b++, n++)
                    if (out) fill_ref(l, &out[n], s, t, layer, x, is_b);
        }
    return n;
}

void lora_ref_to_peft(const lora_tensor_ref *r, const float *buf, float *t) {
    const float *src = buf + r->at;
    for (int64_t j = 0; j < r->rows; j++)
        for (int64_t k = 0; k < r->cols; k++)
            t[(r->row0 + j * r->row_step) * r->peft_cols + r->col0 + k * r->col_step] = src[j * r->cols + k];
}

void lora_ref_from_peft(const lora_tensor_ref *r, const float *t, float *buf) {
    float *dst = buf + r->at;
    for (int64_t j = 0; j < r->rows; j++)
        for (int64_t k = 0; k < r->cols; k++)
            dst[j * r->cols + k] = t[(r->row0 + j * r->row_step) * r->peft_cols + r->col0 + k * r->col_step];
}

bool lora_ref_whole(const lora_tensor_ref *r) {
    return r->rows == r->peft_rows && r->cols == r->peft_cols && r->row_step == 1 && r->col_step == 1 &&
           !strcmp(r->name, r->peft);
}

void lora_merge(model *m, const lora *l) {
    for (int s = 0; s < LORA_N_SETS; s++) {
        int in = l->in_dim[s], out = l->out_dim[s], r = l->r;
        for (int layer = 0; layer < l->n_layers; layer++)
            for (int x = 0; x < lora_layer_mats(l, s, layer); x++) {
                float *w = model_layer_tensor(m, lora_set_param(s), layer) + (size_t)x * out * in;
                gemm(false, false, out, in, r, l->scale, lora_b_at(l, s, layer, x), r, lora_a_at(l, s, layer, x), in,
                     1.0f, w, in);
            }
    }
}
