/* The AVX-512 kernels over Q4_K panels (packed_q4k.h): the matmul and the
 * transposed product's decoder.
 *
 * A code word (one column's 8 codes of a group) sits in one 32-bit lane,
 * so 16 columns' codes of one k are a shift and a mask of the group's 64
 * bytes; converted and scaled as the portable code does ((d sc) q, then
 * - dmin mn, each rounded) they are the exact weights. A tile is up to 8
 * rows x 2 panels of float32 sums (16 zmm), each a fused multiply-add chain
 * over k in order: the portable code's bits. */
#include "packed_q4k_kernels.h"

#if Q4KW_X86
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define TARGET __attribute__((target("avx512f")))
#define INLINE static inline __attribute__((always_inline, target("avx512f")))

enum { MR = 8, NP = 2, ROW_CHUNK = 64 };

/* Sub-block u's 16 columns' d sc (*ds) and dmin mn (*ms). */
INLINE void sub_scales(const unsigned char *panel, int u, __m512 *ds, __m512 *ms) {
    const unsigned char *head = panel + q4kw_head_at(u);
    int s = u % Q4KW_SUBS;
    __m512 sc = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(head + Q4KW_SC_AT + Q4KW_NR * s))));
    __m512 mn = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(head + Q4KW_MN_AT + Q4KW_NR * s))));
    *ds = _mm512_mul_ps(_mm512_loadu_ps(head), sc);
    *ms = _mm512_mul_ps(_mm512_loadu_ps(head + Q4KW_DMIN_AT), mn);
}

/* The weights of the codes in each lane's low 4 bits. */
INLINE __m512 weights(__m512i lanes, __m512 ds, __m512 ms) {
    __m512 q = _mm512_cvtepi32_ps(_mm512_and_si512(lanes, _mm512_set1_epi32(15)));
    return _mm512_sub_ps(_mm512_mul_ps(ds, q), ms);
}

/* out[mr, 16 np] (row stride ldo, masked past cols) = x[mr] (row stride k) @ np panels (stride bytes apart) (+ bias). */
INLINE void tile(int mr, int np, float *out, int ldo, const float *x, int k, const unsigned char *panel, size_t stride,
                 const float *bias, int cols) {
    __m512 acc[MR][NP];
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 2
        for (int p = 0; p < np; p++) acc[r][p] = _mm512_setzero_ps();
    for (int u = 0; u < k / Q4KW_K_SUB; u++) {
        __m512 ds[NP], ms[NP];
#pragma GCC unroll 2
        for (int p = 0; p < np; p++) sub_scales(panel + (size_t)p * stride, u, &ds[p], &ms[p]);
        const float *xb = x + (size_t)u * Q4KW_K_SUB;
        for (int g = 0; g < 4; g++) {
            __m512i words[NP];
#pragma GCC unroll 2
            for (int p = 0; p < np; p++)
                words[p] = _mm512_loadu_si512(panel + (size_t)p * stride + q4kw_codes_at(u) + (size_t)g * Q4KW_GROUP_BYTES);
#pragma GCC unroll 8
            for (int t = 0; t < 8; t++) {
                __m512 w[NP];
#pragma GCC unroll 2
                for (int p = 0; p < np; p++) w[p] = weights(_mm512_srli_epi32(words[p], 4 * t), ds[p], ms[p]);
#pragma GCC unroll 8
                for (int r = 0; r < mr; r++) {
                    __m512 a = _mm512_set1_ps(xb[(size_t)r * k + g * 8 + t]);
#pragma GCC unroll 2
                    for (int p = 0; p < np; p++) acc[r][p] = _mm512_fmadd_ps(a, w[p], acc[r][p]);
                }
            }
        }
    }
#pragma GCC unroll 2
    for (int p = 0; p < np; p++) {
        int left = cols - p * Q4KW_NR;
        __mmask16 mask = left >= Q4KW_NR ? (__mmask16)0xFFFF : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
        __m512 bv = bias ? _mm512_maskz_loadu_ps(mask, bias + p * Q4KW_NR) : _mm512_setzero_ps();
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++) /* no + 0 without bias: -0 stays -0 */
            _mm512_mask_storeu_ps(out + (size_t)r * ldo + p * Q4KW_NR, mask, bias ? _mm512_add_ps(acc[r][p], bv) : acc[r][p]);
    }
}

#define TILE_ARGS out, ldo, x, k, panel, stride, bias, cols
#define TILE_CASE(rows, panels) \
    case rows * 4 + panels: tile(rows, panels, TILE_ARGS); break;

/* One instance per (rows, panels): a short tile does no wasted work. */
TARGET __attribute__((noinline)) static void tile_any(int mr, int np, float *out, int ldo, const float *x, int k,
                                                      const unsigned char *panel, size_t stride, const float *bias,
                                                      int cols) {
    switch (mr * 4 + np) {
        TILE_CASE(1, 1) TILE_CASE(2, 1) TILE_CASE(3, 1) TILE_CASE(4, 1)
        TILE_CASE(5, 1) TILE_CASE(6, 1) TILE_CASE(7, 1) TILE_CASE(8, 1)
        TILE_CASE(1, 2) TILE_CASE(2, 2) TILE_CASE(3, 2) TILE_CASE(4, 2)
        TILE_CASE(5, 2) TILE_CASE(6, 2) TILE_CASE(7, 2) TILE_CASE(8, 2)
    default: break;
    }
}

