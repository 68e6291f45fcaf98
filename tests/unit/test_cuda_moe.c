/* The CUDA backend's mixture-of-experts ops, MXFP4 experts and gpt-oss's
 * attention (sinks, sliding windows, YaRN's scale) against the CPU ops of
 * lib/ops, op by op on fresh random inputs, device outputs poisoned (NaN)
 * first as in test_cuda_ops. Tolerances beside each check: fp32 kernels
 * near fp32 rounding (expf against vec_expf, other summation orders),
 * integer results (experts, the grouping) exactly, the MXFP4 product to
 * 1e-5 of a double product of the same bf16 operands and to the bytes of
 * the bf16 product over the dequantized weights.
 *
 * Without a CUDA build or a device every test reports a TAP skip ("no CUDA
 * device"), so a CPU-only run shows them as skipped, not passed. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cuda/cuda.h"
#include "cuda_device.h"
#include "cuda_ops_util.h"
#include "ops/ops.h"
#include "ops/packed_mxfp4.h"
#include "util/half.h"

/* A device copy of n int32s; NULL after a failure (checked). */
static int32_t *dev_i32(const int32_t *h, size_t n) {
    gerr e = {0};
    void *d = NULL;
    if (be->mem_alloc(&d, (n ? n : 1) * sizeof *h, &e) || (h && be->mem_upload(d, h, n * sizeof *h, &e))) {
        printf("#   device copy: %s\n", e.msg);
        CHECK(0);
        return NULL;
    }
    if (!h) be->mem_zero(d, n * sizeof *h);
    return d;
}

static int32_t *host_i32(const int32_t *d, size_t n) {
    gerr e = {0};
    int32_t *h = malloc((n ? n : 1) * sizeof *h);
    if (!h) abort();
    memset(h, 0xff, n * sizeof *h);
    if (d && be->mem_download(h, d, n * sizeof *h, &e)) {
        printf("#   download: %s\n", e.msg);
        CHECK(0);
    }
    return h;
}

/* ---- routing and grouping ------------------------------------------------------ */

/* Row r's replayed experts: -1 (its own routing) on every third row, else
 * k distinct experts. */
static void make_replay(int32_t *rep, int n, int E, int k) {
    for (int r = 0; r < n; r++)
        for (int j = 0; j < k; j++) rep[(size_t)r * k + j] = r % 3 == 0 ? -1 : (r * 7 + j * 5) % E;
}

static void test_route(int E, int k, bool norm, const char *name) {
    TEST(name);
    NEED_DEVICE();
    int n = 37;
    size_t ne = (size_t)n * E, nk = (size_t)n * k;
    float *lg = fl(ne), *p = fl(ne), *w = fl(nk), *pr = fl(ne), *wr = fl(nk);
    int32_t *sel = malloc(nk * sizeof *sel), *selr = malloc(nk * sizeof *selr), *rep = malloc(nk * sizeof *rep);
    if (!sel || !selr || !rep) abort();
    rnd(lg, ne, 71 + E, 3);
    lg[3] = lg[5] = 9.0f; /* row 0: a tie, the lower index first */
    make_replay(rep, n, E, k);
    moe_route_forward(p, sel, w, lg, n, E, k, norm);
    moe_route_replay_forward(pr, selr, wr, lg, rep, n, E, k, norm);
    /* in place (probs = logits, as the layer calls it), and the replay */
    float *dp = dev(lg, ne), *dw = dev(NULL, nk), *dpr = dev(NULL, ne), *dlg = dev(lg, ne), *dwr = dev(NULL, nk);
    int32_t *ds = dev_i32(NULL, nk), *dsr = dev_i32(NULL, nk);
    if (ds && dsr) {
        be->moe_route_forward(dp, ds, dw, dp, n, E, k, norm);
        be->moe_route_replay_forward(dpr, dsr, dwr, dlg, rep, n, E, k, norm);
    }
    synced();
    float *gp = host(dp, ne), *gw = host(dw, nk), *gpr = host(dpr, ne), *gwr = host(dwr, nk);
    int32_t *gs = host_i32(ds, nk), *gsr = host_i32(dsr, nk);
    CHECK(rel(gp, p, ne) <= 1e-6);
    CHECK(rel(gw, w, nk) <= 1e-6);
    CHECK(memcmp(gs, sel, nk * sizeof *gs) == 0); /* the same experts in the same order */
    CHECK(gs[0] == 3 && gs[1] == 5);
    CHECK(rel(gpr, pr, ne) <= 1e-6);
    CHECK(rel(gwr, wr, nk) <= 1e-6);
    CHECK(memcmp(gsr, selr, nk * sizeof *gsr) == 0);
    FREE_DEV(dp, dw, dpr, dlg, dwr, ds, dsr);
    free(lg), free(p), free(w), free(pr), free(wr), free(sel), free(selr), free(rep);
    free(gp), free(gw), free(gpr), free(gwr), free(gs), free(gsr);
}

