/* lib/ops/packed.c against a float64 reference, against its own definition
 * bit for bit (fused multiply-adds over k in order from zero, then the
 * bias: what both kernels, AVX-512 and AVX2, must compute), a row alone
 * against the same row among others, and a packed model's forward against
 * the same model row-major. Skipped (reported) on a CPU without AVX-512 or
 * AVX2 with FMA, where nothing is packed. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model/model.h"
#include "ops/packed.h"
#include "runner/weights.h"

static uint64_t rng_state = 0x2545F4914F6CDD1DULL;
static float uniform(void) { /* xorshift: [-0.5, 0.5) */
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (float)((rng_state >> 11) * 0x1.0p-53 - 0.5);
}

/* out = in W^T (+ bias) through the panels, against float64 sums of the same
 * floats: shapes with partial row blocks (m not a multiple of 8, of the
 * 64-row chunk), partial panels (n not a multiple of 32) and odd k. */
static void test_matmul(void) {
    TEST("packed_matmul equals a float64 sum for every shape class (partial rows, partial panels, bias)");
    const int shapes[][3] = {{1, 32, 1}, {7, 50, 17}, {8, 96, 64}, {9, 33, 5}, {64, 192, 576}, {130, 70, 31}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        float *x = malloc(sizeof(float) * (size_t)m * k), *w = malloc(sizeof(float) * (size_t)n * k);
        float *bias = malloc(sizeof(float) * (size_t)n), *p = malloc(sizeof(float) * packed_floats(n, k));
        float *out = malloc(sizeof(float) * (size_t)m * n);
        CHECK(x && w && bias && p && out);
        if (!x || !w || !bias || !p || !out) return;
        for (size_t i = 0; i < (size_t)m * k; i++) x[i] = uniform();
        for (size_t i = 0; i < (size_t)n * k; i++) w[i] = uniform();
        for (int i = 0; i < n; i++) bias[i] = uniform();
        CHECK_EQ_INT(packed_floats(n, k), (size_t)((n + 31) / 32) * 32 * k);
        packed_pack(p, w, n, k);
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            /* a canary past the output must stay */
            memset(out, 0x7f, sizeof(float) * (size_t)m * n);
            packed_matmul(out, x, p, with_bias ? bias : NULL, m, k, n);
            double worst = 0;
            for (int r = 0; r < m; r++)
                for (int c = 0; c < n; c++) {
                    double ref = with_bias ? bias[c] : 0;
                    for (int i = 0; i < k; i++) ref += (double)x[(size_t)r * k + i] * w[(size_t)c * k + i];
                    worst = fmax(worst, fabs(ref - out[(size_t)r * n + c]));
                }
            /* fp32 sums of k products of numbers below 0.5: a few ulps of sqrt(k)/4 */
            if (!(worst <= 2e-6 * (1 + k / 16.0))) printf("#   %dx%dx%d bias %d: worst %.3g\n", m, n, k, with_bias, worst);
            CHECK(worst <= 2e-6 * (1 + k / 16.0));
        }
        free(x), free(w), free(bias), free(p), free(out);
    }
}

/* Every output is fmaf over k in order from zero, plus the bias, to the
 * bit: so the AVX-512 and the AVX2 kernel agree, and a row does not depend
 * on the rows computed with it (each row alone, then all 13 at once). */
static void test_exact_order(void) {
    TEST("packed_matmul is fmaf over k in order, then the bias, to the bit; a row alone gives the same bits");
    enum { M = 13, N = 70, K = 37 };
    float x[M * K], w[N * K], bias[N], p[((N + 31) / 32) * 32 * K], out[M * N], one[N];
    for (int i = 0; i < M * K; i++) x[i] = uniform();
    for (int i = 0; i < N * K; i++) w[i] = uniform();
    for (int i = 0; i < N; i++) bias[i] = uniform();
    packed_pack(p, w, N, K);
    packed_matmul(out, x, p, bias, M, K, N);
    int wrong = 0, alone = 0;
    for (int r = 0; r < M; r++) {
        for (int c = 0; c < N; c++) {
            float acc = 0.0f;
            for (int i = 0; i < K; i++) acc = fmaf(x[r * K + i], w[c * K + i], acc);
            float want = acc + bias[c];
            wrong += memcmp(&want, &out[r * N + c], sizeof want) != 0;
        }
        packed_matmul(one, x + r * K, p, bias, 1, K, N);
        alone += memcmp(one, out + r * N, sizeof one) != 0;
    }
    if (wrong || alone) printf("#   %d outputs off the definition, %d rows differ alone\n", wrong, alone);
    CHECK(wrong == 0);
    CHECK(alone == 0);
}

static void fill(model *m, uint64_t seed) {
    rng_state = seed;
    for (size_t i = 0; i < m->n_params; i++) m->params_memory[i] = uniform();
}

