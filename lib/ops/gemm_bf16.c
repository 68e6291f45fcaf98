/* The bf16 GEMM (gemm_bf16.h).
 *
 * vdpbf16ps multiplies two vectors of "pair words": 32 bits holding the bf16
 * of two consecutive k (the even one in the low half), accumulating both
 * products into one float32 lane. Each call first copies op(A) and op(B)
 * into such words (rounding them to bf16), in parallel:
 *   B: panels of NR columns, [KP][NR] words (zero past N and K), so a pair
 *      of k is three contiguous 64-byte loads;
 *   A: [Mp][KP] words when op(A) = A (a plain conversion of each row), or
 *      [KP][Mp] words when op(A) = A^T (two rows of A interleaved);
 *      the kernel broadcasts one word per row and pair either way.
 * The kernel keeps an MR x NR tile of C (8 x 48: 24 accumulators) in
 * registers over one block of KC; a task is an MC x NC tile of C over all
 * of K, each panel's block staying in L1 while the task's rows pass it.
 * Tasks split only M and N, never K, so the thread count cannot change a
 * sum. */
#include "gemm_bf16.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../util/err.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GB_X86 1
#else
#define GB_X86 0
#endif

enum {
    MR = 8,                  /* rows of the register tile */
    NV = 3,                  /* 16-float vectors across it */
    NR = 16 * NV,            /* columns of the register tile, of a B panel */
    KCP = GEMM_BF16_KC / 2,  /* pairs of k per block */
    MC = 128,                /* rows of a task */
    NC = 4 * NR,             /* columns of a task */
    PACK_KP = 64,            /* pairs of k per packing task */
    KCH = 16 * KCP,          /* pairs of k per chunk */
    CHUNK_WORDS = 1 << 20,   /* most words of one packed operand per chunk (4 MiB) */
};

bool gemm_bf16_supported(void) {
#if GB_X86
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512bf16");
#else
    return false;
#endif
}

/* C = beta C, where no product is added (K = 0 or alpha = 0). */
static void scale_c(int M, int N, float beta, float *C, int ldc) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float *c = C + (size_t)i * ldc + j;
            *c = beta == 0 ? 0.0f : beta * *c;
        }
}

static int imin(int a, int b) { return a < b ? a : b; }
static int imax(int a, int b) { return a > b ? a : b; }

#if GB_X86
#define TARGET __attribute__((target("avx512f,avx512bw,avx512bf16")))
#define INLINE static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512bf16")))

INLINE __mmask16 mask16(int n) { return n >= 16 ? (__mmask16)0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1); }

/* Sixteen floats of src, up to n of them (zeros past), as bf16 pair words
 * with the next sixteen: 32 floats -> 16 words. */
INLINE __m512i words32(const float *src, int n) {
    __m512 lo = _mm512_maskz_loadu_ps(mask16(n), src), hi = _mm512_maskz_loadu_ps(mask16(n - 16), src + 16);
    return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

/* dst[kp] = the pair (src[2kp], src[2kp+1]) for kp < ceil(K/2); the high
 * half of the last is zero when K is odd. */
TARGET static void pack_row(uint32_t *dst, const float *src, int K) {
    for (int k = 0; k < K; k += 32) _mm512_mask_storeu_epi32(dst + k / 2, mask16((K - k + 1) / 2), words32(src + k, K - k));
}

/* dst[j] = the pair (r0[j], r1[j]) for j < n (r1 NULL: zero high halves),
 * zero for n <= j < width. */
TARGET static void pack_pairs(uint32_t *dst, const float *r0, const float *r1, int n, int width) {
    /* bf16 0..15 from r0, 16..31 from r1, reordered to r0[0], r1[0], r0[1], ... */
    const __m512i order = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22,
                                           6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    for (int j = 0; j < width; j += 16) {
        __mmask16 m = mask16(n - j);
        __m512 a = _mm512_maskz_loadu_ps(m, r0 + j), b = r1 ? _mm512_maskz_loadu_ps(m, r1 + j) : _mm512_setzero_ps();
        __m512i w = _mm512_permutexvar_epi16(order, (__m512i)_mm512_cvtne2ps_pbh(b, a));
        _mm512_mask_storeu_epi32(dst + j, mask16(width - j), w);
    }
}

/* r[i] (16 words each) becomes column i of the 16 x 16 matrix whose rows
 * were r: unpacks within 128-bit lanes, then the lanes moved. */
INLINE void transpose16(__m512i r[16]) {
    __m512i t[16], u[16];
    for (int i = 0; i < 8; i++)
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]), t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    for (int g = 0; g < 4; g++) { /* u[4g+c]: rows 4g..4g+3 at column c of each lane */
        u[4 * g] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
        u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
        u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
        u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
    }
    for (int c = 0; c < 4; c++) {
        __m512i v0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88), v1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xDD);
        __m512i v2 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88), v3 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xDD);
        r[c] = _mm512_shuffle_i32x4(v0, v2, 0x88), r[4 + c] = _mm512_shuffle_i32x4(v1, v3, 0x88);
        r[8 + c] = _mm512_shuffle_i32x4(v0, v2, 0xDD), r[12 + c] = _mm512_shuffle_i32x4(v1, v3, 0xDD);
    }
}

