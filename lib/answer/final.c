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
        if (start > 0 && s[start - 1] == '-' && (start < 2 || !is_alnum(s[start - 2]))) start--;
        best_start = start, best_end = j;
        found = true;
        i = j;
    }
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
