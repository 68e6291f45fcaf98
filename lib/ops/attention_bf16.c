/* Decode attention reading a bf16 KV cache directly (attention_row.h).
 *
 * A decode step at a large batch reads every cached key and value once per
 * row and does two flops per element read: memory-bound, so halving the
 * bytes is the point, and the arithmetic only has to keep up. A bf16 value
 * widens to fp32 exactly by a 16-bit shift.
 *
 * The same bits on every CPU: the AVX-512 code, the AVX2 code and the
 * portable code do the same IEEE operations in the same order. A score is a
 * dot product over hd in 16 lanes: lane l accumulates elements 2l, 2l+1,
 * 32+2l, 32+2l+1, ... with fused multiply-adds from zero (elements past hd,
 * up to a multiple of 32, count as 0 * 0), the lanes then summed in one
 * tree (sum16, attention_lanes.h). That lane order is what 32 bf16 loaded
 * as 16 words give for free: a shift widens the even elements, a mask the
 * odd ones, with no shuffle. The AVX-512 code sums sixteen keys' lanes at
 * once with shuffles that add exactly sum16's pairs. The output of a head
 * is fmaf(p_t, v_t, acc) over t = 0 .. T-1 from zero, element by element. */
#include "attention_row.h"

#include <math.h>
#include <stddef.h>

#include "../util/half.h"
#include "ops.h"

#include "attention_lanes.h"

attn_kernel attn_kernel_best(void) {
#if ATTN_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
        return ATTN_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return ATTN_AVX2;
#endif
    return ATTN_PORTABLE;
}

bool attn_bf16_simd_supported(void) { return attn_kernel_best() != ATTN_PORTABLE; }

/* ---- portable ------------------------------------------------------------------ */

static float dot_portable(const float *q, const uint16_t *k, int hd) {
    float acc[LANES] = {0};
    for (int c = 0; c < hd; c += 2 * LANES)
        for (int odd = 0; odd < 2; odd++) /* the even elements of 32, then the odd ones */
            for (int l = 0; l < LANES; l++) {
                int i = c + 2 * l + odd;
                float qi = i < hd ? q[i] : 0.0f, ki = i < hd ? bf16_to_f32(k[i]) : 0.0f;
                acc[l] = fmaf(qi, ki, acc[l]);
            }
    return sum16(acc);
}

static void scores_portable(float *sc, const float *q, const uint16_t *k, int T, int G, int hd, int kvd, float scale) {
    for (int j = 0; j < G; j++)
        for (int t = 0; t < T; t++)
            sc[(size_t)j * T + t] = dot_portable(q + (size_t)j * hd, k + (size_t)t * kvd, hd) * scale;
}

static void values_portable(float *out, const float *p, const uint16_t *v, int T, int G, int hd, int kvd) {
    for (int j = 0; j < G; j++)
        for (int i = 0; i < hd; i++) {
            float acc = 0.0f;
            for (int t = 0; t < T; t++) acc = fmaf(p[(size_t)j * T + t], bf16_to_f32(v[(size_t)t * kvd + i]), acc);
            out[(size_t)j * hd + i] = acc;
        }
}

/* ---- AVX-512 ------------------------------------------------------------------- */
#if ATTN_X86
#define TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))
#define INLINE_AVX512 static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl")))

/* The first n of 16 lanes (none when n <= 0). */
INLINE_AVX512 __mmask16 first(int n) {
    return n >= LANES ? (__mmask16)0xFFFF : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* The first n of 32 elements (none when n <= 0). */
INLINE_AVX512 __mmask32 first32(int n) {
    return n >= 2 * LANES ? (__mmask32)0xFFFFFFFFu : n <= 0 ? (__mmask32)0 : (__mmask32)((1u << n) - 1);
}

/* 32 bf16 (elements outside m read as 0) as 16 words: *even gets elements
 * 0, 2, .., 30 widened (a shift), *odd 1, 3, .., 31 (a mask). */
INLINE_AVX512 void widen32(const uint16_t *p, __mmask32 m, __m512 *even, __m512 *odd) {
    __m512i x = _mm512_maskz_loadu_epi16(m, p);
    *even = _mm512_castsi512_ps(_mm512_slli_epi32(x, 16));
    *odd = _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32((int)0xFFFF0000u)));
}