static void test_group(void) {
    TEST("moe_group on the device (a counting sort): row_of, slot_of and offsets equal to the CPU's, for one row, 37 "
         "rows and 700 rows, experts with no rows included");
    NEED_DEVICE();
    const int sizes[3] = {1, 37, 700}, E = 40, k = 4;
    for (int t = 0; t < 3; t++) {
        int n = sizes[t];
        size_t nk = (size_t)n * k;
        int32_t *sel = malloc(nk * sizeof *sel), *row = malloc(nk * sizeof *row), *slot = malloc(nk * sizeof *slot);
        int32_t *grow = malloc(nk * sizeof *grow), *gslot = malloc(nk * sizeof *gslot);
        int off[41], goff[41];
        if (!sel || !row || !slot || !grow || !gslot) abort();
        for (int r = 0; r < n; r++) /* distinct experts per row, skewed to the low ones; 30 .. 39 never chosen */
            for (int j = 0; j < k; j++) sel[(size_t)r * k + j] = (int32_t)((r * r + 3 * r) % 26 + j);
        moe_group(row, slot, off, sel, n, k, E);
        int32_t *ds = dev_i32(sel, nk);
        memset(grow, 0xff, nk * sizeof *grow), memset(gslot, 0xff, nk * sizeof *gslot), memset(goff, 0xff, sizeof goff);
        if (ds) be->moe_group(grow, gslot, goff, ds, n, k, E);
        synced();
        CHECK(memcmp(grow, row, nk * sizeof *row) == 0);
        CHECK(memcmp(gslot, slot, nk * sizeof *slot) == 0);
        CHECK(memcmp(goff, off, sizeof off) == 0);
        FREE_DEV(ds);
        free(sel), free(row), free(slot), free(grow), free(gslot);
    }
}

