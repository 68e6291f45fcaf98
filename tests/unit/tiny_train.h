/* The tiny random models, adapters and batches the training unit tests
 * share (test_train.c, test_train_device.c): a model of any architecture
 * small enough for finite differences, an adapter on it, and a batch of two
 * prompt groups. Include after check.h. */
#ifndef GRPO_TESTS_TINY_TRAIN_H
#define GRPO_TESTS_TINY_TRAIN_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>

#include "model/lora.h"
#include "model/model.h"
#include "ops/packed_mxfp4.h"
#include "train/trainer.h"
#include "util/rng.h"

static inline void fill_uniform(float *p, size_t n, double scale, double offset, uint64_t seed, uint64_t index) {
    rng_stream r;
    rng_init(&r, seed, "test", 4, index);
    for (size_t i = 0; i < n; i++) p[i] = (float)(offset + scale * (2 * rng_uniform(&r) - 1));
}

/* The tiny shapes of an architecture: 2 layers of dim 32; qwen3_moe's
 * layer 0 dense (mlp_only_layers), layer 1 a mixture of 2 of 4 experts;
 * gpt_oss's both a mixture of 2 of 4 experts of width 32 (MXFP4's block)
 * with biases and the clamped SwiGLU, layer 0 sliding (window 5), sinks, an
 * o_proj bias and gpt-oss's YaRN over an original context of 16 (config.c's
 * defaults for the rest, as config.json would give them). */
static inline void tiny_config(model_config *c, model_arch arch, bool tied) {
    memset(c, 0, sizeof *c);
    c->arch = arch, c->dim = 32, c->hidden_dim = 48, c->n_layers = 2, c->n_heads = 4, c->n_kv_heads = 2;
    bool q3 = arch == ARCH_QWEN3 || arch == ARCH_QWEN3_MOE;
    c->head_dim = q3 ? 12 : 8, c->vocab_size = 61, c->max_seq_len = 64, c->rope_theta = 10000;
    c->norm_eps = 1e-5f, c->tied_embeddings = tied, c->qkv_bias = arch == ARCH_QWEN2, c->qk_norm = q3;
    c->bos_id = -1;
    if (arch == ARCH_QWEN3_MOE) {
        c->n_experts = 4, c->n_experts_used = 2, c->moe_hidden_dim = 16, c->moe_norm_topk = true, c->moe_step = 1;
        c->moe_dense[0] = 1;
        snprintf(c->architecture, sizeof c->architecture, "Qwen3MoeForCausalLM");
    }
    if (arch == ARCH_GPT_OSS) {
        c->n_experts = 4, c->n_experts_used = 2, c->moe_hidden_dim = c->hidden_dim = 32, c->moe_norm_topk = true;
        c->moe_step = 1, c->moe_bias = true, c->swiglu_limit = 7.0f, c->swiglu_alpha = 1.702f;
        c->qkv_bias = c->attn_o_bias = c->attn_sinks = true, c->sliding_window = 5, c->swa_layers[0] = 1;
        c->rope_yarn = true, c->rope_factor = 32, c->rope_beta_fast = 32, c->rope_beta_slow = 1;
        c->rope_original_max_pos = 16, c->rope_attn_factor = 0.1 * log(32.0) + 1;
        snprintf(c->architecture, sizeof c->architecture, "GptOssForCausalLM");
    }
}

/* m->cfg set: its weights allocated and filled from a fixed seed. */
static inline int tiny_model_fill(model *m) {
    gerr e = {0};
    if (model_alloc(m, &e)) return 1;
    for (int i = 0; i < MODEL_N_PARAMS; i++) {
        if (!m->param_sizes[i]) continue;
        bool norm = i == P_ATTN_NORM || i == P_FFN_NORM || i == P_OUT_NORM || i == P_Q_NORM || i == P_K_NORM;
        /* the router's logits spread wide: tokens go to different experts */
        double scale = norm ? 0.2 : i == P_ROUTER ? 1.0 : 0.3;
        fill_uniform(m->w.t[i], m->param_sizes[i], scale, norm ? 1.0 : 0.0, 7, (uint64_t)i);
    }
    return 0;
}

