/* The products over a frozen packed base (backend.h's matmul_forward_frozen
 * and matmul_backward_frozen) on any device backend, against float64 ones
 * over the operands a device reads (frozen_bf16.h: W's values and the
 * activations rounded to bf16), over shapes that are not multiples of a
 * device's tiles (lib/cuda/frozen_gemm.cu's 128 x 128, 32 along k): n 1, 7,
 * 33, 130 (two tiles, two rows in the second); out_dim 48, 100, 200 (q8's,
 * q4k's and MXFP4's panels of 16 short at 100, bf16's of 32 at 48 and 100;
 * the backward's inner length not a multiple of 32); in_dim 64, 96, 288
 * (short q4k super-blocks and MXFP4 quads; three tiles of in_dim in the
 * backward, the last a quarter) and, bf16 only, 37 and 70 (a block cut
 * short). Each shape: the forward with a bias and without, the input
 * gradient written and added to. test_frozen_device runs it on the fake
 * device's emulation of those numerics (the check of the check, here),
 * test_cuda_train on a GPU (frozen_gemm.cu's tiled kernels).
 *
 * Tolerance, per output: |y - ref| <= (K + 2) 2^-22 (sum_k |a_k w_k| +
 * |init|), K the inner length, init the bias or the gradient added to.
 * Every product of two bf16 values is exact in float32 (8 + 8 significant
 * bits); float32 sums of K terms in any order are within (K - 1) u of the
 * sum of the terms' magnitudes, u = 2^-24 rounding to nearest and 2^-23
 * on tensor cores, whose adders truncate (Fasi et al., "Numerical behavior
 * of NVIDIA tensor cores", 2021); adding init and rounding the float64
 * reference to float32 take one rounding each: (K + 1) 2^-23 bounds it,
 * the check allows twice that. A term dropped or counted twice, or taken
 * from a neighbouring row or column (a tile edge mishandled), moves an
 * output by about its mean term, sum / K: 2^22 / (K (K + 2)) times the
 * bound, 50 times at K = 288, so a wrong edge fails many outputs. The
 * outputs start as NaN (an output never stored fails), NaN follows each
 * input (a read past an input's end that reaches a sum fails) and a known
 * pattern each output (a store past the end fails). On a device that
 * promises it (row_alone: frozen_gemm.cu's, not the fake's OpenBLAS), the
 * last row alone gives the bytes it gets among the others.
 * Header only; include after check.h. */
#ifndef GRPO_TEST_FROZEN_SWEEP_H
#define GRPO_TEST_FROZEN_SWEEP_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frozen_bf16.h"
#include "tiny_train.h"

/* floats past each device buffer's end: more than a row of the widest
 * output, so that a store to the row after the last lands in them */
enum { FROZEN_SWEEP_TAIL = 512 };

/* W [out, in] packed in fmt into a new buffer (free it): bf16, q8 and q4k
 * from uniform floats in [-0.05, 0.05); mxfp4 from pseudo-random blocks
 * (scales 2^-5 .. 2^-3 in half units, as tiny_train.h's). */
static inline void *frozen_random_packed(weight_format fmt, int out, int in, uint64_t seed) {
    void *wp = malloc(weights_packed_bytes(fmt, out, in));
    if (!wp) abort();
    if (fmt == WEIGHTS_MXFP4) {
        size_t n = (size_t)out * (in / MX4W_K_BLOCK) * MX4W_GGUF_BYTES;
        unsigned char *blocks = malloc(n);
        if (!blocks) abort();
        for (size_t i = 0; i < n; i++) blocks[i] = (unsigned char)((i + seed) * 2654435761u >> 13);
        for (size_t b = 0; b < n; b += MX4W_GGUF_BYTES) blocks[b] = (unsigned char)(123 + b / MX4W_GGUF_BYTES % 3);
        mx4w_pack_gguf(wp, blocks, out, in);
        free(blocks);
    } else {
        float *w = malloc((size_t)out * in * sizeof *w);
        if (!w) abort();
        fill_uniform(w, (size_t)out * in, 0.05, 0.0, seed, 0);
        weights_pack(fmt, wp, w, out, in);
        free(w);
    }
    return wp;
}

