/* Parsing math answers into expression trees (mexpr.h): recursive descent
 * over mexpr_lex's tokens, every nesting level counted against
 * MEXPR_MAX_DEPTH so that hostile input cannot exhaust the stack.
 *
 *   top     := item (',' item)*             several items: a bare list
 *   item    := union ('=' union)?
 *   union   := sum ('\cup' sum)*
 *   sum     := term (('+'|'-') term)*
 *   term    := signed (('*'|'/') signed | implicit-product power | units)*
 *   signed  := ('-'|'+') signed | power
 *   power   := postfix ('^' exponent)?
 *   postfix := primary '!'*
 *   primary := number | variable | \pi | e | \infty | \frac arg arg
 *            | \sqrt ('[' sum ']')? arg | function ('^' exponent)? (group | power)
 *            | ( items ) | [ items ] | { items } | \{ items \} | matrix */
#include <stdlib.h>
#include <string.h>

#include "mexpr_lex.h"

enum { MAX_ITEMS = 64, NUMBER_MAX_CHARS = 64 };

typedef struct {
    mexpr_toks toks;
    int pos;
    int depth;
    mexpr *x;
} parser;

static mexpr_tok *peek(parser *P) { return &P->toks.t[P->pos]; }
static bool at(parser *P, mexpr_tok_kind k) { return P->toks.t[P->pos].kind == k; }
static bool accept(parser *P, mexpr_tok_kind k) {
    if (!at(P, k)) return false;
    P->pos++;
    return true;
}

static int add_node(parser *P, mexpr_kind kind, int a, int b) {
    if (a < -1 || b < -1 || P->x->n_nodes >= MEXPR_MAX_NODES) return -2;
    mexpr_node *nd = &P->x->nodes[P->x->n_nodes];
    memset(nd, 0, sizeof *nd);
    nd->kind = kind;
    nd->a = a;
    nd->b = b;
    return P->x->n_nodes++;
}

/* A node holding items[0..n) as kids. */
static int add_group(parser *P, mexpr_kind kind, const int *items, int n, char open, char close) {
    if (P->x->n_kids + n > MEXPR_MAX_NODES) return -2;
    int i = add_node(P, kind, -1, -1);
    if (i < 0) return i;
    mexpr_node *nd = &P->x->nodes[i];
    nd->first = P->x->n_kids;
    nd->n = n;
    nd->open = open;
    nd->close = close;
    memcpy(P->x->kids + P->x->n_kids, items, (size_t)n * sizeof *items);
    P->x->n_kids += n;
    return i;
}

/* The number of a token's text (digits, '.', "{,}", an exponent). */
static int number_node(parser *P, const char *s, size_t len) {
    char buf[NUMBER_MAX_CHARS + 1];
    size_t n = 0;
    long long mant = 0, exp10 = 0;
    int decimals = 0;
    bool exact = true, frac = false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == '{' || c == ',' || c == '}') continue;
        if (n + 8 >= NUMBER_MAX_CHARS) return -2;
        buf[n++] = c;
        if (c == '.') frac = true;
        else if (c == 'e' || c == 'E') {
            /* the lexer allows only [+-]digits after it */
            if (len - i - 1 > 6) return -2;
            memcpy(buf + n, s + i + 1, len - i - 1);
            n += len - i - 1;
            buf[n] = 0;
            exp10 = strtoll(buf + n - (len - i - 1), NULL, 10);
            if (exp10 > 30 || exp10 < -30) exact = false;
            break;
        } else if (__builtin_mul_overflow(mant, 10, &mant) || __builtin_add_overflow(mant, c - '0', &mant)) {
            exact = false;
        } else if (frac) {
            decimals++;
        }
    }
    buf[n] = 0;
    int i = add_node(P, MX_NUM, -1, -1);
    if (i < 0) return i;
    mexpr_node *nd = &P->x->nodes[i];
    nd->v = strtod(buf, NULL);
    long long num = mant, den = 1;
    for (long long k = exp10 - decimals; exact && k > 0; k--) exact = !__builtin_mul_overflow(num, 10, &num);
    for (long long k = exp10 - decimals; exact && k < 0; k++) exact = !__builtin_mul_overflow(den, 10, &den);
    if (exact) nd->exact = mexpr_rat_make(num, den, &nd->q);
    return i;
}

