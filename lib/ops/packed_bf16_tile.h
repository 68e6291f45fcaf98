/* The tiles and the per-thread driver of the AVX-512 bf16 kernels, compiled
 * once per instruction set by packed_bf16_avx512bf16.c (vdpbf16ps) and
 * packed_bf16_avx512f.c (its emulation), so that neither file's code can
 * contain the other's instructions. The includer defines first:
 *   BF16W_TARGET  the target attribute every function here carries;
 *   BF16W_ENTRY   the name of the matmul defined here;
 *   xop, wop      a broadcast pair of x, a loaded 64-byte vector of W;
 *   xop bcast_x(const uint32_t *pair); wop load_w(const unsigned char *);
 *   __m512 dot(__m512 acc, xop, wop): acc + odd products, then + even ones;
 *   void round_row(const float *x, int k, uint32_t *pairs): as
 *   bf16w_round_pairs from 0.
 *
 * A tile is mr rows x np panels of accumulators, each output's sum over
 * pairs of k in order whatever the tile: results depend neither on the
 * thread count nor on the other rows. */
#ifndef GRPO_OPS_PACKED_BF16_TILE_H
#define GRPO_OPS_PACKED_BF16_TILE_H

#include <assert.h>
#include <immintrin.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <stdint.h>

#include "packed_bf16.h"

#define TILE_INLINE static inline __attribute__((always_inline)) BF16W_TARGET

enum {
    MR = 12, /* rows per tile: 24 accumulators, 2 weight vectors and x of the 32 registers */
    NP = 4,  /* the most panels per tile, walked together by tiles of 1 to 3 rows (8 panels
              * measured 2.4x slower at m = 1: panels 2^k bytes apart share L1 sets) */
    PAIR_BYTES = BF16W_NR * 4,
    SCRATCH_PAIRS = BF16W_MAX_K / 2
};

/* out[mr, 32 np] (row stride ldo, masked past n_left columns) = x[mr]
 * (rows of kp pairs) @ np panels (stride bytes apart) (+ bias). */
