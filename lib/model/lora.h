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
/* The adapter's factor sets: one per target, its matrices in every layer
 * that has the projection (the FFN's in the dense layers only), and for
 * gate, up and down in the layers with a mixture of experts one pair per
 * expert (A_e [r, dim] and B_e [I, r]; down's A_e [r, I], B_e [dim, r]),
 * as PEFT puts an adapter on every nn.Linear of Qwen3-MoE's experts. */
enum { LORA_EXP_GATE = LORA_N_TARGETS, LORA_EXP_UP, LORA_EXP_DOWN, LORA_N_SETS };

typedef struct lora {
    int r;
    double alpha;
    bool rslora;
    double dropout;
    unsigned targets; /* bit (1u << LORA_Q) ... (1u << LORA_DOWN) */
    float scale;
    int n_layers;
    model_config cfg; /* the model's: which layers have experts, how many */
    int in_dim[LORA_N_SETS], out_dim[LORA_N_SETS]; /* of one matrix (one expert's) */
    int n_mats[LORA_N_SETS];  /* (A, B) pairs in the set: its layers (times the experts); 0: not adapted */
    float *a[LORA_N_SETS];    /* [n_mats, r, in]  (NULL when not adapted) */
    float *b[LORA_N_SETS];    /* [n_mats, out, r] */
    size_t n_params;          /* floats in memory */
    float *memory;
    char *base; /* base_model_name_or_path: the model the adapter sits on */
} lora;

/* Which of set s's matrices layer `layer` has: the layer's, or in an
 * expert set the first of its experts' (expert x's is that plus x). */
static inline size_t lora_mat(const lora *l, int s, int layer, int x) {
    if (s < LORA_GATE) return (size_t)layer;
    size_t slot = (size_t)config_ffn_slot(&l->cfg, layer);
    return s < LORA_N_TARGETS ? slot : slot * (size_t)l->cfg.n_experts + (size_t)x;
}
/* Layer `layer`'s factors of set s (expert x's in an expert set, else x
 * 0): A [r, in] and B [out, r]. */
static inline float *lora_a_at(const lora *l, int s, int layer, int x) {
    return l->a[s] + lora_mat(l, s, layer, x) * (size_t)l->r * (size_t)l->in_dim[s];
}
static inline float *lora_b_at(const lora *l, int s, int layer, int x) {
    return l->b[s] + lora_mat(l, s, layer, x) * (size_t)l->out_dim[s] * (size_t)l->r;
}
/* How many of set s's matrices layer `layer` has: 0, 1, or an expert set's E. */
int lora_layer_mats(const lora *l, int s, int layer);

/* "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj". */
const char *lora_target_module(int t);
/* The weight a set adapts (P_WQ ..., P_EXP_GATE ...). */
int lora_set_param(int s);
/* "q,k,v,o,gate,up,down" (short names or the *_proj module names, comma
 * separated, "all" for every one) into a bit set. EX_USAGE naming an
 * unknown entry. */
int lora_parse_targets(const char *list, unsigned *targets, gerr *e);

/* Why the model takes no adapter on those targets (NULL: it does): gate, up
 * or down on gpt_oss's experts, which PEFT adapts only as the stacked
 * parameters they are (target_parameters, one A shared by gate and up), a
 * layout this adapter does not have. */
const char *lora_targets_refused(const model_config *cfg, unsigned targets);
/* Sizes the factors for the model's shapes and allocates them zeroed.
 * r > 0, alpha > 0, 0 <= dropout < 1; base is copied (may be NULL);
 * targets lora_targets_refused refuses are EX_USAGE. */
int lora_alloc(lora *l, const model_config *cfg, int r, double alpha, bool rslora, double dropout,
               unsigned targets, const char *base, gerr *e);
/* A Kaiming-uniform from the keyed RNG (seed, "lora-init", index = layer *
 * LORA_N_TARGETS + target; an expert's: "lora-init-expert", index =
 * (layer * 3 + target - LORA_GATE) * E + expert), B zero. */
void lora_init(lora *l, uint64_t seed);
void lora_free(lora *l);

/* Every factor with its PEFT name
 * ("base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight"; an
 * expert's "base_model.model.model.layers.N.mlp.experts.X.gate_proj.lora_A.weight"),
 * shape and place in the buffer. Returns the count; fills out when not NULL. */
typedef struct {
    char name[128];
    int set, layer, expert; /* expert -1 outside the expert sets */
    bool is_b;
    int64_t rows, cols;
    float *data;
} lora_tensor_ref;
size_t lora_tensor_list(const lora *l, lora_tensor_ref *out);

/* W += scale * B A for every adapted weight (what export and rollout use). */
void lora_merge(model *m, const lora *l);

#endif
