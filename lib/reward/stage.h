/* The grpo-reward stage: rollout records in, scored records out
 * (formats/scored.md). Records are read a chunk at a time and every
 * function scores the whole chunk, so slow functions overlap their work;
 * memory is bounded by the chunk. */
#ifndef GRPO_REWARD_STAGE_H
#define GRPO_REWARD_STAGE_H

#include <stdbool.h>
#include <stddef.h>

#include "../util/flags.h"
#include "reward.h"

typedef struct {
    const char *in;    /* path, or NULL / "-" for stdin */
    const char *out;   /* path, or NULL / "-" for stdout; ".zst" compresses */
    const char *stats; /* path for the statistics object, or NULL */
    shard_spec shard;  /* only records whose id falls in this shard are scored and written */
    size_t chunk;      /* records scored together */
    bool progress;     /* force progress on stderr even when it is not a terminal */
    bool quiet;        /* no closing summary lines on stderr */
} reward_stage_opts;

/* Defaults: stdin to stdout, chunks of 512, every shard. */
void reward_stage_opts_default(reward_stage_opts *o);

/* Parses the --fn values ("NAME[:WEIGHT][,NAME[:WEIGHT]...]", repeatable)
 * and opens each function with p. Names must be known and appear once.
 * On failure nothing stays open. */
int reward_open_fns(const char *const *specs, int n_specs, const reward_opts *p, reward_fn **fns,
                    size_t *n_fns, gerr *e);
void reward_close_fns(reward_fn *fns, size_t n_fns);

/* Runs the stage. On failure no output or statistics file is left behind
 * (stdout excepted) and e says why (sysexits code). */
int reward_stage_run(const reward_stage_opts *o, reward_fn *fns, size_t n_fns, gerr *e);

#endif
