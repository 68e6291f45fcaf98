/* Mixture of experts: the ops of lib/ops/moe.c (routing, replayed routing, grouping, the
 * weighted sum, their backward against central differences in double) and
 * the qwen3_moe settings of config.json (defaults, ranges, the sparse
 * layers, an expert setting we do not know refused naming it). The layer
 * itself is checked against PyTorch by tests/bats/model.bats and
 * train_grad.bats, and by test_model's and test_train's tiny models. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fake_device.h"
#include "model/config.h"
#include "model/model.h"
#include "ops/ops.h"
#include "util/rng.h"

enum { N = 5, E = 6, K = 2, D = 7 };

static void fill(float *p, size_t n, double scale, uint64_t index) {
    rng_stream r;
    rng_init(&r, 21, "moe", 3, index);
    for (size_t i = 0; i < n; i++) p[i] = (float)(scale * (2 * rng_uniform(&r) - 1));
}

static void test_route(void) {
    TEST("moe_route_forward: softmax over every expert, the k largest in order, renormalised when asked");
    float logits[N * E], probs[N * E], w[N * K], wn[N * K];
    int32_t sel[N * K], seln[N * K];
    fill(logits, N * E, 2.0, 1);
    logits[0 * E + 4] = logits[0 * E + 1] = 5.0f; /* a tie: the lower index first */
    moe_route_forward(probs, sel, w, logits, N, E, K, false);
    float inplace[N * E];
    memcpy(inplace, logits, sizeof inplace);
    moe_route_forward(inplace, seln, wn, inplace, N, E, K, true);
    CHECK_EQ_INT(sel[0], 1);
    CHECK_EQ_INT(sel[1], 4);
    int bad = 0;
    for (int r = 0; r < N; r++) {
        double mx = -INFINITY, sum = 0;
        for (int x = 0; x < E; x++) mx = fmax(mx, logits[r * E + x]);
        for (int x = 0; x < E; x++) sum += exp(logits[r * E + x] - mx);
        for (int x = 0; x < E; x++) {
            double p = exp(logits[r * E + x] - mx) / sum;
            bad += fabs(probs[r * E + x] - p) > 1e-6 || probs[r * E + x] != inplace[r * E + x];
            /* every expert not chosen is below every chosen one */
            bool chosen = x == sel[r * K] || x == sel[r * K + 1];
            bad += !chosen && (p > probs[r * E + sel[r * K + 1]]);
        }
        bad += sel[r * K] == sel[r * K + 1] || probs[r * E + sel[r * K]] < probs[r * E + sel[r * K + 1]];
        bad += w[r * K] != probs[r * E + sel[r * K]] || seln[r * K] != sel[r * K] || seln[r * K + 1] != sel[r * K + 1];
        bad += fabs(wn[r * K] + wn[r * K + 1] - 1) > 1e-6 || fabs(wn[r * K] / wn[r * K + 1] - w[r * K] / w[r * K + 1]) > 1e-5;
    }
    CHECK_EQ_INT(bad, 0);
}

/* Replayed experts: row 0 its own (replay -1), rows 1.. the last two
 * experts and then the least probable ones, never the top k it would choose. */
static void replay_fixture(int32_t *replay) {
    for (int r = 0; r < N; r++)
        for (int j = 0; j < K; j++) replay[r * K + j] = r == 0 ? -1 : (E - 1 - j - r) % E;
}

