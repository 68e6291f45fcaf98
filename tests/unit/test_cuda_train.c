/* The trainer (lib/train/trainer.c) on the CUDA backend against the CPU
 * backend, on the tiny random models of tests/unit/tiny_train.h: the
 * forward's log-probs and entropies, then the gradients of a loss linear in
 * them (and in the entropies), full fine-tuning and LoRA (with dropout once),
 * prompt groups shared, a multi-turn mask; and the same gradient bytes when
 * run twice; the mixtures of experts of tiny_train.h (qwen3_moe, gpt_oss)
 * with a replayed routing. What test_train_device checks exactly on a
 * fake device (the memory plumbing), this checks for the kernels'
 * arithmetic. The measured
 * differences are printed as TAP comments whatever the outcome.
 *
 * Tolerances (bf16 products with float32 sums against float32): log-probs
 * and entropies within 0.05 absolute (docs/gpu.md's emulation moved tiny
 * models' log-probs by at most 0.022); gradients within 5e-2 relative
 * (||g_gpu - g_cpu|| / ||g_cpu||, over every trained float).
 *
 * Without a CUDA build or a device every test reports a TAP skip. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cuda/cuda.h"
#include "cuda_device.h"
#include "tiny_train.h"

static const backend *be; /* NULL: no device, every test skips */
static char skip_why[200] = "no CUDA device";

/* The largest |a - b| over n floats; infinity where either is NaN. */
static double max_abs(const float *a, const float *b, int n) {
    double m = 0;
    for (int i = 0; i < n; i++) m = isnan(a[i]) || isnan(b[i]) ? INFINITY : fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

static double rel_l2(const float *a, const float *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i])) return INFINITY;
        double d = (double)a[i] - ref[i];
        num += d * d, den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : INFINITY;
}

/* lora_targets NULL: full fine-tuning. A mixture of experts replays a
 * fixed routing (tiny_replay_routing) on both: the comparison is of the
 * arithmetic, not of a top-k choice that bf16 rounding may flip where two
 * experts' probabilities are within it. */
static void test_trainer_on(model_arch arch, bool tied, const char *lora_targets, double dropout, bool masked,
                            const char *name) {
    TEST(name);
    bool use_lora = lora_targets != NULL;
    if (!be) {
        SKIP(skip_why);
        return;
    }
    model mc, mg;
    if (tiny_model(&mc, arch, tied) || tiny_model(&mg, arch, tied)) {
        CHECK(0);
        return;
    }
    gerr e = {0};
    int rc = model_to_backend(&mg, be, &e);
    if (rc) printf("#   model_to_backend: %s\n", e.msg);
    CHECK_EQ_INT(rc, 0);
    lora l, lg;
    float *lmem = NULL;
    if (use_lora) {
        tiny_lora(&l, &mc, lora_targets, dropout);
        fill_uniform(l.memory, l.n_params, 0.2, 0.0, 9, 1);
        lora_on_backend(be, &lg, &l, &lmem);
    }
    trainer_mode mode = use_lora ? TRAINER_LORA : TRAINER_FULL;
    trainer tc, tg;
    CHECK(trainer_init(&tc, &mc, use_lora ? &l : NULL, mode, false, 64, 0, 32, 64, &e) == 0);
    rc = rc ? rc : trainer_init(&tg, &mg, use_lora ? &lg : NULL, mode, false, 64, 0, 32, 64, &e);
    if (rc) {
        printf("#   trainer_init: %s\n", e.msg);
        CHECK(0);
        trainer_free(&tc);
        model_free(&mc), model_free(&mg);
        return;
    }
    tc.dropout_seed = tg.dropout_seed = 17, tc.dropout_pass = tg.dropout_pass = 2;
    group_batch gb;
    make_groups(&gb, mc.cfg.vocab_size, masked);
    uint16_t routing[96 * 4];
    if (mc.cfg.n_experts > 0) tiny_replay_routing(&gb, &mc.cfg, routing);
    int n = train_batch_targets(&gb.b);
    float lc[64], lgp[64], ec[64], eg[64], coef[64], dent[64];
    fill_uniform(coef, 64, 1.0, 0.0, 11, 0);
    fill_uniform(dent, 64, 0.5, 0.0, 12, 0);
    float *gc = malloc(tc.n_grad * sizeof *gc), *gg = malloc(tg.n_grad * sizeof *gg),
          *gg2 = malloc(tg.n_grad * sizeof *gg2);
    CHECK(gc && gg && gg2);
    train_step_grads(&tc, &gb.b, coef, dent, lc, ec, gc);
    train_step_grads(&tg, &gb.b, coef, dent, lgp, eg, gg);
    double dl = max_abs(lgp, lc, n), de = max_abs(eg, ec, n), dg = rel_l2(gg, gc, tc.n_grad);
    printf("#   measured: log-probs %.3g, entropies %.3g (absolute), gradients %.3g (relative)\n", dl, de, dg);
    CHECK(dl <= 0.05);
    CHECK(de <= 0.05);
    CHECK(dg <= 5e-2);
    /* no atomics, one algorithm per product: the same bytes again */
    float lgp2[64], eg2[64];
    train_step_grads(&tg, &gb.b, coef, dent, lgp2, eg2, gg2);
    CHECK(!memcmp(lgp, lgp2, (size_t)n * sizeof *lgp) && !memcmp(gg, gg2, tg.n_grad * sizeof *gg));
    free(gc), free(gg), free(gg2);
    trainer_free(&tc), trainer_free(&tg);
    if (use_lora) {
        be->mem_free(lmem);
        lora_free(&l);
    }
    model_free(&mc), model_free(&mg);
}

