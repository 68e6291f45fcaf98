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

/* One super-block of one column: its scales and its codes in k order
 * (subs sub-blocks: 8, or fewer in a short last one). */
typedef struct {
    float d, dmin;
    uint8_t sc[Q4KW_SUBS], mn[Q4KW_SUBS], q[Q4KW_K_SUPER];
} super_block;

/* Block b of column col of the source, whose rows are k long. */
typedef void (*block_source)(const void *src, int col, int b, int k, super_block *out);

static void gguf_source(const void *src, int col, int b, int k, super_block *out) {
    const unsigned char *block =
        (const unsigned char *)src + ((size_t)col * (size_t)(k / Q4KW_K_SUPER) + (size_t)b) * Q4KW_GGUF_BYTES;
    const unsigned char *sc = block + 4, *qs = block + 16;
    out->d = half_at(block), out->dmin = half_at(block + 2);
    for (int s = 0; s < Q4KW_SUBS; s++) { /* get_scale_min_k4 */
        out->sc[s] = (uint8_t)(s < 4 ? sc[s] & 63 : (sc[s + 4] & 15) | (sc[s - 4] >> 6) << 4);
        out->mn[s] = (uint8_t)(s < 4 ? sc[s + 4] & 63 : (sc[s + 4] >> 4) | (sc[s] >> 6) << 4);
        for (int l = 0; l < Q4KW_K_SUB; l++) out->q[Q4KW_K_SUB * s + l] = qs[32 * (s / 2) + l] >> 4 * (s % 2) & 15;
    }
}

/* ---- the quantizer ------------------------------------------------------------- */

/* x ~ a q - b over 32 values, a >= 0, b >= 0: the least-squares (a, b) for
 * codes q (b held at 0 when the fit wants it negative); its squared error. */
static double fit(const float *x, const uint8_t *q, double *a, double *b) {
    double sq = 0, sqq = 0, sx = 0, sxq = 0, n = Q4KW_K_SUB;
    for (int i = 0; i < Q4KW_K_SUB; i++) sq += q[i], sqq += (double)q[i] * q[i], sx += x[i], sxq += (double)x[i] * q[i];
    double det = n * sqq - sq * sq;
    *a = det > 0 ? (n * sxq - sq * sx) / det : 0;
    *b = det > 0 ? (sq * *a - sx) / n : -sx / n;
    if (*b < 0) *b = 0, *a = sqq > 0 ? sxq / sqq : 0;
    if (*a < 0) *a = 0, *b = -sx / n > 0 ? -sx / n : 0;
    double err = 0;
    for (int i = 0; i < Q4KW_K_SUB; i++) {
        double e = *a * q[i] - *b - x[i];
        err += e * e;
    }
    return err;
}

/* A sub-block's float scale and min: the best fit over the candidates. */
static void quantize_sub(const float *x, double *a, double *b) {
    float lo = 0, hi = x[0];
    for (int i = 0; i < Q4KW_K_SUB; i++) lo = x[i] < lo ? x[i] : lo, hi = x[i] > hi ? x[i] : hi;
    *a = 0, *b = -lo;
    if (!(hi > lo)) return; /* every value the same, and <= 0: -lo exactly */
    double best = INFINITY;
    for (int t = -10; t <= 10; t++) {
        double iscale = (15 + 0.1 * t) / ((double)hi - lo), ca, cb;
        uint8_t q[Q4KW_K_SUB];
        for (int i = 0; i < Q4KW_K_SUB; i++) {
            double v = nearbyint(((double)x[i] - lo) * iscale);
            q[i] = (uint8_t)(v < 0 ? 0 : v > 15 ? 15 : v);
        }
        double err = fit(x, q, &ca, &cb);
        if (err < best) best = err, *a = ca, *b = cb;
    }
}

/* The 6-bit multiple of unit nearest v (0 when unit is 0). */
static uint8_t six_bits(double v, float unit) {
    double r = unit > 0 ? nearbyint(v / unit) : 0;
    return (uint8_t)(r < 0 ? 0 : r > 63 ? 63 : r);
}

