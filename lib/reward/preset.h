/* Reward presets: named --fn lists per task, as other trainers ship them
 * (grpo-reward --preset NAME; --list prints them).
 *
 *   math       answer:1,format:0.2
 *   code       code:1,format:0.2
 *   general    answer:1,format:0.2,repetition:0.5   (answer is null without a reference)
 *   reasoning  answer:1,format:0.5,length:1          (length needs --max-len or --min-len)
 *   auto       per record, by its `task` (grpo-prep writes it): arith, countdown,
 *              gsm8k, math -> math; mbpp -> code; anything else or none -> general.
 *              The functions of math, code and general are all opened (their
 *              weights agree); a function outside the record's preset is null
 *              there, so it neither runs nor counts in `reward`.
 * Functions given with --fn as well are added after the preset's, for every record. */
#ifndef GRPO_REWARD_PRESET_H
#define GRPO_REWARD_PRESET_H

#include "reward.h"

typedef struct {
    const char *name;
    const char *fns;     /* an --fn spec */
    const char *summary; /* one line, for --list */
} reward_preset;

extern const reward_preset reward_presets[];
extern const size_t reward_n_presets;

/* The preset a record of this task gets under auto (task may be NULL). */
const reward_preset *reward_preset_for_task(const char *task, size_t len);

/* Opens preset `name`'s functions, then those of specs (as reward_open_fns).
 * An unknown name is EX_USAGE. */
int reward_open_preset(const char *name, const char *const *specs, int n_specs, const reward_opts *p,
                       reward_fn **out, size_t *n_out, gerr *e);

/* Wraps an opened function so that it scores only the records whose `task`
 * selects a preset listing it (auto); the others get null. Frees nothing on
 * failure: *fn is unchanged then. */
int reward_filter_by_task(reward_fn *fn, gerr *e);

#endif
