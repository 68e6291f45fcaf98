/* The `answer` reward: 1 when the completion's final answer matches the
 * record's reference `answer` (lib/answer/match.h), or, for a countdown record,
 * when its equation is right (countdown_expr.h); 0 otherwise.
 *
 * Which check applies, per record:
 *   - `numbers` and `target` both present (not null): countdown. `numbers`
 *     must be a non-empty array of at most COUNTDOWN_EXPR_MAX_NUMBERS
 *     integers and `target` an integer, all within +-COUNTDOWN_EXPR_MAX_ABS.
 *   - else `answer` a string or a number (its JSON text): final-answer match.
 *   - else, only one of `numbers`/`target` present: a broken countdown
 *     record, EX_DATAERR naming the missing field.
 *   - else (no `answer`, or null): REWARD_NULL, the function does not apply.
 * A field of the wrong type is EX_DATAERR naming FILE:LINE and the field.
 * A record without `completion` is scored as the empty completion. */
#include <stdlib.h>
#include <string.h>

#include "../answer/match.h"
#include "countdown_expr.h"
#include "reward.h"

typedef struct {
    double tol;
    strbuf pred, gold_raw, last_gold_raw;
    answer_norm got, gold;
    bool gold_cached; /* gold holds the normalised last_gold_raw */
    long long correct, wrong, null;
    long long from[ANSWER_N_SOURCES];
    long long countdown[COUNTDOWN_N_RESULTS];
} answer_self;

/* `numbers` into out[0..*n-1]. */
static int read_numbers(const record *r, const rec_field *f, long long *out, size_t *n, gerr *e) {
    static const char *const EXPECTED = "a non-empty array of integers";
    if (json_kind_of(f->val) != JSON_ARRAY) return record_field_error(r, "numbers", EXPECTED, e);
    const char *s = f->val;
    size_t len = f->val_len, i = 1;
    *n = 0;
    for (;;) {
        while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
        if (s[i] == ']') break;
        json_scan_error se;
        size_t end = json_scan_value(s, len, i, &se);
        if (!end) return gerr_at(e, EX_DATAERR, r->file, r->line, "field \"numbers\": invalid JSON");
        size_t k = i;
        while (end > k && (s[end - 1] == ' ' || s[end - 1] == '\t' || s[end - 1] == '\n' || s[end - 1] == '\r'))
            end--;
        bool integral = json_kind_of(s + i) == JSON_NUMBER && end - i <= COUNTDOWN_EXPR_MAX_DIGITS + 1 &&
                        !memchr(s + i, '.', end - i) && !memchr(s + i, 'e', end - i) && !memchr(s + i, 'E', end - i);
        long long v = integral ? strtoll(s + i, NULL, 10) : 0;
        if (!integral || v > COUNTDOWN_EXPR_MAX_ABS || v < -COUNTDOWN_EXPR_MAX_ABS)
            return gerr_at(e, EX_DATAERR, r->file, r->line,
                           "field \"numbers\": element %zu: expected an integer in [-%lld, %lld], got %.*s", *n,
                           COUNTDOWN_EXPR_MAX_ABS, COUNTDOWN_EXPR_MAX_ABS, (int)(end - i > 40 ? 40 : end - i), s + i);
        if (*n == COUNTDOWN_EXPR_MAX_NUMBERS)
            return gerr_at(e, EX_DATAERR, r->file, r->line, "field \"numbers\": expected at most %d integers",
                           COUNTDOWN_EXPR_MAX_NUMBERS);
        out[(*n)++] = v;
        i = end;
        while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
        if (s[i] == ',') i++;
    }
    if (*n == 0)
        return gerr_at(e, EX_DATAERR, r->file, r->line, "field \"numbers\": expected %s, got []", EXPECTED);
    return 0;
}

static bool present(const rec_field *f) { return f && json_kind_of(f->val) != JSON_NULL; }

/* 1: a countdown record (numbers, target filled); 0: not one; else minus an error code. */
static int read_countdown(const record *r, long long *numbers, size_t *n, long long *target, gerr *e) {
    const rec_field *fn = record_find(r, "numbers"), *ft = record_find(r, "target");
    if (!present(fn) && !present(ft)) return 0;
    if (!present(fn) || !present(ft)) {
        if (present(record_find(r, "answer"))) return 0;
        int rc = present(fn) ? record_field_error(r, "target", "an integer", e)
                             : record_field_error(r, "numbers", "a non-empty array of integers", e);
        return -rc;
    }
    int rc = read_numbers(r, fn, numbers, n, e);
    if (!rc) rc = record_get_int(r, "target", true, -COUNTDOWN_EXPR_MAX_ABS, COUNTDOWN_EXPR_MAX_ABS, target, NULL, e);
    return rc ? -rc : 1;
}

