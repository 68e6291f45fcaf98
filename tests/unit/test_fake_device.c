/* tests/unit/fake_device.h, the CPU backend dressed as a device with memory
 * of its own: (a) the inference forward on it (model_to_backend, a KV cache
 * and scratch made on it, as the CUDA rollout runs) gives the CPU backend's
 * logits bit for bit on tiny random llama, qwen2 and qwen3 models; (b) its
 * memory faults when the host dereferences it; (c) an op given a host
 * pointer for device memory (or device memory for a host array) aborts
 * with a line naming the op and the argument; (d) the mixture-of-experts
 * ops and attention's sinks take the memory classes backend.h gives them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>
#include <unistd.h>

#include "check.h"
#include "helpers.h"
#include "fake_device.h"
#include "model/layer.h"
#include "model/model.h"
#include "tiny_train.h"

/* ---- (a) the forward ----------------------------------------------------------- */

enum { T = 13, P = 6, V = 50, MAX_ROWS = 2 * T };

/* What a run gives: every logit and, for a mixture of experts, the
 * routing each call kept (model_scratch.routes), one call after another. */
typedef struct {
    float *logits;
    int32_t *routes;
    size_t n_logits, n_routes;
} forward_out;

/* One model_forward; its logits and routing appended to o. */
static void call(const model *m, kv_cache *c, model_scratch *s, int n, const int *seq, const int *pos,
                 const int32_t *tok, const bool *want, float *lg, forward_out *o, gerr *e) {
    const backend *be = model_backend(m);
    model_forward(m, c, n, seq, pos, tok, want, lg, s);
    size_t k = 0;
    for (int r = 0; r < n; r++) k += !want || want[r];
    if (be->mem_download)
        be->mem_download(o->logits + o->n_logits, lg, k * V * sizeof *lg, e);
    else
        memcpy(o->logits + o->n_logits, lg, k * V * sizeof *lg);
    o->n_logits += k * V;
    size_t per_row = (size_t)config_ffn_layers(&m->cfg, true) * m->cfg.n_experts_used;
    if (s->routes) memcpy(o->routes + o->n_routes, s->routes, (size_t)n * per_row * sizeof *s->routes);
    o->n_routes += (size_t)n * per_row;
}

/* Every logit (and routing) of: a prefill of T tokens (sequence 0, tiled
 * attention); P of them again in sequence 1, then its prefix copied to
 * sequence 2 (the cache's copy on the backend); one batch carrying the rest
 * of sequences 1 and 2 interleaved, some rows wanted; a decode step of
 * both. o gets them one call after another; false on an error. The model's
 * backend decides where the cache, scratch and logits live. */
static bool run(const model *m, forward_out *o, gerr *e) {
    const backend *be = model_backend(m);
    kv_cache c;
    model_scratch s;
    o->n_logits = o->n_routes = 0;
    if (kv_cache_init_on(&c, be, &m->cfg, 3, T + 2, e)) return false;
    if (model_scratch_init_on(&s, be, &m->cfg, MAX_ROWS, T + 2, e)) {
        kv_cache_free(&c);
        return false;
    }
    size_t lg_bytes = (size_t)MAX_ROWS * V * sizeof(float);
    void *lg = NULL;
    if (be->mem_alloc ? be->mem_alloc(&lg, lg_bytes, e) != 0 : !(lg = malloc(lg_bytes))) abort();
    int seq[MAX_ROWS], pos[MAX_ROWS];
    int32_t tok[MAX_ROWS];
    bool want[MAX_ROWS];
    for (int t = 0; t < T; t++) seq[t] = 0, pos[t] = t, tok[t] = (t * 17 + 3) % V;
    call(m, &c, &s, T, seq, pos, tok, NULL, lg, o, e);
    for (int t = 0; t < P; t++) seq[t] = 1, pos[t] = t, tok[t] = (t * 17 + 3) % V;
    call(m, &c, &s, P, seq, pos, tok, NULL, lg, o, e);
    kv_cache_copy_prefix(&c, 2, 1, P);
    int n = 0;
    for (int t = P; t < T; t++)
        for (int q = 1; q <= 2; q++, n++) seq[n] = q, pos[n] = t, tok[n] = (t * 7 + q) % V, want[n] = t % 2 || q == 2;
    call(m, &c, &s, n, seq, pos, tok, want, lg, o, e);
    for (int q = 1; q <= 2; q++) seq[q - 1] = q, pos[q - 1] = T, tok[q - 1] = 11 * q;
    call(m, &c, &s, 2, seq, pos, tok, NULL, lg, o, e);
    bool ok = !(be->sync && be->sync(e));
    if (be->mem_free)
        be->mem_free(lg);
    else
        free(lg);
    model_scratch_free(&s);
    kv_cache_free(&c);
    return ok && !e->code;
}

