/* The decoders of the products on decoded tiles (packed_tile.h) for the q8
 * and bf16 panels on AVX2 and AVX-512, exact, like the formats' portable
 * decoders.
 *
 * Both layouts keep a column's consecutive k in one 32-bit word (q8: 4
 * codes, bf16: a pair) and the panel's columns side by side. The forward
 * product's tiles (s[c][j] = W[i0 + j][c0 + c]) are the panels as they lie,
 * widened. The transposed product's (s[c][i] = W[c0 + c][i0 + i]) want a
 * column's 32 k together, words strided a group or a pair apart: a
 * transpose of 32-bit words in registers (unpacks of 32 and 64 bits, then
 * 128-bit lanes) turns a panel's groups into its columns. */
#include "packed_bf16_kernels.h"
#include "packed_q8_kernels.h"

#if Q8W_X86
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "../util/half.h"
#include "packed_tile.h"

#define TARGET512 __attribute__((target("avx512f")))
#define INLINE512 static inline __attribute__((always_inline, target("avx512f")))
#define TARGET256 __attribute__((target("avx2,fma")))
#define INLINE256 static inline __attribute__((always_inline, target("avx2,fma")))

/* Of a[] (groups of 4 vectors of words), the first two transpose stages:
 * u[4i + jj]'s 128-bit lane L holds word 4L + jj of a[4i .. 4i + 3]. */
INLINE512 void unpack_stages512(const __m512i *a, __m512i *u, int quads) {
    for (int i = 0; i < quads; i++) {
        __m512i t0 = _mm512_unpacklo_epi32(a[4 * i], a[4 * i + 1]), t1 = _mm512_unpackhi_epi32(a[4 * i], a[4 * i + 1]);
        __m512i t2 = _mm512_unpacklo_epi32(a[4 * i + 2], a[4 * i + 3]), t3 = _mm512_unpackhi_epi32(a[4 * i + 2], a[4 * i + 3]);
        u[4 * i] = _mm512_unpacklo_epi64(t0, t2), u[4 * i + 1] = _mm512_unpackhi_epi64(t0, t2);
        u[4 * i + 2] = _mm512_unpacklo_epi64(t1, t3), u[4 * i + 3] = _mm512_unpackhi_epi64(t1, t3);
    }
}

/* ---- q8: a block is 8 groups of 16 columns' words (4 int8 each) ---------- */

/* 16 int8 to float32 times d, stored. */
INLINE512 void q8_store16(float *dst, __m128i q, __m512 d) {
    _mm512_storeu_ps(dst, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), d));
}

/* A panel's block b as 16 rows of 32 floats (row stride PT_TK). */
INLINE512 void q8_panel512(float *dst, const unsigned char *panel, int b) {
    const unsigned char *quants = panel + q8w_quants_at(b);
    float d[Q8W_NR];
    _mm512_storeu_ps(d, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(panel + q8w_scales_at(b)))));
    __m512i g[8], u[8];
    for (int i = 0; i < 8; i++) g[i] = _mm512_loadu_si512(quants + (size_t)i * 64);
    unpack_stages512(g, u, 2);
    for (int jj = 0; jj < 4; jj++) {
        /* columns jj, 4 + jj in p0, 8 + jj, 12 + jj in p1: k 0..15 in lanes 0 and 1, k 16..31 in 2 and 3 */
        __m512i p0 = _mm512_shuffle_i32x4(u[jj], u[4 + jj], 0x44), p1 = _mm512_shuffle_i32x4(u[jj], u[4 + jj], 0xEE);
        float *c0 = dst + (size_t)jj * PT_TK, *c1 = c0 + 4 * PT_TK, *c2 = c0 + 8 * PT_TK, *c3 = c0 + 12 * PT_TK;
        q8_store16(c0, _mm512_castsi512_si128(p0), _mm512_set1_ps(d[jj]));
        q8_store16(c0 + 16, _mm512_extracti32x4_epi32(p0, 2), _mm512_set1_ps(d[jj]));
        q8_store16(c1, _mm512_extracti32x4_epi32(p0, 1), _mm512_set1_ps(d[4 + jj]));
        q8_store16(c1 + 16, _mm512_extracti32x4_epi32(p0, 3), _mm512_set1_ps(d[4 + jj]));
        q8_store16(c2, _mm512_castsi512_si128(p1), _mm512_set1_ps(d[8 + jj]));
        q8_store16(c2 + 16, _mm512_extracti32x4_epi32(p1, 2), _mm512_set1_ps(d[8 + jj]));
        q8_store16(c3, _mm512_extracti32x4_epi32(p1, 1), _mm512_set1_ps(d[12 + jj]));
        q8_store16(c3 + 16, _mm512_extracti32x4_epi32(p1, 3), _mm512_set1_ps(d[12 + jj]));
    }
}

