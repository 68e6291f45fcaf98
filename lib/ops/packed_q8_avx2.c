/* AVX2 kernels over the 8-bit panels of packed_q8.h: int8 x int8
 * (q8w_matmul) and weights widened to float32 (q8w_matmul_widen).
 *
 * Both walk one 16-column panel for up to 4 rows at a time (8 float
 * accumulators in registers; one instance per row count, so m = 1 does no
 * wasted work), each output computed by one kernel call with its sums over
 * k in order: results depend neither on the thread count nor on the other
 * rows. */
#include "packed_q8_kernels.h"

#if Q8W_X86
#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "packed_q8.h"

#define TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define INLINE_AVX2 static inline __attribute__((always_inline, target("avx2,fma,f16c")))

enum { MR = 4 /* rows per kernel call */, ROW_CHUNK = 64 };

/* Block b's 16 scales as float32 (exact), 8 columns each. */
INLINE_AVX2 void load_scales(const unsigned char *panel, int b, __m256 *d0, __m256 *d1) {
    const unsigned char *scales = panel + q8w_scales_at(b);
    *d0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)scales));
    *d1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(scales + 16)));
}

/* out[mr, nr] (row stride ldo) = 8 accumulators + bias, masked past nr. */
INLINE_AVX2 void store_rows(int mr, __m256 acc[MR][2], float *out, int ldo, const float *bias, int nr) {
    float b[Q8W_NR] = {0};
    if (bias) memcpy(b, bias, sizeof(float) * (size_t)nr);
    __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    for (int r = 0; r < mr; r++) {
        __m256 o0 = bias ? _mm256_add_ps(acc[r][0], b0) : acc[r][0];
        __m256 o1 = bias ? _mm256_add_ps(acc[r][1], b1) : acc[r][1];
        float *dst = out + (size_t)r * ldo;
        if (nr == Q8W_NR) {
            _mm256_storeu_ps(dst, o0);
            _mm256_storeu_ps(dst + 8, o1);
        } else {
            float tmp[Q8W_NR];
            _mm256_storeu_ps(tmp, o0);
            _mm256_storeu_ps(tmp + 8, o1);
            memcpy(dst, tmp, sizeof(float) * (size_t)nr);
        }
    }
}

/* Byte t of every 32-bit lane, sign-extended and converted: the weights of
 * k = 4g + t for 8 columns, times their block scales d. */
INLINE_AVX2 __m256 widen(__m256i lanes, int t, __m256 d) {
    __m256i q = _mm256_srai_epi32(_mm256_slli_epi32(lanes, 24 - 8 * t), 24);
    return _mm256_mul_ps(_mm256_cvtepi32_ps(q), d);
}

/* mr (a constant after inlining) rows of x against one panel, float32. */
INLINE_AVX2 void widen_kernel(int mr, float *out, int ldo, const float *x, int k, const unsigned char *panel,
                              const float *bias, int nr) {
    __m256 acc[MR][2];
    for (int r = 0; r < MR; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int b = 0; b < k / Q8W_K_BLOCK; b++) {
        const unsigned char *block = panel + q8w_quants_at(b);
        __m256 d0, d1;
        load_scales(panel, b, &d0, &d1);
        const float *xb = x + (size_t)b * Q8W_K_BLOCK;
        for (int g = 0; g < Q8W_K_BLOCK / 4; g++) {
            __m256i v0 = _mm256_loadu_si256((const __m256i *)(block + g * 64));
            __m256i v1 = _mm256_loadu_si256((const __m256i *)(block + g * 64 + 32));
#pragma GCC unroll 4
            for (int t = 0; t < 4; t++) {
                __m256 w0 = widen(v0, t, d0), w1 = widen(v1, t, d1);
#pragma GCC unroll 4
                for (int r = 0; r < mr; r++) {
                    __m256 a = _mm256_broadcast_ss(xb + (size_t)r * k + g * 4 + t);
                    acc[r][0] = _mm256_fmadd_ps(a, w0, acc[r][0]);
                    acc[r][1] = _mm256_fmadd_ps(a, w1, acc[r][1]);
                }
            }
        }
    }
    store_rows(mr, acc, out, ldo, bias, nr);
}

TARGET_AVX2 static void widen_rows(int mr, float *out, int ldo, const float *x, int k, const unsigned char *panel,
                                   const float *bias, int nr) {
    switch (mr) { /* one instance per row count: no wasted work at m = 1 */
    case 1: widen_kernel(1, out, ldo, x, k, panel, bias, nr); break;
    case 2: widen_kernel(2, out, ldo, x, k, panel, bias, nr); break;
    case 3: widen_kernel(3, out, ldo, x, k, panel, bias, nr); break;
    default: widen_kernel(MR, out, ldo, x, k, panel, bias, nr); break;
    }
}

