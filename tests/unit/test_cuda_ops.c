/* The CUDA backend (lib/cuda) against the CPU ops of lib/ops, op by op on
 * fresh random inputs, then the whole inference forward on tiny random
 * models of each architecture, the mixtures of experts among them (their
 * ops alone: test_cuda_moe). Device outputs are poisoned (NaN) before each
 * op, so an element left unwritten fails. Tolerances are written beside
 * each check: fp32 kernels are held near fp32 rounding, products
 * with bf16 operands to a relative error of 1e-2 against fp32 and 1e-5
 * against a double reference on the same bf16-rounded operands.
 *
 * Without a CUDA build or a device every test reports a TAP skip ("no CUDA
 * device"), so a CPU-only run shows them as skipped, not passed. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "helpers.h"
#include "cuda/cuda.h"
#include "cuda_device.h"
#include "cuda_ops_util.h"
#include "model/layer.h"
#include "model/model.h"
#include "ops/ops.h"
#include "sample/sample.h"
#include "tiny_train.h"
#include "util/half.h"
#include "util/rng.h"

/* ---- element-wise and row ops ----------------------------------------------------- */

static void test_rmsnorm(void) {
    TEST("rmsnorm_forward on the device: out and 1/rms within 1e-6 of the CPU (fp32, sums in double both)");
    NEED_DEVICE();
    int n = 7, d = 576;
    float *x = fl((size_t)n * d), *w = fl(d), *out = fl((size_t)n * d), *rstd = fl(n);
    rnd(x, (size_t)n * d, 1, 3), rnd(w, d, 2, 1);
    rmsnorm_forward(out, rstd, x, w, n, d, 1e-5f);
    float *dx = dev(x, (size_t)n * d), *dw = dev(w, d), *dout = dev(NULL, (size_t)n * d), *drstd = dev(NULL, n);
    be->rmsnorm_forward(dout, drstd, dx, dw, n, d, 1e-5f);
    synced();
    float *g = host(dout, (size_t)n * d), *gr = host(drstd, n);
    CHECK(rel(g, out, (size_t)n * d) <= 1e-6);
    CHECK(rel(gr, rstd, n) <= 1e-6);
    FREE_DEV(dx, dw, dout, drstd);
    free(x), free(w), free(out), free(rstd), free(g), free(gr);
}

static void test_rope(void) {
    TEST("RoPE with llama3 scaling: cos/sin tables byte-equal to the CPU's, rotation within 1e-6");
    NEED_DEVICE();
    model_config c = {.head_dim = 64, .rope_theta = 500000, .rope_llama3 = true, .rope_factor = 8,
                      .rope_low_freq_factor = 1, .rope_high_freq_factor = 4, .rope_original_max_pos = 8192};
    int n = 9, nh = 5, hd = 64, half = hd / 2;
    float inv[32];
    rope_inv_freq(inv, &c);
    int pos[9] = {0, 1, 2, 17, 100, 1000, 4095, 8191, 30000};
    float *cs = fl((size_t)n * half), *sn = fl((size_t)n * half), *x = fl((size_t)n * nh * hd);
    rope_cos_sin(cs, sn, inv, half, pos, n);
    rnd(x, (size_t)n * nh * hd, 3, 2);
    float *dcs = dev(NULL, (size_t)n * half), *dsn = dev(NULL, (size_t)n * half), *dx = dev(x, (size_t)n * nh * hd);
    be->rope_cos_sin(dcs, dsn, inv, half, pos, n);
    be->rope_forward(dx, dcs, dsn, n, nh, hd);
    synced();
    rope_forward(x, cs, sn, n, nh, hd);
    float *gcs = host(dcs, (size_t)n * half), *gsn = host(dsn, (size_t)n * half), *gx = host(dx, (size_t)n * nh * hd);
    CHECK(memcmp(gcs, cs, (size_t)n * half * sizeof *cs) == 0);
    CHECK(memcmp(gsn, sn, (size_t)n * half * sizeof *sn) == 0);
    CHECK(rel(gx, x, (size_t)n * nh * hd) <= 1e-6);
    FREE_DEV(dcs, dsn, dx);
    free(cs), free(sn), free(x), free(gcs), free(gsn), free(gx);
}

static void test_elementwise(void) {
    TEST("swiglu within 1e-6 (expf against vec_expf); add_inplace and gather_rows byte-equal; backend_zero and "
         "backend_copy on the device");
    NEED_DEVICE();
    size_t n = 10007;
    int rows = 6, d = 96, V = 40;
    float *g = fl(n), *u = fl(n), *o = fl(n), *y = fl(n), *tab = fl((size_t)V * d), *gath = fl((size_t)rows * d);
    rnd(g, n, 4, 6), rnd(u, n, 5, 2), rnd(y, n, 6, 1), rnd(tab, (size_t)V * d, 7, 1);
    int32_t idx[6] = {39, 0, 7, 7, 12, 38};
    swiglu_forward(o, g, u, n);
    gather_rows(gath, tab, idx, rows, d);
    float *dg = dev(g, n), *du = dev(u, n), *dout = dev(NULL, n), *dy = dev(y, n), *dtab = dev(tab, (size_t)V * d);
    float *dgath = dev(NULL, (size_t)rows * d);
    be->swiglu_forward(dout, dg, du, n);
    be->add_inplace(dg, dy, n);
    be->gather_rows(dgath, dtab, idx, rows, d);
    /* the trainer's memset and memcpy: y's middle zeroed, then u's first half into y */
    float *dy2 = dev(y, n);
    backend_zero(be, dy2 + 100, 500 * sizeof(float));
    backend_copy(be, dy2, du, 50 * sizeof(float));
    synced();
    float *hy2 = host(dy2, n);
    memset(y + 100, 0, 500 * sizeof(float)); /* the same on the host (y drawn again below) */
    memcpy(y, u, 50 * sizeof(float));
    CHECK(memcmp(hy2, y, n * sizeof *y) == 0);
    free(hy2);
    be->mem_free(dy2);
    rnd(y, n, 6, 1); /* y as it was for add_inplace */
    add_inplace(g, y, n);
    float *ho = host(dout, n), *hg = host(dg, n), *hgath = host(dgath, (size_t)rows * d);
    CHECK(rel(ho, o, n) <= 1e-6);
    CHECK(memcmp(hg, g, n * sizeof *g) == 0);
    CHECK(memcmp(hgath, gath, (size_t)rows * d * sizeof *gath) == 0);
    FREE_DEV(dg, du, dout, dy, dtab, dgath);
    free(g), free(u), free(o), free(y), free(tab), free(gath), free(ho), free(hg), free(hgath);
}

