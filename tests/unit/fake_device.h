/* fake_device(): the CPU backend dressed as a device with memory of its own,
 * so that CPU unit tests catch the two bugs a first GPU run hits: host code
 * reading or writing device memory, and a host pointer passed to an op
 * where device memory is expected.
 *
 * Its memory is host memory whose pointers carry bit 54 (a non-canonical,
 * unmapped address on x86-64): a host dereference faults (SIGSEGV, or an
 * AddressSanitizer SEGV report), and offsets into an allocation keep the
 * tag. Every op checks its arguments as backend.h classes them (device
 * memory tagged, host index arrays untagged), aborts with one line naming
 * the op and the argument when one is wrong, and calls backend_cpu()'s op
 * of the same name on the untagged pointers: results equal the CPU
 * backend's bit for bit. Its weight matrices (weight_upload's) stay fp32
 * but hold each row at twice its width, the second half NaN, as a device's
 * own format differs from fp32 rows: a matrix sliced by float count rather
 * than through weight_rows (an expert's in a stacked tensor) reads the
 * wrong rows and the products differ from the CPU's. A frozen packed
 * base's matrices (matmul_forward_frozen's w_packed) are the host's packed
 * bytes as they are, the CPU's kernels run on them. Header only, for any
 * test. */
#ifndef GRPO_TEST_FAKE_DEVICE_H
#define GRPO_TEST_FAKE_DEVICE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/backend.h"
#include "train/optim.h"

#define FAKE_DEVICE_TAG ((uintptr_t)1 << 54)

static inline bool fake_device_tagged(const void *p) { return ((uintptr_t)p & FAKE_DEVICE_TAG) != 0; }

static inline void fake_device_die(const char *op, const char *arg, const char *what) {
    fprintf(stderr, "fake-device: %s: %s is %s\n", op, arg, what);
    fflush(stderr);
    abort();
}

/* A device-memory argument (NULL allowed), untagged for the CPU op. */
static inline void *fake_device_dev(const char *op, const char *arg, const void *p) {
    if (!p) return NULL;
    if (!fake_device_tagged(p)) fake_device_die(op, arg, "a host pointer, given as device memory");
    return (void *)((uintptr_t)p & ~FAKE_DEVICE_TAG);
}

/* A host-array argument (index arrays, inv_freq, adamw_consts): never device memory. */
static inline const void *fake_device_host(const char *op, const char *arg, const void *p) {
    if (p && fake_device_tagged(p)) fake_device_die(op, arg, "device memory, given as a host array");
    return p;
}

/* In fd_NAME, the op's name is __func__ + 3. */
#define FD_D(p) fake_device_dev(__func__ + 3, #p, (p))
#define FD_H(p) fake_device_host(__func__ + 3, #p, (p))
#define FD_CPU backend_cpu()

/* kv_view's k and v are device memory, row_kv a host array. */
static inline kv_view fake_device_kv(const char *op, const kv_view *kv) {
    kv_view h = *kv;
    h.k = fake_device_dev(op, "kv->k", kv->k);
    h.v = fake_device_dev(op, "kv->v", kv->v);
    h.row_kv = fake_device_host(op, "kv->row_kv", kv->row_kv);
    return h;
}

/* attn_shape's sinks are device memory (a layer's weights). */
static inline attn_shape fake_device_shape(const char *op, attn_shape sh) {
    sh.sinks = fake_device_dev(op, "sh.sinks", sh.sinks);
    return sh;
}

/* attn_workspace's buf is device memory (tasks a host array). A device's
 * scratch has no per-thread workspace (stride 0: its kernels keep their own
 * state), so then the fake keeps its own for the call, for T positions;
 * *own is what to free. */
