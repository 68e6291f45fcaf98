/* The pieces of grpo-update's run (update.c) that live in policy.c and
 * update_out.c. */
#ifndef GRPO_UPDATE_INTERNAL_H
#define GRPO_UPDATE_INTERNAL_H

#include "../model/lora.h"
#include "../model/model.h"
#include "loss.h"
#include "optim.h"
#include "state.h"
#include "trainer.h"
#include "update.h"

typedef struct {
    optim_opts optim;
    loss_opts loss;
    unsigned lora_targets;
} update_config;

/* What is trained and its optimizer state. */
typedef struct {
    model m;
    lora l;
    bool has_lora;
    float *params;        /* m.params_memory or l.memory */
    size_t n_trained;
    float *exp_avg, *exp_avg_sq; /* AdamW moments, n_trained each (NULL with SGD) */
    long long step, next_index, seed;
    char *ref_path;       /* the reference of a full fine-tune (NULL with LoRA) */
} policy;

/* Loads --model: weights, adapter (continued, or made fresh with --lora-r),
 * and grpo/state.json + optimizer.safetensors when --model is our
 * checkpoint. */
int policy_load(policy *p, const update_opts *o, const update_config *c, gerr *e);
void policy_free(policy *p);
/* One optimizer step from the accumulated gradients of t: global norm,
 * clipping, the step at the schedule's learning rate. */
int policy_step(policy *p, trainer *t, const update_config *c, double *grad_norm, double *lr, gerr *e);

/* The optimizer state's tensors: one per trained tensor, named as in the
 * weights file, pointing into p's moments. Caller frees *out and names. */
size_t policy_optim_tensors(const policy *p, optim_tensor **out);

/* Writes the next checkpoint to o->out, whole or not at all. */
int policy_save(const policy *p, const update_opts *o, const update_config *c, const char *batch_sha256, gerr *e);

typedef struct {
    long long step;
    loss_metrics loss;
    double grad_norm, lr, seconds;
} metrics_line;

/* Appends one metrics line (formats/metrics.md) to path. */
int metrics_append(const char *path, const metrics_line *ml, const update_batch *b, gerr *e);

#endif