/* ---- training's element-wise and row ops --------------------------------------------- */

static void test_train_rows(void) {
    TEST("rmsnorm_backward within 1e-6 (dw added to, sums in double), swiglu_backward within 1e-6, "
         "scatter_add_rows (repeated rows) byte-equal");
    NEED_DEVICE();
    int n = 7, d = 576, V = 30, m = 9;
    size_t nd = (size_t)n * d, ns = 10007;
    float *x = fl(nd), *w = fl(d), *dy = fl(nd), *rstd = fl(n), *y = fl(nd), *dx = fl(nd), *dw = fl(d);
    float *g = fl(ns), *u = fl(ns), *dh = fl(ns), *dg = fl(ns), *du = fl(ns), *tab = fl((size_t)V * d),
          *src = fl((size_t)m * d);
    rnd(x, nd, 11, 3), rnd(w, d, 12, 1), rnd(dy, nd, 13, 1), rnd(dw, d, 14, 1);
    rnd(g, ns, 15, 6), rnd(u, ns, 16, 2), rnd(dh, ns, 17, 1), rnd(tab, (size_t)V * d, 18, 1), rnd(src, (size_t)m * d, 19, 1);
    rmsnorm_forward(y, rstd, x, w, n, d, 1e-5f);
    int32_t idx[9] = {3, 29, 3, 0, 3, 17, 29, 5, 3};
    float *ddx = dev(NULL, nd), *ddw = dev(dw, d), *ddy = dev(dy, nd), *dxx = dev(x, nd), *dww = dev(w, d),
          *drs = dev(rstd, n), *ddg = dev(NULL, ns), *ddu = dev(NULL, ns), *ddh = dev(dh, ns), *dgg = dev(g, ns),
          *duu = dev(u, ns), *dtab = dev(tab, (size_t)V * d), *dsrc = dev(src, (size_t)m * d);
    be->rmsnorm_backward(ddx, ddw, ddy, dxx, dww, drs, n, d);
    be->swiglu_backward(ddg, ddu, ddh, dgg, duu, ns);
    be->scatter_add_rows(dtab, dsrc, idx, m, d);
    synced();
    rmsnorm_backward(dx, dw, dy, x, w, rstd, n, d);
    swiglu_backward(dg, du, dh, g, u, ns);
    scatter_add_rows(tab, src, idx, m, d);
    float *hdx = host(ddx, nd), *hdw = host(ddw, d), *hdg = host(ddg, ns), *hdu = host(ddu, ns),
          *htab = host(dtab, (size_t)V * d);
    CHECK(rel(hdx, dx, nd) <= 1e-6);
    CHECK(rel(hdw, dw, d) <= 1e-6);
    CHECK(rel(hdg, dg, ns) <= 1e-6);
    CHECK(rel(hdu, du, ns) <= 1e-6);
    CHECK(memcmp(htab, tab, (size_t)V * d * sizeof *tab) == 0);
    FREE_DEV(ddx, ddw, ddy, dxx, dww, drs, ddg, ddu, ddh, dgg, duu, dtab, dsrc);
    free(x), free(w), free(dy), free(rstd), free(y), free(dx), free(dw), free(g), free(u), free(dh), free(dg), free(du);
    free(tab), free(src), free(hdx), free(hdw), free(hdg), free(hdu), free(htab);
}

static void test_optimizer(void) {
    TEST("adamw_update (with decay, two steps) and sgd_update on the device: the CPU's bits");
    NEED_DEVICE();
    size_t n = 100003;
    float *p = fl(n), *gr = fl(n), *m1 = fl(n), *v1 = fl(n), *q = fl(n);
    rnd(p, n, 21, 1), rnd(gr, n, 22, 1e-3f), rnd(q, n, 23, 1);
    for (size_t i = 0; i < n; i++) m1[i] = v1[i] = 0;
    gr[0] = 0, gr[1] = 1e-9f, gr[2] = -1e-20f; /* the eps-sized and zero gradients of a first step */
    float *dp = dev(p, n), *dgr = dev(gr, n), *dm = dev(m1, n), *dv = dev(v1, n), *dq = dev(q, n);
    for (int step = 1; step <= 2; step++) {
        double lr = 1e-3, b1 = 0.9, b2 = 0.999;
        adamw_consts k = {.keep = (float)(1 - lr * 0.01), .beta1 = (float)b1, .one_minus_beta1 = (float)(1 - b1),
                          .beta2 = (float)b2, .one_minus_beta2 = (float)(1 - b2),
                          .neg_step = (float)(-lr / (1 - pow(b1, step))), .bias2_sqrt = (float)sqrt(1 - pow(b2, step)),
                          .eps = 1e-8f};
        be->adamw_update(&k, dp, dgr, dm, dv, n);
        adamw_update(&k, p, gr, m1, v1, n);
    }
    be->sgd_update(0.999f, -0.01f, dq, dgr, n);
    sgd_update(0.999f, -0.01f, q, gr, n);
    synced();
    float *hp = host(dp, n), *hm = host(dm, n), *hv = host(dv, n), *hq = host(dq, n);
    CHECK(memcmp(hp, p, n * sizeof *p) == 0);
    CHECK(memcmp(hm, m1, n * sizeof *m1) == 0);
    CHECK(memcmp(hv, v1, n * sizeof *v1) == 0);
    CHECK(memcmp(hq, q, n * sizeof *q) == 0);
    FREE_DEV(dp, dgr, dm, dv, dq);
    free(p), free(gr), free(m1), free(v1), free(q), free(hp), free(hm), free(hv), free(hq);
}

/* ---- the gradient norm, clipping and weight refresh (a device trainer's) ------------ */

/* sum of x[i]^2 in double, compensated (Neumaier): a reference well inside
 * the 1e-12 the device's order is held to */
