/* Unit tests of lib/train's model side (trainer.h, attn_train.h,
 * train_ops.h) on tiny random models built here: finite-difference spot
 * checks of the gradient, micro-batches adding up to the whole batch,
 * --recompute giving the same gradients, LoRA with B = 0 leaving the model
 * unchanged, and the INFER forward agreeing with the training forward and
 * with lib/model's KV-cache forward.
 *
 * Driver mode (tests/ref/train_ref.py, PyTorch autograd as the reference):
 *   test_train --grad MODEL_DIR BATCH.json OUT.safetensors
 *   (a sequence's "routing", [position][layer with experts][k] ids for
 *   every position but the last, is replayed as grpo-update --routing
 *   replay replays a record's)
 * loads the model, reads the batch (sequences, prompt lengths, advantages,
 * old and reference log-probs per completion token, an optional multi-turn
 * "mask" per completion token (completion_mask), loss settings, an optional
 * LoRA, "compute": "bf16" for backend_cpu_bf16: 69 where the CPU lacks it,
 * "router_aux_coef" for the router's load-balancing loss (its value written
 * as "balance"),
 * "base_weights": "bf16", "q8" or "q4k" for a LoRA over a frozen base loaded
 * packed so as grpo-update loads it (model_load_adapter_frozen: a Q4_K
 * GGUF's matrices its blocks), "mxfp4" for one whose MXFP4 experts load from
 * the file's blocks (model_load_for_inference, a frozen plan), its packed
 * matrices then written as the kernels read them, "base." + HF name),
 * runs the GRPO loss forward and backward on the mask-1 tokens (all
 * without a mask) and writes their logp, the loss and every
 * gradient (HF or PEFT names, prefixed "grad.") plus the LoRA factors used. */
#include <cjson/cJSON.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tiny_train.h"
#include "ckpt/load.h"
#include "formats/safetensors.h"
#include "model/lora.h"
#include "model/model.h"
#include "io/completion_mask.h"
#include "train/loss.h"
#include "train/trainer.h"
#include "util/rng.h"

/* Three sequences of different lengths, prompts of 1 to 5 tokens. */
enum { N_SEQS = 3 };
static const int seq_len[N_SEQS] = {9, 14, 5}, seq_prompt[N_SEQS] = {3, 5, 1};

typedef struct {
    int start[N_SEQS + 1], n_prompt[N_SEQS];
    int32_t tokens[64];
    train_batch b;
} tiny_batch;

static void make_batch(tiny_batch *tb, int first, int n, int vocab) {
    rng_stream r;
    rng_init(&r, 3, "batch", 5, 0);
    int32_t all[N_SEQS][32];
    for (int s = 0; s < N_SEQS; s++)
        for (int i = 0; i < seq_len[s]; i++) all[s][i] = (int32_t)rng_below(&r, (uint64_t)vocab);
    tb->start[0] = 0;
    for (int s = 0; s < n; s++) {
        int src = first + s;
        memcpy(tb->tokens + tb->start[s], all[src], (size_t)seq_len[src] * sizeof(int32_t));
        tb->start[s + 1] = tb->start[s] + seq_len[src];
        tb->n_prompt[s] = seq_prompt[src];
    }
    tb->b = (train_batch){n, tb->start, tb->n_prompt, tb->tokens, NULL, NULL, NULL, 0};
}

static void test_finite_differences(model_arch arch, bool tied, const char *name) {
    TEST(name);
    model m;
    if (tiny_model(&m, arch, tied)) {
        CHECK(0);
        return;
    }
    tiny_batch tb;
    make_batch(&tb, 0, N_SEQS, m.cfg.vocab_size);
    trainer t;
    gerr e = {0};
    CHECK(trainer_init(&t, &m, NULL, TRAINER_FULL, false, 64, 0, 32, 64, &e) == 0);
    trainer_zero_grad(&t);
    linear_loss(&t, &tb.b, 0.8f, true, 0);
    /* a few entries of every tensor: central differences in float32 with a
     * step of 1e-2 agree with the analytic gradient to ~1e-3 relative */
    int checked = 0, bad = 0;
    for (int p = 0; p < MODEL_N_PARAMS; p++) {
        if (!m.param_sizes[p] || (p == P_LM_HEAD && tied)) continue;
        for (int k = 0; k < 3; k++) {
            size_t i = (size_t)(k * 7919 + p * 31) % m.param_sizes[p];
            float *w = m.w.t[p] + i, saved = *w, h = 1e-2f;
            *w = saved + h;
            double lp = linear_loss(&t, &tb.b, 0.8f, false, 0);
            *w = saved - h;
            double lm = linear_loss(&t, &tb.b, 0.8f, false, 0);
            *w = saved;
            double fd = (lp - lm) / (2.0 * h), an = t.g.t[p][i];
            checked++;
            if (fabs(fd - an) > 2e-3 + 2e-2 * fabs(fd)) {
                bad++;
                fprintf(stderr, "# %s: %s[%zu] analytic %.6g finite-difference %.6g\n", name, model_param_name(p), i, an, fd);
            }
        }
    }
    CHECK(checked > 30);
    CHECK_EQ_INT(bad, 0);
    trainer_free(&t);
    model_free(&m);
}

/* Gradients of a batch equal the sum over two micro-batches; recompute gives
 * the same bits as keeping every layer. */
