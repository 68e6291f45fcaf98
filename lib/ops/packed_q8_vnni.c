/* The AVX-512 VNNI kernel of q8w_matmul (packed_q8.h).
 *
 * vpdpbusd multiplies unsigned by signed bytes and sums each 4 into an
 * int32 lane without saturating. The weights are flipped to q + 128 as they
 * are loaded (one xor per 64 bytes, shared by every row of the tile) and
 * each row's block dot starts from -128 * sum(qx), computed once when the
 * row is quantized, so the int32 dot is the exact sum(qx * q) and the
 * float32 steps after it are the scalar code's: the same bits.
 *
 * A tile is mr rows x np panels of 16 columns, one zmm per (row, panel)
 * for the float sum and one or more for the block's integer dot: 8
 * independent dpbusd chains hide its latency, 4 rows x 2 panels or, with
 * fewer rows, one panel whose block dot is split over 2-4 registers. One
 * panel per tile at m = 1 keeps the weights a single sequential stream,
 * which measured faster from memory than 2 or 4 interleaved ones; 4 x 2
 * measured faster than 8 x 1, 6 x 2 or 12 x 1 (each x broadcast serves two
 * dpbusd). What remains per block beside the 8 dpbusd is the float
 * epilogue (convert, scale product, fma): 4 x 2 runs near 8 / 11 of the
 * vpdpbusd peak. */
#include "packed_q8_kernels.h"

#if Q8W_X86
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "packed_q8.h"

#define VNNI_FEATURES "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c"
#define TARGET_VNNI __attribute__((target(VNNI_FEATURES)))
#define INLINE_VNNI static inline __attribute__((always_inline, target(VNNI_FEATURES)))

enum {
    MR = 4,           /* rows per tile at most */
    NP = 2,           /* panels per tile at most */
    GROUP_PANELS = 4, /* panels that stay in cache while all rows pass */
    SPLIT = 4,        /* integer accumulators per block dot at most */
    ROW_CHUNK = 64,   /* rows quantized per pass */
    GROUP = 64,       /* bytes of one group: 16 columns x 4 k */
    GROUPS = Q8W_K_BLOCK / 4
};

/* Quantized rows: quants, scales and each block's -128 * sum(qx). */
typedef struct {
    const int8_t *q;
    const float *d;
    const int32_t *c;
} quant_rows;

/* Lines of weights a tile prefetches, spread over its blocks. */
typedef struct {
    const unsigned char *next;
    size_t lines_per_block;
} prefetch;

INLINE_VNNI void tile(int mr, int np, int split, float *out, int ldo, quant_rows x, int k, const unsigned char *panel,
                      size_t stride, const float *bias, int cols, prefetch pf) {
    int nb = k / Q8W_K_BLOCK;
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    __m512 acc[MR][NP];
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 4
        for (int p = 0; p < NP; p++) acc[r][p] = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const unsigned char *block = panel + q8w_quants_at(b);
        for (size_t l = 0; l < pf.lines_per_block; l++)
            _mm_prefetch((const char *)pf.next + ((size_t)b * pf.lines_per_block + l) * 64, _MM_HINT_T0);
        /* group g adds into dot[..][g % split]: shorter dependency chains */
        __m512i dot[MR][NP][SPLIT];
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++) {
            __m512i c = _mm512_set1_epi32(x.c[(size_t)r * nb + b]);
#pragma GCC unroll 4
            for (int p = 0; p < np; p++) {
                dot[r][p][0] = c;
#pragma GCC unroll 4
                for (int s = 1; s < split; s++) dot[r][p][s] = _mm512_setzero_si512();
            }
        }
