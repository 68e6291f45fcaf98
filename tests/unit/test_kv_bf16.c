/* The bf16 KV cache (KV_BF16) and attention's decode-row kernels: what
 * kv_write stores, the cache's copies and growth, attention over a bf16 and
 * an fp32 view against a float64 reference (over K and V rounded to bf16 for
 * the first), the SIMD kernels (AVX-512, AVX2) of both against the portable
 * ones bit for bit, a row's result whatever else is in the call and however
 * many threads run it, and the forward of a tiny random model with a bf16
 * cache against an fp32 one. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "check.h"
#include "model/model.h"
#include "ops/attention_row.h"
#include "ops/ops.h"
#include "util/half.h"

static uint64_t next(uint64_t *st) { /* xorshift */
    *st ^= *st << 13, *st ^= *st >> 7, *st ^= *st << 17;
    return *st;
}

/* uniform in [-a, a) */
static float uni(uint64_t *st, float a) { return (float)(((next(st) >> 11) * 0x1.0p-53 * 2 - 1) * a); }

static void test_write_rounds(void) {
    TEST("kv_write into a bf16 view rounds each element to nearest even (f32_to_bf16)");
    enum { D = 24 };
    float k[2 * D], v[2 * D];
    uint64_t st = 7;
    for (int i = 0; i < 2 * D; i++) k[i] = uni(&st, 3), v[i] = uni(&st, 3);
    k[0] = 1.0f + 0x1.0p-8f;              /* a tie: rounds down to even 1.0 */
    k[1] = 1.0f + 0x1.0p-8f + 0x1.0p-7f;  /* a tie: rounds up to even */
    uint16_t kc[4 * D], vc[4 * D];
    memset(kc, 0, sizeof kc), memset(vc, 0, sizeof vc);
    size_t row_kv[2] = {0, 2 * D};
    int pos[2] = {1, 0};
    kv_view kv = {.k_bf16 = kc, .v_bf16 = vc, .row_kv = row_kv, .kv_dim = D, .fmt = KV_BF16};
    kv_write(&kv, k, v, pos, 2);
    int bad = 0;
    for (int i = 0; i < D; i++) {
        bad += kc[D + i] != f32_to_bf16(k[i]) || vc[D + i] != f32_to_bf16(v[i]);
        bad += kc[2 * D + i] != f32_to_bf16(k[D + i]) || vc[2 * D + i] != f32_to_bf16(v[D + i]);
        bad += kc[i] != 0 || kc[3 * D + i] != 0; /* nothing else written */
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(kc[D] == 0x3F80 && kc[D + 1] == 0x3F82);
}

static void test_cache_copies(void) {
    TEST("a bf16 cache: half the bytes; prefix copy and growth keep its elements");
    model_config cfg = {.n_layers = 3, .n_kv_heads = 2, .head_dim = 4};
    CHECK_EQ_INT(kv_cache_bytes_as(&cfg, 2, 5, KV_BF16) * 2, kv_cache_bytes(&cfg, 2, 5));
    kv_cache c;
    gerr e = {0};
    CHECK_EQ_INT(kv_cache_init_as(&c, NULL, &cfg, 0, 5, KV_BF16, &e), EX_USAGE);
    CHECK_EQ_INT(kv_cache_init_as(&c, NULL, &cfg, 2, 5, (kv_format)7, &e), EX_USAGE);
    if (kv_cache_init_as(&c, NULL, &cfg, 2, 5, KV_BF16, &e)) {
        CHECK(0);
        return;
    }
    CHECK(c.fmt == KV_BF16);
    size_t n = (size_t)2 * 3 * 5 * 8;
    for (size_t i = 0; i < n; i++) c.k_bf16[i] = (uint16_t)(i * 3 + 1), c.v_bf16[i] = (uint16_t)(60000 - i);
    kv_cache_copy_prefix(&c, 1, 0, 3); /* positions 0..2 of every layer: sequence 0 -> 1 */
    int bad = 0;
    for (int l = 0; l < 3; l++)
        for (int p = 0; p < 5; p++)
            for (int d = 0; d < 8; d++) {
                size_t s0 = (((size_t)0 * 3 + l) * 5 + p) * 8 + d, s1 = (((size_t)1 * 3 + l) * 5 + p) * 8 + d;
                size_t want = p < 3 ? s0 : s1; /* past the prefix sequence 1 keeps its own */
                bad += c.k_bf16[s1] != (uint16_t)(want * 3 + 1) || c.v_bf16[s1] != (uint16_t)(60000 - want);
            }
    CHECK_EQ_INT(bad, 0);
    uint16_t *before = xcalloc(n, sizeof *before);
    memcpy(before, c.k_bf16, n * sizeof *before);
    uint16_t *vbefore = xcalloc(n, sizeof *vbefore);
    memcpy(vbefore, c.v_bf16, n * sizeof *vbefore);
    CHECK_EQ_INT(kv_cache_grow(&c, &cfg, 9, &e), 0);
    CHECK(c.fmt == KV_BF16 && c.max_len == 9);
    bad = 0;
    for (int s = 0; s < 2; s++)
        for (int l = 0; l < 3; l++)
            for (int p = 0; p < 5; p++)
                for (int d = 0; d < 8; d++) {
                    size_t old = (((size_t)s * 3 + l) * 5 + p) * 8 + d, now = (((size_t)s * 3 + l) * 9 + p) * 8 + d;
                    bad += c.k_bf16[now] != before[old] || c.v_bf16[now] != vbefore[old];
                }
    CHECK_EQ_INT(bad, 0);
    free(before), free(vbefore);
    kv_cache_free(&c);
}

/* ---- attention over a bf16 view ------------------------------------------------ */

/* A cache of S sequences of L positions, filled with random K/V, both as
 * fp32 and rounded to bf16, and queries for R rows. */
typedef struct {
    attn_shape sh;
    int S, L, R, kvd, qd;
    float *kf, *vf, *q;
    uint16_t *kb, *vb;
    attn_workspace ws;
} attn_case;

static void case_init(attn_case *a, int n_heads, int n_kv, int hd, int S, int L, int R, uint64_t seed) {
    memset(a, 0, sizeof *a);
    a->sh = (attn_shape){.n_heads = n_heads, .n_kv_heads = n_kv, .head_dim = hd};
    a->S = S, a->L = L, a->R = R, a->kvd = n_kv * hd, a->qd = n_heads * hd;
    size_t n = (size_t)S * L * a->kvd;
    a->kf = xcalloc(n, sizeof(float)), a->vf = xcalloc(n, sizeof(float));
    a->kb = xcalloc(n, sizeof(uint16_t)), a->vb = xcalloc(n, sizeof(uint16_t));
    a->q = xcalloc((size_t)R * a->qd, sizeof(float));
    uint64_t st = seed;
    for (size_t i = 0; i < n; i++) {
        a->kf[i] = uni(&st, 2), a->vf[i] = uni(&st, 1);
        a->kb[i] = f32_to_bf16(a->kf[i]), a->vb[i] = f32_to_bf16(a->vf[i]);
    }
    for (size_t i = 0; i < (size_t)R * a->qd; i++) a->q[i] = uni(&st, 2);
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    a->ws.n_threads = threads;
    a->ws.stride = attn_workspace_floats(a->sh, L);
    a->ws.buf = xcalloc(a->ws.stride * (size_t)threads, sizeof(float));
    a->ws.tasks = xcalloc((size_t)R * n_kv * 3, sizeof(int));
}

static void case_free(attn_case *a) {
    free(a->kf), free(a->vf), free(a->kb), free(a->vb), free(a->q), free(a->ws.buf), free(a->ws.tasks);
}

static kv_view view_of(attn_case *a, const size_t *row_kv, bool bf16) {
    if (bf16) return (kv_view){.k_bf16 = a->kb, .v_bf16 = a->vb, .row_kv = row_kv, .kv_dim = a->kvd, .fmt = KV_BF16};
    return (kv_view){.k = a->kf, .v = a->vf, .row_kv = row_kv, .kv_dim = a->kvd};
}

/* Row r of sequence seq[r] at pos[r] in float64 over the bf16 K/V (bf16) or
 * the fp32 ones: out[qd]. */
static double kv_at(const attn_case *a, bool bf16, bool value, size_t i) {
    if (bf16) return bf16_to_f32(value ? a->vb[i] : a->kb[i]);
    return value ? a->vf[i] : a->kf[i];
}

static void reference_row(const attn_case *a, bool bf16, const float *q, size_t row_kv, int pos, double *out) {
    int hd = a->sh.head_dim, G = a->sh.n_heads / a->sh.n_kv_heads;
    double *s = xcalloc((size_t)pos + 1, sizeof *s);
    for (int h = 0; h < a->sh.n_heads; h++) {
        int g = h / G;
        double mx = -INFINITY, z = 0;
        for (int t = 0; t <= pos; t++) {
            size_t k = row_kv + (size_t)t * a->kvd + (size_t)g * hd;
            double d = 0;
            for (int i = 0; i < hd; i++) d += (double)q[h * hd + i] * kv_at(a, bf16, false, k + (size_t)i);
            s[t] = d / sqrt((double)hd);
            mx = fmax(mx, s[t]);
        }
        for (int t = 0; t <= pos; t++) z += s[t] = exp(s[t] - mx);
        for (int i = 0; i < hd; i++) {
            double o = 0;
            for (int t = 0; t <= pos; t++) o += s[t] / z * kv_at(a, bf16, true, row_kv + (size_t)t * a->kvd + g * hd + i);
            out[h * hd + i] = o;
        }
    }
    free(s);
}

/* R rows: sequence 0 prefills positions 0..P-1 (tiles), then one decode row
 * per other sequence at scattered positions. */
static void layout(const attn_case *a, int P, int *pos, size_t *row_kv) {
    for (int r = 0; r < a->R; r++) {
        int seq = r < P ? 0 : 1 + (r - P) % (a->S - 1);
        pos[r] = r < P ? r : (r * 7 + 3) % a->L;
        row_kv[r] = (size_t)seq * a->L * a->kvd;
    }
}

static void test_attention_reference(int n_heads, int n_kv, int hd) {
    static char names[4][128];
    static int k;
    char *name = names[k++ % 4];
    snprintf(name, sizeof names[0], "attention over bf16 and fp32 K/V (%d/%d heads x %d): prefill tiles and decode "
             "rows against float64", n_heads, n_kv, hd);
    TEST(name);
    enum { S = 4, L = 41, P = 20, R = 30 };
    attn_case a;
    case_init(&a, n_heads, n_kv, hd, S, L, R, 0x1234 + (uint64_t)hd);
    int pos[R];
    size_t row_kv[R];
    layout(&a, P, pos, row_kv);
    float *out = xcalloc((size_t)R * a.qd, sizeof(float)), *out32 = xcalloc((size_t)R * a.qd, sizeof(float));
    float *lse = xcalloc((size_t)R * n_heads, sizeof(float));
    double *ref = xcalloc((size_t)a.qd, sizeof(double)), *ref32 = xcalloc((size_t)a.qd, sizeof(double));
    kv_view kv = view_of(&a, row_kv, true), kv32 = view_of(&a, row_kv, false);
    attention_forward(out, lse, a.q, &kv, pos, R, a.sh, &a.ws);
    attention_forward(out32, NULL, a.q, &kv32, pos, R, a.sh, &a.ws);
    double worst = 0, worst32 = 0, worst_f32 = 0, bound_min = INFINITY;
    bool within = true, finite = true;
    int G = n_heads / n_kv;
    for (int r = 0; r < R; r++) {
        reference_row(&a, true, a.q + (size_t)r * a.qd, row_kv[r], pos[r], ref);
        reference_row(&a, false, a.q + (size_t)r * a.qd, row_kv[r], pos[r], ref32);
        for (int h = 0; h < n_heads; h++) {
            /* fp32 against float64 over the same bf16 values: a score sums hd
             * products in 16 lanes (hd/16 fused steps, then 4 adds), the
             * output T weighted values, each step off by 2^-24 relative:
             * with |q|,|k| <= 2 and |v| <= 1, under 1e-5 for hd <= 128,
             * T <= 41, exp and the sums of softmax_row included. */
            for (int i = 0; i < hd; i++) {
                double d = fabs(out[(size_t)r * a.qd + h * hd + i] - ref[h * hd + i]);
                double d32 = fabs(out32[(size_t)r * a.qd + h * hd + i] - ref32[h * hd + i]); /* the same bound */
                worst = fmax(worst, d), worst_f32 = fmax(worst_f32, d32);
                within = within && d <= 1e-5 && d32 <= 1e-5;
                finite = finite && isfinite(out[(size_t)r * a.qd + h * hd + i]);
            }
            /* against the fp32 cache: K and V are off by at most 2^-9
             * relative, so each score by eps_s <= scale 2^-9 sum|q||k|, the
             * softmax weights by a factor within e^(+-2 eps_s), and the
             * output by max|v| (2^-9 + 2 (e^(2 eps_s) - 1)); 1e-5 for the
             * fp32 arithmetic on top. */
            int g = h / G;
            double eps_s = 0;
            for (int t = 0; t <= pos[r]; t++) {
                double sum = 0;
                for (int i = 0; i < hd; i++)
                    sum += fabs(a.q[(size_t)r * a.qd + h * hd + i]) *
                           fabs(a.kf[row_kv[r] + (size_t)t * a.kvd + g * hd + i]);
                eps_s = fmax(eps_s, sum / sqrt((double)hd) * 0x1.0p-9);
            }
            double bound = 1.0 * (0x1.0p-9 + 2 * (exp(2 * eps_s) - 1)) + 1e-5;
            bound_min = fmin(bound_min, bound);
            for (int i = 0; i < hd; i++) {
                double d = fabs(out[(size_t)r * a.qd + h * hd + i] - out32[(size_t)r * a.qd + h * hd + i]);
                worst32 = fmax(worst32, d);
                within = within && d <= bound;
            }
        }
    }
    printf("# max |bf16 - float64| %.3g, max |fp32 - float64| %.3g, max |bf16 cache - fp32 cache| %.3g (smallest "
           "bound %.3g)\n", worst, worst_f32, worst32, bound_min);
    CHECK(within);
    CHECK(finite);
    CHECK(worst32 > 0); /* the cache really was rounded */
    free(out), free(out32), free(lse), free(ref), free(ref32);
    case_free(&a);
}

/* Bitwise equality of two float arrays (NaN payloads included). */
static bool same_bits(const float *x, const float *y, size_t n) { return memcmp(x, y, n * sizeof *x) == 0; }

static void test_simd_portable(void) {
    TEST("the SIMD kernels (bf16: AVX-512, AVX2; fp32: AVX2) give the portable kernels' bits (decode rows, tiles, "
         "every hd tail)");
    if (!attn_bf16_simd_supported()) {
        SKIP("this CPU has neither avx512f/bw/vl nor avx2 with fma: the portable kernels alone run");
        return;
    }
    const int shapes[][3] = {{4, 2, 8}, {4, 2, 12}, {9, 3, 64}, {6, 2, 40}, {4, 1, 128}, {8, 8, 16}, {2, 2, 20}};
    int bad = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        enum { S = 5, L = 70, P = 40, R = 60 };
        attn_case a;
        case_init(&a, shapes[s][0], shapes[s][1], shapes[s][2], S, L, R, 99 + s);
        int pos[R];
        size_t row_kv[R];
        layout(&a, P, pos, row_kv);
        size_t no = (size_t)R * a.qd, nl = (size_t)R * a.sh.n_heads;
        float *o1 = xcalloc(no, sizeof(float)), *o2 = xcalloc(no, sizeof(float));
        float *l1 = xcalloc(nl, sizeof(float)), *l2 = xcalloc(nl, sizeof(float));
        for (int bf16 = 0; bf16 < 2; bf16++) {
            kv_view kv = view_of(&a, row_kv, bf16);
            a.ws.portable_kernels = false;
            attention_forward(o1, l1, a.q, &kv, pos, R, a.sh, &a.ws);
            a.ws.portable_kernels = true;
            attention_forward(o2, l2, a.q, &kv, pos, R, a.sh, &a.ws);
            bad += !same_bits(o1, o2, no) || !same_bits(l1, l2, nl);
        }
        /* the kernels themselves, at every length 1..L: the tails of 16 keys (bf16) and of 4 (fp32) */
        int hd = a.sh.head_dim, G = a.sh.n_heads / a.sh.n_kv_heads;
        float *sc = xcalloc((size_t)G * L, sizeof(float));
        for (int kernel = ATTN_AVX2; kernel <= (int)attn_kernel_best(); kernel++) /* AVX2 runs where AVX-512 does */
            for (int T = 1; T <= L; T++) {
                attend_row_bf16(o1, l1, a.q, a.kb, a.vb, T, G, hd, a.kvd, 0.3f, sc, (attn_kernel)kernel);
                attend_row_bf16(o2, l2, a.q, a.kb, a.vb, T, G, hd, a.kvd, 0.3f, sc, ATTN_PORTABLE);
                bad += !same_bits(o1, o2, (size_t)G * hd) || !same_bits(l1, l2, (size_t)G);
                float *w1 = xcalloc((size_t)T * hd, sizeof(float)), *w2 = xcalloc((size_t)T * hd, sizeof(float));
                widen_rows_bf16(w1, a.kb, T, hd, a.kvd, (attn_kernel)kernel);
                widen_rows_bf16(w2, a.kb, T, hd, a.kvd, ATTN_PORTABLE);
                bad += !same_bits(w1, w2, (size_t)T * hd);
                free(w1), free(w2);
                attend_row_f32(o1, l1, a.q, a.kf, a.vf, T, G, hd, a.kvd, 0.3f, sc, (attn_kernel)kernel);
                attend_row_f32(o2, l2, a.q, a.kf, a.vf, T, G, hd, a.kvd, 0.3f, sc, ATTN_PORTABLE);
                bad += !same_bits(o1, o2, (size_t)G * hd) || !same_bits(l1, l2, (size_t)G);
            }
        free(sc), free(o1), free(o2), free(l1), free(l2);
        case_free(&a);
    }
    CHECK_EQ_INT(bad, 0);
}

