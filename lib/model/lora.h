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
 * as PEFT puts an adapter on every nn.Linear of Qwen3-MoE's experts.
 *
 * gpt_oss's experts are two stacked parameters, which PEFT adapts through
 * target_parameters (its ParamWrapper): mlp.experts.gate_up_proj [E, dim,
 * 2I] (x W_e; gate the even columns, up the odd) and down_proj [E, I, dim],
 * each with lora_A [r E, in] and lora_B [out, r E], and
 *   delta W_e[i, o] = scale * sum_k lora_B[o, k E + e] lora_A[e r + k, i]:
 * expert e's A_e is rows e r .. e r + r - 1 of lora_A, its B_e column e of
 * every group of E in lora_B. Per expert that is the product above on
 * gate, up and down, except that gate and up share one A_e (gate_up's):
 * such an adapter is "stacked", a[LORA_EXP_UP] is a[LORA_EXP_GATE] (held
 * once), and B_e's rows are gate_up's lora_B rows 2j (gate) and 2j + 1
 * (up). PEFT has no dropout there (its ParamWrapper refuses one). */
enum { LORA_EXP_GATE = LORA_N_TARGETS, LORA_EXP_UP, LORA_EXP_DOWN, LORA_N_SETS };

typedef struct lora {
    int r;
    double alpha;
    bool rslora;
    double dropout;
    unsigned targets; /* bit (1u << LORA_Q) ... (1u << LORA_DOWN) */
    bool stacked;     /* gpt_oss's experts adapted (above): a[LORA_EXP_UP] is a[LORA_EXP_GATE] */
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

/* "mlp.experts.gate_up_proj" (gate and up of a stacked adapter) or
 * "mlp.experts.down_proj" (down): PEFT's target_parameters entry of target
 * t on gpt_oss; NULL for the others. */
const char *lora_target_parameter(int t);
/* Whether targets adapt cfg's experts as a stacked adapter (gpt_oss). */
bool lora_targets_stacked(const model_config *cfg, unsigned targets);

/* Why the model takes no adapter on those targets (NULL: it does): gate
 * without up, or up without gate, on gpt_oss, whose experts hold them as
 * one parameter (gate_up_proj) with one A. */
const char *lora_targets_refused(const model_config *cfg, unsigned targets);
/* Why those targets take no dropout (NULL: they do): a stacked adapter,
 * as PEFT's ParamWrapper has none. */
const char *lora_dropout_refused(const model_config *cfg, unsigned targets);
/* Sizes the factors for the model's shapes and allocates them zeroed.
 * r > 0, alpha > 0, 0 <= dropout < 1; base is copied (may be NULL);
 * targets lora_targets_refused refuses, and dropout > 0 where
 * lora_dropout_refused refuses it, are EX_USAGE. */
int lora_alloc(lora *l, const model_config *cfg, int r, double alpha, bool rslora, double dropout,
               unsigned targets, const char *base, gerr *e);
/* A Kaiming-uniform from the keyed RNG (seed, "lora-init", index = layer *
 * LORA_N_TARGETS + target; an expert's: "lora-init-expert", index =
 * (layer * 3 + target - LORA_GATE) * E + expert; a stacked adapter's
 * shared A_e gate's), B zero: PEFT's bound 1/sqrt(in) for lora_A [r E,
 * in] as well. */
void lora_init(lora *l, uint64_t seed);
void lora_free(lora *l);

/* Every factor as the adapter holds it, a matrix of one place in the
 * buffer, with its name, shape, and where it lies in PEFT's file. name is
 * PEFT's own ("base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight";
 * a Qwen3-MoE expert's "base_model.model.model.layers.N.mlp.experts.X.gate_proj.lora_A.weight")
 * and peft the same, except in a stacked adapter, whose factors are
 * expert X's slices (named "...mlp.experts.X.gate_up_proj.lora_A.weight",
 * the shared A_e; "...experts.X.gate_proj.lora_B.weight",
 * "...experts.X.up_proj.lora_B.weight", "...experts.X.down_proj.lora_A.weight",
 * "...experts.X.down_proj.lora_B.weight": what the optimizer's moments
 * are named after) of the ParamWrapper factors PEFT saves:
 * "base_model.model.model.layers.N.mlp.experts.lora_A.weight" and
 * lora_B, gate_up_proj's under "experts.base_layer." when down_proj is
 * adapted too (PEFT wraps the parameters in the order GptOssExperts
 * registers them, gate_up_proj innermost). Returns the count; fills out
 * when not NULL. */
typedef struct {
    char name[128];
    int set, layer, expert; /* expert -1 outside the expert sets */
    bool is_b;
    int64_t rows, cols;
    float *data;
    size_t at; /* data - l->memory */
    /* PEFT's tensor peft [peft_rows, peft_cols]: our [j, k] is its
     * [row0 + j * row_step, col0 + k * col_step] (the tensor itself: 0, 1) */
    char peft[128];
    int64_t peft_rows, peft_cols, row0, row_step, col0, col_step;
} lora_tensor_ref;
size_t lora_tensor_list(const lora *l, lora_tensor_ref *out);
/* r's values from their place in buf (laid out as l->memory: the factors,
 * their gradients or moments) into PEFT's tensor t [peft_rows, peft_cols],
 * where they lie; and back from t into buf. */
void lora_ref_to_peft(const lora_tensor_ref *r, const float *buf, float *t);
void lora_ref_from_peft(const lora_tensor_ref *r, const float *t, float *buf);
/* Whether r is PEFT's tensor itself (same name and shape, nothing moved). */
bool lora_ref_whole(const lora_tensor_ref *r);

/* W += scale * B A for every adapted weight (what export and rollout use). */
void lora_merge(model *m, const lora *l);

#endif
