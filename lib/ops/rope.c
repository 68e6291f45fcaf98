/* Rotary position embeddings (HF's rotate-half form), forward and backward,
 * and GGUF's interleaved Q/K row order. */
#include "ops.h"

#include <math.h>
#include <string.h>

void rope_cos_sin(float *cos_out, float *sin_out, const float *inv_freq, int half, const int *pos, int n) {
#pragma omp parallel for schedule(static) if (n > 1)
    for (int r = 0; r < n; r++)
        for (int i = 0; i < half; i++) {
            float angle = (float)pos[r] * inv_freq[i]; /* float32 product, as HF */
            cos_out[(size_t)r * half + i] = (float)cos((double)angle);
            sin_out[(size_t)r * half + i] = (float)sin((double)angle);
        }
}

/* Rotates each head's pairs (i, i + half) by the angle, or back by its
 * negative (sign -1: the backward, the transpose of a rotation). */
static void rotate(float *x, const float *cos_t, const float *sin_t, int n, int n_heads, int head_dim, float sign) {
    int half = head_dim / 2;
#pragma omp parallel for schedule(static) if (n > 1)
    for (int r = 0; r < n; r++) {
        const float *c = cos_t + (size_t)r * half, *s = sin_t + (size_t)r * half;
        for (int h = 0; h < n_heads; h++) {
            float *v = x + ((size_t)r * n_heads + h) * head_dim;
            for (int i = 0; i < half; i++) {
                float a = v[i], b = v[i + half], sn = sign * s[i];
                v[i] = a * c[i] - b * sn;
                v[i + half] = b * c[i] + a * sn;
            }
        }
    }
}

void rope_forward(float *x, const float *cos_t, const float *sin_t, int n, int n_heads, int head_dim) {
    rotate(x, cos_t, sin_t, n, n_heads, head_dim, 1.0f);
}

void rope_backward(float *dx, const float *cos_t, const float *sin_t, int n, int n_heads, int head_dim) {
    rotate(dx, cos_t, sin_t, n, n_heads, head_dim, -1.0f);
}

/* Row f = h*hd + j*half + i (HF) sits at g = h*hd + 2i + j (GGUF); rows of
 * row_bytes bytes each. */
static void permute_rows(void *dst, const void *src, int n_head, int head_dim, size_t row_bytes, bool to_gguf) {
    int half = head_dim / 2;
    for (int h = 0; h < n_head; h++)
        for (int i = 0; i < half; i++)
            for (int j = 0; j < 2; j++) {
                size_t g = (size_t)h * head_dim + 2 * i + j, f = (size_t)h * head_dim + j * half + i;
                size_t to = to_gguf ? g : f, from = to_gguf ? f : g;
                memcpy((char *)dst + to * row_bytes, (const char *)src + from * row_bytes, row_bytes);
            }
}

void qk_permute(float *dst, const float *src, int n_head, int head_dim, size_t n_cols) {
    permute_rows(dst, src, n_head, head_dim, n_cols * sizeof *dst, true);
}

void qk_unpermute(float *dst, const float *src, int n_head, int head_dim, size_t n_cols) {
    permute_rows(dst, src, n_head, head_dim, n_cols * sizeof *dst, false);
}

void qk_unpermute_rows(void *dst, const void *src, int n_head, int head_dim, size_t row_bytes) {
    permute_rows(dst, src, n_head, head_dim, row_bytes, false);
}