static inline int tiny_model(model *m, model_arch arch, bool tied) {
    memset(m, 0, sizeof *m);
    tiny_config(&m->cfg, arch, tied);
    return tiny_model_fill(m);
}

/* tiny_model with every matrix's input width a multiple of 32, as q8's and
 * q4k's blocks need (a frozen base's formats): the dense FFN 64 wide,
 * qwen3's heads 8 wide, qwen3_moe's experts 32. */
static inline int tiny_model_wide(model *m, model_arch arch, bool tied) {
    memset(m, 0, sizeof *m);
    tiny_config(&m->cfg, arch, tied);
    model_config *c = &m->cfg;
    if (arch != ARCH_GPT_OSS) c->hidden_dim = 64;
    if (c->head_dim == 12) c->head_dim = 8;
    if (arch == ARCH_QWEN3_MOE) c->moe_hidden_dim = 32;
    return tiny_model_fill(m);
}

/* Random MXFP4 blocks (scales 2^-5 .. 2^-3 in half units: weights up to
 * 0.75) written as every expert's matrix of m (gpt_oss: widths multiples
 * of 32) in its own place, and m packed as a device's loader packs a
 * gpt-oss's MXFP4 experts (weight_choice on_device: those experts MXFP4,
 * every other matrix float32 rows), or with frozen as grpo-update's loader
 * packs an mxfp4 frozen base (weight_choice frozen: the same experts, the
 * model marked packed_frozen). */
static inline int tiny_mxfp4_experts_as(model *m, bool frozen, gerr *e) {
    size_t nt = model_tensor_list(m, NULL);
    model_tensor_ref *refs = calloc(nt, sizeof *refs);
    if (!refs) return gerr_set(e, EX_SOFTWARE, "out of memory");
    model_tensor_list(m, refs);
    m->experts_mxfp4 = true;
    pack_plan plan;
    model_plan_packing(m, (weight_choice){.fmt = WEIGHTS_MXFP4, .on_device = !frozen, .frozen = frozen}, &plan);
    rng_stream r;
    rng_init(&r, 77, "mxfp4", 5, 0);
    int rc = 0;
    for (size_t i = 0; i < nt && !rc; i++) {
        if (refs[i].expert < 0) continue;
        int rows = (int)refs[i].rows, cols = (int)refs[i].cols;
        size_t n = (size_t)rows * (size_t)(cols / MX4W_K_BLOCK);
        unsigned char *blocks = malloc(n * MX4W_GGUF_BYTES);
        if (!blocks) {
            rc = gerr_set(e, EX_SOFTWARE, "out of memory");
            break;
        }
        for (size_t b = 0; b < n; b++) {
            blocks[b * MX4W_GGUF_BYTES] = (unsigned char)(123 + rng_below(&r, 3));
            for (int j = 1; j < MX4W_GGUF_BYTES; j++)
                blocks[b * MX4W_GGUF_BYTES + j] = (unsigned char)rng_below(&r, 256);
        }
        mx4w_pack_gguf(refs[i].dst, blocks, rows, cols);
        plan.verbatim[i] = true;
        free(blocks);
    }
    if (!rc) rc = model_pack(m, &plan, e);
    pack_plan_free(&plan);
    free(refs);
    return rc;
}

static inline int tiny_mxfp4_experts(model *m, gerr *e) { return tiny_mxfp4_experts_as(m, false, e); }

static inline void tiny_lora(lora *l, const model *m, const char *names, double dropout) {
    gerr e = {0};
    unsigned targets;
    CHECK(lora_parse_targets(names, &targets, &e) == 0);
    CHECK(lora_alloc(l, &m->cfg, 4, 8.0, false, dropout, targets, NULL, &e) == 0);
    lora_init(l, 5);
}

/* Two prompt groups (prompts of 4 and 3 tokens; 3 and 2 completions, one
 * of them empty), then a sequence of its own. */