/* Pairs kp0 .. kp1-1 of a panel whose column j < nr is row j of src (k
 * contiguous, row stride lds: op(B) = B^T): dst[kp][j], zero past nr. */
TARGET static void pack_panel_t(uint32_t *dst, const float *src, size_t lds, int K, int nr, int kp0, int kp1) {
    for (int j0 = 0; j0 < NR; j0 += 16)
        for (int kp = kp0; kp < kp1; kp += 16) {
            __m512i r[16];
            for (int j = 0; j < 16; j++)
                r[j] = j0 + j < nr ? words32(src + (size_t)(j0 + j) * lds + 2 * kp, K - 2 * kp) : _mm512_setzero_si512();
            transpose16(r);
            for (int t = 0; t < imin(16, kp1 - kp); t++) _mm512_storeu_si512(dst + (size_t)(kp + t) * NR + j0, r[t]);
        }
}

/* The C tile [mr, nr] at c (mr <= MR, nr <= NR) from kc pairs: row r's
 * pair kp of A is a[r * ars + kp * aks], B's panel block is b [kc][NR]. */
INLINE void kernel(int kc, const uint32_t *a, size_t ars, size_t aks, const uint32_t *b, float *c, int ldc, int mr,
                   int nr, float alpha, float beta, bool first) {
    __m512 acc[MR][NV];
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) acc[r][v] = _mm512_setzero_ps();
    for (int kp = 0; kp < kc; kp++) {
        const uint32_t *ak = a + (size_t)kp * aks;
        __m512bh bv[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) bv[v] = (__m512bh)_mm512_loadu_si512(b + (size_t)kp * NR + 16 * v);
#pragma GCC unroll 8
        for (int r = 0; r < MR; r++) {
            __m512bh av = (__m512bh)_mm512_set1_epi32((int)ak[r * ars]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
        }
    }
    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) {
        if (r >= mr) break;
        float *cr = c + (size_t)r * ldc;
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) {
            __mmask16 m = mask16(nr - 16 * v);
            __m512 old = first && beta == 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m, cr + 16 * v);
            if (first && beta != 0 && beta != 1) old = _mm512_mul_ps(old, vb);
            _mm512_mask_storeu_ps(cr + 16 * v, m, _mm512_fmadd_ps(acc[r][v], va, old));
        }
    }
}

/* The two ways A is laid out, each its own kernel (the strides constant). */
TARGET static void kernel_rows(int kc, const uint32_t *a, size_t ars, const uint32_t *b, float *c, int ldc, int mr,
                               int nr, float alpha, float beta, bool first) {
    kernel(kc, a, ars, 1, b, c, ldc, mr, nr, alpha, beta, first);
}
TARGET static void kernel_pairs(int kc, const uint32_t *a, size_t aks, const uint32_t *b, float *c, int ldc, int mr,
                                int nr, float alpha, float beta, bool first) {
    kernel(kc, a, 1, aks, b, c, ldc, mr, nr, alpha, beta, first);
}