static void test_row_independent(void) {
    TEST("a row's attention over a bf16 or fp32 view is the same bits alone, among other rows, and on 1 or all "
         "threads");
    enum { S = 6, L = 50, P = 24, R = 40 };
    attn_case a;
    case_init(&a, 9, 3, 64, S, L, R, 4242);
    int pos[R];
    size_t row_kv[R];
    layout(&a, P, pos, row_kv);
    size_t qd = (size_t)a.qd;
    float *all = xcalloc(R * qd, sizeof(float)), *one = xcalloc(R * qd, sizeof(float));
    int bad = 0;
    for (int mode = 0; mode < 4; mode++) {
        bool bf16 = mode & 1;
        kv_view kv = view_of(&a, row_kv, bf16);
        a.ws.portable_kernels = mode >> 1;
        attention_forward(all, NULL, a.q, &kv, pos, R, a.sh, &a.ws);
        /* each decode row alone, on one thread */
        int threads = a.ws.n_threads;
        a.ws.n_threads = 1;
        for (int r = P; r < R; r++) {
            kv_view alone = view_of(&a, row_kv + r, bf16);
            attention_forward(one + r * qd, NULL, a.q + r * qd, &alone, pos + r, 1, a.sh, &a.ws);
            bad += !same_bits(one + r * qd, all + r * qd, qd);
        }
        /* the prefill alone (its tiles are the same tiles), on one thread */
        attention_forward(one, NULL, a.q, &kv, pos, P, a.sh, &a.ws);
        bad += !same_bits(one, all, P * qd);
        a.ws.n_threads = threads;
        /* the decode rows in reverse order, with the prefill after them */
        int rpos[R];
        size_t rkv[R];
        float *rq = xcalloc(R * qd, sizeof(float)), *rout = xcalloc(R * qd, sizeof(float));
        for (int i = 0; i < R; i++) {
            int src = i < R - P ? R - 1 - i : i - (R - P);
            rpos[i] = pos[src], rkv[i] = row_kv[src];
            memcpy(rq + i * qd, a.q + src * qd, qd * sizeof(float));
        }
        kv_view rkvv = view_of(&a, rkv, bf16);
        attention_forward(rout, NULL, rq, &rkvv, rpos, R, a.sh, &a.ws);
        for (int i = 0; i < R; i++) {
            int src = i < R - P ? R - 1 - i : i - (R - P);
            bad += !same_bits(rout + i * qd, all + src * qd, qd);
        }
        free(rq), free(rout);
    }
    CHECK_EQ_INT(bad, 0);
    free(all), free(one);
    case_free(&a);
}

