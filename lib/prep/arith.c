#include "arith.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/rng.h"

enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV };
static const char OP_ASCII[4] = {'+', '-', '*', '/'};
/* The question shows the signs people write; the canonical expression keeps
 * ASCII so any calculator (python3, bc) reads it. */
static const char *const OP_SHOWN[4] = {"+", "-", "\xC3\x97", "\xC3\xB7"}; /* × ÷ */

int arith_parse_ops(arith_opts *o, const char *ops, gerr *e) {
    memset(o->op, 0, sizeof o->op);
    if (!*ops) return gerr_set(e, EX_USAGE, "--ops: expected some of + - * /, got nothing");
    for (const char *p = ops; *p; p++) {
        const char *at = strchr("+-*/", *p);
        if (!at) return gerr_set(e, EX_USAGE, "--ops: expected some of + - * /, got '%c' in '%s'", *p, ops);
        int k = (int)(at - "+-*/");
        if (o->op[k]) return gerr_set(e, EX_USAGE, "--ops: '%c' given twice in '%s'", *p, ops);
        o->op[k] = true;
    }
    return 0;
}

int arith_parse_terms(arith_opts *o, const char *spec, gerr *e) {
    int a, b, used = 0;
    if (sscanf(spec, "%d..%d%n", &a, &b, &used) == 2 && !spec[used]) {
    } else if (used = 0, sscanf(spec, "%d%n", &a, &used) == 1 && !spec[used]) {
        b = a;
    } else {
        return gerr_set(e, EX_USAGE, "--terms: expected N or A..B, got '%s'", spec);
    }
    if (a < ARITH_MIN_TERMS || b > ARITH_MAX_TERMS || a > b)
        return gerr_set(e, EX_USAGE, "--terms: '%s' is out of range: operands per problem are %d..%d", spec,
                        ARITH_MIN_TERMS, ARITH_MAX_TERMS);
    o->min_terms = a;
    o->max_terms = b;
    return 0;
}

static long long pow10ll(int d) {
    long long v = 1;
    while (d-- > 0) v *= 10;
    return v;
}

/* An operand: first its number of digits (1..digits), then a value with
 * exactly that many. Drawing the length first keeps short operands common,
 * which the small models this task is for need. */
static long long draw_operand(rng_stream *r, int digits, long long lowest) {
    int d = 1 + (int)rng_below(r, (uint64_t)digits);
    long long lo = d == 1 ? 1 : pow10ll(d - 1), hi = pow10ll(d) - 1;
    if (lo < lowest) lo = lowest;
    return lo + (long long)rng_below(r, (uint64_t)(hi - lo + 1));
}

/* A divisor d of v with 2 <= d <= max, uniform among those found, or 0.
 * Trial division stops at 2^17 so a huge v cannot stall the generator: a
 * divisor pair beyond that is simply not offered. */
static long long pick_divisor(rng_stream *r, long long v, long long max) {
    enum { TRIAL_LIMIT = 1 << 17 };
    if (v < 2) return 0;
    uint64_t count = 0;
    for (int pass = 0; pass < 2; pass++) {
        uint64_t want = pass ? rng_below(r, count) : 0, seen = 0;
        for (long long i = 1; i <= TRIAL_LIMIT && i <= v / i; i++) {
            if (v % i) continue;
            long long pair[2] = {i, v / i};
            for (int k = 0; k < (pair[0] == pair[1] ? 1 : 2); k++) {
                if (pair[k] < 2 || pair[k] > max) continue;
                if (pass && seen == want) return pair[k];
                seen++;
            }
        }
        if (!pass) {
            count = seen;
            if (!count) return 0;
        }
    }
    return 0; /* not reached: pass 1 finds the chosen one */
}

static int draw_op(rng_stream *r, const arith_opts *o) {
    int allowed[4], n = 0;
    for (int k = 0; k < 4; k++)
        if (o->op[k]) allowed[n++] = k;
    return allowed[rng_below(r, (uint64_t)n)];
}

/* "37 + 48 × 3": precedence as usual, * and / left to right within a term. */
static bool draw_plain(const arith_opts *o, rng_stream *r, int terms, arith_problem *p) {
    long long max = pow10ll(o->digits) - 1;
    int ops[ARITH_MAX_TERMS];
    for (int i = 0; i + 1 < terms; i++) ops[i] = draw_op(r, o);
    long long a = draw_operand(r, o->digits, 1);
    long long total = 0, term = a;
    int sign = 1;
    sb_printf(&p->expr, "%lld", a);
    sb_printf(&p->question, "What is %lld", a);
    for (int i = 1; i < terms; i++) {
        int op = ops[i - 1];
        if (op == OP_ADD || op == OP_SUB) {
            if (__builtin_add_overflow(total, sign * term, &total)) return false;
            sign = op == OP_ADD ? 1 : -1;
            a = draw_operand(r, o->digits, 1);
            term = a;
        } else if (op == OP_MUL) {
            a = draw_operand(r, o->digits, 1);
            if (__builtin_mul_overflow(term, a, &term)) return false;
        } else {
            /* Division only where exact: the divisor is drawn among the
             * divisors of the running value of the term. */
            a = pick_divisor(r, term, max);
            if (!a) return false;
            term /= a;
        }
        sb_printf(&p->expr, " %c %lld", OP_ASCII[op], a);
        sb_printf(&p->question, " %s %lld", OP_SHOWN[op], a);
    }
    if (__builtin_add_overflow(total, sign * term, &total)) return false;
    if (total < 0) return false; /* answers are counts a small model can say */
    sb_putc(&p->question, '?');
    p->answer = total;
    return true;
}

