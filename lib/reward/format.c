/* The `format` reward: the completion's tag layout (rules in rules.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reward.h"
#include "rules.h"

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

static bool tag_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == ':' || c == '-';
}

int format_spec_parse(format_spec *f, const char *tags, const char *mode, gerr *e) {
    memset(f, 0, sizeof *f);
    if (!mode || !strcmp(mode, "soft")) f->mode = FORMAT_SOFT;
    else if (!strcmp(mode, "strict")) f->mode = FORMAT_STRICT;
    else if (!strcmp(mode, "partial")) f->mode = FORMAT_PARTIAL;
    else return gerr_set(e, EX_USAGE, "--format-mode: expected strict, soft or partial, got '%s'", mode);
    if (!tags) tags = "";
    const char *p = tags;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        while (len && is_space(*p)) p++, len--;
        while (len && is_space(p[len - 1])) len--;
        if (len == 0) return gerr_set(e, EX_USAGE, "--format-tags: expected a comma list of tag names, got '%s'", tags);
        if (len > FORMAT_MAX_TAG_LEN)
            return gerr_set(e, EX_USAGE, "--format-tags: tag names have at most %d characters, got '%.*s'",
                            FORMAT_MAX_TAG_LEN, (int)len, p);
        for (size_t i = 0; i < len; i++)
            if (!tag_char(p[i]))
                return gerr_set(e, EX_USAGE, "--format-tags: a tag name is letters, digits, _ . : -, got '%.*s'",
                                (int)len, p);
        if (f->n == FORMAT_MAX_TAGS)
            return gerr_set(e, EX_USAGE, "--format-tags: at most %d tags, got '%s'", FORMAT_MAX_TAGS, tags);
        format_tag *t = &f->tags[f->n];
        t->open_len = (size_t)snprintf(t->open, sizeof t->open, "<%.*s>", (int)len, p);
        t->close_len = (size_t)snprintf(t->close, sizeof t->close, "</%.*s>", (int)len, p);
        for (size_t k = 0; k < f->n; k++)
            if (!strcmp(f->tags[k].open, t->open))
                return gerr_set(e, EX_USAGE, "--format-tags: tag '%.*s' listed twice", (int)len, p);
        f->n++;
        if (!comma) break;
        p = comma + 1;
    }
    return 0;
}

/* Every listed tag's markers counted in one pass over the '<' of s:
 * n_open/n_close (stopping at 2) and the first position of each. */
typedef struct {
    size_t open[FORMAT_MAX_TAGS], close[FORMAT_MAX_TAGS];
    unsigned char n_open[FORMAT_MAX_TAGS], n_close[FORMAT_MAX_TAGS];
} tag_counts;

static void count_tags(const format_spec *f, const char *s, size_t len, tag_counts *c) {
    memset(c->n_open, 0, sizeof c->n_open);
    memset(c->n_close, 0, sizeof c->n_close);
    const char *p = s, *end = s + len;
    while ((p = memchr(p, '<', (size_t)(end - p)))) {
        size_t at = (size_t)(p - s), left = (size_t)(end - p);
        bool closing = left > 1 && p[1] == '/';
        for (size_t i = 0; i < f->n; i++) {
            const format_tag *t = &f->tags[i];
            const char *marker = closing ? t->close : t->open;
            size_t n = closing ? t->close_len : t->open_len;
            if (n > left || memcmp(p, marker, n)) continue;
            unsigned char *count = closing ? &c->n_close[i] : &c->n_open[i];
            if (*count == 0) (closing ? c->close : c->open)[i] = at;
            if (*count < 2) (*count)++;
            break; /* markers are distinct: at most one matches here */
        }
        p++;
    }
}

static bool all_space(const char *s, size_t from, size_t to) {
    for (size_t i = from; i < to; i++)
        if (!is_space(s[i])) return false;
    return true;
}

double format_score(const format_spec *f, const char *s, size_t len) {
    tag_counts c;
    count_tags(f, s, len, &c);
    const size_t *open = c.open, *close = c.close;
    size_t well_formed = 0;
    bool all = true;
    for (size_t i = 0; i < f->n; i++) {
        bool ok = c.n_open[i] == 1 && c.n_close[i] == 1 && open[i] + f->tags[i].open_len <= close[i];
        if (ok) well_formed++;
        else all = false;
    }
    if (f->mode == FORMAT_PARTIAL) return f->n ? (double)well_formed / (double)f->n : 0.0;
    if (!all) return 0.0;
    size_t prev_end = 0; /* where the text after the previous pair starts */
    for (size_t i = 0; i < f->n; i++) {
        if (i > 0 && open[i] < prev_end) return 0.0; /* out of order or overlapping */
        if (f->mode == FORMAT_STRICT && !all_space(s, prev_end, open[i])) return 0.0;
        prev_end = close[i] + f->tags[i].close_len;
    }
    if (f->mode == FORMAT_STRICT && !all_space(s, prev_end, len)) return 0.0;
    return 1.0;
}

static int format_fn_score(void *self, const reward_item *items, size_t n, double *out, gerr *e) {
    (void)e;
    const format_spec *f = self;
    for (size_t i = 0; i < n; i++) out[i] = format_score(f, items[i].completion, items[i].completion_len);
    return 0;
}

static void format_close(void *self) { free(self); }

int reward_open_format(reward_fn *fn, const reward_opts *p, gerr *e) {
    format_spec *f = xmalloc(sizeof *f);
    int rc = format_spec_parse(f, p->format_tags, p->format_mode, e);
    if (rc) {
        free(f);
        return rc;
    }
    fn->self = f;
    fn->score = format_fn_score;
    fn->stats = NULL;
    fn->close = format_close;
    return 0;
}