static void test_combine_and_route_backward(void) {
    TEST("moe_combine_forward within 1e-6 of the CPU; its backward: dye the CPU's bits, dw within 1e-6; "
         "moe_route_backward (norm and not) within 1e-6");
    NEED_DEVICE();
    int n = 29, E = 32, k = 4, d = 200;
    size_t nk = (size_t)n * k, ne = (size_t)n * E;
    float *lg = fl(ne), *p = fl(ne), *w = fl(nk), *ye = fl(nk * d), *out = fl((size_t)n * d);
    float *g = fl((size_t)n * d), *dye = fl(nk * d), *dw = fl(nk), *dz = fl(ne), *dzn = fl(ne), *wn = fl(nk);
    int32_t *sel = malloc(nk * sizeof *sel), *row = malloc(nk * sizeof *row), *slot = malloc(nk * sizeof *slot);
    int off[33];
    if (!sel || !row || !slot) abort();
    rnd(lg, ne, 81, 2), rnd(ye, nk * d, 82, 1), rnd(g, (size_t)n * d, 83, 1);
    moe_route_forward(p, sel, w, lg, n, E, k, false);
    moe_group(row, slot, off, sel, n, k, E);
    moe_combine_forward(out, ye, w, slot, n, k, d);
    moe_combine_backward(dye, dw, g, ye, w, slot, n, k, d);
    moe_route_backward(dz, dw, p, sel, w, n, E, k, false);
    memcpy(wn, w, nk * sizeof *w);
    for (int r = 0; r < n; r++) { /* the weights renormalised, for the norm case */
        double s = 0;
        for (int j = 0; j < k; j++) s += wn[(size_t)r * k + j];
        for (int j = 0; j < k; j++) wn[(size_t)r * k + j] = (float)(wn[(size_t)r * k + j] / s);
    }
    moe_route_backward(dzn, dw, p, sel, wn, n, E, k, true);
    float *d_w = dev(w, nk), *d_ye = dev(ye, nk * d), *d_out = dev(NULL, (size_t)n * d), *d_g = dev(g, (size_t)n * d);
    float *d_dye = dev(NULL, nk * d), *d_dw = dev(NULL, nk), *d_p = dev(p, ne), *d_dz = dev(NULL, ne);
    float *d_dzn = dev(NULL, ne), *d_wn = dev(wn, nk), *d_dw_ref = dev(dw, nk);
    int32_t *d_sel = dev_i32(sel, nk);
    be->moe_combine_forward(d_out, d_ye, d_w, slot, n, k, d);
    be->moe_combine_backward(d_dye, d_dw, d_g, d_ye, d_w, slot, n, k, d);
    if (d_sel) { /* from the CPU's dw: the route backward checked alone */
        be->moe_route_backward(d_dz, d_dw_ref, d_p, d_sel, d_w, n, E, k, false);
        be->moe_route_backward(d_dzn, d_dw_ref, d_p, d_sel, d_wn, n, E, k, true);
    }
    synced();
    float *go = host(d_out, (size_t)n * d), *gdye = host(d_dye, nk * d), *gdw = host(d_dw, nk);
    float *gdz = host(d_dz, ne), *gdzn = host(d_dzn, ne);
    CHECK(rel(go, out, (size_t)n * d) <= 1e-6);
    CHECK(memcmp(gdye, dye, nk * d * sizeof *dye) == 0);
    CHECK(rel(gdw, dw, nk) <= 1e-6);
    CHECK(rel(gdz, dz, ne) <= 1e-6);
    CHECK(rel(gdzn, dzn, ne) <= 1e-6);
    FREE_DEV(d_w, d_ye, d_out, d_g, d_dye, d_dw, d_p, d_dz, d_dzn, d_wn, d_dw_ref, d_sel);
    free(lg), free(p), free(w), free(ye), free(out), free(g), free(dye), free(dw), free(dz), free(dzn), free(wn);
    free(sel), free(row), free(slot), free(go), free(gdye), free(gdw), free(gdz), free(gdzn);
}

static void test_swiglu_clamped(void) {
    TEST("gpt-oss's clamped SwiGLU (alpha 1.702, limit 7) and its backward on the device: within 1e-6 of the CPU (expf "
         "against vec_expf), values beyond the limits included");
    NEED_DEVICE();
    size_t n = 10007;
    const float alpha = 1.702f, limit = 7.0f;
    float *g = fl(n), *u = fl(n), *dh = fl(n), *o = fl(n), *dg = fl(n), *du = fl(n);
    rnd(g, n, 91, 10), rnd(u, n, 92, 10), rnd(dh, n, 93, 1); /* a third beyond +-7 */
    g[0] = limit, u[0] = -limit, u[1] = limit;               /* on the clamps' edges */
    swiglu_clamped_forward(o, g, u, n, alpha, limit);
    swiglu_clamped_backward(dg, du, dh, g, u, n, alpha, limit);
    float *d_g = dev(g, n), *d_u = dev(u, n), *d_o = dev(NULL, n), *d_dh = dev(dh, n), *d_du = dev(NULL, n);
    be->swiglu_clamped_forward(d_o, d_g, d_u, n, alpha, limit);
    be->swiglu_clamped_backward(d_dh, d_du, d_dh, d_g, d_u, n, alpha, limit); /* dg in dh's place, as the layer */
    synced();
    float *go = host(d_o, n), *gdg = host(d_dh, n), *gdu = host(d_du, n);
    CHECK(rel(go, o, n) <= 1e-6);
    CHECK(rel(gdg, dg, n) <= 1e-6);
    CHECK(rel(gdu, du, n) <= 1e-6);
    FREE_DEV(d_g, d_u, d_o, d_dh, d_du);
    free(g), free(u), free(dh), free(o), free(dg), free(du), free(go), free(gdg), free(gdu);
}

/* ---- MXFP4 experts ------------------------------------------------------------------ */

