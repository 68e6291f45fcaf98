/* Values of expression trees (mexpr.h): in doubles at given variable
 * values, and exactly as 64-bit rationals where the value is one. */
#include <limits.h>
#include <math.h>

#include "mexpr.h"

enum { FACTORIAL_MAX = 170, RAT_POW_MAX = 64 };

static double eval_func(mexpr_func f, double a) {
    switch (f) {
    case MX_SIN: return sin(a);
    case MX_COS: return cos(a);
    case MX_TAN: return tan(a);
    case MX_SEC: return 1 / cos(a);
    case MX_CSC: return 1 / sin(a);
    case MX_COT: return 1 / tan(a);
    case MX_ASIN: return asin(a);
    case MX_ACOS: return acos(a);
    case MX_ATAN: return atan(a);
    case MX_LN: return log(a);
    case MX_EXP: return exp(a);
    case MX_N_FUNCS: break;
    }
    return NAN;
}

static double eval_root(double a, double n) {
    if (!(n != 0)) return NAN;
    /* odd roots of negatives are real: \sqrt[3]{-8} = -2 */
    if (a < 0 && n == floor(n) && fmod(n, 2) != 0) return -pow(-a, 1 / n);
    return pow(a, 1 / n);
}

double mexpr_eval(const mexpr *x, int i, const double *vals) {
    if (i < 0 || i >= x->n_nodes) return NAN;
    const mexpr_node *nd = &x->nodes[i];
    double a, b;
    switch (nd->kind) {
    case MX_NUM: return nd->exact ? (double)nd->q.num / (double)nd->q.den : nd->v;
    case MX_PI: return M_PI;
    case MX_E: return M_E;
    case MX_INF: return INFINITY;
    case MX_VAR: return vals ? vals[nd->var] : NAN;
    case MX_NEG: return -mexpr_eval(x, nd->a, vals);
    case MX_ADD: return mexpr_eval(x, nd->a, vals) + mexpr_eval(x, nd->b, vals);
    case MX_SUB: return mexpr_eval(x, nd->a, vals) - mexpr_eval(x, nd->b, vals);
    case MX_MUL: return mexpr_eval(x, nd->a, vals) * mexpr_eval(x, nd->b, vals);
    case MX_DIV:
        b = mexpr_eval(x, nd->b, vals);
        return b == 0 ? NAN : mexpr_eval(x, nd->a, vals) / b;
    case MX_POW: return pow(mexpr_eval(x, nd->a, vals), mexpr_eval(x, nd->b, vals));
    case MX_ROOT: return eval_root(mexpr_eval(x, nd->a, vals), mexpr_eval(x, nd->b, vals));
    case MX_FUNC: return eval_func(nd->func, mexpr_eval(x, nd->a, vals));
    case MX_FACT:
        a = mexpr_eval(x, nd->a, vals);
        return a >= 0 && a <= FACTORIAL_MAX && a == floor(a) ? tgamma(a + 1) : NAN;
    default: return NAN; /* lists, unions, matrices, equations have no single value */
    }
}

static long long gcd_ll(long long a, long long b) {
    if (a < 0) a = -a;
    if (b < 0) b = -b;
    while (b) {
        long long t = a % b;
        a = b;
        b = t;
    }
    return a;
}

bool mexpr_rat_make(long long num, long long den, mexpr_rat *out) {
    if (den == 0 || num == LLONG_MIN || den == LLONG_MIN) return false;
    if (den < 0) num = -num, den = -den;
    long long g = gcd_ll(num, den);
    if (g == 0) g = 1;
    out->num = num / g;
    out->den = den / g;
    return true;
}

static bool rat_add(mexpr_rat a, mexpr_rat b, bool subtract, mexpr_rat *out) {
    long long x, y, d;
    if (subtract) {
        if (b.num == LLONG_MIN) return false;
        b.num = -b.num;
    }
    if (__builtin_mul_overflow(a.num, b.den, &x) || __builtin_mul_overflow(b.num, a.den, &y) ||
        __builtin_add_overflow(x, y, &x) || __builtin_mul_overflow(a.den, b.den, &d))
        return false;
    return mexpr_rat_make(x, d, out);
}