static void test_trainer(model_arch arch, bool tied, bool use_lora, double dropout, bool masked, const char *name) {
    test_trainer_on(arch, tied, use_lora ? "q,k,v,o,gate,up,down" : NULL, dropout, masked, name);
}

/* NCCL (lib/cuda/nccl.c, the gradients' sum across ranks) in a
 * communicator of one rank, all one GPU can hold (NCCL refuses two ranks on
 * one device): the library loads, the id is made, the communicator joins,
 * and a sum over one rank leaves the buffer's bytes as they were. Skips
 * (saying why) when libnccl cannot be loaded. */
static void test_nccl_one_rank(void) {
    TEST("NCCL: a communicator of one rank; its sum leaves the bytes unchanged");
    if (!be) {
        SKIP(skip_why);
        return;
    }
    gerr e = {0};
    if (cuda_nccl_load(&e)) {
        char why[200];
        snprintf(why, sizeof why, "%.190s", e.msg);
        SKIP(why);
        return;
    }
    unsigned char id[CUDA_NCCL_ID_BYTES];
    enum { N = 1000 };
    float h[N], g[N];
    fill_uniform(h, N, 1.0, 0.0, 31, 0);
    void *d = NULL;
    int rc = cuda_nccl_id(id, &e);
    if (!rc) rc = cuda_nccl_init(0, 1, id, &e);
    if (!rc) rc = be->mem_alloc(&d, sizeof h, &e);
    if (!rc) rc = be->mem_upload(d, h, sizeof h, &e);
    if (!rc) rc = cuda_nccl_sum(d, N, &e);
    if (!rc) rc = be->mem_download(g, d, sizeof g, &e);
    if (rc) printf("#   nccl: %s\n", e.msg);
    CHECK_EQ_INT(rc, 0);
    CHECK(!rc && memcmp(g, h, sizeof h) == 0);
    if (d) be->mem_free(d);
}

int main(void) {
    be = cuda_test_device(skip_why, sizeof skip_why);
    test_trainer(ARCH_LLAMA, true, false, 0, false, "trainer on the device, llama (tied), full: the CPU's within bf16 tolerance");
    test_trainer(ARCH_QWEN2, false, false, 0, true, "trainer on the device, qwen2 (biases), full, multi-turn mask");
    test_trainer(ARCH_QWEN3, false, false, 0, false, "trainer on the device, qwen3 (q/k norm), full");
    test_trainer(ARCH_LLAMA, false, true, 0, false, "trainer on the device, llama, LoRA, prompts shared");
    test_trainer(ARCH_QWEN3, false, true, 0.1, true, "trainer on the device, qwen3, LoRA with dropout, multi-turn mask");
    test_trainer(ARCH_QWEN3_MOE, false, false, 0, false,
                 "trainer on the device, qwen3_moe (a mixture of experts, routing replayed), full");
    test_trainer(ARCH_QWEN3_MOE, false, true, 0, true,
                 "trainer on the device, qwen3_moe, LoRA on every expert's projections, multi-turn mask");
    test_trainer(ARCH_GPT_OSS, false, false, 0, false,
                 "trainer on the device, gpt_oss (sinks, window, YaRN, biases, clamped SwiGLU), full");
    test_trainer_on(ARCH_GPT_OSS, false, "q,k,v,o", 0.1, false, "trainer on the device, gpt_oss, LoRA on attention");
    test_trainer_on(ARCH_GPT_OSS, false, "q,k,v,o,gate,up,down", 0, false,
                    "trainer on the device, gpt_oss, LoRA on its stacked experts too (gate and up share A_e)");
    test_nccl_one_rank();
    if (be) cuda_close();
    return check_done();
}
