/* The MXFP4 panel layout (packed_mxfp4.h): packing from GGUF and Hugging
 * Face blocks, unpacking, the portable matmuls and the dispatch to the SIMD
 * kernels (packed_mxfp4_avx2.c, packed_mxfp4_avx512.c). */
#include "packed_mxfp4.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "packed_mxfp4_kernels.h"
#include "packed_tile.h"

const int8_t MX4W_HALF_UNITS[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

float mx4w_scale(uint8_t e) {
    /* 2^(e - 128): subnormal below e = 2, else the exponent field e - 1 */
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

const char *mx4w_block_fault(uint8_t e, const unsigned char codes[MX4W_HF_BYTES]) {
    if (e == MX4W_NAN_SCALE) return "is MXFP4's NaN";
    float d = mx4w_scale(e);
    for (int j = 0; e >= 253 && j < MX4W_HF_BYTES; j++) /* below 253 even 12 halves stay finite */
        if (!isfinite(MX4W_HALF_UNITS[codes[j] & 15] * d) || !isfinite(MX4W_HALF_UNITS[codes[j] >> 4] * d))
            return "makes a value beyond float32";
    return NULL;
}

static int panel_count(int n) { return (n + MX4W_NR - 1) / MX4W_NR; }

size_t mx4w_bytes(int n, int k) {
    assert(k % MX4W_K_BLOCK == 0);
    return (size_t)panel_count(n) * mx4w_panel_bytes(k);
}

/* Byte and shift of code i (k = 32b + i) of column j in a panel. */
static size_t code_byte(int j, int b, int i) {
    return mx4w_codes_at(b) + (size_t)(i / 8) * MX4W_GROUP_BYTES + (size_t)j * 4 + (size_t)(i % 8 / 2);
}
static int code_shift(int i) { return 4 * (i % 2); }

/* Block b of column j of a zeroed panel: its scale and 32 codes. */
static void put_block(unsigned char *panel, int j, int b, uint8_t e, const uint8_t codes[MX4W_K_BLOCK]) {
    panel[mx4w_scales_at(b) + (size_t)j] = e;
    for (int i = 0; i < MX4W_K_BLOCK; i++) panel[code_byte(j, b, i)] |= (unsigned char)((codes[i] & 15) << code_shift(i));
}

static uint8_t get_block(const unsigned char *panel, int j, int b, uint8_t codes[MX4W_K_BLOCK]) {
    for (int i = 0; i < MX4W_K_BLOCK; i++) codes[i] = panel[code_byte(j, b, i)] >> code_shift(i) & 15;
    return panel[mx4w_scales_at(b) + (size_t)j];
}

/* Block b of row col of the source: its scale and codes in k order. */
typedef uint8_t (*block_source)(const void *src, const void *scales, int col, int b, int k,
                                uint8_t codes[MX4W_K_BLOCK]);

static uint8_t gguf_source(const void *src, const void *scales, int col, int b, int k, uint8_t codes[MX4W_K_BLOCK]) {
    (void)scales;
    const unsigned char *block = (const unsigned char *)src + ((size_t)col * (size_t)(k / MX4W_K_BLOCK) + (size_t)b) * MX4W_GGUF_BYTES;
    for (int j = 0; j < 16; j++) codes[j] = block[1 + j] & 15, codes[j + 16] = block[1 + j] >> 4;
    return block[0];
}

static uint8_t hf_source(const void *src, const void *scales, int col, int b, int k, uint8_t codes[MX4W_K_BLOCK]) {
    size_t at = (size_t)col * (size_t)(k / MX4W_K_BLOCK) + (size_t)b;
    const unsigned char *block = (const unsigned char *)src + at * MX4W_HF_BYTES;
    for (int j = 0; j < 16; j++) codes[2 * j] = block[j] & 15, codes[2 * j + 1] = block[j] >> 4;
    return ((const unsigned char *)scales)[at];
}

static void pack_panels(void *dst, const void *src, const void *scales, block_source source, int n, int k) {
    assert(k % MX4W_K_BLOCK == 0);
    int panels = panel_count(n), nb = k / MX4W_K_BLOCK;
#pragma omp parallel for schedule(static)
    for (int p = 0; p < panels; p++) {
        unsigned char *panel = (unsigned char *)dst + (size_t)p * mx4w_panel_bytes(k);
        memset(panel, 0, mx4w_panel_bytes(k)); /* pads, and columns past n: e = 0, codes 0 */
        for (int j = 0; j < MX4W_NR && p * MX4W_NR + j < n; j++)
            for (int b = 0; b < nb; b++) {
                uint8_t codes[MX4W_K_BLOCK];
                uint8_t e = source(src, scales, p * MX4W_NR + j, b, k, codes);
                put_block(panel, j, b, e, codes);
            }
    }
}

void mx4w_pack_gguf(void *dst, const void *blocks, int n, int k) { pack_panels(dst, blocks, NULL, gguf_source, n, k); }

void mx4w_pack_hf(void *dst, const void *blocks, const void *scales, int n, int k) {
    pack_panels(dst, blocks, scales, hf_source, n, k);
}

/* Column col's k weights from block b0 on, dequantized: w[(b - b0) * 32 + i]. */
static void column_weights(const void *w, int col, int k, int b0, int b1, float *out) {
    const unsigned char *panel = (const unsigned char *)w + (size_t)(col / MX4W_NR) * mx4w_panel_bytes(k);
    for (int b = b0; b < b1; b++) {
        uint8_t codes[MX4W_K_BLOCK];
        float d = mx4w_scale(get_block(panel, col % MX4W_NR, b, codes));
        for (int i = 0; i < MX4W_K_BLOCK; i++) out[(size_t)(b - b0) * MX4W_K_BLOCK + i] = (float)MX4W_HALF_UNITS[codes[i]] * d;
    }
}

void mx4w_unpack(float *dst, const void *src, int n, int k) {
    assert(k % MX4W_K_BLOCK == 0);
#pragma omp parallel for schedule(static)
    for (int col = 0; col < n; col++) column_weights(src, col, k, 0, k / MX4W_K_BLOCK, dst + (size_t)col * k);
}

/* The portable matmul: each output's chain over k in order, then the bias. */
static void matmul_scalar(float *out, const float *in, const void *w, const float *bias, int m, int k, int n) {
#pragma omp parallel for schedule(static)
    for (int col = 0; col < n; col++) {
        float wb[MX4W_K_BLOCK];
        for (int r = 0; r < m; r++) {
            const float *x = in + (size_t)r * k;
            float acc = 0.0f;
            for (int b = 0; b < k / MX4W_K_BLOCK; b++) {
                column_weights(w, col, k, b, b + 1, wb);
                for (int i = 0; i < MX4W_K_BLOCK; i++) acc = fmaf(x[b * MX4W_K_BLOCK + i], wb[i], acc);
            }
            out[(size_t)r * n + col] = bias ? acc + bias[col] : acc; /* no + 0.0f: -0 stays -0 */
        }
    }
}

bool mx4w_matmul_isa(packed_isa isa, float *out, const float *in, const void *w, const float *bias, int m, int k,
                     int n) {
    assert(k % MX4W_K_BLOCK == 0);
    if (!packed_isa_has(isa)) return false;
    if (m <= 0 || n <= 0) return true;
    switch (isa) {
#if MX4W_X86
    case PACKED_AVX512: mx4w_matmul_avx512(out, in, w, bias, m, k, n); break;
    case PACKED_AVX2: mx4w_matmul_avx2(out, in, w, bias, m, k, n); break;
#endif
    default: matmul_scalar(out, in, w, bias, m, k, n); break;
    }
    return true;
}

void mx4w_matmul(float *out, const float *in, const void *w, const float *bias, int m, int k, int n) {
    mx4w_matmul_isa(packed_isa_best(), out, in, w, bias, m, k, n);
}

/* W[c0 .. c0+nc)[i0 .. i0+32): one block of each column. */
static void decode_t(float *s, const void *w, int n, int k, int c0, int nc, int i0) {
    (void)n;
    for (int c = 0; c < nc; c++) column_weights(w, c0 + c, k, i0 / MX4W_K_BLOCK, i0 / MX4W_K_BLOCK + 1, s + (size_t)c * PT_TK);
}

#if MX4W_X86
static const pt_decode_fn decoders[PACKED_ISAS] = {decode_t, mx4w_decode_t_avx2, mx4w_decode_t_avx512};
#else
static const pt_decode_fn decoders[PACKED_ISAS] = {decode_t, decode_t, decode_t};
#endif

bool mx4w_matmul_t_isa(packed_isa isa, float *dx, const float *dy, const void *w, int m, int k, int n,
                       bool accumulate) {
    assert(k % MX4W_K_BLOCK == 0);
    return pt_matmul_t(isa, decoders, dx, dy, w, m, k, n, accumulate);
}

void mx4w_matmul_t(float *dx, const float *dy, const void *w, int m, int k, int n, bool accumulate) {
    mx4w_matmul_t_isa(packed_isa_best(), dx, dy, w, m, k, n, accumulate);
}
