/* The fp32 forward pass over a batch of rows (prefill, decode, or a mix).
 *
 * Per layer, as HF's LlamaDecoderLayer / Qwen2 / Qwen3:
 *   xn = RMSNorm(x); q,k,v = xn Wq^T (+bq), ...; [qwen3] q,k = RMSNorm per head;
 *   RoPE(q, k); cache k,v; att = softmax(q k^T / sqrt(hd)) v  (GQA);
 *   x += att Wo^T; xn = RMSNorm(x); x += (silu(xn Wg^T) * xn Wu^T) Wd^T;
 * then the final RMSNorm (model_forward_hidden), and the LM head (model_forward).
 * Every matrix product is one sgemm over all rows. Scratch buffers are reused
 * from layer to layer; a training forward will keep them per layer instead. */
#include <assert.h>
#include <cblas.h>
#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "model.h"
#include "ops.h"
#include "packed.h"

static inline float *kv_at(const kv_cache *c, float *base, int seq, int layer, int pos) {
    return base + (((size_t)seq * c->n_layers + layer) * c->max_len + pos) * c->kv_dim;
}

/* Writes every row's K and V for this layer into its sequence's slot. */
static void kv_store(kv_cache *c, int layer, int n, const int *seq, const int *pos, const float *k,
                     const float *v) {
    size_t bytes = (size_t)c->kv_dim * sizeof(float);
    for (int r = 0; r < n; r++) {
        memcpy(kv_at(c, c->k, seq[r], layer, pos[r]), k + (size_t)r * c->kv_dim, bytes);
        memcpy(kv_at(c, c->v, seq[r], layer, pos[r]), v + (size_t)r * c->kv_dim, bytes);
    }
}

/* A tile: rows r0 .. r0+m-1 of one sequence at consecutive positions, and
 * the G query heads that share KV head g. Scores and the weighted sum are
 * two sgemm: [m*G, hd] x K^T and [m*G, T] x V, with the causal mask applied
 * in between; keys are read once for all G heads and m rows. */
static void attend_tile(float *out, const float *q, const kv_cache *c, int layer, int r0, int m, int g,
                        const int *seq, const int *pos, const model_config *cf, float *buf) {
    const int nh = cf->n_heads, hd = cf->head_dim, kvd = c->kv_dim, G = nh / cf->n_kv_heads;
    const int M = m * G, T = pos[r0 + m - 1] + 1;
    float *qb = buf, *ob = buf + (size_t)ATT_ROWS * G * hd, *sc = ob + (size_t)ATT_ROWS * G * hd;
    for (int i = 0; i < m; i++)
        memcpy(qb + (size_t)i * G * hd, q + ((size_t)(r0 + i) * nh + (size_t)g * G) * hd, (size_t)G * hd * sizeof *qb);
    const float *kb = kv_at(c, c->k, seq[r0], layer, 0) + (size_t)g * hd;
    const float *vb = kv_at(c, c->v, seq[r0], layer, 0) + (size_t)g * hd;
    float scale = (float)(1.0 / sqrt((double)hd));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, T, hd, scale, qb, hd, kb, kvd, 0.0f, sc, T);
    for (int i = 0; i < M; i++) {
        int seen = pos[r0 + i / G] + 1; /* causal: keys 0 .. the row's own position */
        float *row = sc + (size_t)i * T;
        softmax_inplace(row, seen);
        memset(row + seen, 0, (size_t)(T - seen) * sizeof *row);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, hd, T, 1.0f, sc, T, vb, kvd, 0.0f, ob, hd);
    for (int i = 0; i < m; i++)
        memcpy(out + ((size_t)(r0 + i) * nh + (size_t)g * G) * hd, ob + (size_t)i * G * hd, (size_t)G * hd * sizeof *ob);
}

/* One row (a decode step) and the G heads sharing KV head g: each key and
 * value is read once for the G heads. */