TILE_INLINE void tile(int mr, int np, float *out, int ldo, const uint32_t *x, int kp, const unsigned char *panel,
                      size_t stride, const float *bias, int n_left) {
    __m512 acc[MR][2 * NP];
#pragma GCC unroll 12
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 8
        for (int j = 0; j < 2 * np; j++) acc[r][j] = _mm512_setzero_ps();
    for (int i = 0; i < kp; i++) {
        wop w[2 * NP];
#pragma GCC unroll 8
        for (int j = 0; j < 2 * np; j++)
            w[j] = load_w(panel + (size_t)(j / 2) * stride + (size_t)i * PAIR_BYTES + j % 2 * 64);
#pragma GCC unroll 12
        for (int r = 0; r < mr; r++) {
            xop a = bcast_x(x + (size_t)r * kp + i);
#pragma GCC unroll 8
            for (int j = 0; j < 2 * np; j++) acc[r][j] = dot(acc[r][j], a, w[j]);
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < 2 * np; j++) {
        int cols = n_left - 16 * j; /* of this 16-column half */
        if (cols <= 0) break;
        __mmask16 mask = cols >= 16 ? 0xFFFF : (__mmask16)((1u << cols) - 1);
        __m512 b = bias ? _mm512_maskz_loadu_ps(mask, bias + 16 * j) : _mm512_setzero_ps();
#pragma GCC unroll 12
        for (int r = 0; r < mr; r++) /* no + 0 without bias: the sums' bits as they are */
            _mm512_mask_storeu_ps(out + (size_t)r * ldo + 16 * j, mask, bias ? _mm512_add_ps(acc[r][j], b) : acc[r][j]);
    }
}

typedef struct {
    float *out;
    const float *in;
    const unsigned char *w;
    const float *bias;
    int m, k, n;
} bf16w_call;

#define TILE_ARGS out, ldo, x, kp, panel, stride, bias, n_left
#define TILE_CASE(rows, panels) \
    case rows * 16 + panels: tile(rows, panels, TILE_ARGS); break;

/* Panels per tile of mr rows: 2 mr np independent sums hide vdpbf16ps's
 * 6-cycle latency where the rows alone do not. */
static int tile_panels(int mr) { return mr <= 2 ? 4 : mr == 3 ? 2 : 1; }

/* One instance per (rows, panels): m = 1 does no wasted work. */
BF16W_TARGET __attribute__((noinline)) static void tile_rows(int mr, int np, float *out, int ldo, const uint32_t *x,
                                                             int kp, const unsigned char *panel, size_t stride,
                                                             const float *bias, int n_left) {
    switch (mr * 16 + np) {
        TILE_CASE(1, 4)
        TILE_CASE(1, 2)
        TILE_CASE(1, 1)
        TILE_CASE(2, 4)
        TILE_CASE(2, 2)
        TILE_CASE(2, 1)
        TILE_CASE(3, 2)
        TILE_CASE(3, 1)
        TILE_CASE(4, 1)
        TILE_CASE(5, 1)
        TILE_CASE(6, 1)
        TILE_CASE(7, 1)
        TILE_CASE(8, 1)
        TILE_CASE(9, 1)
        TILE_CASE(10, 1)
        TILE_CASE(11, 1)
        TILE_CASE(12, 1)
    default: assert(!"a tile shape without an instance");
    }
}

/* Rows per pass: as many as the scratch holds (SCRATCH_PAIRS / kp), the
 * passes of equal size, whole tiles where that costs no extra pass. */
static int rows_per_pass(int m, int kp) {
    int cap = kp > 0 && SCRATCH_PAIRS / kp < m ? SCRATCH_PAIRS / kp : m;
    int passes = (m + cap - 1) / cap, rows = (m + passes - 1) / passes;
    int whole = (rows + MR - 1) / MR * MR;
    return whole <= cap ? whole : rows;
}

/* Thread t's run of panels, for every row: it rounds each pass of rows
 * itself (a k-sized job against n/threads-sized dots), so no buffer is
 * shared or allocated, and the pass stays in cache while its panels stream. */
BF16W_TARGET static void thread_share(const bf16w_call *c, int t, int threads) {
    uint32_t x[SCRATCH_PAIRS];
    int kp = (c->k + 1) / 2, panels = (c->n + BF16W_NR - 1) / BF16W_NR;
    int p_begin = (int)((long)panels * t / threads), p_end = (int)((long)panels * (t + 1) / threads);
    int per_pass = rows_per_pass(c->m, kp);
    size_t stride = (size_t)kp * PAIR_BYTES;
    for (int r0 = 0; p_begin < p_end && r0 < c->m; r0 += per_pass) {
        int rows = c->m - r0 < per_pass ? c->m - r0 : per_pass;
        for (int r = 0; r < rows; r++) round_row(c->in + (size_t)(r0 + r) * c->k, c->k, x + (size_t)r * kp);
        for (int p = p_begin; p < p_end; p += NP) {
            int group = p_end - p < NP ? p_end - p : NP;
            int blocks = (rows + MR - 1) / MR; /* of near-equal rows: 16 is 8 + 8, not 12 + 4 */
            for (int b = 0, r = 0; b < blocks; r += rows / blocks + (b < rows % blocks), b++) {
                int mr = rows / blocks + (b < rows % blocks);
                for (int q = p, np; q < p + group; q += np) {
                    np = tile_panels(mr);
                    while (np > p + group - q) np /= 2; /* the group's tail: powers of two */
                    int col = q * BF16W_NR;
                    tile_rows(mr, np, c->out + (size_t)(r0 + r) * c->n + col, c->n, x + (size_t)r * kp, kp,
                              c->w + (size_t)q * stride, stride, c->bias ? c->bias + col : NULL, c->n - col);
                }
            }
        }
    }
}

void BF16W_ENTRY(float *out, const float *in, const void *w, const float *bias, int m, int k, int n) {
    bf16w_call c = {out, in, w, bias, m, k, n};
#ifdef _OPENMP
#pragma omp parallel
    thread_share(&c, omp_get_thread_num(), omp_get_num_threads());
#else
    thread_share(&c, 0, 1);
#endif
}

#undef TILE_ARGS
#undef TILE_CASE
#undef TILE_INLINE

#endif
