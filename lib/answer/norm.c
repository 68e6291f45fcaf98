/* Normalising and comparing final answers (rules in match.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../util/err.h"
#include "extract.h"
#include "match.h"
#include "number.h"

enum { CLEAN_MAX_DEPTH = 16, NUMBER_MAX_CHARS = ANSWER_NUMBER_DIGITS };

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
static char lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c; }

static bool starts(const char *s, size_t len, size_t i, const char *lit) {
    size_t n = strlen(lit);
    return i + n <= len && !memcmp(s + i, lit, n);
}

/* ---- LaTeX and Unicode clean-up ------------------------------------------- */

/* Commands whose braced argument stands for itself. */
static const char *const WRAPPERS[] = {"text", "textbf", "textit", "textrm", "mathrm", "mathbf",
                                       "mathit", "mbox",   "boxed",  "fbox",   NULL};
/* Commands that are dropped. */
static const char *const DROPPED[] = {"left", "right", "displaystyle", "circ", "degree", NULL};

static bool in_list(const char *const *list, const char *name, size_t n) {
    for (size_t i = 0; list[i]; i++) /* no strlen: this runs for every command of every answer */
        if (list[i][0] == name[0] && strnlen(list[i], n + 1) == n && !memcmp(list[i], name, n)) return true;
    return false;
}


/* "^\circ" or "^{\circ}" at s[i]: its length, else 0. */
static size_t degree_mark(const char *s, size_t len, size_t i) {
    if (starts(s, len, i, "^\\circ")) return 6;
    if (starts(s, len, i, "^{\\circ}")) return 8;
    return 0;
}

/* Whether the x at s[i] stands between a number (out so far ends with its
 * digit, spaces aside) and a power of ten: a multiplication sign. */
static bool times_ten(const char *s, size_t len, size_t i, const strbuf *out) {
    size_t n = out->len;
    while (n > 0 && is_space(out->data[n - 1])) n--;
    if (n == 0 || !is_digit(out->data[n - 1])) return false;
    size_t k = i + 1;
    while (k < len && is_space(s[k])) k++;
    return starts(s, len, k, "10^");
}

static void clean_into(const char *s, size_t len, strbuf *out, int depth) {
    size_t i = 0;
    while (i < len) {
        unsigned char c = (unsigned char)s[i];
        size_t skip;
        if (c == '$') {
            i++;
        } else if (c == '\\') {
            size_t k = i + 1;
            while (k < len && is_alpha(s[k])) k++;
            const char *name = s + i + 1;
            size_t n = k - i - 1;
            if (n == 0) { /* a one-character command */
                if (i + 1 >= len) { /* a lone trailing backslash */
                    sb_putc(out, '\\');
                    i++;
                    continue;
                }
                char ch = s[i + 1];
                if (ch == '%') sb_putc(out, '%');
                else if (ch == '\\') sb_putc(out, ' '); /* a line break */
                else if (!strchr("()[]$,!;: ", ch)) sb_append(out, s + i, 2);
                i += 2;
                continue;
            }
            size_t arg = k;
            while (arg < len && is_space(s[arg])) arg++;
            size_t end;
            if (in_list(WRAPPERS, name, n) && arg < len && s[arg] == '{' && depth < CLEAN_MAX_DEPTH &&
                (end = extract_group_end(s, len, arg))) {
                clean_into(s + arg + 1, end - arg - 2, out, depth + 1);
                i = end;
                continue;
            }
            if (in_list(DROPPED, name, n)) {
                i = k;
                /* \left. and \right. are invisible delimiters */
                bool delimiter = (n == 4 && !memcmp(name, "left", 4)) || (n == 5 && !memcmp(name, "right", 5));
                if (delimiter && i < len && s[i] == '.') i++;
                continue;
            }
            if ((n == 5 && (!memcmp(name, "dfrac", 5) || !memcmp(name, "tfrac", 5)))) sb_puts(out, "\\frac");
            else if ((n == 4 && !memcmp(name, "quad", 4)) || (n == 5 && !memcmp(name, "qquad", 5))) sb_putc(out, ' ');
            else sb_append(out, s + i, k - i);
            i = k;
        } else if (c == '^' && (skip = degree_mark(s, len, i))) {
            i += skip;
        } else if (c == '{' && starts(s, len, i, "{,}")) {
            sb_putc(out, ',');
            i += 3;
        } else if (c == '~') {
            sb_putc(out, ' ');
            i++;
        } else if ((c == 'x' || c == 'X') && times_ten(s, len, i, out)) {
            sb_puts(out, "\\times"); /* 6.02x10^23 */
            i++;
        } else if (c < 0x80) { /* the common case: none of the sequences below */
            sb_putc(out, (char)c);
            i++;
        } else if (starts(s, len, i, "\xe2\x88\x92")) { /* U+2212 minus */
            sb_putc(out, '-');
            i += 3;
        } else if (starts(s, len, i, "\xc2\xb0")) { /* degree sign */
            i += 2;
        } else if (starts(s, len, i, "\xc2\xa0")) { /* no-break space */
            sb_putc(out, ' ');
            i += 2;
        } else if (starts(s, len, i, "\xe2\x80\x89") || starts(s, len, i, "\xe2\x80\xaf")) { /* thin spaces */
            sb_putc(out, ' ');
            i += 3;
        } else if (starts(s, len, i, "\xc3\x97")) { /* multiplication sign */
            sb_puts(out, "\\times");
            i += 2;
        } else {
            sb_putc(out, (char)c);
            i++;
        }
    }
}

