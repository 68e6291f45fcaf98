/* Tokenising math answers (mexpr_lex.h). */
#include <string.h>

#include "extract.h"
#include "mexpr_lex.h"

enum { WRAP_MAX_DEPTH = 4 };

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

static bool starts(const char *s, size_t len, size_t i, const char *lit) {
    size_t n = strlen(lit);
    return i + n <= len && !memcmp(s + i, lit, n);
}

/* w[0..n) (which may hold NUL bytes) is the literal; strnlen, not strlen:
 * the lexer asks this of every table entry. */
static bool word_is(const char *w, size_t n, const char *lit) {
    return n > 0 && lit[0] == w[0] && strnlen(lit, n + 1) == n && !memcmp(lit, w, n);
}

static int word_index(const char *const *list, const char *w, size_t n) {
    for (int i = 0; list[i]; i++)
        if (word_is(w, n, list[i])) return i;
    return -1;
}

/* In mexpr_func order. */
static const char *const FUNC_NAMES[] = {"sin", "cos", "tan", "sec", "csc", "cot", "arcsin",
                                         "arccos", "arctan", "ln", "exp", NULL};
static const char *const IGNORED_COMMANDS[] = {"left", "right", "big", "Big", "bigg", "Bigg", "bigl", "bigr", "Bigl",
                                               "Bigr", "displaystyle", "textstyle", "quad", "qquad", "circ",
                                               "degree", "limits", NULL};
static const char *const WRAPPERS[] = {"text", "textbf", "textit", "textrm", "textnormal", "mathrm", "mathbf",
                                       "mathit", "mbox", "hbox", "boxed", "fbox", NULL};
static const char *const GREEK[] = {"alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "zeta", "eta",
                                    "theta", "vartheta", "iota", "kappa", "lambda", "mu", "nu", "xi", "rho",
                                    "sigma", "tau", "upsilon", "phi", "varphi", "chi", "psi", "omega", "Gamma",
                                    "Delta", "Theta", "Lambda", "Xi", "Sigma", "Phi", "Psi", "Omega", NULL};
/* Unit words of fewer than four letters (longer words are all taken as units). */
static const char *const SHORT_UNITS[] = {"cm", "mm", "km", "in", "ft", "yd", "mi", "kg", "mg", "lb", "lbs", "oz",
                                          "hr", "hrs", "min", "sec", "mph", "kph", "sq", "cu", "ml", "day", NULL};
static const char *const MATRICES[] = {"pmatrix", "bmatrix", "matrix", NULL};

typedef struct {
    const char *s;
    size_t len;
    mexpr_toks *out;
} lexer;

static mexpr_tok *push(lexer *L, mexpr_tok_kind kind) {
    if (L->out->n >= MEXPR_MAX_TOKENS - 1) return NULL; /* one slot stays for MT_END */
    mexpr_tok *t = &L->out->t[L->out->n++];
    memset(t, 0, sizeof *t);
    t->kind = kind;
    return t;
}


/* A variable's subscript at s[i] ("_1", "_{12}", "_n"): appended to name; returns the index after it. */
static size_t subscript(const char *s, size_t len, size_t i, char *name, bool *ok) {
    if (i >= len || s[i] != '_') return i;
    size_t from = i + 1, to;
    if (from < len && s[from] == '{') {
        to = extract_group_end(s, len, from);
        if (!to) return *ok = false, i;
        from++, to--;
    } else if (from < len && (is_alpha(s[from]) || is_digit(s[from]))) {
        to = from + 1;
    } else {
        return *ok = false, i;
    }
    size_t n = strlen(name);
    if (n + 1 + (to - from) >= MEXPR_NAME_MAX) return *ok = false, i;
    name[n++] = '_';
    for (size_t k = from; k < to; k++) {
        if (!is_alpha(s[k]) && !is_digit(s[k])) return *ok = false, i;
        name[n++] = s[k];
    }
    name[n] = 0;
    return from < len && s[from - 1] == '{' ? to + 1 : to;
}

static bool lex_range(lexer *L, size_t i, size_t end, int depth);