/* The reference answer's text into out; *has false when there is none. */
static int read_reference(const record *r, strbuf *out, bool *has, gerr *e) {
    const rec_field *f = record_find(r, "answer");
    *has = present(f);
    if (!*has) return 0;
    sb_clear(out);
    json_kind k = json_kind_of(f->val);
    if (k == JSON_STRING) json_decode_string(f->val + 1, f->val_len - 2, out);
    else if (k == JSON_NUMBER) sb_append(out, f->val, f->val_len);
    else return record_field_error(r, "answer", "a string or a number", e);
    sb_append(out, "", 0); /* data never NULL */
    return 0;
}

static int score_one(answer_self *a, const reward_item *it, double *out, gerr *e) {
    long long numbers[COUNTDOWN_EXPR_MAX_NUMBERS], target = 0;
    size_t n = 0;
    int cd = read_countdown(it->rec, numbers, &n, &target, e);
    if (cd < 0) return -cd;
    if (cd == 1) {
        countdown_result res = COUNTDOWN_EMPTY;
        if (countdown_extract(it->completion, it->completion_len, &a->pred))
            res = countdown_check(a->pred.data, a->pred.len, numbers, n, target);
        a->countdown[res]++;
        *out = res == COUNTDOWN_OK ? 1.0 : 0.0;
    } else {
        bool has;
        int rc = read_reference(it->rec, &a->gold_raw, &has, e);
        if (rc) return rc;
        if (!has) {
            a->null++;
            *out = REWARD_NULL;
            return 0;
        }
        answer_source src = answer_extract(it->completion, it->completion_len, &a->pred);
        a->from[src]++;
        bool eq = false;
        if (src != ANSWER_FROM_NONE) {
            /* the K samples of a prompt share their reference: normalise it once */
            if (!a->gold_cached || a->gold_raw.len != a->last_gold_raw.len ||
                memcmp(a->gold_raw.data, a->last_gold_raw.data, a->gold_raw.len)) {
                answer_normalize(a->gold_raw.data, a->gold_raw.len, &a->gold);
                sb_clear(&a->last_gold_raw);
                sb_append(&a->last_gold_raw, a->gold_raw.data, a->gold_raw.len);
                a->gold_cached = true;
            }
            answer_normalize(a->pred.data, a->pred.len, &a->got);
            eq = answer_norm_equal(&a->got, &a->gold, a->tol);
        }
        *out = eq ? 1.0 : 0.0;
    }
    if (*out == 1.0) a->correct++;
    else a->wrong++;
    return 0;
}

static int answer_score(void *self, const reward_item *items, size_t n, double *out, gerr *e) {
    for (size_t i = 0; i < n; i++) {
        int rc = score_one(self, &items[i], &out[i], e);
        if (rc) return rc;
    }
    return 0;
}

static void answer_stats(void *self, cJSON *obj) {
    const answer_self *a = self;
    cJSON *o = cJSON_AddObjectToObject(obj, "answer");
    if (!o) return;
    cJSON_AddNumberToObject(o, "correct", (double)a->correct);
    cJSON_AddNumberToObject(o, "wrong", (double)a->wrong);
    cJSON_AddNumberToObject(o, "null", (double)a->null);
    cJSON *from = cJSON_AddObjectToObject(o, "extracted_from");
    for (int s = 0; from && s < ANSWER_N_SOURCES; s++)
        cJSON_AddNumberToObject(from, answer_source_name((answer_source)s), (double)a->from[s]);
    long long any = 0;
    for (int r = 0; r < COUNTDOWN_N_RESULTS; r++) any += a->countdown[r];
    if (!any) return;
    cJSON *cd = cJSON_AddObjectToObject(o, "countdown");
    for (int r = 0; cd && r < COUNTDOWN_N_RESULTS; r++)
        if (a->countdown[r]) cJSON_AddNumberToObject(cd, countdown_result_name((countdown_result)r), (double)a->countdown[r]);
}

static void answer_close(void *self) {
    answer_self *a = self;
    if (!a) return;
    sb_free(&a->pred);
    sb_free(&a->gold_raw);
    sb_free(&a->last_gold_raw);
    answer_norm_free(&a->got);
    answer_norm_free(&a->gold);
    free(a);
}

int reward_open_answer(reward_fn *fn, const reward_opts *p, gerr *e) {
    if (!(p->answer_tol >= 0) || !isfinite(p->answer_tol))
        return gerr_set(e, EX_USAGE, "--answer-tol: expected a finite number >= 0, got %g", p->answer_tol);
    answer_self *a = xcalloc(1, sizeof *a);
    a->tol = p->answer_tol;
    fn->self = a;
    fn->score = answer_score;
    fn->stats = answer_stats;
    fn->close = answer_close;
    return 0;
}