static int var_node(parser *P, const char *name) {
    mexpr *x = P->x;
    int v = 0;
    while (v < x->n_vars && strcmp(x->vars[v], name)) v++;
    if (v == x->n_vars) {
        if (x->n_vars == MEXPR_MAX_VARS) return -2;
        memcpy(x->vars[x->n_vars++], name, MEXPR_NAME_MAX);
    }
    int i = add_node(P, MX_VAR, -1, -1);
    if (i >= 0) x->nodes[i].var = v;
    return i;
}

static int parse_item(parser *P);
static int parse_sum(parser *P);
static int parse_signed(parser *P);
static int parse_power(parser *P);

/* Guards each level of nesting. */
static bool enter(parser *P) { return ++P->depth <= MEXPR_MAX_DEPTH; }

/* items separated by ',' up to the token `close` (not consumed); their count, -1 on failure. */
static int parse_items(parser *P, int *items) {
    int n = 0;
    for (;;) {
        if (n == MAX_ITEMS) return -1;
        int it = parse_item(P);
        if (it < 0) return -1;
        items[n++] = it;
        if (!accept(P, MT_COMMA)) return n;
    }
}

/* { sum } */
static int parse_braced(parser *P) {
    if (!accept(P, MT_LBRACE)) return -2;
    int v = parse_sum(P);
    return v >= 0 && accept(P, MT_RBRACE) ? v : -2;
}

/* A LaTeX argument: {sum}, or one token (\frac12 takes the digits one at a time). */
static int parse_arg(parser *P) {
    mexpr_tok *t = peek(P);
    if (t->kind == MT_LBRACE) return parse_braced(P);
    if (t->kind == MT_NUM) {
        if (t->len > 1 && t->text[0] >= '0' && t->text[0] <= '9' && t->text[1] >= '0' && t->text[1] <= '9') {
            int v = number_node(P, t->text, 1);
            t->text++, t->len--;
            return v;
        }
        P->pos++;
        return number_node(P, t->text, t->len);
    }
    if (t->kind == MT_VAR || t->kind == MT_PI || t->kind == MT_E) return parse_power(P);
    return -2;
}

/* ( items ) [ items ] { items } \{ items \}, the opening token already taken. */
static int parse_bracketed(parser *P, char open) {
    int items[MAX_ITEMS];
    int n = parse_items(P, items);
    if (n < 0) return -2;
    char close;
    if (accept(P, MT_RPAREN)) close = ')';
    else if (accept(P, MT_RBRACK)) close = ']';
    else if (accept(P, MT_RBRACE)) close = '}';
    else if (accept(P, MT_RSET)) close = 'S';
    else return -2;
    if (open == '{' || open == 'S') { /* braces: a group, or a set */
        if (close != (open == '{' ? '}' : 'S')) return -2;
        if (open == '{' && n == 1) return items[0];
        return add_group(P, MX_LIST, items, n, '{', '}');
    }
    if (close == '}' || close == 'S') return -2;
    if (n == 1) return open == '(' && close == ')' ? items[0] : open == '[' && close == ']' ? items[0] : -2;
    return add_group(P, MX_LIST, items, n, open, close);
}

static int parse_matrix(parser *P) {
    int cells[MEXPR_MAX_NODES / 2];
    int n = 0, rows = 0, cols = -1, in_row = 0;
    for (;;) {
        if (at(P, MT_END_MATRIX) && in_row == 0) break;
        if (n == (int)(sizeof cells / sizeof cells[0])) return -2;
        int c = parse_sum(P);
        if (c < 0) return -2;
        cells[n++] = c;
        in_row++;
        if (accept(P, MT_AMP)) continue;
        if (cols >= 0 && in_row != cols) return -2;
        cols = in_row;
        rows++;
        in_row = 0;
        if (accept(P, MT_ROWSEP)) continue;
        if (!at(P, MT_END_MATRIX)) return -2;
    }
    if (!accept(P, MT_END_MATRIX) || rows == 0) return -2;
    int m = add_group(P, MX_MATRIX, cells, n, 0, 0);
    if (m >= 0) P->x->nodes[m].cols = cols;
    return m;
}