/* A backslash command at s[i]; returns the index after it, 0 on failure. */
static size_t lex_command(lexer *L, size_t i, size_t end, int depth) {
    const char *s = L->s;
    if (i + 1 >= end) return 0;
    char ch = s[i + 1];
    if (!is_alpha(ch)) {
        mexpr_tok_kind k;
        if (strchr(",!;: %$", ch)) return i + 2; /* spacing, \% and \$ */
        if (ch == '{') k = MT_LSET;
        else if (ch == '}') k = MT_RSET;
        else if (ch == '\\') k = MT_ROWSEP;
        else if (ch == '(' || ch == ')' || ch == '[' || ch == ']') return i + 2; /* math delimiters */
        else return 0;
        return push(L, k) ? i + 2 : 0;
    }
    size_t k = i + 1;
    while (k < end && is_alpha(s[k])) k++;
    const char *w = s + i + 1;
    size_t n = k - i - 1;
    if (word_index(IGNORED_COMMANDS, w, n) >= 0) {
        /* \left. and \right. are invisible delimiters */
        if ((word_is(w, n, "left") || word_is(w, n, "right")) && k < end && s[k] == '.') k++;
        return k;
    }
    if (word_index(WRAPPERS, w, n) >= 0) {
        size_t arg = k;
        while (arg < end && is_space(s[arg])) arg++;
        size_t close;
        if (depth >= WRAP_MAX_DEPTH || arg >= end || s[arg] != '{' || !(close = extract_group_end(s, end, arg))) return 0;
        return lex_range(L, arg + 1, close - 1, depth + 1) ? close : 0;
    }
    if (word_is(w, n, "begin") || word_is(w, n, "end")) {
        size_t close;
        if (k >= end || s[k] != '{' || !(close = extract_group_end(s, end, k))) return 0;
        if (word_index(MATRICES, s + k + 1, close - k - 2) < 0) return 0;
        return push(L, w[0] == 'b' ? MT_BEGIN_MATRIX : MT_END_MATRIX) ? close : 0;
    }
    int f = word_index(FUNC_NAMES, w, n);
    mexpr_tok *t;
    if (f >= 0 || word_is(w, n, "log")) {
        if (!(t = push(L, MT_FUNC))) return 0;
        t->func = f >= 0 ? (mexpr_func)f : MX_LN;
        return k;
    }
    if (word_index(GREEK, w, n) >= 0) {
        if (!(t = push(L, MT_VAR)) || n >= MEXPR_NAME_MAX) return 0;
        memcpy(t->name, w, n);
        bool ok = true;
        k = subscript(s, end, k, t->name, &ok);
        return ok ? k : 0;
    }
    static const struct {
        const char *name;
        mexpr_tok_kind kind;
    } SIMPLE[] = {{"frac", MT_FRAC}, {"dfrac", MT_FRAC}, {"tfrac", MT_FRAC}, {"sqrt", MT_SQRT}, {"cdot", MT_MUL},
                  {"times", MT_MUL}, {"ast", MT_MUL},    {"div", MT_DIV},    {"pi", MT_PI},     {"infty", MT_INF},
                  {"cup", MT_CUP},   {"lbrace", MT_LSET}, {"rbrace", MT_RSET}};
    for (size_t q = 0; q < sizeof SIMPLE / sizeof SIMPLE[0]; q++)
        if (word_is(w, n, SIMPLE[q].name)) return push(L, SIMPLE[q].kind) ? k : 0;
    return 0; /* \pm, \le, \in, ...: not an expression this parser compares */
}

/* A number at s[i] (a digit, or '.' before a digit); returns the index after it. */
static size_t lex_number(lexer *L, size_t i, size_t end) {
    const char *s = L->s;
    size_t k = i;
    for (;;) {
        while (k < end && is_digit(s[k])) k++;
        if (starts(s, end, k, "{,}") && k + 3 < end && is_digit(s[k + 3])) k += 3;
        else break;
    }
    if (k + 1 < end && s[k] == '.' && is_digit(s[k + 1])) {
        k++;
        while (k < end && is_digit(s[k])) k++;
    }
    if (k < end && (s[k] == 'e' || s[k] == 'E')) {
        size_t x = k + 1;
        if (x < end && (s[x] == '+' || s[x] == '-')) x++;
        if (x < end && is_digit(s[x])) {
            while (x < end && is_digit(s[x])) x++;
            k = x;
        }
    }
    mexpr_tok *t = push(L, MT_NUM);
    if (!t) return 0;
    t->text = s + i;
    t->len = k - i;
    return k;
}