typedef struct {
    const char *name, *pronoun;
} person;

static const person PEOPLE[] = {{"Mia", "she"}, {"Sam", "he"},  {"Ava", "she"}, {"Leo", "he"},
                                {"Nora", "she"}, {"Omar", "he"}, {"Lily", "she"}, {"Ben", "he"}};
static const char *const ITEMS[] = {"apples", "marbles", "stickers", "pencils",
                                    "cookies", "cards", "coins", "books"};

/* "Mia has 23 marbles. Then she gets 15 more. ... How many marbles does Mia
 * have now?": each step changes the running count, so the expression is
 * evaluated left to right and gets parentheses where precedence would
 * otherwise change it. Operands are at least 2 ("1 bags" reads badly). */
static bool draw_word(const arith_opts *o, rng_stream *r, int terms, arith_problem *p) {
    long long max = pow10ll(o->digits) - 1;
    const person *who = &PEOPLE[rng_below(r, sizeof PEOPLE / sizeof *PEOPLE)];
    const char *items = ITEMS[rng_below(r, sizeof ITEMS / sizeof *ITEMS)];
    int ops[ARITH_MAX_TERMS];
    for (int i = 0; i + 1 < terms; i++) ops[i] = draw_op(r, o);
    long long a = draw_operand(r, o->digits, 2), v = a;
    bool low_top = false; /* the expression so far ends in a top-level + or - */
    int first = 0;
    sb_printf(&p->expr, "%lld", a);
    if (ops[0] == OP_MUL) {
        long long b = draw_operand(r, o->digits, 2);
        if (__builtin_mul_overflow(v, b, &v)) return false;
        sb_printf(&p->expr, " * %lld", b);
        sb_printf(&p->question, "%s has %lld bags with %lld %s in each bag.", who->name, a, b, items);
        first = 1;
    } else {
        sb_printf(&p->question, "%s has %lld %s.", who->name, a, items);
    }
    for (int i = first; i + 1 < terms; i++) {
        int op = ops[i];
        long long c = 0;
        switch (op) {
        case OP_ADD:
            c = draw_operand(r, o->digits, 2);
            if (__builtin_add_overflow(v, c, &v)) return false;
            sb_printf(&p->question, " Then %s gets %lld more.", who->pronoun, c);
            break;
        case OP_SUB:
            /* one cannot give away more than one has */
            for (int tries = 0; tries < 8 && (c == 0 || c > v); tries++) c = draw_operand(r, o->digits, 2);
            if (c > v) return false;
            v -= c;
            sb_printf(&p->question, " Then %s gives away %lld.", who->pronoun, c);
            break;
        case OP_MUL:
            c = draw_operand(r, o->digits, 2);
            if (__builtin_mul_overflow(v, c, &v)) return false;
            sb_printf(&p->question, " Then %s ends up with %lld times as many.", who->pronoun, c);
            break;
        default:
            c = pick_divisor(r, v, max);
            if (!c) return false;
            v /= c;
            sb_printf(&p->question, " Then %s splits them equally into %lld groups and keeps one group.",
                      who->pronoun, c);
            break;
        }
        if ((op == OP_MUL || op == OP_DIV) && low_top) {
            strbuf wrapped = {0};
            sb_printf(&wrapped, "(%s)", p->expr.data);
            sb_clear(&p->expr);
            sb_append(&p->expr, wrapped.data, wrapped.len);
            sb_free(&wrapped);
        }
        low_top = op == OP_ADD || op == OP_SUB;
        sb_printf(&p->expr, " %c %lld", OP_ASCII[op], c);
    }
    sb_printf(&p->question, " How many %s does %s have now?", items, who->name);
    p->answer = v;
    return true;
}

bool arith_draw(const arith_opts *o, uint64_t seed, uint64_t index, arith_problem *p) {
    rng_stream r;
    rng_init(&r, seed, "arith", 5, index);
    sb_clear(&p->question);
    sb_clear(&p->expr);
    int terms = o->min_terms + (int)rng_below(&r, (uint64_t)(o->max_terms - o->min_terms + 1));
    p->terms = terms;
    p->word = rng_uniform(&r) < o->word_fraction;
    return p->word ? draw_word(o, &r, terms, p) : draw_plain(o, &r, terms, p);
}

void arith_problem_free(arith_problem *p) {
    sb_free(&p->question);
    sb_free(&p->expr);
}
