/* The Q4_K quantizer (packed_q4k.h's q4kw_pack): a super-block of one
 * row's float32 values into d, dmin, 6-bit scales and mins and 4-bit
 * codes. The portable code here is the reference; the AVX-512 path
 * (packed_q4k_quant_avx512.c) runs eight sub-blocks side by side and the
 * AVX2 one (packed_q4k_quant_avx2.c) four, each lane the same double
 * operations in the same order, so they give the same blocks. */
#include <math.h>
#include <string.h>

#include "../util/half.h"
#include "packed_q4k_kernels.h"

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

void q4kw_scales(const double *a, const double *b, int subs, q4kw_super *out) {
    double amax = 0, mmax = 0;
    for (int s = 0; s < subs; s++) amax = a[s] > amax ? a[s] : amax, mmax = b[s] > mmax ? b[s] : mmax;
    memset(out, 0, sizeof *out);
    out->d = f16_nearest(amax / 63), out->dmin = f16_nearest(mmax / 63);
    for (int s = 0; s < subs; s++) out->sc[s] = six_bits(a[s], out->d), out->mn[s] = six_bits(b[s], out->dmin);
}

/* Each code the nearest under the final, rounded scales. */
static void codes(const float *x, int subs, q4kw_super *out) {
    for (int s = 0; s < subs; s++) {
        float ds = out->d * (float)out->sc[s], ms = out->dmin * (float)out->mn[s];
        for (int i = 0; i < Q4KW_K_SUB; i++) {
            double v = ds > 0 ? nearbyint(((double)x[Q4KW_K_SUB * s + i] + ms) / ds) : 0;
            uint32_t q = (uint32_t)(v < 0 ? 0 : v > 15 ? 15 : v);
            out->code[s][i / 8] |= q << 4 * (i % 8);
        }
    }
}

void q4kw_quantize(packed_isa isa, const float *x, int subs, q4kw_super *out) {
#if Q4KW_X86
    if (isa == PACKED_AVX512) {
        q4kw_quantize_avx512(x, subs, out);
        return;
    }
    if (isa == PACKED_AVX2) {
        q4kw_quantize_avx2(x, subs, out);
        return;
    }
#endif
    (void)isa;
    double a[Q4KW_SUBS] = {0}, b[Q4KW_SUBS] = {0};
    for (int s = 0; s < subs; s++) quantize_sub(x + Q4KW_K_SUB * s, &a[s], &b[s]);
    q4kw_scales(a, b, subs, out);
    codes(x, subs, out);
}