TARGET512 void q8w_decode_t_avx512(float *s, const void *w, int n, int k, int c0, int nc, int i0) {
    (void)n;
    float part[Q8W_NR * PT_TK] __attribute__((aligned(64)));
    for (int c = 0; c < nc; c += Q8W_NR) { /* c0 is a whole number of panels */
        const unsigned char *panel = (const unsigned char *)w + (size_t)((c0 + c) / Q8W_NR) * q8w_panel_bytes(k);
        bool whole = nc - c >= Q8W_NR;
        q8_panel512(whole ? s + (size_t)c * PT_TK : part, panel, i0 / Q8W_K_BLOCK);
        if (!whole) memcpy(s + (size_t)c * PT_TK, part, sizeof(float) * PT_TK * (size_t)(nc - c));
    }
}

/* Column by column: two words (8 int8) a vector. */
TARGET256 void q8w_decode_t_avx2(float *s, const void *w, int n, int k, int c0, int nc, int i0) {
    (void)n;
    int b = i0 / Q8W_K_BLOCK;
    for (int c = 0; c < nc; c++) {
        int col = c0 + c, j = col % Q8W_NR;
        const unsigned char *panel = (const unsigned char *)w + (size_t)(col / Q8W_NR) * q8w_panel_bytes(k);
        const unsigned char *scale = panel + q8w_scales_at(b) + (size_t)j * 2, *quants = panel + q8w_quants_at(b) + (size_t)j * 4;
        __m256 d = _mm256_set1_ps(f16_to_f32((uint16_t)(scale[0] | scale[1] << 8)));
        for (int g = 0; g < 8; g += 2) {
            int32_t w0, w1;
            memcpy(&w0, quants + (size_t)g * 64, sizeof w0);
            memcpy(&w1, quants + (size_t)(g + 1) * 64, sizeof w1);
            __m256i q = _mm256_cvtepi8_epi32(_mm_unpacklo_epi32(_mm_cvtsi32_si128(w0), _mm_cvtsi32_si128(w1)));
            _mm256_storeu_ps(s + (size_t)c * PT_TK + 4 * g, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
        }
    }
}

/* The forward tile: two panels of 16 columns (zero past n), each group's
 * byte t of every lane the 16 columns' weights of k = 4g + t. */
INLINE512 __m512 q8_k512(__m512i words, int t, __m512 d) {
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(words, 24 - 8 * t), 24)), d);
}

TARGET512 void q8w_decode_f_avx512(float *s, const void *w, int n, int k, int c0, int nc, int i0) {
    for (int h = 0; h < 2; h++) {
        int p = i0 / Q8W_NR + h;
        float *dst = s + 16 * h;
        if (p * Q8W_NR >= n) { /* past the last panel */
            for (int c = 0; c < nc; c++) _mm512_storeu_ps(dst + (size_t)c * PT_TK, _mm512_setzero_ps());
            continue;
        }
        const unsigned char *panel = (const unsigned char *)w + (size_t)p * q8w_panel_bytes(k);
        for (int b = c0 / Q8W_K_BLOCK; b < (c0 + nc) / Q8W_K_BLOCK; b++) {
            __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(panel + q8w_scales_at(b))));
            const unsigned char *quants = panel + q8w_quants_at(b);
            float *row = dst + (size_t)(b * Q8W_K_BLOCK - c0) * PT_TK;
            for (int g = 0; g < 8; g++) {
                __m512i v = _mm512_loadu_si512(quants + (size_t)g * 64);
#pragma GCC unroll 4
                for (int t = 0; t < 4; t++) _mm512_storeu_ps(row + (size_t)(4 * g + t) * PT_TK, q8_k512(v, t, d));
            }
        }
    }
}

INLINE256 __m256 q8_k256(__m256i words, int t, __m256 d) {
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(words, 24 - 8 * t), 24)), d);
}