static void test_mxfp4(void) {
    TEST("matmul_forward_packed on MXFP4 blocks (expanded to bf16 on the device): the bytes of matmul_forward over the "
         "dequantized W uploaded as bf16, within 1e-5 of a double product of the bf16 operands, 1e-2 of the CPU's fp32 "
         "product");
    NEED_DEVICE();
    int n = 37, in = 576, out = 200; /* out not a multiple of 16: a part panel */
    int nb = in / MX4W_K_BLOCK;
    unsigned char *blocks = malloc((size_t)out * nb * MX4W_GGUF_BYTES);
    size_t pbytes = mx4w_bytes(out, in);
    void *packed = malloc(pbytes);
    float *w = fl((size_t)out * in), *x = fl((size_t)n * in), *b = fl(out), *y = fl((size_t)n * out);
    float *ref = fl((size_t)n * out);
    if (!blocks || !packed) abort();
    uint64_t st = 97;
    for (size_t i = 0; i < (size_t)out * nb * MX4W_GGUF_BYTES; i++) {
        st ^= st << 13, st ^= st >> 7, st ^= st << 17;
        blocks[i] = (unsigned char)(st >> 24);
    }
    for (size_t i = 0; i < (size_t)out * nb; i++) blocks[i * MX4W_GGUF_BYTES] = (unsigned char)(118 + i % 8); /* e */
    blocks[0] = 1; /* one block of subnormal values */
    mx4w_pack_gguf(packed, blocks, out, in);
    mx4w_unpack(w, packed, out, in);
    rnd(x, (size_t)n * in, 98, 2), rnd(b, out, 99, 1);
    matmul_forward_packed(y, x, packed, WEIGHTS_MXFP4, b, n, in, out);
    for (int r = 0; r < n; r++)
        for (int o = 0; o < out; o++) {
            double s = b[o];
            for (int i = 0; i < in; i++)
                s += (double)bf16_to_f32(f32_to_bf16(x[(size_t)r * in + i])) * w[(size_t)o * in + i]; /* w is bf16 */
            ref[(size_t)r * out + o] = (float)s;
        }
    gerr e = {0};
    void *dpk = NULL;
    float *w16 = NULL;
    if (be->mem_alloc(&dpk, pbytes, &e) || be->mem_upload(dpk, packed, pbytes, &e) ||
        be->weight_upload(&w16, w, out, in, &e)) {
        printf("#   upload: %s\n", e.msg);
        CHECK(0);
    }
    float *dx = dev(x, (size_t)n * in), *db = dev(b, out), *dy = dev(NULL, (size_t)n * out),
          *dy16 = dev(NULL, (size_t)n * out);
    if (dpk && w16) {
        be->matmul_forward_packed(dy, dx, dpk, WEIGHTS_MXFP4, db, n, in, out);
        be->matmul_forward(dy16, dx, w16, db, n, in, out);
    }
    synced();
    float *g = host(dy, (size_t)n * out), *g16 = host(dy16, (size_t)n * out);
    CHECK(memcmp(g, g16, (size_t)n * out * sizeof *g) == 0);
    CHECK(rel(g, ref, (size_t)n * out) <= 1e-5);
    CHECK(rel(g, y, (size_t)n * out) <= 1e-2);
    FREE_DEV(dpk, w16, dx, db, dy, dy16);
    free(blocks), free(packed), free(w), free(x), free(b), free(y), free(ref), free(g), free(g16);
}

/* ---- gpt-oss's attention ------------------------------------------------------------- */

/* A prefill of sequence 0 (tiles), decode rows of sequences 1 and 2, some
 * prefill rows alone: with a window (shorter and longer than a 32-position
 * chunk), sinks and a scale, on an fp32 or bf16 cache. */
