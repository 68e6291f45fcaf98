/* The batch statistics of --stats: counts, reward moments, and the mean of
 * each reward function's values, named as TRL logs them. */
#ifndef GRPO_ADV_STATS_H
#define GRPO_ADV_STATS_H

#include "../io/record.h"
#include "../util/stats.h"
#include "advantage.h"

typedef struct {
    char *name; /* decoded reward-function name */
    size_t len;
    welford m;     /* its non-null values */
} adv_fn_stat;

typedef struct {
    long long records, groups, groups_flat, groups_dropped, null_rewards, records_written;
    welford reward;       /* every non-null reward */
    double group_std_sum; /* sum of within-group stds, for reward_std */
    adv_fn_stat *fns;
    size_t n_fns, cap_fns;
} adv_stats;

void adv_stats_init(adv_stats *s);
void adv_stats_free(adv_stats *s);
/* Calls fn for each entry of the record's `rewards` object, in order, with
 * v NULL for a null value; the object may be absent or null (no calls).
 * Checks every entry (number or null, finite): EX_DATAERR naming FILE:LINE.
 * A non-zero return of fn stops the walk and is returned. fn may be NULL. */
typedef int (*adv_reward_fn)(void *ctx, const record *r, const char *name, const double *v, gerr *e);
int adv_rewards_each(const record *r, adv_reward_fn fn, void *ctx, gerr *e);

/* Reads the record's `rewards` object ({name: number|null}; absent or null
 * is fine) and, when s is not NULL, adds its values. Errors: EX_DATAERR. */
int adv_stats_read_rewards(adv_stats *s, const record *r, gerr *e);
/* Appends the statistics as one JSON object and a newline. */
void adv_stats_to_json(const adv_stats *s, strbuf *out);

#endif