static void test_micro_batches_and_recompute(void) {
    TEST("micro-batches add up to the batch; --recompute changes nothing");
    model m;
    tiny_model(&m, ARCH_QWEN2, false);
    gerr e = {0};
    trainer whole, parts, rec;
    CHECK(trainer_init(&whole, &m, NULL, TRAINER_FULL, false, 64, 0, 32, 64, &e) == 0);
    CHECK(trainer_init(&parts, &m, NULL, TRAINER_FULL, false, 64, 0, 32, 64, &e) == 0);
    CHECK(trainer_init(&rec, &m, NULL, TRAINER_FULL, true, 64, 0, 32, 64, &e) == 0);
    tiny_batch all, a, b;
    make_batch(&all, 0, N_SEQS, m.cfg.vocab_size);
    make_batch(&a, 0, 1, m.cfg.vocab_size);
    make_batch(&b, 1, 2, m.cfg.vocab_size);
    trainer_zero_grad(&whole), trainer_zero_grad(&parts), trainer_zero_grad(&rec);
    double l_all = linear_loss(&whole, &all.b, 1.0f, true, 0);
    double l_rec = linear_loss(&rec, &all.b, 1.0f, true, 0);
    double l_parts = linear_loss(&parts, &a.b, 1.0f, true, 0);
    l_parts += linear_loss(&parts, &b.b, 1.0f, true, train_batch_targets(&a.b));
    CHECK_NEAR(l_all, l_parts, 1e-4 * fabs(l_all));
    CHECK(l_all == l_rec);
    double md = 0, mx = 0, mr = 0;
    for (size_t i = 0; i < m.n_params; i++) {
        md = fmax(md, fabs((double)whole.grad[i] - parts.grad[i]));
        mr = fmax(mr, fabs((double)whole.grad[i] - rec.grad[i]));
        mx = fmax(mx, fabs((double)whole.grad[i]));
    }
    CHECK(mx > 0);
    CHECK(md <= 1e-5 * mx);
    CHECK(mr == 0);
    trainer_free(&whole), trainer_free(&parts), trainer_free(&rec);
    model_free(&m);
}

/* --group-sums: each micro-batch's gradient folded into float64 sums. */
static void test_group_sums(void) {
    TEST("trainer_fold_grad: the float64 sums are the micro-batches' gradients added in double; fold zeroes them");
    model m;
    tiny_model(&m, ARCH_LLAMA, false);
    gerr e = {0};
    trainer alone_a, alone_b, folded;
    CHECK(trainer_init(&alone_a, &m, NULL, TRAINER_FULL, false, 64, 0, 32, 64, &e) == 0);
    CHECK(trainer_init(&alone_b, &m, NULL, TRAINER_FULL, false, 64, 0, 32, 64, &e) == 0);
    CHECK(trainer_init(&folded, &m, NULL, TRAINER_FULL, false, 64, 0, 32, 64, &e) == 0);
    CHECK(folded.grad_sum == NULL);
    CHECK(trainer_keep_sums(&folded, &e) == 0);
    tiny_batch a, b;
    make_batch(&a, 0, 1, m.cfg.vocab_size);
    make_batch(&b, 1, 2, m.cfg.vocab_size);
    trainer_zero_grad(&alone_a), trainer_zero_grad(&alone_b), trainer_zero_grad(&folded);
    linear_loss(&alone_a, &a.b, 1.0f, true, 0);
    linear_loss(&alone_b, &b.b, 1.0f, true, train_batch_targets(&a.b));
    linear_loss(&folded, &a.b, 1.0f, true, 0);
    trainer_fold_grad(&folded);
    size_t zero = 0, same_a = 0;
    for (size_t i = 0; i < m.n_params; i++) {
        zero += folded.grad[i] == 0.0f;
        same_a += folded.grad_sum[i] == (double)alone_a.grad[i];
    }
    CHECK(zero == m.n_params);
    CHECK(same_a == m.n_params);
    linear_loss(&folded, &b.b, 1.0f, true, train_batch_targets(&a.b));
    trainer_fold_grad(&folded);
    size_t exact = 0, moved = 0;
    for (size_t i = 0; i < m.n_params; i++) {
        exact += folded.grad_sum[i] == (double)alone_a.grad[i] + (double)alone_b.grad[i];
        moved += alone_b.grad[i] != 0.0f;
    }
    CHECK(exact == m.n_params);
    CHECK(moved > 0);
    trainer_zero_grad(&folded);
    size_t cleared = 0;
    for (size_t i = 0; i < m.n_params; i++) cleared += folded.grad_sum[i] == 0.0;
    CHECK(cleared == m.n_params);
    trainer_free(&alone_a), trainer_free(&alone_b), trainer_free(&folded);
    model_free(&m);
}