static void test_attention_gptoss(int window, bool bf16, const char *name) {
    TEST(name);
    NEED_DEVICE();
    attn_shape sh = {.n_heads = 8, .n_kv_heads = 2, .head_dim = 64, .window = window, .scale = 0.09f};
    const int S = 3, L = 100, kvd = 2 * 64, qd = 8 * 64, P = 70, R = P + 2;
    size_t cache_n = (size_t)S * L * kvd, cache_f = bf16 ? cache_n / 2 : cache_n;
    float *kc = fl(cache_n), *vc = fl(cache_n), *q = fl((size_t)R * qd), *out = fl((size_t)R * qd);
    float *lse = fl((size_t)R * 8), sinks[8];
    rnd(kc, cache_n, 101, 1), rnd(vc, cache_n, 102, 1), rnd(q, (size_t)R * qd, 103, 2), rnd(sinks, 8, 104, 3);
    if (bf16) {
        uint16_t *tmp = malloc(cache_n * sizeof *tmp);
        if (!tmp) abort();
        f32_to_bf16_array(kc, tmp, cache_n), memcpy(kc, tmp, cache_n * sizeof *tmp);
        f32_to_bf16_array(vc, tmp, cache_n), memcpy(vc, tmp, cache_n * sizeof *tmp);
        free(tmp);
    }
    int pos[72];
    size_t row_kv[72];
    for (int r = 0; r < P; r++) pos[r] = r, row_kv[r] = 0;
    pos[P] = L - 1, row_kv[P] = (size_t)L * kvd, pos[P + 1] = 5, row_kv[P + 1] = (size_t)2 * L * kvd;
    kv_format fmt = bf16 ? KV_BF16 : KV_F32;
    float *dkc = dev(kc, cache_f), *dvc = dev(vc, cache_f), *dq = dev(q, (size_t)R * qd);
    float *dout = dev(NULL, (size_t)R * qd), *dlse = dev(NULL, (size_t)R * 8), *dsk = dev(sinks, 8);
    attn_shape dsh = sh;
    dsh.sinks = dsk; /* the device's copy */
    kv_view dvv = {.k = dkc, .v = dvc, .row_kv = row_kv, .kv_dim = kvd, .fmt = fmt};
    be->attention_forward(dout, dlse, dq, &dvv, pos, R, dsh, NULL);
    const int alone[4] = {0, 33, 40, P - 1};
    float *dout1 = dev(NULL, (size_t)4 * qd);
    for (int i = 0; i < 4; i++) {
        kv_view one = dvv;
        one.row_kv = row_kv + alone[i];
        be->attention_forward(dout1 + (size_t)i * qd, NULL, dq + (size_t)alone[i] * qd, &one, pos + alone[i], 1, dsh,
                              NULL);
    }
    synced();
    sh.sinks = sinks;
    int threads = omp_get_max_threads();
    attn_workspace ws = {.stride = attn_workspace_floats(sh, L), .n_threads = threads};
    ws.buf = fl(ws.stride * threads);
    ws.tasks = malloc((size_t)R * sh.n_kv_heads * 3 * sizeof *ws.tasks);
    kv_view hv = {.k = kc, .v = vc, .row_kv = row_kv, .kv_dim = kvd, .fmt = fmt};
    attention_forward(out, lse, q, &hv, pos, R, sh, &ws);
    float *go = host(dout, (size_t)R * qd), *gl = host(dlse, (size_t)R * 8), *g1 = host(dout1, (size_t)4 * qd);
    CHECK(rel(go, out, (size_t)R * qd) <= 1e-5);
    double worst = 0;
    for (int i = 0; i < R * 8; i++) worst = fmax(worst, isnan(gl[i]) ? INFINITY : fabs((double)gl[i] - lse[i]));
    CHECK(worst <= 1e-4);
    for (int i = 0; i < 4; i++) CHECK(memcmp(g1 + (size_t)i * qd, go + (size_t)alone[i] * qd, qd * sizeof *g1) == 0);
    FREE_DEV(dkc, dvc, dq, dout, dlse, dsk, dout1);
    free(kc), free(vc), free(q), free(out), free(lse), free(ws.buf), free(ws.tasks), free(go), free(gl), free(g1);
}

