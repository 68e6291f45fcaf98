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
 * A frozen packed base (lib/cuda/frozen.c; grpo-update --base-weights
 * bf16|q8|q4k|mxfp4 under LoRA): its ops against double products of the
 * bf16 operands the device reads (tests/unit/frozen_bf16.h), the
 * embeddings' rows the CPU's bits; frozen_gemm.cu's tiled products over
 * shapes off every tile edge, each output within a bound argued in
 * tests/unit/frozen_sweep.h; and the trainer over such a base against
 * the CPU's within 0.1 (log-probs), 0.05 (entropies) and 5e-2 (gradients):
 * test_frozen_device's emulation of its products moved them by up to
 * 0.040, 0.011 and 0.015 on these models (the head rounded too).
 *
 * Without a CUDA build or a device every test reports a TAP skip. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cuda/cuda.h"
#include "cuda_device.h"
#include "cuda_ops_util.h"
#include "frozen_bf16.h"
#include "frozen_sweep.h"
#include "tiny_train.h"

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
    uint16_t routing[96 * 4];
    float lc[64], lgp[64], ec[64], eg[64], coef[64], dent[64];
    tiny_step_inputs(&gb, &mc.cfg, masked, routing, coef, dent);
    int n = train_batch_targets(&gb.b);
    float *gc = malloc(tc.n_grad * sizeof *gc), *gg = malloc(tg.n_grad * sizeof *gg),
          *gg2 = malloc(tg.n_grad * sizeof *gg2);
    CHECK(gc && gg && gg2);
    train_step_grads(&tc, &gb.b, coef, dent, lc, ec, gc);
    train_step_grads(&tg, &gb.b, coef, dent, lgp, eg, gg);
    double dl = tiny_max_abs(lgp, lc, n), de = tiny_max_abs(eg, ec, n), dg = tiny_rel_l2(gg, gc, tc.n_grad);
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

/* ---- a frozen packed base --------------------------------------------------------- */

/* out[r, o] = init[r, o] + sum_i a[r, i] b[o, i] in double (b [out, in]), a
 * rounded to bf16 first; init NULL: 0. */
static void ref_product(float *y, const float *init, const float *a, const float *b, int n, int in, int out) {
    for (int r = 0; r < n; r++)
        for (int o = 0; o < out; o++) {
            double s = init ? init[(size_t)r * out + o] : 0;
            for (int i = 0; i < in; i++)
                s += (double)bf16_to_f32(f32_to_bf16(a[(size_t)r * in + i])) * b[(size_t)o * in + i];
            y[(size_t)r * out + o] = (float)s;
        }
}

/* W^T [in, out] of w [out, in] */
static float *transposed(const float *w, int out, int in) {
    float *t = fl((size_t)out * in);
    for (int o = 0; o < out; o++)
        for (int i = 0; i < in; i++) t[(size_t)i * out + o] = w[(size_t)o * in + i];
    return t;
}

/* in = 288: a whole q4k super-block and a short one; out = 80: q8's and q4k's
 * panels of 16 whole, bf16's of 32 not */
static void test_frozen_ops(weight_format fmt, const char *name) {
    TEST(name);
    NEED_DEVICE();
    int n = 7, in = 288, out = 80;
    size_t bytes = weights_packed_bytes(fmt, out, in);
    void *wp = frozen_random_packed(fmt, out, in, 51);
    float *wr = frozen_bf16_weights(wp, fmt, out, in), *wt = transposed(wr, out, in);
    float *x = fl((size_t)n * in), *b = fl(out), *dy = fl((size_t)n * out), *dx0 = fl((size_t)n * in);
    rnd(x, (size_t)n * in, 52, 2), rnd(b, out, 53, 1), rnd(dy, (size_t)n * out, 54, 1), rnd(dx0, (size_t)n * in, 55, 1);
    float *ry = fl((size_t)n * out), *rdx = fl((size_t)n * in), *rdx2 = fl((size_t)n * in), *cy = fl((size_t)n * out);
    for (int r = 0; r < n; r++) memcpy(ry + (size_t)r * out, b, out * sizeof *b);
    ref_product(ry, ry, x, wr, n, in, out);
    ref_product(rdx, dx0, dy, wt, n, out, in);
    ref_product(rdx2, NULL, dy, wt, n, out, in);
    matmul_forward_frozen(cy, x, wp, fmt, b, n, in, out); /* the CPU's float32 activations on the exact values */
    gerr e = {0};
    void *dw = NULL;
    if (be->mem_alloc(&dw, bytes, &e) || be->mem_upload(dw, wp, bytes, &e)) printf("#   upload: %s\n", e.msg);
    float *dx = dev(x, (size_t)n * in), *db = dev(b, out), *ddy = dev(dy, (size_t)n * out);
    float *dyo = dev(NULL, (size_t)n * out), *dyo1 = dev(NULL, out), *ddx = dev(dx0, (size_t)n * in);
    float *ddx2 = dev(NULL, (size_t)n * in);
    int32_t idx[5] = {3, 0, out - 1, 17, 3};
    float *drows = dev(NULL, (size_t)5 * in), *crows = fl((size_t)5 * in);
    if (dw) {
        be->matmul_forward_frozen(dyo, dx, dw, fmt, db, n, in, out);
        be->matmul_forward_frozen(dyo1, dx + (size_t)2 * in, dw, fmt, db, 1, in, out); /* row 2 alone */
        be->matmul_backward_frozen(ddx, ddy, dw, fmt, n, in, out, true);
        be->matmul_backward_frozen(ddx2, ddy, dw, fmt, n, in, out, false);
        if (fmt != WEIGHTS_MXFP4) be->gather_rows_packed(drows, dw, fmt, idx, 5, in);
    }
    synced();
    float *gy = host(dyo, (size_t)n * out), *gy1 = host(dyo1, out), *gdx = host(ddx, (size_t)n * in);
    float *gdx2 = host(ddx2, (size_t)n * in);
    CHECK(rel(gy, ry, (size_t)n * out) <= 1e-5);
    CHECK(rel(gy, cy, (size_t)n * out) <= 1e-2);
    CHECK(memcmp(gy1, gy + (size_t)2 * out, out * sizeof *gy1) == 0);
    CHECK(rel(gdx, rdx, (size_t)n * in) <= 1e-5);
    CHECK(rel(gdx2, rdx2, (size_t)n * in) <= 1e-5);
    if (fmt != WEIGHTS_MXFP4) { /* the CPU's rows, bit for bit */
        gather_rows_packed(crows, wp, fmt, idx, 5, in);
        float *grows = host(drows, (size_t)5 * in);
        CHECK(memcmp(grows, crows, (size_t)5 * in * sizeof *grows) == 0);
        free(grows);
    }
    FREE_DEV(dw, dx, db, ddy, dyo, dyo1, ddx, ddx2, drows);
    free(wp), free(wr), free(wt), free(x), free(b), free(dy), free(dx0), free(ry), free(rdx), free(rdx2), free(cy);
    free(crows), free(gy), free(gy1), free(gdx), free(gdx2);
}