static void attend_row(float *out, const float *q, const kv_cache *c, int layer, int r, int g, const int *seq,
                       const int *pos, const model_config *cf, float *sc) {
    const int nh = cf->n_heads, hd = cf->head_dim, kvd = c->kv_dim, G = nh / cf->n_kv_heads, T = pos[r] + 1;
    const float scale = (float)(1.0 / sqrt((double)hd));
    const float *qh = q + ((size_t)r * nh + (size_t)g * G) * hd;
    const float *kb = kv_at(c, c->k, seq[r], layer, 0) + (size_t)g * hd;
    const float *vb = kv_at(c, c->v, seq[r], layer, 0) + (size_t)g * hd;
    for (int t = 0; t < T; t++) {
        const float *kt = kb + (size_t)t * kvd;
        for (int j = 0; j < G; j++) {
            const float *qv = qh + (size_t)j * hd;
            float dot = 0;
            /* without a reduction clause the compiler keeps this sum scalar */
#pragma omp simd reduction(+ : dot)
            for (int i = 0; i < hd; i++) dot += qv[i] * kt[i];
            sc[(size_t)j * T + t] = dot * scale;
        }
    }
    float *o = out + ((size_t)r * nh + (size_t)g * G) * hd;
    memset(o, 0, (size_t)G * hd * sizeof *o);
    for (int j = 0; j < G; j++) softmax_inplace(sc + (size_t)j * T, T);
    for (int t = 0; t < T; t++) {
        const float *vt = vb + (size_t)t * kvd;
        for (int j = 0; j < G; j++) {
            float p = sc[(size_t)j * T + t], *oj = o + (size_t)j * hd;
#pragma omp simd
            for (int i = 0; i < hd; i++) oj[i] += p * vt[i];
        }
    }
}

/* out[n, n_heads*hd]: each row attends over positions 0..pos[r] of its
 * sequence in the cache. Runs of rows of one sequence at consecutive
 * positions (a prefill) go in tiles, the other rows one by one; no [T x T]
 * matrix is ever formed beyond one tile's scores. */
static void attention_forward(float *out, const float *q, const kv_cache *c, int layer, int n, const int *seq,
                              const int *pos, const model_config *cf, model_scratch *s) {
    const int nkv = cf->n_kv_heads;
    int n_tasks = 0, *task = s->att_tasks;
    for (int r = 0; r < n;) {
        int end = r + 1;
        while (end < n && seq[end] == seq[r] && pos[end] == pos[end - 1] + 1) end++;
        if (end - r >= ATT_MIN_ROWS) {
            for (int r0 = r; r0 < end; r0 += ATT_ROWS)
                for (int g = 0; g < nkv; g++, n_tasks++) {
                    task[3 * n_tasks] = r0;
                    task[3 * n_tasks + 1] = end - r0 < ATT_ROWS ? end - r0 : ATT_ROWS;
                    task[3 * n_tasks + 2] = g;
                }
        } else {
            for (int i = r; i < end; i++)
                for (int g = 0; g < nkv; g++, n_tasks++) {
                    task[3 * n_tasks] = i;
                    task[3 * n_tasks + 1] = 1;
                    task[3 * n_tasks + 2] = g;
                }
        }
        r = end;
    }
#pragma omp parallel num_threads(s->n_threads)
    {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        float *buf = s->attn + (size_t)tid * s->attn_stride;
#pragma omp for schedule(dynamic, 1)
        for (int t = 0; t < n_tasks; t++) {
            int r0 = task[3 * t], m = task[3 * t + 1], g = task[3 * t + 2];
            if (m == 1)
                attend_row(out, q, c, layer, r0, g, seq, pos, cf, buf);
            else
                attend_tile(out, q, c, layer, r0, m, g, seq, pos, cf, buf);
        }
    }
}

/* out = in W^T (+ bias) with one of the model's layer matrices, packed or row-major. */
static void linear(const model *m, float *out, const float *in, const float *w, const float *bias, int n, int in_dim,
                   int out_dim) {
    if (m->packed)
        packed_matmul(out, in, w, bias, n, in_dim, out_dim);
    else
        matmul_forward(out, in, w, bias, n, in_dim, out_dim);
}

static void residual_add(float *x, const float *y, size_t n) {
#pragma omp parallel for schedule(static) if (n > 4096)
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}