static bool starts_factor(mexpr_tok_kind k) {
    return k == MT_NUM || k == MT_VAR || k == MT_PI || k == MT_E || k == MT_INF || k == MT_LPAREN || k == MT_LBRACE ||
           k == MT_FRAC || k == MT_SQRT || k == MT_FUNC || k == MT_BEGIN_MATRIX;
}

static int parse_primary(parser *P) {
    if (!enter(P)) return -2;
    int v = -2;
    mexpr_tok *t = peek(P);
    P->pos++;
    switch (t->kind) {
    case MT_NUM: v = number_node(P, t->text, t->len); break;
    case MT_VAR: v = var_node(P, t->name); break;
    case MT_PI: v = add_node(P, MX_PI, -1, -1); break;
    case MT_E: v = add_node(P, MX_E, -1, -1); break;
    case MT_INF: v = add_node(P, MX_INF, -1, -1); break;
    case MT_FRAC: {
        int a = parse_arg(P);
        int b = a >= 0 ? parse_arg(P) : -2;
        v = add_node(P, MX_DIV, a, b);
        break;
    }
    case MT_SQRT: {
        int index = -1;
        if (accept(P, MT_LBRACK)) {
            index = parse_sum(P);
            if (index < 0 || !accept(P, MT_RBRACK)) break;
        }
        int a = parse_arg(P);
        if (index == -1) {
            index = add_node(P, MX_NUM, -1, -1);
            if (index >= 0) {
                P->x->nodes[index].exact = true;
                P->x->nodes[index].q = (mexpr_rat){2, 1};
                P->x->nodes[index].v = 2;
            }
        }
        v = add_node(P, MX_ROOT, a, index);
        break;
    }
    case MT_FUNC: {
        int power = -1;
        if (accept(P, MT_POW) && (power = parse_arg(P)) < 0) break;
        int a;
        if (at(P, MT_LPAREN) || at(P, MT_LBRACE)) a = parse_primary(P);
        else /* \sin 2x is sin(2x); \sin x \cos x is sin(x) cos(x) */
            for (a = parse_power(P); a >= 0 && starts_factor(peek(P)->kind) && !at(P, MT_FUNC);)
                a = add_node(P, MX_MUL, a, parse_power(P));
        v = add_node(P, MX_FUNC, a, -1);
        if (v >= 0) P->x->nodes[v].func = t->func;
        if (power >= 0) v = add_node(P, MX_POW, v, power);
        break;
    }
    case MT_LPAREN: v = parse_bracketed(P, '('); break;
    case MT_LBRACK: v = parse_bracketed(P, '['); break;
    case MT_LBRACE: v = parse_bracketed(P, '{'); break;
    case MT_LSET: v = parse_bracketed(P, 'S'); break;
    case MT_BEGIN_MATRIX: v = parse_matrix(P); break;
    default: break;
    }
    P->depth--;
    return v;
}

static int parse_postfix(parser *P) {
    int v = parse_primary(P);
    while (v >= 0 && accept(P, MT_BANG)) v = add_node(P, MX_FACT, v, -1);
    return v;
}

static int parse_exponent(parser *P) {
    if (!enter(P)) return -2;
    int v;
    if (accept(P, MT_MINUS)) v = add_node(P, MX_NEG, parse_exponent(P), -1);
    else if (at(P, MT_LBRACE)) v = parse_braced(P);
    else v = parse_postfix(P);
    P->depth--;
    return v;
}

static int parse_power(parser *P) {
    int v = parse_postfix(P);
    if (v >= 0 && accept(P, MT_POW)) v = add_node(P, MX_POW, v, parse_exponent(P));
    return v;
}

