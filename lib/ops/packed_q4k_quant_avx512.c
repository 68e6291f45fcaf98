/* The Q4_K quantizer on AVX-512F (packed_q4k_quant.c's blocks): the eight
 * sub-blocks of a super-block side by side, lane s of every vector the
 * portable code's double for sub-block s, computed by the same operations
 * in the same order (sums over the 32 values in order, a fused
 * multiply-add only where the product is exact, round to nearest even as
 * nearbyint, min and max as its comparisons), so every lane's result is
 * the portable one bit for bit. Three of the 21 candidate codings run at
 * once: their chains of sums are independent, which the core overlaps; the
 * best is then taken in the portable code's order. */
#include "packed_q4k_kernels.h"

#if Q4KW_X86
#include <immintrin.h>
#include <math.h>
#include <string.h>

#define TARGET __attribute__((target("avx512f")))
#define INLINE static inline __attribute__((always_inline, target("avx512f")))
#define NEAREST (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

/* -v, the sign flipped (-0 for +0, as C's unary minus). */
INLINE __m512d negate(__m512d v) {
    return _mm512_castsi512_pd(_mm512_xor_si512(_mm512_castpd_si512(v), _mm512_set1_epi64((long long)0x8000000000000000ULL)));
}

/* v < 0 ? 0 : v > top ? top : v, for v not NaN: max and min take their
 * second operand on a tie, so -0 becomes +0 as the conversion to a code does. */
INLINE __m512d clamp(__m512d v, double top) {
    return _mm512_min_pd(_mm512_max_pd(v, _mm512_setzero_pd()), _mm512_set1_pd(top));
}

/* fit()'s (a, b) of each lane from the sums over its codes q. */
INLINE void solve(__m512d sq, __m512d sqq, __m512d sx, __m512d sxq, __m512d *a, __m512d *b) {
    const __m512d n = _mm512_set1_pd(Q4KW_K_SUB), zero = _mm512_setzero_pd();
    __m512d det = _mm512_sub_pd(_mm512_mul_pd(n, sqq), _mm512_mul_pd(sq, sq));
    __mmask8 pos = _mm512_cmp_pd_mask(det, zero, _CMP_GT_OQ);
    __m512d mean = _mm512_div_pd(negate(sx), n); /* -sx / n */
    __m512d ca = _mm512_maskz_mov_pd(pos, _mm512_div_pd(_mm512_sub_pd(_mm512_mul_pd(n, sxq), _mm512_mul_pd(sq, sx)), det));
    __m512d cb = _mm512_mask_blend_pd(pos, mean, _mm512_div_pd(_mm512_sub_pd(_mm512_mul_pd(sq, ca), sx), n));
    __mmask8 bneg = _mm512_cmp_pd_mask(cb, zero, _CMP_LT_OQ);
    __mmask8 qpos = _mm512_cmp_pd_mask(sqq, zero, _CMP_GT_OQ);
    cb = _mm512_mask_mov_pd(cb, bneg, zero);
    ca = _mm512_mask_mov_pd(ca, bneg, _mm512_maskz_mov_pd(qpos, _mm512_div_pd(sxq, sqq)));
    __mmask8 aneg = _mm512_cmp_pd_mask(ca, zero, _CMP_LT_OQ);
    __mmask8 mpos = _mm512_cmp_pd_mask(mean, zero, _CMP_GT_OQ);
    *a = _mm512_mask_mov_pd(ca, aneg, zero);
    *b = _mm512_mask_mov_pd(cb, aneg, _mm512_maskz_mov_pd(mpos, mean));
}

enum { TOGETHER = 3 }; /* candidates side by side: 21 = 7 x 3 */

/* Candidates t .. t + 2 side by side (independent chains of sums for the
 * core to overlap): each lane's codes, fit() and squared error. */
INLINE void candidates(const __m512d *xt, const __m512d *xs, __m512d sx, __m512d range, int t, __m512d *a, __m512d *b,
                       __m512d *err) {
    const __m512d zero = _mm512_setzero_pd(), top = _mm512_set1_pd(15);
    __m512d q[TOGETHER][Q4KW_K_SUB], sq[TOGETHER], sqq[TOGETHER], sxq[TOGETHER], iscale[TOGETHER];
#pragma GCC unroll 3
    for (int c = 0; c < TOGETHER; c++)
        sq[c] = sqq[c] = sxq[c] = zero, iscale[c] = _mm512_div_pd(_mm512_set1_pd(15 + 0.1 * (t + c)), range);
    for (int i = 0; i < Q4KW_K_SUB; i++)
#pragma GCC unroll 3
        for (int c = 0; c < TOGETHER; c++) {
            /* x - lo >= 0 and iscale > 0 (where live): no code below 0 to clamp */
            q[c][i] = _mm512_min_pd(_mm512_roundscale_pd(_mm512_mul_pd(xs[i], iscale[c]), NEAREST), top);
            /* q q and x q are exact in double: a fused add rounds as the sum does */
            sq[c] = _mm512_add_pd(sq[c], q[c][i]);
            sqq[c] = _mm512_fmadd_pd(q[c][i], q[c][i], sqq[c]);
            sxq[c] = _mm512_fmadd_pd(xt[i], q[c][i], sxq[c]);
        }
#pragma GCC unroll 3
    for (int c = 0; c < TOGETHER; c++) solve(sq[c], sqq[c], sx, sxq[c], &a[c], &b[c]), err[c] = zero;
    for (int i = 0; i < Q4KW_K_SUB; i++)
#pragma GCC unroll 3
        for (int c = 0; c < TOGETHER; c++) {
            __m512d e = _mm512_sub_pd(_mm512_sub_pd(_mm512_mul_pd(a[c], q[c][i]), b[c]), xt[i]);
            err[c] = _mm512_add_pd(err[c], _mm512_mul_pd(e, e));
        }
}