/* ---- the model's forward with a bf16 cache ------------------------------------- */

static double max_abs_diff(const float *x, const float *y, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)x[i] - y[i]);
        if (!(d <= m)) m = d; /* NaN propagates */
    }
    return m;
}

/* Prefill of T tokens into out[T, V] with a cache of fmt, then the same
 * tokens decoded one at a time in sequence 1: the largest difference of the
 * two into *decode_diff. */
static int forward_with(const model *m, kv_format fmt, const int32_t *tok, int T, float *out, double *decode_diff,
                        gerr *e) {
    int V = m->cfg.vocab_size, rc;
    kv_cache c;
    model_scratch s;
    if ((rc = kv_cache_init_as(&c, NULL, &m->cfg, 2, T, fmt, e))) return rc;
    if ((rc = model_scratch_init(&s, &m->cfg, T, T, e))) {
        kv_cache_free(&c);
        return rc;
    }
    int *seq = xcalloc((size_t)T, sizeof *seq), *pos = xcalloc((size_t)T, sizeof *pos);
    float *lg = xcalloc((size_t)V, sizeof *lg);
    for (int t = 0; t < T; t++) seq[t] = 0, pos[t] = t;
    model_forward(m, &c, T, seq, pos, tok, NULL, out, &s);
    *decode_diff = 0;
    for (int t = 0; t < T; t++) {
        int sq = 1;
        model_forward(m, &c, 1, &sq, &t, &tok[t], NULL, lg, &s);
        *decode_diff = fmax(*decode_diff, max_abs_diff(lg, out + (size_t)t * V, V));
    }
    free(seq), free(pos), free(lg);
    model_scratch_free(&s);
    kv_cache_free(&c);
    return 0;
}