enum { G_SEQS = 6 };
typedef struct {
    int start[G_SEQS + 1], n_prompt[G_SEQS];
    int32_t tokens[96];
    uint8_t target[96];
    train_batch b;
} group_batch;

static inline void make_groups(group_batch *gb, int vocab, bool masked) {
    static const int comp[G_SEQS] = {5, 3, 0, 6, 2, 4}, prompt[G_SEQS] = {4, 4, 4, 3, 3, 2};
    static const int group[G_SEQS] = {0, 0, 0, 1, 1, 2};
    rng_stream r;
    rng_init(&r, 5, "groups", 6, 0);
    int32_t prompts[3][8];
    for (int g = 0; g < 3; g++)
        for (int i = 0; i < 8; i++) prompts[g][i] = (int32_t)rng_below(&r, (uint64_t)vocab);
    gb->start[0] = 0;
    for (int s = 0; s < G_SEQS; s++) {
        int at = gb->start[s];
        memcpy(gb->tokens + at, prompts[group[s]], (size_t)prompt[s] * sizeof(int32_t));
        for (int i = 0; i < prompt[s] + comp[s]; i++) {
            if (i >= prompt[s]) gb->tokens[at + i] = (int32_t)rng_below(&r, (uint64_t)vocab);
            gb->target[at + i] = !masked || (i % 3 != 1); /* some environment tokens */
        }
        gb->n_prompt[s] = prompt[s];
        gb->start[s + 1] = at + prompt[s] + comp[s];
    }
    gb->b = (train_batch){G_SEQS, gb->start, gb->n_prompt, gb->tokens, NULL, masked ? gb->target : NULL, NULL, 0};
}

/* A recorded routing for gb's rows (grpo-update --routing replay), host
 * ids [rows][Lm][k] into routing (room for 96 * Lm * k): each row 2
 * different of the 4 experts in every layer with a mixture (c's k is 2). */
static inline void tiny_replay_routing(group_batch *gb, const model_config *c, uint16_t *routing) {
    int w = config_ffn_layers(c, true) * c->n_experts_used;
    rng_stream r;
    rng_init(&r, 3, "routing", 7, 0);
    for (int i = 0; i < gb->start[G_SEQS] * w; i += 2) {
        routing[i] = (uint16_t)rng_below(&r, 4);
        routing[i + 1] = (uint16_t)((routing[i] + 1 + rng_below(&r, 3)) % 4);
    }
    gb->b.routing = routing, gb->b.routing_width = w;
}

/* loss = sum_j c_j logp_j with fixed random c: any functional of logp will
 * do for checking the model's backward. keep: a training pass (activations
 * kept, LoRA dropout applied); backward: its gradient added too. */
static inline double linear_loss_pass(trainer *t, const train_batch *b, float temp, bool keep, bool backward,
                                      int c_offset) {
    int n = train_batch_targets(b);
    float logp[64], coef[64];
    fill_uniform(coef, 64, 1.0, 0.0, 11, 0);
    trainer_forward(t, b, temp, keep, false, logp, NULL);
    double L = 0;
    for (int j = 0; j < n; j++) L += (double)coef[c_offset + j] * logp[j];
    if (backward) trainer_backward(t, b, temp, coef + c_offset, NULL, NULL);
    return L;
}
static inline double linear_loss(trainer *t, const train_batch *b, float temp, bool backward, int c_offset) {
    return linear_loss_pass(t, b, temp, backward, backward, c_offset);
}

/* The log-probs of m under adapter l (a training forward) and of merged
 * (m's weights with l merged in, no adapter) on make_groups' batch: *d
 * their largest difference, *moved the largest the adapter moves m's. */
