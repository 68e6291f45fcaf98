/* The driver of the products on decoded tiles and their multiply-add
 * tiles, one per instruction set (packed_tile.h). A tile runs rows of the
 * input over one decoded chunk of W: every output's chain in order, the
 * partial sums in registers, so the three give the same bits. */
#include "packed_tile.h"

#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define PT_X86 1
#else
#define PT_X86 0
#endif

/* dx[rows, tk] (row stride ldx) = (start from 0 or dx) + dy[rows, nc] (row
 * stride ldy) s[nc][PT_TK] (+ bias[tk], the chain's last chunk). */
typedef void (*pt_tile_fn)(float *dx, int ldx, const float *dy, int ldy, const float *s, int nc, int rows, int tk,
                           bool zero, const float *bias);

static void tile_scalar(float *dx, int ldx, const float *dy, int ldy, const float *s, int nc, int rows, int tk,
                        bool zero, const float *bias) {
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < tk; i++) {
            float acc = zero ? 0.0f : dx[(size_t)r * ldx + i];
            for (int c = 0; c < nc; c++) acc = fmaf(dy[(size_t)r * ldy + c], s[(size_t)c * PT_TK + i], acc);
            dx[(size_t)r * ldx + i] = bias ? acc + bias[i] : acc; /* no + 0.0f: -0 stays -0 */
        }
}

#if PT_X86
#define INLINE512 static inline __attribute__((always_inline, target("avx512f")))
#define INLINE256 static inline __attribute__((always_inline, target("avx2,fma")))

enum { MR512 = 8, MR256 = 6 };

/* mr rows (a constant once inlined) x 32 columns: 16 zmm sums. */
INLINE512 void rows512(int mr, float *dx, int ldx, const float *dy, int ldy, const float *s, int nc, int tk,
                       bool zero, const float *bias) {
    __mmask16 m0 = tk >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << tk) - 1);
    __mmask16 m1 = tk >= 32 ? (__mmask16)0xFFFF : tk <= 16 ? 0 : (__mmask16)((1u << (tk - 16)) - 1);
    __m512 acc[MR512][2];
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++) {
        acc[r][0] = zero ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m0, dx + (size_t)r * ldx);
        acc[r][1] = zero ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m1, dx + (size_t)r * ldx + 16);
    }
    for (int c = 0; c < nc; c++) {
        __m512 w0 = _mm512_loadu_ps(s + (size_t)c * PT_TK), w1 = _mm512_loadu_ps(s + (size_t)c * PT_TK + 16);
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++) {
            __m512 a = _mm512_set1_ps(dy[(size_t)r * ldy + c]);
            acc[r][0] = _mm512_fmadd_ps(a, w0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(a, w1, acc[r][1]);
        }
    }
    __m512 b0 = bias ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps();
    __m512 b1 = bias ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++) {
        _mm512_mask_storeu_ps(dx + (size_t)r * ldx, m0, bias ? _mm512_add_ps(acc[r][0], b0) : acc[r][0]);
        _mm512_mask_storeu_ps(dx + (size_t)r * ldx + 16, m1, bias ? _mm512_add_ps(acc[r][1], b1) : acc[r][1]);
    }
}

__attribute__((target("avx512f"))) static void tile_avx512(float *dx, int ldx, const float *dy, int ldy,
                                                           const float *s, int nc, int rows, int tk, bool zero,
                                                           const float *bias) {
    for (int r = 0; r < rows; r += MR512) {
        float *x = dx + (size_t)r * ldx;
        const float *y = dy + (size_t)r * ldy;
        switch (rows - r < MR512 ? rows - r : MR512) { /* one instance per row count */
        case 1: rows512(1, x, ldx, y, ldy, s, nc, tk, zero, bias); break;
        case 2: rows512(2, x, ldx, y, ldy, s, nc, tk, zero, bias); break;
        case 3: rows512(3, x, ldx, y, ldy, s, nc, tk, zero, bias); break;
        case 4: rows512(4, x, ldx, y, ldy, s, nc, tk, zero, bias); break;
        case 5: rows512(5, x, ldx, y, ldy, s, nc, tk, zero, bias); break;
        case 6: rows512(6, x, ldx, y, ldy, s, nc, tk, zero, bias); break;
        case 7: rows512(7, x, ldx, y, ldy, s, nc, tk, zero, bias); break;
        default: rows512(MR512, x, ldx, y, ldy, s, nc, tk, zero, bias); break;
        }
    }
}

/* The lanes of columns below tk, as vpmaskmovps reads them. */
INLINE256 __m256i lanes_below(int tk) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(tk), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* mr rows x 16 columns (s's columns from col): 12 ymm sums at mr = 6. */
INLINE256 void rows256(int mr, float *dx, int ldx, const float *dy, int ldy, const float *s, int nc, int col, int tk,
                       bool zero, const float *bias) {
    __m256i m0 = lanes_below(tk - col), m1 = lanes_below(tk - col - 8);
    __m256 acc[MR256][2];
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
        acc[r][0] = zero ? _mm256_setzero_ps() : _mm256_maskload_ps(dx + (size_t)r * ldx + col, m0);
        acc[r][1] = zero ? _mm256_setzero_ps() : _mm256_maskload_ps(dx + (size_t)r * ldx + col + 8, m1);
    }
    for (int c = 0; c < nc; c++) {
        const float *w = s + (size_t)c * PT_TK + col;
        __m256 w0 = _mm256_loadu_ps(w), w1 = _mm256_loadu_ps(w + 8);
#pragma GCC unroll 6
        for (int r = 0; r < mr; r++) {
            __m256 a = _mm256_broadcast_ss(dy + (size_t)r * ldy + c);
            acc[r][0] = _mm256_fmadd_ps(a, w0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(a, w1, acc[r][1]);
        }
    }
    __m256 b0 = bias ? _mm256_maskload_ps(bias + col, m0) : _mm256_setzero_ps();
    __m256 b1 = bias ? _mm256_maskload_ps(bias + col + 8, m1) : _mm256_setzero_ps();
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
        _mm256_maskstore_ps(dx + (size_t)r * ldx + col, m0, bias ? _mm256_add_ps(acc[r][0], b0) : acc[r][0]);
        _mm256_maskstore_ps(dx + (size_t)r * ldx + col + 8, m1, bias ? _mm256_add_ps(acc[r][1], b1) : acc[r][1]);
    }
}

