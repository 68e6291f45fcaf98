/* grpo-update: one GRPO update of a policy checkpoint on a batch of
 * advantaged records (formats/advantaged.md), written as the next checkpoint
 * (formats/checkpoint.md) and one metrics line per optimizer step
 * (formats/metrics.md). The math is in formats/loss.md. */
#ifndef GRPO_UPDATE_H
#define GRPO_UPDATE_H

#include <stdbool.h>
#include <stdint.h>

#include "../io/routing_field.h"
#include "../util/err.h"
#include "update_plan.h"

/* The whole update as the plan says (update_plan_resolve). */
int update_run(const update_plan *p, gerr *e);

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
    /* [tokens][routing_width]: the sampler's experts at each position (a
     * sequence's last position unused), or NULL: every sequence routes itself */
    uint16_t *routing;
    int routing_width;     /* Lm * k */
    long n_routed;         /* sequences trained on whose record has routing */
    double *advantage;     /* [n] */
    uint64_t *key;         /* [n]: record number in the file, for dropout masks */
    int n_groups;          /* prompt groups: runs of sequences with the same id */
    int *group_start;      /* [n_groups+1] sequence offsets */
    long n_records, n_no_advantage, n_masked;
    int max_len, max_completion; /* max_completion: the most targets of one sequence */
    long n_inexact;        /* records whose sampler computes otherwise than the trainer (sampler_field.h) */
    long n_raw;            /* of those, records whose log-probs are not of the distribution sampled (a server's "raw") */
    long n_policy_step;    /* records with a policy_step, and its sum and range over them */
    double sum_policy_step;
    long long min_policy_step, max_policy_step;
    double staleness_mean, staleness_max; /* the trained checkpoint's step less theirs (NaN: none has one) */
    double temperature;    /* what the batch was sampled at */
    bool temperature_seen;
    /* metrics of the whole batch (masked and advantage-less records included) */
    double mean_length, clipped_ratio, reward, reward_std, frac_reward_zero_std;
    bool has_reward;
    long total_tokens;     /* prompt + completion tokens of the sequences trained on */
    char sha256[65];
} update_batch;

/* What update_batch_read makes of the records' routing field
 * (lib/io/routing_field.h). */
typedef struct {
    routing_shape shape; /* the model's; layers 0: the field is not read */
    bool required;       /* a record that trains without it is an error (--routing replay) */
} batch_routing;

/* Reads every record of path (NULL/"-" = stdin); vocab bounds the token ids.
 * With rt->shape.layers > 0 each record's routing is read and checked
 * against the model, and kept when every sequence that trains has one
 * (b->routing; n_routed counts them either way). trainer_base, the format
 * of the trainer's frozen base ("f32", "bf16", "q8", "q4k", "mxfp4"), and
 * trainer_compute, its products' ("f32", "bf16"), decide which samplers
 * are exact (n_inexact; lib/io/sampler_field.h).
 * Errors name FILE:LINE and the field (EX_DATAERR), EX_NOINPUT/EX_IOERR. */
int update_batch_read(update_batch *b, const char *path, int vocab, bool mask_truncated, const batch_routing *rt,
                      const char *trainer_base, const char *trainer_compute, gerr *e);
void update_batch_free(update_batch *b);
/* Sequences s0 .. s1-1 of all as a batch of their own (offsets from 0; keys,
 * temperature, hash and batch metrics as all's; its groups those of all,
 * which s0 and s1 must bound): one rank's share. */
void update_batch_share(const update_batch *all, int s0, int s1, update_batch *mine);

#endif