static void test_route_replay(void) {
    TEST("moe_route_replay_forward: the given experts in order, their probabilities renormalised; -1 routes itself");
    float logits[N * E], probs[N * E], w[N * K], own_p[N * E], own_w[N * K];
    int32_t sel[N * K], own_sel[N * K], replay[N * K];
    fill(logits, N * E, 2.0, 10);
    replay_fixture(replay);
    for (int norm = 0; norm < 2; norm++) {
        moe_route_replay_forward(probs, sel, w, logits, replay, N, E, K, norm);
        moe_route_forward(own_p, own_sel, own_w, logits, N, E, K, norm);
        int bad = 0, differ = 0;
        for (int r = 0; r < N; r++) {
            double sum = 0;
            for (int j = 0; j < K && r > 0; j++) sum += own_p[r * E + replay[r * K + j]];
            for (int j = 0; j < K; j++) {
                int a = r * K + j;
                if (r == 0) { /* its own top k, bit for bit */
                    bad += sel[a] != own_sel[a] || w[a] != own_w[a];
                    continue;
                }
                double want = own_p[r * E + replay[a]] / (norm ? sum : 1);
                bad += sel[a] != replay[a] || fabs(w[a] - want) > 1e-6 * want;
                differ += sel[a] != own_sel[a];
            }
            bad += memcmp(probs + r * E, own_p + r * E, sizeof(float) * E) != 0;
        }
        CHECK_EQ_INT(bad, 0);
        CHECK(differ >= N - 1); /* the replayed choice is not the one the router would make */
    }
    /* the experts the router chooses itself, replayed: moe_route_forward's numbers bit for bit */
    moe_route_forward(own_p, own_sel, own_w, logits, N, E, K, true);
    moe_route_replay_forward(probs, sel, w, logits, own_sel, N, E, K, true);
    CHECK(!memcmp(sel, own_sel, sizeof sel) && !memcmp(w, own_w, sizeof w));
}

/* sum_{r,j} c[r,j] w[r,j] of moe_route_forward (replay NULL) or
 * moe_route_replay_forward, in double from float logits. */
static double route_loss(const float *logits, const float *c, const int32_t *replay, bool norm) {
    float probs[N * E], w[N * K];
    int32_t sel[N * K];
    if (replay) moe_route_replay_forward(probs, sel, w, logits, replay, N, E, K, norm);
    else moe_route_forward(probs, sel, w, logits, N, E, K, norm);
    double L = 0;
    for (int i = 0; i < N * K; i++) L += (double)c[i] * w[i];
    return L;
}

