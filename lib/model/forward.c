/* The fp32 forward pass over a batch of rows (prefill, decode, or a mix).
 *
 * Per layer, as HF's LlamaDecoderLayer / Qwen2 / Qwen3:
 *   xn = RMSNorm(x); q,k,v = xn Wq^T (+bq), ...; [qwen3] q,k = RMSNorm per head;
 *   RoPE(q, k); cache k,v; att = softmax(q k^T / sqrt(hd)) v  (GQA);
 *   x += att Wo^T; xn = RMSNorm(x); x += (silu(xn Wg^T) * xn Wu^T) Wd^T.
 * Every matrix product is one sgemm over all rows. Scratch buffers are reused
 * from layer to layer; a training forward will keep them per layer instead. */
#include <assert.h>
#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "model.h"
#include "ops.h"

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

/* out[n, n_heads*hd]: each (row, head) attends over positions 0..pos[r] of
 * its sequence in the cache. One row of scores per thread, never [T x T]. */
static void attention_forward(float *out, const float *q, const kv_cache *c, int layer, int n, const int *seq,
                              const int *pos, const model_config *cf, model_scratch *s) {
    int nh = cf->n_heads, hd = cf->head_dim, kvd = c->kv_dim;
    float scale = (float)(1.0 / sqrt((double)hd));
#pragma omp parallel num_threads(s->n_threads)
    {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        float *sc = s->scores + (size_t)tid * s->max_len;
#pragma omp for schedule(dynamic, 1)
        for (int task = 0; task < n * nh; task++) {
            int r = task / nh, h = task % nh, kvh = gqa_kv_head(h, nh, cf->n_kv_heads);
            const float *qv = q + ((size_t)r * nh + h) * hd;
            const float *kb = kv_at(c, c->k, seq[r], layer, 0) + (size_t)kvh * hd;
            const float *vb = kv_at(c, c->v, seq[r], layer, 0) + (size_t)kvh * hd;
            int T = pos[r] + 1;
            for (int t = 0; t < T; t++) {
                const float *kt = kb + (size_t)t * kvd;
                float dot = 0;
                /* without a reduction clause the compiler keeps this sum scalar */
#pragma omp simd reduction(+ : dot)
                for (int i = 0; i < hd; i++) dot += qv[i] * kt[i];
                sc[t] = dot * scale;
            }
            softmax_inplace(sc, T);
            float *o = out + ((size_t)r * nh + h) * hd;
            memset(o, 0, (size_t)hd * sizeof *o);
            for (int t = 0; t < T; t++) {
                const float *vt = vb + (size_t)t * kvd;
                float p = sc[t];
#pragma omp simd
                for (int i = 0; i < hd; i++) o[i] += p * vt[i];
            }
        }
    }
}

static void residual_add(float *x, const float *y, size_t n) {
#pragma omp parallel for schedule(static) if (n > 4096)
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}

void model_forward(const model *m, kv_cache *c, int n_rows, const int *seq, const int *pos,
                   const int32_t *token, const bool *want_logits, float *logits, model_scratch *s) {
    const model_config *cf = &m->cfg;
    const model_params *w = &m->w;
    int R = n_rows, d = cf->dim, hd = cf->head_dim, nh = cf->n_heads, nkv = cf->n_kv_heads;
    int qd = nh * hd, kvd = nkv * hd, hid = cf->hidden_dim;
    float eps = cf->norm_eps;
    assert(R >= 0 && R <= s->max_rows && c->kv_dim == kvd && c->n_layers == cf->n_layers);
    if (R == 0) return;

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
        matmul_forward(s->q, s->xn, w->wq + (size_t)l * qd * d, w->bq ? w->bq + (size_t)l * qd : NULL, R, d, qd);
        matmul_forward(s->k, s->xn, w->wk + (size_t)l * kvd * d, w->bk ? w->bk + (size_t)l * kvd : NULL, R, d, kvd);
        matmul_forward(s->v, s->xn, w->wv + (size_t)l * kvd * d, w->bv ? w->bv + (size_t)l * kvd : NULL, R, d, kvd);
        if (cf->qk_norm) { /* qwen3: RMSNorm over each head, before RoPE */
            rmsnorm_forward(s->q, NULL, s->q, w->q_norm + (size_t)l * hd, R * nh, hd, eps);
            rmsnorm_forward(s->k, NULL, s->k, w->k_norm + (size_t)l * hd, R * nkv, hd, eps);
        }
        rope_forward(s->q, s->cos_t, s->sin_t, R, nh, hd);
        rope_forward(s->k, s->cos_t, s->sin_t, R, nkv, hd);
        kv_store(c, l, R, seq, pos, s->k, s->v);
        attention_forward(s->xn, s->q, c, l, R, seq, pos, cf, s);
        matmul_forward(s->proj, s->xn, w->wo + (size_t)l * d * qd, NULL, R, qd, d);
        residual_add(s->x, s->proj, (size_t)R * d);

        /* MLP block */
        rmsnorm_forward(s->xn, NULL, s->x, w->ffn_norm + (size_t)l * d, R, d, eps);
        matmul_forward(s->gate, s->xn, w->w_gate + (size_t)l * hid * d, NULL, R, d, hid);
        matmul_forward(s->up, s->xn, w->w_up + (size_t)l * hid * d, NULL, R, d, hid);
        swiglu_forward(s->gate, s->gate, s->up, (size_t)R * hid);
        matmul_forward(s->proj, s->gate, w->w_down + (size_t)l * d * hid, NULL, R, hid, d);
        residual_add(s->x, s->proj, (size_t)R * d);
    }

    /* Final norm and LM head only for the rows that want logits. */
    int n_want = 0;
    for (int r = 0; r < R; r++)
        if (!want_logits || want_logits[r])
            memcpy(s->xn + (size_t)n_want++ * d, s->x + (size_t)r * d, (size_t)d * sizeof(float));
    if (!n_want) return;
    rmsnorm_forward(s->xn, NULL, s->xn, w->out_norm, n_want, d, eps);
    matmul_forward(logits, s->xn, w->lm_head, NULL, n_want, d, cf->vocab_size);
}