static double host_sum_squares(const float *x, size_t n) {
    double s = 0, c = 0;
    for (size_t i = 0; i < n; i++) {
        double v = (double)x[i] * x[i], t = s + v;
        c += fabs(s) >= fabs(v) ? (s - t) + v : (v - t) + s;
        s = t;
    }
    return s + c;
}

static void test_sum_squares(void) {
    TEST("sum_squares: within 1e-12 of a host double sum (n = 0, 1, 1000, 5000003), the same bits twice with "
         "other ops between, ordered after the ops before it");
    NEED_DEVICE();
    const size_t sizes[] = {0, 1, 1000, 5000003};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        size_t n = sizes[k];
        float *x = fl(n), *y = fl(1000);
        rnd(x, n, 31 + k, 3), rnd(y, 1000, 41, 1);
        double ref = host_sum_squares(x, n);
        float *dx = dev(x, n), *dy = dev(y, 1000);
        double s1 = be->sum_squares(dx, n);
        be->scale_inplace(dy, 0.5f, 1000); /* other work on the stream between the two */
        be->add_inplace(dy, dy, 1000);
        double s2 = be->sum_squares(dx, n);
        /* a scale by 2 just before it (exact: the sum becomes 4 times s1's) */
        be->scale_inplace(dx, 2.0f, n);
        double s4 = be->sum_squares(dx, n);
        synced();
        if (n == 0) {
            CHECK(s1 == 0 && s2 == 0 && s4 == 0);
        } else {
            if (!(fabs(s1 - ref) <= 1e-12 * ref)) printf("#   n = %zu: %.17g vs %.17g\n", n, s1, ref);
            CHECK(fabs(s1 - ref) <= 1e-12 * ref);
            CHECK(s4 == 4 * s1);
        }
        CHECK(memcmp(&s1, &s2, sizeof s1) == 0);
        FREE_DEV(dx, dy);
        free(x), free(y);
    }
}

static void test_scale_inplace(void) {
    TEST("scale_inplace: the CPU's products (g[j] *= f), bit for bit, subnormals and zeros included");
    NEED_DEVICE();
    size_t n = 100003;
    float *x = fl(n), f = 0.3719f;
    rnd(x, n, 51, 2);
    x[0] = 0, x[1] = -0.0f, x[2] = 1e-38f, x[3] = -3e-39f, x[4] = 3e38f, x[5] = 1e-45f;
    float *dx = dev(x, n);
    for (size_t i = 0; i < n; i++) x[i] *= f;
    be->scale_inplace(dx, f, n);
    synced();
    float *h = host(dx, n);
    CHECK(memcmp(h, x, n * sizeof *x) == 0);
    FREE_DEV(dx);
    free(x), free(h);
}

static void test_weight_refresh(void) {
    TEST("weight_refresh from device fp32 rows: the bf16 bytes weight_upload makes of them (half.c's rounding), "
         "and a matmul_forward through it the bytes of one through a fresh upload");
    NEED_DEVICE();
    int rows = 1536, cols = 576, n = 5;
    size_t count = (size_t)rows * cols;
    float *w0 = fl(count), *w1 = fl(count), *x = fl((size_t)n * cols);
    rnd(w0, count, 61, 0.05f), rnd(w1, count, 62, 0.05f), rnd(x, (size_t)n * cols, 63, 2);
    gerr e = {0};
    float *ha = NULL, *hb = NULL;
    CHECK_EQ_INT(be->weight_upload(&ha, w0, rows, cols, &e), 0); /* old data, then refreshed */
    CHECK_EQ_INT(be->weight_upload(&hb, w1, rows, cols, &e), 0);
    float *dw1 = dev(w1, count), *dx = dev(x, (size_t)n * cols), *ya = dev(NULL, (size_t)n * rows),
          *yb = dev(NULL, (size_t)n * rows);
    if (ha && hb) {
        be->weight_refresh(ha, dw1, rows, cols);
        be->matmul_forward(ya, dx, ha, NULL, n, cols, rows);
        be->matmul_forward(yb, dx, hb, NULL, n, cols, rows);
    }
    synced();
    uint16_t *ba = malloc(count * sizeof *ba), *bb = malloc(count * sizeof *bb), *ref = malloc(count * sizeof *ref);
    if (!ba || !bb || !ref) abort();
    memset(ba, 0xff, count * sizeof *ba), memset(bb, 0, count * sizeof *bb);
    if (ha && hb && (be->mem_download(ba, ha, count * sizeof *ba, &e) || be->mem_download(bb, hb, count * sizeof *bb, &e))) {
        printf("#   download: %s\n", e.msg);
        CHECK(0);
    }
    f32_to_bf16_array(w1, ref, count);
    CHECK(memcmp(ba, bb, count * sizeof *ba) == 0);
    CHECK(memcmp(ba, ref, count * sizeof *ba) == 0);
    float *ga = host(ya, (size_t)n * rows), *gb = host(yb, (size_t)n * rows);
    CHECK(memcmp(ga, gb, (size_t)n * rows * sizeof *ga) == 0);
    CHECK(!isnan(ga[0]));
    FREE_DEV(ha, hb, dw1, dx, ya, yb);
    free(w0), free(w1), free(x), free(ba), free(bb), free(ref), free(ga), free(gb);
}

/* ---- attention ------------------------------------------------------------------------ */

/* With bf16, the cache holds bf16 (KV_BF16) on both sides: kv_write must
 * round as half.c does, and attention widen exactly. */