/* f16's value nearest v, its largest finite one at most. */
static float f16_nearest(double v) {
    float f = f16_to_f32(f32_to_f16((float)v));
    return isfinite(f) ? f : 65504.0f;
}

/* Super-block b of row col of a float32 W: subs sub-blocks quantized. */
static void float_source(const void *src, int col, int b, int k, super_block *out) {
    const float *x = (const float *)src + (size_t)col * k + (size_t)b * Q4KW_K_SUPER;
    int subs = (k - b * Q4KW_K_SUPER) / Q4KW_K_SUB;
    subs = subs > Q4KW_SUBS ? Q4KW_SUBS : subs;
    double a[Q4KW_SUBS], m[Q4KW_SUBS], amax = 0, mmax = 0;
    for (int s = 0; s < subs; s++) {
        quantize_sub(x + Q4KW_K_SUB * s, &a[s], &m[s]);
        amax = a[s] > amax ? a[s] : amax, mmax = m[s] > mmax ? m[s] : mmax;
    }
    memset(out, 0, sizeof *out);
    out->d = f16_nearest(amax / 63), out->dmin = f16_nearest(mmax / 63);
    for (int s = 0; s < subs; s++) {
        out->sc[s] = six_bits(a[s], out->d), out->mn[s] = six_bits(m[s], out->dmin);
        float ds = out->d * (float)out->sc[s], ms = out->dmin * (float)out->mn[s];
        for (int i = 0; i < Q4KW_K_SUB; i++) {
            double v = ds > 0 ? nearbyint(((double)x[Q4KW_K_SUB * s + i] + ms) / ds) : 0;
            out->q[Q4KW_K_SUB * s + i] = (uint8_t)(v < 0 ? 0 : v > 15 ? 15 : v);
        }
    }
}

/* ---- panels -------------------------------------------------------------------- */

/* Super-block b of column j of a zeroed panel (its sub-blocks below k). */
static void put_super(unsigned char *panel, int j, int b, int k, const super_block *sb) {
    unsigned char *head = panel + q4kw_head_at(b * Q4KW_SUBS);
    memcpy(head + 4 * j, &sb->d, 4);
    memcpy(head + Q4KW_DMIN_AT + 4 * j, &sb->dmin, 4);
    for (int s = 0; s < Q4KW_SUBS && (b * Q4KW_SUBS + s) * Q4KW_K_SUB < k; s++) {
        int u = b * Q4KW_SUBS + s;
        head[Q4KW_SC_AT + Q4KW_NR * s + j] = sb->sc[s], head[Q4KW_MN_AT + Q4KW_NR * s + j] = sb->mn[s];
        for (int i = 0; i < Q4KW_K_SUB; i++)
            panel[q4kw_codes_at(u) + (size_t)(i / 8) * Q4KW_GROUP_BYTES + (size_t)j * 4 + (size_t)(i % 8 / 2)] |=
                (unsigned char)((sb->q[Q4KW_K_SUB * s + i] & 15) << 4 * (i % 2));
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
                super_block sb;
                source(src, p * Q4KW_NR + j, b, k, &sb);
                put_super(panel, j, b, k, &sb);
            }
    }
}

void q4kw_pack_gguf(void *dst, const void *blocks, int n, int k) {
    assert(k % Q4KW_K_SUPER == 0);
    pack_panels(dst, blocks, gguf_source, n, k);
}

void q4kw_pack(void *dst, const float *w, int n, int k) { pack_panels(dst, w, float_source, n, k); }

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

bool q4kw_matmul_isa(packed_isa isa, float *out, const float *in, const void *w, const float *bias, int m, int k,
                     int n) {
    assert(k % Q4KW_K_SUB == 0);
    if (!packed_isa_has(isa)) return false;
    if (m <= 0 || n <= 0) return true;
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