static inline void lora_vs_merged(model *m, model *merged, lora *l, double *d, double *moved) {
    gerr e = {0};
    trainer ta, tm;
    CHECK(trainer_init(&ta, m, l, TRAINER_LORA, false, 64, 0, 32, 64, &e) == 0);
    CHECK(trainer_init(&tm, merged, NULL, TRAINER_INFER, false, 64, 0, 32, 64, &e) == 0);
    group_batch gb;
    make_groups(&gb, m->cfg.vocab_size, false);
    float la[64], lm[64], l0[64];
    trainer_forward(&ta, &gb.b, 1.0f, true, false, la, NULL);
    trainer_forward(&tm, &gb.b, 1.0f, false, false, lm, NULL);
    trainer_forward(&ta, &gb.b, 1.0f, false, true, l0, NULL);
    *d = 0, *moved = 0;
    for (int j = 0; j < train_batch_targets(&gb.b); j++)
        *d = fmax(*d, fabs(la[j] - lm[j])), *moved = fmax(*moved, fabs(la[j] - l0[j]));
    trainer_free(&ta), trainer_free(&tm);
}

/* The adapter's factors copied into be's memory, laid out as
 * lib/train/policy.c's policy_to_device places them: *dev is host's adapter
 * with every factor pointer moved into *mem (mem_free it). */
static inline void lora_on_backend(const backend *be, lora *dev, const lora *host, float **mem) {
    gerr e = {0};
    CHECK(be->mem_alloc((void **)mem, host->n_params * sizeof(float), &e) == 0);
    CHECK(be->mem_upload(*mem, host->memory, host->n_params * sizeof(float), &e) == 0);
    *dev = *host;
    dev->memory = *mem;
    for (int t = 0; t < LORA_N_SETS; t++) {
        if (host->a[t]) dev->a[t] = *mem + (host->a[t] - host->memory);
        if (host->b[t]) dev->b[t] = *mem + (host->b[t] - host->memory);
    }
}

/* One forward (kept, temperature 0.8) and backward of a loss with the
 * given d/d logp and d/d entropy on t, on any backend; logp, entropies and
 * the gradients (downloaded from a device) into the host arrays. */
static inline void train_step_grads(trainer *t, const train_batch *b, const float *coef, const float *dent,
                                    float *logp, float *ent, float *g) {
    gerr e = {0};
    trainer_zero_grad(t);
    trainer_forward(t, b, 0.8f, true, false, logp, ent);
    trainer_backward(t, b, 0.8f, coef, dent, ent);
    int rc = trainer_check(t, &e);
    if (rc) printf("#   device: %s\n", e.msg);
    CHECK_EQ_INT(rc, 0);
    if (t->be->mem_download) {
        rc = t->be->mem_download(g, t->grad, t->n_grad * sizeof *g, &e);
        if (rc) printf("#   download: %s\n", e.msg);
        CHECK_EQ_INT(rc, 0);
    } else {
        memcpy(g, t->grad, t->n_grad * sizeof *g);
    }
}

/* A step's inputs: make_groups' batch (a mixture's routing replayed from
 * routing, room for 96 * 4), and a loss's fixed d/d logp (coef[64]) and
 * d/d entropy (dent[64]). */
static inline void tiny_step_inputs(group_batch *gb, const model_config *c, bool masked, uint16_t *routing,
                                    float *coef, float *dent) {
    make_groups(gb, c->vocab_size, masked);
    if (c->n_experts > 0) tiny_replay_routing(gb, c, routing);
    fill_uniform(coef, 64, 1.0, 0.0, 11, 0);
    fill_uniform(dent, 64, 0.5, 0.0, 12, 0);
}

/* The largest |a - b| over n floats; infinity where either is NaN. */
static inline double tiny_max_abs(const float *a, const float *b, int n) {
    double m = 0;
    for (int i = 0; i < n; i++) m = isnan(a[i]) || isnan(b[i]) ? INFINITY : fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

/* ||a - ref|| / ||ref|| over n floats; infinity where a has a NaN or ref is zero. */
static inline double tiny_rel_l2(const float *a, const float *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i])) return INFINITY;
        double d = (double)a[i] - ref[i];
        num += d * d, den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : INFINITY;
}

