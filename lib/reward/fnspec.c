/* --fn NAME[:WEIGHT][,...]: choosing and opening the reward functions. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stage.h"

/* One "NAME[:WEIGHT]" of a spec. */
static int parse_one(const char *s, size_t len, char *name, size_t name_cap, double *weight, gerr *e) {
    const char *colon = memchr(s, ':', len);
    size_t name_len = colon ? (size_t)(colon - s) : len;
    if (name_len == 0 || name_len >= name_cap)
        return gerr_set(e, EX_USAGE, "--fn: expected NAME[:WEIGHT], got '%.*s'", (int)len, s);
    memcpy(name, s, name_len);
    name[name_len] = 0;
    *weight = 1.0;
    if (colon) {
        char num[64];
        size_t num_len = len - name_len - 1;
        if (num_len == 0 || num_len >= sizeof num)
            return gerr_set(e, EX_USAGE, "--fn %s: expected a weight after ':', got '%.*s'", name, (int)num_len,
                            colon + 1);
        memcpy(num, colon + 1, num_len);
        num[num_len] = 0;
        char *end;
        errno = 0;
        *weight = strtod(num, &end);
        if (*end || errno || !isfinite(*weight))
            return gerr_set(e, EX_USAGE, "--fn %s: expected a finite weight, got '%s'", name, num);
    }
    return 0;
}

void reward_close_fns(reward_fn *fns, size_t n_fns) {
    for (size_t i = 0; i < n_fns; i++)
        if (fns[i].close) fns[i].close(fns[i].self);
    free(fns);
}

int reward_open_fns(const char *const *specs, int n_specs, const reward_opts *p, reward_fn **out,
                    size_t *n_out, gerr *e) {
    reward_fn *fns = NULL;
    size_t n = 0, cap = 0;
    for (int k = 0; k < n_specs; k++) {
        const char *s = specs[k];
        for (;;) {
            const char *comma = strchr(s, ',');
            size_t len = comma ? (size_t)(comma - s) : strlen(s);
            char name[64];
            double weight = 1.0;
            if (parse_one(s, len, name, sizeof name, &weight, e)) goto fail;
            const reward_fn_def *def = reward_find_def(name);
            if (!def) {
                gerr_set(e, EX_USAGE, "--fn: unknown reward function '%s' (grpo-reward --list shows them)", name);
                goto fail;
            }
            for (size_t i = 0; i < n; i++)
                if (!strcmp(fns[i].name, def->name)) {
                    gerr_set(e, EX_USAGE, "--fn: '%s' is given twice", name);
                    goto fail;
                }
            if (n == cap) {
                cap = cap ? cap * 2 : 4;
                fns = xrealloc(fns, cap * sizeof *fns);
            }
            reward_fn *fn = &fns[n];
            memset(fn, 0, sizeof *fn);
            if (def->open(fn, p, e)) goto fail;
            fn->name = def->name;
            fn->weight = weight;
            n++;
            if (!comma) break;
            s = comma + 1;
        }
    }
    if (n == 0) {
        gerr_set(e, EX_USAGE, "--fn: no reward function given (grpo-reward --list shows them)");
        goto fail;
    }
    *out = fns;
    *n_out = n;
    return 0;
fail:
    reward_close_fns(fns, n);
    return e->code ? e->code : EX_USAGE;
}