#pragma GCC unroll 8
        for (int g = 0; g < GROUPS; g++) {
            __m512i w[NP];
#pragma GCC unroll 4
            for (int p = 0; p < np; p++)
                w[p] = _mm512_xor_si512(_mm512_loadu_si512(block + (size_t)p * stride + g * GROUP), flip);
#pragma GCC unroll 8
            for (int r = 0; r < mr; r++) {
                int32_t four;
                memcpy(&four, x.q + (size_t)r * k + (size_t)b * Q8W_K_BLOCK + g * 4, sizeof four);
                __m512i xq = _mm512_set1_epi32(four);
#pragma GCC unroll 4
                for (int p = 0; p < np; p++) dot[r][p][g % split] = _mm512_dpbusd_epi32(dot[r][p][g % split], w[p], xq);
            }
        }
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
            for (int p = 0; p < np; p++)
#pragma GCC unroll 4
                for (int s = 1; s < split; s++) dot[r][p][0] = _mm512_add_epi32(dot[r][p][0], dot[r][p][s]);
#pragma GCC unroll 4
        for (int p = 0; p < np; p++) {
            const unsigned char *scales = panel + (size_t)p * stride + q8w_scales_at(b);
            __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)scales));
#pragma GCC unroll 8
            for (int r = 0; r < mr; r++) {
                __m512 s = _mm512_mul_ps(_mm512_set1_ps(x.d[(size_t)r * nb + b]), d);
                acc[r][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[r][p][0]), s, acc[r][p]);
            }
        }
    }
#pragma GCC unroll 4
    for (int p = 0; p < np; p++) {
        int left = cols - p * Q8W_NR; /* the panels past n are zeros: no column stored */
        __mmask16 mask = left >= Q8W_NR ? (__mmask16)0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
        __m512 bv = bias ? _mm512_maskz_loadu_ps(mask, bias + p * Q8W_NR) : _mm512_setzero_ps();
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++) {
            __m512 o = bias ? _mm512_add_ps(acc[r][p], bv) : acc[r][p]; /* no + 0.0f: -0 stays -0 */
            _mm512_mask_storeu_ps(out + (size_t)r * ldo + p * Q8W_NR, mask, o);
        }
    }
}

/* One instance per tile shape: no wasted work on a short tile. Full
 * tiles are MR x NP; fewer rows take one panel with split dots. */
TARGET_VNNI static void tile_any(int mr, int np, float *out, int ldo, quant_rows x, int k, const unsigned char *panel,
                                 size_t stride, const float *bias, int cols, prefetch pf) {
    if (mr == MR && np == NP) {
        tile(MR, NP, 1, out, ldo, x, k, panel, stride, bias, cols, pf);
        return;
    }
    switch (mr) {
    case 1: tile(1, 1, 4, out, ldo, x, k, panel, stride, bias, cols, pf); break;
    case 2: tile(2, 1, 4, out, ldo, x, k, panel, stride, bias, cols, pf); break;
    case 3: tile(3, 1, 2, out, ldo, x, k, panel, stride, bias, cols, pf); break;
    default: tile(MR, 1, 2, out, ldo, x, k, panel, stride, bias, cols, pf); break;
    }
}

/* q8w_quantize_row, plus each block's -128 * sum(qx): the sum of the
 * flipped bytes (qx + 128) by vpsadbw, less 32 * 128. */
TARGET_VNNI static void quantize_row(const float *in, int k, int8_t *q, float *d, int32_t *c) {
    q8w_quantize_row_avx2(in, k, q, d);
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    for (int b = 0; b < k / Q8W_K_BLOCK; b++) {
        __m256i v = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(q + (size_t)b * Q8W_K_BLOCK)), flip);
        __m256i s = _mm256_sad_epu8(v, _mm256_setzero_si256());
        __m128i h = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        h = _mm_add_epi64(h, _mm_unpackhi_epi64(h, h));
        c[b] = -128 * (_mm_cvtsi128_si32(h) - Q8W_K_BLOCK * 128);
    }
}

enum { SCRATCH_QUANTS = Q8W_MAX_K };

/* One pass of rows quantized: quants, scales and corrections. */
typedef struct {
    int8_t q[SCRATCH_QUANTS];
    float d[SCRATCH_QUANTS / Q8W_K_BLOCK];
    int32_t c[SCRATCH_QUANTS / Q8W_K_BLOCK];
} scratch;

