/* The Q4_K panel layout (packed_q4k.h): packing from GGUF blocks and from
 * float32 (the quantizer), unpacking, the portable products and the
 * dispatch to the SIMD kernels (packed_q4k_avx2.c, packed_q4k_avx512.c). */
#include "packed_q4k.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "../util/half.h"
#include "packed_q4k_kernels.h"
#include "packed_tile.h"

static int panel_count(int n) { return (n + Q4KW_NR - 1) / Q4KW_NR; }

size_t q4kw_bytes(int n, int k) {
    assert(k % Q4KW_K_SUB == 0);
    return (size_t)panel_count(n) * q4kw_panel_bytes(k);
}

static float half_at(const unsigned char *p) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return f16_to_f32(h);
}

const char *q4kw_block_fault(const unsigned char block[Q4KW_GGUF_BYTES]) {
    return isfinite(half_at(block)) && isfinite(half_at(block + 2)) ? NULL : "has a scale that is not finite";
}

/* Super-block b of column col of a source whose rows are k long (ctx:
 * the source and what reads it). */
typedef void (*block_source)(const void *ctx, int col, int b, int k, q4kw_super *out);

static void gguf_source(const void *ctx, int col, int b, int k, q4kw_super *out) {
    const unsigned char *block =
        (const unsigned char *)ctx + ((size_t)col * (size_t)(k / Q4KW_K_SUPER) + (size_t)b) * Q4KW_GGUF_BYTES;
    const unsigned char *sc = block + 4, *qs = block + 16;
    out->d = half_at(block), out->dmin = half_at(block + 2);
    for (int s = 0; s < Q4KW_SUBS; s++) { /* get_scale_min_k4 */
        out->sc[s] = (uint8_t)(s < 4 ? sc[s] & 63 : (sc[s + 4] & 15) | (sc[s - 4] >> 6) << 4);
        out->mn[s] = (uint8_t)(s < 4 ? sc[s + 4] & 63 : (sc[s + 4] >> 4) | (sc[s] >> 6) << 4);
        for (int g = 0; g < 4; g++) {
            uint32_t word = 0;
            for (int t = 0; t < 8; t++) word |= (uint32_t)(qs[32 * (s / 2) + 8 * g + t] >> 4 * (s % 2) & 15) << 4 * t;
            out->code[s][g] = word;
        }
    }
}

typedef struct {
    const float *w;
    packed_isa isa;
} float_rows;

/* Super-block b of row col of a float32 W: its sub-blocks below k quantized. */
static void float_source(const void *ctx, int col, int b, int k, q4kw_super *out) {
    const float_rows *f = ctx;
    int subs = (k - b * Q4KW_K_SUPER) / Q4KW_K_SUB;
    q4kw_quantize(f->isa, f->w + (size_t)col * k + (size_t)b * Q4KW_K_SUPER, subs > Q4KW_SUBS ? Q4KW_SUBS : subs, out);
}

/* ---- panels -------------------------------------------------------------------- */

/* Super-block b of column j of a panel (its sub-blocks below k). */
static void put_super(unsigned char *panel, int j, int b, int k, const q4kw_super *sb) {
    unsigned char *head = panel + q4kw_head_at(b * Q4KW_SUBS);
    memcpy(head + 4 * j, &sb->d, 4);
    memcpy(head + Q4KW_DMIN_AT + 4 * j, &sb->dmin, 4);
    for (int s = 0; s < Q4KW_SUBS && (b * Q4KW_SUBS + s) * Q4KW_K_SUB < k; s++) {
        head[Q4KW_SC_AT + Q4KW_NR * s + j] = sb->sc[s], head[Q4KW_MN_AT + Q4KW_NR * s + j] = sb->mn[s];
        unsigned char *codes = panel + q4kw_codes_at(b * Q4KW_SUBS + s) + (size_t)j * 4;
        for (int g = 0; g < 4; g++) /* little-endian */
            for (int byte = 0; byte < 4; byte++)
                codes[(size_t)g * Q4KW_GROUP_BYTES + byte] = (unsigned char)(sb->code[s][g] >> 8 * byte);
    }
}

static void pack_panels(void *dst, const void *src, block_source source, int n, int k) {
    assert(k % Q4KW_K_SUB == 0);
    int panels = panel_count(n), supers = (k + Q4KW_K_SUPER - 1) / Q4KW_K_SUPER;
#pragma omp parallel for schedule(static)
    for (int p = 0; p < panels; p++) {
        unsigned char *panel = (unsigned char *)dst + (size_t)p * q4kw_panel_bytes(k);
        memset(panel, 0, q4kw_panel_bytes(k)); /* columns past n: d = dmin = 0, codes 0 */
        for (int j = 0; j < Q4KW_NR && p * Q4KW_NR + j < n; j++)
            for (int b = 0; b < supers; b++) {
                q4kw_super sb;
                source(src, p * Q4KW_NR + j, b, k, &sb);
                put_super(panel, j, b, k, &sb);
            }
    }
}

