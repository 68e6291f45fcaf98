/* The AVX2 kernels over MXFP4 panels (packed_mxfp4.h): the matmul and the
 * transposed product's decoder, the bits of the portable code and of the
 * AVX-512 kernels.
 *
 * vpermps on 8 lanes looks up 3 bits: a code's magnitude (its low 3 bits)
 * is looked up in the positive half of MX4W_HALF_UNITS and in the negative
 * half, and its sign bit (bit 3, shifted to bit 31) picks one (code 8 gives
 * +0, as the table). Sixteen ymm registers hold a tile of 4 rows x one
 * panel (two halves of 8 columns) of float32 sums, each a fused
 * multiply-add chain over k in order. */
#include "packed_mxfp4_kernels.h"

#if MX4W_X86
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define TARGET __attribute__((target("avx2,fma")))
#define INLINE static inline __attribute__((always_inline, target("avx2,fma")))

enum { MR = 4, ROW_CHUNK = 64 };

typedef struct {
    __m256 pos, neg;
} luts;

INLINE luts half_units(void) {
    return (luts){_mm256_setr_ps(0, 1, 2, 3, 4, 6, 8, 12), _mm256_setr_ps(0, -1, -2, -3, -4, -6, -8, -12)};
}

/* The codes in the low 4 bits of each lane's word, as their values in half units. */
INLINE __m256 lookup(__m256i words, luts t) {
    __m256 sign = _mm256_castsi256_ps(_mm256_slli_epi32(words, 28));
    return _mm256_blendv_ps(_mm256_permutevar8x32_ps(t.pos, words), _mm256_permutevar8x32_ps(t.neg, words), sign);
}

/* 8 columns' scales from their e bytes, 2^(e - 128) as mx4w_scale computes it. */
INLINE __m256 scales8(const unsigned char *e8) {
    __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)e8));
    __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    __m256i tiny = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, tiny, small));
}

/* out[mr, 16] (row stride ldo, masked past cols) = x[mr] (row stride k) @ one panel (+ bias). */
INLINE void tile(int mr, float *out, int ldo, const float *x, int k, const unsigned char *panel, const float *bias,
                 int cols) {
    const luts t8 = half_units();
    __m256 acc[MR][2];
#pragma GCC unroll 4
    for (int r = 0; r < mr; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int b = 0; b < k / MX4W_K_BLOCK; b++) {
        const unsigned char *e = panel + mx4w_scales_at(b);
        __m256 d0 = scales8(e), d1 = scales8(e + 8);
        const float *xb = x + (size_t)b * MX4W_K_BLOCK;
        for (int g = 0; g < 4; g++) {
            const unsigned char *words = panel + mx4w_codes_at(b) + (size_t)g * MX4W_GROUP_BYTES;
            __m256i v0 = _mm256_loadu_si256((const __m256i *)words), v1 = _mm256_loadu_si256((const __m256i *)(words + 32));
#pragma GCC unroll 8
            for (int t = 0; t < 8; t++) {
                __m256 w0 = _mm256_mul_ps(lookup(_mm256_srli_epi32(v0, 4 * t), t8), d0);
                __m256 w1 = _mm256_mul_ps(lookup(_mm256_srli_epi32(v1, 4 * t), t8), d1);
#pragma GCC unroll 4
                for (int r = 0; r < mr; r++) {
                    __m256 a = _mm256_broadcast_ss(xb + (size_t)r * k + g * 8 + t);
                    acc[r][0] = _mm256_fmadd_ps(a, w0, acc[r][0]);
                    acc[r][1] = _mm256_fmadd_ps(a, w1, acc[r][1]);
                }
            }
        }
    }
    float bb[MX4W_NR] = {0};
    int nc = cols < MX4W_NR ? cols : MX4W_NR;
    if (bias) memcpy(bb, bias, sizeof(float) * (size_t)nc);
    __m256 b0 = _mm256_loadu_ps(bb), b1 = _mm256_loadu_ps(bb + 8);
    for (int r = 0; r < mr; r++) {
        float o[MX4W_NR]; /* no + 0 without bias: -0 stays -0 */
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

void mx4w_matmul_avx2(float *out, const float *in, const void *w, const float *bias, int m, int k, int n) {
    int panels = (n + MX4W_NR - 1) / MX4W_NR, chunks = (m + ROW_CHUNK - 1) / ROW_CHUNK;
    size_t stride = mx4w_panel_bytes(k);
    /* task = chunk * panels + panel: each thread takes a run of panels of one chunk of rows */
#pragma omp parallel for schedule(static)
    for (int task = 0; task < chunks * panels; task++) {
        int p = task % panels, col = p * MX4W_NR, r_end = (task / panels + 1) * ROW_CHUNK;
        if (r_end > m) r_end = m;
        for (int r = task / panels * ROW_CHUNK; r < r_end; r += MR)
            tile_rows(r_end - r < MR ? r_end - r : MR, out + (size_t)r * n + col, n, in + (size_t)r * k, k,
                      (const unsigned char *)w + (size_t)p * stride, bias ? bias + col : NULL, n - col);
    }
}

/* The transposed product's decoder: s[c][i] = W[c0 + c][i0 + i]. Each
 * group's word of a column holds 8 consecutive codes: broadcast, shifted
 * per lane, looked up and scaled, 8 weights a vector. */
TARGET void mx4w_decode_t_avx2(float *s, const void *w, int n, int k, int c0, int nc, int i0) {
    (void)n;
    const luts t8 = half_units();
    const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    int b = i0 / MX4W_K_BLOCK;
    for (int c = 0; c < nc; c++) {
        int col = c0 + c, j = col % MX4W_NR;
        const unsigned char *panel = (const unsigned char *)w + (size_t)(col / MX4W_NR) * mx4w_panel_bytes(k);
        const unsigned char *codes = panel + mx4w_codes_at(b) + (size_t)j * 4;
        __m256 d = _mm256_set1_ps(mx4w_scale(panel[mx4w_scales_at(b) + (size_t)j]));
        for (int g = 0; g < 4; g++) {
            int32_t word;
            memcpy(&word, codes + (size_t)g * MX4W_GROUP_BYTES, sizeof word);
            __m256i lanes = _mm256_srlv_epi32(_mm256_set1_epi32(word), shifts);
            _mm256_storeu_ps(s + (size_t)c * PT_TK + 8 * g, _mm256_mul_ps(lookup(lanes, t8), d));
        }
    }
}
#endif
