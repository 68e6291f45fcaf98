#include "code_extract.h"

#include <stdbool.h>
#include <string.h>
#include <strings.h>

static size_t line_end(const char *t, size_t len, size_t i) {
    const char *nl = memchr(t + i, '\n', len - i);
    return nl ? (size_t)(nl - t) : len;
}

static size_t indent_of(const char *l, size_t n) {
    size_t k = 0;
    while (k < n && (l[k] == ' ' || l[k] == '\t')) k++;
    return k;
}

static size_t backtick_run(const char *l, size_t n) {
    size_t k = 0;
    while (k < n && l[k] == '`') k++;
    return k;
}

static bool only_space(const char *l, size_t n) { return indent_of(l, n) == n; }

/* The info string after an opening fence names Python, or nothing. */
static bool is_python_info(const char *info, size_t n) {
    size_t a = indent_of(info, n), b = a;
    while (b < n && info[b] != ' ' && info[b] != '\t' && info[b] != '{') b++;
    size_t w = b - a;
    static const char *const names[] = {"python", "py", "python3", "py3"};
    if (w == 0) return true;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == w && !strncasecmp(info + a, names[i], w)) return true;
    return false;
}

typedef struct {
    size_t start, end, indent;
    bool found;
} block;

static block last_python_block(const char *t, size_t len) {
    block best = {0};
    bool open = false, python = false;
    size_t ticks = 0, start = 0, indent = 0;
    for (size_t i = 0; i < len;) {
        size_t e = line_end(t, len, i), n = e - i;
        const char *l = t + i;
        if (n && l[n - 1] == '\r') n--;
        size_t ind = indent_of(l, n), run = backtick_run(l + ind, n - ind);
        const char *rest = l + ind + run;
        size_t rest_n = n - ind - run;
        if (!open) {
            /* A backtick in the info string makes it inline code, not a fence. */
            if (run >= 3 && !memchr(rest, '`', rest_n)) {
                open = true;
                ticks = run;
                indent = ind;
                start = e < len ? e + 1 : len;
                python = is_python_info(rest, rest_n);
            }
        } else if (run >= ticks && only_space(rest, rest_n)) {
            open = false;
            if (python) best = (block){start, i, indent, true};
        }
        i = e + 1;
    }
    if (open && python) best = (block){start, len, indent, true}; /* cut off mid-block */
    return best;
}

/* The block's lines with up to `indent` leading blanks taken off each. */
static void append_dedented(const char *t, const block *b, strbuf *out) {
    for (size_t i = b->start; i < b->end;) {
        size_t e = line_end(t, b->end, i);
        size_t skip = 0;
        while (skip < b->indent && i + skip < e && (t[i + skip] == ' ' || t[i + skip] == '\t')) skip++;
        sb_append(out, t + i + skip, e - i - skip);
        if (e < b->end) sb_putc(out, '\n');
        i = e + 1;
    }
}

static const char *find_last(const char *t, size_t len, const char *pat) {
    size_t m = strlen(pat);
    for (size_t i = len >= m ? len - m + 1 : 0; i-- > 0;)
        if (!memcmp(t + i, pat, m)) return t + i;
    return NULL;
}

static bool looks_like_code(const char *s, size_t n) {
    static const char *const starts[] = {"def ", "class ", "import ", "from ", "async def ", "return ", "@"};
    for (size_t i = 0; i < n;) {
        size_t e = line_end(s, n, i);
        size_t ind = i + indent_of(s + i, e - i);
        for (size_t k = 0; k < sizeof starts / sizeof starts[0]; k++) {
            size_t m = strlen(starts[k]);
            if (e - ind >= m && !memcmp(s + ind, starts[k], m)) return true;
        }
        i = e + 1;
    }
    return false;
}

code_source code_extract(const char *text, size_t len, strbuf *out) {
    sb_clear(out);
    block b = last_python_block(text, len);
    if (b.found) {
        append_dedented(text, &b, out);
        return CODE_FROM_FENCE;
    }
    const char *close = find_last(text, len, "</answer>");
    const char *open = close ? find_last(text, (size_t)(close - text), "<answer>") : NULL;
    if (open) {
        const char *body = open + strlen("<answer>");
        size_t n = (size_t)(close - body);
        if (looks_like_code(body, n)) {
            sb_append(out, body, n);
            return CODE_FROM_ANSWER;
        }
    }
    sb_append(out, text, len);
    return CODE_FROM_WHOLE;
}