static inline attn_workspace fake_device_ws(const char *op, attn_workspace *ws, attn_shape sh, int T,
                                            int n_rows, void **own) {
    attn_workspace h = *ws;
    h.buf = fake_device_dev(op, "ws->buf", ws->buf);
    h.tasks = (int *)fake_device_host(op, "ws->tasks", ws->tasks);
    if (h.n_threads < 1) h.n_threads = 1;
    size_t stride = h.stride ? 0 : attn_workspace_floats(sh, T > 0 ? T : 1);
    size_t n_tasks = h.tasks ? 0 : (size_t)(n_rows > 0 ? n_rows : 1) * (size_t)sh.n_kv_heads * 3;
    *own = NULL;
    if (stride || n_tasks) {
        size_t floats = (size_t)h.n_threads * stride, bytes = floats * sizeof(float) + n_tasks * sizeof(int);
        *own = calloc(1, bytes ? bytes : 1);
        if (!*own) fake_device_die(op, "its attention workspace", "more memory than the host has");
        if (stride) h.buf = *own, h.stride = stride;
        if (n_tasks) h.tasks = (int *)(void *)((float *)*own + floats);
    }
    return h;
}

/* ---- weights: each row at twice its width ------------------------------------ */

enum { FAKE_DEVICE_ROW_STRIDE = 2 };

/* Weight matrix w [rows, cols] (device memory, weight_upload's layout) as
 * fp32 rows in a new host buffer (free it). */
static inline float *fake_device_weight(const char *op, const float *w, int rows, int cols) {
    const float *d = fake_device_dev(op, "w", w);
    size_t n = (size_t)rows * cols;
    float *h = malloc((n ? n : 1) * sizeof *h);
    if (!h) fake_device_die(op, "its weight copy", "more memory than the host has");
    for (size_t r = 0; r < (size_t)rows; r++)
        memcpy(h + r * cols, d + r * FAKE_DEVICE_ROW_STRIDE * cols, (size_t)cols * sizeof *h);
    return h;
}

/* fp32 rows src [rows, cols] into weight matrix w (untagged), the pad NaN. */
static inline void fake_device_weight_put(float *w, const float *src, size_t rows, size_t cols) {
    for (size_t r = 0; r < rows; r++) {
        float *row = w + r * FAKE_DEVICE_ROW_STRIDE * cols;
        memcpy(row, src + r * cols, cols * sizeof *row);
        for (size_t c = cols; c < FAKE_DEVICE_ROW_STRIDE * cols; c++) row[c] = NAN;
    }
}

/* ---- the ops: check, untag, run the CPU's ------------------------------------- */