/* A rank-4 adapter (alpha 8) on the named targets, initialised with seed 5. */
static void test_lora(void) {
    TEST("LoRA: B = 0 leaves logp unchanged, only A/B get gradients, lora_off is the base");
    model m;
    tiny_model(&m, ARCH_LLAMA, true);
    gerr e = {0};
    lora l;
    tiny_lora(&l, &m, "q,k,v,o,gate,up,down", 0.0);
    trainer base, lt;
    CHECK(trainer_init(&base, &m, NULL, TRAINER_INFER, false, 64, 0, 32, 64, &e) == 0);
    CHECK(trainer_init(&lt, &m, &l, TRAINER_LORA, false, 64, 0, 32, 64, &e) == 0);
    tiny_batch tb;
    make_batch(&tb, 0, N_SEQS, m.cfg.vocab_size);
    float lp0[64], lp1[64], lp2[64];
    trainer_forward(&base, &tb.b, 1.0f, false, false, lp0, NULL);
    trainer_forward(&lt, &tb.b, 1.0f, false, false, lp1, NULL);
    int n = train_batch_targets(&tb.b);
    double d01 = 0;
    for (int j = 0; j < n; j++) d01 = fmax(d01, fabs(lp0[j] - lp1[j]));
    CHECK(d01 < 1e-6);
    /* with B random the adapter changes logp, and lora_off brings back the base */
    fill_uniform(l.memory, l.n_params, 0.2, 0.0, 9, 1);
    trainer_forward(&lt, &tb.b, 1.0f, false, false, lp1, NULL);
    trainer_forward(&lt, &tb.b, 1.0f, false, true, lp2, NULL);
    double d1 = 0, d2 = 0;
    for (int j = 0; j < n; j++) d1 = fmax(d1, fabs(lp0[j] - lp1[j])), d2 = fmax(d2, fabs(lp0[j] - lp2[j]));
    CHECK(d1 > 1e-3);
    CHECK(d2 == 0);
    trainer_zero_grad(&lt);
    linear_loss(&lt, &tb.b, 1.0f, true, 0);
    double gsum = 0;
    for (size_t i = 0; i < lt.n_grad; i++) gsum += fabs(lt.grad[i]);
    CHECK(gsum > 0);
    CHECK(lt.n_grad == l.n_params);
    trainer_free(&base), trainer_free(&lt);
    lora_free(&l);
    model_free(&m);
}

static void test_infer_matches_kv_forward(void) {
    TEST("INFER forward agrees with the KV-cache forward of lib/model");
    model m;
    tiny_model(&m, ARCH_QWEN3, false);
    gerr e = {0};
    trainer t;
    CHECK(trainer_init(&t, &m, NULL, TRAINER_INFER, false, 64, 0, 32, 64, &e) == 0);
    tiny_batch tb;
    make_batch(&tb, 1, 1, m.cfg.vocab_size);
    float logp[64];
    trainer_forward(&t, &tb.b, 1.0f, false, false, logp, NULL);
    kv_cache c;
    model_scratch s;
    CHECK(kv_cache_init(&c, &m.cfg, 1, 32, &e) == 0);
    CHECK(model_scratch_init(&s, &m.cfg, 32, 32, &e) == 0);
    int L = seq_len[1], P = seq_prompt[1], seq[32] = {0}, pos[32];
    for (int i = 0; i < L; i++) pos[i] = i;
    float *logits = malloc(sizeof(float) * 32 * m.cfg.vocab_size);
    model_forward(&m, &c, L, seq, pos, tb.tokens, NULL, logits, &s);
    double md = 0;
    for (int i = P; i < L; i++) {
        const float *z = logits + (size_t)(i - 1) * m.cfg.vocab_size;
        double mx = -INFINITY, sum = 0;
        for (int v = 0; v < m.cfg.vocab_size; v++) mx = fmax(mx, z[v]);
        for (int v = 0; v < m.cfg.vocab_size; v++) sum += exp(z[v] - mx);
        double ref = z[tb.tokens[i]] - mx - log(sum);
        md = fmax(md, fabs(ref - logp[i - P]));
    }
    CHECK(md < 1e-5);
    free(logits);
    kv_cache_free(&c);
    model_scratch_free(&s);
    trainer_free(&t);
    model_free(&m);
}

/* A prompt group's prompt computed once gives the log-probs and gradients of
 * computing it per sequence (float32 summation order aside). */
static void test_shared_prompts(model_arch arch, bool tied, bool use_lora, bool masked, const char *name) {
    TEST(name);
    model m;
    if (tiny_model(&m, arch, tied)) {
        CHECK(0);
        return;
    }
    gerr e = {0};
    lora l;
    if (use_lora) {
        tiny_lora(&l, &m, "q,k,v,o,gate,up,down", 0.0);
        fill_uniform(l.memory, l.n_params, 0.2, 0.0, 9, 1);
    }
    trainer_mode mode = use_lora ? TRAINER_LORA : TRAINER_FULL;
    trainer sh, un, inf_sh, inf_un;
    CHECK(trainer_init(&sh, &m, use_lora ? &l : NULL, mode, false, 64, 0, 32, 64, &e) == 0);
    CHECK(trainer_init(&un, &m, use_lora ? &l : NULL, mode, false, 64, 0, 32, 64, &e) == 0);
    CHECK(trainer_init(&inf_sh, &m, NULL, TRAINER_INFER, false, 64, 0, 32, 64, &e) == 0);
    CHECK(trainer_init(&inf_un, &m, NULL, TRAINER_INFER, false, 64, 0, 32, 64, &e) == 0);
    un.no_prompt_sharing = inf_un.no_prompt_sharing = true;
    group_batch gb;
    make_groups(&gb, m.cfg.vocab_size, masked);
    int n = train_batch_targets(&gb.b), rows = gb.start[G_SEQS];
    float a[64], b[64], ea[64], eb[64];
    trainer_forward(&inf_sh, &gb.b, 0.9f, false, false, a, ea);
    trainer_forward(&inf_un, &gb.b, 0.9f, false, false, b, eb);
    /* 4 + 3 prompt rows are shared: group 0's by two more sequences, group 1's by one */
    CHECK_EQ_INT(trainer_rows(&inf_sh), rows - 2 * 4 - 3);
    CHECK_EQ_INT(trainer_rows(&inf_un), rows);
    double dl = 0, de = 0;
    for (int j = 0; j < n; j++) dl = fmax(dl, fabs(a[j] - b[j])), de = fmax(de, fabs(ea[j] - eb[j]));
    CHECK(dl < 1e-5 && de < 1e-5);
    trainer_zero_grad(&sh), trainer_zero_grad(&un);
    double ls = linear_loss(&sh, &gb.b, 0.9f, true, 0), lu = linear_loss(&un, &gb.b, 0.9f, true, 0);
    CHECK_EQ_INT(trainer_rows(&sh), rows - 2 * 4 - 3);
    CHECK_NEAR(ls, lu, 1e-5 * fabs(lu));
    double md = 0, mx = 0;
    for (size_t i = 0; i < sh.n_grad; i++) {
        md = fmax(md, fabs((double)sh.grad[i] - un.grad[i]));
        mx = fmax(mx, fabs((double)un.grad[i]));
    }
    CHECK(mx > 0);
    CHECK(md <= 1e-5 * mx);
    if (md > 1e-5 * mx) fprintf(stderr, "# %s: gradients differ by %.3g of %.3g\n", name, md, mx);
    /* sized for the rows it computes (ASan checks the fit), the same gradients in less memory */
    trainer tight;
    CHECK_EQ_INT(train_batch_rows(&gb.b, true), rows - 2 * 4 - 3);
    CHECK_EQ_INT(train_batch_rows(&gb.b, false), rows);
    CHECK(trainer_init(&tight, &m, use_lora ? &l : NULL, mode, false, rows, train_batch_rows(&gb.b, true), 32, 64,
                       &e) == 0);
    CHECK(trainer_bytes(&tight) < trainer_bytes(&sh));
    trainer_zero_grad(&tight);
    CHECK(linear_loss(&tight, &gb.b, 0.9f, true, 0) == ls);
    double dt = 0;
    for (size_t i = 0; i < sh.n_grad; i++) dt = fmax(dt, fabs((double)sh.grad[i] - tight.grad[i]));
    CHECK(dt == 0);
    trainer_free(&tight);
    trainer_free(&sh), trainer_free(&un), trainer_free(&inf_sh), trainer_free(&inf_un);
    if (use_lora) lora_free(&l);
    model_free(&m);
}

