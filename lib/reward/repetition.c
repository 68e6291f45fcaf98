/* The `repetition` reward: open-r1's n-gram repetition penalty (rules in
 * rules.h). N-grams are counted in a hash table of word spans; equal hashes
 * are confirmed word by word, so the count is exact. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "reward.h"
#include "rules.h"

/* Python's str.split() separators within ASCII. */
static bool is_sep(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }
static unsigned char lower(unsigned char c) { return c >= 'A' && c <= 'Z' ? (unsigned char)(c - 'A' + 'a') : c; }

typedef struct {
    size_t start, len;
    uint64_t hash;
} word;

static bool same_word(const char *s, const word *a, const word *b) {
    if (a->len != b->len || a->hash != b->hash) return false;
    for (size_t i = 0; i < a->len; i++)
        if (lower((unsigned char)s[a->start + i]) != lower((unsigned char)s[b->start + i])) return false;
    return true;
}

double repetition_penalty(const char *s, size_t len, long long n, double max_penalty) {
    if (n < 1) return 0.0;
    size_t cap_words = 64, n_words = 0;
    word *w = xmalloc(cap_words * sizeof *w);
    for (size_t i = 0; i < len;) {
        while (i < len && is_sep((unsigned char)s[i])) i++;
        if (i >= len) break;
        size_t start = i;
        uint64_t h = 1469598103934665603ULL; /* FNV-1a over the lower-cased bytes */
        while (i < len && !is_sep((unsigned char)s[i])) h = (h ^ lower((unsigned char)s[i++])) * 1099511628211ULL;
        if (n_words == cap_words) w = xrealloc(w, (cap_words *= 2) * sizeof *w);
        w[n_words++] = (word){start, i - start, h};
    }
    if (n_words < (size_t)n) {
        free(w);
        return 0.0;
    }
    size_t total = n_words - (size_t)n + 1, size = 16;
    while (size < 2 * total) size *= 2;
    size_t *slot = xcalloc(size, sizeof *slot); /* n-gram start + 1; 0 = empty */
    uint64_t *slot_hash = xmalloc(size * sizeof *slot_hash);
    /* rolling polynomial hash of n consecutive word hashes */
    const uint64_t P = 0x9E3779B97F4A7C15ULL;
    uint64_t top = 1, h = 0;
    for (long long k = 0; k < n; k++) {
        if (k) top *= P;
        h = h * P + w[k].hash;
    }
    size_t unique = 0;
    for (size_t i = 0; i < total; i++) {
        if (i) h = (h - w[i - 1].hash * top) * P + w[i + (size_t)n - 1].hash;
        uint64_t mixed = h ^ (h >> 29);
        size_t at = (size_t)(mixed * 0xBF58476D1CE4E5B9ULL >> 17) & (size - 1);
        for (;; at = (at + 1) & (size - 1)) {
            if (!slot[at]) {
                slot[at] = i + 1;
                slot_hash[at] = h;
                unique++;
                break;
            }
            if (slot_hash[at] != h) continue;
            size_t j = slot[at] - 1, k = 0;
            while (k < (size_t)n && same_word(s, &w[i + k], &w[j + k])) k++;
            if (k == (size_t)n) break; /* seen before */
        }
    }
    free(slot);
    free(slot_hash);
    free(w);
    return (1.0 - (double)unique / (double)total) * max_penalty;
}

typedef struct {
    long long n;
    double max_penalty;
} repetition_self;

static int repetition_score(void *self, const reward_item *items, size_t n, double *out, gerr *e) {
    (void)e;
    const repetition_self *r = self;
    for (size_t i = 0; i < n; i++)
        out[i] = repetition_penalty(items[i].completion, items[i].completion_len, r->n, r->max_penalty);
    return 0;
}

static void repetition_close(void *self) { free(self); }

int reward_open_repetition(reward_fn *fn, const reward_opts *p, gerr *e) {
    if (p->rep_ngram < 1) return gerr_set(e, EX_USAGE, "--rep-ngram: expected >= 1, got %lld", p->rep_ngram);
    if (!(p->rep_max_penalty <= 0) || !isfinite(p->rep_max_penalty))
        return gerr_set(e, EX_USAGE, "--rep-penalty: expected a finite number <= 0, got %g", p->rep_max_penalty);
    repetition_self *r = xmalloc(sizeof *r);
    r->n = p->rep_ngram;
    r->max_penalty = p->rep_max_penalty;
    fn->self = r;
    fn->score = repetition_score;
    fn->stats = NULL;
    fn->close = repetition_close;
    return 0;
}
