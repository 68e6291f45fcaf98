#include "packed.h"

#include <assert.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define PACKED_X86 1
#else
#define PACKED_X86 0
#endif

/* Rows per task: a chunk of x (64 rows x K) and one panel stay in L2 while
 * the kernel walks the chunk's row blocks. */
enum { ROW_CHUNK = 64 };

/* Which kernel: AVX-512F, else AVX2 with FMA; the two give the same bits. */
static bool has_avx512(void) {
#if PACKED_X86
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
#else
    return false;
#endif
}

bool packed_supported(void) {
#if PACKED_X86
    __builtin_cpu_init();
    return has_avx512() || (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"));
#else
    return false;
#endif
}

const char *packed_kernel(void) { return !packed_supported() ? NULL : has_avx512() ? "avx512f" : "avx2"; }

size_t packed_floats(int n, int k) { return (size_t)((n + PACKED_NR - 1) / PACKED_NR) * PACKED_NR * (size_t)k; }

void packed_pack(float *dst, const float *w, int n, int k) {
    int panels = (n + PACKED_NR - 1) / PACKED_NR;
#pragma omp parallel for schedule(static)
    for (int p = 0; p < panels; p++) {
        float *panel = dst + (size_t)p * k * PACKED_NR;
        for (int j = 0; j < PACKED_NR; j++) {
            int col = p * PACKED_NR + j;
            const float *row = w + (size_t)col * k;
            if (col < n)
                for (int i = 0; i < k; i++) panel[(size_t)i * PACKED_NR + j] = row[i];
            else
                for (int i = 0; i < k; i++) panel[(size_t)i * PACKED_NR + j] = 0.0f;
        }
    }
}

#if PACKED_X86
/* out[mr, nr] (row stride ldo) = x[mr, k] (row stride k) @ panel (+ bias),
 * mr <= 8, nr <= 32. Sixteen accumulators: 8 rows x two 16-float halves. */
__attribute__((target("avx512f"))) static void kernel_8x32(float *out, int ldo, const float *x, int k,
                                                           const float *panel, const float *bias, int mr, int nr) {
    const float *xr[PACKED_MR]; /* rows past mr repeat row 0, never stored */
    for (int r = 0; r < PACKED_MR; r++) xr[r] = x + (r < mr ? (size_t)r * k : 0);
    /* sixteen accumulators: fully unrolled, the compiler keeps them in registers */
    __m512 acc[PACKED_MR][2];
#pragma GCC unroll 8
    for (int r = 0; r < PACKED_MR; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int i = 0; i < k; i++) {
        __m512 b0 = _mm512_loadu_ps(panel + (size_t)i * PACKED_NR), b1 = _mm512_loadu_ps(panel + (size_t)i * PACKED_NR + 16);
#pragma GCC unroll 8
        for (int r = 0; r < PACKED_MR; r++) {
            __m512 a = _mm512_set1_ps(xr[r][i]);
            acc[r][0] = _mm512_fmadd_ps(a, b0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(a, b1, acc[r][1]);
        }
    }
    __mmask16 m0 = nr >= 16 ? 0xffff : (__mmask16)((1u << nr) - 1);
    __mmask16 m1 = nr >= 32 ? 0xffff : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
    __m512 bias0 = _mm512_setzero_ps(), bias1 = bias0;
    if (bias) bias0 = _mm512_maskz_loadu_ps(m0, bias), bias1 = _mm512_maskz_loadu_ps(m1, bias + 16);
    for (int r = 0; r < mr; r++) {
        _mm512_mask_storeu_ps(out + (size_t)r * ldo, m0, _mm512_add_ps(acc[r][0], bias0));
        _mm512_mask_storeu_ps(out + (size_t)r * ldo + 16, m1, _mm512_add_ps(acc[r][1], bias1));
    }
}

/* kernel_8x32 on AVX2 with FMA: for every (row, column) the same fused
 * multiply-adds in the same order from zero, then the same bias add, so the
 * same bits as the AVX-512 kernel (a record does not depend on the CPU that
 * sampled it, nor on the rows beside it). Sixteen ymm registers hold 4 rows
 * x 16 columns of accumulators, so the 8 x 32 block is four passes over the
 * panel: two row quads, two column halves. */
__attribute__((target("avx2,fma"))) static void kernel_8x32_avx2(float *out, int ldo, const float *x, int k,
                                                                const float *panel, const float *bias, int mr,
                                                                int nr) {
    for (int r0 = 0; r0 < mr; r0 += 4) {
        int rows = mr - r0 < 4 ? mr - r0 : 4;
        const float *xr[4]; /* rows past `rows` repeat the quad's first, never stored */
        for (int r = 0; r < 4; r++) xr[r] = x + (size_t)(r0 + (r < rows ? r : 0)) * k;
        for (int c0 = 0; c0 < nr; c0 += 16) {
            __m256 acc[4][2];
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
            for (int i = 0; i < k; i++) {
                const float *b = panel + (size_t)i * PACKED_NR + c0; /* panels are 32 wide, zero-padded */
                __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
#pragma GCC unroll 4
                for (int r = 0; r < 4; r++) {
                    __m256 a = _mm256_set1_ps(xr[r][i]);
                    acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
                    acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
                }
            }
            int nc = nr - c0 < 16 ? nr - c0 : 16;
            float bb[16] = {0}, o[16];
            if (bias) memcpy(bb, bias + c0, (size_t)nc * sizeof *bb);
            __m256 bias0 = _mm256_loadu_ps(bb), bias1 = _mm256_loadu_ps(bb + 8);
            for (int r = 0; r < rows; r++) {
                _mm256_storeu_ps(o, _mm256_add_ps(acc[r][0], bias0));
                _mm256_storeu_ps(o + 8, _mm256_add_ps(acc[r][1], bias1));
                memcpy(out + (size_t)(r0 + r) * ldo + c0, o, (size_t)nc * sizeof *o);
            }
        }
    }
}
#endif

void packed_matmul(float *out, const float *in, const float *w_packed, const float *bias, int m, int k, int n) {
#if PACKED_X86
    if (m <= 0) return;
    int panels = (n + PACKED_NR - 1) / PACKED_NR, chunks = (m + ROW_CHUNK - 1) / ROW_CHUNK;
    void (*kernel)(float *, int, const float *, int, const float *, const float *, int, int) =
        has_avx512() ? kernel_8x32 : kernel_8x32_avx2;
    /* task = chunk * panels + panel: each thread takes a run of panels of one chunk */
#pragma omp parallel for schedule(static)
    for (int task = 0; task < chunks * panels; task++) {
        int p = task % panels, r_end = (task / panels + 1) * ROW_CHUNK;
        int col = p * PACKED_NR, nr = n - col < PACKED_NR ? n - col : PACKED_NR;
        const float *panel = w_packed + (size_t)p * k * PACKED_NR;
        if (r_end > m) r_end = m;
        for (int r = task / panels * ROW_CHUNK; r < r_end; r += PACKED_MR)
            kernel(out + (size_t)r * n + col, n, in + (size_t)r * k, k, panel, bias ? bias + col : NULL,
                   r_end - r < PACKED_MR ? r_end - r : PACKED_MR, nr);
    }
#else
    (void)out, (void)in, (void)w_packed, (void)bias, (void)m, (void)k, (void)n;
    assert(!"packed_matmul without packed_supported()");
#endif
}