/* A replayed routing (grpo-update --routing replay) and shared prompts: the
 * records of a group share their prompt's rows only where its routing is
 * the same; each is trained with its own routing either way. */
static void test_replay_shared_prompts(void) {
    TEST("replayed routing: a group shares its prompt rows only where their routing agrees; log-probs as unshared");
    model m;
    if (tiny_model(&m, ARCH_QWEN3_MOE, false)) {
        CHECK(0);
        return;
    }
    gerr e = {0};
    trainer sh, un;
    CHECK(trainer_init(&sh, &m, NULL, TRAINER_INFER, false, 64, 0, 32, 64, &e) == 0);
    CHECK(trainer_init(&un, &m, NULL, TRAINER_INFER, false, 64, 0, 32, 64, &e) == 0);
    un.no_prompt_sharing = true;
    group_batch gb;
    make_groups(&gb, m.cfg.vocab_size, false);
    int rows = gb.start[G_SEQS], n = train_batch_targets(&gb.b), k = m.cfg.n_experts_used;
    /* one layer with experts (tiny_model's layer 1): 2 different of 4 per row,
     * a group's prompt routed as its first sequence's */
    uint16_t routing[96 * 2];
    rng_stream r;
    rng_init(&r, 3, "routing", 7, 0);
    for (int i = 0; i < rows; i++) {
        routing[i * k] = (uint16_t)rng_below(&r, 4);
        routing[i * k + 1] = (uint16_t)((routing[i * k] + 1 + rng_below(&r, 3)) % 4);
    }
    for (int s = 1; s < G_SEQS; s++)
        if (gb.n_prompt[s] == gb.n_prompt[s - 1] && !memcmp(gb.tokens + gb.start[s], gb.tokens + gb.start[s - 1],
                                                             sizeof(int32_t) * (size_t)gb.n_prompt[s]))
            memcpy(routing + gb.start[s] * k, routing + gb.start[s - 1] * k, sizeof(uint16_t) * (size_t)gb.n_prompt[s] * k);
    gb.b.routing = routing, gb.b.routing_width = k;
    float own[64], same[64], same_un[64], other[64], other_un[64];
    train_batch plain = gb.b;
    plain.routing = NULL;
    trainer_forward(&sh, &plain, 0.9f, false, false, own, NULL);
    trainer_forward(&sh, &gb.b, 0.9f, false, false, same, NULL);
    CHECK_EQ_INT(trainer_rows(&sh), rows - 2 * 4 - 3); /* as without a routing */
    trainer_forward(&un, &gb.b, 0.9f, false, false, same_un, NULL);
    /* sequence 1 routes its prompt's last position otherwise (the experts are the last
     * layer's: only a target row shows it): it and sequence 2
     * (whose last prompt owner is then 1) compute their prompts */
    uint16_t *at = routing + (gb.start[1] + gb.n_prompt[1] - 1) * k;
    uint16_t others[2];
    for (int x = 0, j = 0; x < 4; x++) /* the two experts it did not go to */
        if (x != at[0] && x != at[1]) others[j++] = (uint16_t)x;
    at[0] = others[0], at[1] = others[1];
    trainer_forward(&sh, &gb.b, 0.9f, false, false, other, NULL);
    CHECK_EQ_INT(trainer_rows(&sh), rows - 3);
    CHECK_EQ_INT(train_batch_rows(&gb.b, true), rows - 3);
    trainer_forward(&un, &gb.b, 0.9f, false, false, other_un, NULL);
    double d_same = 0, d_other = 0, moved = 0, replayed = 0;
    for (int j = 0; j < n; j++) {
        d_same = fmax(d_same, fabs(same[j] - same_un[j]));
        d_other = fmax(d_other, fabs(other[j] - other_un[j]));
        moved = fmax(moved, fabs(other[j] - same[j]));
        replayed = fmax(replayed, fabs(same[j] - own[j]));
    }
    CHECK(d_same < 1e-5 && d_other < 1e-5);
    /* measured 0.56 and 0.52: the changed routing moved sequence 1's log-probs,
     * and the replayed routing is not the router's own */
    CHECK(moved > 1e-2 && replayed > 1e-2);
    trainer_free(&sh), trainer_free(&un);
    model_free(&m);
}

