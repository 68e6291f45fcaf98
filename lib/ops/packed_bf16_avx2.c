/* The AVX2 kernel of packed_bf16.h, for CPUs without AVX-512: the bf16
 * widened to float32 (a mask for the odd k, a shift for the even one) and,
 * per pair of k, the odd product then the even one added by fused
 * multiply-adds: the bits of the AVX-512F emulation (the products are exact,
 * so each fma rounds once as vdpbf16ps's additions do).
 *
 * Sixteen ymm registers hold 8 accumulators of 8 columns: a tile is 3 or 4
 * rows x the 16 columns of half a panel (its weights widened once per pair
 * of k, each row's x per use), 2 rows x a panel, or 1 row x two panels (x
 * widened once, the weights per use), so that even one row keeps 8
 * independent sums in flight. */
#include "packed_bf16_kernels.h"

#if BF16W_X86
#include <assert.h>
#include <immintrin.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <stdint.h>
#include <string.h>

#include "packed_bf16.h"

#define TARGET __attribute__((target("avx2,fma")))
#define INLINE static inline __attribute__((always_inline)) TARGET

enum {
    PAIR_BYTES = BF16W_NR * 4,     /* one pair of k for a panel's 32 columns */
    GROUP = 8,                     /* columns per accumulator */
    GROUPS_PER_PANEL = BF16W_NR / GROUP,
    MR = 4,                        /* the most rows per tile */
    SCRATCH_PAIRS = BF16W_MAX_K / 2
};

typedef struct {
    __m256 odd, even;
} pair8;

INLINE pair8 widen(__m256i pairs) {
    return (pair8){_mm256_castsi256_ps(_mm256_and_si256(pairs, _mm256_set1_epi32((int)0xFFFF0000u))),
                   _mm256_castsi256_ps(_mm256_slli_epi32(pairs, 16))};
}
INLINE pair8 x_pair(const uint32_t *pair) { return widen(_mm256_set1_epi32((int)*pair)); }
INLINE pair8 w_pairs(const unsigned char *p) { return widen(_mm256_loadu_si256((const __m256i *)p)); }
INLINE __m256 dot(__m256 acc, pair8 x, pair8 w) {
    return _mm256_fmadd_ps(x.even, w.even, _mm256_fmadd_ps(x.odd, w.odd, acc));
}

/* bf16w_round on 8 floats into 4 pairs: nearest even by integer addition,
 * NaN quieted and truncated, float32 subnormals to signed zero. */
INLINE void round8(const float *x, uint32_t *pairs) {
    __m256i b = _mm256_castps_si256(_mm256_loadu_ps(x));
    __m256i hi = _mm256_srli_epi32(b, 16);
    __m256i r = _mm256_srli_epi32(
        _mm256_add_epi32(b, _mm256_add_epi32(_mm256_set1_epi32(0x7FFF), _mm256_and_si256(hi, _mm256_set1_epi32(1)))),
        16);
    __m256i mag = _mm256_and_si256(b, _mm256_set1_epi32(0x7FFFFFFF)); /* both sides positive: a signed compare */
    __m256i nan = _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x7F800000));
    __m256i tiny = _mm256_cmpeq_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x7F800000)), _mm256_setzero_si256());
    r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), nan);
    r = _mm256_blendv_epi8(r, _mm256_and_si256(hi, _mm256_set1_epi32(0x8000)), tiny);
    /* the 8 low halves in order: pack within each 128-bit lane, then join the lanes */
    __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    _mm_storeu_si128((__m128i *)pairs, _mm256_castsi256_si128(packed));
}

TARGET static void round_row(const float *x, int k, uint32_t *pairs) {
    int i = 0;
    for (; i + 8 <= k; i += 8) round8(x + i, pairs + i / 2);
    bf16w_round_pairs(x, k, i, pairs);
}

/* Byte offset of column group g of a tile starting at a panel: groups run
 * on into the next panel (stride bytes on). */