void q4kw_matmul_avx512(float *out, const float *in, const void *w, const float *bias, int m, int k, int n) {
    int pairs = (n + NP * Q4KW_NR - 1) / (NP * Q4KW_NR), chunks = (m + ROW_CHUNK - 1) / ROW_CHUNK;
    size_t stride = q4kw_panel_bytes(k);
    /* task = chunk * pairs + pair of panels: each thread takes a run of panels of one chunk of rows */
#pragma omp parallel for schedule(static)
    for (int task = 0; task < chunks * pairs; task++) {
        int col = task % pairs * NP * Q4KW_NR, r_end = (task / pairs + 1) * ROW_CHUNK;
        int np = n - col > Q4KW_NR ? NP : 1;
        const unsigned char *panel = (const unsigned char *)w + (size_t)(col / Q4KW_NR) * stride;
        if (r_end > m) r_end = m;
        for (int r = task / pairs * ROW_CHUNK; r < r_end; r += MR)
            tile_any(r_end - r < MR ? r_end - r : MR, np, out + (size_t)r * n + col, n, in + (size_t)r * k, k, panel,
                     stride, bias ? bias + col : NULL, n - col);
    }
}

/* The transposed product's decoder: s[c][i] = W[c0 + c][i0 + i]. Column
 * j's codes of k 0..15 of the sub-block are word j of groups 0 and 1 (k
 * 16..31: groups 2 and 3), one vpermt2d away from a vector whose lanes
 * hold them; each lane then shifts its code down and scales it. */
TARGET void q4kw_decode_t_avx512(float *s, const void *w, int n, int k, int c0, int nc, int i0) {
    (void)n;
    const __m512i shifts = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
    const __m512i halves = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 16, 16, 16, 16, 16, 16, 16, 16);
    int u = i0 / Q4KW_K_SUB;
    for (int c = 0; c < nc;) {
        const unsigned char *panel = (const unsigned char *)w + (size_t)((c0 + c) / Q4KW_NR) * q4kw_panel_bytes(k);
        const unsigned char *codes = panel + q4kw_codes_at(u);
        float ds[Q4KW_NR], ms[Q4KW_NR];
        __m512 vds, vms;
        sub_scales(panel, u, &vds, &vms);
        _mm512_storeu_ps(ds, vds), _mm512_storeu_ps(ms, vms);
        __m512i g0 = _mm512_loadu_si512(codes), g1 = _mm512_loadu_si512(codes + Q4KW_GROUP_BYTES);
        __m512i g2 = _mm512_loadu_si512(codes + 2 * Q4KW_GROUP_BYTES), g3 = _mm512_loadu_si512(codes + 3 * Q4KW_GROUP_BYTES);
        for (int j = (c0 + c) % Q4KW_NR; j < Q4KW_NR && c < nc; j++, c++) {
            __m512i idx = _mm512_add_epi32(halves, _mm512_set1_epi32(j));
            __m512 dj = _mm512_set1_ps(ds[j]), mj = _mm512_set1_ps(ms[j]);
            __m512i lo = _mm512_srlv_epi32(_mm512_permutex2var_epi32(g0, idx, g1), shifts);
            __m512i hi = _mm512_srlv_epi32(_mm512_permutex2var_epi32(g2, idx, g3), shifts);
            _mm512_storeu_ps(s + (size_t)c * PT_TK, weights(lo, dj, mj));
            _mm512_storeu_ps(s + (size_t)c * PT_TK + 16, weights(hi, dj, mj));
        }
    }
}
/* The forward product's decoder: s[c][j] = W[i0 + j][c0 + c], two
 * panels side by side as they lie, each group's 16 columns of one k a
 * shift, a mask and a scale of its 64 bytes (0 past n). */
TARGET void q4kw_decode_f_avx512(float *s, const void *w, int n, int k, int c0, int nc, int i0) {
    size_t stride = q4kw_panel_bytes(k);
    for (int h = 0; h < 2; h++) {
        float *dst = s + Q4KW_NR * h;
        if (i0 + Q4KW_NR * h >= n) {
            for (int c = 0; c < nc; c++) _mm512_storeu_ps(dst + (size_t)c * PT_TK, _mm512_setzero_ps());
            continue;
        }
        const unsigned char *panel = (const unsigned char *)w + (size_t)(i0 / Q4KW_NR + h) * stride;
        for (int u = c0 / Q4KW_K_SUB; u < (c0 + nc) / Q4KW_K_SUB; u++) {
            __m512 ds, ms;
            sub_scales(panel, u, &ds, &ms);
            float *row = dst + (size_t)(u * Q4KW_K_SUB - c0) * PT_TK;
            for (int g = 0; g < 4; g++) {
                __m512i words = _mm512_loadu_si512(panel + q4kw_codes_at(u) + (size_t)g * Q4KW_GROUP_BYTES);
#pragma GCC unroll 8
                for (int t = 0; t < 8; t++)
                    _mm512_storeu_ps(row + (size_t)(8 * g + t) * PT_TK, weights(_mm512_srli_epi32(words, 4 * t), ds, ms));
            }
        }
    }
}
#endif