static void test_attention(bool bf16) {
    TEST(bf16 ? "bf16 KV cache: kv_write byte-equal (rounded as half.c), attention within 1e-5 of the CPU's over the "
                "same bf16 cache, lse 1e-4; a prefill row alone gives the bytes it gave in its tile"
              : "kv_write byte-equal; causal GQA attention (prefill tiles and decode rows mixed) within 1e-5, lse 1e-4; "
                "a prefill row alone gives the bytes it gave in its tile");
    NEED_DEVICE();
    attn_shape sh = {.n_heads = 6, .n_kv_heads = 2, .head_dim = 64};
    const int S = 3, L = 80, kvd = 2 * 64, qd = 6 * 64, P = 40, R = P + 2;
    size_t cache_n = (size_t)S * L * kvd;
    /* the cache as floats: cache_n of them, or cache_n bf16 in the first half */
    size_t cache_f = bf16 ? cache_n / 2 : cache_n;
    float *kc = fl(cache_n), *vc = fl(cache_n), *k = fl((size_t)R * kvd), *v = fl((size_t)R * kvd);
    float *q = fl((size_t)R * qd), *out = fl((size_t)R * qd), *lse = fl((size_t)R * 6);
    rnd(kc, cache_n, 8, 1), rnd(vc, cache_n, 9, 1), rnd(k, (size_t)R * kvd, 10, 1), rnd(v, (size_t)R * kvd, 11, 1);
    rnd(q, (size_t)R * qd, 12, 2);
    if (bf16) { /* the caches' bf16 bits into the front of their buffers */
        uint16_t *tmp = malloc(cache_n * sizeof *tmp);
        CHECK(tmp != NULL);
        f32_to_bf16_array(kc, tmp, cache_n), memcpy(kc, tmp, cache_n * sizeof *tmp);
        f32_to_bf16_array(vc, tmp, cache_n), memcpy(vc, tmp, cache_n * sizeof *tmp);
        free(tmp);
    }
    kv_format fmt = bf16 ? KV_BF16 : KV_F32;
    /* a prefill of sequence 0 (positions 0..P-1), a decode row of sequence 1
     * at the cache's last position, one of sequence 2 at position 5 */
    int pos[42], seq[42];
    size_t row_kv[42];
    for (int r = 0; r < P; r++) seq[r] = 0, pos[r] = r;
    seq[P] = 1, pos[P] = L - 1, seq[P + 1] = 2, pos[P + 1] = 5;
    for (int r = 0; r < R; r++) row_kv[r] = (size_t)seq[r] * L * kvd;
    float *dkc = dev(kc, cache_f), *dvc = dev(vc, cache_f), *dk = dev(k, (size_t)R * kvd), *dv = dev(v, (size_t)R * kvd);
    float *dq = dev(q, (size_t)R * qd), *dout = dev(NULL, (size_t)R * qd), *dlse = dev(NULL, (size_t)R * 6);
    kv_view hv = {.k = kc, .v = vc, .row_kv = row_kv, .kv_dim = kvd, .fmt = fmt};
    kv_view dvv = {.k = dkc, .v = dvc, .row_kv = row_kv, .kv_dim = kvd, .fmt = fmt};
    be->kv_write(&dvv, dk, dv, pos, R);
    be->attention_forward(dout, dlse, dq, &dvv, pos, R, sh, NULL);
    /* prefill rows alone (the one-row kernel) must match them in their tiles */
    const int alone[4] = {0, 7, 8, P - 1};
    float *dout1 = dev(NULL, (size_t)4 * qd);
    for (int i = 0; i < 4; i++) {
        kv_view one = {.k = dkc, .v = dvc, .row_kv = row_kv + alone[i], .kv_dim = kvd, .fmt = fmt};
        be->attention_forward(dout1 + (size_t)i * qd, NULL, dq + (size_t)alone[i] * qd, &one, pos + alone[i], 1, sh,
                              NULL);
    }
    synced();
    int threads = omp_get_max_threads();
    attn_workspace ws = {.stride = attn_workspace_floats(sh, L), .n_threads = threads};
    ws.buf = fl(ws.stride * threads);
    ws.tasks = malloc((size_t)R * sh.n_kv_heads * 3 * sizeof *ws.tasks);
    kv_write(&hv, k, v, pos, R);
    attention_forward(out, lse, q, &hv, pos, R, sh, &ws);
    float *gkc = host(dkc, cache_f), *gvc = host(dvc, cache_f), *go = host(dout, (size_t)R * qd);
    float *gl = host(dlse, (size_t)R * 6);
    CHECK(memcmp(gkc, kc, cache_f * sizeof *kc) == 0);
    CHECK(memcmp(gvc, vc, cache_f * sizeof *vc) == 0);
    CHECK(rel(go, out, (size_t)R * qd) <= 1e-5);
    float *g1 = host(dout1, (size_t)4 * qd);
    for (int i = 0; i < 4; i++) CHECK(memcmp(g1 + (size_t)i * qd, go + (size_t)alone[i] * qd, qd * sizeof *g1) == 0);
    free(g1);
    double worst = 0;
    for (int i = 0; i < R * 6; i++) worst = fmax(worst, isnan(gl[i]) ? INFINITY : fabs((double)gl[i] - lse[i]));
    CHECK(worst <= 1e-4);
    FREE_DEV(dkc, dvc, dk, dv, dq, dout, dlse, dout1);
    free(kc), free(vc), free(k), free(v), free(q), free(out), free(lse), free(ws.buf), free(ws.tasks);
    free(gkc), free(gvc), free(go), free(gl);
}

/* Training's attention backward over a batch's own K/V, against the CPU's
 * (fp32 both, other summation orders: 1e-4), the same bytes twice. */
