/* The AVX2 kernels over Q4_K panels (packed_q4k.h): the matmul and the
 * transposed product's decoder, the bits of the portable code and of the
 * AVX-512 kernels. Sixteen ymm registers hold a tile of 4 rows x one panel
 * (two halves of 8 columns) of float32 sums, each a fused multiply-add
 * chain over k in order. */
#include "packed_q4k_kernels.h"

#if Q4KW_X86
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define TARGET __attribute__((target("avx2,fma")))
#define INLINE static inline __attribute__((always_inline, target("avx2,fma")))

enum { MR = 4, ROW_CHUNK = 64 };

/* 8 bytes as 8 floats. */
INLINE __m256 bytes8(const unsigned char *b) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)b)));
}

/* Sub-block u's d sc and dmin mn of a panel's columns 0..7 (*ds0, *ms0) and 8..15. */
INLINE void sub_scales(const unsigned char *panel, int u, __m256 *ds0, __m256 *ds1, __m256 *ms0, __m256 *ms1) {
    const unsigned char *head = panel + q4kw_head_at(u);
    int s = u % Q4KW_SUBS;
    const unsigned char *sc = head + Q4KW_SC_AT + Q4KW_NR * s, *mn = head + Q4KW_MN_AT + Q4KW_NR * s;
    *ds0 = _mm256_mul_ps(_mm256_loadu_ps((const float *)head), bytes8(sc));
    *ds1 = _mm256_mul_ps(_mm256_loadu_ps((const float *)head + 8), bytes8(sc + 8));
    *ms0 = _mm256_mul_ps(_mm256_loadu_ps((const float *)(head + Q4KW_DMIN_AT)), bytes8(mn));
    *ms1 = _mm256_mul_ps(_mm256_loadu_ps((const float *)(head + Q4KW_DMIN_AT) + 8), bytes8(mn + 8));
}

/* The weights of the codes in each lane's low 4 bits. */
INLINE __m256 weights(__m256i lanes, __m256 ds, __m256 ms) {
    __m256 q = _mm256_cvtepi32_ps(_mm256_and_si256(lanes, _mm256_set1_epi32(15)));
    return _mm256_sub_ps(_mm256_mul_ps(ds, q), ms);
}

/* out[mr, 16] (row stride ldo, masked past cols) = x[mr] (row stride k) @ one panel (+ bias). */
INLINE void tile(int mr, float *out, int ldo, const float *x, int k, const unsigned char *panel, const float *bias,
                 int cols) {
    __m256 acc[MR][2];
#pragma GCC unroll 4
    for (int r = 0; r < mr; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int u = 0; u < k / Q4KW_K_SUB; u++) {
        __m256 ds0, ds1, ms0, ms1;
        sub_scales(panel, u, &ds0, &ds1, &ms0, &ms1);
        const float *xb = x + (size_t)u * Q4KW_K_SUB;
        for (int g = 0; g < 4; g++) {
            const unsigned char *words = panel + q4kw_codes_at(u) + (size_t)g * Q4KW_GROUP_BYTES;
            __m256i v0 = _mm256_loadu_si256((const __m256i *)words), v1 = _mm256_loadu_si256((const __m256i *)(words + 32));
#pragma GCC unroll 8
            for (int t = 0; t < 8; t++) {
                __m256 w0 = weights(_mm256_srli_epi32(v0, 4 * t), ds0, ms0);
                __m256 w1 = weights(_mm256_srli_epi32(v1, 4 * t), ds1, ms1);
#pragma GCC unroll 4
                for (int r = 0; r < mr; r++) {
                    __m256 a = _mm256_broadcast_ss(xb + (size_t)r * k + g * 8 + t);
                    acc[r][0] = _mm256_fmadd_ps(a, w0, acc[r][0]);
                    acc[r][1] = _mm256_fmadd_ps(a, w1, acc[r][1]);
                }
            }
        }
    }
    float bb[Q4KW_NR] = {0};
    int nc = cols < Q4KW_NR ? cols : Q4KW_NR;
    if (bias) memcpy(bb, bias, sizeof(float) * (size_t)nc);
    __m256 b0 = _mm256_loadu_ps(bb), b1 = _mm256_loadu_ps(bb + 8);
    for (int r = 0; r < mr; r++) {
        float o[Q4KW_NR]; /* no + 0 without bias: -0 stays -0 */
        _mm256_storeu_ps(o, bias ? _mm256_add_ps(acc[r][0], b0) : acc[r][0]);
        _mm256_storeu_ps(o + 8, bias ? _mm256_add_ps(acc[r][1], b1) : acc[r][1]);
        memcpy(out + (size_t)r * ldo, o, sizeof(float) * (size_t)nc);
    }
}

TARGET __attribute__((noinline)) static void tile_rows(int mr, float *out, int ldo, const float *x, int k,
                                                       const unsigned char *panel, const float *bias, int cols) {
    switch (mr) { /* one instance per row count */
    case 1: tile(1, out, ldo, x, k, panel, bias, cols); break;
    case 2: tile(2, out, ldo, x, k, panel, bias, cols); break;
    case 3: tile(3, out, ldo, x, k, panel, bias, cols); break;
    default: tile(MR, out, ldo, x, k, panel, bias, cols); break;
    }
}

