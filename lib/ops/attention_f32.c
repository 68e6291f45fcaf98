/* Decode attention over a float32 KV cache, one row at a time
 * (attention_row.h).
 *
 * A decode step reads every cached key and value of a row once for the G
 * query heads that share them: two flops per element read per head. The
 * AVX2 code keeps the sums in registers (four keys' scores at once, the
 * output 32 elements of two heads at a time) where a compiler left to
 * itself reduces each dot product across the vector key by key.
 *
 * The same bits on every CPU: the AVX2 code and the portable code do the
 * same IEEE operations in the same order. A score is a dot product over hd
 * in 16 lanes: lane l accumulates elements l, 16+l, 32+l, ... with fused
 * multiply-adds from zero (elements past hd, up to a multiple of 16, count
 * as 0 * 0), the lanes then summed by sum16 (attention_lanes.h). The output
 * of a head is fmaf(p_t, v_t, acc) over t = 0 .. T-1 from zero, element by
 * element. */
#include "attention_row.h"

#include <math.h>
#include <stddef.h>

#include "attention_lanes.h"

/* ---- portable ------------------------------------------------------------------ */

static float dot_portable(const float *q, const float *k, int hd) {
    float acc[LANES] = {0};
    for (int c = 0; c < hd; c += LANES)
        for (int l = 0; l < LANES; l++) {
            int i = c + l;
            acc[l] = fmaf(i < hd ? q[i] : 0.0f, i < hd ? k[i] : 0.0f, acc[l]);
        }
    return sum16(acc);
}

static void scores_portable(float *sc, const float *q, const float *k, int T, int G, int hd, int kvd, float scale) {
    for (int j = 0; j < G; j++)
        for (int t = 0; t < T; t++)
            sc[(size_t)j * T + t] = dot_portable(q + (size_t)j * hd, k + (size_t)t * kvd, hd) * scale;
}

static void values_portable(float *out, const float *p, const float *v, int T, int G, int hd, int kvd) {
    for (int j = 0; j < G; j++)
        for (int i = 0; i < hd; i++) {
            float acc = 0.0f;
            for (int t = 0; t < T; t++) acc = fmaf(p[(size_t)j * T + t], v[(size_t)t * kvd + i], acc);
            out[(size_t)j * hd + i] = acc;
        }
}

/* ---- AVX2 ---------------------------------------------------------------------- */
#if ATTN_X86
/* sum16 of four keys' lanes at once (key u: lanes 0-7 in lo[u], 8-15 in
 * hi[u]), its pairs in its order; lane u of the result is key u's sum. */
ATTN_INLINE_AVX2 __m128 sum16x4(const __m256 lo[4], const __m256 hi[4]) {
    __m256 b[4];
    for (int u = 0; u < 4; u++) b[u] = _mm256_add_ps(lo[u], hi[u]); /* l + (l+8) */
    /* + 4: [key 0's four | key 1's four], [key 2's | key 3's] */
    __m256 z01 = _mm256_add_ps(_mm256_permute2f128_ps(b[0], b[1], 0x20), _mm256_permute2f128_ps(b[0], b[1], 0x31));
    __m256 z23 = _mm256_add_ps(_mm256_permute2f128_ps(b[2], b[3], 0x20), _mm256_permute2f128_ps(b[2], b[3], 0x31));
    /* + 2: [k0 l0, k0 l1, k2 l0, k2 l1 | k1 l0, k1 l1, k3 l0, k3 l1] */
    __m256 y = _mm256_add_ps(_mm256_shuffle_ps(z01, z23, _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm256_shuffle_ps(z01, z23, _MM_SHUFFLE(3, 2, 3, 2)));
    __m256 h = _mm256_hadd_ps(y, y); /* + 1: [k0, k2, k0, k2 | k1, k3, k1, k3] */
    return _mm_unpacklo_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

ATTN_TARGET_AVX2 static void scores_avx2(float *sc, const float *q, const float *k, int T, int G, int hd, int kvd,
                                    float scale) {
    const __m128 vscale = _mm_set1_ps(scale);
    for (int j = 0; j < G; j++) {
        const float *qj = q + (size_t)j * hd;
        float *s = sc + (size_t)j * T;
        int t = 0;
        for (; t + 4 <= T; t += 4) {
            const float *kt = k + (size_t)t * kvd;
            __m256 lo[4], hi[4];
#pragma GCC unroll 4
            for (int u = 0; u < 4; u++) lo[u] = hi[u] = _mm256_setzero_ps();
            for (int c = 0; c < hd; c += LANES) {
                __m256 q0 = load8(qj + c, hd - c), q1 = load8(qj + c + 8, hd - c - 8);
#pragma GCC unroll 4
                for (int u = 0; u < 4; u++) {
                    const float *ku = kt + (size_t)u * kvd + c;
                    lo[u] = _mm256_fmadd_ps(q0, load8(ku, hd - c), lo[u]);
                    hi[u] = _mm256_fmadd_ps(q1, load8(ku + 8, hd - c - 8), hi[u]);
                }
            }
            _mm_storeu_ps(s + t, _mm_mul_ps(sum16x4(lo, hi), vscale));
        }
        for (; t < T; t++) {
            const float *kt = k + (size_t)t * kvd;
            __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
            for (int c = 0; c < hd; c += LANES) {
                lo = _mm256_fmadd_ps(load8(qj + c, hd - c), load8(kt + c, hd - c), lo);
                hi = _mm256_fmadd_ps(load8(qj + c + 8, hd - c - 8), load8(kt + c + 8, hd - c - 8), hi);
            }
            s[t] = sum16_avx2(lo, hi) * scale;
        }
    }
}

ATTN_TARGET_AVX2 static void values_avx2(float *out, const float *p, const float *v, int T, int G, int hd, int kvd) {
    weighted_values_avx2(out, p, v, NULL, T, G, hd, kvd);
}
#endif

/* ---- entry point ----------------------------------------------------------------- */

void attend_row_f32(float *out, float *lse, const float *q, const float *k, const float *v, int T, int G, int hd,
                    int kvd, float scale, float *sc, attn_kernel kernel) {
#if ATTN_X86
    if (kernel != ATTN_PORTABLE) { /* AVX-512 CPUs run the AVX2 code: the same bits */
        scores_avx2(sc, q, k, T, G, hd, kvd, scale);
        softmax_heads(sc, lse, T, G);
        values_avx2(out, sc, v, T, G, hd, kvd);
        return;
    }
#endif
    (void)kernel;
    scores_portable(sc, q, k, T, G, hd, kvd, scale);
    softmax_heads(sc, lse, T, G);
    values_portable(out, sc, v, T, G, hd, kvd);
}
