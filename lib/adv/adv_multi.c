/* normalize-then-sum (GDPO): each reward of `rewards` normalised within its
 * group, then summed with its weight (adv_multi.h). */
#include "adv_multi.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "adv_stats.h"

void adv_multi_init(adv_multi *m) { memset(m, 0, sizeof *m); }

void adv_multi_free(adv_multi *m) {
    for (size_t k = 0; k < m->n_obj; k++) free(m->obj[k].name);
    free(m->obj);
    free(m->val);
    free(m->has);
    free(m->taken);
    free(m->col);
    free(m->col_a);
    free(m->col_valid);
    memset(m, 0, sizeof *m);
}

int adv_parse_multi(const char *s, adv_multi_mode *out, gerr *e) {
    if (!strcmp(s, "sum-then-normalize")) *out = ADV_SUM_THEN_NORMALIZE;
    else if (!strcmp(s, "normalize-then-sum")) *out = ADV_NORMALIZE_THEN_SUM;
    else
        return gerr_set(e, EX_USAGE, "--multi-objective: expected sum-then-normalize or normalize-then-sum, got '%s'",
                        s);
    return 0;
}

/* The objective named name[0..len), or -1. Few rewards per run: a linear search. */
static long find_objective(const adv_multi *m, const char *name, size_t len) {
    for (size_t k = 0; k < m->n_obj; k++)
        if (m->obj[k].len == len && !memcmp(m->obj[k].name, name, len)) return (long)k;
    return -1;
}

/* A new column: the values of the group's earlier rows stay "absent". */
static size_t add_objective(adv_multi *m, const char *name, size_t len, double weight, bool from_flag) {
    if (m->n_obj == m->cap_obj) {
        m->cap_obj = m->cap_obj ? m->cap_obj * 2 : 8;
        m->obj = xrealloc(m->obj, m->cap_obj * sizeof *m->obj);
    }
    size_t old_f = m->n_obj, new_f = old_f + 1;
    if (m->rows * new_f > m->cap_cells) {
        m->cap_cells = m->rows * new_f * 2;
        m->val = xrealloc(m->val, m->cap_cells * sizeof *m->val);
        m->has = xrealloc(m->has, m->cap_cells * sizeof *m->has);
        m->taken = xrealloc(m->taken, m->cap_cells * sizeof *m->taken);
    }
    /* widen the rows in place, last row first */
    for (size_t i = m->rows; i-- > 0;) {
        for (size_t k = old_f; k-- > 0;) {
            m->val[i * new_f + k] = m->val[i * old_f + k];
            m->has[i * new_f + k] = m->has[i * old_f + k];
            m->taken[i * new_f + k] = m->taken[i * old_f + k];
        }
        m->has[i * new_f + old_f] = false;
        m->taken[i * new_f + old_f] = false;
        m->val[i * new_f + old_f] = 0;
    }
    adv_objective *o = &m->obj[m->n_obj++];
    o->name = xstrndup(name, len);
    o->len = len;
    o->weight = weight;
    o->from_flag = from_flag;
    o->seen = false;
    return old_f;
}

int adv_multi_set_weights(adv_multi *m, const char *spec, gerr *e) {
    m->weights_given = true;
    const char *s = spec;
    for (;;) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        /* the last ':' splits, so a name may hold one ("judge:v2:0.5") */
        const char *colon = NULL;
        for (const char *p = s; p < s + len; p++)
            if (*p == ':') colon = p;
        size_t name_len = colon ? (size_t)(colon - s) : len;
        if (name_len == 0)
            return gerr_set(e, EX_USAGE, "--weights: expected NAME[:WEIGHT], got '%.*s'", (int)len, s);
        double w = 1.0;
        if (colon) {
            char num[64];
            size_t num_len = len - name_len - 1;
            if (num_len == 0 || num_len >= sizeof num)
                return gerr_set(e, EX_USAGE, "--weights %.*s: expected a weight after ':', got '%.*s'",
                                (int)name_len, s, (int)num_len, colon + 1);
            memcpy(num, colon + 1, num_len);
            num[num_len] = 0;
            char *end;
            errno = 0;
            w = strtod(num, &end);
            if (*end || errno || !isfinite(w))
                return gerr_set(e, EX_USAGE, "--weights %.*s: expected a finite weight, got '%s'", (int)name_len,
                                s, num);
        }
        if (find_objective(m, s, name_len) >= 0)
            return gerr_set(e, EX_USAGE, "--weights: '%.*s' is given twice", (int)name_len, s);
        add_objective(m, s, name_len, w, true);
        if (!comma) break;
        s = comma + 1;
    }
    return 0;
}