static inline void fd_rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int n, int d,
                                      float eps) {
    FD_CPU->rmsnorm_forward(FD_D(out), FD_D(rstd), FD_D(x), FD_D(w), n, d, eps);
}
static inline void fd_rmsnorm_backward(float *dx, float *dw, const float *dy, const float *x, const float *w,
                                       const float *rstd, int n, int d) {
    FD_CPU->rmsnorm_backward(FD_D(dx), FD_D(dw), FD_D(dy), FD_D(x), FD_D(w), FD_D(rstd), n, d);
}
static inline void fd_gemm(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                           int ldb, float beta, float *C, int ldc) {
    FD_CPU->gemm(ta, tb, M, N, K, alpha, FD_D(A), lda, FD_D(B), ldb, beta, FD_D(C), ldc);
}
/* w: a weight matrix (weight_upload's, or weight_rows of one) */
static inline void fd_matmul_forward(float *out, const float *in, const float *w, const float *bias, int n, int in_dim,
                                     int out_dim) {
    float *rows = fake_device_weight("matmul_forward", w, out_dim, in_dim);
    FD_CPU->matmul_forward(FD_D(out), FD_D(in), rows, FD_D(bias), n, in_dim, out_dim);
    free(rows);
}
static inline void fd_matmul_backward(float *din, float *dw, float *db, const float *dout, const float *in,
                                      const float *w, int n, int in_dim, int out_dim, bool accumulate) {
    float *rows = fake_device_weight("matmul_backward", w, out_dim, in_dim);
    FD_CPU->matmul_backward(FD_D(din), FD_D(dw), FD_D(db), FD_D(dout), FD_D(in), rows, n, in_dim, out_dim,
                            accumulate);
    free(rows);
}
static inline void fd_rope_cos_sin(float *cos_out, float *sin_out, const float *inv_freq, int half, const int *pos,
                                   int n) {
    FD_CPU->rope_cos_sin(FD_D(cos_out), FD_D(sin_out), FD_H(inv_freq), half, FD_H(pos), n);
}
static inline void fd_rope_forward(float *x, const float *cos_t, const float *sin_t, int n, int n_heads, int head_dim) {
    FD_CPU->rope_forward(FD_D(x), FD_D(cos_t), FD_D(sin_t), n, n_heads, head_dim);
}
static inline void fd_rope_backward(float *dx, const float *cos_t, const float *sin_t, int n, int n_heads,
                                    int head_dim) {
    FD_CPU->rope_backward(FD_D(dx), FD_D(cos_t), FD_D(sin_t), n, n_heads, head_dim);
}
static inline void fd_swiglu_forward(float *out, const float *gate, const float *up, size_t n) {
    FD_CPU->swiglu_forward(FD_D(out), FD_D(gate), FD_D(up), n);
}
static inline void fd_swiglu_backward(float *dg, float *du, const float *dh, const float *g, const float *u, size_t n) {
    FD_CPU->swiglu_backward(FD_D(dg), FD_D(du), FD_D(dh), FD_D(g), FD_D(u), n);
}
static inline void fd_kv_write(const kv_view *kv, const float *k, const float *v, const int *pos, int n) {
    kv_view h = fake_device_kv("kv_write", kv);
    FD_CPU->kv_write(&h, FD_D(k), FD_D(v), FD_H(pos), n);
}
static inline void fd_attention_forward(float *out, float *lse, const float *q, const kv_view *kv, const int *pos,
                                        int n, attn_shape sh, attn_workspace *ws) {
    kv_view h = fake_device_kv("attention_forward", kv);
    const int *p = FD_H(pos);
    int T = 0;
    for (int r = 0; r < n; r++) T = p[r] + 1 > T ? p[r] + 1 : T;
    void *own;
    attn_workspace w = fake_device_ws("attention_forward", ws, sh, T, n, &own);
    FD_CPU->attention_forward(FD_D(out), FD_D(lse), FD_D(q), &h, p, n, fake_device_shape("attention_forward", sh), &w);
    free(own);
}
static inline void fd_attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *out,
                                         const float *lse, const float *q, const float *k, const float *v, int n_seqs,
                                         const int *start, attn_shape sh, attn_workspace *ws) {
    const int *st = FD_H(start);
    int T = 0;
    for (int s = 0; s < n_seqs; s++) T = st[s + 1] - st[s] > T ? st[s + 1] - st[s] : T;
    void *own;
    attn_workspace w = fake_device_ws("attention_backward", ws, sh, T, n_seqs > 0 ? st[n_seqs] : 0, &own);
    FD_CPU->attention_backward(FD_D(dq), FD_D(dk), FD_D(dv), FD_D(dout), FD_D(out), FD_D(lse), FD_D(q), FD_D(k),
                               FD_D(v), n_seqs, st, fake_device_shape("attention_backward", sh), &w);
    free(own);
}
static inline void fd_head_logsoftmax(float *z, int n, int V, float inv_t, const int32_t *tok, float *logp,
                                      float *entropy, float *lse_out) {
    FD_CPU->head_logsoftmax(FD_D(z), n, V, inv_t, FD_H(tok), FD_D(logp), FD_D(entropy), FD_D(lse_out));
}
static inline void fd_head_logsoftmax_backward(float *z, int n, int V, float inv_t, const int32_t *tok,
                                               const float *dlogp, const float *lse, const float *dentropy,
                                               const float *entropy) {
    FD_CPU->head_logsoftmax_backward(FD_D(z), n, V, inv_t, FD_H(tok), FD_D(dlogp), FD_D(lse), FD_D(dentropy),
                                     FD_D(entropy));
}
static inline void fd_add_inplace(float *x, const float *y, size_t n) { FD_CPU->add_inplace(FD_D(x), FD_D(y), n); }
static inline void fd_gather_rows(float *dst, const float *src, const int32_t *idx, int n, int d) {
    FD_CPU->gather_rows(FD_D(dst), FD_D(src), FD_H(idx), n, d);
}
static inline void fd_scatter_add_rows(float *dst, const float *src, const int32_t *idx, int n, int d) {
    FD_CPU->scatter_add_rows(FD_D(dst), FD_D(src), FD_H(idx), n, d);
}
static inline void fd_dropout_rows(float *x, int n_rows, int n, const uint64_t *row_key, const int *row_pos,
                                   const uint32_t stream_key[2], double p) {
    FD_CPU->dropout_rows(FD_D(x), n_rows, n, FD_H(row_key), FD_H(row_pos), FD_H(stream_key), p);
}
static inline void fd_matmul_forward_packed(float *out, const float *in, const void *w_packed, weight_format fmt,
                                            const float *bias, int n, int in_dim, int out_dim) {
    FD_CPU->matmul_forward_packed(FD_D(out), FD_D(in), FD_D(w_packed), fmt, FD_D(bias), n, in_dim, out_dim);
}
/* A frozen packed base's: w_packed in its memory (the host's bytes as they
 * are), the CPU's kernels on it (bit for bit the CPU trainer's; the CUDA
 * products' bf16 operands are fake_device_frozen_bf16's, below). */