__attribute__((target("avx2,fma"))) static void tile_avx2(float *dx, int ldx, const float *dy, int ldy,
                                                          const float *s, int nc, int rows, int tk, bool zero,
                                                          const float *bias) {
    for (int col = 0; col < tk; col += 16)
        for (int r = 0; r < rows; r += MR256) {
            float *x = dx + (size_t)r * ldx;
            const float *y = dy + (size_t)r * ldy;
            switch (rows - r < MR256 ? rows - r : MR256) {
            case 1: rows256(1, x, ldx, y, ldy, s, nc, col, tk, zero, bias); break;
            case 2: rows256(2, x, ldx, y, ldy, s, nc, col, tk, zero, bias); break;
            case 3: rows256(3, x, ldx, y, ldy, s, nc, col, tk, zero, bias); break;
            case 4: rows256(4, x, ldx, y, ldy, s, nc, col, tk, zero, bias); break;
            case 5: rows256(5, x, ldx, y, ldy, s, nc, col, tk, zero, bias); break;
            default: rows256(MR256, x, ldx, y, ldy, s, nc, col, tk, zero, bias); break;
            }
        }
}
#endif

static pt_tile_fn tile_for(packed_isa isa) {
#if PT_X86
    if (isa == PACKED_AVX512) return tile_avx512;
    if (isa == PACKED_AVX2) return tile_avx2;
#endif
    (void)isa;
    return tile_scalar;
}

/* Tiles per task: enough tasks for the threads to share, and each chunk
 * of the input's rows (64 x 128 floats) reused over up to PT_GROUP tiles
 * while it is in cache. Any grouping gives the same bits. */
static int tiles_per_task(int tiles, int row_chunks) {
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    int group = (int)((long)tiles * row_chunks / (4L * threads));
    return group < 1 ? 1 : group > PT_GROUP ? PT_GROUP : group;
}

/* out[m, outs] (row stride outs) = a[m, sum] (row stride sum) B (+ out
 * when accumulate) (+ bias), B [sum, outs] decoded in tiles by decode[isa];
 * n and k are W's, passed to the decoder. */
static bool run(packed_isa isa, const pt_decode_fn decode[PACKED_ISAS], float *out, const float *a, const void *w,
                const float *bias, int m, int sum, int outs, int n, int k, bool accumulate) {
    if (!packed_isa_has(isa)) return false;
    if (m <= 0 || outs <= 0) return true;
    pt_tile_fn tile = tile_for(isa);
    int tiles = (outs + PT_TK - 1) / PT_TK, row_chunks = (m + PT_RC - 1) / PT_RC;
    int group = tiles_per_task(tiles, row_chunks), groups = (tiles + group - 1) / group;
    /* task = row chunk * groups + group of tiles; each output belongs to one task */
#pragma omp parallel for schedule(static)
    for (int task = 0; task < row_chunks * groups; task++) {
        float s[PT_CC * PT_TK] __attribute__((aligned(64)));
        int t0 = task % groups * group, t1 = t0 + group < tiles ? t0 + group : tiles, r0 = task / groups * PT_RC;
        int rows = m - r0 < PT_RC ? m - r0 : PT_RC, col0 = t0 * PT_TK, col1 = t1 * PT_TK < outs ? t1 * PT_TK : outs;
        float *o = out + (size_t)r0 * outs;
        if (sum <= 0 && !accumulate) /* the empty sum, then the bias */
            for (int r = 0; r < rows; r++)
                for (int c = col0; c < col1; c++) o[(size_t)r * outs + c] = bias ? 0.0f + bias[c] : 0.0f;
        for (int c0 = 0; c0 < sum; c0 += PT_CC) {
            int nc = sum - c0 < PT_CC ? sum - c0 : PT_CC;
            for (int t = t0; t < t1; t++) {
                int i0 = t * PT_TK, tk = outs - i0 < PT_TK ? outs - i0 : PT_TK;
                decode[isa](s, w, n, k, c0, nc, i0);
                tile(o + i0, outs, a + (size_t)r0 * sum + c0, sum, s, nc, rows, tk, c0 == 0 && !accumulate,
                     bias && c0 + nc == sum ? bias + i0 : NULL);
            }
        }
    }
    return true;
}

bool pt_matmul_t(packed_isa isa, const pt_decode_fn decode[PACKED_ISAS], float *dx, const float *dy, const void *w,
                 int m, int k, int n, bool accumulate) {
    return run(isa, decode, dx, dy, w, NULL, m, n, k, n, k, accumulate);
}

bool pt_matmul(packed_isa isa, const pt_decode_fn decode[PACKED_ISAS], float *y, const float *x, const void *w,
               const float *bias, int m, int k, int n) {
    return run(isa, decode, y, x, w, bias, m, k, n, n, k, false);
}