void q4kw_pack_gguf(void *dst, const void *blocks, int n, int k) {
    assert(k % Q4KW_K_SUPER == 0);
    pack_panels(dst, blocks, gguf_source, n, k);
}

bool q4kw_pack_isa(packed_isa isa, void *dst, const float *w, int n, int k) {
    if (!packed_isa_has(isa)) return false;
    float_rows f = {w, isa};
    pack_panels(dst, &f, float_source, n, k);
    return true;
}

void q4kw_pack(void *dst, const float *w, int n, int k) { q4kw_pack_isa(packed_isa_best(), dst, w, n, k); }

/* sb as a GGUF block: gguf_source's inverse (d and dmin are f16 values). */
static void gguf_block(unsigned char *block, const q4kw_super *sb) {
    uint16_t d = f32_to_f16(sb->d), dmin = f32_to_f16(sb->dmin);
    unsigned char *sc = block + 4, *qs = block + 16;
    block[0] = (unsigned char)d, block[1] = (unsigned char)(d >> 8);
    block[2] = (unsigned char)dmin, block[3] = (unsigned char)(dmin >> 8);
    for (int s = 0; s < 4; s++) { /* get_scale_min_k4's packing */
        sc[s] = (unsigned char)(sb->sc[s] | (sb->sc[s + 4] >> 4) << 6);
        sc[s + 4] = (unsigned char)(sb->mn[s] | (sb->mn[s + 4] >> 4) << 6);
        sc[s + 8] = (unsigned char)((sb->sc[s + 4] & 15) | (sb->mn[s + 4] & 15) << 4);
    }
    memset(qs, 0, Q4KW_GGUF_BYTES - 16);
    for (int s = 0; s < Q4KW_SUBS; s++)
        for (int i = 0; i < Q4KW_K_SUB; i++)
            qs[32 * (s / 2) + i] |= (unsigned char)((sb->code[s][i / 8] >> 4 * (i % 8) & 15) << 4 * (s % 2));
}

void q4kw_quantize_gguf(void *blocks, const float *x, size_t n) {
    assert(n % Q4KW_K_SUPER == 0);
    packed_isa isa = packed_isa_best();
    long supers = (long)(n / Q4KW_K_SUPER);
#pragma omp parallel for schedule(static)
    for (long b = 0; b < supers; b++) {
        q4kw_super sb;
        q4kw_quantize(isa, x + (size_t)b * Q4KW_K_SUPER, Q4KW_SUBS, &sb);
        gguf_block((unsigned char *)blocks + (size_t)b * Q4KW_GGUF_BYTES, &sb);
    }
}

/* Column col's weights of sub-blocks u0 .. u1 - 1: out[(u - u0) * 32 + i]. */
static void column_weights(const void *w, int col, int k, int u0, int u1, float *out) {
    const unsigned char *panel = (const unsigned char *)w + (size_t)(col / Q4KW_NR) * q4kw_panel_bytes(k);
    int j = col % Q4KW_NR;
    for (int u = u0; u < u1; u++) {
        const unsigned char *head = panel + q4kw_head_at(u), *codes = panel + q4kw_codes_at(u) + (size_t)j * 4;
        float d, dmin;
        memcpy(&d, head + 4 * j, 4);
        memcpy(&dmin, head + Q4KW_DMIN_AT + 4 * j, 4);
        int s = u % Q4KW_SUBS;
        float ds = d * (float)head[Q4KW_SC_AT + Q4KW_NR * s + j], ms = dmin * (float)head[Q4KW_MN_AT + Q4KW_NR * s + j];
        for (int i = 0; i < Q4KW_K_SUB; i++) {
            float t = ds * (float)(codes[(size_t)(i / 8) * Q4KW_GROUP_BYTES + (size_t)(i % 8 / 2)] >> 4 * (i % 2) & 15);
            out[(size_t)(u - u0) * Q4KW_K_SUB + i] = t - ms;
        }
    }
}

void q4kw_unpack(float *dst, const void *src, int n, int k) {
    assert(k % Q4KW_K_SUB == 0);
#pragma omp parallel for schedule(static)
    for (int col = 0; col < n; col++) column_weights(src, col, k, 0, k / Q4KW_K_SUB, dst + (size_t)col * k);
}