/* Rows of x quantized per 32-block (q8w_quantize_row): quants and scales. */
typedef struct {
    const int8_t *q;
    const float *d;
} quant_rows;

INLINE_AVX2 void int8_kernel(int mr, float *out, int ldo, quant_rows x, int k, const unsigned char *panel,
                             const float *bias, int nr) {
    int nb = k / Q8W_K_BLOCK;
    const __m256i ones = _mm256_set1_epi16(1);
    /* The float sums live in memory, touched once per block: the 8 integer
     * dot accumulators and the weights then fit the 16 registers unspilled. */
    float sums[MR][Q8W_NR] __attribute__((aligned(32))) = {{0}};
    for (int b = 0; b < nb; b++) {
        const unsigned char *block = panel + q8w_quants_at(b);
        __m256i dot[MR][2];
        for (int r = 0; r < MR; r++) dot[r][0] = dot[r][1] = _mm256_setzero_si256();
        for (int g = 0; g < Q8W_K_BLOCK / 4; g++) {
            __m256i v0 = _mm256_loadu_si256((const __m256i *)(block + g * 64));
            __m256i v1 = _mm256_loadu_si256((const __m256i *)(block + g * 64 + 32));
            /* |w| is unsigned (128 for -128) and x * sign(w) within int8 for |x| <= 127,
             * so vpmaddubsw's pair sums (<= 2 * 128 * 127) never saturate */
            __m256i a0 = _mm256_abs_epi8(v0), a1 = _mm256_abs_epi8(v1);
#pragma GCC unroll 4
            for (int r = 0; r < mr; r++) {
                int32_t four;
                memcpy(&four, x.q + (size_t)r * k + (size_t)b * Q8W_K_BLOCK + g * 4, sizeof four);
                __m256i xq = _mm256_set1_epi32(four);
                __m256i p0 = _mm256_maddubs_epi16(a0, _mm256_sign_epi8(xq, v0));
                __m256i p1 = _mm256_maddubs_epi16(a1, _mm256_sign_epi8(xq, v1));
                dot[r][0] = _mm256_add_epi32(dot[r][0], _mm256_madd_epi16(p0, ones));
                dot[r][1] = _mm256_add_epi32(dot[r][1], _mm256_madd_epi16(p1, ones));
            }
        }
        __m256 d0, d1;
        load_scales(panel, b, &d0, &d1);
#pragma GCC unroll 4
        for (int r = 0; r < mr; r++) {
            __m256 dx = _mm256_set1_ps(x.d[(size_t)r * nb + b]);
            __m256 s0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[r][0]), _mm256_mul_ps(dx, d0), _mm256_load_ps(sums[r]));
            __m256 s1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[r][1]), _mm256_mul_ps(dx, d1), _mm256_load_ps(sums[r] + 8));
            _mm256_store_ps(sums[r], s0);
            _mm256_store_ps(sums[r] + 8, s1);
        }
    }
    __m256 acc[MR][2];
    for (int r = 0; r < MR; r++) acc[r][0] = _mm256_load_ps(sums[r]), acc[r][1] = _mm256_load_ps(sums[r] + 8);
    store_rows(mr, acc, out, ldo, bias, nr);
}

TARGET_AVX2 static void int8_rows(int mr, float *out, int ldo, quant_rows x, int k, const unsigned char *panel,
                                  const float *bias, int nr) {
    switch (mr) {
    case 1: int8_kernel(1, out, ldo, x, k, panel, bias, nr); break;
    case 2: int8_kernel(2, out, ldo, x, k, panel, bias, nr); break;
    case 3: int8_kernel(3, out, ldo, x, k, panel, bias, nr); break;
    default: int8_kernel(MR, out, ldo, x, k, panel, bias, nr); break;
    }
}

void q8w_matmul_widen_avx2(float *out, const float *in, const void *w, const float *bias, int m, int k, int n) {
    int panels = (n + Q8W_NR - 1) / Q8W_NR, chunks = (m + ROW_CHUNK - 1) / ROW_CHUNK;
    /* task = chunk * panels + panel: each thread takes a run of panels of one chunk */
#pragma omp parallel for schedule(static)
    for (int task = 0; task < chunks * panels; task++) {
        int p = task % panels, r_end = (task / panels + 1) * ROW_CHUNK, col = p * Q8W_NR;
        int nr = n - col < Q8W_NR ? n - col : Q8W_NR;
        const unsigned char *panel = (const unsigned char *)w + (size_t)p * q8w_panel_bytes(k);
        if (r_end > m) r_end = m;
        for (int r = task / panels * ROW_CHUNK; r < r_end; r += MR)
            widen_rows(r_end - r < MR ? r_end - r : MR, out + (size_t)r * n + col, n, in + (size_t)r * k, k, panel,
                       bias ? bias + col : NULL, nr);
    }
}

