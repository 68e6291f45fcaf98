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
} targets_info[LORA_N_TARGETS] = {
    [LORA_Q] = {"q", "q_proj", "self_attn", P_WQ},       [LORA_K] = {"k", "k_proj", "self_attn", P_WK},
    [LORA_V] = {"v", "v_proj", "self_attn", P_WV},       [LORA_O] = {"o", "o_proj", "self_attn", P_WO},
    [LORA_GATE] = {"gate", "gate_proj", "mlp", P_W_GATE}, [LORA_UP] = {"up", "up_proj", "mlp", P_W_UP},
    [LORA_DOWN] = {"down", "down_proj", "mlp", P_W_DOWN},
};
static const int expert_param[] = {P_EXP_GATE, P_EXP_UP, P_EXP_DOWN};

/* The target an expert set adapts (LORA_GATE ...), or the set itself. */
static int set_target(int s) { return s < LORA_N_TARGETS ? s : s - LORA_EXP_GATE + LORA_GATE; }

const char *lora_target_module(int t) { return targets_info[t].module; }
int lora_set_param(int s) { return s < LORA_N_TARGETS ? targets_info[s].param : expert_param[s - LORA_EXP_GATE]; }

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

/* Matrices in set s for the model: its layers, times the experts. */
static int set_mats(const model_config *c, int s) {
    if (s < LORA_GATE) return c->n_layers;
    if (s < LORA_N_TARGETS) return config_ffn_layers(c, false);
    return config_ffn_layers(c, true) * c->n_experts;
}

const char *lora_targets_refused(const model_config *cfg, unsigned targets) {
    unsigned ffn = 1u << LORA_GATE | 1u << LORA_UP | 1u << LORA_DOWN;
    if (cfg->arch == ARCH_GPT_OSS && (targets & ffn))
        return "gate, up and down take no adapter on gpt_oss's experts (PEFT adapts them only as the stacked "
               "gate_up_proj and down_proj parameters, a layout grpo does not write)";
    return NULL;
}

int lora_alloc(lora *l, const model_config *cfg, int r, double alpha, bool rslora, double dropout,
               unsigned targets, const char *base, gerr *e) {
    memset(l, 0, sizeof *l);
    if (r <= 0) return gerr_set(e, EX_USAGE, "--lora-r: must be positive, got %d", r);
    if (!(alpha > 0)) return gerr_set(e, EX_USAGE, "--lora-alpha: must be positive, got %g", alpha);
    if (!(dropout >= 0 && dropout < 1)) return gerr_set(e, EX_USAGE, "--lora-dropout: must be in [0, 1), got %g", dropout);
    const char *why = lora_targets_refused(cfg, targets);
    if (why) return gerr_set(e, EX_USAGE, "--lora-targets: %s; use q,k,v,o", why);
    l->r = r, l->alpha = alpha, l->rslora = rslora, l->dropout = dropout, l->targets = targets;
    l->scale = (float)(rslora ? alpha / sqrt((double)r) : alpha / r);
    l->n_layers = cfg->n_layers;
    l->cfg = *cfg;
    for (int s = 0; s < LORA_N_SETS; s++) {
        set_dims(cfg, s, &l->in_dim[s], &l->out_dim[s]);
        if (targets & (1u << set_target(s))) l->n_mats[s] = set_mats(cfg, s);
        l->n_params += (size_t)l->n_mats[s] * r * ((size_t)l->in_dim[s] + l->out_dim[s]);
    }
    l->memory = calloc(l->n_params ? l->n_params : 1, sizeof(float));
    if (!l->memory) return gerr_set(e, EX_SOFTWARE, "out of memory for the LoRA adapter (%zu floats)", l->n_params);
    float *p = l->memory;
    for (int s = 0; s < LORA_N_SETS; s++) {
        if (!l->n_mats[s]) continue;
        l->a[s] = p, p += (size_t)l->n_mats[s] * r * l->in_dim[s];
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
        double bound = 1.0 / sqrt((double)l->in_dim[s]);
        size_t per = (size_t)l->r * l->in_dim[s];
        for (int layer = 0; layer < l->n_layers; layer++)
            for (int x = 0; x < lora_layer_mats(l, s, layer); x++) {
                rng_stream rs;
                init_stream(&rs, seed, s, layer, x, l->cfg.n_experts);
                float *a = lora_a_at(l, s, layer, x);
                for (size_t i = 0; i < per; i++) a[i] = (float)((2 * rng_uniform(&rs) - 1) * bound);
            }
        memset(l->b[s], 0, (size_t)l->n_mats[s] * l->out_dim[s] * l->r * sizeof(float));
    }
}

void lora_free(lora *l) {
    free(l->memory);
    free(l->base);
    memset(l, 0, sizeof *l);
}

size_t lora_tensor_list(const lora *l, lora_tensor_ref *out) {
    size_t n = 0;
    for (int layer = 0; layer < l->n_layers; layer++)
        for (int t = 0; t < LORA_N_TARGETS; t++) {
            /* a sparse layer's gate, up and down are its experts' */
            int xs = t - LORA_GATE + LORA_EXP_GATE, s = t >= LORA_GATE && lora_layer_mats(l, xs, layer) ? xs : t;
            int mats = lora_layer_mats(l, s, layer);
            for (int x = 0; x < mats; x++)
                for (int is_b = 0; is_b < 2; is_b++, n++) {
                    if (!out) continue;
                    lora_tensor_ref *r = &out[n];
                    char expert[32] = "";
                    if (s >= LORA_EXP_GATE) snprintf(expert, sizeof expert, "experts.%d.", x);
                    snprintf(r->name, sizeof r->name, "base_model.model.model.layers.%d.%s.%s%s.lora_%c.weight", layer,
                             targets_info[t].block, expert, targets_info[t].module, is_b ? 'B' : 'A');
                    r->set = s, r->layer = layer, r->expert = s >= LORA_EXP_GATE ? x : -1, r->is_b = is_b;
                    r->rows = is_b ? l->out_dim[s] : l->r;
                    r->cols = is_b ? l->r : l->in_dim[s];
                    r->data = is_b ? lora_b_at(l, s, layer, x) : lora_a_at(l, s, layer, x);
                }
        }
    return n;
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