TARGET256 void q8w_decode_f_avx2(float *s, const void *w, int n, int k, int c0, int nc, int i0) {
    for (int h = 0; h < 2; h++) {
        int p = i0 / Q8W_NR + h;
        float *dst = s + 16 * h;
        if (p * Q8W_NR >= n) {
            for (int c = 0; c < nc; c++) memset(dst + (size_t)c * PT_TK, 0, sizeof(float) * 16);
            continue;
        }
        const unsigned char *panel = (const unsigned char *)w + (size_t)p * q8w_panel_bytes(k);
        for (int b = c0 / Q8W_K_BLOCK; b < (c0 + nc) / Q8W_K_BLOCK; b++) {
            const unsigned char *scales = panel + q8w_scales_at(b), *quants = panel + q8w_quants_at(b);
            float d[Q8W_NR];
            for (int j = 0; j < Q8W_NR; j++) d[j] = f16_to_f32((uint16_t)(scales[2 * j] | scales[2 * j + 1] << 8));
            __m256 d0 = _mm256_loadu_ps(d), d1 = _mm256_loadu_ps(d + 8);
            float *row = dst + (size_t)(b * Q8W_K_BLOCK - c0) * PT_TK;
            for (int g = 0; g < 8; g++) {
                __m256i v0 = _mm256_loadu_si256((const __m256i *)(quants + (size_t)g * 64));
                __m256i v1 = _mm256_loadu_si256((const __m256i *)(quants + (size_t)g * 64 + 32));
#pragma GCC unroll 4
                for (int t = 0; t < 4; t++) {
                    _mm256_storeu_ps(row + (size_t)(4 * g + t) * PT_TK, q8_k256(v0, t, d0));
                    _mm256_storeu_ps(row + (size_t)(4 * g + t) * PT_TK + 8, q8_k256(v1, t, d1));
                }
            }
        }
    }
}

/* ---- bf16: a panel is 32 columns' words (a pair of k each) per pair ------- */

/* The forward tile: one panel as it lies, each pair's words split into the
 * even k (the low halves, shifted up) and the odd k (the high halves). */
TARGET512 void bf16w_decode_f_avx512(float *s, const void *w, int n, int k, int c0, int nc, int i0) {
    (void)n;
    const unsigned char *panel = (const unsigned char *)w + (size_t)(i0 / BF16W_NR) * bf16w_panel_bytes(k);
    const __m512i high = _mm512_set1_epi32((int)0xFFFF0000u);
    for (int c = 0; c < nc; c += 2) /* c0 is even */
        for (int h = 0; h < 2; h++) {
            __m512i v = _mm512_loadu_si512(panel + (size_t)((c0 + c) / 2) * BF16W_NR * 4 + (size_t)h * 64);
            _mm512_storeu_ps(s + (size_t)c * PT_TK + 16 * h, _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)));
            if (c + 1 < nc) _mm512_storeu_ps(s + (size_t)(c + 1) * PT_TK + 16 * h, _mm512_castsi512_ps(_mm512_and_si512(v, high)));
        }
}

TARGET256 void bf16w_decode_f_avx2(float *s, const void *w, int n, int k, int c0, int nc, int i0) {
    (void)n;
    const unsigned char *panel = (const unsigned char *)w + (size_t)(i0 / BF16W_NR) * bf16w_panel_bytes(k);
    const __m256i high = _mm256_set1_epi32((int)0xFFFF0000u);
    for (int c = 0; c < nc; c += 2)
        for (int h = 0; h < 4; h++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(panel + (size_t)((c0 + c) / 2) * BF16W_NR * 4 + (size_t)h * 32));
            _mm256_storeu_ps(s + (size_t)c * PT_TK + 8 * h, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
            if (c + 1 < nc) _mm256_storeu_ps(s + (size_t)(c + 1) * PT_TK + 8 * h, _mm256_castsi256_ps(_mm256_and_si256(v, high)));
        }
}

/* 16 bf16 (a column's 8 words) to float32, stored. */
INLINE512 void bf16_store16(float *dst, __m256i pairs) {
    _mm512_storeu_ps(dst, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(pairs), 16)));
}

/* 16 columns (from the panel's column 16h) x 16 pairs from pair q0 as 16
 * rows of 32 floats (row stride PT_TK): a 16 x 16 transpose of words. */
INLINE512 void bf16_half512(float *dst, const unsigned char *panel, int q0, int h) {
    __m512i a[16], u[16];
    for (int q = 0; q < 16; q++) a[q] = _mm512_loadu_si512(panel + (size_t)(q0 + q) * BF16W_NR * 4 + (size_t)h * 64);
    unpack_stages512(a, u, 4);
    for (int jj = 0; jj < 4; jj++) {
        /* lanes L of u[jj], u[4 + jj], u[8 + jj], u[12 + jj]: column 4L + jj's pairs 0-3, 4-7, 8-11, 12-15 */
        __m512i p0 = _mm512_shuffle_i32x4(u[jj], u[4 + jj], 0x44), p1 = _mm512_shuffle_i32x4(u[jj], u[4 + jj], 0xEE);
        __m512i r0 = _mm512_shuffle_i32x4(u[8 + jj], u[12 + jj], 0x44), r1 = _mm512_shuffle_i32x4(u[8 + jj], u[12 + jj], 0xEE);
        __m512i col[4] = {_mm512_shuffle_i32x4(p0, r0, 0x88), _mm512_shuffle_i32x4(p0, r0, 0xDD),
                          _mm512_shuffle_i32x4(p1, r1, 0x88), _mm512_shuffle_i32x4(p1, r1, 0xDD)};
        for (int l = 0; l < 4; l++) {
            float *c = dst + (size_t)(4 * l + jj) * PT_TK;
            bf16_store16(c, _mm512_castsi512_si256(col[l]));
            bf16_store16(c + 16, _mm512_extracti64x4_epi64(col[l], 1));
        }
    }
}