/* Two copies of one random model, one packed: the same logits for a prefill
 * and a decode step. Dimensions are whole panels (32), so everything packs;
 * tied, the head is a packed copy and the embeddings stay row-major. */
static void test_model_packed(bool tied) {
    TEST(tied ? "a packed model (tied head: packed copy) gives the row-major model's logits"
              : "a packed model (untied head packed in place) gives the row-major model's logits");
    model_config cfg = {.arch = ARCH_LLAMA, .dim = 32, .hidden_dim = 64, .n_layers = 2, .n_heads = 2,
                        .n_kv_heads = 2, .head_dim = 16, .vocab_size = 96, .max_seq_len = 64, .rope_theta = 10000,
                        .norm_eps = 1e-5f, .tied_embeddings = tied, .bos_id = -1, .pad_id = -1};
    model a, b;
    memset(&a, 0, sizeof a), memset(&b, 0, sizeof b);
    a.cfg = b.cfg = cfg;
    gerr e = {0};
    if (model_alloc(&a, &e) || model_alloc(&b, &e)) {
        CHECK(0);
        return;
    }
    model_init_rope(&a), model_init_rope(&b);
    fill(&a, 77), fill(&b, 77);
    CHECK_EQ_INT(model_pack_for_inference(&b, WEIGHTS_F32, &e), 0);
    CHECK(b.packed);
    CHECK(b.head_packed != NULL);
    CHECK(tied ? b.head_packed == b.head_packed_own : b.head_packed == b.w.lm_head);
    CHECK_EQ_INT(model_pack_for_inference(&b, WEIGHTS_F32, &e), 0); /* a second call changes nothing */
    /* what stays row-major stays: the embeddings and the norms */
    CHECK(memcmp(a.w.tok_embd, b.w.tok_embd, sizeof(float) * 96 * 32) == 0);
    CHECK(memcmp(a.w.attn_norm, b.w.attn_norm, sizeof(float) * 2 * 32) == 0);
    enum { T = 9, V = 96 };
    int32_t tok[T + 1];
    int seq[T + 1], pos[T + 1];
    for (int i = 0; i <= T; i++) tok[i] = (i * 29 + 7) % V, seq[i] = 0, pos[i] = i;
    float la[T * V], lb[T * V], da[V], db[V];
    model *ms[2] = {&a, &b};
    float *pre[2] = {la, lb}, *dec[2] = {da, db};
    for (int j = 0; j < 2; j++) {
        kv_cache c;
        model_scratch s;
        CHECK_EQ_INT(kv_cache_init(&c, &cfg, 1, T + 1, &e), 0);
        CHECK_EQ_INT(model_scratch_init(&s, &cfg, T, T + 1, &e), 0);
        model_forward(ms[j], &c, T, seq, pos, tok, NULL, pre[j], &s);
        model_forward(ms[j], &c, 1, seq + T, pos + T, tok + T, NULL, dec[j], &s); /* one decode row */
        model_scratch_free(&s);
        kv_cache_free(&c);
    }
    double worst = 0, biggest = 0;
    for (int i = 0; i < T * V; i++) worst = fmax(worst, fabs(la[i] - lb[i])), biggest = fmax(biggest, fabs(la[i]));
    for (int i = 0; i < V; i++) worst = fmax(worst, fabs(da[i] - db[i]));
    printf("#   max abs diff %.3g of logits up to %.3g\n", worst, biggest);
    CHECK(worst <= 1e-5 * fmax(1, biggest)); /* summation order only */
    CHECK(biggest > 0.1);
    model_free(&a), model_free(&b);
}

/* A matrix that is not whole panels: nothing is packed, the model unchanged. */
static void test_model_not_packed(void) {
    TEST("a model whose matrices are not whole panels is left row-major");
    model m;
    memset(&m, 0, sizeof m);
    m.cfg = (model_config){.arch = ARCH_LLAMA, .dim = 32, .hidden_dim = 48, .n_layers = 1, .n_heads = 2,
                           .n_kv_heads = 2, .head_dim = 16, .vocab_size = 64, .max_seq_len = 16,
                           .rope_theta = 10000, .norm_eps = 1e-5f, .bos_id = -1, .pad_id = -1};
    gerr e = {0};
    if (model_alloc(&m, &e)) {
        CHECK(0);
        return;
    }
    fill(&m, 5);
    float first = m.w.wq[1];
    CHECK_EQ_INT(model_pack_for_inference(&m, WEIGHTS_F32, &e), 0);
    CHECK(!m.packed);
    CHECK(m.head_packed == NULL);
    CHECK(m.w.wq[1] == first);
    model_free(&m);
}