void answer_clean(const char *s, size_t len, strbuf *out) {
    clean_into(s, len, out, 0);
    sb_append(out, "", 0); /* data never NULL */
}

/* ---- numbers -------------------------------------------------------------- */

typedef struct {
    const char *s;
    size_t len, i;
} cursor;

static void skip_spaces(cursor *c) {
    while (c->i < c->len && is_space(c->s[c->i])) c->i++;
}

static bool take(cursor *c, const char *lit) {
    if (!starts(c->s, c->len, c->i, lit)) return false;
    c->i += strlen(lit);
    return true;
}

static bool take_currency(cursor *c) {
    if (c->i >= c->len || (unsigned char)c->s[c->i] < 0x80) return false; /* every sign below is multi-byte */
    static const char *const SIGNS[] = {"\xe2\x82\xac", "\xc2\xa3", "\xc2\xa5", "\xe2\x82\xb9", NULL};
    for (size_t k = 0; SIGNS[k]; k++)
        if (take(c, SIGNS[k])) {
            skip_spaces(c);
            return true;
        }
    return false;
}

/* Appends c's digits, '.' and exponent to buf (commas dropped). */
typedef struct {
    char text[NUMBER_MAX_CHARS + 1];
    size_t n;
    bool overflow;
} digits;

static void dput(digits *d, char ch) {
    if (d->n < NUMBER_MAX_CHARS) d->text[d->n++] = ch;
    else d->overflow = true;
}

static double dvalue(digits *d) {
    d->text[d->n] = 0;
    return d->overflow ? NAN : strtod(d->text, NULL);
}

/* D+ | D{1,3}(,DDD)+, then an optional .D+; or .D+ alone. */
static bool take_decimal(cursor *c, digits *d) {
    size_t start = c->i, run = 0;
    while (c->i < c->len && is_digit(c->s[c->i])) dput(d, c->s[c->i++]), run++;
    if (run > 0 && run <= 3) {
        while (c->i + 3 < c->len && c->s[c->i] == ',' && is_digit(c->s[c->i + 1]) &&
               is_digit(c->s[c->i + 2]) && is_digit(c->s[c->i + 3]) &&
               (c->i + 4 >= c->len || !is_digit(c->s[c->i + 4]))) {
            for (int k = 1; k <= 3; k++) dput(d, c->s[c->i + (size_t)k]);
            c->i += 4;
        }
    }
    if (c->i + 1 < c->len && c->s[c->i] == '.' && is_digit(c->s[c->i + 1])) {
        dput(d, c->s[c->i++]);
        while (c->i < c->len && is_digit(c->s[c->i])) dput(d, c->s[c->i++]);
    }
    return c->i > start;
}

