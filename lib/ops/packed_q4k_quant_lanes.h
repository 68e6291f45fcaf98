/* The Q4_K quantizer's fit on SIMD lanes, written once for its AVX-512 and
 * AVX2 paths (packed_q4k_quant_avx512.c, packed_q4k_quant_avx2.c): each
 * lane a sub-block, every lane's double the portable code's
 * (packed_q4k_quant.c's quantize_sub and fit) by the same operations in
 * the same order: sums over the 32 values in order, a fused multiply-add
 * only where the product is exact, round to nearest even as nearbyint, min
 * and max as its comparisons. Three of the 21 candidate codings run at
 * once: their chains of sums are independent, which the core overlaps; the
 * best is then taken in the portable code's order. Internal to lib/ops.
 *
 * The includer defines first INLINE (static, always inlined, for its
 * target), the types vec (a double a lane) and lanes (a lane mask), and:
 * v_set1, v_zero, v_add, v_sub, v_mul, v_div, v_fmadd (a b + c), v_min and
 * v_max (a < b ? a : b, a > b ? a : b), v_nearest (round to nearest even),
 * v_negate (the sign flipped), v_greater and v_less (ordered comparisons),
 * v_both (a mask's and), v_pick (m ? yes : no) and v_keep (m ? v : +0). */
#ifndef GRPO_OPS_PACKED_Q4K_QUANT_LANES_H
#define GRPO_OPS_PACKED_Q4K_QUANT_LANES_H

#include <math.h>

#include "packed_q4k_kernels.h"

/* fit()'s (a, b) of each lane from the sums over its codes q. */
INLINE void solve(vec sq, vec sqq, vec sx, vec sxq, vec *a, vec *b) {
    const vec n = v_set1(Q4KW_K_SUB), zero = v_zero();
    vec det = v_sub(v_mul(n, sqq), v_mul(sq, sq));
    lanes pos = v_greater(det, zero);
    vec mean = v_div(v_negate(sx), n); /* -sx / n */
    vec ca = v_keep(pos, v_div(v_sub(v_mul(n, sxq), v_mul(sq, sx)), det));
    vec cb = v_pick(pos, v_div(v_sub(v_mul(sq, ca), sx), n), mean);
    lanes bneg = v_less(cb, zero);
    cb = v_pick(bneg, zero, cb);
    ca = v_pick(bneg, v_keep(v_greater(sqq, zero), v_div(sxq, sqq)), ca);
    lanes aneg = v_less(ca, zero);
    *a = v_pick(aneg, zero, ca);
    *b = v_pick(aneg, v_keep(v_greater(mean, zero), mean), cb);
}

enum { TOGETHER = 3 }; /* candidates side by side: 21 = 7 x 3 */

/* Candidates t .. t + 2 side by side (independent chains of sums for the
 * core to overlap): each lane's codes, fit() and squared error. */
INLINE void candidates(const vec *xt, const vec *xs, vec sx, vec range, int t, vec *a, vec *b, vec *err) {
    const vec zero = v_zero(), top = v_set1(15);
    vec q[TOGETHER][Q4KW_K_SUB], sq[TOGETHER], sqq[TOGETHER], sxq[TOGETHER], iscale[TOGETHER];
#pragma GCC unroll 3
    for (int c = 0; c < TOGETHER; c++) sq[c] = sqq[c] = sxq[c] = zero, iscale[c] = v_div(v_set1(15 + 0.1 * (t + c)), range);
    for (int i = 0; i < Q4KW_K_SUB; i++)
#pragma GCC unroll 3
        for (int c = 0; c < TOGETHER; c++) {
            /* x - lo >= 0 and iscale > 0 (where live): no code below 0 to clamp */
            q[c][i] = v_min(v_nearest(v_mul(xs[i], iscale[c])), top);
            /* q q and x q are exact in double: a fused add rounds as the sum does */
            sq[c] = v_add(sq[c], q[c][i]);
            sqq[c] = v_fmadd(q[c][i], q[c][i], sqq[c]);
            sxq[c] = v_fmadd(xt[i], q[c][i], sxq[c]);
        }
#pragma GCC unroll 3
    for (int c = 0; c < TOGETHER; c++) solve(sq[c], sqq[c], sx, sxq[c], &a[c], &b[c]), err[c] = zero;
    for (int i = 0; i < Q4KW_K_SUB; i++)
#pragma GCC unroll 3
        for (int c = 0; c < TOGETHER; c++) {
            vec e = v_sub(v_sub(v_mul(a[c], q[c][i]), b[c]), xt[i]);
            err[c] = v_add(err[c], v_mul(e, e));
        }
}

/* quantize_sub() of each lane (xt[i]: value i of each lane's sub-block):
 * the best (a, b) over the 21 candidates, the first of the least error in
 * the portable code's order. */
INLINE void fit_subs(const vec *xt, vec *a, vec *b) {
    vec lo = v_zero(), hi = xt[0], sx = v_zero(), xs[Q4KW_K_SUB];
    for (int i = 0; i < Q4KW_K_SUB; i++) lo = v_min(xt[i], lo), hi = v_max(xt[i], hi), sx = v_add(sx, xt[i]);
    for (int i = 0; i < Q4KW_K_SUB; i++) xs[i] = v_sub(xt[i], lo);
    lanes live = v_greater(hi, lo); /* else a = 0, b = -lo */
    vec range = v_sub(hi, lo), best = v_set1(INFINITY);
    *a = v_zero(), *b = v_negate(lo);
    for (int t = -10; t <= 10; t += TOGETHER) {
        vec ca[TOGETHER], cb[TOGETHER], err[TOGETHER];
        candidates(xt, xs, sx, range, t, ca, cb, err);
        for (int c = 0; c < TOGETHER; c++) { /* in order: the first of the least error */
            lanes better = v_both(live, v_less(err[c], best));
            best = v_pick(better, err[c], best);
            *a = v_pick(better, ca[c], *a), *b = v_pick(better, cb[c], *b);
        }
    }
}

#endif