static inline void fd_matmul_forward_frozen(float *out, const float *in, const void *w_packed, weight_format fmt,
                                            const float *bias, int n, int in_dim, int out_dim) {
    FD_CPU->matmul_forward_frozen(FD_D(out), FD_D(in), FD_D(w_packed), fmt, FD_D(bias), n, in_dim, out_dim);
}
static inline void fd_matmul_backward_frozen(float *din, const float *dout, const void *w_packed, weight_format fmt,
                                             int n, int in_dim, int out_dim, bool accumulate) {
    FD_CPU->matmul_backward_frozen(FD_D(din), FD_D(dout), FD_D(w_packed), fmt, n, in_dim, out_dim, accumulate);
}
static inline void fd_gather_rows_packed(float *dst, const void *w_packed, weight_format fmt, const int32_t *idx, int n,
                                         int d) {
    FD_CPU->gather_rows_packed(FD_D(dst), FD_D(w_packed), fmt, FD_H(idx), n, d);
}
static inline void fd_swiglu_clamped_forward(float *out, const float *gate, const float *up, size_t n, float alpha,
                                             float limit) {
    FD_CPU->swiglu_clamped_forward(FD_D(out), FD_D(gate), FD_D(up), n, alpha, limit);
}
static inline void fd_swiglu_clamped_backward(float *dg, float *du, const float *dh, const float *g, const float *u,
                                              size_t n, float alpha, float limit) {
    FD_CPU->swiglu_clamped_backward(FD_D(dg), FD_D(du), FD_D(dh), FD_D(g), FD_D(u), n, alpha, limit);
}
static inline void fd_attention_sinks_backward(float *dsinks, const float *out, const float *dout, const float *lse,
                                               const float *sinks, int n, int n_heads, int hd) {
    FD_CPU->attention_sinks_backward(FD_D(dsinks), FD_D(out), FD_D(dout), FD_D(lse), FD_D(sinks), n, n_heads, hd);
}
static inline void fd_moe_route_forward(float *probs, int32_t *sel, float *w, const float *logits, int n,
                                        int n_experts, int k, bool norm) {
    FD_CPU->moe_route_forward(FD_D(probs), FD_D(sel), FD_D(w), FD_D(logits), n, n_experts, k, norm);
}
static inline void fd_moe_route_replay_forward(float *probs, int32_t *sel, float *w, const float *logits,
                                               const int32_t *replay, int n, int n_experts, int k, bool norm) {
    FD_CPU->moe_route_replay_forward(FD_D(probs), FD_D(sel), FD_D(w), FD_D(logits), FD_H(replay), n, n_experts, k,
                                     norm);
}
static inline void fd_moe_route_backward(float *dlogits, const float *dw, const float *probs, const int32_t *sel,
                                         const float *w, int n, int n_experts, int k, bool norm) {
    FD_CPU->moe_route_backward(FD_D(dlogits), FD_D(dw), FD_D(probs), FD_D(sel), FD_D(w), n, n_experts, k, norm);
}
/* mult: the trainer's host array */
static inline double fd_moe_balance_backward(float *dlogits, const float *probs, const int32_t *sel,
                                             const float *mult, int n, int n_experts, int k, double scale) {
    return FD_CPU->moe_balance_backward(FD_D(dlogits), FD_D(probs), FD_D(sel), FD_H(mult), n, n_experts, k, scale);
}
static inline void fd_moe_combine_forward(float *out, const float *ye, const float *w, const int32_t *slot, int n,
                                          int k, int d) {
    FD_CPU->moe_combine_forward(FD_D(out), FD_D(ye), FD_D(w), FD_H(slot), n, k, d);
}
static inline void fd_moe_combine_backward(float *dye, float *dw, const float *dout, const float *ye, const float *w,
                                           const int32_t *slot, int n, int k, int d) {
    FD_CPU->moe_combine_backward(FD_D(dye), FD_D(dw), FD_D(dout), FD_D(ye), FD_D(w), FD_H(slot), n, k, d);
}
static inline void fd_moe_group(int32_t *row_of, int32_t *slot_of, int *offsets, const int32_t *sel, int n, int k,
                                int n_experts) {
    FD_CPU->moe_group((int32_t *)FD_H(row_of), (int32_t *)FD_H(slot_of), (int *)FD_H(offsets), FD_D(sel), n, k,
                      n_experts);
}
static inline void fd_adamw_update(const adamw_consts *k, float *param, const float *grad, float *m, float *v,
                                   size_t n) {
    FD_CPU->adamw_update(FD_H(k), FD_D(param), FD_D(grad), FD_D(m), FD_D(v), n);
}
static inline void fd_sgd_update(float keep, float neg_lr, float *param, const float *grad, size_t n) {
    FD_CPU->sgd_update(keep, neg_lr, FD_D(param), FD_D(grad), n);
}