static inline size_t group_offset(int g, size_t stride) {
    return (size_t)(g / GROUPS_PER_PANEL) * stride + (size_t)(g % GROUPS_PER_PANEL) * GROUP * 4;
}

/* The mr x ng accumulators (+ bias) into out, the columns past n_left left alone. */
INLINE void store(int mr, int ng, __m256 acc[MR][GROUPS_PER_PANEL * 2], float *out, int ldo, const float *bias,
                  int n_left) {
#pragma GCC unroll 8
    for (int g = 0; g < ng; g++) {
        int cols = n_left - GROUP * g;
        if (cols <= 0) break;
        float b[GROUP] = {0}, o[GROUP];
        if (bias) memcpy(b, bias + GROUP * g, sizeof(float) * (size_t)(cols < GROUP ? cols : GROUP));
        __m256 bv = _mm256_loadu_ps(b);
#pragma GCC unroll 4
        for (int r = 0; r < mr; r++) {
            __m256 v = bias ? _mm256_add_ps(acc[r][g], bv) : acc[r][g]; /* no + 0 without bias: the sums as they are */
            if (cols >= GROUP) {
                _mm256_storeu_ps(out + (size_t)r * ldo + GROUP * g, v);
            } else {
                _mm256_storeu_ps(o, v);
                memcpy(out + (size_t)r * ldo + GROUP * g, o, sizeof(float) * (size_t)cols);
            }
        }
    }
}

/* mr (3 or 4) rows x 2 groups (half a panel): the weights widened once per pair. */
INLINE void tile_rows(int mr, float *out, int ldo, const uint32_t *x, int kp, const unsigned char *w,
                      const float *bias, int n_left) {
    __m256 acc[MR][GROUPS_PER_PANEL * 2];
#pragma GCC unroll 4
    for (int r = 0; r < mr; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int i = 0; i < kp; i++) {
        const unsigned char *p = w + (size_t)i * PAIR_BYTES;
        pair8 w0 = w_pairs(p), w1 = w_pairs(p + 32);
#pragma GCC unroll 4
        for (int r = 0; r < mr; r++) {
            pair8 a = x_pair(x + (size_t)r * kp + i);
            acc[r][0] = dot(acc[r][0], a, w0);
            acc[r][1] = dot(acc[r][1], a, w1);
        }
    }
    store(mr, 2, acc, out, ldo, bias, n_left);
}

/* mr (1 or 2) rows x ng groups (4: a panel, 8: two), x widened once per pair. */
INLINE void tile_cols(int mr, int ng, float *out, int ldo, const uint32_t *x, int kp, const unsigned char *w,
                      size_t stride, const float *bias, int n_left) {
    __m256 acc[MR][GROUPS_PER_PANEL * 2];
#pragma GCC unroll 2
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 8
        for (int g = 0; g < ng; g++) acc[r][g] = _mm256_setzero_ps();
    for (int i = 0; i < kp; i++) {
        pair8 a[2];
#pragma GCC unroll 2
        for (int r = 0; r < mr; r++) a[r] = x_pair(x + (size_t)r * kp + i);
#pragma GCC unroll 8
        for (int g = 0; g < ng; g++) {
            pair8 wg = w_pairs(w + group_offset(g, stride) + (size_t)i * PAIR_BYTES);
#pragma GCC unroll 2
            for (int r = 0; r < mr; r++) acc[r][g] = dot(acc[r][g], a[r], wg);
        }
    }
    store(mr, ng, acc, out, ldo, bias, n_left);
}