/* e/E[+-]D+, or "\times 10^{k}" / "\cdot 10^k" / "*10^k"; appends "eK". */
static bool take_exponent(cursor *c, digits *d) {
    cursor save = *c;
    size_t n0 = d->n;
    bool ok = false;
    if (c->i < c->len && (c->s[c->i] == 'e' || c->s[c->i] == 'E')) {
        c->i++;
        dput(d, 'e');
        if (c->i < c->len && (c->s[c->i] == '+' || c->s[c->i] == '-')) dput(d, c->s[c->i++]);
        size_t k = c->i;
        while (c->i < c->len && is_digit(c->s[c->i])) dput(d, c->s[c->i++]);
        ok = c->i > k;
    } else {
        skip_spaces(c);
        if (take(c, "\\times") || take(c, "\\cdot") || take(c, "*")) {
            skip_spaces(c);
            if (take(c, "10^")) {
                bool braced = take(c, "{");
                dput(d, 'e');
                if (c->i < c->len && (c->s[c->i] == '+' || c->s[c->i] == '-')) dput(d, c->s[c->i++]);
                size_t k = c->i;
                while (c->i < c->len && is_digit(c->s[c->i])) dput(d, c->s[c->i++]);
                ok = c->i > k && (!braced || take(c, "}"));
            }
        }
    }
    if (!ok) *c = save, d->n = n0;
    return ok;
}

/* A number's written part: its digits (take_decimal's, then take_exponent's) and sign. */
typedef struct {
    digits d;
    int sign;
} part;

/* A signed decimal, alone in s (a \frac argument). */
static bool signed_decimal(const char *s, size_t len, part *p) {
    cursor c = {s, len, 0};
    skip_spaces(&c);
    if (c.i < len && (s[c.i] == '-' || s[c.i] == '+')) p->sign = s[c.i++] == '-' ? -1 : 1;
    if (!take_decimal(&c, &p->d)) return false;
    skip_spaces(&c);
    return c.i == len && isfinite(dvalue(&p->d));
}

/* One \frac argument: {text} or a single character. */
static bool frac_arg(cursor *c, part *p) {
    memset(p, 0, sizeof *p);
    p->sign = 1;
    skip_spaces(c);
    if (c->i >= c->len) return false;
    if (c->s[c->i] == '{') {
        size_t end = extract_group_end(c->s, c->len, c->i);
        if (!end) return false;
        bool ok = signed_decimal(c->s + c->i + 1, end - c->i - 2, p);
        c->i = end;
        return ok;
    }
    if (!is_digit(c->s[c->i])) return false;
    dput(&p->d, c->s[c->i++]);
    return true;
}

/* A scale word: its power of ten, else 0. */
static int scale_of(const char *w, size_t n) {
    static const struct {
        const char *word;
        int power;
    } SCALES[] = {{"hundred", 2}, {"thousand", 3}, {"million", 6}, {"billion", 9}, {"trillion", 12}};
    for (size_t k = 0; k < sizeof SCALES / sizeof SCALES[0]; k++)
        if (strlen(SCALES[k].word) == n && !strncasecmp(SCALES[k].word, w, n)) return SCALES[k].power;
    return 0;
}

/* The rest of c as unit words; a leading scale word's power of ten in *scale10. */
static bool take_unit(cursor *c, int *scale10) {
    size_t before = c->i;
    skip_spaces(c);
    bool spaced = c->i > before;
    size_t start = c->i;
    if (start >= c->len || !is_alpha(c->s[start])) return false;
    size_t first_end = start;
    while (first_end < c->len && is_alpha(c->s[first_end])) first_end++;
    size_t first_len = first_end - start;
    if (!spaced && first_len < 2) return false;
    /* 3i and 2 pi are numbers of another kind, not 3 and 2 */
    if ((first_len == 1 && lower(c->s[start]) == 'i') || (first_len == 2 && !strncasecmp(c->s + start, "pi", 2)))
        return false;
    for (size_t k = start; k < c->len; k++) {
        char ch = c->s[k];
        bool ok = is_alpha(ch) || is_space(ch) || ch == '.' || ch == '/' ||
                  (ch == '^' && k + 1 < c->len && is_digit(c->s[k + 1])) || (is_digit(ch) && k > 0 && c->s[k - 1] == '^');
        if (!ok) return false;
    }
    *scale10 = scale_of(c->s + start, first_len);
    c->i = c->len;
    return true;
}