/* ---- training's device entries: optim.c's functions on one array ------------- */

static inline double fd_sum_squares(const float *x, size_t n) {
    const float *g = FD_D(x);
    return grad_sum_squares(&g, &n, 1);
}
static inline void fd_scale_inplace(float *x, float f, size_t n) {
    float *g = FD_D(x);
    grad_scale(&g, &n, 1, f);
}
static inline void fd_weight_refresh(float *w, const float *src, size_t rows, size_t cols) {
    fake_device_weight_put(FD_D(w), FD_D(src), rows, cols);
}

/* ---- memory: calloc'ed, handed out tagged ------------------------------------ */

static inline int fd_mem_alloc(void **p, size_t bytes, gerr *e) {
    void *h = calloc(1, bytes ? bytes : 1);
    if (!h) return gerr_set(e, EX_SOFTWARE, "fake-device: cannot allocate %zu bytes", bytes);
    *p = (void *)((uintptr_t)h | FAKE_DEVICE_TAG);
    return 0;
}
static inline void fd_mem_free(void *p) { free(FD_D(p)); }
static inline int fd_mem_upload(void *dst, const void *src, size_t bytes, gerr *e) {
    (void)e;
    if (bytes) memcpy(FD_D(dst), FD_H(src), bytes);
    return 0;
}
static inline int fd_mem_download(void *dst, const void *src, size_t bytes, gerr *e) {
    (void)e;
    if (bytes) memcpy((void *)FD_H(dst), FD_D(src), bytes);
    return 0;
}
static inline void fd_mem_copy(void *dst, const void *src, size_t bytes) {
    if (bytes) memcpy(FD_D(dst), FD_D(src), bytes); /* overlap is an error, as cudaMemcpy's */
}
static inline void fd_mem_zero(void *p, size_t bytes) {
    if (bytes) memset(FD_D(p), 0, bytes);
}
/* fp32 values, so that the results are the CPU backend's; rows at twice
 * their width (above) */