/* m (its weights filled, perhaps packed as a device takes them) run on the
 * CPU, then copied to the fake device and run there: the same logits and
 * routing, bit for bit. Frees m. */
static void check_forward(model *m) {
    size_t cap = (size_t)4 * MAX_ROWS * V, rcap = (size_t)4 * MAX_ROWS * m->cfg.n_layers * 8;
    forward_out cpu = {calloc(cap, sizeof(float)), calloc(rcap, sizeof(int32_t)), 0, 0};
    forward_out dev = {calloc(cap, sizeof(float)), calloc(rcap, sizeof(int32_t)), 0, 0};
    if (!cpu.logits || !dev.logits || !cpu.routes || !dev.routes) abort();
    gerr e = {0};
    CHECK(run(m, &cpu, &e) && cpu.n_logits > 0 && cpu.n_logits <= cap && cpu.n_routes <= rcap);
    CHECK_EQ_INT(model_to_backend(m, fake_device(), &e), 0);
    CHECK(m->dev != NULL && model_backend(m) == fake_device());
    /* the weights the forward reads are device memory now */
    CHECK(m->dev && fake_device_tagged(m->dev->tok_embd) && fake_device_tagged(m->dev->lm_head) &&
          fake_device_tagged(m->dev->layers[1].wq));
    bool ran = m->dev && run(m, &dev, &e);
    CHECK(ran);
    CHECK_EQ_INT(dev.n_logits, cpu.n_logits);
    CHECK(dev.n_logits == cpu.n_logits && memcmp(cpu.logits, dev.logits, cpu.n_logits * sizeof(float)) == 0);
    CHECK(dev.n_routes == cpu.n_routes && memcmp(cpu.routes, dev.routes, cpu.n_routes * sizeof(int32_t)) == 0);
    bool finite = true;
    for (size_t i = 0; i < cpu.n_logits; i++) finite = finite && isfinite(cpu.logits[i]);
    CHECK(finite);
    if (m->cfg.n_experts > 0) { /* the rows went to every expert somewhere (one expert for all would hide a slice) */
        bool seen[8] = {0};
        int distinct = 0;
        for (size_t i = 0; i < cpu.n_routes; i++)
            if (cpu.routes[i] >= 0 && cpu.routes[i] < 8 && !seen[cpu.routes[i]]) seen[cpu.routes[i]] = true, distinct++;
        CHECK_EQ_INT(distinct, m->cfg.n_experts);
    }
    if (e.code) printf("#   %s\n", e.msg);
    free(cpu.logits), free(cpu.routes), free(dev.logits), free(dev.routes);
    model_free(m); /* model_dev_free: the device copy goes too */
}

static void test_forward(model_arch arch, bool tied) {
    static char names[3][96]; /* TEST keeps the pointer until the next test */
    char *name = names[arch];
    snprintf(name, sizeof names[0], "fake device: the forward's logits are the CPU's bit for bit (tiny %s%s)",
             model_arch_name(arch), tied ? ", tied" : "");
    TEST(name);
    model m;
    memset(&m, 0, sizeof m);
    m.cfg = (model_config){.arch = arch, .dim = 32, .hidden_dim = 48, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2,
                           .head_dim = arch == ARCH_QWEN3 ? 12 : 8, .vocab_size = V, .max_seq_len = 64,
                           .rope_theta = 10000, .norm_eps = 1e-5f, .tied_embeddings = tied,
                           .qkv_bias = arch == ARCH_QWEN2, .qk_norm = arch == ARCH_QWEN3, .bos_id = -1, .pad_id = -1};
    gerr e = {0};
    if (model_alloc(&m, &e)) {
        CHECK(0);
        return;
    }
    fill_random_floats(m.params_memory, m.n_params, 88172645463325252ULL + arch);
    check_forward(&m);
}

/* The mixtures of experts: tiny_train.h's qwen3_moe and gpt_oss (float32
 * experts, or MXFP4 ones), vocabulary V. */
