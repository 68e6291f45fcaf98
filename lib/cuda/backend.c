/* backend_cuda(): backend.h's table on the device. Each entry stages the
 * host index arrays it is given, launches its kernel on the context's
 * stream and records a failure instead of returning one (ctx.h). Of the
 * training entries (grpo-update --device cuda), the backwards of RMSNorm, SwiGLU, the
 * head's log-softmax, the matmul (gemm.c) and attention (attention.cu),
 * the scatter-add, LoRA's dropout, the optimizer updates, the gradient
 * norm's sum of squares and scale, and the refresh of a bf16 weight from
 * its fp32 master (train_kernels.cu, kernels.cu). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctx.h"
#include "frozen.h"
#include "gemm.h"
#include "kernels.h"
#include "moe.h"

static cudaStream_t stream(void) { return cuda_ctx_get()->stream; }

/* Runs a launch unless an earlier op failed; records its failure. */
#define LAUNCH(call, what)                              \
    do {                                                \
        if (!cuda_broken()) cuda_failed((call), (what)); \
    } while (0)

static void rmsnorm_fwd(float *out, float *rstd, const float *x, const float *w, int n, int d, float eps) {
    LAUNCH(cu_rmsnorm(out, rstd, x, w, n, d, eps, stream()), "rmsnorm");
}

static void matmul_fwd(float *out, const float *in, const float *w, const float *bias, int n, int in_dim, int out_dim) {
    cuda_matmul_bf16(out, in, (const uint16_t *)(const void *)w, bias, n, in_dim, out_dim);
}

/* The same tables as the CPU: rope.c's function on the host, then uploaded. */
static void rope_cs(float *cos_out, float *sin_out, const float *inv_freq, int half, const int *pos, int n) {
    if (cuda_broken() || n <= 0) return;
    size_t count = (size_t)n * half;
    float *h = malloc(2 * count * sizeof *h);
    if (!h) {
        cuda_fail_msg("out of host memory for the RoPE tables");
        return;
    }
    rope_cos_sin(h, h + count, inv_freq, half, pos, n);
    /* from pageable memory each copy returns once h is read */
    if (!cuda_failed(cudaMemcpyAsync(cos_out, h, count * sizeof *h, cudaMemcpyHostToDevice, stream()), "rope cos"))
        cuda_failed(cudaMemcpyAsync(sin_out, h + count, count * sizeof *h, cudaMemcpyHostToDevice, stream()), "rope sin");
    free(h);
}

static void rope_fwd(float *x, const float *c, const float *s, int n, int nh, int hd) {
    LAUNCH(cu_rope(x, c, s, n, nh, hd, 1.0f, stream()), "rope");
}

static void rope_bwd(float *x, const float *c, const float *s, int n, int nh, int hd) {
    LAUNCH(cu_rope(x, c, s, n, nh, hd, -1.0f, stream()), "rope backward");
}

static void swiglu_fwd(float *out, const float *gate, const float *up, size_t n) {
    LAUNCH(cu_swiglu(out, gate, up, n, stream()), "swiglu");
}

static void kv_wr(const kv_view *kv, const float *k, const float *v, const int *pos, int n) {
    const size_t *row_kv = cuda_stage(kv->row_kv, (size_t)n * sizeof *row_kv, 0);
    const int *p = cuda_stage(pos, (size_t)n * sizeof *pos, 1);
    if (row_kv && p) LAUNCH(cu_kv_write(kv->k, kv->v, k, v, row_kv, p, n, kv->kv_dim, kv->fmt == KV_BF16, stream()),
               "kv_write");
}

/* Runs of at least this many rows of one sequence at consecutive positions
 * go to the tiled kernel (a prefill); other rows one by one (decode). */
enum { TILE_MIN_ROWS = 4 };

/* plan[0, 2 * n_tiles): the tiles (first row, rows); then the single rows.
 * Returns n_tiles; *n_single gets the single rows' count. */