static inline int fd_weight_upload(float **dst, const float *src, size_t rows, size_t cols, gerr *e) {
    void *p = NULL;
    int rc = fd_mem_alloc(&p, FAKE_DEVICE_ROW_STRIDE * rows * cols * sizeof(float), e);
    if (rc) return rc;
    fake_device_weight_put(FD_D(p), FD_H(src), rows, cols);
    *dst = p;
    return 0;
}
static inline const float *fd_weight_rows(const float *w, size_t row0, size_t cols) {
    (void)FD_D(w);
    return w + row0 * FAKE_DEVICE_ROW_STRIDE * cols;
}
static inline int fd_sync(gerr *e) {
    (void)e;
    return 0;
}

static inline const backend *fake_device(void) {
    static const backend be = {
        .name = "fake-device",
        .rmsnorm_forward = fd_rmsnorm_forward,
        .rmsnorm_backward = fd_rmsnorm_backward,
        .gemm = fd_gemm,
        .matmul_forward = fd_matmul_forward,
        .matmul_forward_packed = fd_matmul_forward_packed, /* w_packed in its memory (cuda's: MXFP4 only) */
        .matmul_forward_frozen = fd_matmul_forward_frozen,
        .matmul_backward_frozen = fd_matmul_backward_frozen,
        .gather_rows_packed = fd_gather_rows_packed,
        .matmul_backward = fd_matmul_backward,
        .rope_cos_sin = fd_rope_cos_sin,
        .rope_forward = fd_rope_forward,
        .rope_backward = fd_rope_backward,
        .swiglu_forward = fd_swiglu_forward,
        .swiglu_backward = fd_swiglu_backward,
        .swiglu_clamped_forward = fd_swiglu_clamped_forward,
        .swiglu_clamped_backward = fd_swiglu_clamped_backward,
        .kv_write = fd_kv_write,
        .attention_forward = fd_attention_forward,
        .attention_backward = fd_attention_backward,
        .attention_sinks_backward = fd_attention_sinks_backward,
        .head_logsoftmax = fd_head_logsoftmax,
        .head_logsoftmax_backward = fd_head_logsoftmax_backward,
        .add_inplace = fd_add_inplace,
        .gather_rows = fd_gather_rows,
        .scatter_add_rows = fd_scatter_add_rows,
        .dropout_rows = fd_dropout_rows,
        .moe_route_forward = fd_moe_route_forward,
        .moe_route_replay_forward = fd_moe_route_replay_forward,
        .moe_route_backward = fd_moe_route_backward,
        .moe_balance_backward = fd_moe_balance_backward,
        .moe_combine_forward = fd_moe_combine_forward,
        .moe_combine_backward = fd_moe_combine_backward,
        .moe_group = fd_moe_group,
        .adamw_update = fd_adamw_update,
        .sgd_update = fd_sgd_update,
        .sum_squares = fd_sum_squares,
        .scale_inplace = fd_scale_inplace,
        .weight_refresh = fd_weight_refresh,
        .mem_alloc = fd_mem_alloc,
        .mem_free = fd_mem_free,
        .mem_upload = fd_mem_upload,
        .mem_download = fd_mem_download,
        .mem_copy = fd_mem_copy,
        .mem_zero = fd_mem_zero,
        .weight_upload = fd_weight_upload,
        .weight_rows = fd_weight_rows,
        .sync = fd_sync,
    };
    return &be;
}

#undef FD_D
#undef FD_H
#undef FD_CPU

#endif
