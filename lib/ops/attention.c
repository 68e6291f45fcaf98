/* Causal grouped-query attention, forward and backward.
 *
 * The forward reads keys and values through a kv_view, so one code serves
 * a KV cache (rollout: rows of many sequences at any positions) and a
 * training batch (whole sequences, their own K/V). Rows of one sequence at
 * consecutive positions (a prefill, a training sequence) go in tiles of up
 * to ATT_TILE rows: for the G query heads sharing a KV head, the scores and
 * the weighted sum are two sgemm ([m*G, hd] x K^T and [m*G, T] x V) with the
 * causal mask applied between, so keys are read once per tile. Other rows (a
 * decode step) go one by one. No [T x T] matrix outlives one tile.
 *
 * The backward keeps only the output and each row's log-sum-exp from the
 * forward and recomputes the scores tile by tile (flash-attention's scheme).
 *
 * Over a bf16 cache (KV_BF16) a tile widens its keys, then its values, into
 * fp32 scratch and runs the same two sgemm. A single row runs
 * attention_row.h's kernels, over bf16 (attention_bf16.c) or float32
 * (attention_f32.c). */
#include "ops.h"

#include <math.h>

#include "../util/half.h"
#include "attention_row.h"
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* Rows of dp per position: M for the backward's dP, hd for a forward tile's
 * widened K or V (no more than M in most models, so no extra memory). */
static size_t dp_rows(size_t M, size_t hd) { return M > hd ? M : hd; }

size_t attn_workspace_floats(attn_shape sh, int max_len) {
    size_t M = (size_t)ATT_TILE * (size_t)(sh.n_heads / sh.n_kv_heads), hd = (size_t)sh.head_dim;
    return 4 * M * hd + (M + dp_rows(M, hd)) * (size_t)max_len;
}

typedef struct {
    float *qt, *ot, *dot, *dqt, *s, *dp; /* dp: in the forward, a bf16 tile's K or V in fp32 */
} tile_bufs;

/* This OpenMP thread's share of the workspace. */
static tile_bufs thread_bufs(const attn_workspace *ws, attn_shape sh) {
    int tid = 0;
#ifdef _OPENMP
    tid = omp_get_thread_num();
#endif
    size_t M = (size_t)ATT_TILE * (size_t)(sh.n_heads / sh.n_kv_heads), hd = (size_t)sh.head_dim;
    size_t max_len = (ws->stride - 4 * M * hd) / (M + dp_rows(M, hd));
    tile_bufs b;
    b.qt = ws->buf + (size_t)tid * ws->stride;
    b.ot = b.qt + M * hd, b.dot = b.ot + M * hd, b.dqt = b.dot + M * hd;
    b.s = b.dqt + M * hd, b.dp = b.s + M * max_len;
    return b;
}

/* Copies the G heads of group g of rows r0 .. r0+m-1 from x [R, nh*hd] into
 * t [m*G, hd] (row i*G + j is row r0+i, head g*G + j), or back. */
static void gather(float *t, const float *x, int r0, int m, int g, int G, int nh, int hd) {
    for (int i = 0; i < m; i++)
        memcpy(t + (size_t)i * G * hd, x + ((size_t)(r0 + i) * nh + (size_t)g * G) * hd, (size_t)G * hd * sizeof *t);
}
static void scatter(float *x, const float *t, int r0, int m, int g, int G, int nh, int hd) {
    for (int i = 0; i < m; i++)
        memcpy(x + ((size_t)(r0 + i) * nh + (size_t)g * G) * hd, t + (size_t)i * G * hd, (size_t)G * hd * sizeof *t);
}

static float attn_scale(attn_shape sh) { return sh.scale > 0 ? sh.scale : (float)(1.0 / sqrt((double)sh.head_dim)); }

/* The first key a row at position P sees (attn_shape's window). */
static int first_key(attn_shape sh, int P) { return sh.window > 0 && P >= sh.window ? P - sh.window + 1 : 0; }

/* Head h's sink joins a softmax of log-sum-exp *l: the probabilities p[n]
 * (and out[hd], when not NULL) scale by exp(l - L), and *l becomes L. */
static void add_sink(float *p, int n, float *out, int hd, float *l, float sink) {
    double m = fmax((double)*l, (double)sink);
    double big = m + log(exp((double)*l - m) + exp((double)sink - m));
    float f = (float)exp((double)*l - big);
    for (int i = 0; i < n; i++) p[i] *= f;
    if (out)
        for (int i = 0; i < hd; i++) out[i] *= f;
    *l = (float)big;
}

/* Rows r0 .. r0+m-1 (one sequence, consecutive positions) and KV head g.
 * kernel: attention_bf16's code that runs over a bf16 cache. */
