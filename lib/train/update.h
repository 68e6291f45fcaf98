/* grpo-update: one GRPO update of a policy checkpoint on a batch of
 * advantaged records (formats/advantaged.md), written as the next checkpoint
 * (formats/checkpoint.md) and one metrics line per optimizer step
 * (formats/metrics.md). The math is in formats/loss.md. */
#ifndef GRPO_UPDATE_H
#define GRPO_UPDATE_H

#include <stdbool.h>
#include <stdint.h>

#include "../ops/backend.h"
#include "../util/err.h"
#include "loss.h"
#include "optim.h"

typedef struct {
    const char *model, *out, *in, *ref, *metrics;
    const char *optimizer, *lr_schedule, *betas, *loss, *importance_level;
    optim_opts optim;
    double beta, epsilon, epsilon_high; /* epsilon_high < 0: same as epsilon */
    double delta;                       /* 0: off */
    double sapo_tau_pos, sapo_tau_neg;
    double entropy_coef, top_entropy_quantile;
    double off_policy_mask_threshold;   /* < 0: off */
    const char *is_correction, *is_mode; /* none|token|sequence, truncate|mask */
    double is_cap;
    long long iterations;
    bool recompute_old, mask_truncated, recompute;
    double temperature;           /* < 0: the records' own (else 1) */
    long long max_new_tokens;     /* dr_grpo's L; 0 = the longest completion in the batch */
    long long micro_batch;        /* tokens per micro-batch */
    bool group_sums;              /* micro-batches within prompt groups, summed in float64 */
    long long lora_r;             /* 0: full fine-tuning */
    double lora_alpha;            /* <= 0: 2 r */
    double lora_dropout;
    const char *lora_targets;
    bool rslora;
    long long seed;
    bool seed_given, lora_given;
    long long threads;
    long long zero;               /* 1: ZeRO-1, AdamW state sharded across MPI ranks */
    const char *device;           /* auto|cpu|cuda (lib/runner/device.h) */
    const backend *backend;       /* not NULL: run on it, --device aside (the unit tests' fake device) */
    const char *compute;          /* f32|bf16|auto: the matrix products' operands */
    bool compute_given;
    bool progress;
} update_opts;

void update_opts_default(update_opts *o);
int update_run(const update_opts *o, gerr *e);

/* ---- the batch (update_batch.c) ---------------------------------------------------- */

/* The records that take part, as packed sequences (prompt + completion). */
typedef struct {
    int n;                 /* sequences */
    int *start;            /* [n+1] token offsets */
    int *n_prompt;         /* [n] */
    int32_t *tokens;
    uint8_t *target;       /* per token: 1 where it is trained on (a completion token the policy sampled) */
    int *tgt_start;        /* [n+1] offsets of their trained tokens ("targets") */
    float *old_logp;       /* [targets]: the rollout's logprobs */
    double *advantage;     /* [n] */
    uint64_t *key;         /* [n]: record number in the file, for dropout masks */
    int n_groups;          /* prompt groups: runs of sequences with the same id */
    int *group_start;      /* [n_groups+1] sequence offsets */
    long n_records, n_no_advantage, n_masked;
    int max_len, max_completion; /* max_completion: the most targets of one sequence */
    double temperature;    /* what the batch was sampled at */
    bool temperature_seen;
    /* metrics of the whole batch (masked and advantage-less records included) */
    double mean_length, clipped_ratio, reward, reward_std, frac_reward_zero_std;
    bool has_reward;
    long total_tokens;     /* prompt + completion tokens of the sequences trained on */
    char sha256[65];
} update_batch;

/* Reads every record of path (NULL/"-" = stdin); vocab bounds the token ids.
 * Errors name FILE:LINE and the field (EX_DATAERR), EX_NOINPUT/EX_IOERR. */
int update_batch_read(update_batch *b, const char *path, int vocab, bool mask_truncated, gerr *e);
void update_batch_free(update_batch *b);
/* Sequences s0 .. s1-1 of all as a batch of their own (offsets from 0; keys,
 * temperature, hash and batch metrics as all's; its groups those of all,
 * which s0 and s1 must bound): one rank's share. */
void update_batch_share(const update_batch *all, int s0, int s1, update_batch *mine);

#endif
