/* The `env` reward: the verdict of the environment a multi-turn episode ran
 * against (grpo-rollout --env), which the rollout records as `env_reward`.
 * Null where the record has none (an episode the environment ended without
 * one, or a single-turn record): it is then left out of the sum. */
#include <math.h>
#include <sysexits.h>

#include "reward.h"

static int env_score(void *self, const reward_item *items, size_t n, double *out, gerr *e) {
    (void)self;
    for (size_t i = 0; i < n; i++) {
        double v;
        int present;
        if (record_get_number(items[i].rec, "env_reward", false, &v, &present, e)) return e->code;
        if (present != 2) continue; /* stays REWARD_NULL */
        if (!isfinite(v))
            return gerr_at(e, EX_DATAERR, items[i].rec->file, items[i].rec->line,
                           "field \"env_reward\": expected a finite number");
        out[i] = v;
    }
    return 0;
}

static void env_close(void *self) { (void)self; }

int reward_open_env(reward_fn *fn, const reward_opts *p, gerr *e) {
    (void)p, (void)e;
    fn->self = NULL;
    fn->score = env_score;
    fn->stats = NULL;
    fn->close = env_close;
    return 0;
}
