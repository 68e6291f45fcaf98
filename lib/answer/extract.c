#include "extract.h"

#include <string.h>

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

void extract_append_trimmed(strbuf *out, const char *s, size_t len) {
    size_t a = 0, b = len;
    while (a < b && is_space(s[a])) a++;
    while (b > a && is_space(s[b - 1])) b--;
    sb_append(out, s + a, b - a);
}

int extract_after_hashes(const char *s, size_t len, strbuf *out) {
    sb_clear(out);
    const char *last = NULL;
    for (size_t i = 0; i + 4 <= len; i++)
        if (!memcmp(s + i, "####", 4)) last = s + i;
    if (!last) return 0;
    /* "#####" ends with "####" too: the answer starts after the last run */
    const char *p = last + 4;
    const char *end = s + len;
    strbuf tmp = {0};
    extract_append_trimmed(&tmp, p, (size_t)(end - p));
    /* Commas are thousands separators in GSM8K ("1,234"); the number is wanted. */
    for (size_t i = 0; i < tmp.len; i++)
        if (tmp.data[i] != ',') sb_putc(out, tmp.data[i]);
    if (!out->data) sb_append(out, "", 0);
    sb_free(&tmp);
    return 1;
}

/* Whether s[i..] starts the command `name` (not a longer command name such
 * as \boxedsymbol). */
static int command_at(const char *s, size_t len, size_t i, const char *name) {
    size_t n = strlen(name);
    if (i + n > len || memcmp(s + i, name, n)) return 0;
    if (i + n < len) {
        char c = s[i + n];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return 0;
    }
    return 1;
}

int extract_boxed(const char *s, size_t len, strbuf *out) {
    sb_clear(out);
    /* Find the last command; scanning from the end finds it first. */
    size_t at = len, name_len = 0;
    for (size_t i = len; i-- > 0;) {
        if (s[i] != '\\') continue;
        if (command_at(s, len, i, "\\boxed")) {
            at = i, name_len = 6;
            break;
        }
        if (command_at(s, len, i, "\\fbox")) {
            at = i, name_len = 5;
            break;
        }
    }
    if (at == len) return 0;
    size_t i = at + name_len;
    size_t j = i;
    while (j < len && (s[j] == ' ' || s[j] == '\t')) j++;
    if (j < len && s[j] == '{') {
        int depth = 1;
        size_t start = j + 1;
        for (size_t k = start; k < len; k++) {
            if (s[k] == '\\') { /* \{ \} \\: escaped, never a brace of the group */
                k++;
                continue;
            }
            if (s[k] == '{') depth++;
            if (s[k] == '}' && --depth == 0) {
                extract_append_trimmed(out, s + start, k - start);
                if (!out->data) sb_append(out, "", 0);
                return 1;
            }
        }
        return -1;
    }
    /* "\boxed 5$": TeX takes the next token as the argument. */
    if (j > i && j < len) {
        size_t k = j;
        while (k < len && !is_space(s[k]) && s[k] != '$') k++;
        if (k > j) {
            sb_append(out, s + j, k - j);
            return 1;
        }
    }
    return 0;
}

size_t extract_group_end(const char *s, size_t len, size_t i) {
    int depth = 0;
    for (size_t k = i; k < len; k++) {
        if (s[k] == '\\') {
            k++;
            continue;
        }
        if (s[k] == '{') depth++;
        if (s[k] == '}' && --depth == 0) return k + 1;
    }
    return 0;
}