void q8w_matmul_vnni(float *out, const float *in, const void *w, const float *bias, int m, int k, int n) {
    int nb = k / Q8W_K_BLOCK, panels = (n + Q8W_NR - 1) / Q8W_NR;
    int rows_per_pass = k > 0 && SCRATCH_QUANTS / k < ROW_CHUNK ? SCRATCH_QUANTS / k : ROW_CHUNK;
    size_t stride = q8w_panel_bytes(k);
    /* Each thread owns a run of panels. The rows of a pass are quantized
     * once, shared out over the threads: at k = 576 a row's quantization
     * measured 210 ns, what 4 panels of its dots take at m = 64, so each of
     * 2 threads quantizing every row (as the AVX2 kernel does) costs an
     * estimated 10% (n = 576) to 25% (n = 192). At m = 1 each thread
     * quantizes the row itself: a barrier would cost more. The scratch
     * lives on the stacks: nothing is allocated. */
    scratch shared;
#pragma omp parallel
    {
        scratch own;
        scratch *sx = m == 1 ? &own : &shared;
        int8_t *qx = sx->q;
        float *dx = sx->d;
        int32_t *cx = sx->c;
        int p_begin, p_end;
        q8w_thread_panels(panels, &p_begin, &p_end);
        for (int r0 = 0; r0 < m; r0 += rows_per_pass) { /* every thread, for the barriers */
            int rows = m - r0 < rows_per_pass ? m - r0 : rows_per_pass;
            if (m == 1) {
                quantize_row(in, k, qx, dx, cx);
            } else {
                if (r0 > 0) { /* the previous pass is done with the scratch */
#pragma omp barrier
                }
#pragma omp for schedule(static)
                for (int r = 0; r < rows; r++)
                    quantize_row(in + (size_t)(r0 + r) * k, k, qx + (size_t)r * k, dx + (size_t)r * nb,
                                 cx + (size_t)r * nb);
            }
            for (int p0 = p_begin; p0 < p_end; p0 += GROUP_PANELS) {
                int group_end = p_end - p0 < GROUP_PANELS ? p_end : p0 + GROUP_PANELS;
                /* The tiles of this group share out the prefetch of the next
                 * group: from memory 10-25% faster at m = 16..128, but 25%
                 * slower at m = 1, whose single stream the hardware follows. */
                int next_end = rows == 1 || p_end - group_end < GROUP_PANELS ? group_end : group_end + GROUP_PANELS;
                int tiles = rows / MR * ((group_end - p0 + NP - 1) / NP) + (rows % MR ? group_end - p0 : 0);
                size_t next_lines = (size_t)(next_end - group_end) * stride / 64;
                size_t tile_lines = (next_lines + (size_t)tiles - 1) / (size_t)tiles, first = 0;
                const unsigned char *next = (const unsigned char *)w + (size_t)group_end * stride;
                for (int r = 0; r < rows; r += MR) {
                    int mr = rows - r < MR ? rows - r : MR, np = mr == MR ? NP : 1;
                    quant_rows x = {qx + (size_t)r * k, dx + (size_t)r * nb, cx + (size_t)r * nb};
                    for (int p = p0; p < group_end; p += np, first += tile_lines) {
                        int col = p * Q8W_NR;
                        size_t lines = first >= next_lines ? 0 : next_lines - first < tile_lines ? next_lines - first : tile_lines;
                        prefetch pf = {next + first * 64, nb > 0 ? (lines + (size_t)nb - 1) / (size_t)nb : 0};
                        tile_any(mr, group_end - p < np ? group_end - p : np, out + (size_t)(r0 + r) * n + col, n, x,
                                 k, (const unsigned char *)w + (size_t)p * stride, stride, bias ? bias + col : NULL,
                                 n - col, pf);
                    }
                }
            }
        }
    }
}
#endif