/* m: tiny_model_wide of arch as grpo-update's loader leaves a frozen base
 * packed in fmt (model_pack_frozen: the layer matrices, each expert's
 * apart, the embeddings and the head; mxfp4: gpt_oss's experts as random
 * MXFP4 blocks, tiny_mxfp4_experts_as). */
static inline int tiny_frozen(model *m, model_arch arch, bool tied, weight_format fmt, gerr *e) {
    if (tiny_model_wide(m, arch, tied)) return gerr_set(e, EX_SOFTWARE, "tiny_model_wide failed");
    return fmt == WEIGHTS_MXFP4 ? tiny_mxfp4_experts_as(m, true, e) : model_pack_frozen(m, fmt, e);
}

/* A LoRA step (every target; a mixture's routing replayed, so that no
 * top-k choice within rounding flips) over tiny_frozen's base on device be
 * against the CPU's: the log-probs' and entropies' largest differences,
 * the gradients' relative one, and whether all three are the CPU's bytes. */
typedef struct {
    double logp, entropy, grad;
    bool same;
} frozen_diff;

static inline frozen_diff tiny_frozen_vs_cpu(const backend *be, model_arch arch, bool tied, weight_format fmt) {
    frozen_diff r = {INFINITY, INFINITY, INFINITY, false};
    model mc, md;
    gerr e = {0};
    int rc = tiny_frozen(&mc, arch, tied, fmt, &e);
    if (!rc) rc = tiny_frozen(&md, arch, tied, fmt, &e);
    if (!rc) rc = model_to_backend(&md, be, &e);
    if (rc) {
        printf("#   %s\n", e.msg);
        CHECK(0);
        return r;
    }
    lora l, ld;
    float *lmem = NULL;
    tiny_lora(&l, &mc, "q,k,v,o,gate,up,down", 0);
    fill_uniform(l.memory, l.n_params, 0.2, 0.0, 9, 1);
    lora_on_backend(be, &ld, &l, &lmem);
    trainer tc, td;
    CHECK(trainer_init(&tc, &mc, &l, TRAINER_LORA, false, 64, 0, 32, 64, &e) == 0);
    CHECK(trainer_init(&td, &md, &ld, TRAINER_LORA, false, 64, 0, 32, 64, &e) == 0);
    group_batch gb;
    uint16_t routing[96 * 4];
    float lc[64], ld_[64], ec[64], ed[64], coef[64], dent[64];
    tiny_step_inputs(&gb, &mc.cfg, false, routing, coef, dent);
    int n = train_batch_targets(&gb.b);
    float *gc = malloc(tc.n_grad * sizeof *gc), *gd = malloc(td.n_grad * sizeof *gd);
    CHECK(gc && gd && tc.n_grad == td.n_grad);
    if (gc && gd) {
        train_step_grads(&tc, &gb.b, coef, dent, lc, ec, gc);
        train_step_grads(&td, &gb.b, coef, dent, ld_, ed, gd);
        double mx = 0;
        for (size_t i = 0; i < tc.n_grad; i++) mx = fmax(mx, fabs((double)gc[i]));
        CHECK(mx > 0); /* a gradient of zeros would compare equal too */
        r.logp = tiny_max_abs(ld_, lc, n), r.entropy = tiny_max_abs(ed, ec, n);
        r.grad = tiny_rel_l2(gd, gc, tc.n_grad);
        r.same = !memcmp(lc, ld_, (size_t)n * sizeof *lc) && !memcmp(ec, ed, (size_t)n * sizeof *ec) &&
                 !memcmp(gc, gd, tc.n_grad * sizeof *gc);
    }
    printf("#   measured: log-probs %.3g, entropies %.3g (absolute), gradients %.3g (relative)%s\n", r.logp, r.entropy,
           r.grad, r.same ? ", the CPU's bytes" : "");
    free(gc), free(gd);
    trainer_free(&tc), trainer_free(&td);
    be->mem_free(lmem);
    lora_free(&l);
    model_free(&mc), model_free(&md);
    return r;
}

#endif