static void test_attention_gptoss_backward(void) {
    TEST("attention_backward with a window of 20, sinks and a scale: dq, dk, dv within 1e-4 of the CPU's; "
         "attention_sinks_backward (added to) within 1e-6");
    NEED_DEVICE();
    float sinks[6], dsk[6], dsk0[6];
    attn_shape sh = {.n_heads = 6, .n_kv_heads = 2, .head_dim = 64, .window = 20, .sinks = sinks, .scale = 0.11f};
    const int kvd = 2 * 64, qd = 6 * 64, start[3] = {0, 13, 60}, R = 60;
    float *q = fl((size_t)R * qd), *k = fl((size_t)R * kvd), *v = fl((size_t)R * kvd), *dout = fl((size_t)R * qd);
    float *out = fl((size_t)R * qd), *lse = fl((size_t)R * 6);
    float *dq = fl((size_t)R * qd), *dk = fl((size_t)R * kvd), *dv = fl((size_t)R * kvd);
    rnd(q, (size_t)R * qd, 111, 1), rnd(k, (size_t)R * kvd, 112, 1), rnd(v, (size_t)R * kvd, 113, 1);
    rnd(dout, (size_t)R * qd, 114, 1), rnd(sinks, 6, 115, 2), rnd(dsk0, 6, 116, 1);
    memcpy(dsk, dsk0, sizeof dsk);
    cpu_attention_batch(out, lse, dq, dk, dv, q, k, v, dout, 2, start, sh);
    attention_sinks_backward(dsk, out, dout, lse, sinks, R, 6, 64);
    float *d_q = dev(q, (size_t)R * qd), *d_k = dev(k, (size_t)R * kvd), *d_v = dev(v, (size_t)R * kvd);
    float *d_out = dev(out, (size_t)R * qd), *d_lse = dev(lse, (size_t)R * 6), *d_do = dev(dout, (size_t)R * qd);
    float *ddq = dev(NULL, (size_t)R * qd), *ddk = dev(NULL, (size_t)R * kvd), *ddv = dev(NULL, (size_t)R * kvd);
    float *d_sk = dev(sinks, 6), *d_dsk = dev(dsk0, 6);
    attn_shape dsh = sh;
    dsh.sinks = d_sk;
    be->attention_backward(ddq, ddk, ddv, d_do, d_out, d_lse, d_q, d_k, d_v, 2, start, dsh, NULL);
    be->attention_sinks_backward(d_dsk, d_out, d_do, d_lse, d_sk, R, 6, 64);
    synced();
    float *gq = host(ddq, (size_t)R * qd), *gk = host(ddk, (size_t)R * kvd), *gv = host(ddv, (size_t)R * kvd);
    float *gs = host(d_dsk, 6);
    CHECK(rel(gq, dq, (size_t)R * qd) <= 1e-4);
    CHECK(rel(gk, dk, (size_t)R * kvd) <= 1e-4);
    CHECK(rel(gv, dv, (size_t)R * kvd) <= 1e-4);
    CHECK(rel(gs, dsk, 6) <= 1e-6);
    FREE_DEV(d_q, d_k, d_v, d_out, d_lse, d_do, ddq, ddk, ddv, d_sk, d_dsk);
    free(q), free(k), free(v), free(dout), free(out), free(lse), free(dq), free(dk), free(dv);
    free(gq), free(gk), free(gv), free(gs);
}

int main(void) {
    be = cuda_test_device(skip_why, sizeof skip_why);
    char name[200];
    cuda_device_name(name, sizeof name);
    printf("# device: %s\n", be ? name : "none");
    test_route(32, 4, true,
               "moe_route_forward and its replay, gpt-oss's shape (32 experts, top 4, the softmax over the 4 as "
               "renormalised weights): probs and weights within 1e-6, the CPU's experts, ties to the lower index");
    test_route(128, 8, true,
               "moe_route_forward and its replay, Qwen3-MoE's shape (128 experts, top 8, norm_topk_prob): probs and "
               "weights within 1e-6, the CPU's experts");
    test_route(60, 4, false,
               "moe_route_forward and its replay, 60 experts, top 4, not renormalised: within 1e-6, the CPU's experts");
    test_group();
    test_combine_and_route_backward();
    test_swiglu_clamped();
    test_mxfp4();
    test_attention_gptoss(20, false,
                          "attention with a window of 20, sinks and a scale, fp32 cache: within 1e-5 of the CPU, lse "
                          "1e-4; a prefill row alone gives its tile's bytes");
    test_attention_gptoss(45, true,
                          "attention with a window of 45 (beyond a 32-position chunk), sinks and a scale, bf16 cache: "
                          "within 1e-5 of the CPU, lse 1e-4; a row alone gives its tile's bytes");
    test_attention_gptoss(0, false,
                          "attention with sinks and a scale, no window: within 1e-5 of the CPU, lse 1e-4; a row alone "
                          "gives its tile's bytes");
    test_attention_gptoss_backward();
    if (be) cuda_close();
    return check_done();
}
