/* The pieces of grpo-update's run (update.c) that live in policy.c,
 * update_micro.c and update_out.c. */
#ifndef GRPO_UPDATE_INTERNAL_H
#define GRPO_UPDATE_INTERNAL_H

#include <sys/types.h>

#include "../dataparallel/dist.h"
#include "../model/lora.h"
#include "../model/model.h"
#include "../util/strbuf.h"
#include "loss.h"
#include "optim.h"
#include "state.h"
#include "trainer.h"
#include "update.h"

/* What is trained and its optimizer state. */
typedef struct {
    model m;
    lora l;
    bool has_lora;
    float *params;        /* m.params_memory or l.memory */
    size_t n_trained;
    float *exp_avg, *exp_avg_sq; /* AdamW moments of lo .. hi-1 (NULL with SGD) */
    /* This rank's slice of the trained floats: all of them, or with --zero 1
     * under MPI its ZeRO-1 share (bounds: every rank's, [ranks + 1]; NULL
     * without sharding). The rank updates its slice; the slices are then
     * gathered, so params is always whole. */
    size_t lo, hi;
    size_t *bounds;
    /* On a device (grpo-update --device cuda; NULL dev: the CPU): the
     * trained floats and the AdamW moments in its memory, where the step
     * runs; params, exp_avg and exp_avg_sq above are the host's copies,
     * filled from these by policy_download before a save. The weights the
     * ops read are m.dev (model_to_backend: bf16 matrices on CUDA),
     * refreshed from params_dev after each step of a full fine-tune; with
     * LoRA, l_dev is the adapter with its factors at params_dev. */
    const backend *dev;
    float *params_dev, *exp_avg_dev, *exp_avg_sq_dev;
    lora l_dev;
    long long step, next_index, seed;
    const char *compute;  /* f32|bf16: --compute, or the checkpoint's when not given */
    const char *base_weights; /* f32|bf16|q8|q4k|mxfp4: --base-weights, or the checkpoint's when not given */
    weight_format base_fmt;   /* the format the base loaded in (auto: the file's) */
    char *ref_path;       /* the reference of a full fine-tune (NULL with LoRA) */
} policy;

/* Loads --model: weights, adapter (continued, or made fresh with --lora-r),
 * and grpo/state.json + optimizer.safetensors when --model is our
 * checkpoint. device: it will train on a device (policy_to_device), whose
 * products are bf16: --compute auto means bf16 there, f32 is refused. */
int policy_load(policy *p, const update_plan *plan, const dist *d, bool device, gerr *e);
void policy_free(policy *p);
/* Moves what trains onto the device be (a backend with memory of its own):
 * the weights (model_to_backend), the trained floats and the moments. */
int policy_to_device(policy *p, const backend *be, gerr *e);
/* The adapter the trainer reads: l_dev on a device, else l. */
lora *policy_lora(policy *p);
/* The device's trained floats and moments copied back into params,
 * exp_avg and exp_avg_sq (nothing on the CPU). */
int policy_download(policy *p, gerr *e);
/* One optimizer step from the accumulated gradients of t, summed over the
 * ranks first: global norm, clipping, the step at the schedule's learning
 * rate (each rank its slice, then gathered, with --zero 1). */
int policy_step(policy *p, trainer *t, const optim_opts *c, const dist *d, double *grad_norm, double *lr, gerr *e);

/* The optimizer state's tensors: one per trained tensor, named as in the
 * weights file, pointing into p's moments. Caller frees *out and names. */
size_t policy_optim_tensors(const policy *p, optim_tensor **out);

/* state.json's "flags": every flag as used, defaults filled in, and the
 * number of ranks that trained the step; ranks compare it before any work. */
void update_flags_json(strbuf *b, const policy *p, const update_plan *plan, int ranks);

typedef struct {
    long long step;
    loss_metrics loss;
    double grad_norm, lr, seconds;
    double balance; /* the router's load-balancing loss (trainer.h's balance_sum); NaN when off */
} metrics_line;

/* The metrics lines appended and fsync'd, not yet final: fd open, the
 * lines the len bytes before end. */
typedef struct {
    int fd; /* -1: none */
    off_t end, len;
} metrics_pending;
/* Appends n metrics lines (formats/metrics.md) to path in one write, fsync'd;
 * on failure the file keeps whole lines only. */
int metrics_append(const char *path, const metrics_line *ml, long long n, const update_batch *b,
                   metrics_pending *mp, gerr *e);
/* Cuts the lines off a regular file again (when nothing came after them). */
void metrics_retract(metrics_pending *mp);
/* Keeps them. */
void metrics_close(metrics_pending *mp);

/* Writes the next checkpoint to --out, whole or not at all, and with it
 * the run's metrics lines (lines[--iterations]) to --metrics: appended
 * and fsync'd just before the checkpoint is swapped in, cut off again when
 * the swap fails. Every rank calls it: with --zero 1 the moments' slices
 * are gathered to rank 0, which alone writes; every rank returns the same
 * result. */
int policy_save(const policy *p, const update_plan *plan, const dist *d, const update_batch *b,
                const metrics_line *lines, gerr *e);

/* ---- micro-batches (update_micro.c) ----------------------------------------------- */

/* Consecutive sequences of b from s0 packed up to budget tokens (at least
 * one) as *tb, their row offsets in mstart [b->n + 1]; by_group: none past
 * the end of s0's prompt group, so that a group is cut into the same
 * micro-batches whatever share of the batch it is in. Returns how many. */
int micro_next(const update_batch *b, int s0, long long budget, bool by_group, train_batch *tb, int *mstart);

/* The biggest micro-batch, to size the trainer: rows, rows computed (with
 * share, a group's prompt once: train_batch_rows) and targets. */
typedef struct {
    int rows, computed, targets;
} micro_size;

micro_size micro_sizes(const update_batch *b, long long budget, bool by_group, bool share);

/* logp (and entropy, when not NULL) of every target of b, forward only:
 * the reference, the old policy, or the entropies of the policy. */
void logp_pass(trainer *t, const update_batch *b, long long budget, bool by_group, float temp, bool lora_off,
               float *out, float *entropy);

/* The reference log-probs of b's targets: the base under the adapter, or a
 * second model (or the policy itself at step 0). */
int reference_pass(trainer *t, const policy *pol, const update_plan *plan, const update_batch *b, float temp,
                   float *ref_logp, gerr *e);

#endif
