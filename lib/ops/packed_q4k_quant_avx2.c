/* The Q4_K quantizer on AVX2 with FMA (packed_q4k_quant.c's blocks): four
 * sub-blocks of a super-block side by side, lane l of every vector the
 * portable code's double for sub-block 4 h + l of half h (the fit:
 * packed_q4k_quant_lanes.h, the AVX-512 path's too, its masks here lanes
 * of all ones or all zeros and its picks blends), so every lane's result
 * is the portable one bit for bit. The two halves run one after the other,
 * the second only where the super-block has more than four sub-blocks. */
#include "packed_q4k_kernels.h"

#if Q4KW_X86
#include <immintrin.h>
#include <string.h>

#define TARGET __attribute__((target("avx2,fma")))
#define INLINE static inline __attribute__((always_inline, target("avx2,fma")))
#define NEAREST (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

enum { LANES = 4 }; /* sub-blocks side by side */

typedef __m256d vec;
typedef __m256d lanes; /* each lane all ones or all zeros */

/* packed_q4k_quant_lanes.h's operations */
INLINE vec v_set1(double v) { return _mm256_set1_pd(v); }
INLINE vec v_zero(void) { return _mm256_setzero_pd(); }
INLINE vec v_add(vec a, vec b) { return _mm256_add_pd(a, b); }
INLINE vec v_sub(vec a, vec b) { return _mm256_sub_pd(a, b); }
INLINE vec v_mul(vec a, vec b) { return _mm256_mul_pd(a, b); }
INLINE vec v_div(vec a, vec b) { return _mm256_div_pd(a, b); }
INLINE vec v_fmadd(vec a, vec b, vec c) { return _mm256_fmadd_pd(a, b, c); }
INLINE vec v_min(vec a, vec b) { return _mm256_min_pd(a, b); }
INLINE vec v_max(vec a, vec b) { return _mm256_max_pd(a, b); }
INLINE vec v_nearest(vec v) { return _mm256_round_pd(v, NEAREST); }
INLINE vec v_negate(vec v) { return _mm256_xor_pd(v, _mm256_set1_pd(-0.0)); }
INLINE lanes v_greater(vec a, vec b) { return _mm256_cmp_pd(a, b, _CMP_GT_OQ); }
INLINE lanes v_less(vec a, vec b) { return _mm256_cmp_pd(a, b, _CMP_LT_OQ); }
INLINE lanes v_both(lanes a, lanes b) { return _mm256_and_pd(a, b); }
INLINE vec v_pick(lanes m, vec yes, vec no) { return _mm256_blendv_pd(no, yes, m); }
INLINE vec v_keep(lanes m, vec v) { return _mm256_and_pd(m, v); }

#include "packed_q4k_quant_lanes.h"

/* Each code of half h's sub-blocks the nearest under the rounded scales:
 * ((double)x + ms) / ds, ds = d sc and ms = dmin mn in float; words[g][l]
 * the codes of k = 8 g .. 8 g + 7 of lane l. */
INLINE void codes(const __m256d *xt, const q4kw_super *out, int h, int subs, uint32_t words[4][LANES]) {
    double ds[LANES], ms[LANES];
    for (int l = 0; l < LANES; l++) {
        int s = LANES * h + l;
        ds[l] = s < subs ? out->d * (float)out->sc[s] : 0.0f, ms[l] = s < subs ? out->dmin * (float)out->mn[s] : 0.0f;
    }
    const __m256d zero = _mm256_setzero_pd(), top = _mm256_set1_pd(15);
    __m256d dsv = _mm256_loadu_pd(ds), msv = _mm256_loadu_pd(ms), pos = v_greater(dsv, zero);
    for (int g = 0; g < 4; g++) {
        __m128i word = _mm_setzero_si128();
        for (int t = 0; t < 8; t++) {
            __m256d v = _mm256_round_pd(_mm256_div_pd(_mm256_add_pd(xt[8 * g + t], msv), dsv), NEAREST);
            /* v < 0 ? 0 : v > 15 ? 15 : v: max and min take their second operand on a tie (-0 becomes +0) */
            __m128i c = _mm256_cvtpd_epi32(_mm256_min_pd(_mm256_max_pd(v_keep(pos, v), zero), top));
            word = _mm_or_si128(word, _mm_slli_epi32(c, 4 * t));
        }
        _mm_storeu_si128((__m128i *)words[g], word);
    }
}

TARGET void q4kw_quantize_avx2(const float *x, int subs, q4kw_super *out) {
    float buf[Q4KW_K_SUPER] __attribute__((aligned(32)));
    memcpy(buf, x, sizeof(float) * Q4KW_K_SUB * (size_t)subs);
    memset(buf + Q4KW_K_SUB * subs, 0, sizeof(float) * Q4KW_K_SUB * (size_t)(Q4KW_SUBS - subs));
    int halves = (subs + LANES - 1) / LANES;
    /* xt[h][i] lane l: value i of sub-block 4 h + l */
    const __m128i at = _mm_setr_epi32(0, 32, 64, 96);
    __m256d xt[2][Q4KW_K_SUB];
    double as[Q4KW_SUBS] = {0}, bs[Q4KW_SUBS] = {0};
    for (int h = 0; h < halves; h++) {
        for (int i = 0; i < Q4KW_K_SUB; i++)
            xt[h][i] = _mm256_cvtps_pd(_mm_i32gather_ps(buf + LANES * Q4KW_K_SUB * h + i, at, 4));
        __m256d a, b;
        fit_subs(xt[h], &a, &b);
        _mm256_storeu_pd(as + LANES * h, a), _mm256_storeu_pd(bs + LANES * h, b);
    }
    q4kw_scales(as, bs, subs, out);
    for (int h = 0; h < halves; h++) {
        uint32_t words[4][LANES];
        codes(xt[h], out, h, subs, words);
        for (int l = 0; l < LANES && LANES * h + l < subs; l++)
            for (int g = 0; g < 4; g++) out->code[LANES * h + l][g] = words[g][l];
    }
}
#endif
