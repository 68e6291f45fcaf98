#include "train_ops.h"

#include "../util/vecmath.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

void rmsnorm_backward(float *dx, float *dw, const float *dy, const float *x, const float *w, const float *rstd,
                      int n, int d) {
    if (dw) {
        /* columns split across threads, so no two threads add to one dw[i] */
#pragma omp parallel for schedule(static) if ((size_t)n * d > 65536)
        for (int i = 0; i < d; i++) {
            double acc = 0;
            for (int r = 0; r < n; r++) acc += (double)dy[(size_t)r * d + i] * x[(size_t)r * d + i] * rstd[r];
            dw[i] += (float)acc;
        }
    }
#pragma omp parallel for schedule(static) if (n > 1)
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * d, *dyr = dy + (size_t)r * d;
        float *dxr = dx + (size_t)r * d;
        double dot = 0;
        for (int i = 0; i < d; i++) dot += (double)w[i] * dyr[i] * xr[i];
        float s = rstd[r], c = (float)((double)s * s * s * dot / d);
        for (int i = 0; i < d; i++) dxr[i] = s * w[i] * dyr[i] - c * xr[i];
    }
}

void matmul_backward(float *din, float *dw, float *db, const float *dout, const float *in, const float *w, int n,
                     int in_dim, int out_dim, int accumulate) {
    if (n <= 0) return;
    if (din)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in_dim, out_dim, 1.0f, dout, out_dim, w, in_dim,
                    accumulate ? 1.0f : 0.0f, din, in_dim);
    if (dw)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out_dim, in_dim, n, 1.0f, dout, out_dim, in, in_dim,
                    1.0f, dw, in_dim);
    if (db) {
#pragma omp parallel for schedule(static) if ((size_t)n * out_dim > 65536)
        for (int o = 0; o < out_dim; o++) {
            double acc = 0;
            for (int r = 0; r < n; r++) acc += dout[(size_t)r * out_dim + o];
            db[o] += (float)acc;
        }
    }
}

void rope_backward(float *dx, const float *cos_t, const float *sin_t, int n, int n_heads, int head_dim) {
    int half = head_dim / 2;
#pragma omp parallel for schedule(static) if (n > 1)
    for (int r = 0; r < n; r++) {
        const float *c = cos_t + (size_t)r * half, *s = sin_t + (size_t)r * half;
        for (int h = 0; h < n_heads; h++) {
            float *v = dx + ((size_t)r * n_heads + h) * head_dim;
            for (int i = 0; i < half; i++) {
                float a = v[i], b = v[i + half];
                v[i] = a * c[i] + b * s[i];
                v[i + half] = b * c[i] - a * s[i];
            }
        }
    }
}

/* The backward of silu(g) * u over one span */
VECTOR_CLONES static void swiglu_backward_span(float *dg, float *du, const float *dh, const float *g, const float *u,
                                               size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float x = g[i], sig = 1.0f / (1.0f + vec_expf(-x)), silu = x * sig, d = dh[i];
        du[i] = d * silu;
        dg[i] = d * u[i] * sig * (1.0f + x * (1.0f - sig));
    }
}

void swiglu_backward(float *dg, float *du, const float *dh, const float *g, const float *u, size_t n) {
    enum { SPAN = 4096 };
    size_t spans = (n + SPAN - 1) / SPAN;
#pragma omp parallel for schedule(static) if (spans > 1)
    for (size_t b = 0; b < spans; b++) {
        size_t i0 = b * SPAN, len = n - i0 < SPAN ? n - i0 : SPAN;
        swiglu_backward_span(dg + i0, du + i0, dh + i0, g + i0, u + i0, len);
    }
}