static int parse_signed(parser *P) {
    if (!enter(P)) return -2;
    int v;
    if (accept(P, MT_MINUS)) v = add_node(P, MX_NEG, parse_signed(P), -1);
    else if (accept(P, MT_PLUS)) v = parse_signed(P);
    else v = parse_power(P);
    P->depth--;
    return v;
}

static bool ends_item(mexpr_tok_kind k) {
    return k == MT_END || k == MT_COMMA || k == MT_RPAREN || k == MT_RBRACK || k == MT_RSET || k == MT_RBRACE;
}

/* Unit words up to the end of the item ("cm", "cm^2", "km/h", "square units"): consumed. */
static bool skip_units(parser *P) {
    int p = P->pos;
    while (P->toks.t[p].kind == MT_UNIT) {
        p++;
        if (P->toks.t[p].kind == MT_POW && P->toks.t[p + 1].kind == MT_NUM) p += 2;
        if (P->toks.t[p].kind == MT_DIV && P->toks.t[p + 1].kind == MT_UNIT) p++;
    }
    if (p == P->pos || !ends_item(P->toks.t[p].kind)) return false;
    P->pos = p;
    return true;
}

static int parse_term(parser *P) {
    int v = parse_signed(P);
    while (v >= 0) {
        mexpr_tok_kind k = peek(P)->kind;
        if (k == MT_MUL || k == MT_DIV) {
            P->pos++;
            v = add_node(P, k == MT_MUL ? MX_MUL : MX_DIV, v, parse_signed(P));
        } else if (k == MT_UNIT) {
            if (!skip_units(P)) return -2;
            break;
        } else if (starts_factor(k)) {
            v = add_node(P, MX_MUL, v, parse_power(P));
        } else {
            break;
        }
    }
    return v;
}

static int parse_sum(parser *P) {
    if (!enter(P)) return -2;
    int v = parse_term(P);
    while (v >= 0 && (at(P, MT_PLUS) || at(P, MT_MINUS))) {
        mexpr_kind k = peek(P)->kind == MT_PLUS ? MX_ADD : MX_SUB;
        P->pos++;
        v = add_node(P, k, v, parse_term(P));
    }
    P->depth--;
    return v;
}

static int parse_union(parser *P) {
    int v = parse_sum(P);
    if (v < 0 || !at(P, MT_CUP)) return v;
    int parts[MAX_ITEMS], n = 0;
    parts[n++] = v;
    while (accept(P, MT_CUP)) {
        if (n == MAX_ITEMS || (parts[n] = parse_sum(P)) < 0) return -2;
        n++;
    }
    return add_group(P, MX_UNION, parts, n, 0, 0);
}

static int parse_item(parser *P) {
    if (!enter(P)) return -2;
    int v = parse_union(P);
    if (v >= 0 && accept(P, MT_EQ)) v = add_node(P, MX_EQ, v, parse_union(P));
    P->depth--;
    return v;
}

bool mexpr_parse(const char *s, size_t len, mexpr *out) {
    parser state; /* about 24 KB of tokens: on the stack, no allocation per answer */
    parser *P = &state;
    P->pos = 0;
    P->depth = 0;
    P->x = out;
    out->n_nodes = out->n_kids = out->n_vars = 0;
    out->root = -1;
    bool ok = false;
    if (mexpr_lex(s, len, &P->toks) && !at(P, MT_END)) {
        int items[MAX_ITEMS];
        int n = parse_items(P, items);
        if (n == 1) out->root = items[0];
        else if (n > 1) out->root = add_group(P, MX_LIST, items, n, 0, 0);
        ok = out->root >= 0 && at(P, MT_END);
    }
    return ok;
}

void mexpr_from_value(double v, const mexpr_rat *exact, mexpr *out) {
    memset(&out->nodes[0], 0, sizeof out->nodes[0]);
    out->nodes[0].kind = MX_NUM;
    out->nodes[0].a = out->nodes[0].b = -1;
    out->nodes[0].v = v;
    if (exact) {
        out->nodes[0].exact = true;
        out->nodes[0].q = *exact;
    }
    out->n_nodes = 1;
    out->n_kids = out->n_vars = 0;
    out->root = 0;
}