/* LoRA dropout keys its masks per sequence: a training pass with dropout
 * computes every prompt row; a pass without it (the old policy's log-probs)
 * still shares. */
static void test_shared_prompts_dropout(void) {
    TEST("LoRA dropout: the training pass keeps each sequence's prompt, a forward-only pass shares it");
    model m;
    tiny_model(&m, ARCH_LLAMA, false);
    gerr e = {0};
    lora l;
    tiny_lora(&l, &m, "q,v", 0.1);
    trainer t;
    CHECK(trainer_init(&t, &m, &l, TRAINER_LORA, false, 64, 0, 32, 64, &e) == 0);
    group_batch gb;
    make_groups(&gb, m.cfg.vocab_size, false);
    float lp[64];
    trainer_zero_grad(&t);
    linear_loss(&t, &gb.b, 1.0f, true, 0);
    CHECK_EQ_INT(trainer_rows(&t), gb.start[G_SEQS]);
    trainer_forward(&t, &gb.b, 1.0f, false, false, lp, NULL);
    CHECK_EQ_INT(trainer_rows(&t), gb.start[G_SEQS] - 2 * 4 - 3);
    trainer_free(&t);
    lora_free(&l);
    model_free(&m);
}

/* ---- driver mode --------------------------------------------------------------- */

/* The attention workspace is sized for the thread pool at trainer_init; a
 * larger pool afterwards (a caller changing --threads, a library setting
 * OMP_NUM_THREADS) must not let more threads into it (ASan catches an
 * overflow). The results equal a trainer made with the larger pool. */
static void test_threads_grow_after_init(void) {
    TEST("a thread pool grown after trainer_init stays inside the attention workspace");
    model m;
    if (tiny_model(&m, ARCH_QWEN3, false)) {
        CHECK(0);
        return;
    }
    tiny_batch tb;
    make_batch(&tb, 0, N_SEQS, m.cfg.vocab_size);
    int before = omp_get_max_threads();
    gerr e = {0};
    trainer small, big;
    omp_set_num_threads(1);
    CHECK(trainer_init(&small, &m, NULL, TRAINER_FULL, false, 64, 0, 32, 64, &e) == 0);
    omp_set_num_threads(4);
    CHECK(trainer_init(&big, &m, NULL, TRAINER_FULL, false, 64, 0, 32, 64, &e) == 0);
    trainer_zero_grad(&small);
    trainer_zero_grad(&big);
    double a = linear_loss(&small, &tb.b, 0.8f, true, 0), b = linear_loss(&big, &tb.b, 0.8f, true, 0);
    CHECK_NEAR(a, b, 1e-5 * fabs(b) + 1e-6);
    double worst = 0;
    for (size_t i = 0; i < small.n_grad; i++) {
        double d = fabs((double)small.grad[i] - big.grad[i]);
        worst = d > worst ? d : worst;
    }
    CHECK(worst < 1e-5);
    omp_set_num_threads(before);
    trainer_free(&small);
    trainer_free(&big);
    model_free(&m);
}