static void test_attention_backward(void) {
    TEST("attention_backward over a batch's own K/V: dq, dk, dv within 1e-4 of the CPU's; the same bytes twice");
    NEED_DEVICE();
    attn_shape sh = {.n_heads = 6, .n_kv_heads = 2, .head_dim = 64};
    const int kvd = 2 * 64, qd = 6 * 64, start[3] = {0, 13, 42}, R = 42;
    float *q = fl((size_t)R * qd), *k = fl((size_t)R * kvd), *v = fl((size_t)R * kvd), *dout = fl((size_t)R * qd);
    float *out = fl((size_t)R * qd), *lse = fl((size_t)R * 6);
    float *dq = fl((size_t)R * qd), *dk = fl((size_t)R * kvd), *dv = fl((size_t)R * kvd);
    rnd(q, (size_t)R * qd, 51, 1), rnd(k, (size_t)R * kvd, 52, 1), rnd(v, (size_t)R * kvd, 53, 1);
    rnd(dout, (size_t)R * qd, 54, 1);
    cpu_attention_batch(out, lse, dq, dk, dv, q, k, v, dout, 2, start, sh);
    float *d_q = dev(q, (size_t)R * qd), *d_k = dev(k, (size_t)R * kvd), *d_v = dev(v, (size_t)R * kvd);
    float *d_out = dev(out, (size_t)R * qd), *d_lse = dev(lse, (size_t)R * 6), *d_do = dev(dout, (size_t)R * qd);
    float *g[2][3];
    for (int run = 0; run < 2; run++) {
        float *ddq = dev(NULL, (size_t)R * qd), *ddk = dev(NULL, (size_t)R * kvd), *ddv = dev(NULL, (size_t)R * kvd);
        be->attention_backward(ddq, ddk, ddv, d_do, d_out, d_lse, d_q, d_k, d_v, 2, start, sh, NULL);
        synced();
        g[run][0] = host(ddq, (size_t)R * qd), g[run][1] = host(ddk, (size_t)R * kvd), g[run][2] = host(ddv, (size_t)R * kvd);
        FREE_DEV(ddq, ddk, ddv);
    }
    CHECK(rel(g[0][0], dq, (size_t)R * qd) <= 1e-4);
    CHECK(rel(g[0][1], dk, (size_t)R * kvd) <= 1e-4);
    CHECK(rel(g[0][2], dv, (size_t)R * kvd) <= 1e-4);
    CHECK(memcmp(g[0][0], g[1][0], (size_t)R * qd * sizeof(float)) == 0);
    CHECK(memcmp(g[0][1], g[1][1], (size_t)R * kvd * sizeof(float)) == 0);
    CHECK(memcmp(g[0][2], g[1][2], (size_t)R * kvd * sizeof(float)) == 0);
    FREE_DEV(d_q, d_k, d_v, d_out, d_lse, d_do);
    for (int run = 0; run < 2; run++) free(g[run][0]), free(g[run][1]), free(g[run][2]);
    free(q), free(k), free(v), free(dout), free(out), free(lse), free(dq), free(dk), free(dv);
}

/* ---- products ----------------------------------------------------------------------- */

static void test_matmul_bf16(void) {
    TEST("matmul_forward with bf16 weights: 1e-5 of a double product of the bf16 operands, 1e-2 of fp32; "
         "a row's result the same bytes alone or among others");
    NEED_DEVICE();
    int n = 5, in = 576, out = 1536;
    float *x = fl((size_t)n * in), *w = fl((size_t)out * in), *b = fl(out), *y = fl((size_t)n * out);
    float *ref = fl((size_t)n * out);
    rnd(x, (size_t)n * in, 13, 2), rnd(w, (size_t)out * in, 14, 0.05f), rnd(b, out, 15, 1);
    matmul_forward(y, x, w, b, n, in, out);
    for (int r = 0; r < n; r++)
        for (int o = 0; o < out; o++) {
            double s = b[o];
            for (int i = 0; i < in; i++)
                s += (double)bf16_to_f32(f32_to_bf16(x[(size_t)r * in + i])) *
                     bf16_to_f32(f32_to_bf16(w[(size_t)o * in + i]));
            ref[(size_t)r * out + o] = (float)s;
        }
    gerr e = {0};
    float *dw = NULL;
    CHECK_EQ_INT(be->weight_upload(&dw, w, out, in, &e), 0);
    float *dx = dev(x, (size_t)n * in), *db = dev(b, out), *dy = dev(NULL, (size_t)n * out),
          *dy1 = dev(NULL, out);
    if (dw) {
        be->matmul_forward(dy, dx, dw, db, n, in, out);
        be->matmul_forward(dy1, dx + (size_t)2 * in, dw, db, 1, in, out); /* row 2 alone */
    }
    synced();
    float *g = host(dy, (size_t)n * out), *g1 = host(dy1, out);
    CHECK(rel(g, ref, (size_t)n * out) <= 1e-5);
    CHECK(rel(g, y, (size_t)n * out) <= 1e-2);
    CHECK(memcmp(g1, g + (size_t)2 * out, out * sizeof *g1) == 0);
    FREE_DEV(dw, dx, db, dy, dy1);
    free(x), free(w), free(b), free(y), free(ref), free(g), free(g1);
}

static double bf(float x) { return bf16_to_f32(f32_to_bf16(x)); }

/* LoRA's dropout: the CPU's mask and scale, bit for bit (n not a multiple of
 * 4: the last Philox block is partly used). */
static void test_dropout_rows(void) {
    TEST("dropout_rows on the device: the CPU's bits (keyed mask, 1/(1-p) scale)");
    NEED_DEVICE();
    int rows = 9, n = 203;
    float *x = fl((size_t)rows * n);
    rnd(x, (size_t)rows * n, 41, 1);
    uint64_t key[9];
    int pos[9];
    for (int r = 0; r < rows; r++) key[r] = 0x9e3779b97f4a7c15ull * (uint64_t)(r + 1), pos[r] = 3 * r + 1;
    const uint32_t sk[2] = {0x12345678u, 0x9abcdef0u};
    float *dx = dev(x, (size_t)rows * n);
    be->dropout_rows(dx, rows, n, key, pos, sk, 0.1);
    synced();
    dropout_rows(x, rows, n, key, pos, sk, 0.1);
    float *g = host(dx, (size_t)rows * n);
    CHECK(memcmp(g, x, (size_t)rows * n * sizeof *g) == 0);
    int zeros = 0;
    for (int i = 0; i < rows * n; i++) zeros += g[i] == 0.0f;
    CHECK(zeros > rows * n / 20 && zeros < rows * n / 5); /* about 10% dropped */
    FREE_DEV(dx);
    free(x), free(g);
}

/* Training's matmul backward: din and dw through bf16 operands with fp32
 * sums (checked against double products of the same bf16 values), din
 * replaced or added to, dw added to; db the CPU's column sums bit for bit. */