static void attend_tile(float *out, float *lse, const float *q, const kv_view *kv, const int *pos, int r0, int m,
                        int g, attn_shape sh, const tile_bufs *b, attn_kernel kernel) {
    const int nh = sh.n_heads, hd = sh.head_dim, G = nh / sh.n_kv_heads;
    const int M = m * G, T = pos[r0 + m - 1] + 1;
    const bool bf16 = kv->fmt == KV_BF16;
    gather(b->qt, q, r0, m, g, G, nh, hd);
    size_t at = kv->row_kv[r0] + (size_t)g * hd;
    const float *kb = bf16 ? b->dp : kv->k + at, *vb = bf16 ? b->dp : kv->v + at;
    const int ld = bf16 ? hd : kv->kv_dim;
    if (bf16) widen_rows_bf16(b->dp, kv->k_bf16 + at, T, hd, kv->kv_dim, kernel);
    gemm(false, true, M, T, hd, attn_scale(sh), b->qt, hd, kb, ld, 0.0f, b->s, T);
    for (int i = 0; i < M; i++) {
        int seen = pos[r0 + i / G] + 1; /* causal: keys 0 .. the row's own position */
        int lo = first_key(sh, seen - 1), h = g * G + i % G;
        float *row = b->s + (size_t)i * T;
        float l = softmax_row(row + lo, seen - lo);
        if (sh.sinks) add_sink(row + lo, seen - lo, NULL, 0, &l, sh.sinks[h]);
        memset(row, 0, (size_t)lo * sizeof *row);
        memset(row + seen, 0, (size_t)(T - seen) * sizeof *row);
        if (lse) lse[(size_t)(r0 + i / G) * nh + h] = l;
    }
    if (bf16) widen_rows_bf16(b->dp, kv->v_bf16 + at, T, hd, kv->kv_dim, kernel);
    gemm(false, false, M, hd, T, 1.0f, b->s, T, vb, ld, 0.0f, b->ot, hd);
    scatter(out, b->ot, r0, m, g, G, nh, hd);
}

/* One row and the G heads sharing KV head g: each key and value is read once
 * for the G heads. */
static void attend_row(float *out, float *lse, const float *q, const kv_view *kv, const int *pos, int r, int g,
                       attn_shape sh, const tile_bufs *b, attn_kernel kernel) {
    const int nh = sh.n_heads, hd = sh.head_dim, G = nh / sh.n_kv_heads, kvd = kv->kv_dim;
    const int lo = first_key(sh, pos[r]), T = pos[r] + 1 - lo;
    const float scale = attn_scale(sh);
    const size_t head = (size_t)r * nh + (size_t)g * G, at = kv->row_kv[r] + (size_t)g * hd + (size_t)lo * kvd;
    const float *qh = q + head * hd;
    /* with sinks the heads' log-sum-exps are needed: the tile's dqt is free */
    float *o = out + head * hd, *l = lse ? lse + head : sh.sinks ? b->dqt : NULL;
    if (kv->fmt == KV_BF16)
        attend_row_bf16(o, l, qh, kv->k_bf16 + at, kv->v_bf16 + at, T, G, hd, kvd, scale, b->s, kernel);
    else
        attend_row_f32(o, l, qh, kv->k + at, kv->v + at, T, G, hd, kvd, scale, b->s, kernel);
    if (sh.sinks)
        for (int j = 0; j < G; j++) add_sink(NULL, 0, o + (size_t)j * hd, hd, l + j, sh.sinks[g * G + j]);
}

void attention_forward(float *out, float *lse, const float *q, const kv_view *kv, const int *pos, int n,
                       attn_shape sh, attn_workspace *ws) {
    const int nkv = sh.n_kv_heads;
    int n_tasks = 0, *task = ws->tasks;
    const attn_kernel kernel = ws->portable_kernels ? ATTN_PORTABLE : attn_kernel_best();
    for (int r = 0; r < n;) {
        int end = r + 1;
        while (end < n && kv->row_kv[end] == kv->row_kv[r] && pos[end] == pos[end - 1] + 1) end++;
        int tile = end - r >= ATT_MIN_ROWS ? ATT_TILE : 1;
        for (int r0 = r; r0 < end; r0 += tile)
            for (int g = 0; g < nkv; g++, n_tasks++) {
                task[3 * n_tasks] = r0;
                task[3 * n_tasks + 1] = end - r0 < tile ? end - r0 : tile;
                task[3 * n_tasks + 2] = g;
            }
        r = end;
    }
#pragma omp parallel num_threads(ws->n_threads)
    {
        tile_bufs b = thread_bufs(ws, sh);
#pragma omp for schedule(dynamic, 1)
        for (int t = 0; t < n_tasks; t++) {
            int r0 = task[3 * t], m = task[3 * t + 1], g = task[3 * t + 2];
            if (m == 1)
                attend_row(out, lse, q, kv, pos, r0, g, sh, &b, kernel);
            else
                attend_tile(out, lse, q, kv, pos, r0, m, g, sh, &b, kernel);
        }
    }
}

void attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *out, const float *lse,
                        const float *q, const float *k, const float *v, int n_seqs, const int *start,
                        attn_shape sh, attn_workspace *ws) {
    const int nh = sh.n_heads, nkv = sh.n_kv_heads, hd = sh.head_dim, G = nh / nkv, kvd = nkv * hd;
    const float scale = attn_scale(sh);
    memset(dk, 0, (size_t)start[n_seqs] * kvd * sizeof *dk);
    memset(dv, 0, (size_t)start[n_seqs] * kvd * sizeof *dv);
    /* one task per sequence and KV head: its tiles add into the same dk, dv */
#pragma omp parallel num_threads(ws->n_threads)
    {
        tile_bufs b = thread_bufs(ws, sh);
#pragma omp for schedule(dynamic, 1)
        for (int task = 0; task < n_seqs * nkv; task++) {
            int sq = task / nkv, g = task % nkv, r_base = start[sq], L = start[sq + 1] - r_base;
            size_t off = (size_t)r_base * kvd + (size_t)g * hd;
            const float *kb = k + off, *vb = v + off;
            float *dkb = dk + off, *dvb = dv + off;
            for (int i0 = 0; i0 < L; i0 += ATT_TILE) {
                int m = L - i0 < ATT_TILE ? L - i0 : ATT_TILE, M = m * G, T = i0 + m;
                gather(b.qt, q, r_base + i0, m, g, G, nh, hd);
                gather(b.ot, out, r_base + i0, m, g, G, nh, hd);
                gather(b.dot, dout, r_base + i0, m, g, G, nh, hd);
                gemm(false, true, M, T, hd, scale, b.qt, hd, kb, kvd, 0.0f, b.s, T);
                gemm(false, true, M, T, hd, 1.0f, b.dot, hd, vb, kvd, 0.0f, b.dp, T);
                for (int row = 0; row < M; row++) {
                    int seen = i0 + row / G + 1, lo = first_key(sh, seen - 1);
                    float l = lse[(size_t)(r_base + i0 + row / G) * nh + (size_t)g * G + row % G];
                    const float *o = b.ot + (size_t)row * hd, *dor = b.dot + (size_t)row * hd;
                    double di = 0;
                    for (int i = 0; i < hd; i++) di += (double)o[i] * dor[i];
                    float *p = b.s + (size_t)row * T, *dp = b.dp + (size_t)row * T;
                    softmax_recompute(p, seen, l);
                    for (int t = 0; t < seen; t++) dp[t] = p[t] * (dp[t] - (float)di);
                    memset(p, 0, (size_t)lo * sizeof *p);
                    memset(dp, 0, (size_t)lo * sizeof *dp);
                    memset(p + seen, 0, (size_t)(T - seen) * sizeof *p);
                    memset(dp + seen, 0, (size_t)(T - seen) * sizeof *dp);
                }
                gemm(false, false, M, hd, T, scale, b.dp, T, kb, kvd, 0.0f, b.dqt, hd);
                scatter(dq, b.dqt, r_base + i0, m, g, G, nh, hd);
                gemm(true, false, T, hd, M, scale, b.dp, T, b.qt, hd, 1.0f, dkb, kvd);
                gemm(true, false, T, hd, M, 1.0f, b.s, T, b.dot, hd, 1.0f, dvb, kvd);
            }
        }
    }
}

void attention_sinks_backward(float *dsinks, const float *out, const float *dout, const float *lse, const float *sinks,
                              int n, int n_heads, int hd) {
    for (int h = 0; h < n_heads; h++) {
        double sum = 0;
        for (int r = 0; r < n; r++) {
            size_t at = (size_t)r * n_heads + h;
            const float *o = out + at * hd, *d = dout + at * hd;
            double di = 0;
            for (int i = 0; i < hd; i++) di += (double)o[i] * d[i];
            sum += exp((double)sinks[h] - lse[at]) * di;
        }
        dsinks[h] -= (float)sum;
    }
}

void kv_write(const kv_view *kv, const float *k, const float *v, const int *pos, int n) {
    size_t d = (size_t)kv->kv_dim, bytes = d * sizeof(float);
    for (int r = 0; r < n; r++) {
        size_t at = kv->row_kv[r] + (size_t)pos[r] * d;
        if (kv->fmt == KV_BF16) {
            f32_to_bf16_array(k + (size_t)r * d, kv->k_bf16 + at, d);
            f32_to_bf16_array(v + (size_t)r * d, kv->v_bf16 + at, d);
        } else {
            memcpy(kv->k + at, k + (size_t)r * d, bytes);
            memcpy(kv->v + at, v + (size_t)r * d, bytes);
        }
    }
}
