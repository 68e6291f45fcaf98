/* The CUDA backend's numerics for a frozen packed base (lib/cuda/frozen.c)
 * on the host, as a reference: W packed in fmt dequantized to the CPU's
 * float32 values (its unpack) and rounded to bf16 (nearest even: exact for
 * bf16 and MXFP4 values, q8's and q4k's rounded), the activations rounded
 * to bf16, every product of two bf16 exact in float32, the sums float32
 * (here OpenBLAS's order, on the device lib/cuda/frozen_gemm.cu's tiles').
 * fake_device_bf16_frozen puts these products in a copy of
 * tests/unit/fake_device.h's table, so that a trainer on it computes what
 * the device would, up to summation order.
 * Header only, for any test; include after fake_device.h. */
#ifndef GRPO_TEST_FROZEN_BF16_H
#define GRPO_TEST_FROZEN_BF16_H

#include <stdlib.h>

#include "fake_device.h"
#include "ops/packed_bf16.h"
#include "ops/packed_mxfp4.h"
#include "ops/packed_q4k.h"
#include "ops/packed_q8.h"
#include "util/half.h"

/* x[n] rounded to bf16, as float32 in a new buffer (free it); NULL when
 * memory is short. */
static inline float *frozen_bf16_copy(const float *x, size_t n) {
    float *r = malloc((n ? n : 1) * sizeof *r);
    for (size_t i = 0; r && i < n; i++) r[i] = bf16_to_f32(f32_to_bf16(x[i]));
    return r;
}

/* W [rows, cols] packed in fmt (host bytes) as the device's GEMM reads it:
 * float32 rows of bf16 values in a new buffer (free it); NULL when memory
 * is short or fmt is not a frozen base's. */
static inline float *frozen_bf16_weights(const void *w_packed, weight_format fmt, int rows, int cols) {
    size_t n = (size_t)rows * cols;
    float *w = malloc((n ? n : 1) * sizeof *w);
    if (!w) return NULL;
    switch (fmt) {
    case WEIGHTS_BF16: bf16w_unpack(w, w_packed, rows, cols); break;
    case WEIGHTS_Q8: q8w_unpack(w, w_packed, rows, cols); break;
    case WEIGHTS_Q4K: q4kw_unpack(w, w_packed, rows, cols); break;
    case WEIGHTS_MXFP4: mx4w_unpack(w, w_packed, rows, cols); break;
    default: free(w); return NULL;
    }
    for (size_t i = 0; i < n; i++) w[i] = bf16_to_f32(f32_to_bf16(w[i]));
    return w;
}

/* fake_device_bf16_frozen's entries: the fake's checks on the arguments,
 * then the products above on the untagged memory. */
static inline void fd_frozen_bf16_forward(float *out, const float *in, const void *w_packed, weight_format fmt,
                                          const float *bias, int n, int in_dim, int out_dim) {
    float *w = frozen_bf16_weights(fake_device_dev("matmul_forward_frozen", "w_packed", w_packed), fmt, out_dim, in_dim);
    float *x = frozen_bf16_copy(fake_device_dev("matmul_forward_frozen", "in", in), (size_t)n * in_dim);
    if (!w || !x) fake_device_die("matmul_forward_frozen", "its bf16 copies", "more memory than the host has");
    backend_cpu()->matmul_forward(fake_device_dev("matmul_forward_frozen", "out", out), x, w,
                                  fake_device_dev("matmul_forward_frozen", "bias", bias), n, in_dim, out_dim);
    free(w), free(x);
}
static inline void fd_frozen_bf16_backward(float *din, const float *dout, const void *w_packed, weight_format fmt,
                                           int n, int in_dim, int out_dim, bool accumulate) {
    float *w = frozen_bf16_weights(fake_device_dev("matmul_backward_frozen", "w_packed", w_packed), fmt, out_dim, in_dim);
    float *dy = frozen_bf16_copy(fake_device_dev("matmul_backward_frozen", "dout", dout), (size_t)n * out_dim);
    if (!w || !dy) fake_device_die("matmul_backward_frozen", "its bf16 copies", "more memory than the host has");
    backend_cpu()->matmul_backward(fake_device_dev("matmul_backward_frozen", "din", din), NULL, NULL, dy, NULL, w, n,
                                   in_dim, out_dim, accumulate);
    free(w), free(dy);
}

/* *b: the fake device with the device's bf16 products on a frozen base
 * (gather_rows_packed stays the CPU's: the device's rows are its bits). */
static inline void fake_device_bf16_frozen(backend *b) {
    *b = *fake_device();
    b->name = "fake-device-bf16";
    b->matmul_forward_frozen = fd_frozen_bf16_forward;
    b->matmul_backward_frozen = fd_frozen_bf16_backward;
}

#endif
