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

const char *lora_target_module(int t) { return targets_info[t].module; }
int lora_target_param(int t) { return targets_info[t].param; }

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

static void target_dims(const model_config *c, int t, int *in, int *out) {
    int qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    switch (t) {
    case LORA_Q: *in = c->dim, *out = qd; break;
    case LORA_K:
    case LORA_V: *in = c->dim, *out = kvd; break;
    case LORA_O: *in = qd, *out = c->dim; break;
    case LORA_GATE:
    case LORA_UP: *in = c->dim, *out = c->hidden_dim; break;
    default: *in = c->hidden_dim, *out = c->dim; break;
    }
}

int lora_alloc(lora *l, const model_config *cfg, int r, double alpha, bool rslora, double dropout,
               unsigned targets, const char *base, gerr *e) {
    memset(l, 0, sizeof *l);
    if (r <= 0) return gerr_set(e, EX_USAGE, "--lora-r: must be positive, got %d", r);
    if (!(alpha > 0)) return gerr_set(e, EX_USAGE, "--lora-alpha: must be positive, got %g", alpha);
    if (!(dropout >= 0 && dropout < 1)) return gerr_set(e, EX_USAGE, "--lora-dropout: must be in [0, 1), got %g", dropout);
    unsigned ffn = 1u << LORA_GATE | 1u << LORA_UP | 1u << LORA_DOWN;
    if (cfg->n_experts > 0 && (targets & ffn))
        return gerr_set(e, EX_USAGE,
                        "--lora-targets: gate, up and down take no adapter on a mixture of experts (%s); use q,k,v,o",
                        cfg->architecture);
    l->r = r, l->alpha = alpha, l->rslora = rslora, l->dropout = dropout, l->targets = targets;
    l->scale = (float)(rslora ? alpha / sqrt((double)r) : alpha / r);
    l->n_layers = cfg->n_layers;
    size_t sizes[2 * LORA_N_TARGETS] = {0};
    for (int t = 0; t < LORA_N_TARGETS; t++) {
        target_dims(cfg, t, &l->in_dim[t], &l->out_dim[t]);
        if (!(targets & (1u << t))) continue;
        sizes[2 * t] = (size_t)cfg->n_layers * r * l->in_dim[t];
        sizes[2 * t + 1] = (size_t)cfg->n_layers * l->out_dim[t] * r;
        l->n_params += sizes[2 * t] + sizes[2 * t + 1];
    }
    l->memory = calloc(l->n_params ? l->n_params : 1, sizeof(float));
    if (!l->memory) return gerr_set(e, EX_SOFTWARE, "out of memory for the LoRA adapter (%zu floats)", l->n_params);
    float *p = l->memory;
    for (int t = 0; t < LORA_N_TARGETS; t++) {
        if (!(targets & (1u << t))) continue;
        l->a[t] = p, p += sizes[2 * t];
        l->b[t] = p, p += sizes[2 * t + 1];
    }
    l->base = base ? xstrdup(base) : NULL;
    return 0;
}

void lora_init(lora *l, uint64_t seed) {
    for (int t = 0; t < LORA_N_TARGETS; t++) {
        if (!l->a[t]) continue;
        double bound = 1.0 / sqrt((double)l->in_dim[t]);
        size_t per_layer = (size_t)l->r * l->in_dim[t];
        for (int layer = 0; layer < l->n_layers; layer++) {
            rng_stream rs;
            rng_init(&rs, seed, "lora-init", 9, (uint64_t)layer * LORA_N_TARGETS + t);
            float *a = lora_a_at(l, t, layer);
            for (size_t i = 0; i < per_layer; i++) a[i] = (float)((2 * rng_uniform(&rs) - 1) * bound);
        }
        memset(l->b[t], 0, (size_t)l->n_layers * l->out_dim[t] * l->r * sizeof(float));
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
            if (!l->a[t]) continue;
            for (int is_b = 0; is_b < 2; is_b++, n++) {
                if (!out) continue;
                lora_tensor_ref *r = &out[n];
                snprintf(r->name, sizeof r->name, "base_model.model.model.layers.%d.%s.%s.lora_%c.weight", layer,
                         targets_info[t].block, targets_info[t].module, is_b ? 'B' : 'A');
                r->target = t, r->layer = layer, r->is_b = is_b;
                r->rows = is_b ? l->out_dim[t] : l->r;
                r->cols = is_b ? l->r : l->in_dim[t];
                r->data = is_b ? lora_b_at(l, t, layer) : lora_a_at(l, t, layer);
            }
        }
    return n;
}

void lora_merge(model *m, const lora *l) {
    for (int t = 0; t < LORA_N_TARGETS; t++) {
        if (!l->a[t]) continue;
        int in = l->in_dim[t], out = l->out_dim[t], r = l->r;
        for (int layer = 0; layer < l->n_layers; layer++) {
            float *w = model_layer_tensor(m, targets_info[t].param, layer);
            gemm(false, false, out, in, r, l->scale, lora_b_at(l, t, layer), r, lora_a_at(l, t, layer), in, 1.0f, w, in);
        }
    }
}
