/* LoRA adapters on the linear layers of a model (PEFT semantics):
 *   y = x W^T + scale * (dropout(x) A^T) B^T,   A [r, in], B [out, r],
 *   scale = alpha / r, or alpha / sqrt(r) with rsLoRA.
 * Every factor of every layer lives in ONE float buffer (llm.c style), so an
 * optimizer and a gradient buffer can walk it flat. A starts Kaiming-uniform
 * as PEFT does (kaiming_uniform_(a=sqrt(5)) = U(-1/sqrt(in), 1/sqrt(in))),
 * B starts at zero, so a fresh adapter leaves the model unchanged. */
#ifndef GRPO_LORA_H
#define GRPO_LORA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"
#include "model.h"

/* The projections an adapter can sit on, in PEFT's module names. */
enum { LORA_Q, LORA_K, LORA_V, LORA_O, LORA_GATE, LORA_UP, LORA_DOWN, LORA_N_TARGETS };

typedef struct lora {
    int r;
    double alpha;
    bool rslora;
    double dropout;
    unsigned targets; /* bit (1u << LORA_Q) ... */
    float scale;
    int n_layers;
    int in_dim[LORA_N_TARGETS], out_dim[LORA_N_TARGETS];
    float *a[LORA_N_TARGETS]; /* [L, r, in]  (NULL when not a target) */
    float *b[LORA_N_TARGETS]; /* [L, out, r] */
    size_t n_params;          /* floats in memory */
    float *memory;
    char *base; /* base_model_name_or_path: the model the adapter sits on */
} lora;

/* Layer `layer`'s factors of target t: A [r, in] and B [out, r]. */
static inline float *lora_a_at(const lora *l, int t, int layer) {
    return l->a[t] + (size_t)layer * l->r * l->in_dim[t];
}
static inline float *lora_b_at(const lora *l, int t, int layer) {
    return l->b[t] + (size_t)layer * l->out_dim[t] * l->r;
}

/* "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj". */
const char *lora_target_module(int t);
/* The weight a target adapts (P_WQ ...). */
int lora_target_param(int t);
/* "q,k,v,o,gate,up,down" (short names or the *_proj module names, comma
 * separated, "all" for every one) into a bit set. EX_USAGE naming an
 * unknown entry. */
int lora_parse_targets(const char *list, unsigned *targets, gerr *e);

/* Sizes the factors for the model's shapes and allocates them zeroed.
 * r > 0, alpha > 0, 0 <= dropout < 1; base is copied (may be NULL). A
 * model with a mixture of experts takes no gate, up or down adapter (its
 * sparse layers have none of those projections): EX_USAGE. */
int lora_alloc(lora *l, const model_config *cfg, int r, double alpha, bool rslora, double dropout,
               unsigned targets, const char *base, gerr *e);
/* A Kaiming-uniform from the keyed RNG (seed, "lora-init", index = layer *
 * LORA_N_TARGETS + target), B zero. */
void lora_init(lora *l, uint64_t seed);
void lora_free(lora *l);

/* Every factor with its PEFT name
 * ("base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight"),
 * shape and place in the buffer. Returns the count; fills out when not NULL. */
typedef struct {
    char name[128];
    int target, layer;
    bool is_b;
    int64_t rows, cols;
    float *data;
} lora_tensor_ref;
size_t lora_tensor_list(const lora *l, lora_tensor_ref *out);

/* W += scale * B A for every adapted weight (what export and rollout use). */
void lora_merge(model *m, const lora *l);

#endif