/* One chunk of the product: rows m0 .. m0+mc-1, columns n0 .. n0+nc-1 and
 * pairs k0 .. k0+kc-1 of C += op(A) op(B), its operands packed. */
typedef struct {
    int m0, mc, mp, n0, nc, k0, kc; /* mp: mc rounded up to MR */
    bool a_pairs;                   /* A as [kc][mp] (op(A) = A^T), else [mp][kc] */
    uint32_t *a, *b;
} chunk;

typedef struct {
    bool ta, tb;
    int M, N, K;
    float alpha, beta;
    const float *A, *B;
    size_t lda, ldb;
    float *C;
    int ldc;
} problem;

/* C's tile of chunk rows m0 .. m1-1 and columns n0 .. n1-1 (n0 a whole
 * panel), over the chunk's pairs in blocks of KCP. */
TARGET static void run_tile(const problem *p, const chunk *ch, int m0, int m1, int n0, int n1) {
    for (int k0 = 0; k0 < ch->kc; k0 += KCP) {
        int kc = imin(KCP, ch->kc - k0);
        bool first = ch->k0 + k0 == 0;
        for (int n = n0; n < n1; n += NR) {
            const uint32_t *bp = ch->b + ((size_t)(n / NR) * ch->kc + k0) * NR;
            for (int m = m0; m < m1; m += MR) {
                float *c = p->C + (size_t)(ch->m0 + m) * p->ldc + ch->n0 + n;
                int mr = imin(MR, ch->mc - m), nr = imin(NR, ch->nc - n);
                if (ch->a_pairs)
                    kernel_pairs(kc, ch->a + (size_t)k0 * ch->mp + m, (size_t)ch->mp, bp, c, p->ldc, mr, nr, p->alpha,
                                 p->beta, first);
                else
                    kernel_rows(kc, ch->a + (size_t)m * ch->kc + k0, (size_t)ch->kc, bp, c, p->ldc, mr, nr, p->alpha,
                                p->beta, first);
            }
        }
    }
}

/* The chunk's op(A) into ch->a; one OpenMP worksharing loop, no barrier. */
TARGET static void pack_a(const problem *p, const chunk *ch) {
    int K = p->K, kc = ch->kc;
    if (p->ta) { /* A [K, M]: rows 2kp and 2kp+1 interleaved */
#pragma omp for schedule(static) nowait
        for (int i = 0; i < kc; i++) {
            size_t k = 2 * (size_t)(ch->k0 + i);
            const float *r0 = p->A + k * p->lda + ch->m0;
            pack_pairs(ch->a + (size_t)i * ch->mp, r0, k + 1 < (size_t)K ? r0 + p->lda : NULL, ch->mc, ch->mp);
        }
    } else {
#pragma omp for schedule(static) nowait
        for (int m = 0; m < ch->mp; m++) {
            uint32_t *dst = ch->a + (size_t)m * kc;
            if (m < ch->mc)
                pack_row(dst, p->A + (size_t)(ch->m0 + m) * p->lda + 2 * (size_t)ch->k0, imin(K - 2 * ch->k0, 2 * kc));
            else
                memset(dst, 0, (size_t)kc * sizeof *dst);
        }
    }
}

