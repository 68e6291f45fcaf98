/* gpt-oss's attention options (ops.h's attn_shape): a sliding window and a
 * sink logit per head, forward (tiles and single rows) against attention
 * written out in double, and the backward (q, k, v and the sinks) against
 * central differences of that double attention. Tolerances: outputs and
 * log-sum-exps 2e-6 absolute (float32 of values near 1); gradients 1e-4
 * relative to the largest of their tensor. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ops/ops.h"
#include "util/rng.h"

enum { L = 21, NH = 4, NKV = 2, HD = 8, QD = NH * HD, KVD = NKV * HD };

static void fill(float *p, size_t n, double scale, uint64_t index) {
    rng_stream r;
    rng_init(&r, 35, "sink", 4, index);
    for (size_t i = 0; i < n; i++) p[i] = (float)(scale * (2 * rng_uniform(&r) - 1));
}

typedef struct {
    double q[L * QD], k[L * KVD], v[L * KVD], sinks[NH];
} dref;

/* sum_{r,h,i} c[r,h,i] out[r,h,i] in double; lse and out when not NULL. */
static double ref_loss(const dref *x, const float *c, int window, bool sinks, double *out, double *lse) {
    double loss = 0, scale = 1 / sqrt((double)HD);
    for (int r = 0; r < L; r++)
        for (int h = 0; h < NH; h++) {
            int g = h / (NH / NKV), lo = window && r >= window ? r - window + 1 : 0;
            double s[L], mx = sinks ? x->sinks[h] : -INFINITY, sum = 0;
            for (int t = lo; t <= r; t++) {
                s[t] = 0;
                for (int i = 0; i < HD; i++) s[t] += x->q[(r * NH + h) * HD + i] * x->k[t * KVD + g * HD + i];
                s[t] *= scale;
                mx = fmax(mx, s[t]);
            }
            for (int t = lo; t <= r; t++) sum += exp(s[t] - mx);
            if (sinks) sum += exp(x->sinks[h] - mx);
            if (lse) lse[r * NH + h] = mx + log(sum);
            for (int i = 0; i < HD; i++) {
                double o = 0;
                for (int t = lo; t <= r; t++) o += exp(s[t] - mx) / sum * x->v[t * KVD + g * HD + i];
                if (out) out[(r * NH + h) * HD + i] = o;
                loss += c[(r * NH + h) * HD + i] * o;
            }
        }
    return loss;
}

/* The largest |a - b| over n, relative to the largest |b| (at least 1e-3). */
static double rel_err(const float *a, const double *b, int n) {
    double err = 0, big = 1e-3;
    for (int i = 0; i < n; i++) err = fmax(err, fabs(a[i] - b[i])), big = fmax(big, fabs(b[i]));
    return err / big;
}

/* Central differences of ref_loss in each element of p[n] (a field of x). */
static void numeric(double *grad, dref *x, double *p, int n, const float *c, int window, bool sinks) {
    const double h = 1e-5;
    for (int i = 0; i < n; i++) {
        double keep = p[i];
        p[i] = keep + h;
        double up = ref_loss(x, c, window, sinks, NULL, NULL);
        p[i] = keep - h;
        double down = ref_loss(x, c, window, sinks, NULL, NULL);
        p[i] = keep;
        grad[i] = (up - down) / (2 * h);
    }
}

static void check_case(int window, bool with_sinks) {
    static float q[L * QD], k[L * KVD], v[L * KVD], sinks[NH], c[L * QD];
    static float out[L * QD], lse[L * NH], row_out[QD], row_lse[NH], dq[L * QD], dk[L * KVD], dv[L * KVD];
    static double dout_ref[L * QD], dlse_ref[L * NH], g[L * QD];
    static dref x;
    fill(q, L * QD, 1.5, 1), fill(k, L * KVD, 1.5, 2), fill(v, L * KVD, 1.0, 3), fill(sinks, NH, 2.0, 4);
    fill(c, L * QD, 1.0, 5);
    for (int i = 0; i < L * QD; i++) x.q[i] = q[i];
    for (int i = 0; i < L * KVD; i++) x.k[i] = k[i], x.v[i] = v[i];
    for (int i = 0; i < NH; i++) x.sinks[i] = sinks[i];
    attn_shape sh = {.n_heads = NH, .n_kv_heads = NKV, .head_dim = HD, .window = window,
                     .sinks = with_sinks ? sinks : NULL};
    size_t stride = attn_workspace_floats(sh, L);
    float *buf = malloc(stride * sizeof *buf);
    int *tasks = malloc((size_t)L * NKV * 3 * sizeof *tasks);
    CHECK(buf && tasks);
    if (!buf || !tasks) return;
    attn_workspace ws = {.buf = buf, .stride = stride, .n_threads = 1, .tasks = tasks};
    size_t row_kv[L] = {0};
    int pos[L], start[2] = {0, L};
    for (int r = 0; r < L; r++) pos[r] = r;
    kv_view kv = {.k = k, .v = v, .row_kv = row_kv, .kv_dim = KVD, .fmt = KV_F32};
    attention_forward(out, lse, q, &kv, pos, L, sh, &ws);
    ref_loss(&x, c, window, with_sinks, dout_ref, dlse_ref);
    double bad = 0;
    for (int i = 0; i < L * QD; i++) bad = fmax(bad, fabs(out[i] - dout_ref[i]));
    for (int i = 0; i < L * NH; i++) bad = fmax(bad, fabs(lse[i] - dlse_ref[i]));
    CHECK_NEAR(bad, 0, 2e-6);
    /* a decode row, alone (the row kernels), portable and SIMD */
    for (int portable = 0; portable < 2; portable++) {
        ws.portable_kernels = portable;
        double row_bad = 0;
        for (int r = 0; r < L; r += 4) {
            attention_forward(row_out, row_lse, q + (size_t)r * QD, &kv, pos + r, 1, sh, &ws);
            for (int i = 0; i < QD; i++) row_bad = fmax(row_bad, fabs(row_out[i] - dout_ref[r * QD + i]));
            for (int h = 0; h < NH; h++) row_bad = fmax(row_bad, fabs(row_lse[h] - dlse_ref[r * NH + h]));
        }
        CHECK_NEAR(row_bad, 0, 2e-6);
    }
    attention_backward(dq, dk, dv, c, out, lse, q, k, v, 1, start, sh, &ws);
    numeric(g, &x, x.q, L * QD, c, window, with_sinks);
    CHECK_NEAR(rel_err(dq, g, L * QD), 0, 1e-4);
    numeric(g, &x, x.k, L * KVD, c, window, with_sinks);
    CHECK_NEAR(rel_err(dk, g, L * KVD), 0, 1e-4);
    numeric(g, &x, x.v, L * KVD, c, window, with_sinks);
    CHECK_NEAR(rel_err(dv, g, L * KVD), 0, 1e-4);
    if (with_sinks) {
        float ds[NH] = {0};
        attention_sinks_backward(ds, out, c, lse, sinks, L, NH, HD);
        numeric(g, &x, x.sinks, NH, c, window, with_sinks);
        CHECK_NEAR(rel_err(ds, g, NH), 0, 1e-4);
    }
    free(buf);
    free(tasks);
}

int main(void) {
    TEST("attention with no window and no sinks matches double attention (forward, backward)");
    check_case(0, false);
    TEST("a sliding window of 5: each row sees its last 5 positions (forward, backward)");
    check_case(5, false);
    TEST("sinks: each head's logit takes probability mass, no value; its gradient matches");
    check_case(0, true);
    TEST("a window of 3 and sinks together (gpt-oss's sliding layers)");
    check_case(3, true);
    return check_done();
}