static void test_forward_moe(model_arch arch, bool mxfp4, const char *name) {
    TEST(name);
    model m;
    memset(&m, 0, sizeof m);
    tiny_config(&m.cfg, arch, false);
    m.cfg.vocab_size = V;
    gerr e = {0};
    if (tiny_model_fill(&m) || (mxfp4 && tiny_mxfp4_experts(&m, &e))) {
        if (e.code) printf("#   %s\n", e.msg);
        CHECK(0);
        model_free(&m);
        return;
    }
    CHECK(!mxfp4 || (m.packed && m.held[P_EXP_DOWN] == HOLD_PACKED && m.held_as[P_EXP_DOWN] == WEIGHTS_MXFP4 &&
                     m.held[P_WQ] == HOLD_ROWS && !m.head_packed));
    check_forward(&m);
}

/* ---- (b), (c): in a child ------------------------------------------------------- */

static void *dev_alloc(size_t bytes) {
    void *p = NULL;
    gerr e = {0};
    if (fake_device()->mem_alloc(&p, bytes, &e)) abort();
    return p;
}

static void deref_device(void) {
    volatile float *p = (float *)dev_alloc(64 * sizeof(float)) + 3;
    printf("%g\n", (double)*p);
}

static void test_deref_faults(void) {
    TEST("fake device: its memory is tagged, and a host dereference of it faults (SIGSEGV or SIGBUS)");
    void *p = dev_alloc(16);
    CHECK(fake_device_tagged(p) && fake_device_tagged((char *)p + 15));
    fake_device()->mem_free(p);
    CHECK_FAULTS(deref_device());
}

static float host_buf[64];

static void add_host_x(void) { fake_device()->add_inplace(host_buf, dev_alloc(64 * sizeof(float)), 64); }
static void add_host_y(void) { fake_device()->add_inplace(dev_alloc(64 * sizeof(float)), host_buf, 64); }
static void gather_device_idx(void) {
    float *x = dev_alloc(64 * sizeof(float));
    fake_device()->gather_rows(x, x, dev_alloc(4 * sizeof(int32_t)), 2, 4);
}
static void kv_host_cache(void) {
    attn_shape sh = {.n_heads = 2, .n_kv_heads = 1, .head_dim = 4};
    size_t row_kv = 0;
    int pos = 0;
    kv_view kv = {.k = dev_alloc(64), .v = host_buf, .row_kv = &row_kv, .kv_dim = 4, .fmt = KV_F32};
    attn_workspace ws = {0};
    float *d = dev_alloc(64 * sizeof(float));
    fake_device()->attention_forward(d, NULL, d, &kv, &pos, 1, sh, &ws);
}
static void upload_host_dst(void) {
    gerr e;
    fake_device()->mem_upload(host_buf, host_buf, sizeof host_buf, &e);
}
static void free_host(void) { fake_device()->mem_free(malloc(8)); }

/* The forward of a tiny model on the fake with one buffer on the host by
 * mistake: the cache (kv_cache_init) or the logits. */
static void forward_with_host(bool host_cache) {
    model m;
    memset(&m, 0, sizeof m);
    m.cfg = (model_config){.arch = ARCH_LLAMA, .dim = 8, .hidden_dim = 16, .n_layers = 1, .n_heads = 2,
                           .n_kv_heads = 1, .head_dim = 4, .vocab_size = V, .max_seq_len = 8, .rope_theta = 10000,
                           .norm_eps = 1e-5f, .bos_id = -1, .pad_id = -1};
    gerr e = {0};
    kv_cache c;
    model_scratch s;
    if (model_alloc(&m, &e) || model_to_backend(&m, fake_device(), &e) ||
        kv_cache_init_on(&c, host_cache ? NULL : fake_device(), &m.cfg, 1, 4, &e) ||
        model_scratch_init_on(&s, fake_device(), &m.cfg, 2, 4, &e))
        _exit(3);
    float *lg = host_cache ? dev_alloc(2 * V * sizeof(float)) : malloc(2 * V * sizeof(float));
    int seq[2] = {0, 0}, pos[2] = {0, 1};
    int32_t tok[2] = {1, 2};
    model_forward(&m, &c, 2, seq, pos, tok, NULL, lg, &s);
}
static void group_device_offsets(void) {
    int32_t row[4], slot[4];
    fake_device()->moe_group(row, slot, dev_alloc(5 * sizeof(int)), dev_alloc(4 * sizeof(int32_t)), 2, 2, 4);
}
static void attention_host_sinks(void) {
    float sinks[2] = {0, 0};
    attn_shape sh = {.n_heads = 2, .n_kv_heads = 1, .head_dim = 4, .sinks = sinks};
    size_t row_kv = 0;
    float *kv = dev_alloc(16 * sizeof(float));
    kv_view v = {.k = kv, .v = kv, .row_kv = &row_kv, .kv_dim = 4};
    attn_workspace ws = {0};
    int pos = 0;
    fake_device()->attention_forward(dev_alloc(8 * sizeof(float)), NULL, dev_alloc(8 * sizeof(float)), &v, &pos, 1,
                                     sh, &ws);
}
static void forward_host_cache(void) { forward_with_host(true); }
static void forward_host_logits(void) { forward_with_host(false); }