static int plan_rows(int *plan, const size_t *row_kv, const int *pos, int n, int head_dim, int *n_single) {
    int n_tiles = 0, k = 0, *single = plan + 2 * n; /* at most n single rows after at most n tiles */
    for (int r = 0; r < n;) {
        int len = 1;
        while (r + len < n && row_kv[r + len] == row_kv[r] && pos[r + len] == pos[r] + len) len++;
        if (len >= TILE_MIN_ROWS && head_dim <= CU_ATT_TILE_HEAD_DIM)
            for (int i = 0; i < len; i += CU_ATT_TILE) {
                plan[2 * n_tiles] = r + i;
                plan[2 * n_tiles + 1] = len - i < CU_ATT_TILE ? len - i : CU_ATT_TILE;
                n_tiles++;
            }
        else
            for (int i = 0; i < len; i++) single[k++] = r + i;
        r += len;
    }
    memmove(plan + 2 * n_tiles, single, (size_t)k * sizeof *plan);
    *n_single = k;
    return n_tiles;
}

static void attention_fwd(float *out, float *lse, const float *q, const kv_view *kv, const int *pos, int n,
                          attn_shape sh, attn_workspace *ws) {
    (void)ws; /* the host's per-thread scratch: the kernels keep their state on the device */
    if (cuda_broken() || n <= 0) return;
    if (!kv->row_kv) { /* a training batch attending to its own rows: part 2 */
        cuda_fail_msg("attention over a batch's own K/V is not implemented on cuda");
        return;
    }
    int *plan = malloc((size_t)3 * n * sizeof *plan), n_single = 0;
    if (!plan) {
        cuda_fail_msg("out of host memory planning attention");
        return;
    }
    int n_tiles = plan_rows(plan, kv->row_kv, pos, n, sh.head_dim, &n_single);
    const size_t *row_kv = cuda_stage(kv->row_kv, (size_t)n * sizeof *row_kv, 0);
    const int *p = cuda_stage(pos, (size_t)n * sizeof *pos, 1);
    const int *dplan = cuda_stage(plan, (size_t)(2 * n_tiles + n_single) * sizeof *plan, 2);
    free(plan);
    if (row_kv && p && dplan)
        LAUNCH(cu_attention(out, lse, q, kv->k, kv->v, kv->fmt == KV_BF16, row_kv, p, dplan, n_tiles,
                            dplan + 2 * n_tiles, n_single,
                            sh.n_heads, sh.n_kv_heads, sh.head_dim, kv->kv_dim, sh.window, sh.sinks, sh.scale,
                            stream()),
               "attention");
}

static void head_lsm(float *z, int n, int V, float inv_t, const int32_t *tok, float *logp, float *entropy,
                     float *lse_out) {
    const int32_t *t = tok ? cuda_stage(tok, (size_t)n * sizeof *tok, 0) : NULL;
    if (logp && !t) return;
    LAUNCH(cu_head_logsoftmax(z, n, V, inv_t, t, logp, entropy, lse_out, stream()), "head_logsoftmax");
}

static void add(float *x, const float *y, size_t n) { LAUNCH(cu_add(x, y, n, stream()), "add"); }

static void gather(float *dst, const float *src, const int32_t *idx, int n, int d) {
    const int32_t *i = cuda_stage(idx, (size_t)n * sizeof *idx, 0);
    if (i) LAUNCH(cu_gather(dst, src, i, n, d, stream()), "gather_rows");
}

