/* The `length` reward: DAPO's soft overlong penalty and a minimum length
 * (rules in rules.h), counted in completion tokens or in code points. The
 * tokens of a multi-turn record are the policy's (its completion_mask 1s):
 * what the environment said is not the model's length. */
#include <stdlib.h>
#include <string.h>

#include "../io/completion_mask.h"
#include "reward.h"
#include "rules.h"

double length_penalty(long long len, long long max, long long buffer, long long min) {
    if (min > 0 && len < min) return -1.0;
    if (max <= 0 || len <= max - buffer) return 0.0;
    if (len > max) return -1.0;
    return (double)((max - buffer) - len) / (double)buffer;
}

long long length_code_points(const char *s, size_t len) {
    long long n = 0;
    for (size_t i = 0; i < len; i++) n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

/* The policy's tokens of a multi-turn record (completion_mask, one entry
 * per completion token), else every completion token. */
static int policy_tokens(const reward_item *it, long long *len, gerr *e) {
    if (it->n_tokens < 0) return record_field_error(it->rec, "completion_tokens", "an array of token ids", e);
    uint8_t *mask = NULL;
    if (completion_mask_read(it->rec, (size_t)it->n_tokens, &mask, e)) return e->code;
    *len = completion_mask_count(mask, (int)it->n_tokens);
    free(mask);
    return 0;
}

typedef struct {
    long long max, buffer, min;
    bool chars; /* count code points, not tokens */
} length_self;

static int length_score(void *self, const reward_item *items, size_t n, double *out, gerr *e) {
    const length_self *l = self;
    for (size_t i = 0; i < n; i++) {
        const reward_item *it = &items[i];
        long long len = 0;
        if (l->chars) {
            len = length_code_points(it->completion, it->completion_len);
        } else if (policy_tokens(it, &len, e)) {
            return e->code;
        }
        out[i] = length_penalty(len, l->max, l->buffer, l->min);
    }
    return 0;
}

static void length_close(void *self) { free(self); }

int reward_open_length(reward_fn *fn, const reward_opts *p, gerr *e) {
    if (p->length_max < 0) return gerr_set(e, EX_USAGE, "--max-len: expected >= 0, got %lld", p->length_max);
    if (p->length_min < 0) return gerr_set(e, EX_USAGE, "--min-len: expected >= 0, got %lld", p->length_min);
    if (p->length_buffer < 0)
        return gerr_set(e, EX_USAGE, "--overlong-buffer: expected >= 0, got %lld", p->length_buffer);
    if (p->length_max == 0 && p->length_min == 0)
        return gerr_set(e, EX_USAGE, "length: set --max-len (and --overlong-buffer) or --min-len");
    if (p->length_buffer > p->length_max)
        return gerr_set(e, EX_USAGE, "--overlong-buffer (%lld) must not exceed --max-len (%lld)", p->length_buffer,
                        p->length_max);
    if (p->length_max > 0 && p->length_min > p->length_max)
        return gerr_set(e, EX_USAGE, "--min-len (%lld) must not exceed --max-len (%lld)", p->length_min,
                        p->length_max);
    const char *unit = p->length_unit ? p->length_unit : "tokens";
    if (strcmp(unit, "tokens") && strcmp(unit, "chars"))
        return gerr_set(e, EX_USAGE, "--length-unit: expected tokens or chars, got '%s'", unit);
    length_self *l = xmalloc(sizeof *l);
    l->max = p->length_max;
    l->buffer = p->length_buffer;
    l->min = p->length_min;
    l->chars = !strcmp(unit, "chars");
    fn->self = l;
    fn->score = length_score;
    fn->stats = NULL;
    fn->close = length_close;
    return 0;
}