/* frozen_gemm.cu's tiled products at every tile edge: float64's within
 * frozen_sweep.h's bound, a row alone the same bytes. */
static void test_frozen_sweep(weight_format fmt, const char *name) {
    TEST(name);
    NEED_DEVICE();
    frozen_sweep(be, fmt, true);
}

/* A LoRA step over a frozen base packed in fmt: the CPU trainer's within
 * the tolerances above (tiny_frozen_vs_cpu). */
static void test_frozen_trainer(model_arch arch, bool tied, weight_format fmt, const char *name) {
    TEST(name);
    NEED_DEVICE();
    frozen_diff r = tiny_frozen_vs_cpu(be, arch, tied, fmt);
    CHECK(r.logp <= 0.1);
    CHECK(r.entropy <= 0.05);
    CHECK(r.grad <= 5e-2);
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
    test_frozen_ops(WEIGHTS_Q8, "frozen q8 base on the device: products within 1e-5 of double ones on its values "
                                "rounded to bf16, 1e-2 of the CPU's; a row the same bytes alone; the CPU's rows");
    test_frozen_ops(WEIGHTS_Q4K, "frozen q4k base on the device: products within 1e-5 of double ones on its values "
                                 "rounded to bf16, 1e-2 of the CPU's; a row the same bytes alone; the CPU's rows");
    test_frozen_ops(WEIGHTS_BF16, "frozen bf16 base on the device: products within 1e-5 of double ones on its exact "
                                  "values, 1e-2 of the CPU's; a row the same bytes alone; the CPU's rows");
    test_frozen_ops(WEIGHTS_MXFP4, "frozen mxfp4 base on the device: products within 1e-5 of double ones on its exact "
                                   "values, 1e-2 of the CPU's; a row the same bytes alone");
    test_frozen_sweep(WEIGHTS_BF16, "frozen bf16 base, the tiled products off every tile edge (n 1..130, out 48..200, "
                                    "in 37..288): float64's within (K + 2) 2^-22 of the terms' magnitudes");
    test_frozen_sweep(WEIGHTS_Q8, "frozen q8 base, the tiled products off every tile edge: float64's within "
                                  "(K + 2) 2^-22 of the terms' magnitudes");
    test_frozen_sweep(WEIGHTS_Q4K, "frozen q4k base, the tiled products off every tile edge: float64's within "
                                   "(K + 2) 2^-22 of the terms' magnitudes");
    test_frozen_sweep(WEIGHTS_MXFP4, "frozen mxfp4 base, the tiled products off every tile edge: float64's within "
                                     "(K + 2) 2^-22 of the terms' magnitudes");
    test_frozen_trainer(ARCH_LLAMA, true, WEIGHTS_Q8, "trainer on the device, llama (tied), LoRA on a q8 frozen base");
    test_frozen_trainer(ARCH_LLAMA, false, WEIGHTS_Q4K, "trainer on the device, llama, LoRA on a q4k frozen base");
    test_frozen_trainer(ARCH_LLAMA, false, WEIGHTS_BF16, "trainer on the device, llama, LoRA on a bf16 frozen base");
    test_frozen_trainer(ARCH_QWEN3_MOE, false, WEIGHTS_Q8,
                        "trainer on the device, qwen3_moe, LoRA on a q8 frozen base (every expert packed apart)");
    test_frozen_trainer(ARCH_GPT_OSS, false, WEIGHTS_MXFP4,
                        "trainer on the device, gpt_oss, LoRA on an mxfp4 frozen base (its MXFP4 experts)");
    test_nccl_one_rank();
    if (be) cuda_close();
    return check_done();
}
