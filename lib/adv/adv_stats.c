#include "adv_stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void adv_stats_init(adv_stats *s) { memset(s, 0, sizeof *s); }

void adv_stats_free(adv_stats *s) {
    for (size_t i = 0; i < s->n_fns; i++) free(s->fns[i].name);
    free(s->fns);
    memset(s, 0, sizeof *s);
}

/* Few reward functions per run: a linear search is the fastest lookup. */
static adv_fn_stat *fn_stat(adv_stats *s, const char *name) {
    size_t len = strlen(name);
    for (size_t i = 0; i < s->n_fns; i++)
        if (s->fns[i].len == len && !memcmp(s->fns[i].name, name, len)) return &s->fns[i];
    if (s->n_fns == s->cap_fns) {
        s->cap_fns = s->cap_fns ? s->cap_fns * 2 : 8;
        s->fns = xrealloc(s->fns, s->cap_fns * sizeof *s->fns);
    }
    adv_fn_stat *f = &s->fns[s->n_fns++];
    memset(f, 0, sizeof *f);
    f->name = xstrndup(name, len);
    f->len = len;
    return f;
}

static const char *cjson_kind(const cJSON *v) {
    if (cJSON_IsString(v)) return "string";
    if (cJSON_IsBool(v)) return cJSON_IsTrue(v) ? "true" : "false";
    if (cJSON_IsArray(v)) return "array";
    if (cJSON_IsObject(v)) return "object";
    return "number";
}

int adv_rewards_each(const record *r, adv_reward_fn fn, void *ctx, gerr *e) {
    const rec_field *f = record_find(r, "rewards");
    if (!f || json_kind_of(f->val) == JSON_NULL) return 0;
    if (json_kind_of(f->val) != JSON_OBJECT)
        return record_field_error(r, "rewards", "an object of numbers or nulls", e);
    cJSON *obj;
    int rc = record_get_json(r, "rewards", true, &obj, e);
    if (rc) return rc;
    for (const cJSON *v = obj->child; v; v = v->next) {
        const char *name = v->string ? v->string : "";
        if (!cJSON_IsNull(v) && !cJSON_IsNumber(v)) {
            rc = gerr_at(e, EX_DATAERR, r->file, r->line,
                         "field \"rewards\": key \"%.200s\": expected a number or null, got %s", name,
                         cjson_kind(v));
            break;
        }
        if (cJSON_IsNumber(v) && !isfinite(v->valuedouble)) { /* 1e400 parses to infinity */
            rc = gerr_at(e, EX_DATAERR, r->file, r->line,
                         "field \"rewards\": key \"%.200s\": expected a finite number", name);
            break;
        }
        /* null: the function does not apply to this record */
        if (fn && (rc = fn(ctx, r, name, cJSON_IsNull(v) ? NULL : &v->valuedouble, e)) != 0) break;
    }
    cJSON_Delete(obj);
    return rc;
}

static int push_value(void *ctx, const record *r, const char *name, const double *v, gerr *e) {
    (void)r;
    (void)e;
    if (v) welford_push(&fn_stat(ctx, name)->m, *v);
    return 0;
}

int adv_stats_read_rewards(adv_stats *s, const record *r, gerr *e) {
    return adv_rewards_each(r, s ? push_value : NULL, s, e);
}

static void put_number(strbuf *b, const char *key, double v) {
    sb_printf(b, ",\"%s\":", key);
    sb_json_number(b, v); /* undefined (no values, NaN): null, never a made-up 0 */
}

static int by_name(const void *a, const void *b) {
    const adv_fn_stat *x = *(const adv_fn_stat *const *)a, *y = *(const adv_fn_stat *const *)b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->name, y->name, n);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

void adv_stats_to_json(const adv_stats *s, strbuf *out) {
    sb_printf(out, "{\"records\":%lld,\"groups\":%lld,\"groups_flat\":%lld,\"groups_dropped\":%lld,"
                   "\"null_rewards\":%lld,\"records_written\":%lld",
              s->records, s->groups, s->groups_flat, s->groups_dropped, s->null_rewards, s->records_written);
    put_number(out, "reward_mean", welford_mean(&s->reward));
    put_number(out, "reward_std", s->groups ? s->group_std_sum / (double)s->groups : NAN);
    put_number(out, "reward_std_batch", welford_std(&s->reward));
    put_number(out, "frac_reward_zero_std", s->groups ? (double)s->groups_flat / (double)s->groups : NAN);
    /* Sorted by name so the object does not depend on which record came first. */
    const adv_fn_stat **sorted = xmalloc((s->n_fns ? s->n_fns : 1) * sizeof *sorted);
    for (size_t i = 0; i < s->n_fns; i++) sorted[i] = &s->fns[i];
    qsort(sorted, s->n_fns, sizeof *sorted, by_name);
    strbuf key = {0};
    for (size_t i = 0; i < s->n_fns; i++) {
        const adv_fn_stat *f = sorted[i];
        for (int which = 0; which < 2; which++) {
            sb_clear(&key);
            sb_puts(&key, "rewards/");
            sb_append(&key, f->name, f->len);
            sb_puts(&key, which ? "/std" : "/mean");
            sb_putc(out, ',');
            sb_json_string(out, key.data, key.len);
            sb_putc(out, ':');
            sb_json_number(out, which ? welford_std(&f->m) : welford_mean(&f->m));
        }
    }
    sb_free(&key);
    free(sorted);
    sb_puts(out, "}\n");
}