static void test_matmul_backward_bf16(void) {
    TEST("matmul_backward with bf16 operands: din (= and +=) and dw (+=) within 1e-5 of double products of the bf16 "
         "operands, 1e-2 of fp32; db the CPU's bits");
    NEED_DEVICE();
    int n = 37, in = 576, out = 1536; /* n odd: no alignment of the rows to lean on */
    float *x = fl((size_t)n * in), *w = fl((size_t)out * in), *dy = fl((size_t)n * out);
    float *dx0 = fl((size_t)n * in), *dw0 = fl((size_t)out * in), *db0 = fl(out);
    rnd(x, (size_t)n * in, 31, 2), rnd(w, (size_t)out * in, 32, 0.05f), rnd(dy, (size_t)n * out, 33, 1);
    rnd(dx0, (size_t)n * in, 34, 1), rnd(dw0, (size_t)out * in, 35, 1), rnd(db0, out, 36, 1);
    /* references in double from the bf16-rounded operands */
    float *rdx = fl((size_t)n * in), *rdw = fl((size_t)out * in);
    for (int r = 0; r < n; r++)
        for (int i = 0; i < in; i++) {
            double s = dx0[(size_t)r * in + i];
            for (int o = 0; o < out; o++) s += bf(dy[(size_t)r * out + o]) * bf(w[(size_t)o * in + i]);
            rdx[(size_t)r * in + i] = (float)s;
        }
    for (int o = 0; o < out; o++)
        for (int i = 0; i < in; i++) {
            double s = dw0[(size_t)o * in + i];
            for (int r = 0; r < n; r++) s += bf(dy[(size_t)r * out + o]) * bf(x[(size_t)r * in + i]);
            rdw[(size_t)o * in + i] = (float)s;
        }
    /* the CPU's fp32 backward, for the looser check and db's bits */
    float *cdx = fl((size_t)n * in), *cdw = fl((size_t)out * in), *cdb = fl(out);
    memcpy(cdx, dx0, (size_t)n * in * sizeof *cdx), memcpy(cdw, dw0, (size_t)out * in * sizeof *cdw);
    memcpy(cdb, db0, out * sizeof *cdb);
    matmul_backward(cdx, cdw, cdb, dy, x, w, n, in, out, true);
    gerr e = {0};
    float *dw16 = NULL;
    CHECK_EQ_INT(be->weight_upload(&dw16, w, out, in, &e), 0);
    float *ddy = dev(dy, (size_t)n * out), *dx_ = dev(x, (size_t)n * in), *ddx = dev(dx0, (size_t)n * in);
    float *ddx2 = dev(dx0, (size_t)n * in), *ddw = dev(dw0, (size_t)out * in), *ddb = dev(db0, out);
    if (dw16) {
        be->matmul_backward(ddx, ddw, ddb, ddy, dx_, dw16, n, in, out, true);
        be->matmul_backward(ddx2, NULL, NULL, ddy, dx_, dw16, n, in, out, false); /* replaces */
    }
    synced();
    float *gdx = host(ddx, (size_t)n * in), *gdx2 = host(ddx2, (size_t)n * in), *gdw = host(ddw, (size_t)out * in);
    float *gdb = host(ddb, out);
    CHECK(rel(gdx, rdx, (size_t)n * in) <= 1e-5);
    CHECK(rel(gdx, cdx, (size_t)n * in) <= 1e-2);
    CHECK(rel(gdw, rdw, (size_t)out * in) <= 1e-5);
    CHECK(rel(gdw, cdw, (size_t)out * in) <= 1e-2);
    CHECK(memcmp(gdb, cdb, out * sizeof *gdb) == 0);
    for (size_t i = 0; i < (size_t)n * in; i++) rdx[i] -= dx0[i]; /* without the initial din */
    CHECK(rel(gdx2, rdx, (size_t)n * in) <= 1e-4);
    FREE_DEV(dw16, ddy, dx_, ddx, ddx2, ddw, ddb);
    free(x), free(w), free(dy), free(dx0), free(dw0), free(db0), free(rdx), free(rdw), free(cdx), free(cdw), free(cdb);
    free(gdx), free(gdx2), free(gdw), free(gdb);
}

static void test_gemm(void) {
    TEST("gemm in fp32 (cublasSgemm), every transpose: within 1e-5 of the CPU's");
    NEED_DEVICE();
    const int M = 7, N = 9, K = 33;
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        int lda = ta ? M : K, ldb = tb ? K : N;
        float *A = fl((size_t)M * K), *B = fl((size_t)K * N), *C = fl((size_t)M * N);
        rnd(A, (size_t)M * K, 16 + t, 1), rnd(B, (size_t)K * N, 20 + t, 1), rnd(C, (size_t)M * N, 24 + t, 1);
        float *dA = dev(A, (size_t)M * K), *dB = dev(B, (size_t)K * N), *dC = dev(C, (size_t)M * N);
        be->gemm(ta, tb, M, N, K, 0.5f, dA, lda, dB, ldb, 0.25f, dC, N);
        synced();
        gemm(ta, tb, M, N, K, 0.5f, A, lda, B, ldb, 0.25f, C, N);
        float *g = host(dC, (size_t)M * N);
        CHECK(rel(g, C, (size_t)M * N) <= 1e-5);
        FREE_DEV(dA, dB, dC);
        free(A), free(B), free(C), free(g);
    }
}

static void test_head(void) {
    TEST("head_logsoftmax: scaled logits byte-equal, log-prob, entropy and lse within 1e-4 (V = 49152)");
    NEED_DEVICE();
    int n = 3, V = 49152;
    float inv_t = (float)(1.0 / 0.7), *z = fl((size_t)n * V), lp[3], en[3], ls[3];
    rnd(z, (size_t)n * V, 28, 8);
    int32_t tok[3] = {0, 12345, V - 1};
    float *dz = dev(z, (size_t)n * V), *dlp = dev(NULL, 3), *den = dev(NULL, 3), *dls = dev(NULL, 3);
    be->head_logsoftmax(dz, n, V, inv_t, tok, dlp, den, dls);
    synced();
    head_logsoftmax(z, n, V, inv_t, tok, lp, en, ls);
    float *gz = host(dz, (size_t)n * V), *glp = host(dlp, 3), *gen = host(den, 3), *gls = host(dls, 3);
    CHECK(memcmp(gz, z, (size_t)n * V * sizeof *z) == 0);
    for (int j = 0; j < n; j++) {
        CHECK_NEAR(glp[j], lp[j], 1e-4);
        CHECK_NEAR(gen[j], en[j], 1e-4);
        CHECK_NEAR(gls[j], ls[j], 1e-4);
    }
    FREE_DEV(dz, dlp, den, dls);
    free(z), free(gz), free(glp), free(gen), free(gls);
}

/* ---- random numbers and sampling ------------------------------------------------------ */

