#include "ops.h"

#include "../util/vecmath.h"

#include "blas.h"

#include <cblas.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

void rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int n, int d, float eps) {
#pragma omp parallel for schedule(static) if (n > 1)
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * d;
        float *o = out + (size_t)r * d;
        double ss = 0; /* double: the mean of squares should not depend on d's size */
        for (int i = 0; i < d; i++) ss += (double)xr[i] * xr[i];
        float s = (float)(1.0 / sqrt(ss / d + (double)eps));
        if (rstd) rstd[r] = s;
        /* HF rounds x * rstd to the activation dtype before scaling by w. */
        for (int i = 0; i < d; i++) o[i] = w[i] * (xr[i] * s);
    }
}

void matmul_forward(float *out, const float *in, const float *w, const float *bias, int n, int in_dim,
                    int out_dim) {
    if (n <= 0) return;
    if (blas_shares_openmp()) { /* OpenBLAS parallelizes on our pool */
        if (bias)
            for (int r = 0; r < n; r++) memcpy(out + (size_t)r * out_dim, bias, (size_t)out_dim * sizeof *out);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out_dim, in_dim, 1.0f, in, in_dim, w, in_dim,
                    bias ? 1.0f : 0.0f, out, out_dim);
        return;
    }
    /* Each OpenMP thread takes a band of output columns and calls the
     * single-threaded sgemm on it. */
#pragma omp parallel
    {
        int tid = 0, nt = 1;
#ifdef _OPENMP
        tid = omp_get_thread_num(), nt = omp_get_num_threads();
#endif
        int band = ((out_dim + nt - 1) / nt + 15) / 16 * 16; /* whole SIMD panels */
        int lo = tid * band, hi = lo + band < out_dim ? lo + band : out_dim;
        if (hi > lo) {
            if (bias)
                for (int r = 0; r < n; r++)
                    memcpy(out + (size_t)r * out_dim + lo, bias + lo, (size_t)(hi - lo) * sizeof *out);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, hi - lo, in_dim, 1.0f, in, in_dim,
                        w + (size_t)lo * in_dim, in_dim, bias ? 1.0f : 0.0f, out + lo, out_dim);
        }
    }
}

void rope_inv_freq(float *inv_freq, const model_config *c) {
    int half = c->head_dim / 2;
    for (int i = 0; i < half; i++)
        inv_freq[i] = (float)(1.0 / pow(c->rope_theta, (double)(2 * i) / c->head_dim));
    if (!c->rope_llama3) return;
    /* transformers' _compute_llama3_parameters: long wavelengths are slowed
     * by factor, short ones kept, the band between interpolated. */
    double factor = c->rope_factor, lo = c->rope_low_freq_factor, hi = c->rope_high_freq_factor;
    double old_ctx = c->rope_original_max_pos;
    double low_freq_wavelen = old_ctx / lo, high_freq_wavelen = old_ctx / hi;
    for (int i = 0; i < half; i++) {
        double f = inv_freq[i], wavelen = 2 * M_PI / f;
        double g = wavelen > low_freq_wavelen ? f / factor : f;
        if (!(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen)) {
            double smooth = (old_ctx / wavelen - lo) / (hi - lo);
            g = (1 - smooth) * g / factor + smooth * g;
        }
        inv_freq[i] = (float)g;
    }
}

void rope_cos_sin(float *cos_out, float *sin_out, const float *inv_freq, int half, const int *pos, int n) {
#pragma omp parallel for schedule(static) if (n > 1)
    for (int r = 0; r < n; r++)
        for (int i = 0; i < half; i++) {
            float angle = (float)pos[r] * inv_freq[i]; /* float32 product, as HF */
            cos_out[(size_t)r * half + i] = (float)cos((double)angle);
            sin_out[(size_t)r * half + i] = (float)sin((double)angle);
        }
}

void rope_forward(float *x, const float *cos_t, const float *sin_t, int n, int n_heads, int head_dim) {
    int half = head_dim / 2;
#pragma omp parallel for schedule(static) if (n > 1)
    for (int r = 0; r < n; r++) {
        const float *c = cos_t + (size_t)r * half, *s = sin_t + (size_t)r * half;
        for (int h = 0; h < n_heads; h++) {
            float *v = x + ((size_t)r * n_heads + h) * head_dim;
            for (int i = 0; i < half; i++) {
                float a = v[i], b = v[i + half];
                v[i] = a * c[i] - b * s[i];
                v[i + half] = b * c[i] + a * s[i];
            }
        }
    }
}

VECTOR_CLONES void softmax_inplace(float *x, int n) {
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    /* float sums over blocks (they vectorize), added up in double */
    double sum = 0;
    for (int i0 = 0; i0 < n; i0 += 256) {
        int i1 = n - i0 < 256 ? n : i0 + 256;
        float block = 0;
#pragma omp simd reduction(+ : block)
        for (int i = i0; i < i1; i++) {
            x[i] = vec_expf(x[i] - mx);
            block += x[i];
        }
        sum += block;
    }
    float inv = (float)(1.0 / sum);
#pragma omp simd
    for (int i = 0; i < n; i++) x[i] *= inv;
}

/* silu(gate) * up over one span */
VECTOR_CLONES static void swiglu_span(float *out, const float *gate, const float *up, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float g = gate[i];
        out[i] = g / (1.0f + vec_expf(-g)) * up[i];
    }
}

void swiglu_forward(float *out, const float *gate, const float *up, size_t n) {
    enum { SPAN = 4096 };
    size_t spans = (n + SPAN - 1) / SPAN;
#pragma omp parallel for schedule(static) if (spans > 1)
    for (size_t b = 0; b < spans; b++) {
        size_t i0 = b * SPAN, len = n - i0 < SPAN ? n - i0 : SPAN;
        swiglu_span(out + i0, gate + i0, up + i0, len);
    }
}

void qk_permute(float *dst, const float *src, int n_head, int head_dim, size_t n_cols) {
    int half = head_dim / 2;
    for (int h = 0; h < n_head; h++)
        for (int i = 0; i < half; i++)
            for (int j = 0; j < 2; j++) {
                size_t g = (size_t)h * head_dim + 2 * i + j, f = (size_t)h * head_dim + j * half + i;
                memcpy(dst + g * n_cols, src + f * n_cols, n_cols * sizeof *dst);
            }
}

void qk_unpermute(float *dst, const float *src, int n_head, int head_dim, size_t n_cols) {
    int half = head_dim / 2;
    for (int h = 0; h < n_head; h++)
        for (int i = 0; i < half; i++)
            for (int j = 0; j < 2; j++) {
                size_t g = (size_t)h * head_dim + 2 * i + j, f = (size_t)h * head_dim + j * half + i;
                memcpy(dst + f * n_cols, src + g * n_cols, n_cols * sizeof *dst);
            }
}