/* The chunk's op(B) into ch->b; ends with a barrier. */
TARGET static void pack_b(const problem *p, const chunk *ch) {
    int np = (ch->nc + NR - 1) / NR, nkc = (ch->kc + PACK_KP - 1) / PACK_KP, K = p->K;
    if (p->tb) { /* B [N, K]: each column a row of B; tasks of panels x pairs */
#pragma omp for schedule(static)
        for (int task = 0; task < np * nkc; task++) {
            int pn = task / nkc, kp0 = task % nkc * PACK_KP, kp1 = imin(ch->kc, kp0 + PACK_KP);
            int n0 = ch->n0 + pn * NR;
            pack_panel_t(ch->b + (size_t)pn * ch->kc * NR, p->B + (size_t)n0 * p->ldb + 2 * (size_t)ch->k0, p->ldb,
                         K - 2 * ch->k0, imin(NR, ch->nc - pn * NR), kp0, kp1);
        }
        return;
    }
    /* B [K, N]: rows 2kp and 2kp+1 interleaved, read whole (the prefetcher
     * follows rows, not panel-wide strips) and dealt to the panels */
#pragma omp for schedule(static)
    for (int i = 0; i < ch->kc; i++) {
        size_t k = 2 * (size_t)(ch->k0 + i);
        const float *r0 = p->B + k * p->ldb + ch->n0;
        for (int pn = 0; pn < np; pn++)
            pack_pairs(ch->b + ((size_t)pn * ch->kc + i) * NR, r0 + pn * NR,
                       k + 1 < (size_t)K ? r0 + p->ldb + pn * NR : NULL, imin(NR, ch->nc - pn * NR), NR);
    }
}

static uint32_t *alloc_words(size_t n) {
    size_t bytes = (n * sizeof(uint32_t) + 63) / 64 * 64;
    uint32_t *p = aligned_alloc(64, bytes ? bytes : 64);
    if (!p) die(EX_SOFTWARE, "out of memory for a bf16 matrix product (%.0f MiB)", (double)bytes / 1048576);
    return p;
}

/* The product in chunks of at most KCH pairs of k and CHUNK_WORDS words
 * per packed operand, so the copies stay small enough for malloc to reuse
 * (a fresh mapping each call costs a page fault per 4 KiB). Chunks of k are
 * whole blocks of KCP: the sums are those of one pass. */
TARGET static void gemm_avx512(const problem *p) {
    int KP = (p->K + 1) / 2, kch = imin(KP, KCH);
    int mch = imin(p->M, imax(MC, CHUNK_WORDS / kch / MC * MC)), nch = imin(p->N, imax(NC, CHUNK_WORDS / kch / NC * NC));
    int mpch = (mch + MR - 1) / MR * MR, npch = (nch + NR - 1) / NR * NR;
    uint32_t *a = alloc_words((size_t)mpch * kch), *b = alloc_words((size_t)npch * kch);
#pragma omp parallel
    for (int k0 = 0; k0 < KP; k0 += kch)
        for (int m0 = 0; m0 < p->M; m0 += mch)
            for (int n0 = 0; n0 < p->N; n0 += nch) {
                chunk ch = {m0, imin(mch, p->M - m0), 0, n0, imin(nch, p->N - n0), k0, imin(kch, KP - k0), p->ta, a, b};
                ch.mp = (ch.mc + MR - 1) / MR * MR;
                if (n0 == 0) pack_a(p, &ch); /* the same A for every chunk of columns */
                pack_b(p, &ch);              /* its barrier also ends pack_a */
                int mt = (ch.mc + MC - 1) / MC, nt = (ch.nc + NC - 1) / NC;
#pragma omp for schedule(dynamic)
                for (int task = 0; task < mt * nt; task++) {
                    int mb = task / nt, nb = task % nt;
                    run_tile(p, &ch, mb * MC, imin(ch.mc, mb * MC + MC), nb * NC, imin(ch.nc, nb * NC + NC));
                }
            }
    free(a), free(b);
}
#endif

void gemm_bf16(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
               float beta, float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0 || alpha == 0) {
        scale_c(M, N, beta, C, ldc);
        return;
    }
#if GB_X86
    if (gemm_bf16_supported()) {
        problem p = {ta, tb, M, N, K, alpha, beta, A, B, (size_t)lda, (size_t)ldb, C, ldc};
        gemm_avx512(&p);
        return;
    }
#endif
    (void)A, (void)lda, (void)B, (void)ldb, (void)ta, (void)tb;
    die(EX_SOFTWARE, "gemm_bf16 called on a CPU without AVX-512 BF16");
}