static void test_head_backward(void) {
    TEST("head_logsoftmax_backward, with and without the entropy term (one row each, one row with dentropy 0): "
         "within 1e-5 of the CPU (V = 49152)");
    NEED_DEVICE();
    int n = 3, V = 49152;
    float inv_t = (float)(1.0 / 0.7), *z = fl((size_t)n * V), lp[3], en[3], ls[3];
    rnd(z, (size_t)n * V, 31, 8);
    int32_t tok[3] = {7, 40000, V - 1};
    head_logsoftmax(z, n, V, inv_t, tok, lp, en, ls); /* z: the scaled logits the backward starts from */
    float dlogp[3] = {-0.25f, 1.5f, 0.125f}, dent[3] = {0.0f, -0.03f, 0.2f};
    float *dz = dev(z, (size_t)n * V), *ddl = dev(dlogp, 3), *dls = dev(ls, 3), *dde = dev(dent, 3),
          *den = dev(en, 3);
    be->head_logsoftmax_backward(dz, n, V, inv_t, tok, ddl, dls, dde, den);
    synced();
    head_logsoftmax_backward(z, n, V, inv_t, tok, dlogp, ls, dent, en);
    float *gz = host(dz, (size_t)n * V);
    for (int j = 0; j < n; j++) CHECK(rel(gz + (size_t)j * V, z + (size_t)j * V, V) <= 1e-5);
    FREE_DEV(dz, ddl, dls, dde, den);
    free(z), free(gz);
}

static void test_philox(void) {
    TEST("Philox4x32-10 on the device: every word equal to lib/util/rng.c's");
    NEED_DEVICE();
    enum { N = 64 };
    uint32_t ctr[4 * N], key[2 * N], out[4 * N], ref[4 * N];
    rng_stream r;
    rng_init(&r, 42, "philox", 6, 0);
    for (int i = 0; i < 4 * N; i++) ctr[i] = rng_u32(&r);
    for (int i = 0; i < 2 * N; i++) key[i] = rng_u32(&r);
    ctr[0] = ctr[1] = ctr[2] = ctr[3] = 0; /* the first block of a stream */
    for (int i = 0; i < N; i++) philox4x32_10(ctr + 4 * i, key + 2 * i, ref + 4 * i);
    gerr e = {0};
    CHECK_EQ_INT(cuda_philox(out, ctr, key, N, &e), 0);
    CHECK(memcmp(out, ref, sizeof ref) == 0);
}

static void test_sample(double temperature, const char *name) {
    TEST(name);
    NEED_DEVICE();
    enum { N = 64, V = 1000 };
    float *lg = fl((size_t)N * V);
    rnd(lg, (size_t)N * V, 29, 4);
    lg[(size_t)(N - 1) * V + 3] = NAN; /* a broken row: token -1 on both, which rollout reports */
    sampler smp;
    sampler_init(&smp, V);
    sample_opts opt = {.temperature = temperature, .top_k = 0, .top_p = 1, .min_p = 0};
    rng_stream cpu[N], gpu[N], *gp[N];
    int32_t want[N], got[N];
    float want_lp[N], got_lp[N];
    for (int j = 0; j < N; j++) {
        rng_init(&cpu[j], 7, "sample", 6, (uint64_t)j);
        for (int k = 0; k < j % 5; k++) (void)rng_u32(&cpu[j]); /* streams part-way through a block */
        gpu[j] = cpu[j];
        gp[j] = &gpu[j];
        want[j] = sample_token(&smp, lg + (size_t)j * V, &opt, &cpu[j], &want_lp[j]);
    }
    float *d = dev(lg, (size_t)N * V);
    gerr e = {0};
    CHECK_EQ_INT(cuda_sample_plain(d, N, V, temperature, gp, got, got_lp, &e), 0);
    CHECK_EQ_INT(want[N - 1], -1);
    CHECK_EQ_INT(got[N - 1], -1);
    for (int j = 0; j < N - 1; j++) {
        CHECK_EQ_INT(got[j], want[j]); /* the same draw: only a draw within rounding of a boundary could differ */
        CHECK_NEAR(got_lp[j], want_lp[j], 1e-5);
        CHECK(gpu[j].block == cpu[j].block && gpu[j].used == cpu[j].used);
    }
    FREE_DEV(d);
    sampler_free(&smp);
    free(lg);
}

/* ---- the model ------------------------------------------------------------------------ */

/* A prefill of T tokens on sequence 0, its prefix copied to sequence 1, then
 * one decode row of sequence 0 alone and one batch of both: logits [T, V],
 * the lone decode row and the batch's two rows, all on the host. */
static int run_model(const model *m, const backend *on, const int32_t *tok, int T, float *pre, float *one,
                     float *two, gerr *e) {
    int V = m->cfg.vocab_size, rc;
    kv_cache c;
    model_scratch s;
    if ((rc = kv_cache_init_on(&c, on, &m->cfg, 2, T + 2, e))) return rc;
    if ((rc = model_scratch_init_on(&s, on, &m->cfg, T, T + 2, e))) {
        kv_cache_free(&c);
        return rc;
    }
    float *lg = on ? dev(NULL, (size_t)T * V) : fl((size_t)T * V);
    int seq[64] = {0}, pos[64];
    for (int t = 0; t < T; t++) pos[t] = t;
    model_forward(m, &c, T, seq, pos, tok, NULL, lg, &s);
    float *h = on ? host(lg, (size_t)T * V) : NULL;
    memcpy(pre, on ? h : lg, (size_t)T * V * sizeof *pre);
    free(h);
    kv_cache_copy_prefix(&c, 1, 0, T);
    int one_seq[1] = {0}, one_pos[1] = {T};
    int32_t one_tok[1] = {tok[T - 1]};
    model_forward(m, &c, 1, one_seq, one_pos, one_tok, NULL, lg, &s);
    h = on ? host(lg, V) : NULL;
    memcpy(one, on ? h : lg, (size_t)V * sizeof *one);
    free(h);
    int two_seq[2] = {0, 1}, two_pos[2] = {T, T};
    int32_t two_tok[2] = {tok[T - 1], tok[0]};
    model_forward(m, &c, 2, two_seq, two_pos, two_tok, NULL, lg, &s);
    h = on ? host(lg, (size_t)2 * V) : NULL;
    memcpy(two, on ? h : lg, (size_t)2 * V * sizeof *two);
    free(h);
    if (on) {
        rc = on->sync(e);
        on->mem_free(lg);
    } else {
        free(lg);
    }
    model_scratch_free(&s);
    kv_cache_free(&c);
    return rc;
}