/* moe_route_backward after the router's own choice or replay_fixture's. */
static void test_route_backward(bool norm, bool replayed) {
    static const char *const names[2][2] = {
        {"moe_route_backward: central differences of the routing weights",
         "moe_route_backward, renormalised: central differences of the routing weights"},
        {"moe_route_backward of replayed experts: central differences",
         "moe_route_backward of replayed experts, renormalised: central differences"}};
    TEST(names[replayed][norm]);
    float logits[N * E], c[N * K], probs[N * E], w[N * K], dlogits[N * E];
    int32_t sel[N * K], fixture[N * K], *replay = replayed ? fixture : NULL;
    fill(logits, N * E, 2.0, replayed ? 11 : 2);
    fill(c, N * K, 1.0, replayed ? 12 : 3);
    replay_fixture(fixture);
    if (replay) moe_route_replay_forward(probs, sel, w, logits, replay, N, E, K, norm);
    else moe_route_forward(probs, sel, w, logits, N, E, K, norm);
    moe_route_backward(dlogits, c, probs, sel, w, N, E, K, norm);
    /* steps of 1e-3 in float32 logits: differences to ~1e-4 (no choice flips:
     * a replayed choice is fixed, and the fixture's gaps are far wider) */
    int bad = 0;
    double sum = 0;
    for (int i = 0; i < N * E; i++) {
        float saved = logits[i], h = 1e-3f;
        logits[i] = saved + h;
        double up = route_loss(logits, c, replay, norm);
        logits[i] = saved - h;
        double down = route_loss(logits, c, replay, norm);
        logits[i] = saved;
        double fd = (up - down) / (2.0 * h);
        if (fabs(fd - dlogits[i]) > 2e-4 + 1e-3 * fabs(fd)) {
            bad++;
            printf("#   dlogits[%d] %.6g, differences %.6g\n", i, dlogits[i], fd);
        }
        sum += dlogits[i];
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(fabs(sum) < 1e-5); /* a softmax's gradient sums to 0 per row */
}

static void test_group_combine(void) {
    TEST("moe_group and moe_combine: slots by expert in row order, the weighted sum and its backward");
    int32_t sel[N * K] = {3, 0, 0, 5, 3, 5, 1, 3, 0, 5};
    int32_t row_of[N * K], slot_of[N * K];
    int off[E + 1];
    moe_group(row_of, slot_of, off, sel, N, K, E);
    const int want_off[E + 1] = {0, 3, 4, 4, 7, 7, 10};
    const int32_t want_row[N * K] = {0, 1, 4, 3, 0, 2, 3, 1, 2, 4};
    for (int x = 0; x <= E; x++) CHECK_EQ_INT(off[x], want_off[x]);
    int bad = 0;
    for (int i = 0; i < N * K; i++) bad += row_of[i] != want_row[i] || row_of[slot_of[i]] != i / K;
    for (int i = 0; i < N * K; i++) bad += slot_of[i] < off[sel[i]] || slot_of[i] >= off[sel[i] + 1];
    CHECK_EQ_INT(bad, 0);

    float ye[N * K * D], w[N * K], out[N * D], dout[N * D], dye[N * K * D], dw[N * K];
    fill(ye, N * K * D, 1.0, 4);
    fill(w, N * K, 1.0, 5);
    fill(dout, N * D, 1.0, 6);
    moe_combine_forward(out, ye, w, slot_of, N, K, D);
    moe_combine_backward(dye, dw, dout, ye, w, slot_of, N, K, D);
    for (int r = 0; r < N; r++)
        for (int j = 0; j < K; j++) {
            int a = r * K + j, s = slot_of[a];
            double dot = 0;
            for (int c = 0; c < D; c++) {
                dot += (double)dout[r * D + c] * ye[s * D + c];
                bad += fabs(dye[s * D + c] - w[a] * dout[r * D + c]) > 1e-6;
            }
            bad += fabs(dw[a] - dot) > 1e-5;
        }
    for (int r = 0; r < N; r++)
        for (int c = 0; c < D; c++) {
            double o = 0;
            for (int j = 0; j < K; j++) o += (double)w[r * K + j] * ye[slot_of[r * K + j] * D + c];
            bad += fabs(out[r * D + c] - o) > 1e-5;
        }
    CHECK_EQ_INT(bad, 0);
}

static const char *moe_json(const char *extra) {
    static char buf[2048];
    snprintf(buf, sizeof buf,
             "{\"architectures\": [\"Qwen3MoeForCausalLM\"], \"model_type\": \"qwen3_moe\", \"hidden_size\": 64, "
             "\"intermediate_size\": 96, \"num_hidden_layers\": 4, \"num_attention_heads\": 4, "
             "\"num_key_value_heads\": 2, \"vocab_size\": 97, \"router_aux_loss_coef\": 0.001, "
             "\"output_router_logits\": false%s}",
             extra);
    return buf;
}

static void test_config(void) {
    model_config c;
    gerr e = {0};
    TEST("config.json qwen3_moe: Qwen3MoeConfig's defaults, head_dim from hidden/heads, q/k norm");
    CHECK_EQ_INT(config_parse_hf(&c, moe_json(""), "config.json", &e), 0);
    CHECK(c.arch == ARCH_QWEN3_MOE && c.qk_norm && !c.qkv_bias && c.head_dim == 16);
    CHECK(c.n_experts == 128 && c.n_experts_used == 8 && c.moe_hidden_dim == 768 && !c.moe_norm_topk);
    CHECK(c.moe_step == 1 && !strcmp(model_arch_name(c.arch), "qwen3_moe"));
    CHECK(config_layer_moe(&c, 0) && config_layer_moe(&c, 3) && config_ffn_layers(&c, true) == 4);

    TEST("config.json qwen3_moe: its settings, mlp_only_layers and decoder_sparse_step make layers dense");
    CHECK_EQ_INT(config_parse_hf(&c, moe_json(", \"num_experts\": 8, \"num_local_experts\": 8, "
                                              "\"num_experts_per_tok\": 2, \"moe_intermediate_size\": 32, "
                                              "\"norm_topk_prob\": true, \"decoder_sparse_step\": 2, "
                                              "\"mlp_only_layers\": [3]"),
                                 "config.json", &e),
                 0);
    CHECK(c.n_experts == 8 && c.n_experts_used == 2 && c.moe_hidden_dim == 32 && c.moe_norm_topk && c.moe_step == 2);
    /* (l + 1) % 2 == 0 and not layer 3: only layer 1 */
    CHECK(!config_layer_moe(&c, 0) && config_layer_moe(&c, 1) && !config_layer_moe(&c, 2) && !config_layer_moe(&c, 3));
    CHECK(config_ffn_layers(&c, true) == 1 && config_ffn_layers(&c, false) == 3);
    CHECK(config_ffn_slot(&c, 1) == 0 && config_ffn_slot(&c, 2) == 1 && config_ffn_slot(&c, 3) == 2);

    TEST("config.json qwen3_moe: an unknown or unsupported expert setting is one data error naming its key");
    const struct {
        const char *json, *says;
    } bad[] = {
        {", \"shared_expert_intermediate_size\": 512", "key \"shared_expert_intermediate_size\": an expert setting"},
        {", \"n_routed_experts\": 8", "key \"n_routed_experts\""},
        {", \"moe_layer_freq\": 1", "key \"moe_layer_freq\""},
        {", \"topk_method\": \"greedy\"", "key \"topk_method\""},
        {", \"scoring_func\": \"sigmoid\"", "key \"scoring_func\""},
        {", \"num_experts\": 0", "key \"num_experts\": expected an integer from 1"},
        {", \"num_experts\": 4, \"num_experts_per_tok\": 5", "num_experts_per_tok\": 5 is more than num_experts (4)"},
        {", \"num_local_experts\": 7", "key \"num_local_experts\": expected the same integer as num_experts (128)"},
        {", \"norm_topk_prob\": 1", "key \"norm_topk_prob\": expected true or false"},
        {", \"mlp_only_layers\": [4]", "key \"mlp_only_layers\": expected layer indices below 4"},
        {", \"mlp_only_layers\": 1", "key \"mlp_only_layers\": expected a list"},
        {", \"decoder_sparse_step\": 0", "key \"decoder_sparse_step\": expected an integer from 1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        gerr ei = {0};
        int rc = config_parse_hf(&c, moe_json(bad[i].json), "config.json", &ei);
        CHECK_EQ_INT(rc, EX_DATAERR);
        if (!strstr(ei.msg, bad[i].says) || !strstr(ei.msg, "config.json") || strchr(ei.msg, '\n'))
            printf("#   %s -> %s\n", bad[i].json, ei.msg), check_current_failed = 1;
    }
}

/* A model of moe_json's config, 2 of 4 experts of width 32 and extra's
 * keys, allocated (zeroed). */
static void moe_model(model *m, const char *extra) {
    char json[512];
    snprintf(json, sizeof json, ", \"num_experts\": 4, \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 32%s",
             extra);
    memset(m, 0, sizeof *m);
    gerr e = {0};
    CHECK_EQ_INT(config_parse_hf(&m->cfg, moe_json(json), "config.json", &e), 0);
    CHECK_EQ_INT(model_alloc(m, &e), 0);
}

/* The parameter layout: the FFN tensors of each kind only in its layers,
 * experts named as HF does and stacked as GGUF does. */
static void test_layout(void) {
    TEST("qwen3_moe parameters: dense FFNs in their layers, router and experts in the sparse ones, HF and GGUF names");
    model m;
    moe_model(&m, ", \"mlp_only_layers\": [0, 2]");
    CHECK_EQ_INT((int)m.param_sizes[P_W_GATE], 2 * 96 * 64);
    CHECK_EQ_INT((int)m.param_sizes[P_ROUTER], 2 * 4 * 64);
    CHECK_EQ_INT((int)m.param_sizes[P_EXP_DOWN], 2 * 4 * 64 * 32);
    CHECK(model_layer_tensor(&m, P_EXP_UP, 3) == m.w.exp_up + 4 * 32 * 64);
    CHECK(model_layer_tensor(&m, P_W_UP, 2) == m.w.w_up + 96 * 64);
    size_t n = model_tensor_list(&m, NULL);
    model_tensor_ref *refs = calloc(n, sizeof *refs);
    model_tensor_list(&m, refs);
    int experts = 0, routers = 0, dense = 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        const model_tensor_ref *r = &refs[i];
        if (r->param == P_EXP_DOWN && r->layer == 3 && r->expert == 2) {
            CHECK_EQ_STR(r->hf, "model.layers.3.mlp.experts.2.down_proj.weight");
            CHECK_EQ_STR(r->gguf, "blk.3.ffn_down_exps.weight");
            CHECK(r->rows == 64 && r->cols == 32 && r->dst == m.w.exp_down + (4 + 2) * 64 * 32);
        }
        if (r->param == P_ROUTER && r->layer == 1) CHECK_EQ_STR(r->hf, "model.layers.1.mlp.gate.weight");
        experts += r->expert >= 0;
        routers += r->param == P_ROUTER;
        dense += r->param == P_W_DOWN;
        bool dense_layer = r->layer == 0 || r->layer == 2;
        bad += (r->param == P_W_DOWN && !dense_layer) || (r->param == P_ROUTER && dense_layer);
        bad += r->expert >= 0 && r->param != P_EXP_GATE && r->param != P_EXP_UP && r->param != P_EXP_DOWN;
    }
    CHECK_EQ_INT(experts, 2 * 4 * 3);
    CHECK_EQ_INT(routers, 2);
    CHECK_EQ_INT(dense, 2);
    CHECK_EQ_INT(bad, 0);
    free(refs);
    model_free(&m);
}

/* A device backend without the mixture-of-experts ops (the fake device
 * with them taken out): the model is refused in one line before anything
 * is copied; with them it goes to the device (test_fake_device runs it). */
static void test_device_refused(void) {
    TEST("model_to_backend: a mixture of experts on a backend without its ops is refused in one line (--device cpu)");
    model m;
    moe_model(&m, "");
    backend lacking = *fake_device();
    lacking.moe_group = NULL;
    gerr e = {0};
    CHECK_EQ_INT(model_to_backend(&m, &lacking, &e), EX_USAGE);
    CHECK(strstr(e.msg, "--device fake-device: a mixture of experts (Qwen3MoeForCausalLM) runs on the CPU only") &&
          !strchr(e.msg, '\n'));
    CHECK(m.dev == NULL);
    CHECK_EQ_INT(model_to_backend(&m, fake_device(), &e), 0);
    CHECK(m.dev != NULL);
    model_free(&m);
}

/* gpt-oss's clamped SwiGLU in double. */
static double clamped_ref(double g, double u, double alpha, double limit) {
    g = fmin(g, limit), u = fmax(-limit, fmin(u, limit));
    return g / (1 + exp(-alpha * g)) * (u + 1);
}

static void test_swiglu_clamped(void) {
    TEST("swiglu_clamped: forward as gpt-oss's (alpha 1.702, limit 7), backward against central differences");
    enum { M = 64 };
    const float alpha = 1.702f, limit = 7.0f;
    float g[M], u[M], dh[M], out[M], dg[M], du[M];
    fill(g, M, 10.0, 7), fill(u, M, 10.0, 8), fill(dh, M, 1.0, 9);
    g[0] = 7.5f, u[0] = -8.0f; /* both clamped: no gradient */
    g[1] = -3.0f, u[1] = 9.0f;
    swiglu_clamped_forward(out, g, u, M, alpha, limit);
    swiglu_clamped_backward(dg, du, dh, g, u, M, alpha, limit);
    double fwd = 0, bwd = 0;
    int clamped = 0;
    const double h = 1e-4;
    for (int i = 0; i < M; i++) {
        fwd = fmax(fwd, fabs(out[i] - clamped_ref(g[i], u[i], alpha, limit)) / fmax(1, fabs(out[i])));
        if (fabs(g[i] - limit) < 1e-2 || fabs(fabs(u[i]) - limit) < 1e-2) continue; /* a kink */
        double ng = (clamped_ref(g[i] + h, u[i], alpha, limit) - clamped_ref(g[i] - h, u[i], alpha, limit)) / (2 * h);
        double nu = (clamped_ref(g[i], u[i] + h, alpha, limit) - clamped_ref(g[i], u[i] - h, alpha, limit)) / (2 * h);
        bwd = fmax(bwd, fabs(dg[i] - dh[i] * ng) / fmax(1, fabs(dh[i] * ng)));
        bwd = fmax(bwd, fabs(du[i] - dh[i] * nu) / fmax(1, fabs(dh[i] * nu)));
        clamped += g[i] > limit || fabs(u[i]) > limit;
    }
    CHECK_NEAR(fwd, 0, 1e-6);
    CHECK_NEAR(bwd, 0, 1e-5);
    CHECK(clamped >= 10); /* the clamps were crossed */
    CHECK(dg[0] == 0 && du[0] == 0 && du[1] == 0 && dg[1] != 0);
}

int main(void) {
    test_route();
    test_route_backward(false, false);
    test_route_backward(true, false);
    test_route_replay();
    test_route_backward(false, true);
    test_route_backward(true, true);
    test_group_combine();
    test_swiglu_clamped();
    test_config();
    test_layout();
    test_device_refused();
    return check_done();
}
