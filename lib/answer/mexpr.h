/* Math answers as expressions: the LaTeX and plain text that final answers
 * are written in (MATH's \boxed{} contents, a model's "5/6"), parsed into a
 * small tree and compared by value, so that 2\sqrt3, \sqrt{12} and
 * 2\sqrt{3} are one answer and (2,3) and (3,2) are two.
 *
 * What parses (anything else is no expression, and the caller falls back to
 * the text rules of match.h):
 *   numbers 12, 0.5, .5, 1.5e3, 1{,}000 (a LaTeX thousands group);
 *   \frac \dfrac \tfrac {A}{B} (and \frac12), \sqrt{x}, \sqrt[n]{x}, ^ (x^2,
 *   x^{a+b}), + - * / \cdot \times \div, implicit products (2x, 2\sqrt3,
 *   (x+1)(x-1)), n!, \pi, e, \infty, single-letter and Greek variables with
 *   subscripts (x_1, \theta), \sin \cos \tan \sec \csc \cot \arcsin \arccos
 *   \arctan \ln \log \exp (\log is the natural logarithm);
 *   \left \right \big and spacing commands, $, \%, degrees (^\circ, \circ,
 *   \degree, the degree sign) are ignored; \text{...} \mathrm{...} and the
 *   like are read as their content; known unit words at the end (cm,
 *   inches, dollars, units, any word of 4+ letters) are dropped;
 *   "or" and "and" separate like commas;
 *   a comma list: bare (1, 2, 3) it is unordered, in ( ) or [ ] with mixed
 *   brackets allowed it is ordered and keeps its brackets (tuples,
 *   intervals), in \{ \} it is a set (unordered); A \cup B; x = rhs;
 *   \begin{pmatrix|bmatrix|matrix} a & b \\ c & d \end{...}.
 * Bounds: MEXPR_MAX_INPUT bytes, MEXPR_MAX_TOKENS tokens, MEXPR_MAX_NODES
 * nodes, MEXPR_MAX_DEPTH levels of recursion (about 40 nested groups),
 * MEXPR_MAX_VARS distinct variables;
 * beyond them it is no expression. Linear time in the input.
 *
 * Comparison (mexpr_equal), gold is the reference:
 *   - lists: ordered ones item by item with the same brackets; unordered
 *     ones (sets, bare lists) as multisets; unions as multisets of parts;
 *     matrices entry by entry with the same shape;
 *   - x = a against a value: a against the value (either side); two
 *     equations: left with left and right with right;
 *   - values without variables: exactly when both are rationals (decimals,
 *     fractions, integer powers, perfect roots), else within
 *     |a-b| <= tol * max(1, |b|); infinities by sign;
 *   - with variables: both must use the same variables; then they must agree
 *     within the same tolerance at MEXPR_POINTS points drawn from a fixed
 *     seed in [0.5, 3.5) (points where either side is not finite are
 *     skipped; at least half must remain). */
#ifndef GRPO_ANSWER_MEXPR_H
#define GRPO_ANSWER_MEXPR_H

#include <stdbool.h>
#include <stddef.h>

enum {
    MEXPR_MAX_INPUT = 2048,
    MEXPR_MAX_TOKENS = 512,
    MEXPR_MAX_NODES = 512,
    MEXPR_MAX_DEPTH = 128, /* levels of the parser's recursion: a group costs about three */
    MEXPR_MAX_VARS = 8,
    MEXPR_NAME_MAX = 16,
    MEXPR_POINTS = 8,
};

typedef enum {
    MX_NUM,    /* a number: q exact when exact, else v */
    MX_PI,
    MX_E,
    MX_INF,
    MX_VAR,    /* var: an index into mexpr.vars */
    MX_NEG,    /* -a */
    MX_ADD,    /* a + b */
    MX_SUB,    /* a - b */
    MX_MUL,    /* a * b */
    MX_DIV,    /* a / b */
    MX_POW,    /* a ^ b */
    MX_ROOT,   /* the b-th root of a */
    MX_FUNC,   /* func(a) */
    MX_FACT,   /* a! */
    MX_LIST,   /* kids[first .. first+n): open/close brackets, 0 for a bare list, '{' '}' a set */
    MX_UNION,  /* kids: the parts of A \cup B \cup ... */
    MX_MATRIX, /* kids: rows * cols entries, row-major */
    MX_EQ,     /* a = b */
} mexpr_kind;

typedef enum {
    MX_SIN, MX_COS, MX_TAN, MX_SEC, MX_CSC, MX_COT, MX_ASIN, MX_ACOS, MX_ATAN, MX_LN, MX_EXP, MX_N_FUNCS
} mexpr_func;

typedef struct {
    long long num, den; /* den > 0, lowest terms */
} mexpr_rat;

typedef struct {
    mexpr_kind kind;
    int a, b;        /* children, -1 when absent */
    int first, n;    /* MX_LIST / MX_UNION / MX_MATRIX: kids[first..first+n) */
    int cols;        /* MX_MATRIX */
    int var;         /* MX_VAR */
    mexpr_func func; /* MX_FUNC */
    char open, close;
    bool exact;      /* MX_NUM: q holds the value */
    mexpr_rat q;
    double v;        /* MX_NUM */
} mexpr_node;

typedef struct {
    mexpr_node nodes[MEXPR_MAX_NODES];
    int kids[MEXPR_MAX_NODES];
    char vars[MEXPR_MAX_VARS][MEXPR_NAME_MAX];
    int n_nodes, n_kids, n_vars;
    int root;
} mexpr;

/* Parses s[0..len) into *out; false when it is no expression (above). */
bool mexpr_parse(const char *s, size_t len, mexpr *out);

/* *out as the single number v, a value the caller read itself: exact with
 * the rational *exact, or not exact when that is NULL. */
void mexpr_from_value(double v, const mexpr_rat *exact, mexpr *out);

/* Whether pred's node pn equals gold's node gn by the rules above. */
bool mexpr_equal(const mexpr *pred, int pn, const mexpr *gold, int gn, double tol);

/* The value of node i at the variables' values vals (mexpr.vars order);
 * NaN where undefined. */
double mexpr_eval(const mexpr *x, int i, const double *vals);
/* The exact rational value of node i; false when it is not one (an
 * irrational, a variable, an overflow of 64-bit terms). */
bool mexpr_eval_rational(const mexpr *x, int i, mexpr_rat *out);
/* num/den in lowest terms with den > 0 into *out; false when den is 0 or a
 * term does not fit in 64 bits. */
bool mexpr_rat_make(long long num, long long den, mexpr_rat *out);
/* The set of variables node i uses, as a bit mask over mexpr.vars. */
unsigned mexpr_var_mask(const mexpr *x, int i);

#endif