static bool rat_mul(mexpr_rat a, mexpr_rat b, mexpr_rat *out) {
    long long n, d;
    if (__builtin_mul_overflow(a.num, b.num, &n) || __builtin_mul_overflow(a.den, b.den, &d)) return false;
    return mexpr_rat_make(n, d, out);
}

/* The integer k-th root of v >= 0 when v is a perfect k-th power. */
static bool int_root(long long v, long long k, long long *out) {
    double guess = floor(pow((double)v, 1.0 / (double)k) + 0.5);
    for (long long c = (long long)guess - 1; c <= (long long)guess + 1; c++) {
        if (c < 0) continue;
        long long p = 1;
        bool over = false;
        for (long long j = 0; j < k && !over; j++) over = __builtin_mul_overflow(p, c, &p);
        if (!over && p == v) {
            *out = c;
            return true;
        }
    }
    return false;
}

static bool rat_pow(mexpr_rat a, mexpr_rat e, mexpr_rat *out) {
    if (e.den != 1 || e.num > RAT_POW_MAX || e.num < -RAT_POW_MAX) return false;
    long long k = e.num < 0 ? -e.num : e.num;
    mexpr_rat r = {1, 1};
    for (long long j = 0; j < k; j++)
        if (!rat_mul(r, a, &r)) return false;
    if (e.num < 0) return r.num != 0 && mexpr_rat_make(r.den, r.num, out);
    *out = r;
    return true;
}

static bool rat_root(mexpr_rat a, mexpr_rat n, mexpr_rat *out) {
    if (n.den != 1 || n.num < 1 || n.num > RAT_POW_MAX) return false;
    bool negative = a.num < 0;
    if (negative && n.num % 2 == 0) return false;
    long long rn, rd;
    if (!int_root(negative ? -a.num : a.num, n.num, &rn) || !int_root(a.den, n.num, &rd)) return false;
    return mexpr_rat_make(negative ? -rn : rn, rd, out);
}

bool mexpr_eval_rational(const mexpr *x, int i, mexpr_rat *out) {
    if (i < 0 || i >= x->n_nodes) return false;
    const mexpr_node *nd = &x->nodes[i];
    mexpr_rat a, b;
    switch (nd->kind) {
    case MX_NUM:
        *out = nd->q;
        return nd->exact;
    case MX_NEG:
        if (!mexpr_eval_rational(x, nd->a, &a) || a.num == LLONG_MIN) return false;
        *out = (mexpr_rat){-a.num, a.den};
        return true;
    case MX_ADD:
    case MX_SUB:
        return mexpr_eval_rational(x, nd->a, &a) && mexpr_eval_rational(x, nd->b, &b) &&
               rat_add(a, b, nd->kind == MX_SUB, out);
    case MX_MUL: return mexpr_eval_rational(x, nd->a, &a) && mexpr_eval_rational(x, nd->b, &b) && rat_mul(a, b, out);
    case MX_DIV:
        return mexpr_eval_rational(x, nd->a, &a) && mexpr_eval_rational(x, nd->b, &b) && b.num != 0 &&
               rat_mul(a, (mexpr_rat){b.den, b.num}, &a) && mexpr_rat_make(a.num, a.den, out);
    case MX_POW: return mexpr_eval_rational(x, nd->a, &a) && mexpr_eval_rational(x, nd->b, &b) && rat_pow(a, b, out);
    case MX_ROOT: return mexpr_eval_rational(x, nd->a, &a) && mexpr_eval_rational(x, nd->b, &b) && rat_root(a, b, out);
    case MX_FACT:
        if (!mexpr_eval_rational(x, nd->a, &a) || a.den != 1 || a.num < 0 || a.num > 20) return false;
        out->num = 1, out->den = 1;
        for (long long k = 2; k <= a.num; k++) out->num *= k;
        return true;
    default: return false;
    }
}

unsigned mexpr_var_mask(const mexpr *x, int i) {
    if (i < 0 || i >= x->n_nodes) return 0;
    const mexpr_node *nd = &x->nodes[i];
    if (nd->kind == MX_VAR) return 1u << nd->var;
    unsigned m = mexpr_var_mask(x, nd->a) | mexpr_var_mask(x, nd->b);
    if (nd->kind == MX_LIST || nd->kind == MX_UNION || nd->kind == MX_MATRIX)
        for (int k = 0; k < nd->n; k++) m |= mexpr_var_mask(x, x->kids[nd->first + k]);
    return m;
}