static double num(const cJSON *o, const char *k, double dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

static void read_floats(const cJSON *arr, float *out, int n) {
    for (int i = 0; i < n; i++) out[i] = (float)cJSON_GetArrayItem(arr, i)->valuedouble;
}

static int add_f32(st_writer *w, const char *name, int ndim, int64_t rows, int64_t cols, const float *data) {
    gerr e = {0};
    int64_t shape[2] = {rows, cols};
    if (st_writer_add(w, name, ST_F32, ndim, shape, data, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    return 0;
}

/* The matrices of m packed as a frozen base (each expert's apart; the
 * embeddings and the LM head, once when tied), as its kernels read them:
 * I W^T through matmul_forward_frozen (each output one product of 1 and a
 * weight, exact; the embedding lookup's rows are these bit for bit,
 * test_packed_rows), written as "base." + the HF name
 * (gpt_oss's stacked experts per slice, as their gradients) from *keep (the
 * writer holds the pointers: the caller frees *keep after st_write). */
static int add_base(st_writer *w, const model *m, float **keep) {
    size_t nt = model_tensor_list(m, NULL), off = 0;
    model_tensor_ref *refs = calloc(nt, sizeof *refs);
    model_tensor_list(m, refs);
    *keep = malloc(sizeof(float) * m->n_params);
    int rc = 0;
    for (size_t i = 0; i < nt && !rc; i++) {
        int p = refs[i].param, n = (int)refs[i].rows, k = (int)refs[i].cols;
        if (m->held[p] != HOLD_PACKED) continue; /* the embeddings and an untied head too */
        float *id = calloc((size_t)k * k, sizeof *id), *wt = malloc(sizeof(float) * (size_t)k * n);
        float *rows = *keep + off;
        off += (size_t)n * k;
        for (int j = 0; j < k; j++) id[(size_t)j * k + j] = 1.0f;
        matmul_forward_frozen(wt, id, refs[i].dst, m->held_as[p], NULL, k, k, n);
        for (int r = 0; r < n; r++)
            for (int j = 0; j < k; j++) rows[(size_t)r * k + j] = wt[(size_t)j * n + r];
        char name[160];
        snprintf(name, sizeof name, "base.%s", refs[i].hf);
        if (m->cfg.arch == ARCH_GPT_OSS && refs[i].expert >= 0)
            snprintf(name, sizeof name, "base.%s:%s:%d", refs[i].hf, model_param_name(p), refs[i].expert);
        rc = add_f32(w, name, 2, n, k, rows);
        free(id), free(wt);
    }
    free(refs);
    return rc;
}

static int driver(const char *dir, const char *batch_path, const char *out_path) {
    gerr e = {0};
    model m;
    if (model_load(&m, dir, &e)) return fprintf(stderr, "%s\n", e.msg), e.code;
    FILE *f = fopen(batch_path, "rb");
    if (!f) return perror(batch_path), 66;
    static char text[1 << 22];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = 0;
    cJSON *j = cJSON_Parse(text);
    if (!j) return fprintf(stderr, "%s: bad JSON\n", batch_path), 65;
    const cJSON *seqs = cJSON_GetObjectItemCaseSensitive(j, "seqs");
    int n = cJSON_GetArraySize(seqs), R = 0, n_t = 0, max_len = 0, max_completion = 1;
    int *start = calloc((size_t)n + 1, sizeof(int)), *n_prompt = calloc((size_t)n, sizeof(int));
    bool any_mask = false;
    for (int s = 0; s < n; s++) {
        const cJSON *q = cJSON_GetArrayItem(seqs, s);
        int L = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(q, "tokens"));
        n_prompt[s] = (int)num(q, "n_prompt", 1);
        start[s + 1] = start[s] + L;
        max_len = L > max_len ? L : max_len;
        max_completion = L - n_prompt[s] > max_completion ? L - n_prompt[s] : max_completion;
        any_mask |= cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(q, "mask"));
    }
    R = start[n];
    /* a multi-turn sequence's "mask" (completion_mask): its 0s are context,
     * left out of the targets as grpo-update leaves them out */
    uint8_t *target = any_mask ? calloc((size_t)R, 1) : NULL;
    /* "routing": replayed, the last position of each sequence routing itself */
    int route_w = config_ffn_layers(&m.cfg, true) * m.cfg.n_experts_used;
    uint16_t *routing = NULL;
    if (cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(seqs, 0), "routing")))
        routing = calloc((size_t)R * route_w + 1, sizeof *routing);
    int32_t *tokens = malloc(sizeof(int32_t) * (size_t)R);
    float *old = malloc(sizeof(float) * (size_t)R), *ref = malloc(sizeof(float) * (size_t)R);
    float *logp = malloc(sizeof(float) * (size_t)R), *dlogp = malloc(sizeof(float) * (size_t)R);
    float *ent = malloc(sizeof(float) * (size_t)R), *dent = malloc(sizeof(float) * (size_t)R);
    float *full = malloc(sizeof(float) * (size_t)max_completion);
    int *n_target = malloc(sizeof(int) * (size_t)n);
    double *adv = malloc(sizeof(double) * (size_t)n);
    for (int s = 0, o = 0; s < n; s++) {
        const cJSON *q = cJSON_GetArrayItem(seqs, s);
        const cJSON *tk = cJSON_GetObjectItemCaseSensitive(q, "tokens");
        const cJSON *mk = cJSON_GetObjectItemCaseSensitive(q, "mask");
        int L = start[s + 1] - start[s], nc = L - n_prompt[s];
        for (int i = 0; i < L; i++) tokens[start[s] + i] = (int32_t)cJSON_GetArrayItem(tk, i)->valueint;
        const cJSON *rt = cJSON_GetObjectItemCaseSensitive(q, "routing");
        for (int i = 0; routing && i < L - 1; i++) {
            const cJSON *at = cJSON_GetArrayItem(rt, i);
            for (int f = 0; f < route_w / m.cfg.n_experts_used; f++)
                for (int x = 0; x < m.cfg.n_experts_used; x++)
                    routing[((size_t)start[s] + i) * route_w + f * m.cfg.n_experts_used + x] =
                        (uint16_t)cJSON_GetArrayItem(cJSON_GetArrayItem(at, f), x)->valueint;
        }
        uint8_t *mask = NULL;
        if (target) {
            mask = target + start[s] + n_prompt[s];
            for (int i = 0; i < nc; i++) mask[i] = cJSON_IsArray(mk) ? cJSON_GetArrayItem(mk, i)->valueint == 1 : 1;
        }
        /* old and reference log-probs come per completion token, as in a record */
        read_floats(cJSON_GetObjectItemCaseSensitive(q, "old_logp"), full, nc);
        n_target[s] = completion_mask_select(full, mask, nc);
        memcpy(old + o, full, sizeof(float) * (size_t)n_target[s]);
        read_floats(cJSON_GetObjectItemCaseSensitive(q, "ref_logp"), full, nc);
        completion_mask_select(full, mask, nc);
        memcpy(ref + o, full, sizeof(float) * (size_t)n_target[s]);
        adv[s] = num(q, "advantage", 0);
        o += n_target[s];
        n_t += n_target[s];
    }
    loss_kind kind;
    const cJSON *lk = cJSON_GetObjectItemCaseSensitive(j, "loss");
    if (loss_kind_parse(cJSON_IsString(lk) ? lk->valuestring : "grpo", &kind, &e)) return fprintf(stderr, "%s\n", e.msg), 64;
    loss_opts lc = loss_opts_plain(kind, cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "sequence_level")),
                                   num(j, "epsilon", 0.2), num(j, "epsilon_high", 0.2), num(j, "beta", 0));
    lc.entropy_coef = num(j, "entropy_coef", 0);
    loss_batch lb = {n, n_t, (int)num(j, "max_new_tokens", 16), -INFINITY};
    if (lb.n_tokens == 0) return fprintf(stderr, "%s: no token to train on\n", batch_path), 65;
    float temp = (float)num(j, "temperature", 1.0);
    bool recompute = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "recompute"));
    int micro = (int)num(j, "micro_seqs", n);

    lora l = {0};
    const cJSON *lj = cJSON_GetObjectItemCaseSensitive(j, "lora");
    bool use_lora = cJSON_IsObject(lj);
    if (use_lora) {
        unsigned targets;
        const cJSON *tg = cJSON_GetObjectItemCaseSensitive(lj, "targets");
        if (lora_parse_targets(cJSON_IsString(tg) ? tg->valuestring : "all", &targets, &e) ||
            lora_alloc(&l, &m.cfg, (int)num(lj, "r", 4), num(lj, "alpha", 8),
                       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(lj, "rslora")), 0.0, targets, dir, &e))
            return fprintf(stderr, "%s\n", e.msg), 64;
        lora_init(&l, (uint64_t)num(lj, "seed", 1));
        /* B non-zero so that A gets a gradient too */
        for (int t = 0; t < LORA_N_SETS; t++)
            if (l.b[t]) fill_uniform(l.b[t], (size_t)l.n_mats[t] * l.out_dim[t] * l.r, 0.1, 0.0, 13, (uint64_t)t);
    }
    const cJSON *bw = cJSON_GetObjectItemCaseSensitive(j, "base_weights");
    bool packed = cJSON_IsString(bw) && strcmp(bw->valuestring, "f32");
    weight_format bfmt = !packed                             ? WEIGHTS_F32
                         : !strcmp(bw->valuestring, "bf16") ? WEIGHTS_BF16
                         : !strcmp(bw->valuestring, "q4k")  ? WEIGHTS_Q4K
                                                            : WEIGHTS_Q8;
    if (packed && !use_lora) return fprintf(stderr, "base_weights: LoRA only\n"), 64;
    if (packed && !strcmp(bw->valuestring, "mxfp4")) { /* loaded again, the experts from the file's blocks */
        model_free(&m);
        if (model_load_for_inference(&m, dir, false, (weight_choice){.fmt = WEIGHTS_MXFP4, .keep_mxfp4 = true, .frozen = true}, &e))
            return fprintf(stderr, "%s\n", e.msg), e.code;
    } else if (packed) { /* loaded again as grpo-update loads its frozen base: a Q4_K GGUF's blocks as they are */
        model_free(&m);
        lora none;
        bool adapter;
        if (model_load_adapter_frozen(dir, bfmt, &m, &none, &adapter, &e)) return fprintf(stderr, "%s\n", e.msg), e.code;
    }
    trainer t;
    if (trainer_init(&t, &m, use_lora ? &l : NULL, use_lora ? TRAINER_LORA : TRAINER_FULL, recompute, R, 0, max_len, n_t, &e))
        return fprintf(stderr, "%s\n", e.msg), e.code;
    /* "compute": "bf16" runs the matrix products as grpo-update --compute bf16 */
    const cJSON *cj = cJSON_GetObjectItemCaseSensitive(j, "compute");
    if (trainer_compute_backend(cJSON_IsString(cj) ? cj->valuestring : "f32", &m, backend_cpu_bf16(), &t.be, &e))
        return fprintf(stderr, "%s\n", e.msg), e.code;
    /* "router_aux_coef": the router's load-balancing loss over the batch's tokens */
    t.balance_coef = num(j, "router_aux_coef", 0), t.balance_tokens = start[n];
    trainer_zero_grad(&t);
    loss_stats st = {0};
    for (int s0 = 0, o0 = 0; s0 < n; s0 += micro) {
        int ns = n - s0 < micro ? n - s0 : micro;
        int mstart[64];
        for (int s = 0; s <= ns; s++) mstart[s] = start[s0 + s] - start[s0];
        train_batch b = {ns,           mstart, n_prompt + s0, tokens + start[s0], NULL, target ? target + start[s0] : NULL,
                         routing ? routing + (size_t)start[s0] * route_w : NULL, route_w};
        trainer_forward(&t, &b, temp, true, false, logp + o0, ent + o0);
        for (int s = 0, o = o0; s < ns; s++) {
            int nt = n_target[s0 + s];
            loss_seq q = {nt, logp + o, old + o, NULL, lc.beta > 0 ? ref + o : NULL, ent + o, adv[s0 + s]};
            loss_completion(&lc, &lb, &q, dlogp + o, dent + o, &st);
            o += nt;
        }
        trainer_backward(&t, &b, temp, dlogp + o0, lc.entropy_coef != 0 ? dent + o0 : NULL, ent + o0);
        o0 += train_batch_targets(&b);
    }
    st_writer w;
    st_writer_init(&w);
    float loss = (float)st.loss, balance = (float)t.balance_sum;
    int rc = add_f32(&w, "logp", 1, n_t, 0, logp) || add_f32(&w, "loss", 1, 1, 0, &loss) ||
             add_f32(&w, "balance", 1, 1, 0, &balance);
    float *base = NULL, *peft = NULL;
    if (!rc && packed) rc = add_base(&w, &m, &base);
    if (use_lora) {
        /* PEFT's tensors (a stacked adapter's put together from its experts'
         * pieces: train_ref.py applies PEFT's ParamWrapper delta to them) and
         * their gradients, laid out alike */
        size_t nt = lora_tensor_list(&l, NULL), off = 0;
        lora_tensor_ref *refs = calloc(nt, sizeof *refs);
        lora_tensor_list(&l, refs);
        peft = malloc(2 * sizeof(float) * l.n_params);
        for (size_t i = 0; i < nt && !rc; i++) {
            bool seen = false;
            for (size_t j = 0; j < i && !seen; j++) seen = !strcmp(refs[j].peft, refs[i].peft);
            if (seen) continue;
            size_t size = (size_t)(refs[i].peft_rows * refs[i].peft_cols);
            float *v = peft + off, *g = peft + l.n_params + off;
            off += size;
            for (size_t j = i; j < nt; j++)
                if (!strcmp(refs[j].peft, refs[i].peft)) {
                    lora_ref_to_peft(&refs[j], l.memory, v);
                    lora_ref_to_peft(&refs[j], t.grad, g);
                }
            char name[160];
            snprintf(name, sizeof name, "grad.%s", refs[i].peft);
            rc = add_f32(&w, refs[i].peft, 2, refs[i].peft_rows, refs[i].peft_cols, v) ||
                 add_f32(&w, name, 2, refs[i].peft_rows, refs[i].peft_cols, g);
        }
        free(refs);
    } else {
        size_t nt = model_tensor_list(&m, NULL);
        model_tensor_ref *refs = calloc(nt, sizeof *refs);
        model_tensor_list(&m, refs);
        for (size_t i = 0; i < nt && !rc; i++) {
            char name[192];
            snprintf(name, sizeof name, "grad.%s", refs[i].hf);
            /* gpt_oss's experts share a stacked name: each slice apart (train_ref.py stacks them) */
            if (m.cfg.arch == ARCH_GPT_OSS && refs[i].expert >= 0)
                snprintf(name, sizeof name, "grad.%s:%s:%d", refs[i].hf, model_param_name(refs[i].param),
                         refs[i].expert);
            rc = add_f32(&w, name, refs[i].cols ? 2 : 1, refs[i].rows, refs[i].cols,
                         t.grad + (refs[i].dst - m.params_memory));
        }
        free(refs);
    }
    if (!rc && st_write(&w, out_path, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        rc = 74;
    }
    st_writer_free(&w);
    free(base);
    free(peft);
    trainer_free(&t);
    if (use_lora) lora_free(&l);
    model_free(&m);
    cJSON_Delete(j);
    free(start), free(n_prompt), free(tokens), free(old), free(ref), free(logp), free(dlogp), free(ent), free(dent), free(adv);
    free(target), free(full), free(n_target), free(routing);
    return rc;
}