void adv_multi_begin(adv_multi *m, size_t n) {
    size_t f = m->n_obj;
    if (n * f > m->cap_cells) {
        m->cap_cells = n * f * 2;
        m->val = xrealloc(m->val, m->cap_cells * sizeof *m->val);
        m->has = xrealloc(m->has, m->cap_cells * sizeof *m->has);
        m->taken = xrealloc(m->taken, m->cap_cells * sizeof *m->taken);
    }
    if (f) {
        memset(m->has, 0, n * f * sizeof *m->has);
        memset(m->taken, 0, n * f * sizeof *m->taken);
    }
    m->rows = n;
}

typedef struct {
    adv_multi *m;
    size_t row;
} load_ctx;

static int load_entry(void *ctx, const record *r, const char *name, const double *v, gerr *e) {
    load_ctx *c = ctx;
    adv_multi *m = c->m;
    size_t len = strlen(name);
    long k = find_objective(m, name, len);
    if (k < 0) {
        if (m->weights_given)
            return gerr_at(e, EX_DATAERR, r->file, r->line,
                           "field \"rewards\": key \"%.200s\" has no weight in --weights (name every reward, "
                           "e.g. grpo-reward's --fn list)",
                           name);
        k = (long)add_objective(m, name, len, 1.0, false);
    }
    adv_objective *o = &m->obj[k];
    o->seen = true;
    size_t cell = c->row * m->n_obj + (size_t)k;
    if (m->taken[cell])
        return gerr_at(e, EX_DATAERR, r->file, r->line, "field \"rewards\": key \"%.200s\" appears twice", name);
    m->taken[cell] = true;
    m->has[cell] = v != NULL;
    m->val[cell] = v ? *v : 0;
    return 0;
}

int adv_multi_load(adv_multi *m, size_t i, const record *r, gerr *e) {
    load_ctx c = {m, i};
    return adv_rewards_each(r, load_entry, &c, e);
}

bool adv_normalize_then_sum(const double *val, const bool *has, size_t n, size_t f, const double *w,
                            adv_baseline baseline, adv_scale scale, double *col, double *col_a, bool *col_valid,
                            double *S, bool *valid) {
    bool flat = true;
    for (size_t i = 0; i < n; i++) {
        S[i] = 0;
        valid[i] = false;
    }
    for (size_t k = 0; k < f; k++) {
        for (size_t i = 0; i < n; i++) {
            col[i] = val[i * f + k];
            col_valid[i] = has[i * f + k];
            valid[i] = valid[i] || col_valid[i];
        }
        adv_group_stats gs = adv_group_advantages(col, col_valid, n, scale, baseline, 0, col_a);
        if (gs.flat) continue; /* adds exactly 0 to every member */
        flat = false;
        for (size_t i = 0; i < n; i++)
            if (col_valid[i]) S[i] += w[k] * col_a[i];
    }
    return flat;
}

bool adv_multi_sums(adv_multi *m, adv_baseline baseline, adv_scale scale, double *S, bool *valid) {
    size_t n = m->rows, f = m->n_obj;
    if (n > m->cap_col) {
        m->cap_col = n * 2;
        m->col = xrealloc(m->col, m->cap_col * sizeof *m->col);
        m->col_a = xrealloc(m->col_a, m->cap_col * sizeof *m->col_a);
        m->col_valid = xrealloc(m->col_valid, m->cap_col * sizeof *m->col_valid);
    }
    double *w = xmalloc((f ? f : 1) * sizeof *w);
    for (size_t k = 0; k < f; k++) w[k] = m->obj[k].weight;
    bool flat = adv_normalize_then_sum(m->val, m->has, n, f, w, baseline, scale, m->col, m->col_a, m->col_valid, S,
                                       valid);
    free(w);
    return flat;
}

int adv_multi_check_unused(const adv_multi *m, const char *file, gerr *e) {
    for (size_t k = 0; k < m->n_obj; k++)
        if (m->obj[k].from_flag && !m->obj[k].seen)
            return gerr_set(e, EX_DATAERR, "%s: --weights names \"%.200s\", which no record's `rewards` holds",
                            file, m->obj[k].name);
    return 0;
}
