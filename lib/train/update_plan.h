/* grpo-update's options: as the flags give them (update_opts), and resolved
 * once (update_plan_resolve) into the plan that the run, the policy's
 * loading and the checkpoint's flags record read.
 *
 * Each option's default, range and choices live in one place: the defaults
 * in update_opts_default (the loss's from loss_opts_default, the
 * optimizer's from optim_opts_default); the choices in the kind tables
 * that parse them (loss_kind_names, optim_kind_names, ...), from which the
 * flag table takes its own; the ranges in the checks the plan is resolved
 * with (loss_opts_check, optim_opts_check, and the run's own in
 * update_plan.c), so the flag table gives none. */
#ifndef GRPO_UPDATE_PLAN_H
#define GRPO_UPDATE_PLAN_H

#include <stdbool.h>

#include "../ops/backend.h"
#include "../util/err.h"
#include "loss.h"
#include "optim.h"

/* The options that need no resolving beyond their range: the same in the
 * flags and in the plan. */
typedef struct {
    const char *model, *out, *in, *ref, *metrics; /* model and out required */
    long long iterations;         /* optimizer steps over the batch */
    bool mask_truncated, recompute;
    double temperature;           /* < 0: the records' (else 1) */
    long long max_new_tokens;     /* dr_grpo's L; 0 = the longest completion in the batch */
    long long micro_batch;        /* tokens per micro-batch */
    bool group_sums;              /* micro-batches within prompt groups, summed in float64 */
    long long lora_r;             /* 0: full fine-tuning */
    double lora_alpha;            /* <= 0: 2 r */
    double lora_dropout;
    bool rslora;
    long long seed;
    bool seed_given, lora_given, lora_targets_given;
    long long threads;
    long long zero;               /* 1: ZeRO-1, AdamW state sharded across MPI ranks */
    const char *device;           /* one of device_names (lib/runner/device.h) */
    const backend *backend;       /* not NULL: run on it, --device aside (the unit tests' fake device) */
    const char *compute;          /* one of update_compute_names: the matrix products' operands */
    bool compute_given;
    const char *base_weights;     /* one of update_base_weights_names: the frozen base's format under LoRA */
    bool base_weights_given;
    bool progress;                /* progress on stderr even when it is not a terminal */
} update_run_opts;

/* The flags as given: the choices as the names of their kind tables, the
 * numbers as typed. */
typedef struct {
    update_run_opts run;
    struct {
        const char *optimizer, *lr_schedule;                      /* optim.h's kind tables */
        const char *loss, *importance_level, *is_mode;           /* loss.h's */
        const char *is_correction, *old_logp;                     /* update_is_names, update_old_logp_names */
        const char *routing;                                      /* update_routing_names */
    } choice;
    optim_opts optim;         /* its numbers (kind and schedule: choice; betas: below) */
    const char *betas;        /* "B1,B2" */
    loss_opts loss;           /* its numbers (kinds and levels: choice); epsilon_high < 0: --epsilon's */
    const char *lora_targets; /* "q,k,v" or all (lora_parse_targets) */
} update_opts;

/* --compute's choices: f32, bf16, or auto (bf16 where the device or the CPU
 * has it; policy_load resolves it). */
extern const char *const update_compute_names[3];
/* --base-weights' choices: f32, bf16, q8, q4k, mxfp4 (a gpt-oss's MXFP4
 * experts kept as the file's blocks), or auto, last (for a LoRA run on the
 * CPU the file's format, model_file_format; else f32; policy_load resolves
 * it, a checkpoint continuing with its own). */
enum { UPDATE_BASE_N = 6 };
extern const char *const update_base_weights_names[UPDATE_BASE_N];

/* --is-correction's choices: auto, then is_level_names; --old-logp's:
 * auto, records, recompute. auto resolves for the batch read
 * (update_plan_for_batch). */
extern const char *const update_is_names[1 + IS_N_LEVELS];
typedef enum { OLD_LOGP_AUTO, OLD_LOGP_RECORDS, OLD_LOGP_RECOMPUTE } old_logp_source;
extern const char *const update_old_logp_names[3];

/* --routing's choices: auto, replay, recompute (a mixture of experts'
 * routing in training, formats/loss.md); auto resolves for the batch read
 * (update_plan_routing). */
typedef enum { ROUTING_AUTO, ROUTING_REPLAY, ROUTING_RECOMPUTE } routing_mode;
extern const char *const update_routing_names[3];

/* grpo-update's defaults. */
void update_opts_default(update_opts *o);

/* The options resolved: what the run reads. */
typedef struct {
    update_run_opts run;
    optim_opts optim;
    const char *betas;       /* --betas as given: the flags record keeps its spelling */
    loss_opts loss;
    unsigned lora_targets;   /* a bit per LORA_* target */
    bool is_auto;            /* --is-correction auto: loss.is_level set by update_plan_for_batch */
    old_logp_source old_logp; /* auto until update_plan_for_batch, then records or recompute */
    routing_mode routing;     /* auto until update_plan_routing, then replay or recompute */
} update_plan;

/* Checks o and resolves it into *p: EX_USAGE naming the flag when one is
 * missing, out of its range, or not among its choices. */
int update_plan_resolve(const update_opts *o, update_plan *p, gerr *e);

/* The auto choices for a batch of which n_off records were sampled with
 * arithmetic other than the float32 trainer's or by another checkpoint
 * (lib/io/sampler_field.h, policy_step), n_raw of them with log-probs that
 * are not of the distribution sampled: with any such record pi_old is
 * recomputed, and the sampler/trainer weight is applied per token
 * (IS_TOKEN, with --is-mode and --is-cap) unless a record's log-probs are
 * raw, which no weight can use, or --old-logp records was given; without,
 * pi_old is the records' and there is no weight. Explicit flags stay as
 * given. */
void update_plan_for_batch(update_plan *p, long n_off, long n_raw);

/* --routing auto for a batch of which every record that trains carries
 * the sampler's routing (all_routed) or not: replay when every one does,
 * else recompute. Explicit flags stay as given. */
void update_plan_routing(update_plan *p, bool all_routed);

#endif
