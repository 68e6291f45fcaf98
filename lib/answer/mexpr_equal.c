/* Comparing expression trees by value (rules in mexpr.h). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "mexpr.h"

/* Two irrational values computed two ways differ in their last bits: they
 * are compared with at least this relative tolerance, whatever --answer-tol. */
#define IRRATIONAL_TOL_MIN 1e-9
#define POINT_LOW 0.5
#define POINT_SPAN 3.0
#define POINT_SEED 0x9e3779b97f4a7c15ULL

static bool close_enough(double a, double b, double tol) {
    if (!isfinite(a) || !isfinite(b)) return false;
    double scale = fabs(b) > 1 ? fabs(b) : 1;
    return fabs(a - b) <= tol * scale;
}

/* splitmix64: the points come from a fixed seed, so a verdict never changes between runs. */
static double next_point(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return POINT_LOW + POINT_SPAN * (double)(z >> 11) / 9007199254740992.0;
}

/* map[i]: gold's index of pred's variable i, when both use the same names. */
static bool same_variables(const mexpr *p, unsigned pm, const mexpr *g, unsigned gm, int *map) {
    unsigned matched = 0;
    for (int i = 0; i < p->n_vars; i++) {
        map[i] = -1;
        if (!(pm & (1u << i))) continue;
        for (int j = 0; j < g->n_vars; j++)
            if ((gm & (1u << j)) && !strcmp(p->vars[i], g->vars[j])) map[i] = j;
        if (map[i] < 0) return false;
        matched |= 1u << map[i];
    }
    return matched == gm;
}

/* +1 for \infty, -1 for -\infty, 0 for anything else: a value too large for
 * a double is no infinity (10^{400} is not 10^{401}). */
static int written_infinity(const mexpr *x, int i) {
    const mexpr_node *nd = &x->nodes[i];
    if (nd->kind == MX_INF) return 1;
    if (nd->kind == MX_NEG && x->nodes[nd->a].kind == MX_INF) return -1;
    return 0;
}

static bool scalar_equal(const mexpr *p, int pn, const mexpr *g, int gn, double tol) {
    unsigned pm = mexpr_var_mask(p, pn), gm = mexpr_var_mask(g, gn);
    int map[MEXPR_MAX_VARS];
    if (!same_variables(p, pm, g, gm, map)) return false;
    double loose = tol > IRRATIONAL_TOL_MIN ? tol : IRRATIONAL_TOL_MIN;
    if (!gm) {
        mexpr_rat a, b;
        if (mexpr_eval_rational(p, pn, &a) && mexpr_eval_rational(g, gn, &b)) return a.num == b.num && a.den == b.den;
        int pi = written_infinity(p, pn), gi = written_infinity(g, gn);
        if (pi || gi) return pi == gi;
        return close_enough(mexpr_eval(p, pn, NULL), mexpr_eval(g, gn, NULL), loose);
    }
    uint64_t state = POINT_SEED;
    int valid = 0;
    for (int k = 0; k < MEXPR_POINTS; k++) {
        double gv[MEXPR_MAX_VARS], pv[MEXPR_MAX_VARS];
        for (int j = 0; j < MEXPR_MAX_VARS; j++) gv[j] = next_point(&state);
        for (int i = 0; i < p->n_vars; i++) pv[i] = map[i] >= 0 ? gv[map[i]] : 0;
        double a = mexpr_eval(p, pn, pv), b = mexpr_eval(g, gn, gv);
        if (!isfinite(a) || !isfinite(b)) continue;
        if (!close_enough(a, b, loose)) return false;
        valid++;
    }
    return valid * 2 >= MEXPR_POINTS;
}

/* Every pred kid matched to a distinct equal gold kid. */
static bool multiset_equal(const mexpr *p, const mexpr_node *P, const mexpr *g, const mexpr_node *G, double tol) {
    if (P->n != G->n) return false;
    bool used[MEXPR_MAX_NODES] = {false};
    for (int i = 0; i < P->n; i++) {
        int found = -1;
        for (int j = 0; j < G->n && found < 0; j++)
            if (!used[j] && mexpr_equal(p, p->kids[P->first + i], g, g->kids[G->first + j], tol)) found = j;
        if (found < 0) return false;
        used[found] = true;
    }
    return true;
}

static bool ordered_equal(const mexpr *p, const mexpr_node *P, const mexpr *g, const mexpr_node *G, double tol) {
    if (P->n != G->n) return false;
    for (int i = 0; i < P->n; i++)
        if (!mexpr_equal(p, p->kids[P->first + i], g, g->kids[G->first + i], tol)) return false;
    return true;
}

static bool is_ordered_list(const mexpr_node *n) { return n->kind == MX_LIST && (n->open == '(' || n->open == '['); }
static bool is_collection(const mexpr_node *n) {
    return n->kind == MX_LIST || n->kind == MX_UNION || n->kind == MX_MATRIX;
}

bool mexpr_equal(const mexpr *p, int pn, const mexpr *g, int gn, double tol) {
    if (pn < 0 || pn >= p->n_nodes || gn < 0 || gn >= g->n_nodes) return false;
    const mexpr_node *P = &p->nodes[pn], *G = &g->nodes[gn];
    if (P->kind == MX_EQ && G->kind == MX_EQ)
        return mexpr_equal(p, P->a, g, G->a, tol) && mexpr_equal(p, P->b, g, G->b, tol);
    /* "x = 5" against "5", either way round */
    if (P->kind == MX_EQ) return p->nodes[P->a].kind == MX_VAR && mexpr_equal(p, P->b, g, gn, tol);
    if (G->kind == MX_EQ) return g->nodes[G->a].kind == MX_VAR && mexpr_equal(p, pn, g, G->b, tol);
    if (P->kind == MX_LIST && G->kind == MX_LIST) {
        if (is_ordered_list(P) != is_ordered_list(G)) return false;
        if (!is_ordered_list(P)) return multiset_equal(p, P, g, G, tol);
        return P->open == G->open && P->close == G->close && ordered_equal(p, P, g, G, tol);
    }
    if (P->kind == MX_UNION && G->kind == MX_UNION) return multiset_equal(p, P, g, G, tol);
    if (P->kind == MX_MATRIX && G->kind == MX_MATRIX) return P->cols == G->cols && ordered_equal(p, P, g, G, tol);
    if (is_collection(P) || is_collection(G)) return false;
    return scalar_equal(p, pn, g, gn, tol);
}
