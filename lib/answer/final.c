/* Finding the final answer in a completion (rules in match.h). */
#include <string.h>

#include "extract.h"
#include "match.h"

static const char *const SOURCE_NAMES[ANSWER_N_SOURCES] = {"none", "answer_tag", "boxed", "hashes", "last_number"};

const char *answer_source_name(answer_source s) {
    return (unsigned)s < ANSWER_N_SOURCES ? SOURCE_NAMES[s] : "?";
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_alnum(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

/* The start of the last occurrence of needle in s[0..len), or NULL. */
static const char *last_occurrence(const char *s, size_t len, const char *needle, size_t n) {
    if (n == 0 || len < n) return NULL;
    for (size_t i = len - n + 1; i-- > 0;) {
        const char *p = memrchr(s, needle[0], i + 1);
        if (!p) return NULL;
        i = (size_t)(p - s);
        if (!memcmp(p, needle, n)) return p;
    }
    return NULL;
}

bool answer_tag_content(const char *s, size_t len, strbuf *out) {
    sb_clear(out);
    const char *close = last_occurrence(s, len, "</answer>", 9);
    if (!close) return false;
    const char *open = last_occurrence(s, (size_t)(close - s), "<answer>", 8);
    if (!open) return false;
    const char *body = open + 8;
    extract_append_trimmed(out, body, (size_t)(close - body));
    sb_append(out, "", 0); /* data never NULL */
    return true;
}

static bool is_space(char c) { return c == ' ' || c == '\t'; }

/* The number token ending just before `end` (digits and one '.', a '-' that
 * follows no letter or digit): its start, or `end` when there is none. */
static size_t number_before(const char *s, size_t end) {
    size_t k = end;
    while (k > 0 && (is_digit(s[k - 1]) || s[k - 1] == '.')) k--;
    if (k == end || !is_digit(s[k]) || s[end - 1] == '.') return end;
    if (k > 0 && s[k - 1] == '-' && (k < 2 || !is_alnum(s[k - 2]))) k--;
    return k;
}

/* The end of \cmd's arguments at s[i] (a braced group or one character
 * each; \sqrt's optional [n]), or 0. */
static size_t command_end(const char *s, size_t len, size_t i, size_t n_args) {
    if (i < len && s[i] == '[') {
        const char *close = memchr(s + i, ']', len - i);
        if (!close) return 0;
        i = (size_t)(close - s) + 1;
    }
    for (size_t a = 0; a < n_args; a++) {
        while (i < len && is_space(s[i])) i++;
        if (i >= len) return 0;
        if (s[i] != '{') {
            i++;
            continue;
        }
        int depth = 0;
        size_t k = i;
        for (; k < len; k++) {
            if (s[k] == '{') depth++;
            if (s[k] == '}' && --depth == 0) break;
        }
        if (k == len) return 0;
        i = k + 1;
    }
    return i;
}

/* Widens the last number [*start, *end) to the plain-text fraction or power
 * it ends ("5/6", "-3 / 4", "2^10") or to the \frac / \sqrt it stands in
 * ("\frac{5}{6}", "2\sqrt{3}"), so that the answer is the whole expression. */
static void widen_last_number(const char *s, size_t len, size_t *start, size_t *end) {
    enum { LATEX_REACH = 200 };
    static const struct {
        const char *name;
        size_t n_args;
    } COMMANDS[] = {{"\\frac", 2}, {"\\dfrac", 2}, {"\\tfrac", 2}, {"\\sqrt", 1}};
    size_t from = *start > LATEX_REACH ? *start - LATEX_REACH : 0, best = *start, best_end = *end;
    for (size_t c = 0; c < sizeof COMMANDS / sizeof COMMANDS[0]; c++) {
        size_t n = strlen(COMMANDS[c].name);
        const char *p = s + from, *limit = s + *start;
        while (p < limit && (p = memmem(p, (size_t)(limit - p), COMMANDS[c].name, n))) {
            size_t at = (size_t)(p - s), stop = command_end(s, len, at + n, COMMANDS[c].n_args);
            if (stop >= *end && at < best) best = at, best_end = stop;
            p++;
        }
    }
    if (best < *start) {
        *end = best_end;
        *start = number_before(s, best); /* a coefficient: 2\sqrt{3} */
        if (*start == best && best > 0 && s[best - 1] == '-' && (best < 2 || !is_alnum(s[best - 2]))) (*start)--;
        return;
    }
    for (;;) {
        size_t k = *start;
        while (k > 0 && is_space(s[k - 1])) k--;
        if (k == 0 || (s[k - 1] != '/' && s[k - 1] != '^')) return;
        k--;
        while (k > 0 && is_space(s[k - 1])) k--;
        size_t n = number_before(s, k);
        if (n == k) return;
        *start = n;
    }
}

static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

/* Digits of an exponent at s[*k] (a sign first, braces around when braced),
 * *k moved past them; false when there are none. */
static bool exponent_digits(const char *s, size_t len, size_t *k, bool braced) {
    size_t i = *k;
    if (braced && (i >= len || s[i++] != '{')) return false;
    if (i < len && (s[i] == '+' || s[i] == '-')) i++;
    size_t d = i;
    while (i < len && is_digit(s[i])) i++;
    if (i == d || (braced && (i >= len || s[i++] != '}'))) return false;
    *k = i;
    return true;
}

/* The end of the exponent that follows a mantissa ending at s[j] ("e5",
 * "E+10", " \times 10^{23}", " \xc3\x97 10^23", "*10^3", "x10^23"), or j
 * when none does. An e-form glued to a word on either side ("a3f1e52",
 * "2e3x") is none: the mantissa's start, after a letter, is in `glued`. */
static size_t exponent_end(const char *s, size_t len, size_t j, bool glued) {
    size_t k = j;
    if (k < len && (s[k] == 'e' || s[k] == 'E')) {
        k++;
        if (glued || !exponent_digits(s, len, &k, false) || (k < len && is_alpha(s[k]))) return j;
        return k;
    }
    while (k < len && is_space(s[k])) k++;
    static const char *const TIMES[] = {"\xc3\x97", "\\times", "\\cdot", "*", "x", "X"};
    size_t n = 0;
    for (size_t t = 0; t < sizeof TIMES / sizeof TIMES[0] && !n; t++) {
        size_t m = strlen(TIMES[t]);
        if (len - k >= m && !memcmp(s + k, TIMES[t], m)) n = m;
    }
    if (!n) return j;
    k += n;
    while (k < len && is_space(s[k])) k++;
    if (len - k < 3 || memcmp(s + k, "10^", 3)) return j;
    k += 3;
    if (!exponent_digits(s, len, &k, false) && !exponent_digits(s, len, &k, true)) return j;
    return k;
}

/* The last number token, as match.h describes it. */
static bool last_number(const char *s, size_t len, strbuf *out) {
    size_t best_start = 0, best_end = 0;
    bool found = false;
    size_t i = 0;
    while (i < len) {
        if (!is_digit(s[i]) || (i > 0 && is_digit(s[i - 1]))) {
            i++;
            continue;
        }
        size_t start = i, j = i;
        while (j < len && is_digit(s[j])) j++;
        while (j + 3 < len && s[j] == ',' && is_digit(s[j + 1]) && is_digit(s[j + 2]) && is_digit(s[j + 3]) &&
               (j + 4 >= len || !is_digit(s[j + 4])))
            j += 4;
        if (j + 1 < len && s[j] == '.' && is_digit(s[j + 1])) {
            j++;
            while (j < len && is_digit(s[j])) j++;
        }
        j = exponent_end(s, len, j, start > 0 && is_alpha(s[start - 1]));
        if (start > 0 && s[start - 1] == '-' && (start < 2 || !is_alnum(s[start - 2]))) start--;
        best_start = start, best_end = j;
        found = true;
        i = j;
    }
    if (found) widen_last_number(s, len, &best_start, &best_end);
    sb_clear(out);
    if (found) sb_append(out, s + best_start, best_end - best_start);
    return found;
}

answer_source answer_extract(const char *s, size_t len, strbuf *out) {
    if (answer_tag_content(s, len, out)) {
        strbuf boxed = {0};
        if (extract_boxed(out->data, out->len, &boxed) == 1) {
            sb_clear(out);
            sb_append(out, boxed.data, boxed.len);
        }
        sb_free(&boxed);
        return ANSWER_FROM_TAG;
    }
    if (extract_boxed(s, len, out) == 1) return ANSWER_FROM_BOXED;
    /* memmem first: extract_after_hashes compares at every byte */
    if (memmem(s, len, "####", 4) && extract_after_hashes(s, len, out)) {
        const char *nl = memchr(out->data, '\n', out->len);
        if (nl) {
            out->len = (size_t)(nl - out->data);
            while (out->len && (out->data[out->len - 1] == ' ' || out->data[out->len - 1] == '\r' ||
                                out->data[out->len - 1] == '\t'))
                out->len--;
            out->data[out->len] = 0;
        }
        return ANSWER_FROM_HASHES;
    }
    if (last_number(s, len, out)) return ANSWER_FROM_NUMBER;
    sb_clear(out);
    sb_append(out, "", 0); /* data never NULL */
    return ANSWER_FROM_NONE;
}
