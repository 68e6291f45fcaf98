/* SwiGLU: silu(gate) * up (and gpt-oss's clamped form), forward and backward, over spans that vectorize
 * (vec_expf, AVX-512/AVX2 clones). */
#include "ops.h"

#include "../util/vecmath.h"

enum { SPAN = 4096 };

VECTOR_CLONES static void swiglu_span(float *out, const float *gate, const float *up, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float g = gate[i];
        out[i] = g / (1.0f + vec_expf(-g)) * up[i];
    }
}

void swiglu_forward(float *out, const float *gate, const float *up, size_t n) {
    size_t spans = (n + SPAN - 1) / SPAN;
#pragma omp parallel for schedule(static) if (spans > 1)
    for (size_t b = 0; b < spans; b++) {
        size_t i0 = b * SPAN, len = n - i0 < SPAN ? n - i0 : SPAN;
        swiglu_span(out + i0, gate + i0, up + i0, len);
    }
}

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
    size_t spans = (n + SPAN - 1) / SPAN;
#pragma omp parallel for schedule(static) if (spans > 1)
    for (size_t b = 0; b < spans; b++) {
        size_t i0 = b * SPAN, len = n - i0 < SPAN ? n - i0 : SPAN;
        swiglu_backward_span(dg + i0, du + i0, dh + i0, g + i0, u + i0, len);
    }
}

/* ---- gpt-oss's clamped SwiGLU ---------------------------------------------------------- */

VECTOR_CLONES static void clamped_span(float *out, const float *gate, const float *up, size_t n, float alpha,
                                       float limit) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float g = gate[i] < limit ? gate[i] : limit, u = up[i] < -limit ? -limit : up[i] > limit ? limit : up[i];
        out[i] = g / (1.0f + vec_expf(-alpha * g)) * (u + 1.0f);
    }
}

void swiglu_clamped_forward(float *out, const float *gate, const float *up, size_t n, float alpha, float limit) {
    size_t spans = (n + SPAN - 1) / SPAN;
#pragma omp parallel for schedule(static) if (spans > 1)
    for (size_t b = 0; b < spans; b++) {
        size_t i0 = b * SPAN, len = n - i0 < SPAN ? n - i0 : SPAN;
        clamped_span(out + i0, gate + i0, up + i0, len, alpha, limit);
    }
}

VECTOR_CLONES static void clamped_backward_span(float *dg, float *du, const float *dh, const float *g, const float *u,
                                                size_t n, float alpha, float limit) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float x = g[i] < limit ? g[i] : limit, y = u[i] < -limit ? -limit : u[i] > limit ? limit : u[i];
        float sig = 1.0f / (1.0f + vec_expf(-alpha * x)), d = dh[i];
        du[i] = u[i] >= -limit && u[i] <= limit ? d * x * sig : 0.0f;
        dg[i] = g[i] <= limit ? d * (y + 1.0f) * sig * (1.0f + alpha * x * (1.0f - sig)) : 0.0f;
    }
}

void swiglu_clamped_backward(float *dg, float *du, const float *dh, const float *g, const float *u, size_t n,
                             float alpha, float limit) {
    size_t spans = (n + SPAN - 1) / SPAN;
#pragma omp parallel for schedule(static) if (spans > 1)
    for (size_t b = 0; b < spans; b++) {
        size_t i0 = b * SPAN, len = n - i0 < SPAN ? n - i0 : SPAN;
        clamped_backward_span(dg + i0, du + i0, dh + i0, g + i0, u + i0, len, alpha, limit);
    }
}