/* mc and mg the same model: mg copied to the device, both run (run_model),
 * the device's logits against the CPU's; frees both. */
static void check_model_pair(model *mc, model *mg) {
    gerr e = {0};
    int rc = model_to_backend(mg, be, &e);
    if (rc) printf("#   model_to_backend: %s\n", e.msg);
    CHECK_EQ_INT(rc, 0);
    enum { T = 12 };
    int32_t tok[T];
    int V = mc->cfg.vocab_size;
    for (int t = 0; t < T; t++) tok[t] = (int32_t)((t * 7919 + 13) % V);
    float *pc = fl((size_t)T * V), *oc = fl(V), *tc = fl((size_t)2 * V);
    float *pg = fl((size_t)T * V), *og = fl(V), *tg = fl((size_t)2 * V);
    CHECK_EQ_INT(run_model(mc, NULL, tok, T, pc, oc, tc, &e), 0);
    if (!rc) {
        rc = run_model(mg, be, tok, T, pg, og, tg, &e);
        if (rc) printf("#   device forward: %s\n", e.msg);
        CHECK_EQ_INT(rc, 0);
        printf("#   measured: relative %.3g (prefill), %.3g (decode)\n", rel(pg, pc, (size_t)T * V), rel(og, oc, V));
        /* bf16 weights and GEMM inputs through two layers: relative 2e-2 */
        CHECK(rel(pg, pc, (size_t)T * V) <= 2e-2);
        CHECK(rel(og, oc, V) <= 2e-2);
        CHECK(rel(tg, tc, (size_t)2 * V) <= 2e-2);
        /* a row's logits do not depend on the rows beside it */
        CHECK(memcmp(og, tg, (size_t)V * sizeof *og) == 0);
    }
    model_free(mc);
    model_free(mg);
    free(pc), free(oc), free(tc), free(pg), free(og), free(tg);
}

static void test_model(model_arch arch, const char *name) {
    TEST(name);
    NEED_DEVICE();
    model_config cfg = {.arch = arch, .dim = 64, .hidden_dim = 96, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2,
                        .head_dim = 16, .vocab_size = 300, .max_seq_len = 64, .rope_theta = 10000,
                        .norm_eps = 1e-5f, .tied_embeddings = arch != ARCH_QWEN2, .qkv_bias = arch == ARCH_QWEN2,
                        .qk_norm = arch == ARCH_QWEN3, .bos_id = -1, .pad_id = -1};
    model mc, mg;
    memset(&mc, 0, sizeof mc), memset(&mg, 0, sizeof mg);
    mc.cfg = mg.cfg = cfg;
    gerr e = {0};
    if (model_alloc(&mc, &e) || model_alloc(&mg, &e)) {
        CHECK(0);
        return;
    }
    fill_random_floats(mc.params_memory, mc.n_params, 0x243F6A8885A308D3ULL + arch);
    fill_random_floats(mg.params_memory, mg.n_params, 0x243F6A8885A308D3ULL + arch);
    check_model_pair(&mc, &mg);
}

/* The mixtures of experts of tiny_train.h with every token taking both of
 * 2 experts: no top-k choice for bf16 rounding to flip (the fake device
 * checks the routing's plumbing exactly: test_fake_device), so the dense
 * models' tolerance holds; gpt_oss also with MXFP4 experts, their blocks
 * expanded on the device. */
static void test_model_moe(model_arch arch, bool mxfp4, const char *name) {
    TEST(name);
    NEED_DEVICE();
    model mc, mg;
    memset(&mc, 0, sizeof mc), memset(&mg, 0, sizeof mg);
    tiny_config(&mc.cfg, arch, false);
    mc.cfg.vocab_size = 300, mc.cfg.n_experts = mc.cfg.n_experts_used = 2;
    mg.cfg = mc.cfg;
    gerr e = {0};
    if (tiny_model_fill(&mc) || tiny_model_fill(&mg) ||
        (mxfp4 && (tiny_mxfp4_experts(&mc, &e) || tiny_mxfp4_experts(&mg, &e)))) {
        CHECK(0);
        model_free(&mc), model_free(&mg);
        return;
    }
    check_model_pair(&mc, &mg);
}

int main(void) {
    be = cuda_test_device(skip_why, sizeof skip_why);
    char name[200];
    cuda_device_name(name, sizeof name);
    printf("# device: %s\n", be ? name : "none");
    test_rmsnorm();
    test_rope();
    test_elementwise();
    test_train_rows();
    test_optimizer();
    test_sum_squares();
    test_scale_inplace();
    test_weight_refresh();
    test_attention(false);
    test_attention(true);
    test_attention_backward();
    test_matmul_bf16();
    test_matmul_backward_bf16();
    test_dropout_rows();
    test_gemm();
    test_head();
    test_head_backward();
    test_philox();
    test_sample(0.8, "sampling at T = 0.8 on the device: the CPU's tokens (same draws), log-probs within 1e-5");
    test_sample(0, "greedy sampling on the device: the CPU's first argmax, log-probs within 1e-5");
    test_model(ARCH_LLAMA, "llama forward on the device (tied head): logits within 2e-2 of the CPU, batch-invariant");
    test_model(ARCH_QWEN2, "qwen2 forward on the device (qkv bias): logits within 2e-2 of the CPU, batch-invariant");
    test_model(ARCH_QWEN3, "qwen3 forward on the device (q/k norm): logits within 2e-2 of the CPU, batch-invariant");
    test_model_moe(ARCH_QWEN3_MOE, false,
                   "qwen3_moe forward on the device (2 of 2 experts): logits within 2e-2 of the CPU, batch-invariant");
    test_model_moe(ARCH_GPT_OSS, false,
                   "gpt_oss forward on the device (sinks, window, YaRN, biases, clamped SwiGLU; 2 of 2 experts): "
                   "logits within 2e-2 of the CPU, batch-invariant");
    test_model_moe(ARCH_GPT_OSS, true,
                   "gpt_oss forward on the device with MXFP4 experts: logits within 2e-2 of the CPU, batch-invariant");
    if (be) cuda_close();
    return check_done();
}