int model_forward_hidden(const model *m, kv_cache *c, int n_rows, const int *seq, const int *pos,
                         const int32_t *token, const bool *want, float *hidden, model_scratch *s) {
    const model_config *cf = &m->cfg;
    const model_params *w = &m->w;
    int R = n_rows, d = cf->dim, hd = cf->head_dim, nh = cf->n_heads, nkv = cf->n_kv_heads;
    int qd = nh * hd, kvd = nkv * hd, hid = cf->hidden_dim;
    float eps = cf->norm_eps;
    assert(R >= 0 && R <= s->max_rows && c->kv_dim == kvd && c->n_layers == cf->n_layers);
    if (R == 0) return 0;

    for (int r = 0; r < R; r++) {
        assert(token[r] >= 0 && token[r] < cf->vocab_size);
        assert(seq[r] >= 0 && seq[r] < c->n_seqs);
        assert(pos[r] >= 0 && pos[r] < c->max_len && pos[r] < s->max_len);
        memcpy(s->x + (size_t)r * d, w->tok_embd + (size_t)token[r] * d, (size_t)d * sizeof(float));
    }
    rope_cos_sin(s->cos_t, s->sin_t, m->inv_freq, hd / 2, pos, R);

    for (int l = 0; l < cf->n_layers; l++) {
        /* attention block */
        rmsnorm_forward(s->xn, NULL, s->x, w->attn_norm + (size_t)l * d, R, d, eps);
        linear(m, s->q, s->xn, w->wq + (size_t)l * qd * d, w->bq ? w->bq + (size_t)l * qd : NULL, R, d, qd);
        linear(m, s->k, s->xn, w->wk + (size_t)l * kvd * d, w->bk ? w->bk + (size_t)l * kvd : NULL, R, d, kvd);
        linear(m, s->v, s->xn, w->wv + (size_t)l * kvd * d, w->bv ? w->bv + (size_t)l * kvd : NULL, R, d, kvd);
        if (cf->qk_norm) { /* qwen3: RMSNorm over each head, before RoPE */
            rmsnorm_forward(s->q, NULL, s->q, w->q_norm + (size_t)l * hd, R * nh, hd, eps);
            rmsnorm_forward(s->k, NULL, s->k, w->k_norm + (size_t)l * hd, R * nkv, hd, eps);
        }
        rope_forward(s->q, s->cos_t, s->sin_t, R, nh, hd);
        rope_forward(s->k, s->cos_t, s->sin_t, R, nkv, hd);
        kv_store(c, l, R, seq, pos, s->k, s->v);
        attention_forward(s->xn, s->q, c, l, R, seq, pos, cf, s);
        linear(m, s->proj, s->xn, w->wo + (size_t)l * d * qd, NULL, R, qd, d);
        residual_add(s->x, s->proj, (size_t)R * d);

        /* MLP block */
        rmsnorm_forward(s->xn, NULL, s->x, w->ffn_norm + (size_t)l * d, R, d, eps);
        linear(m, s->gate, s->xn, w->w_gate + (size_t)l * hid * d, NULL, R, d, hid);
        linear(m, s->up, s->xn, w->w_up + (size_t)l * hid * d, NULL, R, d, hid);
        swiglu_forward(s->gate, s->gate, s->up, (size_t)R * hid);
        linear(m, s->proj, s->gate, w->w_down + (size_t)l * d * hid, NULL, R, hid, d);
        residual_add(s->x, s->proj, (size_t)R * d);
    }

    /* The final norm only for the rows wanted. */
    int n_want = 0;
    for (int r = 0; r < R; r++)
        if (!want || want[r]) memcpy(hidden + (size_t)n_want++ * d, s->x + (size_t)r * d, (size_t)d * sizeof(float));
    if (n_want) rmsnorm_forward(hidden, NULL, hidden, w->out_norm, n_want, d, eps);
    return n_want;
}

void model_forward(const model *m, kv_cache *c, int n_rows, const int *seq, const int *pos,
                   const int32_t *token, const bool *want_logits, float *logits, model_scratch *s) {
    assert(m->w.lm_head);
    int n = model_forward_hidden(m, c, n_rows, seq, pos, token, want_logits, s->xn, s);
    if (!n) return;
    if (m->head_packed)
        packed_matmul(logits, s->xn, m->head_packed, NULL, n, m->cfg.dim, m->cfg.vocab_size);
    else
        matmul_forward(logits, s->xn, m->w.lm_head, NULL, n, m->cfg.dim, m->cfg.vocab_size);
}