static void test_model_forward(void) {
    TEST("a tiny random model: bf16 cache prefill and decode agree, and stay near the fp32 cache's logits");
    model m;
    memset(&m, 0, sizeof m);
    m.cfg = (model_config){.arch = ARCH_LLAMA, .dim = 64, .hidden_dim = 96, .n_layers = 2, .n_heads = 6,
                           .n_kv_heads = 2, .head_dim = 16, .vocab_size = 50, .max_seq_len = 64,
                           .rope_theta = 10000, .norm_eps = 1e-5f, .bos_id = -1, .pad_id = -1};
    gerr e = {0};
    if (model_alloc(&m, &e)) {
        CHECK(0);
        return;
    }
    uint64_t st = 0x9E3779B97F4A7C15ULL;
    for (size_t i = 0; i < m.n_params; i++) m.params_memory[i] = uni(&st, 0.5f);
    enum { T = 24, V = 50 };
    int32_t tok[T];
    for (int i = 0; i < T; i++) tok[i] = (i * 17 + 3) % V;
    float *o16 = xcalloc((size_t)T * V, sizeof(float)), *o32 = xcalloc((size_t)T * V, sizeof(float));
    double d16, d32;
    CHECK_EQ_INT(forward_with(&m, KV_BF16, tok, T, o16, &d16, &e), 0);
    CHECK_EQ_INT(forward_with(&m, KV_F32, tok, T, o32, &d32, &e), 0);
    /* the fp32 cache's prefill and decode differ by fp32 rounding alone
     * (test_model's 1e-5). With a bf16 cache that rounding reaches layer 1's
     * K and V, and where it straddles a bf16 rounding boundary the two paths
     * cache values one bf16 step (2^-8 relative) apart: a rare instance of
     * the bf16-against-fp32 difference bounded below, so the same bound */
    CHECK(d32 <= 1e-5);
    CHECK(d16 <= 0x1.0p-4);
    /* bf16 K/V perturb each layer's attention output by about 2^-8 of its
     * size (the op-level bound above); through 2 layers, the residual stream
     * and an LM head of 64 weights in [-0.5, 0.5) with unit-RMS inputs
     * (|logit| up to ~8) that is a few 2^-8 of the logits' scale: 2^-4
     * absolute leaves room and still catches a wrong kernel (differences
     * ~1 there) */
    double diff = max_abs_diff(o16, o32, (size_t)T * V), scale = 0;
    for (int i = 0; i < T * V; i++) scale = fmax(scale, fabs(o32[i]));
    printf("# logits: max |bf16 cache - fp32 cache| %.3g of max |logit| %.3g; decode vs prefill %.3g (fp32 %.3g)\n",
           diff, scale, d16, d32);
    CHECK(diff <= 0x1.0p-4);
    CHECK(diff > 0); /* the cache really was bf16 */
    free(o16), free(o32);
    model_free(&m);
}

int main(void) {
    test_write_rounds();
    test_cache_copies();
    test_attention_reference(4, 2, 8);
    test_attention_reference(9, 3, 64);
    test_attention_reference(6, 2, 40);
    test_attention_reference(4, 1, 128);
    test_simd_portable();
    test_row_independent();
    test_model_forward();
    return check_done();
}
