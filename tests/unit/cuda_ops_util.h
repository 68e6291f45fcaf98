/* What the CUDA op tests (test_cuda_ops, test_cuda_moe) share: the device
 * under test (be, NULL when there is none, with the reason in skip_why),
 * random inputs, device copies poisoned with NaN, downloads, the check
 * that the ops since the last sync succeeded, and the relative error. */
#ifndef GRPO_TESTS_CUDA_OPS_UTIL_H
#define GRPO_TESTS_CUDA_OPS_UTIL_H

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "ops/backend.h"
#include "ops/ops.h"

static const backend *be; /* NULL: no device, every test skips */
static char skip_why[200] = "no CUDA device";

static inline void rnd(float *x, size_t n, uint64_t st, float scale) {
    st = st * 0x9E3779B97F4A7C15ULL + 1;
    for (size_t i = 0; i < n; i++) { /* xorshift: uniform in [-scale, scale) */
        st ^= st << 13, st ^= st >> 7, st ^= st << 17;
        x[i] = (float)(((st >> 11) * 0x1.0p-53 * 2 - 1) * scale);
    }
}

static inline float *fl(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (!p) abort();
    return p;
}

/* A device copy of h[n] (NULL h: NaN-filled, the poison of an output). */
static inline float *dev(const float *h, size_t n) {
    gerr e = {0};
    void *d = NULL;
    float *nan_fill = NULL;
    if (!h) {
        nan_fill = fl(n);
        for (size_t i = 0; i < n; i++) nan_fill[i] = NAN;
        h = nan_fill;
    }
    if (be->mem_alloc(&d, (n ? n : 1) * sizeof(float), &e) || be->mem_upload(d, h, n * sizeof(float), &e)) {
        printf("#   device copy: %s\n", e.msg);
        CHECK(0);
        d = NULL;
    }
    free(nan_fill);
    return d;
}

static inline float *host(const float *d, size_t n) {
    gerr e = {0};
    float *h = fl(n);
    for (size_t i = 0; i < n; i++) h[i] = NAN;
    if (d && be->mem_download(h, d, n * sizeof(float), &e)) {
        printf("#   download: %s\n", e.msg);
        CHECK(0);
    }
    return h;
}

/* The ops since the last sync must have succeeded. */
static inline void synced(void) {
    gerr e = {0};
    int rc = be->sync(&e);
    if (rc) printf("#   device: %s\n", e.msg);
    CHECK_EQ_INT(rc, 0);
}

/* ||a - ref|| / ||ref|| in double; NaN anywhere gives infinity. */
static inline double rel(const float *a, const float *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(ref[i])) return INFINITY;
        double d = (double)a[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

#define NEED_DEVICE()                  \
    do {                               \
        if (!be) {                     \
            SKIP(skip_why);            \
            return;                    \
        }                              \
    } while (0)

#define FREE_DEV(...)                                                      \
    do {                                                                   \
        void *fd_list[] = {__VA_ARGS__};                                   \
        for (size_t fd_i = 0; fd_i < sizeof fd_list / sizeof *fd_list; fd_i++) \
            be->mem_free(fd_list[fd_i]);                                   \
    } while (0)

/* The CPU's attention over a training batch's own K/V (sequence s: rows
 * start[s] .. start[s+1]-1 at positions 0, 1, ...): the forward's out and
 * lse, then the backward's dq, dk, dv from dout. */
static inline void cpu_attention_batch(float *out, float *lse, float *dq, float *dk, float *dv, const float *q,
                                       float *k, float *v, const float *dout, int n_seqs, const int *start,
                                       attn_shape sh) {
    int R = start[n_seqs], kvd = sh.n_kv_heads * sh.head_dim, longest = 1, threads = omp_get_max_threads();
    int *pos = malloc((size_t)R * sizeof *pos);
    size_t *row_kv = malloc((size_t)R * sizeof *row_kv);
    if (!pos || !row_kv) abort();
    for (int s = 0; s < n_seqs; s++) {
        longest = start[s + 1] - start[s] > longest ? start[s + 1] - start[s] : longest;
        for (int r = start[s]; r < start[s + 1]; r++) pos[r] = r - start[s], row_kv[r] = (size_t)start[s] * kvd;
    }
    attn_workspace ws = {.stride = attn_workspace_floats(sh, longest), .n_threads = threads};
    ws.buf = fl(ws.stride * threads);
    ws.tasks = malloc((size_t)R * sh.n_kv_heads * 3 * sizeof *ws.tasks);
    if (!ws.tasks) abort();
    kv_view hv = {.k = k, .v = v, .row_kv = row_kv, .kv_dim = kvd};
    attention_forward(out, lse, q, &hv, pos, R, sh, &ws);
    attention_backward(dq, dk, dv, dout, out, lse, q, k, v, n_seqs, start, sh, &ws);
    free(pos), free(row_kv), free(ws.buf), free(ws.tasks);
}

#endif
