/* The countdown check: a recursive-descent parser over exact 64-bit
 * rationals (rules in countdown_expr.h). The text is model output, so every
 * step is bounded: length, nesting, literal size, literal count, and every
 * arithmetic operation is overflow-checked. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../answer/extract.h"
#include "../answer/match.h"
#include "countdown_expr.h"

static const char *const RESULT_NAMES[COUNTDOWN_N_RESULTS] = {
    "ok", "empty", "too_long", "syntax", "too_deep", "big_number", "overflow", "div_zero", "numbers", "wrong_value"};

const char *countdown_result_name(countdown_result r) {
    return (unsigned)r < COUNTDOWN_N_RESULTS ? RESULT_NAMES[r] : "?";
}

/* ---- exact rationals ------------------------------------------------------ */

typedef struct {
    int64_t num, den; /* den > 0, gcd(|num|, den) = 1; never INT64_MIN */
} rational;

static int64_t gcd64(int64_t a, int64_t b) {
    if (a < 0) a = -a;
    if (b < 0) b = -b;
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Reduces n/d (d != 0) into *out; false when a part cannot be represented. */
static bool make(int64_t n, int64_t d, rational *out) {
    if (n == INT64_MIN || d == INT64_MIN) return false;
    if (d < 0) n = -n, d = -d;
    int64_t g = gcd64(n, d);
    if (g > 1) n /= g, d /= g;
    out->num = n;
    out->den = d;
    return true;
}

static countdown_result add(rational a, rational b, bool subtract, rational *out) {
    if (subtract) b.num = -b.num; /* safe: num is never INT64_MIN */
    int64_t g = gcd64(a.den, b.den);
    int64_t lcm, x, y, n;
    if (__builtin_mul_overflow(a.den / g, b.den, &lcm) || __builtin_mul_overflow(a.num, lcm / a.den, &x) ||
        __builtin_mul_overflow(b.num, lcm / b.den, &y) || __builtin_add_overflow(x, y, &n) || !make(n, lcm, out))
        return COUNTDOWN_OVERFLOW;
    return COUNTDOWN_OK;
}

static countdown_result mul(rational a, rational b, bool divide, rational *out) {
    if (divide) {
        if (b.num == 0) return COUNTDOWN_DIV_ZERO;
        int64_t t = b.num;
        b.num = b.den;
        b.den = t;
        if (b.den < 0) b.num = -b.num, b.den = -b.den;
    }
    /* cross-reduce first so that products stay small */
    int64_t g1 = gcd64(a.num, b.den), g2 = gcd64(b.num, a.den);
    if (g1 == 0) g1 = 1;
    if (g2 == 0) g2 = 1;
    int64_t n, d;
    if (__builtin_mul_overflow(a.num / g1, b.num / g2, &n) || __builtin_mul_overflow(a.den / g2, b.den / g1, &d) ||
        !make(n, d, out))
        return COUNTDOWN_OVERFLOW;
    return COUNTDOWN_OK;
}

/* ---- parser --------------------------------------------------------------- */

typedef struct {
    const char *s;
    size_t len, pos;
    int depth;
    long long lits[COUNTDOWN_EXPR_MAX_NUMBERS];
    size_t n_lits, max_lits;
    countdown_result err; /* first failure; COUNTDOWN_OK while going */
} parser;

static void skip_ws(parser *p) {
    while (p->pos < p->len &&
           (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
        p->pos++;
}

static bool fail(parser *p, countdown_result r) {
    if (p->err == COUNTDOWN_OK) p->err = r;
    return false;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* ['-'] D+ at pos, into *v. */
static bool integer(parser *p, long long *v) {
    bool neg = p->pos < p->len && p->s[p->pos] == '-';
    size_t start = p->pos + (neg ? 1 : 0), k = start;
    while (k < p->len && is_digit(p->s[k])) k++;
    if (k == start) return fail(p, COUNTDOWN_SYNTAX);
    if (k - start > COUNTDOWN_EXPR_MAX_DIGITS) return fail(p, COUNTDOWN_BIG_NUMBER);
    long long x = 0;
    for (size_t i = start; i < k; i++) x = x * 10 + (p->s[i] - '0');
    *v = neg ? -x : x;
    p->pos = k;
    return true;
}

static bool expr(parser *p, rational *out);

static bool factor(parser *p, rational *out) {
    skip_ws(p);
    if (p->pos >= p->len) return fail(p, COUNTDOWN_SYNTAX);
    if (p->s[p->pos] == '(') {
        if (++p->depth > COUNTDOWN_EXPR_MAX_DEPTH) return fail(p, COUNTDOWN_TOO_DEEP);
        p->pos++;
        if (!expr(p, out)) return false;
        skip_ws(p);
        if (p->pos >= p->len || p->s[p->pos] != ')') return fail(p, COUNTDOWN_SYNTAX);
        p->pos++;
        p->depth--;
        return true;
    }
    long long v;
    if (!integer(p, &v)) return false;
    /* more literals than numbers can never match: stop before storing them */
    if (p->n_lits == p->max_lits) return fail(p, COUNTDOWN_NUMBERS);
    p->lits[p->n_lits++] = v;
    out->num = v;
    out->den = 1;
    return true;
}

/* One precedence level: 0 = sums (+ -), 1 = products (* /), 2 = factors. */
static bool level(parser *p, rational *out, int prec) {
    if (prec == 2) return factor(p, out);
    if (!level(p, out, prec + 1)) return false;
    const char *ops = prec == 0 ? "+-" : "*/";
    for (;;) {
        skip_ws(p);
        if (p->pos >= p->len || (p->s[p->pos] != ops[0] && p->s[p->pos] != ops[1])) return true;
        bool inverse = p->s[p->pos++] == ops[1]; /* '-' or '/' */
        rational rhs;
        if (!level(p, &rhs, prec + 1)) return false;
        countdown_result r = prec == 0 ? add(*out, rhs, inverse, out) : mul(*out, rhs, inverse, out);
        if (r != COUNTDOWN_OK) return fail(p, r);
    }
}

static bool expr(parser *p, rational *out) { return level(p, out, 0); }

static int cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

countdown_result countdown_check(const char *s, size_t len, const long long *numbers, size_t n, long long target) {
    if (len > COUNTDOWN_EXPR_MAX_LEN) return COUNTDOWN_TOO_LONG;
    if (n == 0 || n > COUNTDOWN_EXPR_MAX_NUMBERS) return COUNTDOWN_NUMBERS;
    parser p = {.s = s, .len = len, .max_lits = n};
    skip_ws(&p);
    if (p.pos == len) return COUNTDOWN_EMPTY;
    rational value;
    if (!expr(&p, &value)) return p.err;
    skip_ws(&p);
    bool claims_target = true;
    if (p.pos < len && s[p.pos] == '=') {
        p.pos++;
        skip_ws(&p);
        long long claimed;
        if (!integer(&p, &claimed)) return p.err;
        claims_target = claimed == target;
        skip_ws(&p);
    }
    if (p.pos != len) return COUNTDOWN_SYNTAX;
    if (p.n_lits != n) return COUNTDOWN_NUMBERS;
    long long want[COUNTDOWN_EXPR_MAX_NUMBERS];
    memcpy(want, numbers, n * sizeof *want);
    qsort(want, n, sizeof *want, cmp_ll);
    qsort(p.lits, n, sizeof *p.lits, cmp_ll);
    if (memcmp(want, p.lits, n * sizeof *want)) return COUNTDOWN_NUMBERS;
    if (!claims_target || value.den != 1 || value.num != target) return COUNTDOWN_WRONG_VALUE;
    return COUNTDOWN_OK;
}

/* ---- finding the expression ----------------------------------------------- */

/* A line of only arithmetic characters with a digit and an operator. */
static bool looks_like_expression(const char *s, size_t len) {
    bool digit = false, op = false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (is_digit(c)) digit = true;
        else if (c == '+' || c == '-' || c == '*' || c == '/') op = true;
        else if (!strchr("()= \t\r", c)) return false;
    }
    return digit && op;
}

bool countdown_extract(const char *s, size_t len, strbuf *out) {
    if (answer_tag_content(s, len, out)) return true;
    if (extract_boxed(s, len, out) == 1) return true;
    sb_clear(out);
    size_t end = len;
    while (end > 0) {
        size_t start = end;
        while (start > 0 && s[start - 1] != '\n') start--;
        size_t a = start, b = end;
        while (a < b && (s[a] == ' ' || s[a] == '\t' || s[a] == '\r')) a++;
        while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t' || s[b - 1] == '\r')) b--;
        if (b > a && s[b - 1] == '.') b--;
        if (looks_like_expression(s + a, b - a)) {
            sb_append(out, s + a, b - a);
            return true;
        }
        if (start == 0) break;
        end = start - 1;
    }
    return false;
}