TARGET512 void bf16w_decode_t_avx512(float *s, const void *w, int n, int k, int c0, int nc, int i0) {
    if (i0 + PT_TK > k) { /* the last, short tile: its pairs end inside the panel */
        bf16w_decode_t(s, w, n, k, c0, nc, i0);
        return;
    }
    float part[16 * PT_TK] __attribute__((aligned(64)));
    for (int c = 0; c < nc; c += 16) { /* c0 is a whole number of panels: halves of 16 columns */
        const unsigned char *panel = (const unsigned char *)w + (size_t)((c0 + c) / BF16W_NR) * bf16w_panel_bytes(k);
        bool whole = nc - c >= 16;
        bf16_half512(whole ? s + (size_t)c * PT_TK : part, panel, i0 / 2, (c0 + c) % BF16W_NR / 16);
        if (!whole) memcpy(s + (size_t)c * PT_TK, part, sizeof(float) * PT_TK * (size_t)(nc - c));
    }
}

/* 8 bf16 (a column's 4 words) to float32, stored. */
INLINE256 void bf16_store8(float *dst, __m128i pairs) {
    _mm256_storeu_ps(dst, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(pairs), 16)));
}

/* 8 columns (from the panel's column 8h) x 8 pairs from pair q0 as 8 rows
 * of 16 floats (row stride PT_TK): an 8 x 8 transpose of words. */
INLINE256 void bf16_block256(float *dst, const unsigned char *panel, int q0, int h) {
    __m256i a[8];
    for (int q = 0; q < 8; q++) a[q] = _mm256_loadu_si256((const __m256i *)(panel + (size_t)(q0 + q) * BF16W_NR * 4 + (size_t)h * 32));
    for (int i = 0; i < 2; i++) {
        __m256i t0 = _mm256_unpacklo_epi32(a[4 * i], a[4 * i + 1]), t1 = _mm256_unpackhi_epi32(a[4 * i], a[4 * i + 1]);
        __m256i t2 = _mm256_unpacklo_epi32(a[4 * i + 2], a[4 * i + 3]), t3 = _mm256_unpackhi_epi32(a[4 * i + 2], a[4 * i + 3]);
        a[4 * i] = _mm256_unpacklo_epi64(t0, t2), a[4 * i + 1] = _mm256_unpackhi_epi64(t0, t2);
        a[4 * i + 2] = _mm256_unpacklo_epi64(t1, t3), a[4 * i + 3] = _mm256_unpackhi_epi64(t1, t3);
    }
    for (int jj = 0; jj < 4; jj++) { /* column jj: lanes 0 of a[jj], a[4 + jj]; column 4 + jj: lanes 1 */
        __m256i lo = _mm256_permute2x128_si256(a[jj], a[4 + jj], 0x20), hi = _mm256_permute2x128_si256(a[jj], a[4 + jj], 0x31);
        float *c = dst + (size_t)jj * PT_TK, *c4 = c + 4 * PT_TK;
        bf16_store8(c, _mm256_castsi256_si128(lo));
        bf16_store8(c + 8, _mm256_extracti128_si256(lo, 1));
        bf16_store8(c4, _mm256_castsi256_si128(hi));
        bf16_store8(c4 + 8, _mm256_extracti128_si256(hi, 1));
    }
}

TARGET256 void bf16w_decode_t_avx2(float *s, const void *w, int n, int k, int c0, int nc, int i0) {
    if (i0 + PT_TK > k) {
        bf16w_decode_t(s, w, n, k, c0, nc, i0);
        return;
    }
    float part[8 * PT_TK];
    for (int c = 0; c < nc; c += 8) {
        const unsigned char *panel = (const unsigned char *)w + (size_t)((c0 + c) / BF16W_NR) * bf16w_panel_bytes(k);
        bool whole = nc - c >= 8;
        float *dst = whole ? s + (size_t)c * PT_TK : part;
        for (int half = 0; half < 2; half++) /* k 0..15, then 16..31 */
            bf16_block256(dst + 16 * half, panel, i0 / 2 + 8 * half, (c0 + c) % BF16W_NR / 8);
        if (!whole) memcpy(s + (size_t)c * PT_TK, part, sizeof(float) * PT_TK * (size_t)(nc - c));
    }
}
#endif