/* The number a written part stands for, times 10^scale10. */
static bool part_number(part *p, int scale10, answer_number *out) {
    double v = dvalue(&p->d);
    answer_decimal dec;
    int frac;
    long long place;
    if (!isfinite(v) || !answer_decimal_parse(p->d.text, p->sign, scale10, &dec, &frac, &place)) return false;
    if (scale10) v *= pow(10, scale10);
    answer_number_from_decimal(&dec, frac, place, p->sign * v, out);
    return true;
}

static void negate(answer_number *n) {
    n->value = -n->value;
    n->dec.sign = -n->dec.sign;
    n->rat.num = -n->rat.num;
}

/* The number the cleaned text s stands for (match.h's grammar). */
static bool parse_number(const char *s, size_t len, answer_number *out) {
    while (len && is_space(s[len - 1])) len--;
    if (len && s[len - 1] == '.') len--;
    cursor c = {s, len, 0};
    skip_spaces(&c);
    /* "x = 5" */
    if (c.i < len && is_alpha(s[c.i])) {
        size_t k = c.i;
        while (k < len && (is_alpha(s[k]) || is_digit(s[k]) || s[k] == '_')) k++;
        cursor after = {s, len, k};
        skip_spaces(&after);
        if (after.i < len && s[after.i] == '=') {
            c.i = after.i + 1;
            skip_spaces(&c);
        }
    }
    int sign = 1;
    bool currency = take_currency(&c);
    if (c.i < len && (s[c.i] == '+' || s[c.i] == '-')) {
        sign = s[c.i] == '-' ? -1 : 1;
        c.i++;
        skip_spaces(&c);
    }
    if (!currency) take_currency(&c);
    part num = {.sign = 1}, den = {.sign = 1};
    bool fraction = false;
    if (take(&c, "\\frac")) {
        if (!frac_arg(&c, &num) || !frac_arg(&c, &den) || dvalue(&den.d) == 0) return false;
        fraction = true;
    } else {
        if (!take_decimal(&c, &num.d)) return false;
        bool exponent = take_exponent(&c, &num.d);
        cursor save = c;
        skip_spaces(&c);
        if (!exponent && take(&c, "/")) {
            skip_spaces(&c);
            size_t k = c.i;
            while (c.i < len && is_digit(s[c.i])) dput(&den.d, s[c.i++]);
            if (c.i == k) return false;
            if (c.i + 1 < len && s[c.i] == '.' && is_digit(s[c.i + 1])) {
                dput(&den.d, s[c.i++]);
                while (c.i < len && is_digit(s[c.i])) dput(&den.d, s[c.i++]);
            }
            if (dvalue(&den.d) == 0) return false;
            fraction = true;
        } else {
            c = save;
        }
    }
    take_currency(&c);
    cursor save = c;
    skip_spaces(&c);
    bool percent = take(&c, "%") || (take(&c, "percent") && (c.i == len || !is_alpha(s[c.i])));
    if (!percent) c = save;
    int scale10 = 0;
    take_unit(&c, &scale10);
    skip_spaces(&c);
    if (c.i != len || !part_number(&num, scale10, out)) return false;
    if (fraction) {
        answer_number n = *out, d;
        if (!part_number(&den, 0, &d)) return false;
        answer_number_divide(&n, &d, out);
    }
    if (!isfinite(out->value)) return false;
    if (sign < 0) negate(out);
    return true;
}

bool answer_parse_number(const char *s, size_t len, double *out) {
    answer_number n;
    if (!parse_number(s, len, &n)) return false;
    *out = n.value;
    return true;
}

