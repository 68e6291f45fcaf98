/* What the decode-row kernels (attention_bf16.c, attention_f32.c) share: the
 * fixed tree that sums a score's 16 lanes, so that their portable and SIMD
 * codes add the same pairs in the same order, the softmax of each head's
 * scores, and the AVX2 weighted sum of values. Internal to lib/ops. */
#ifndef GRPO_ATTENTION_LANES_H
#define GRPO_ATTENTION_LANES_H

#include <stddef.h>

#include "ops.h"

enum { LANES = 16 };

/* The 16 lane sums to one, in the fixed order: l + (l+8), then + 4, + 2, + 1. */
static inline float sum16(const float a[LANES]) {
    float b[8], c[4], d[2];
    for (int l = 0; l < 8; l++) b[l] = a[l] + a[l + 8];
    for (int l = 0; l < 4; l++) c[l] = b[l] + b[l + 4];
    for (int l = 0; l < 2; l++) d[l] = c[l] + c[l + 2];
    return d[0] + d[1];
}

/* Each of the G heads' T scores (sc[G, T]) to probabilities, its
 * log-sum-exp to lse[j] (optional). */
static inline void softmax_heads(float *sc, float *lse, int T, int G) {
    for (int j = 0; j < G; j++) {
        float l = softmax_row(sc + (size_t)j * T, T);
        if (lse) lse[j] = l;
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <stdint.h>
#define ATTN_X86 1
#define ATTN_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define ATTN_INLINE_AVX2 static inline __attribute__((always_inline, target("avx2,fma")))

/* sum16 of the lanes a[0..7] (lo) and a[8..15] (hi), its pairs in its order. */
ATTN_INLINE_AVX2 float sum16_avx2(__m256 lo, __m256 hi) {
    __m256 b = _mm256_add_ps(lo, hi);                                            /* l + (l+8) */
    __m128 c = _mm_add_ps(_mm256_castps256_ps128(b), _mm256_extractf128_ps(b, 1)); /* + 4 */
    __m128 d = _mm_add_ps(c, _mm_movehl_ps(c, c));                               /* + 2 */
    return _mm_cvtss_f32(_mm_add_ss(d, _mm_shuffle_ps(d, d, 1)));               /* + 1 */
}

/* The first n of 8 floats at p (n < 8: the rest read as 0, not read). */
ATTN_INLINE_AVX2 __m256 load8(const float *p, int n) {
    if (n >= 8) return _mm256_loadu_ps(p);
    if (n <= 0) return _mm256_setzero_ps();
    __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_maskload_ps(p, m);
}

/* The first n of 8 lanes of x to p (n < 8: the rest of p untouched). */
ATTN_INLINE_AVX2 void store8(float *p, __m256 x, int n) {
    if (n >= 8) {
        _mm256_storeu_ps(p, x);
    } else if (n > 0) {
        __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        _mm256_maskstore_ps(p, m, x);
    }
}

/* 8 bf16 (n < 8: the rest read as 0) widened to fp32. */
ATTN_INLINE_AVX2 __m256 widen8(const uint16_t *p, int n) {
    __m128i h;
    if (n >= 8) {
        h = _mm_loadu_si128((const __m128i *)p);
    } else {
        uint16_t t[8] = {0};
        for (int i = 0; i < n; i++) t[i] = p[i];
        h = _mm_loadu_si128((const __m128i *)t);
    }
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* out[j, i] = fmaf(p[j, t], v_t[i], .) over t = 0 .. T-1 from zero, for the
 * G heads' probabilities p[G, T] and values at vf (float32) or, when vf is
 * NULL, vb (bf16), row t at t*kvd. 32 output elements of up to 2 heads per
 * pass: eight independent sums hide the fused multiply-add's latency, and
 * V's rows are read once per pass. Callers pass a constant NULL, so each
 * gets the loop for its format alone. */
ATTN_INLINE_AVX2 void weighted_values_avx2(float *out, const float *p, const float *vf, const uint16_t *vb, int T,
                                           int G, int hd, int kvd) {
    for (int c = 0; c < hd; c += 32) {
        for (int j0 = 0; j0 < G; j0 += 2) {
            int nj = G - j0 < 2 ? G - j0 : 2;
            __m256 acc[2][4];
#pragma GCC unroll 2
            for (int jj = 0; jj < 2; jj++)
#pragma GCC unroll 4
                for (int e = 0; e < 4; e++) acc[jj][e] = _mm256_setzero_ps();
            for (int t = 0; t < T; t++) {
                size_t at = (size_t)t * kvd + (size_t)c;
                __m256 w[4];
#pragma GCC unroll 4
                for (int e = 0; e < 4; e++)
                    w[e] = vf ? load8(vf + at + 8 * e, hd - c - 8 * e) : widen8(vb + at + 8 * e, hd - c - 8 * e);
#pragma GCC unroll 2
                for (int jj = 0; jj < 2; jj++)
                    if (jj < nj) {
                        __m256 pj = _mm256_set1_ps(p[(size_t)(j0 + jj) * T + t]);
#pragma GCC unroll 4
                        for (int e = 0; e < 4; e++) acc[jj][e] = _mm256_fmadd_ps(pj, w[e], acc[jj][e]);
                    }
            }
            for (int jj = 0; jj < nj; jj++)
                for (int e = 0; e < 4; e++)
                    store8(out + (size_t)(j0 + jj) * hd + c + 8 * e, acc[jj][e], hd - c - 8 * e);
        }
    }
}
#else
#define ATTN_X86 0
#endif

#endif