/* grpo-rollout --env prefills an environment's answer in the decode step's
 * call, beside the other sequences' next tokens: for every weight format,
 * with the cache that goes with it, those rows give the same bits as the
 * continuation prefilled in a call of its own, the decode rows the same as
 * alone, and the caches they leave give the same next step. */
static void test_continuation_in_decode_call(void) {
    TEST("a continuation prefilled beside other sequences' decode rows: the same bits as alone (f32, bf16, q8)");
    model_config cfg = {.arch = ARCH_LLAMA, .dim = 64, .hidden_dim = 96, .n_layers = 2, .n_heads = 4,
                        .n_kv_heads = 2, .head_dim = 16, .vocab_size = 96, .max_seq_len = 64, .rope_theta = 10000,
                        .norm_eps = 1e-5f, .bos_id = -1, .pad_id = -1};
    /* prompts of 5, 7 and 6 tokens; sequence 1 then prefills C tokens (past
     * ATT_MIN_ROWS, so attention takes them as a tile), 0 and 2 decode one */
    enum { S = 3, C = 11, V = 96, L = 32 };
    const int len[S] = {5, 7, 6};
    const weight_format fmts[] = {WEIGHTS_F32, WEIGHTS_BF16, WEIGHTS_Q8};
    for (size_t f = 0; f < sizeof fmts / sizeof fmts[0]; f++) {
        model m;
        memset(&m, 0, sizeof m);
        m.cfg = cfg;
        gerr e = {0};
        if (model_alloc(&m, &e)) {
            CHECK(0);
            return;
        }
        model_init_rope(&m);
        fill(&m, 901 + f);
        CHECK_EQ_INT(model_pack_for_inference(&m, fmts[f], &e), 0);
        CHECK(m.packed);
        float out[2][S * V], next[2][S * V];
        for (int mixed = 0; mixed < 2; mixed++) {
            kv_cache c;
            model_scratch s;
            CHECK_EQ_INT(kv_cache_init_as(&c, NULL, &cfg, S, L, weights_kv_format(fmts[f]), &e), 0);
            CHECK_EQ_INT(model_scratch_init(&s, &cfg, 2 * L, L, &e), 0);
            int seq[2 * L], pos[2 * L];
            int32_t tok[2 * L];
            bool want[2 * L];
            float scratch_logits[V];
            for (int q = 0; q < S; q++) { /* the prompts, one call each */
                for (int i = 0; i < len[q]; i++) seq[i] = q, pos[i] = i, tok[i] = (int32_t)((i * 29 + 7 * q + 3) % V);
                for (int i = 0; i < len[q]; i++) want[i] = i == len[q] - 1;
                model_forward(&m, &c, len[q], seq, pos, tok, want, scratch_logits, &s);
            }
            /* the step: rows of sequence 0, 1 (C of them), 2 in slot order */
            int n = 0;
            for (int q = 0; q < S; q++) {
                int k = q == 1 ? C : 1;
                for (int i = 0; i < k; i++, n++) {
                    seq[n] = q, pos[n] = len[q] + i, tok[n] = (int32_t)((i * 13 + 5 * q + 1) % V);
                    want[n] = i == k - 1;
                }
            }
            if (mixed) {
                model_forward(&m, &c, n, seq, pos, tok, want, out[1], &s);
            } else { /* each sequence's rows in a call of their own */
                for (int q = 0, at = 0; q < S; q++) {
                    int k = q == 1 ? C : 1;
                    model_forward(&m, &c, k, seq + at, pos + at, tok + at, want + at, out[0] + q * V, &s);
                    at += k;
                }
            }
            /* the next step reads what the step cached: one decode row each */
            for (int q = 0; q < S; q++) {
                seq[q] = q, pos[q] = len[q] + (q == 1 ? C : 1), tok[q] = (int32_t)(q + 40);
            }
            model_forward(&m, &c, S, seq, pos, tok, NULL, next[mixed], &s);
            model_scratch_free(&s);
            kv_cache_free(&c);
        }
        CHECK(memcmp(out[0], out[1], sizeof out[0]) == 0);
        CHECK(memcmp(next[0], next[1], sizeof next[0]) == 0);
        bool finite = true;
        for (int i = 0; i < S * V; i++) finite = finite && isfinite(out[1][i]) && isfinite(next[1][i]);
        CHECK(finite);
        model_free(&m);
    }
}

int main(void) {
    if (!packed_supported()) {
        printf("ok 1 - # SKIP neither AVX-512 nor AVX2 with FMA on this CPU: weights stay row-major (OpenBLAS)\n1..1\n");
        return 0;
    }
    test_matmul();
    test_exact_order();
    test_model_packed(false);
    test_model_packed(true);
    test_model_not_packed();
    test_continuation_in_decode_call();
    return check_done();
}
