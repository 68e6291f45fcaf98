/* Optimizer step, learning-rate schedule and gradient clipping, each as
 * its PyTorch / transformers counterpart computes it:
 *   AdamW   torch.optim.AdamW (float32, amsgrad off, single-tensor path)
 *   SGD     p -= lr g, no momentum, decoupled weight decay as AdamW's
 *   schedules transformers.get_{constant,linear,cosine}_schedule_with_warmup
 *   clipping torch.nn.utils.clip_grad_norm_ (global L2 norm, 1e-6 guard)
 * The loops over parameters run in OpenMP threads; every result is the same
 * for any thread count (the norm sums fixed chunks in a fixed order). */
#ifndef GRPO_OPTIM_H
#define GRPO_OPTIM_H

#include <stdbool.h>
#include <stddef.h>

#include "../ops/backend.h"
#include "../util/err.h"

typedef enum { OPTIM_ADAMW, OPTIM_SGD } optim_kind;
typedef enum { SCHED_CONSTANT, SCHED_LINEAR, SCHED_COSINE } sched_kind;
enum { OPTIM_N_KINDS = OPTIM_SGD + 1, SCHED_N_KINDS = SCHED_COSINE + 1 };

/* The flags' spellings (--optimizer, --lr-schedule), in enum order
 * (lib/util/flags.h's kind tables). */
extern const char *const optim_kind_names[OPTIM_N_KINDS];
extern const char *const sched_kind_names[SCHED_N_KINDS];

/* One of the names; EX_USAGE naming the flag on anything else. */
int optim_kind_parse(const char *s, optim_kind *k, gerr *e);
int sched_kind_parse(const char *s, sched_kind *k, gerr *e);
/* The flags' spellings; NULL for a value outside the enum. */
const char *optim_kind_name(optim_kind k);
const char *sched_kind_name(sched_kind k);
/* "B1,B2" for --betas: two numbers in [0, 1). EX_USAGE otherwise. */
int optim_parse_betas(const char *s, double *beta1, double *beta2, gerr *e);
/* --betas' default, "0.9,0.999": what optim_opts_default sets. */
extern const char optim_default_betas[];

typedef struct {
    optim_kind kind;
    double lr;            /* peak learning rate */
    double beta1, beta2;  /* AdamW moment decays */
    double eps;           /* AdamW denominator guard (--adam-eps) */
    double weight_decay;  /* decoupled: p *= 1 - lr wd, only on tensors marked decay */
    sched_kind schedule;
    long warmup_steps, total_steps;
    double max_grad_norm; /* 0 = no clipping */
} optim_opts;

/* adamw, lr 1e-6, betas 0.9,0.999, eps 1e-8, no weight decay, constant
 * schedule without warmup, no clipping. */
void optim_opts_default(optim_opts *o);

/* Each number within its range, EX_USAGE naming the flag otherwise: the one
 * place the ranges are decided. lr in [0, 1e6], betas in [0, 1), eps in
 * (0, 1] (AdamW divides by sqrt(v) + eps, and v is 0 where a gradient is:
 * 0 would give 0/0), weight decay in [0, 1e6], max grad norm in [0, 1e12],
 * warmup and total steps in [0, 1e12], and total_steps >= 1 with the
 * linear or cosine schedule (they need an end). */
int optim_opts_check(const optim_opts *c, gerr *e);

/* The schedule's multiplier of lr at `step`, the number of optimizer steps
 * already taken (0 for the first step, as transformers' LambdaLR sees it):
 *   step < warmup: step / warmup (so the first step of a warmup has lr 0)
 *   constant: 1
 *   linear:   max(0, (total - step) / max(1, total - warmup))
 *   cosine:   0.5 (1 + cos(pi progress)), progress = (step - warmup) /
 *             max(1, total - warmup); 0 from step >= total on (transformers'
 *             curve would rise again past the end). */
double optim_lr_multiplier(const optim_opts *c, long step);
/* lr times the multiplier. */
double optim_lr_at(const optim_opts *c, long step);

/* One update of a flat parameter array of n floats. t: the 1-based step
 * number for AdamW's bias correction (1 on the first step); lr: this step's
 * learning rate (optim_lr_at). m and v: AdamW's exp_avg and exp_avg_sq,
 * zero before the first step; unused (may be NULL) with SGD. decay: apply
 * weight decay to this tensor (2-D weight matrices; not norms or biases).
 * The update runs on be (where param lives). */
void optim_step(const backend *be, const optim_opts *c, long t, double lr, float *param, const float *grad,
                float *m, float *v, size_t n, bool decay);

/* The L2 norm of n gradient arrays taken together, summed in double. */
double grad_global_norm(const float *const *grads, const size_t *sizes, int n);
/* Its square before the root: what ranks holding slices add up. */
double grad_sum_squares(const float *const *grads, const size_t *sizes, int n);
/* clip_grad_norm_'s factor: max_norm / (norm + 1e-6) when that is below 1,
 * else 1 (and 1 when max_norm <= 0, clipping off). An infinite norm gives 0
 * and NaN gives 1: check the norm is finite before stepping. */
double grad_clip_scale(double norm, double max_norm);
/* Multiplies every gradient by scale (nothing when scale == 1). */
void grad_scale(float *const *grads, const size_t *sizes, int n, double scale);

#endif