/* q8w_quantize_row's arithmetic, 32 values at a time: the same float32
 * max, division, reciprocal and product, then round half away from zero as
 * trunc(|v|) + (|v| - trunc(|v|) >= 0.5) (the difference is exact). */
TARGET_AVX2 void q8w_quantize_row_avx2(const float *x, int k, int8_t *q, float *d) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), half = _mm256_set1_ps(0.5f);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7); /* undoes the packs' lane interleave */
    for (int b = 0; b < k / Q8W_K_BLOCK; b++) {
        const float *xb = x + (size_t)b * Q8W_K_BLOCK;
        __m256 v[4], amax = _mm256_setzero_ps();
        for (int j = 0; j < 4; j++) {
            v[j] = _mm256_loadu_ps(xb + 8 * j);
            amax = _mm256_max_ps(_mm256_and_ps(v[j], abs_mask), amax); /* a NaN lost, as fmaxf */
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
        d[b] = _mm_cvtss_f32(m4) / 127.0f;
        __m256 inv = _mm256_set1_ps(d[b] != 0.0f ? 1.0f / d[b] : 0.0f);
        __m256i i[4];
        for (int j = 0; j < 4; j++) {
            __m256 s = _mm256_mul_ps(v[j], inv), a = _mm256_and_ps(s, abs_mask);
            __m256 t = _mm256_round_ps(a, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
            __m256 up = _mm256_and_ps(_mm256_cmp_ps(_mm256_sub_ps(a, t), half, _CMP_GE_OQ), _mm256_set1_ps(1.0f));
            __m256 r = _mm256_or_ps(_mm256_add_ps(t, up), _mm256_andnot_ps(abs_mask, s)); /* the sign back */
            i[j] = _mm256_cvttps_epi32(r);
        }
        __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3]));
        _mm256_storeu_si256((__m256i *)(q + (size_t)b * Q8W_K_BLOCK), _mm256_permutevar8x32_epi32(packed, order));
    }
}

/* Rows of x quantized per pass; the scratch holds at least one row of
 * Q8W_MAX_K. */
enum { SCRATCH_QUANTS = Q8W_MAX_K };

void q8w_matmul_avx2(float *out, const float *in, const void *w, const float *bias, int m, int k, int n) {
    int nb = k / Q8W_K_BLOCK, panels = (n + Q8W_NR - 1) / Q8W_NR;
    int rows_per_pass = k > 0 && SCRATCH_QUANTS / k < ROW_CHUNK ? SCRATCH_QUANTS / k : ROW_CHUNK;
    /* Each thread owns a run of panels and quantizes every row itself (a
     * k-sized job against its n/threads-sized share of the dots), so no
     * buffer is shared or allocated; a pass of rows stays in cache while the
     * thread's panels stream past it. */
#pragma omp parallel
    {
        int8_t qx[SCRATCH_QUANTS];
        float dx[SCRATCH_QUANTS / Q8W_K_BLOCK];
        int p_begin, p_end;
        q8w_thread_panels(panels, &p_begin, &p_end);
        for (int r0 = 0; p_begin < p_end && r0 < m; r0 += rows_per_pass) {
            int rows = m - r0 < rows_per_pass ? m - r0 : rows_per_pass;
            for (int r = 0; r < rows; r++)
                q8w_quantize_row_avx2(in + (size_t)(r0 + r) * k, k, qx + (size_t)r * k, dx + (size_t)r * nb);
            for (int p = p_begin; p < p_end; p++) {
                int col = p * Q8W_NR, nr = n - col < Q8W_NR ? n - col : Q8W_NR;
                const unsigned char *panel = (const unsigned char *)w + (size_t)p * q8w_panel_bytes(k);
                for (int r = 0; r < rows; r += MR) {
                    quant_rows x = {qx + (size_t)r * k, dx + (size_t)r * nb};
                    int8_rows(rows - r < MR ? rows - r : MR, out + (size_t)(r0 + r) * n + col, n, x, k, panel,
                              bias ? bias + col : NULL, nr);
                }
            }
        }
    }
}
#endif
