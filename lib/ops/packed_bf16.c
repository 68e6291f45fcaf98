/* The bf16 panel layout (packed_bf16.h): rounding, packing, unpacking, the
 * portable matmul and the dispatch to the SIMD kernels. */
#include "packed_bf16.h"

#include <assert.h>
#include <string.h>

#include "packed_bf16_kernels.h"
#include "packed_tile.h"
#include "../util/half.h"

enum { PAIR_BYTES = BF16W_NR * 4 /* one pair of k for the panel's columns */ };

bool bf16w_native(void) {
#if BF16W_X86
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
#else
    return false;
#endif
}

#if BF16W_X86
bool bf16w_has_avx512f(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
}

bool bf16w_has_avx2(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#endif

const char *bf16w_kernel(void) {
#if BF16W_X86
    if (bf16w_native()) return "avx512bf16";
    if (bf16w_has_avx512f()) return "avx512f";
    if (bf16w_has_avx2()) return "avx2";
#endif
    return "scalar";
}

static int panel_count(int n) { return (n + BF16W_NR - 1) / BF16W_NR; }
static int pair_count(int k) { return (k + 1) / 2; }
static size_t panel_bytes(int k) { return bf16w_panel_bytes(k); }

size_t bf16w_bytes(int n, int k) { return (size_t)panel_count(n) * panel_bytes(k); }

void bf16w_round_pairs(const float *x, int k, int from, uint32_t *pairs) {
    int whole = (k - from) / 2;
    const float *at = x + from;
    uint32_t *out = pairs + from / 2;
#pragma omp simd
    for (int i = 0; i < whole; i++) out[i] = bf16w_round(at[2 * i]) | (uint32_t)bf16w_round(at[2 * i + 1]) << 16;
    if ((k - from) % 2) out[whole] = bf16w_round(at[2 * whole]);
}

/* Byte offset of (k, column j) in a panel: pairs of k, then columns, then the pair. */
static size_t element_offset(int i, int j) {
    return (size_t)(i / 2) * PAIR_BYTES + (size_t)j * 4 + (size_t)(i % 2) * 2;
}

static void put16(unsigned char *p, uint16_t v) { p[0] = (unsigned char)(v & 0xFF), p[1] = (unsigned char)(v >> 8); }
static uint16_t get16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* A panel BLOCK pairs of k at a time: each column's 2 * BLOCK values rounded
 * (the rounding inline, so it vectorizes), their pairs stored into the
 * block's 2 KB of the panel, which stays in L1 for the panel's columns. */
void bf16w_pack(void *dst, const float *w, int n, int k) {
    enum { BLOCK = 16 };
    int panels = panel_count(n), pairs = pair_count(k);
#pragma omp parallel for schedule(static)
    for (int p = 0; p < panels; p++) {
        unsigned char *panel = (unsigned char *)dst + (size_t)p * panel_bytes(k);
        int cols = n - p * BF16W_NR < BF16W_NR ? n - p * BF16W_NR : BF16W_NR;
        memset(panel, 0, panel_bytes(k)); /* zero past n and past k */
        for (int i0 = 0; i0 < pairs; i0 += BLOCK) {
            int from = 2 * i0, to = from + 2 * BLOCK < k ? from + 2 * BLOCK : k;
            for (int j = 0; j < cols; j++) {
                uint32_t block[BLOCK];
                bf16w_round_pairs(w + (size_t)(p * BF16W_NR + j) * k + from, to - from, 0, block);
                for (int i = 0; i < (to - from + 1) / 2; i++) {
                    unsigned char *at = panel + element_offset(2 * (i0 + i), j);
                    put16(at, (uint16_t)block[i]), put16(at + 2, (uint16_t)(block[i] >> 16));
                }
            }
        }
    }
}

void bf16w_unpack_row(float *dst, const void *src, int row, int k) {
    const unsigned char *panel = (const unsigned char *)src + (size_t)(row / BF16W_NR) * panel_bytes(k);
    for (int i = 0; i < k; i++) dst[i] = bf16_to_f32(get16(panel + element_offset(i, row % BF16W_NR)));
}

void bf16w_unpack(float *dst, const void *src, int n, int k) {
#pragma omp parallel for schedule(static)
    for (int col = 0; col < n; col++) bf16w_unpack_row(dst + (size_t)col * k, src, col, k);
}

/* One output as each lane of vdpbf16ps computes it: per pair of k, the odd
 * product then the even one, each added with one rounding (the products of
 * two bf16 are exact in float32, so a contracted fma gives the same bits). */
static float dot_column(const uint32_t *x, const unsigned char *panel, int j, int pairs) {
    float acc = 0.0f;
    for (int i = 0; i < pairs; i++) {
        const unsigned char *w = panel + (size_t)i * PAIR_BYTES + (size_t)j * 4;
        acc += bf16_to_f32((uint16_t)(x[i] >> 16)) * bf16_to_f32(get16(w + 2));
        acc += bf16_to_f32((uint16_t)(x[i] & 0xFFFF)) * bf16_to_f32(get16(w));
    }
    return acc;
}

void bf16w_matmul_scalar(float *out, const float *in, const void *w, const float *bias, int m, int k, int n) {
    assert(k <= BF16W_MAX_K);
#pragma omp parallel for schedule(static)
    for (int r = 0; r < m; r++) {
        uint32_t x[BF16W_MAX_K / 2];
        bf16w_round_pairs(in + (size_t)r * k, k, 0, x);
        for (int col = 0; col < n; col++) {
            const unsigned char *panel = (const unsigned char *)w + (size_t)(col / BF16W_NR) * panel_bytes(k);
            float acc = dot_column(x, panel, col % BF16W_NR, pair_count(k));
            out[(size_t)r * n + col] = bias ? acc + bias[col] : acc;
        }
    }
}

void bf16w_matmul(float *out, const float *in, const void *w, const float *bias, int m, int k, int n) {
    assert(k <= BF16W_MAX_K);
    if (m <= 0 || n <= 0) return;
#if BF16W_X86
    if (bf16w_native())
        bf16w_matmul_avx512bf16(out, in, w, bias, m, k, n);
    else if (bf16w_has_avx512f())
        bf16w_matmul_avx512f(out, in, w, bias, m, k, n);
    else if (bf16w_has_avx2())
        bf16w_matmul_avx2(out, in, w, bias, m, k, n);
    else
#endif
        bf16w_matmul_scalar(out, in, w, bias, m, k, n);
}

void bf16w_decode_t(float *s, const void *w, int n, int k, int c0, int nc, int i0) {
    (void)n;
    for (int c = 0; c < nc; c++) {
        int col = c0 + c;
        const unsigned char *panel = (const unsigned char *)w + (size_t)(col / BF16W_NR) * panel_bytes(k);
        for (int i = 0; i < PT_TK; i++)
            s[(size_t)c * PT_TK + i] = i0 + i < k ? bf16_to_f32(get16(panel + element_offset(i0 + i, col % BF16W_NR))) : 0.0f;
    }
}

/* W[i0 .. i0+32)[c0 .. c0+nc) as s[c][j]: one panel (zero past n). */
static void decode_f(float *s, const void *w, int n, int k, int c0, int nc, int i0) {
    (void)n;
    const unsigned char *panel = (const unsigned char *)w + (size_t)(i0 / BF16W_NR) * panel_bytes(k);
    for (int c = 0; c < nc; c++)
        for (int j = 0; j < PT_TK; j++) s[(size_t)c * PT_TK + j] = bf16_to_f32(get16(panel + element_offset(c0 + c, j)));
}

#if BF16W_X86
static const pt_decode_fn decoders_t[PACKED_ISAS] = {bf16w_decode_t, bf16w_decode_t_avx2, bf16w_decode_t_avx512};
static const pt_decode_fn decoders_f[PACKED_ISAS] = {decode_f, bf16w_decode_f_avx2, bf16w_decode_f_avx512};
#else
static const pt_decode_fn decoders_t[PACKED_ISAS] = {bf16w_decode_t, bf16w_decode_t, bf16w_decode_t};
static const pt_decode_fn decoders_f[PACKED_ISAS] = {decode_f, decode_f, decode_f};
#endif

bool bf16w_matmul_t_isa(packed_isa isa, float *dx, const float *dy, const void *w, int m, int k, int n,
                        bool accumulate) {
    return pt_matmul_t(isa, decoders_t, dx, dy, w, m, k, n, accumulate);
}

bool bf16w_matmul_f32_isa(packed_isa isa, float *out, const float *in, const void *w, const float *bias, int m, int k,
                          int n) {
    return pt_matmul(isa, decoders_f, out, in, w, bias, m, k, n);
}

void bf16w_matmul_f32(float *out, const float *in, const void *w, const float *bias, int m, int k, int n) {
    bf16w_matmul_f32_isa(packed_isa_best(), out, in, w, bias, m, k, n);
}

void bf16w_matmul_t(float *dx, const float *dy, const void *w, int m, int k, int n, bool accumulate) {
    bf16w_matmul_t_isa(packed_isa_best(), dx, dy, w, m, k, n, accumulate);
}