void q4kw_matmul_avx2(float *out, const float *in, const void *w, const float *bias, int m, int k, int n) {
    int panels = (n + Q4KW_NR - 1) / Q4KW_NR, chunks = (m + ROW_CHUNK - 1) / ROW_CHUNK;
    size_t stride = q4kw_panel_bytes(k);
    /* task = chunk * panels + panel: each thread takes a run of panels of one chunk of rows */
#pragma omp parallel for schedule(static)
    for (int task = 0; task < chunks * panels; task++) {
        int p = task % panels, col = p * Q4KW_NR, r_end = (task / panels + 1) * ROW_CHUNK;
        if (r_end > m) r_end = m;
        for (int r = task / panels * ROW_CHUNK; r < r_end; r += MR)
            tile_rows(r_end - r < MR ? r_end - r : MR, out + (size_t)r * n + col, n, in + (size_t)r * k, k,
                      (const unsigned char *)w + (size_t)p * stride, bias ? bias + col : NULL, n - col);
    }
}

/* The transposed product's decoder: s[c][i] = W[c0 + c][i0 + i]. Each
 * group's word of a column holds 8 consecutive codes: broadcast, shifted
 * per lane and scaled, 8 weights a vector. */
TARGET void q4kw_decode_t_avx2(float *s, const void *w, int n, int k, int c0, int nc, int i0) {
    (void)n;
    const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    int u = i0 / Q4KW_K_SUB, sub = u % Q4KW_SUBS;
    for (int c = 0; c < nc; c++) {
        int col = c0 + c, j = col % Q4KW_NR;
        const unsigned char *panel = (const unsigned char *)w + (size_t)(col / Q4KW_NR) * q4kw_panel_bytes(k);
        const unsigned char *head = panel + q4kw_head_at(u), *codes = panel + q4kw_codes_at(u) + (size_t)j * 4;
        float d, dmin;
        memcpy(&d, head + 4 * j, 4);
        memcpy(&dmin, head + Q4KW_DMIN_AT + 4 * j, 4);
        __m256 ds = _mm256_set1_ps(d * (float)head[Q4KW_SC_AT + Q4KW_NR * sub + j]);
        __m256 ms = _mm256_set1_ps(dmin * (float)head[Q4KW_MN_AT + Q4KW_NR * sub + j]);
        for (int g = 0; g < 4; g++) {
            int32_t word;
            memcpy(&word, codes + (size_t)g * Q4KW_GROUP_BYTES, sizeof word);
            __m256i lanes = _mm256_srlv_epi32(_mm256_set1_epi32(word), shifts);
            _mm256_storeu_ps(s + (size_t)c * PT_TK + 8 * g, weights(lanes, ds, ms));
        }
    }
}
/* The forward product's decoder: s[c][j] = W[i0 + j][c0 + c], two panels
 * side by side as they lie, 8 columns of one k a vector (0 past n). */
TARGET void q4kw_decode_f_avx2(float *s, const void *w, int n, int k, int c0, int nc, int i0) {
    size_t stride = q4kw_panel_bytes(k);
    for (int h = 0; h < 2; h++) {
        float *dst = s + Q4KW_NR * h;
        if (i0 + Q4KW_NR * h >= n) {
            for (int c = 0; c < nc; c++)
                _mm256_storeu_ps(dst + (size_t)c * PT_TK, _mm256_setzero_ps()), _mm256_storeu_ps(dst + (size_t)c * PT_TK + 8, _mm256_setzero_ps());
            continue;
        }
        const unsigned char *panel = (const unsigned char *)w + (size_t)(i0 / Q4KW_NR + h) * stride;
        for (int u = c0 / Q4KW_K_SUB; u < (c0 + nc) / Q4KW_K_SUB; u++) {
            __m256 ds0, ds1, ms0, ms1;
            sub_scales(panel, u, &ds0, &ds1, &ms0, &ms1);
            float *row = dst + (size_t)(u * Q4KW_K_SUB - c0) * PT_TK;
            for (int g = 0; g < 4; g++) {
                const unsigned char *words = panel + q4kw_codes_at(u) + (size_t)g * Q4KW_GROUP_BYTES;
                __m256i v0 = _mm256_loadu_si256((const __m256i *)words), v1 = _mm256_loadu_si256((const __m256i *)(words + 32));
#pragma GCC unroll 8
                for (int t = 0; t < 8; t++) {
                    _mm256_storeu_ps(row + (size_t)(8 * g + t) * PT_TK, weights(_mm256_srli_epi32(v0, 4 * t), ds0, ms0));
                    _mm256_storeu_ps(row + (size_t)(8 * g + t) * PT_TK + 8, weights(_mm256_srli_epi32(v1, 4 * t), ds1, ms1));
                }
            }
        }
    }
}
#endif