/* One instance per shape, each with its loops unrolled. */
TARGET __attribute__((noinline)) static void tile(int mr, int ng, float *out, int ldo, const uint32_t *x, int kp,
                                                  const unsigned char *w, size_t stride, const float *bias,
                                                  int n_left) {
    switch (mr * 16 + ng) {
    case 4 * 16 + 2: tile_rows(4, out, ldo, x, kp, w, bias, n_left); break;
    case 3 * 16 + 2: tile_rows(3, out, ldo, x, kp, w, bias, n_left); break;
    case 2 * 16 + 4: tile_cols(2, 4, out, ldo, x, kp, w, stride, bias, n_left); break;
    case 1 * 16 + 8: tile_cols(1, 8, out, ldo, x, kp, w, stride, bias, n_left); break;
    case 1 * 16 + 4: tile_cols(1, 4, out, ldo, x, kp, w, stride, bias, n_left); break;
    default: assert(!"a tile shape without an instance");
    }
}

/* Rows per pass: as many as the scratch holds, the passes of equal size. */
static int rows_per_pass(int m, int kp) {
    int cap = kp > 0 && SCRATCH_PAIRS / kp < m ? SCRATCH_PAIRS / kp : m;
    int passes = (m + cap - 1) / cap;
    return (m + passes - 1) / passes;
}

/* Thread t's run of panels, for every row; as packed_bf16_tile.h's, it
 * rounds each pass of rows itself, so nothing is shared or allocated. */
TARGET static void thread_share(float *out, const float *in, const unsigned char *w, const float *bias, int m, int k,
                                int n, int t, int threads) {
    uint32_t x[SCRATCH_PAIRS];
    int kp = (k + 1) / 2, panels = (n + BF16W_NR - 1) / BF16W_NR;
    int p_begin = (int)((long)panels * t / threads), p_end = (int)((long)panels * (t + 1) / threads);
    int per_pass = rows_per_pass(m, kp);
    size_t stride = (size_t)kp * PAIR_BYTES;
    for (int r0 = 0; p_begin < p_end && r0 < m; r0 += per_pass) {
        int rows = m - r0 < per_pass ? m - r0 : per_pass;
        for (int r = 0; r < rows; r++) round_row(in + (size_t)(r0 + r) * k, k, x + (size_t)r * kp);
        int blocks = (rows + MR - 1) / MR; /* of near-equal rows: 6 is 3 + 3, not 4 + 2 */
        /* two panels at a time, each block of rows over them while they are in cache */
        for (int p = p_begin; p < p_end; p += 2) {
            int group = p_end - p < 2 ? p_end - p : 2;
            for (int b = 0, r = 0; b < blocks; r += rows / blocks + (b < rows % blocks), b++) {
                int mr = rows / blocks + (b < rows % blocks);
                const uint32_t *xr = x + (size_t)r * kp;
                float *o = out + (size_t)(r0 + r) * n;
                if (mr == 1 && group == 2) {
                    tile(1, 8, o + p * BF16W_NR, n, xr, kp, w + (size_t)p * stride, stride,
                         bias ? bias + p * BF16W_NR : NULL, n - p * BF16W_NR);
                    continue;
                }
                for (int q = p; q < p + group; q++) {
                    int col = q * BF16W_NR;
                    const unsigned char *wq = w + (size_t)q * stride;
                    const float *bq = bias ? bias + col : NULL;
                    if (mr <= 2) {
                        tile(mr, 4, o + col, n, xr, kp, wq, stride, bq, n - col);
                        continue;
                    }
                    tile(mr, 2, o + col, n, xr, kp, wq, stride, bq, n - col);
                    if (n - col > BF16W_NR / 2)
                        tile(mr, 2, o + col + BF16W_NR / 2, n, xr, kp, wq + BF16W_NR / 2 * 4, stride,
                             bq ? bq + BF16W_NR / 2 : NULL, n - col - BF16W_NR / 2);
                }
            }
        }
    }
}

void bf16w_matmul_avx2(float *out, const float *in, const void *w, const float *bias, int m, int k, int n) {
#ifdef _OPENMP
#pragma omp parallel
    thread_share(out, in, w, bias, m, k, n, omp_get_thread_num(), omp_get_num_threads());
#else
    thread_share(out, in, w, bias, m, k, n, 0, 1);
#endif
}
#endif
