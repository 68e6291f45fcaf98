#include "attn_train.h"

#include <cblas.h>
#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

size_t attn_train_scratch(const model_config *cf, int max_len) {
    size_t M = (size_t)ATTN_TILE * (cf->n_heads / cf->n_kv_heads);
    return 4 * M * cf->head_dim + 2 * M * (size_t)max_len;
}

typedef struct {
    float *qt, *ot, *dot, *dqt, *s, *dp;
} tile_bufs;

static tile_bufs split_buf(float *buf, const model_config *cf, int max_len) {
    size_t M = (size_t)ATTN_TILE * (cf->n_heads / cf->n_kv_heads), hd = cf->head_dim;
    tile_bufs b;
    b.qt = buf, b.ot = b.qt + M * hd, b.dot = b.ot + M * hd, b.dqt = b.dot + M * hd;
    b.s = b.dqt + M * hd, b.dp = b.s + M * (size_t)max_len;
    return b;
}

/* This OpenMP thread's share of the scratch. */
static tile_bufs thread_bufs(float *buf, const model_config *cf, int max_len) {
    int tid = 0;
#ifdef _OPENMP
    tid = omp_get_thread_num();
#endif
    return split_buf(buf + (size_t)tid * attn_train_scratch(cf, max_len), cf, max_len);
}

/* Copies the G heads of group g of rows r0 .. r0+m-1 from x [R, nh*hd] into
 * t [m*G, hd] (row i*G + j is position i, head g*G + j), or back. */
static void gather(float *t, const float *x, int r0, int m, int g, int G, int nh, int hd) {
    for (int i = 0; i < m; i++)
        memcpy(t + (size_t)i * G * hd, x + ((size_t)(r0 + i) * nh + (size_t)g * G) * hd, (size_t)G * hd * sizeof *t);
}
static void scatter(float *x, const float *t, int r0, int m, int g, int G, int nh, int hd) {
    for (int i = 0; i < m; i++)
        memcpy(x + ((size_t)(r0 + i) * nh + (size_t)g * G) * hd, t + (size_t)i * G * hd, (size_t)G * hd * sizeof *t);
}

/* Scores of the tile at positions i0 .. i0+m-1 against keys 0 .. i0+m-1:
 * s [m*G, T] = scale * Qt K^T. */
static void tile_scores(float *s, const float *qt, const float *kb, int M, int T, int hd, int kvd) {
    float scale = (float)(1.0 / sqrt((double)hd));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, T, hd, scale, qt, hd, kb, kvd, 0.0f, s, T);
}

void attn_train_forward(float *out, float *lse, const float *q, const float *k, const float *v, int n_seqs,
                        const int *start, const model_config *cf, float *buf, int max_len) {
    const int nh = cf->n_heads, nkv = cf->n_kv_heads, hd = cf->head_dim, G = nh / nkv, kvd = nkv * hd;
#pragma omp parallel
    {
        tile_bufs b = thread_bufs(buf, cf, max_len);
#pragma omp for schedule(dynamic, 1)
        for (int task = 0; task < n_seqs * nkv; task++) {
            int sq = task / nkv, g = task % nkv, r_base = start[sq], L = start[sq + 1] - r_base;
            size_t off = (size_t)r_base * kvd + (size_t)g * hd;
            const float *kb = k + off, *vb = v + off;
            for (int i0 = 0; i0 < L; i0 += ATTN_TILE) {
                int m = L - i0 < ATTN_TILE ? L - i0 : ATTN_TILE, M = m * G, T = i0 + m;
                gather(b.qt, q, r_base + i0, m, g, G, nh, hd);
                tile_scores(b.s, b.qt, kb, M, T, hd, kvd);
                for (int row = 0; row < M; row++) {
                    int seen = i0 + row / G + 1;
                    float *sr = b.s + (size_t)row * T, mx = -INFINITY;
                    for (int t = 0; t < seen; t++) mx = sr[t] > mx ? sr[t] : mx;
                    double sum = 0;
                    for (int t = 0; t < seen; t++) sum += sr[t] = expf(sr[t] - mx);
                    float inv = (float)(1.0 / sum);
                    for (int t = 0; t < seen; t++) sr[t] *= inv;
                    memset(sr + seen, 0, (size_t)(T - seen) * sizeof *sr);
                    lse[(size_t)(r_base + i0 + row / G) * nh + (size_t)g * G + row % G] = mx + (float)log(sum);
                }
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, hd, T, 1.0f, b.s, T, vb, kvd, 0.0f, b.ot,
                            hd);
                scatter(out, b.ot, r_base + i0, m, g, G, nh, hd);
            }
        }
    }
}

void attn_train_backward(float *dq, float *dk, float *dv, const float *dout, const float *out, const float *lse,
                         const float *q, const float *k, const float *v, int n_seqs, const int *start,
                         const model_config *cf, float *buf, int max_len) {
    const int nh = cf->n_heads, nkv = cf->n_kv_heads, hd = cf->head_dim, G = nh / nkv, kvd = nkv * hd;
    const float scale = (float)(1.0 / sqrt((double)hd));
    memset(dk, 0, (size_t)start[n_seqs] * kvd * sizeof *dk);
    memset(dv, 0, (size_t)start[n_seqs] * kvd * sizeof *dv);
#pragma omp parallel
    {
        tile_bufs b = thread_bufs(buf, cf, max_len);
#pragma omp for schedule(dynamic, 1)
        for (int task = 0; task < n_seqs * nkv; task++) {
            int sq = task / nkv, g = task % nkv, r_base = start[sq], L = start[sq + 1] - r_base;
            size_t off = (size_t)r_base * kvd + (size_t)g * hd;
            const float *kb = k + off, *vb = v + off;
            float *dkb = dk + off, *dvb = dv + off;
            for (int i0 = 0; i0 < L; i0 += ATTN_TILE) {
                int m = L - i0 < ATTN_TILE ? L - i0 : ATTN_TILE, M = m * G, T = i0 + m;
                gather(b.qt, q, r_base + i0, m, g, G, nh, hd);
                gather(b.ot, out, r_base + i0, m, g, G, nh, hd);
                gather(b.dot, dout, r_base + i0, m, g, G, nh, hd);
                tile_scores(b.s, b.qt, kb, M, T, hd, kvd);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, T, hd, 1.0f, b.dot, hd, vb, kvd, 0.0f, b.dp,
                            T);
                for (int row = 0; row < M; row++) {
                    int seen = i0 + row / G + 1;
                    float l = lse[(size_t)(r_base + i0 + row / G) * nh + (size_t)g * G + row % G];
                    const float *o = b.ot + (size_t)row * hd, *dor = b.dot + (size_t)row * hd;
                    double di = 0;
                    for (int i = 0; i < hd; i++) di += (double)o[i] * dor[i];
                    float *p = b.s + (size_t)row * T, *dp = b.dp + (size_t)row * T;
                    for (int t = 0; t < seen; t++) {
                        p[t] = expf(p[t] - l);
                        dp[t] = p[t] * (dp[t] - (float)di);
                    }
                    memset(p + seen, 0, (size_t)(T - seen) * sizeof *p);
                    memset(dp + seen, 0, (size_t)(T - seen) * sizeof *dp);
                }
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, hd, T, scale, b.dp, T, kb, kvd, 0.0f, b.dqt,
                            hd);
                scatter(dq, b.dqt, r_base + i0, m, g, G, nh, hd);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hd, M, scale, b.dp, T, b.qt, hd, 1.0f, dkb,
                            kvd);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hd, M, 1.0f, b.s, T, b.dot, hd, 1.0f, dvb,
                            kvd);
            }
        }
    }
}