/* A run of letters at s[i]; returns the index after it, 0 on failure. */
static size_t lex_word(lexer *L, size_t i, size_t end) {
    const char *s = L->s;
    size_t k = i;
    while (k < end && is_alpha(s[k])) k++;
    const char *w = s + i;
    size_t n = k - i;
    mexpr_tok *t;
    if (n == 1) {
        if (w[0] == 'e' && !(k < end && s[k] == '_')) return push(L, MT_E) ? k : 0;
        if (!(t = push(L, MT_VAR))) return 0;
        t->name[0] = w[0];
        bool ok = true;
        k = subscript(s, end, k, t->name, &ok);
        return ok ? k : 0;
    }
    if (word_is(w, n, "or") || word_is(w, n, "and")) return push(L, MT_COMMA) ? k : 0;
    if (word_is(w, n, "sqrt")) return push(L, MT_SQRT) ? k : 0;
    if (word_is(w, n, "pi")) return push(L, MT_PI) ? k : 0;
    if (word_is(w, n, "inf") || word_is(w, n, "infty") || word_is(w, n, "infinity")) return push(L, MT_INF) ? k : 0;
    int f = word_index(FUNC_NAMES, w, n);
    if ((f >= 0 && f != MX_SEC) || word_is(w, n, "log")) {
        if (!(t = push(L, MT_FUNC))) return 0;
        t->func = f >= 0 ? (mexpr_func)f : MX_LN;
        return k;
    }
    if (n >= 4 || word_index(SHORT_UNITS, w, n) >= 0) return push(L, MT_UNIT) ? k : 0;
    /* "xy": a product of one-letter variables */
    for (size_t q = 0; q < n; q++) {
        if (!(t = push(L, MT_VAR))) return 0;
        t->name[0] = w[q];
    }
    return k;
}

/* One UTF-8 sequence at s[i] that stands for a token or for nothing. */
static size_t lex_unicode(lexer *L, size_t i, size_t end) {
    static const struct {
        const char *bytes;
        int kind; /* a token, or -1 for nothing */
    } MAP[] = {{"\xe2\x88\x92", MT_MINUS}, {"\xc3\x97", MT_MUL},    {"\xc2\xb7", MT_MUL},   {"\xc3\xb7", MT_DIV},
               {"\xcf\x80", MT_PI},        {"\xe2\x88\x9e", MT_INF}, {"\xe2\x88\x9a", MT_SQRT}, {"\xe2\x88\xaa", MT_CUP},
               {"\xc2\xb0", -1},           {"\xc2\xa0", -1},         {"\xe2\x80\x89", -1},  {"\xe2\x80\xaf", -1}};
    for (size_t q = 0; q < sizeof MAP / sizeof MAP[0]; q++)
        if (starts(L->s, end, i, MAP[q].bytes)) {
            if (MAP[q].kind >= 0 && !push(L, (mexpr_tok_kind)MAP[q].kind)) return 0;
            return i + strlen(MAP[q].bytes);
        }
    return 0;
}

static bool only_layout_after(const char *s, size_t i, size_t end) {
    for (; i < end; i++)
        if (!is_space(s[i]) && s[i] != '$') return false;
    return true;
}

static bool lex_range(lexer *L, size_t i, size_t end, int depth) {
    const char *s = L->s;
    while (i < end) {
        char c = s[i];
        size_t next = 0;
        const char *one = "+-*/!()[]{},=&";
        static const mexpr_tok_kind ONE[] = {MT_PLUS,   MT_MINUS,  MT_MUL,    MT_DIV,    MT_BANG,
                                             MT_LPAREN, MT_RPAREN, MT_LBRACK, MT_RBRACK, MT_LBRACE,
                                             MT_RBRACE, MT_COMMA,  MT_EQ,     MT_AMP};
        const char *at;
        if (is_space(c) || c == '$' || c == '%') next = i + 1;
        else if (c == '\\') next = lex_command(L, i, end, depth);
        else if (is_digit(c) || (c == '.' && i + 1 < end && is_digit(s[i + 1]))) next = lex_number(L, i, end);
        else if (is_alpha(c)) next = lex_word(L, i, end);
        else if (c == '^') {
            if (starts(s, end, i, "^\\circ")) next = i + 6;
            else if (starts(s, end, i, "^{\\circ}")) next = i + 8;
            else next = push(L, MT_POW) ? i + 1 : 0;
        } else if (c == '.' && only_layout_after(s, i + 1, end)) next = end; /* a closing full stop */
        else if (c != 0 && (at = strchr(one, c))) next = push(L, ONE[at - one]) ? i + 1 : 0;
        else if ((unsigned char)c >= 0x80) next = lex_unicode(L, i, end);
        if (!next) return false;
        i = next;
    }
    return true;
}

bool mexpr_lex(const char *s, size_t len, mexpr_toks *out) {
    out->n = 0;
    if (len > MEXPR_MAX_INPUT) return false;
    lexer L = {s, len, out};
    if (!lex_range(&L, 0, len, 0)) return false;
    memset(&out->t[out->n], 0, sizeof out->t[0]);
    out->t[out->n++].kind = MT_END;
    return true;
}
