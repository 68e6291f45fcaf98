/* Row-wise ops: residual adds, gathers and scatters of rows (embedding
 * lookup and its gradient, picking the rows the head reads), and LoRA's
 * dropout masks, regenerated from keys instead of stored. */
#include "ops.h"

#include <string.h>

#include "../util/rng.h"

void add_inplace(float *x, const float *y, size_t n) {
#pragma omp parallel for schedule(static) if (n > 4096)
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}

void gather_rows(float *dst, const float *src, const int32_t *idx, int n, int d) {
    for (int i = 0; i < n; i++)
        memcpy(dst + (size_t)i * d, src + (size_t)idx[i] * d, (size_t)d * sizeof *dst);
}

void scatter_add_rows(float *dst, const float *src, const int32_t *idx, int n, int d) {
    /* in order, one row at a time: repeated rows add up the same way every run */
    for (int i = 0; i < n; i++) {
        float *to = dst + (size_t)idx[i] * d;
        const float *from = src + (size_t)i * d;
        for (int c = 0; c < d; c++) to[c] += from[c];
    }
}

void dropout_rows(float *x, int n_rows, int n, const uint64_t *row_key, const int *row_pos,
                  const uint32_t stream_key[2], double p) {
    uint32_t threshold = (uint32_t)(p * 4294967296.0);
    float keep_scale = (float)(1.0 / (1.0 - p));
#pragma omp parallel for schedule(static)
    for (int r = 0; r < n_rows; r++) {
        uint64_t key = row_key[r];
        float *xr = x + (size_t)r * n;
        for (int c = 0; c < n; c += 4) {
            uint32_t ctr[4] = {(uint32_t)(c / 4), (uint32_t)key, (uint32_t)(key >> 32), (uint32_t)row_pos[r]}, w[4];
            philox4x32_10(ctr, stream_key, w);
            for (int i = 0; i < 4 && c + i < n; i++) xr[c + i] = w[i] < threshold ? 0.0f : xr[c + i] * keep_scale;
        }
    }
}