/* ---- text and comparison -------------------------------------------------- */

static void fold(const char *s, size_t len, strbuf *out) {
    sb_clear(out);
    for (size_t i = 0; i < len; i++)
        if (!is_space(s[i])) sb_putc(out, lower(s[i]));
    if (out->len && out->data[out->len - 1] == '.') out->data[--out->len] = 0;
    if (out->len >= 2 && out->data[0] == '{' && extract_group_end(out->data, out->len, 0) == out->len) {
        memmove(out->data, out->data + 1, out->len - 2);
        out->len -= 2;
        out->data[out->len] = 0;
    }
    sb_append(out, "", 0); /* data never NULL */
}

void answer_norm_free(answer_norm *n) {
    sb_free(&n->text);
    sb_free(&n->clean);
    sb_free(&n->raw);
    free(n->math);
    n->math = NULL;
}

void answer_normalize(const char *s, size_t len, answer_norm *out) {
    sb_clear(&out->clean);
    answer_clean(s, len, &out->clean);
    out->is_number = parse_number(out->clean.data, out->clean.len, &out->num);
    out->value = out->is_number ? out->num.value : 0;
    fold(out->clean.data, out->clean.len, &out->text);
    sb_clear(&out->raw);
    sb_append(&out->raw, s, len);
    sb_append(&out->raw, "", 0); /* data never NULL */
    out->math_done = out->has_math = false;
}

/* Letters outside the multiplication signs \times and \cdot (a number in
 * scientific notation has no letter that could be a variable). */
static bool has_letter(const strbuf *b) {
    for (size_t i = 0; i < b->len; i++) {
        size_t m = b->data[i] != '\\'                           ? 0
                   : starts(b->data, b->len, i + 1, "times") ? 5
                   : starts(b->data, b->len, i + 1, "cdot")  ? 4
                                                             : 0;
        if (m && (i + 1 + m >= b->len || !is_alpha(b->data[i + 1 + m]))) { /* not \timesx */
            i += m;
            continue;
        }
        if (is_alpha(b->data[i])) return true;
    }
    return false;
}

/* n->math from n->raw (once): an expression, or a number's value. */
static void parse_math(answer_norm *n) {
    if (n->math_done) return;
    n->math_done = true;
    if (!n->math) n->math = xmalloc(sizeof *n->math);
    n->has_math = false;
    if (!n->is_number || has_letter(&n->clean)) n->has_math = mexpr_parse(n->raw.data, n->raw.len, n->math);
    /* "2 x" and "x = 5" read as numbers, but they are expressions in x */
    if (n->is_number && !(n->has_math && mexpr_var_mask(n->math, n->math->root))) {
        n->has_math = true;
        mexpr_rat q;
        mexpr_from_value(n->value, answer_number_rational(&n->num, &q) ? &q : NULL, n->math);
    } else if (n->is_number) {
        n->is_number = false;
    }
}

bool answer_norm_equal(answer_norm *pred, answer_norm *gold, double tol) {
    /* a number with letters may be an expression in them ("2 x"): settle that first */
    if (pred->is_number && gold->is_number && (has_letter(&pred->clean) || has_letter(&gold->clean))) {
        parse_math(pred);
        parse_math(gold);
    }
    if (pred->is_number && gold->is_number) return answer_number_equal(&pred->num, &gold->num, tol);
    if (pred->text.len == gold->text.len && !memcmp(pred->text.data, gold->text.data, pred->text.len)) return true;
    parse_math(pred);
    parse_math(gold);
    return pred->has_math && gold->has_math && mexpr_equal(pred->math, pred->math->root, gold->math, gold->math->root, tol);
}

bool answer_equal(const char *pred, size_t pred_len, const char *gold, size_t gold_len, double tol) {
    answer_norm a = {0}, b = {0};
    answer_normalize(pred, pred_len, &a);
    answer_normalize(gold, gold_len, &b);
    bool eq = answer_norm_equal(&a, &b, tol);
    answer_norm_free(&a);
    answer_norm_free(&b);
    return eq;
}