/* ---- training's entries -------------------------------------------------------- */
static void rmsnorm_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w, const float *rstd,
                        int n, int d) {
    LAUNCH(cu_rmsnorm_backward(dx, dw, dy, x, w, rstd, n, d, stream()), "rmsnorm backward");
}
/* w is the bf16 copy weight_upload made, as matmul_forward reads it */
static void matmul_bwd(float *din, float *dw, float *db, const float *dout, const float *in, const float *w, int n,
                       int in_dim, int out_dim, bool accumulate) {
    cuda_matmul_backward_bf16(din, dw, db, dout, in, (const uint16_t *)(const void *)w, n, in_dim, out_dim, accumulate);
}
static void swiglu_bwd(float *dg, float *du, const float *dh, const float *g, const float *u, size_t n) {
    LAUNCH(cu_swiglu_backward(dg, du, dh, g, u, n, stream()), "swiglu backward");
}
static void attention_bwd(float *dq, float *dk, float *dv, const float *dout, const float *out, const float *lse,
                          const float *q, const float *k, const float *v, int n_seqs, const int *start,
                          attn_shape sh, attn_workspace *ws) {
    (void)ws;
    int n = n_seqs > 0 ? start[n_seqs] : 0;
    if (cuda_broken() || n <= 0) return;
    int *row_seq = malloc((size_t)n * sizeof *row_seq);
    if (!row_seq) {
        cuda_fail_msg("out of host memory for attention's backward");
        return;
    }
    for (int s = 0; s < n_seqs; s++)
        for (int r = start[s]; r < start[s + 1]; r++) row_seq[r] = s;
    const int *drs = cuda_stage(row_seq, (size_t)n * sizeof *row_seq, 0);
    const int *dst = cuda_stage(start, (size_t)(n_seqs + 1) * sizeof *start, 1);
    free(row_seq);
    /* di: one float per (row, head), in the result buffer (not read back) */
    float *di = cuda_out((size_t)n * sh.n_heads * sizeof *di);
    if (drs && dst && di)
        LAUNCH(cu_attention_backward(dq, dk, dv, di, dout, out, lse, q, k, v, drs, dst, n, sh.n_heads, sh.n_kv_heads,
                                     sh.head_dim, sh.window, sh.scale, stream()),
               "attention backward");
}
static void head_lsm_bwd(float *z, int n, int V, float inv_t, const int32_t *tok, const float *dlogp,
                         const float *lse, const float *dentropy, const float *entropy) {
    const int32_t *t = cuda_stage(tok, (size_t)n * sizeof *tok, 0);
    if (t) LAUNCH(cu_head_logsoftmax_backward(z, n, V, inv_t, t, dlogp, lse, dentropy, entropy, stream()),
                  "head_logsoftmax backward");
}
static void scatter_add(float *dst, const float *src, const int32_t *idx, int n, int d) {
    const int32_t *i = cuda_stage(idx, (size_t)n * sizeof *idx, 0);
    if (i) LAUNCH(cu_scatter_add(dst, src, i, n, d, stream()), "scatter_add_rows");
}
static void dropout(float *x, int n_rows, int n, const uint64_t *row_key, const int *row_pos,
                    const uint32_t stream_key[2], double p) {
    if (n_rows <= 0 || n <= 0) return;
    const uint64_t *k = cuda_stage(row_key, (size_t)n_rows * sizeof *row_key, 0);
    const int *ps = cuda_stage(row_pos, (size_t)n_rows * sizeof *row_pos, 1);
    /* rows.c's threshold and scale, computed the same way */
    uint32_t threshold = (uint32_t)(p * 4294967296.0);
    float keep_scale = (float)(1.0 / (1.0 - p));
    if (k && ps) LAUNCH(cu_dropout_rows(x, n_rows, n, k, ps, stream_key, threshold, keep_scale, stream()), "dropout");
}
static void adamw(const adamw_consts *k, float *param, const float *grad, float *m, float *v, size_t n) {
    const float consts[8] = {k->keep,           k->beta1,    k->one_minus_beta1, k->beta2,
                             k->one_minus_beta2, k->neg_step, k->bias2_sqrt,      k->eps};
    LAUNCH(cu_adamw(consts, param, grad, m, v, n, stream()), "adamw_update");
}
static void sgd(float keep, float neg_lr, float *param, const float *grad, size_t n) {
    LAUNCH(cu_sgd(keep, neg_lr, param, grad, n, stream()), "sgd_update");
}

/* The gradient norm's square: deterministic (cu_sum_squares' fixed grid and
 * order), after the ops before it on the stream. A failure, an earlier one
 * included, stays recorded for sync and gives NaN. */
static double sum_squares(const float *x, size_t n) {
    if (cuda_broken()) return NAN;
    if (!n) return 0;
    double *work = cuda_out((CU_SUM_BLOCKS + 1) * sizeof *work), r = NAN;
    if (!work || cuda_failed(cu_sum_squares(work, x, n, stream()), "sum_squares") ||
        cuda_failed(cudaMemcpyAsync(&r, work + CU_SUM_BLOCKS, sizeof r, cudaMemcpyDeviceToHost, stream()),
                    "sum_squares result") ||
        cuda_failed(cudaStreamSynchronize(stream()), "sum_squares"))
        return NAN;
    return r;
}
static void scale(float *x, float f, size_t n) { LAUNCH(cu_scale(x, f, n, stream()), "scale_inplace"); }
/* w: a weight_upload handle (bf16 [rows, cols]); src fp32 on the device,
 * rounded as weight_upload rounds */
static void weight_refresh(float *w, const float *src, size_t rows, size_t cols) {
    LAUNCH(cu_to_bf16((uint16_t *)(void *)w, src, rows * cols, stream()), "weight_refresh");
}

