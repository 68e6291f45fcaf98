/* The Q4_K quantizer on AVX-512F (packed_q4k_quant.c's blocks): the eight
 * sub-blocks of a super-block side by side, lane s of every vector the
 * portable code's double for sub-block s (the fit: packed_q4k_quant_lanes.h,
 * the AVX2 path's too), so every lane's result is the portable one bit
 * for bit. */
#include "packed_q4k_kernels.h"

#if Q4KW_X86
#include <immintrin.h>
#include <string.h>

#define TARGET __attribute__((target("avx512f")))
#define INLINE static inline __attribute__((always_inline, target("avx512f")))
#define NEAREST (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

typedef __m512d vec;
typedef __mmask8 lanes;

/* packed_q4k_quant_lanes.h's operations */
INLINE vec v_set1(double v) { return _mm512_set1_pd(v); }
INLINE vec v_zero(void) { return _mm512_setzero_pd(); }
INLINE vec v_add(vec a, vec b) { return _mm512_add_pd(a, b); }
INLINE vec v_sub(vec a, vec b) { return _mm512_sub_pd(a, b); }
INLINE vec v_mul(vec a, vec b) { return _mm512_mul_pd(a, b); }
INLINE vec v_div(vec a, vec b) { return _mm512_div_pd(a, b); }
INLINE vec v_fmadd(vec a, vec b, vec c) { return _mm512_fmadd_pd(a, b, c); }
INLINE vec v_min(vec a, vec b) { return _mm512_min_pd(a, b); }
INLINE vec v_max(vec a, vec b) { return _mm512_max_pd(a, b); }
INLINE vec v_nearest(vec v) { return _mm512_roundscale_pd(v, NEAREST); }
INLINE vec v_negate(vec v) {
    return _mm512_castsi512_pd(_mm512_xor_si512(_mm512_castpd_si512(v), _mm512_set1_epi64((long long)0x8000000000000000ULL)));
}
INLINE lanes v_greater(vec a, vec b) { return _mm512_cmp_pd_mask(a, b, _CMP_GT_OQ); }
INLINE lanes v_less(vec a, vec b) { return _mm512_cmp_pd_mask(a, b, _CMP_LT_OQ); }
INLINE lanes v_both(lanes a, lanes b) { return a & b; }
INLINE vec v_pick(lanes m, vec yes, vec no) { return _mm512_mask_blend_pd(m, no, yes); }
INLINE vec v_keep(lanes m, vec v) { return _mm512_maskz_mov_pd(m, v); }

#include "packed_q4k_quant_lanes.h"

/* v < 0 ? 0 : v > top ? top : v, for v not NaN: max and min take their
 * second operand on a tie, so -0 becomes +0 as the conversion to a code does. */
INLINE __m512d clamp(__m512d v, double top) {
    return _mm512_min_pd(_mm512_max_pd(v, _mm512_setzero_pd()), _mm512_set1_pd(top));
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