/* --compute: f32 is the model's backend; bf16 the table given, and where
 * there is none (a CPU without AVX-512 BF16) EX_UNAVAILABLE with a one-line
 * message; anything else EX_USAGE. */
static void test_compute_backend(void) {
    TEST("trainer_compute_backend: f32, bf16, bf16 on a CPU without it (69), a bad name (64)");
    model m = {0};
    const backend *be = NULL, *fake = backend_cpu(); /* any table stands for the bf16 one */
    gerr e = {0};
    CHECK(trainer_compute_backend("f32", &m, NULL, &be, &e) == 0 && be == model_backend(&m));
    CHECK(trainer_compute_backend("bf16", &m, fake, &be, &e) == 0 && be == fake);
    be = NULL;
    CHECK_EQ_INT(trainer_compute_backend("bf16", &m, NULL, &be, &e), EX_UNAVAILABLE);
    CHECK(be == NULL && strstr(e.msg, "no AVX-512 BF16") && !strchr(e.msg, '\n'));
    CHECK_EQ_INT(trainer_compute_backend("fp16", &m, fake, &be, &e), EX_USAGE);
    CHECK(strstr(e.msg, "fp16") != NULL);
    /* where the CPU has it, the table is there and is the bf16 one */
    const backend *b16 = backend_cpu_bf16();
    CHECK(!b16 || (b16->gemm != backend_cpu()->gemm && b16->attention_forward == backend_cpu()->attention_forward));
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "--grad")) return driver(argv[2], argv[3], argv[4]);
    test_finite_differences(ARCH_LLAMA, false, "finite differences: llama, untied");
    test_finite_differences(ARCH_LLAMA, true, "finite differences: llama, tied embeddings");
    test_finite_differences(ARCH_QWEN2, false, "finite differences: qwen2 (q/k/v bias)");
    test_finite_differences(ARCH_QWEN3, false, "finite differences: qwen3 (q/k norm)");
    test_finite_differences(ARCH_QWEN3_MOE, false, "finite differences: qwen3_moe (a dense layer, then 2 of 4 experts)");
    test_micro_batches_and_recompute();
    test_group_sums();
    test_lora();
    test_infer_matches_kv_forward();
    test_shared_prompts(ARCH_LLAMA, false, false, false, "shared prompts: llama, full fine-tuning: log-probs and gradients of the unshared batch");
    test_shared_prompts(ARCH_LLAMA, true, true, false, "shared prompts: llama, tied, LoRA");
    test_shared_prompts(ARCH_QWEN3, false, false, true, "shared prompts: qwen3 (q/k norm), multi-turn targets");
    test_shared_prompts(ARCH_QWEN2, false, true, true, "shared prompts: qwen2 (biases), LoRA, multi-turn targets");
    test_shared_prompts(ARCH_QWEN3_MOE, false, false, true, "shared prompts: qwen3_moe, full, multi-turn targets");
    test_shared_prompts_dropout();
    test_replay_shared_prompts();
    test_threads_grow_after_init();
    test_compute_backend();
    return check_done();
}