void q4kw_unpack_row(float *dst, const void *src, int row, int k) {
    assert(k % Q4KW_K_SUB == 0);
    column_weights(src, row, k, 0, k / Q4KW_K_SUB, dst);
}

/* ---- products ------------------------------------------------------------------ */

/* The portable matmul: each output's chain over k in order, then the bias. */
static void matmul_scalar(float *out, const float *in, const void *w, const float *bias, int m, int k, int n) {
#pragma omp parallel for schedule(static)
    for (int col = 0; col < n; col++) {
        float wb[Q4KW_K_SUB];
        for (int r = 0; r < m; r++) {
            const float *x = in + (size_t)r * k;
            float acc = 0.0f;
            for (int u = 0; u < k / Q4KW_K_SUB; u++) {
                column_weights(w, col, k, u, u + 1, wb);
                for (int i = 0; i < Q4KW_K_SUB; i++) acc = fmaf(x[u * Q4KW_K_SUB + i], wb[i], acc);
            }
            out[(size_t)r * n + col] = bias ? acc + bias[col] : acc; /* no + 0.0f: -0 stays -0 */
        }
    }
}

/* W[i0 .. i0+32)[c0 .. c0+nc) as s[c][j]: whole sub-blocks of 32 columns, zero past n. */
static void decode_f(float *s, const void *w, int n, int k, int c0, int nc, int i0) {
    float col[PT_CC];
    for (int j = 0; j < PT_TK; j++) {
        if (i0 + j < n) column_weights(w, i0 + j, k, c0 / Q4KW_K_SUB, (c0 + nc) / Q4KW_K_SUB, col);
        for (int c = 0; c < nc; c++) s[(size_t)c * PT_TK + j] = i0 + j < n ? col[c] : 0.0f;
    }
}

#if Q4KW_X86
static const pt_decode_fn decoders_f[PACKED_ISAS] = {decode_f, q4kw_decode_f_avx2, q4kw_decode_f_avx512};
#else
static const pt_decode_fn decoders_f[PACKED_ISAS] = {decode_f, decode_f, decode_f};
#endif

bool q4kw_matmul_isa(packed_isa isa, float *out, const float *in, const void *w, const float *bias, int m, int k,
                     int n) {
    assert(k % Q4KW_K_SUB == 0);
    if (!packed_isa_has(isa)) return false;
    if (m <= 0 || n <= 0) return true;
    /* many rows: each chunk of W decoded once for PT_RC rows (packed_tile.h), the same chains */
    if (m >= Q4KW_TILE_ROWS) return pt_matmul(isa, decoders_f, out, in, w, bias, m, k, n);
    switch (isa) {
#if Q4KW_X86
    case PACKED_AVX512: q4kw_matmul_avx512(out, in, w, bias, m, k, n); break;
    case PACKED_AVX2: q4kw_matmul_avx2(out, in, w, bias, m, k, n); break;
#endif
    default: matmul_scalar(out, in, w, bias, m, k, n); break;
    }
    return true;
}

void q4kw_matmul(float *out, const float *in, const void *w, const float *bias, int m, int k, int n) {
    q4kw_matmul_isa(packed_isa_best(), out, in, w, bias, m, k, n);
}

/* W[c0 .. c0+nc)[i0 .. i0+32): one sub-block of each column. */
static void decode_t(float *s, const void *w, int n, int k, int c0, int nc, int i0) {
    (void)n;
    for (int c = 0; c < nc; c++)
        column_weights(w, c0 + c, k, i0 / Q4KW_K_SUB, i0 / Q4KW_K_SUB + 1, s + (size_t)c * PT_TK);
}

#if Q4KW_X86
static const pt_decode_fn decoders[PACKED_ISAS] = {decode_t, q4kw_decode_t_avx2, q4kw_decode_t_avx512};
#else
static const pt_decode_fn decoders[PACKED_ISAS] = {decode_t, decode_t, decode_t};
#endif

bool q4kw_matmul_t_isa(packed_isa isa, float *dx, const float *dy, const void *w, int m, int k, int n,
                       bool accumulate) {
    assert(k % Q4KW_K_SUB == 0);
    return pt_matmul_t(isa, decoders, dx, dy, w, m, k, n, accumulate);
}

void q4kw_matmul_t(float *dx, const float *dy, const void *w, int m, int k, int n, bool accumulate) {
    q4kw_matmul_t_isa(packed_isa_best(), dx, dy, w, m, k, n, accumulate);
}