static void test_host_pointer_aborts(void) {
    TEST("fake device: an op given a host pointer as device memory (or the reverse) aborts, naming op and argument");
    const struct {
        void (*fn)(void);
        const char *want;
    } cases[] = {
        {add_host_x, "fake-device: add_inplace: x is a host pointer, given as device memory"},
        {add_host_y, "fake-device: add_inplace: y is a host pointer"},
        {gather_device_idx, "fake-device: gather_rows: idx is device memory, given as a host array"},
        {kv_host_cache, "fake-device: attention_forward: kv->v is a host pointer"},
        {upload_host_dst, "fake-device: mem_upload: dst is a host pointer"},
        {free_host, "fake-device: mem_free: p is a host pointer"},
        {forward_host_cache, "fake-device: kv_write: kv->k is a host pointer"},
        {forward_host_logits, "fake-device: matmul_forward: out is a host pointer"},
        {group_device_offsets, "fake-device: moe_group: offsets is device memory, given as a host array"},
        {attention_host_sinks, "fake-device: attention_forward: sh.sinks is a host pointer"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) CHECK_ABORTS(cases[i].fn(), cases[i].want);
}

/* The training entries on device memory against optim.c's host functions. */
static void test_training_entries(void) {
    TEST("fake device: sum_squares, scale_inplace and weight_refresh are optim.c's functions, bit for bit");
    const backend *be = fake_device();
    enum { N = 1000 };
    float h[N], g[N], back[N];
    for (int i = 0; i < N; i++) h[i] = (float)((i * 37 % 101) - 50) / 7.0f;
    memcpy(g, h, sizeof h);
    gerr e = {0};
    float *d = dev_alloc(sizeof h), *w = NULL;
    CHECK_EQ_INT(be->mem_upload(d, h, sizeof h, &e), 0);
    CHECK_EQ_INT(be->weight_upload(&w, h, 10, N / 10, &e), 0);
    const float *gp = g;
    size_t n = N;
    double want = grad_sum_squares(&gp, &n, 1);
    double got = be->sum_squares(d, N);
    CHECK(memcmp(&want, &got, sizeof want) == 0);
    float *gm = g;
    grad_scale(&gm, &n, 1, 0.3f);
    be->scale_inplace(d, 0.3f, N);
    be->weight_refresh(w, d, 10, N / 10);
    /* the matrix's rows, each at twice its width (fake_device.h) */
    for (int r = 0; r < 10; r++)
        CHECK_EQ_INT(be->mem_download(back + r * (N / 10), be->weight_rows(w, (size_t)r, N / 10),
                                      N / 10 * sizeof *back, &e),
                     0);
    CHECK(memcmp(back, g, sizeof g) == 0);
    be->mem_free(d);
    be->mem_free(w);
}

/* ---- (d) the mixture of experts ------------------------------------------------ */

/* A device copy of bytes of h. */
static void *dev_copy(const void *h, size_t bytes) {
    void *d = dev_alloc(bytes);
    gerr e = {0};
    if (fake_device()->mem_upload(d, h, bytes, &e)) abort();
    return d;
}

static void test_moe_entries(void) {
    TEST("fake device: the routing, its replay, the grouping, the weighted sum and their backwards on device memory "
         "(index arrays on the host): the CPU's bits");
    const backend *be = fake_device();
    enum { N = 9, E = 8, K = 2, D = 5 };
    float lg[N * E], p[N * E], w[N * K], ye[N * K * D], out[N * D], g[N * D], dye[N * K * D], dw[N * K], dz[N * E];
    int32_t sel[N * K], row[N * K], slot[N * K], rep[N * K], hrow[N * K], hslot[N * K];
    int off[E + 1], hoff[E + 1];
    for (int i = 0; i < N * E; i++) lg[i] = (float)((i * 37 % 23) - 11) / 5.0f;
    for (int i = 0; i < N * K * D; i++) ye[i] = (float)((i * 13 % 17) - 8) / 3.0f;
    for (int i = 0; i < N * D; i++) g[i] = (float)((i * 7 % 11) - 5) / 4.0f;
    for (int i = 0; i < N * K; i++) rep[i] = i % (2 * K) < K ? -1 : (i * 3) % E; /* rows alternate own, replayed */
    moe_route_replay_forward(p, sel, w, lg, rep, N, E, K, true);
    moe_group(row, slot, off, sel, N, K, E);
    moe_combine_forward(out, ye, w, slot, N, K, D);
    moe_combine_backward(dye, dw, g, ye, w, slot, N, K, D);
    moe_route_backward(dz, dw, p, sel, w, N, E, K, true);
    float *d_p = dev_copy(lg, sizeof lg), *d_w = dev_alloc(sizeof w), *d_ye = dev_copy(ye, sizeof ye);
    float *d_out = dev_alloc(sizeof out), *d_g = dev_copy(g, sizeof g), *d_dye = dev_alloc(sizeof dye);
    float *d_dw = dev_alloc(sizeof dw), *d_dz = dev_alloc(sizeof dz);
    int32_t *d_sel = dev_alloc(sizeof sel);
    be->moe_route_replay_forward(d_p, d_sel, d_w, d_p, rep, N, E, K, true); /* in place, as the layer */
    be->moe_group(hrow, hslot, hoff, d_sel, N, K, E);
    be->moe_combine_forward(d_out, d_ye, d_w, hslot, N, K, D);
    be->moe_combine_backward(d_dye, d_dw, d_g, d_ye, d_w, hslot, N, K, D);
    be->moe_route_backward(d_dz, d_dw, d_p, d_sel, d_w, N, E, K, true);
    CHECK(memcmp(hrow, row, sizeof row) == 0 && memcmp(hslot, slot, sizeof slot) == 0 &&
          memcmp(hoff, off, sizeof off) == 0);
    float back[N * K * D];
    gerr e = {0};
    CHECK(!be->mem_download(back, d_p, sizeof p, &e) && !memcmp(back, p, sizeof p));
    CHECK(!be->mem_download(back, d_out, sizeof out, &e) && !memcmp(back, out, sizeof out));
    CHECK(!be->mem_download(back, d_dye, sizeof dye, &e) && !memcmp(back, dye, sizeof dye));
    CHECK(!be->mem_download(back, d_dz, sizeof dz, &e) && !memcmp(back, dz, sizeof dz));
    void *all[] = {d_p, d_w, d_ye, d_out, d_g, d_dye, d_dw, d_dz, d_sel};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) be->mem_free(all[i]);
}