/* quantize_sub() of each lane: the best (a, b) over the 21 candidates, the
 * first of the least error in the portable code's order. */
INLINE void fit_subs(const __m512d *xt, __m512d *a, __m512d *b) {
    __m512d lo = _mm512_setzero_pd(), hi = xt[0], sx = _mm512_setzero_pd(), xs[Q4KW_K_SUB];
    for (int i = 0; i < Q4KW_K_SUB; i++) {
        lo = _mm512_min_pd(xt[i], lo), hi = _mm512_max_pd(xt[i], hi);
        sx = _mm512_add_pd(sx, xt[i]);
    }
    for (int i = 0; i < Q4KW_K_SUB; i++) xs[i] = _mm512_sub_pd(xt[i], lo);
    __mmask8 live = _mm512_cmp_pd_mask(hi, lo, _CMP_GT_OQ); /* else a = 0, b = -lo */
    __m512d range = _mm512_sub_pd(hi, lo), best = _mm512_set1_pd(INFINITY);
    *a = _mm512_setzero_pd(), *b = negate(lo);
    for (int t = -10; t <= 10; t += TOGETHER) {
        __m512d ca[TOGETHER], cb[TOGETHER], err[TOGETHER];
        candidates(xt, xs, sx, range, t, ca, cb, err);
        for (int c = 0; c < TOGETHER; c++) { /* in order: the first of the least error */
            __mmask8 better = live & _mm512_cmp_pd_mask(err[c], best, _CMP_LT_OQ);
            best = _mm512_mask_mov_pd(best, better, err[c]);
            *a = _mm512_mask_mov_pd(*a, better, ca[c]), *b = _mm512_mask_mov_pd(*b, better, cb[c]);
        }
    }
}

TARGET void q4kw_quantize_avx512(const float *x, int subs, q4kw_super *out) {
    float buf[Q4KW_K_SUPER] __attribute__((aligned(64)));
    memcpy(buf, x, sizeof(float) * Q4KW_K_SUB * (size_t)subs);
    memset(buf + Q4KW_K_SUB * subs, 0, sizeof(float) * Q4KW_K_SUB * (size_t)(Q4KW_SUBS - subs));
    /* xt[i] lane s: value i of sub-block s */
    const __m256i at = _mm256_setr_epi32(0, 32, 64, 96, 128, 160, 192, 224);
    __m512d xt[Q4KW_K_SUB], a, b;
    for (int i = 0; i < Q4KW_K_SUB; i++) xt[i] = _mm512_cvtps_pd(_mm256_i32gather_ps(buf + i, at, 4));
    fit_subs(xt, &a, &b);
    double as[Q4KW_SUBS], bs[Q4KW_SUBS];
    _mm512_storeu_pd(as, a), _mm512_storeu_pd(bs, b);
    q4kw_scales(as, bs, subs, out);
    /* each code the nearest under the rounded scales: ((double)x + ms) / ds, ds = d sc and ms = dmin mn in float */
    double ds[Q4KW_SUBS], ms[Q4KW_SUBS];
    for (int s = 0; s < Q4KW_SUBS; s++)
        ds[s] = s < subs ? out->d * (float)out->sc[s] : 0.0f, ms[s] = s < subs ? out->dmin * (float)out->mn[s] : 0.0f;
    __m512d dsv = _mm512_loadu_pd(ds), msv = _mm512_loadu_pd(ms);
    __mmask8 pos = _mm512_cmp_pd_mask(dsv, _mm512_setzero_pd(), _CMP_GT_OQ);
    uint32_t words[4][Q4KW_SUBS];
    for (int g = 0; g < 4; g++) {
        __m256i word = _mm256_setzero_si256();
        for (int t = 0; t < 8; t++) {
            __m512d v = _mm512_roundscale_pd(_mm512_div_pd(_mm512_add_pd(xt[8 * g + t], msv), dsv), NEAREST);
            __m256i c = _mm512_cvtpd_epi32(clamp(_mm512_maskz_mov_pd(pos, v), 15));
            word = _mm256_or_si256(word, _mm256_slli_epi32(c, 4 * t));
        }
        _mm256_storeu_si256((__m256i *)words[g], word);
    }
    for (int s = 0; s < subs; s++)
        for (int g = 0; g < 4; g++) out->code[s][g] = words[g][s];
}
#endif