/* a float filling what lies past an output: a NaN with a payload */
static inline float frozen_sweep_mark(void) {
    uint32_t u = 0x7fc0beefu;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* A device buffer of n floats from h (NULL: NaN) followed by
 * FROZEN_SWEEP_TAIL floats of tail; NULL (the test failed) on an error. */
static inline float *frozen_sweep_dev(const backend *b, const float *h, size_t n, float tail) {
    size_t total = n + FROZEN_SWEEP_TAIL;
    float *buf = malloc(total * sizeof *buf);
    void *d = NULL;
    gerr e = {0};
    if (!buf) abort();
    for (size_t i = 0; i < total; i++) buf[i] = i < n ? (h ? h[i] : NAN) : tail;
    if (b->mem_alloc(&d, total * sizeof *buf, &e) || b->mem_upload(d, buf, total * sizeof *buf, &e)) {
        printf("#   device copy: %s\n", e.msg);
        CHECK(0);
        d = NULL;
    }
    free(buf);
    return d;
}

/* The n floats of d and its tail on the host (free it); NaN where the download failed. */
static inline float *frozen_sweep_host(const backend *b, const float *d, size_t n) {
    size_t total = n + FROZEN_SWEEP_TAIL;
    float *h = malloc(total * sizeof *h);
    gerr e = {0};
    if (!h) abort();
    for (size_t i = 0; i < total; i++) h[i] = NAN;
    if (d && b->mem_download(h, d, total * sizeof *h, &e)) {
        printf("#   download: %s\n", e.msg);
        CHECK(0);
    }
    return h;
}

/* y [n, N] against y[r, c] = init[r, c] (or bias[c]; both NULL: 0) +
 * sum_k a[r, k] w(k, c) in float64, w(k, c) = W[c, k] (forward: K = in,
 * N = out) or W[k, c] (backward: K = out, N = in), W [out, in]; then the
 * tail (the mark). Returns the largest |y - ref| / bound; infinity on a
 * NaN or a tail changed. With say, the first failure is a TAP comment
 * naming the product (what). */
static inline double frozen_sweep_compare(const float *y, const float *a, const float *w, const float *bias,
                                          const float *init, int n, int in, int out, bool backward, const char *what,
                                          bool say) {
    int K = backward ? out : in, N = backward ? in : out;
    double bound = (K + 2) * 0x1p-22, worst = 0;
    const float mark = frozen_sweep_mark();
    for (int r = 0; r < n; r++)
        for (int c = 0; c < N; c++) {
            double s = bias ? bias[c] : init ? init[(size_t)r * N + c] : 0, mag = fabs(s);
            for (int k = 0; k < K; k++) {
                double t = (double)a[(size_t)r * K + k] * (backward ? w[(size_t)k * in + c] : w[(size_t)c * in + k]);
                s += t, mag += fabs(t);
            }
            float got = y[(size_t)r * N + c];
            double ratio = isnan(got) ? INFINITY : fabs(got - s) / (bound * mag + 1e-300);
            if (ratio > 1 && worst <= 1 && say)
                printf("#   %s: [%d, %d] %.9g, float64 %.9g, bound %.3g\n", what, r, c, got, s, bound * mag);
            worst = fmax(worst, ratio);
        }
    for (int i = 0; i < FROZEN_SWEEP_TAIL; i++)
        if (memcmp(&y[(size_t)n * N + i], &mark, sizeof mark)) {
            if (worst <= 1 && say) printf("#   %s: float %d past the output changed\n", what, i);
            worst = INFINITY;
            break;
        }
    return worst;
}

/* One shape on device b: four products, and the last row alone. Returns the
 * largest error-to-bound ratio (above 1: a failure, commented with say). */
static inline double frozen_sweep_shape(const backend *b, weight_format fmt, int n, int in, int out, bool row_alone,
                                        bool say, uint64_t seed) {
    size_t nin = (size_t)n * in, nout = (size_t)n * out, bytes = weights_packed_bytes(fmt, out, in);
    void *wp = frozen_random_packed(fmt, out, in, seed);
    float *w = frozen_bf16_weights(wp, fmt, out, in);
    float *x = malloc(nin * sizeof *x), *bias = malloc(out * sizeof *bias), *dy = malloc(nout * sizeof *dy),
          *dx0 = malloc(nin * sizeof *dx0);
    if (!w || !x || !bias || !dy || !dx0) abort();
    fill_uniform(x, nin, 2.0, 0.0, seed, 1), fill_uniform(bias, out, 1.0, 0.0, seed, 2);
    fill_uniform(dy, nout, 1.0, 0.0, seed, 3), fill_uniform(dx0, nin, 1.0, 0.0, seed, 4);
    float *xr = frozen_bf16_copy(x, nin), *dyr = frozen_bf16_copy(dy, nout);
    if (!xr || !dyr) abort();
    gerr e = {0};
    void *dw = NULL;
    if (b->mem_alloc(&dw, bytes, &e) || b->mem_upload(dw, wp, bytes, &e)) {
        printf("#   upload: %s\n", e.msg);
        CHECK(0);
    }
    const float mark = frozen_sweep_mark();
    float *dx = frozen_sweep_dev(b, x, nin, NAN), *db = frozen_sweep_dev(b, bias, out, NAN);
    float *ddy = frozen_sweep_dev(b, dy, nout, NAN);
    float *y1 = frozen_sweep_dev(b, NULL, nout, mark), *y2 = frozen_sweep_dev(b, NULL, nout, mark);
    float *yl = frozen_sweep_dev(b, NULL, out, mark), *g1 = frozen_sweep_dev(b, NULL, nin, mark);
    float *g2 = frozen_sweep_dev(b, dx0, nin, mark), *gl = frozen_sweep_dev(b, NULL, in, mark);
    double worst = INFINITY;
    if (dw && dx && db && ddy && y1 && y2 && yl && g1 && g2 && gl) {
        b->matmul_forward_frozen(y1, dx, dw, fmt, db, n, in, out);
        b->matmul_forward_frozen(y2, dx, dw, fmt, NULL, n, in, out);
        b->matmul_forward_frozen(yl, dx + nin - in, dw, fmt, db, 1, in, out); /* the last row alone */
        b->matmul_backward_frozen(g1, ddy, dw, fmt, n, in, out, false);
        b->matmul_backward_frozen(g2, ddy, dw, fmt, n, in, out, true);
        b->matmul_backward_frozen(gl, ddy + nout - out, dw, fmt, 1, in, out, false);
        int rc = b->sync(&e);
        if (rc) printf("#   device: %s\n", e.msg);
        CHECK_EQ_INT(rc, 0);
        float *h1 = frozen_sweep_host(b, y1, nout), *h2 = frozen_sweep_host(b, y2, nout);
        float *hl = frozen_sweep_host(b, yl, out), *k1 = frozen_sweep_host(b, g1, nin);
        float *k2 = frozen_sweep_host(b, g2, nin), *kl = frozen_sweep_host(b, gl, in);
        worst = frozen_sweep_compare(h1, xr, w, bias, NULL, n, in, out, false, "forward, bias", say);
        worst = fmax(worst, frozen_sweep_compare(h2, xr, w, NULL, NULL, n, in, out, false, "forward", say));
        worst = fmax(worst, frozen_sweep_compare(k1, dyr, w, NULL, NULL, n, in, out, true, "input gradient", say));
        worst = fmax(worst, frozen_sweep_compare(k2, dyr, w, NULL, dx0, n, in, out, true, "input gradient, added",
                                                 say));
        bool alone_differs =
            memcmp(hl, h1 + nout - out, out * sizeof *hl) || memcmp(kl, k1 + nin - in, in * sizeof *kl);
        if (row_alone && alone_differs) {
            if (say) printf("#   the last row alone: other bytes than among the %d\n", n);
            worst = INFINITY;
        }
        free(h1), free(h2), free(hl), free(k1), free(k2), free(kl);
    }
    void *bufs[] = {dw, dx, db, ddy, y1, y2, yl, g1, g2, gl};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        if (bufs[i]) b->mem_free(bufs[i]);
    free(wp), free(w), free(x), free(bias), free(dy), free(dx0), free(xr), free(dyr);
    return worst;
}

/* Every shape above for fmt on device b: one check, the largest ratio
 * printed as a TAP comment. */
static inline void frozen_sweep(const backend *b, weight_format fmt, bool row_alone) {
    static const int ns[] = {1, 7, 33, 130}, outs[] = {48, 100, 200}, ins[] = {64, 96, 288, 37, 70};
    int n_ins = fmt == WEIGHTS_BF16 ? 5 : 3, shapes = 0;
    double worst = 0;
    for (int a = 0; a < 4; a++)
        for (int o = 0; o < 3; o++)
            for (int i = 0; i < n_ins; i++) {
                double r = frozen_sweep_shape(b, fmt, ns[a], ins[i], outs[o], row_alone, worst <= 1,
                                              1000 + (uint64_t)shapes);
                if (r > 1 && worst <= 1)
                    printf("#   the first failing shape: n %d, in %d, out %d\n", ns[a], ins[i], outs[o]);
                worst = fmax(worst, r), shapes++;
            }
    printf("#   %d shapes, six products each: the largest error %.3g of the bound\n", shapes, worst);
    CHECK(worst <= 1);
}

#endif