/* ---- memory ----------------------------------------------------------------- */
static void mem_copy(void *dst, const void *src, size_t bytes) {
    if (!cuda_broken() && bytes)
        cuda_failed(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()), "device copy");
}

static void mem_zero(void *p, size_t bytes) {
    if (!cuda_broken() && bytes) cuda_failed(cudaMemsetAsync(p, 0, bytes, stream()), "device memset");
}

/* fp32 rows to bf16 on the device, one row block at a time through a
 * bounded fp32 buffer (a vocabulary-sized matrix need not be held twice). */
static int weight_upload(float **dst, const float *src, size_t rows, size_t cols, gerr *e) {
    size_t n = rows * cols, chunk = (size_t)16 << 20; /* elements */
    void *out = NULL, *tmp = NULL;
    int rc = cuda_alloc(&out, n * sizeof(uint16_t), e);
    if (!rc) rc = cuda_alloc(&tmp, (n < chunk ? n : chunk) * sizeof(float), e);
    for (size_t at = 0; !rc && at < n; at += chunk) {
        size_t len = n - at < chunk ? n - at : chunk;
        rc = cuda_upload(tmp, src + at, len * sizeof(float), e);
        if (!rc && cuda_failed(cu_to_bf16((uint16_t *)out + at, tmp, len, stream()), "to bf16")) rc = cuda_sync(e);
    }
    if (!rc) rc = cuda_sync(e); /* tmp is freed next */
    cuda_free(tmp);
    if (rc) {
        cuda_free(out);
        return rc;
    }
    *dst = out;
    return 0;
}

/* rows row0 .. of a bf16 [rows, cols] handle weight_upload made */
static const float *weight_rows(const float *w, size_t row0, size_t cols) {
    return (const float *)(const void *)((const uint16_t *)(const void *)w + row0 * cols);
}

static const backend cuda_backend = {
    .name = "cuda",
    .rmsnorm_forward = rmsnorm_fwd,
    .rmsnorm_backward = rmsnorm_bwd,
    .gemm = cuda_gemm_f32,
    .matmul_forward = matmul_fwd,
    .matmul_forward_packed = cuda_matmul_forward_packed, /* MXFP4 experts only */
    .matmul_forward_frozen = cuda_matmul_forward_frozen, /* a frozen packed base: frozen.c */
    .matmul_backward_frozen = cuda_matmul_backward_frozen,
    .gather_rows_packed = cuda_gather_rows_packed,
    .matmul_backward = matmul_bwd,
    .rope_cos_sin = rope_cs,
    .rope_forward = rope_fwd,
    .rope_backward = rope_bwd,
    .swiglu_forward = swiglu_fwd,
    .swiglu_backward = swiglu_bwd,
    .swiglu_clamped_forward = cuda_swiglu_clamped_forward,
    .swiglu_clamped_backward = cuda_swiglu_clamped_backward,
    .kv_write = kv_wr,
    .attention_forward = attention_fwd,
    .attention_backward = attention_bwd,
    .attention_sinks_backward = cuda_attention_sinks_backward,
    .head_logsoftmax = head_lsm,
    .head_logsoftmax_backward = head_lsm_bwd,
    .add_inplace = add,
    .gather_rows = gather,
    .scatter_add_rows = scatter_add,
    .dropout_rows = dropout,
    .moe_route_forward = cuda_moe_route_forward,
    .moe_route_replay_forward = cuda_moe_route_replay_forward,
    .moe_route_backward = cuda_moe_route_backward,
    .moe_balance_backward = NULL, /* the router's balance loss: on the CPU only */
    .moe_combine_forward = cuda_moe_combine_forward,
    .moe_combine_backward = cuda_moe_combine_backward,
    .moe_group = cuda_moe_group,
    .adamw_update = adamw,
    .sgd_update = sgd,
    .sum_squares = sum_squares,
    .scale_inplace = scale,
    .weight_refresh = weight_refresh,
    .mem_alloc = cuda_alloc,
    .mem_free = cuda_free,
    .mem_upload = cuda_upload,
    .mem_download = cuda_download,
    .mem_copy = mem_copy,
    .mem_zero = mem_zero,
    .weight_upload = weight_upload,
    .weight_rows = weight_rows,
    .sync = cuda_sync,
};

const backend *backend_cuda(void) { return &cuda_backend; }
