/* --preset auto: one function scored only on the records whose `task`
 * selects a preset that lists it (preset.h); null on the others. */
#include <stdlib.h>
#include <string.h>

#include "preset.h"

typedef struct {
    reward_fn inner;
    reward_item *subset; /* the chunk's records this function applies to */
    size_t *where;       /* their positions in the chunk */
    double *values;
    size_t cap;
    strbuf task;
} task_filter;

/* Whether the spec list `fns` names function `name`. */
static bool lists(const char *fns, const char *name) {
    size_t n = strlen(name);
    for (const char *s = fns; *s;) {
        size_t len = strcspn(s, ",:");
        if (len == n && !memcmp(s, name, n)) return true;
        s += strcspn(s, ",");
        if (*s) s++;
    }
    return false;
}

static int filter_score(void *self, const reward_item *items, size_t n, double *out, gerr *e) {
    task_filter *f = self;
    if (n > f->cap) {
        f->cap = n;
        f->subset = xrealloc(f->subset, n * sizeof *f->subset);
        f->where = xrealloc(f->where, n * sizeof *f->where);
        f->values = xrealloc(f->values, n * sizeof *f->values);
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        int present = 0;
        int rc = record_get_string(items[i].rec, "task", false, &f->task, &present, e);
        if (rc) return rc;
        const reward_preset *pr = reward_preset_for_task(present == 2 ? f->task.data : NULL, f->task.len);
        if (!lists(pr->fns, f->inner.name)) continue;
        f->subset[m] = items[i];
        f->where[m] = i;
        f->values[m] = REWARD_NULL;
        m++;
    }
    if (m == 0) return 0;
    int rc = f->inner.score(f->inner.self, f->subset, m, f->values, e);
    if (rc) return rc;
    for (size_t k = 0; k < m; k++) out[f->where[k]] = f->values[k];
    return 0;
}

static void filter_stats(void *self, cJSON *obj) {
    task_filter *f = self;
    if (f->inner.stats) f->inner.stats(f->inner.self, obj);
}

static int filter_finish(void *self, gerr *e) {
    task_filter *f = self;
    return f->inner.finish ? f->inner.finish(f->inner.self, e) : 0;
}

static void filter_close(void *self) {
    task_filter *f = self;
    if (!f) return;
    if (f->inner.close) f->inner.close(f->inner.self);
    free(f->subset);
    free(f->where);
    free(f->values);
    sb_free(&f->task);
    free(f);
}

int reward_filter_by_task(reward_fn *fn, gerr *e) {
    if (!fn->score)
        return gerr_set(e, EX_SOFTWARE, "--preset auto: function '%s' gives named values, not one", fn->name);
    task_filter *f = xcalloc(1, sizeof *f);
    f->inner = *fn;
    fn->self = f;
    fn->score = filter_score;
    fn->stats = filter_stats;
    fn->finish = filter_finish;
    fn->close = filter_close;
    return 0;
}