/* 16 bf16 (lanes outside m read as 0) widened to fp32. */
INLINE_AVX512 __m512 widen16(const uint16_t *p, __mmask16 m) {
    __m256i h = _mm256_maskz_loadu_epi16(m, p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* sum16 of sixteen vectors at once: lane 4q+k of the result is sum16(a[4k+q]).
 * Each step adds the pairs sum16 adds: lanes l and l+8, then l and l+4, ... */
INLINE_AVX512 __m512 sum16x16(const __m512 a[LANES]) {
    __m512 z[8], s[4], t[2];
    for (int i = 0; i < 8; i++) /* lanes 0-7: a[2i]'s l + (l+8); lanes 8-15: a[2i+1]'s */
        z[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    for (int i = 0; i < 4; i++) /* 128-bit lane q: a[4i+q]'s l + (l+4), l < 4 */
        s[i] = _mm512_add_ps(_mm512_shuffle_f32x4(z[2 * i], z[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(z[2 * i], z[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    for (int i = 0; i < 2; i++) /* per 128-bit lane: l + (l+2) of two vectors */
        t[i] = _mm512_add_ps(_mm512_shuffle_ps(s[2 * i], s[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(s[2 * i], s[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    return _mm512_add_ps(_mm512_shuffle_ps(t[0], t[1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_ps(t[0], t[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

/* Scores of 16 keys at a time per head: key L's lanes go to a[4(L%4) + L/4]
 * so that sum16x16 returns them in key order. */
TARGET_AVX512 static void scores_avx512(float *sc, const float *q, const uint16_t *k, int T, int G, int hd, int kvd,
                                        float scale) {
    const __m512 vscale = _mm512_set1_ps(scale);
    const __m512i even_idx = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd_idx = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    for (int t0 = 0; t0 < T; t0 += LANES) {
        int n = T - t0 < LANES ? T - t0 : LANES;
        const uint16_t *kt = k + (size_t)t0 * kvd;
        for (int j = 0; j < G; j++) {
            const float *qj = q + (size_t)j * hd;
            __m512 acc[LANES];
#pragma GCC unroll 16
            for (int s = 0; s < LANES; s++) acc[s] = _mm512_setzero_ps();
            for (int c = 0; c < hd; c += 2 * LANES) {
                __mmask32 m = first32(hd - c);
                __m512 q0 = _mm512_maskz_loadu_ps(first(hd - c), qj + c);
                __m512 q1 = _mm512_maskz_loadu_ps(first(hd - c - LANES), qj + c + LANES);
                __m512 qe = _mm512_permutex2var_ps(q0, even_idx, q1), qo = _mm512_permutex2var_ps(q0, odd_idx, q1);
#pragma GCC unroll 16
                for (int L = 0; L < LANES; L++)
                    if (L < n) {
                        int s = 4 * (L % 4) + L / 4;
                        __m512 ke, ko;
                        widen32(kt + (size_t)L * kvd + c, m, &ke, &ko);
                        acc[s] = _mm512_fmadd_ps(qo, ko, _mm512_fmadd_ps(qe, ke, acc[s]));
                    }
            }
            _mm512_mask_storeu_ps(sc + (size_t)j * T + t0, first(n), _mm512_mul_ps(sum16x16(acc), vscale));
        }
    }
}

/* 32 output elements of up to 4 heads per pass, held as even and odd
 * elements (widen32) and interleaved when stored: eight independent sums
 * hide the fused multiply-add's latency; V's rows are read once per pass. */
TARGET_AVX512 static void values_avx512(float *out, const float *p, const uint16_t *v, int T, int G, int hd,
                                        int kvd) {
    const __m512i lo_idx = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i hi_idx = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    for (int c = 0; c < hd; c += 2 * LANES) {
        __mmask16 m0 = first(hd - c), m1 = first(hd - c - LANES);
        __mmask32 m = first32(hd - c);
        for (int j0 = 0; j0 < G; j0 += 4) {
            int nj = G - j0 < 4 ? G - j0 : 4;
            __m512 a0[4], a1[4]; /* even, odd elements */
#pragma GCC unroll 4
            for (int jj = 0; jj < 4; jj++) a0[jj] = a1[jj] = _mm512_setzero_ps();
            for (int t = 0; t < T; t++) {
                __m512 w0, w1;
                widen32(v + (size_t)t * kvd + c, m, &w0, &w1);
#pragma GCC unroll 4
                for (int jj = 0; jj < 4; jj++)
                    if (jj < nj) {
                        __m512 pj = _mm512_set1_ps(p[(size_t)(j0 + jj) * T + t]);
                        a0[jj] = _mm512_fmadd_ps(pj, w0, a0[jj]);
                        a1[jj] = _mm512_fmadd_ps(pj, w1, a1[jj]);
                    }
            }
            for (int jj = 0; jj < nj; jj++) {
                float *o = out + (size_t)(j0 + jj) * hd + c;
                _mm512_mask_storeu_ps(o, m0, _mm512_permutex2var_ps(a0[jj], lo_idx, a1[jj]));
                _mm512_mask_storeu_ps(o + LANES, m1, _mm512_permutex2var_ps(a0[jj], hi_idx, a1[jj]));
            }
        }
    }
}

TARGET_AVX512 static void widen_avx512(float *dst, const uint16_t *src, int T, int hd, int kvd) {
    for (int t = 0; t < T; t++)
        for (int c = 0; c < hd; c += LANES) {
            __mmask16 m = first(hd - c);
            _mm512_mask_storeu_ps(dst + (size_t)t * hd + c, m, widen16(src + (size_t)t * kvd + c, m));
        }
}
#endif

/* ---- AVX2 ---------------------------------------------------------------------- */
#if ATTN_X86
/* n bf16 from p (n < 16: the rest read as 0) as 16 words. */
ATTN_INLINE_AVX2 __m256i load16(const uint16_t *p, int n) {
    if (n >= 16) return _mm256_loadu_si256((const __m256i *)p);
    uint16_t t[16] = {0};
    for (int i = 0; i < n; i++) t[i] = p[i];
    return _mm256_loadu_si256((const __m256i *)t);
}

/* Lane l of a chunk of 32 (c): elements c+2l (even) and c+2l+1 (odd), l < 8
 * in the first vector, 8 <= l < 16 in the second: q deinterleaved once per
 * head into qe/qo[chunk][16], elements past hd as 0. */
ATTN_TARGET_AVX2 static void scores_avx2(float *sc, const float *q, const uint16_t *k, int T, int G, int hd, int kvd,
                                    float scale) {
    enum { MAX_CHUNKS = 16 };
    int chunks = (hd + 2 * LANES - 1) / (2 * LANES);
    if (chunks > MAX_CHUNKS) { /* heads past 512: the portable code, the same bits */
        scores_portable(sc, q, k, T, G, hd, kvd, scale);
        return;
    }
    for (int j = 0; j < G; j++) {
        const float *qj = q + (size_t)j * hd;
        float qe[MAX_CHUNKS][LANES], qo[MAX_CHUNKS][LANES];
        for (int c = 0; c < chunks; c++)
            for (int l = 0; l < LANES; l++) {
                int i = c * 2 * LANES + 2 * l;
                qe[c][l] = i < hd ? qj[i] : 0.0f;
                qo[c][l] = i + 1 < hd ? qj[i + 1] : 0.0f;
            }
        const __m256i odd_mask = _mm256_set1_epi32((int)0xFFFF0000u);
        for (int t = 0; t < T; t++) {
            const uint16_t *kt = k + (size_t)t * kvd;
            __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
            for (int c = 0; c < chunks; c++) {
                int at = c * 2 * LANES;
                __m256i k0 = load16(kt + at, hd - at), k1 = load16(kt + at + LANES, hd - at - LANES);
                lo = _mm256_fmadd_ps(_mm256_loadu_ps(qe[c]), _mm256_castsi256_ps(_mm256_slli_epi32(k0, 16)), lo);
                hi = _mm256_fmadd_ps(_mm256_loadu_ps(qe[c] + 8), _mm256_castsi256_ps(_mm256_slli_epi32(k1, 16)), hi);
                lo = _mm256_fmadd_ps(_mm256_loadu_ps(qo[c]), _mm256_castsi256_ps(_mm256_and_si256(k0, odd_mask)), lo);
                hi = _mm256_fmadd_ps(_mm256_loadu_ps(qo[c] + 8), _mm256_castsi256_ps(_mm256_and_si256(k1, odd_mask)),
                                     hi);
            }
            sc[(size_t)j * T + t] = sum16_avx2(lo, hi) * scale;
        }
    }
}

ATTN_TARGET_AVX2 static void values_avx2(float *out, const float *p, const uint16_t *v, int T, int G, int hd, int kvd) {
    weighted_values_avx2(out, p, NULL, v, T, G, hd, kvd);
}

ATTN_TARGET_AVX2 static void widen_avx2(float *dst, const uint16_t *src, int T, int hd, int kvd) {
    for (int t = 0; t < T; t++)
        for (int c = 0; c < hd; c += 8)
            store8(dst + (size_t)t * hd + c, widen8(src + (size_t)t * kvd + c, hd - c), hd - c);
}
#endif

/* ---- entry points ---------------------------------------------------------------- */

void attend_row_bf16(float *out, float *lse, const float *q, const uint16_t *k, const uint16_t *v, int T, int G, int hd,
                     int kvd, float scale, float *sc, attn_kernel kernel) {
    switch (kernel) {
#if ATTN_X86
    case ATTN_AVX512: scores_avx512(sc, q, k, T, G, hd, kvd, scale); break;
    case ATTN_AVX2: scores_avx2(sc, q, k, T, G, hd, kvd, scale); break;
#endif
    default: scores_portable(sc, q, k, T, G, hd, kvd, scale);
    }
    softmax_heads(sc, lse, T, G);
    switch (kernel) {
#if ATTN_X86
    case ATTN_AVX512: values_avx512(out, sc, v, T, G, hd, kvd); break;
    case ATTN_AVX2: values_avx2(out, sc, v, T, G, hd, kvd); break;
#endif
    default: values_portable(out, sc, v, T, G, hd, kvd);
    }
}

void widen_rows_bf16(float *dst, const uint16_t *src, int T, int hd, int kvd, attn_kernel kernel) {
    switch (kernel) {
#if ATTN_X86
    case ATTN_AVX512: widen_avx512(dst, src, T, hd, kvd); return;
    case ATTN_AVX2: widen_avx2(dst, src, T, hd, kvd); return;
#endif
    default:
        for (int t = 0; t < T; t++) bf16_to_f32_array(src + (size_t)t * kvd, dst + (size_t)t * hd, (size_t)hd);
    }
}
