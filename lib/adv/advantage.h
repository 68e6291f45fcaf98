/* Group-relative advantages (the grpo-advantage stage).
 *
 * A group is the run of consecutive records that share `id` (the K
 * completions of one prompt). Within a group, over the records whose
 * `reward` is a number (null or missing rewards take no part):
 *
 *   A_i = (r_i - b_i) / (s + 1e-4)
 *
 * b_i: the group mean (--baseline mean) or the mean of the other members
 * (--baseline loo, RLOO). s: the group's unbiased (n-1) std (--scale group,
 * as TRL), the std of every non-null reward of the whole input (--scale
 * batch), or no division at all (--scale none, Dr. GRPO). A group whose
 * rewards are all equal ("flat") gets exactly 0.
 *
 * formats/advantaged.md is the user-facing specification. */
#ifndef GRPO_ADVANTAGE_H
#define GRPO_ADVANTAGE_H

#include <stdbool.h>
#include <stddef.h>

#include "../util/err.h"
#include "../util/flags.h"

typedef enum { ADV_SCALE_GROUP, ADV_SCALE_BATCH, ADV_SCALE_NONE } adv_scale;
typedef enum { ADV_BASELINE_MEAN, ADV_BASELINE_LOO } adv_baseline;
/* Where the weights of several rewards meet the normalisation (adv_multi.h). */
typedef enum { ADV_SUM_THEN_NORMALIZE, ADV_NORMALIZE_THEN_SUM } adv_multi_mode;

/* Added to the std before dividing, as TRL does, so near-flat groups stay finite. */
#define ADV_STD_EPS 1e-4

/* ---- pure math (adv_math.c) ------------------------------------------------ */

typedef struct {
    size_t n_valid; /* members with a numeric reward */
    double mean;    /* of the valid rewards; 0 when there are none */
    double std;     /* unbiased; 0 when flat */
    bool flat;      /* fewer than two distinct valid rewards (0 or 1 valid counts as flat) */
} adv_group_stats;

/* Mean, std and flatness of the rewards r[i] with valid[i]. */
adv_group_stats adv_group_stats_of(const double *r, const bool *valid, size_t n);

/* Advantages of one group into a[i] for every valid[i] (a[i] is left alone
 * where !valid[i]). batch_std is used only with ADV_SCALE_BATCH. Flat groups
 * get exactly 0. Returns the group's statistics. */
adv_group_stats adv_group_advantages(const double *r, const bool *valid, size_t n, adv_scale scale,
                                     adv_baseline baseline, double batch_std, double *a);

/* Unbiased (n-1) standard deviation of v[0..n-1], two-pass; 0 when n < 2. */
double adv_std(const double *v, size_t n);

/* ---- the stage (advantage.c) ----------------------------------------------- */

typedef struct {
    const char *in;    /* path, or NULL / "-" for stdin */
    const char *out;   /* path, or NULL / "-" for stdout; ".zst" compresses */
    const char *stats; /* path for the statistics object, or NULL */
    adv_scale scale;
    adv_baseline baseline;
    adv_multi_mode multi;
    const char *weights; /* --weights NAME[:W],...: normalize-then-sum's weights, or NULL (all 1) */
    bool drop_flat;     /* leave flat groups out of the output (DAPO dynamic sampling) */
    bool allow_partial; /* accept 1-record groups and groups split across the stream */
    bool progress;      /* force progress on stderr even when it is not a terminal */
    shard_spec shard;   /* only groups whose id falls in this shard are written */
} adv_opts;

/* Defaults: stdin to stdout, --scale group, --baseline mean, every shard. */
void adv_opts_default(adv_opts *o);

/* "group|batch|none" and "mean|loo"; EX_USAGE on anything else. */
int adv_parse_scale(const char *s, adv_scale *out, gerr *e);
int adv_parse_baseline(const char *s, adv_baseline *out, gerr *e);

/* Runs the stage. On failure no output or statistics file is left behind
 * (stdout excepted) and e says why (sysexits code). */
int adv_run(const adv_opts *o, gerr *e);

#endif