/* gpt_oss on a backend without sinks and windows (the fake with its
 * sinks' entry taken out): one line, nothing copied. */
static void test_sinks_refused(void) {
    TEST("model_to_backend: gpt_oss's sinks and window on a backend without them: 64 in one line, nothing copied");
    model m;
    CHECK(tiny_model(&m, ARCH_GPT_OSS, false) == 0);
    backend lacking = *fake_device();
    lacking.attention_sinks_backward = NULL;
    gerr e = {0};
    CHECK_EQ_INT(model_to_backend(&m, &lacking, &e), EX_USAGE);
    CHECK(strstr(e.msg, "--device fake-device: attention sinks and sliding windows (GptOssForCausalLM) run on the CPU "
                        "only (--device cpu)") &&
          !strchr(e.msg, '\n'));
    CHECK(m.dev == NULL);
    model_free(&m);
}

int main(void) {
    test_deref_faults();
    test_host_pointer_aborts();
    test_training_entries();
    test_moe_entries();
    test_forward(ARCH_LLAMA, true);
    test_forward(ARCH_QWEN2, false);
    test_forward(ARCH_QWEN3, false);
    test_forward_moe(ARCH_QWEN3_MOE, false,
                     "fake device: a mixture of experts (tiny qwen3_moe): the CPU's logits and routing bit for bit");
    test_forward_moe(ARCH_GPT_OSS, false,
                     "fake device: tiny gpt_oss (sinks, window, YaRN, biases, clamped SwiGLU): the CPU's logits and "
                     "routing bit for bit");
    test_forward_moe(ARCH_GPT_OSS, true,
                     "fake device: tiny gpt_oss with MXFP4 experts (their blocks on the device): the CPU's logits and "
                     "routing bit for bit");
    test_sinks_refused();
    return check_done();
}
