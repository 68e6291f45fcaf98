/* LoRA on a mixture of experts' projections (lib/model/lora.h's expert
 * sets, layer.c's adapted expert products): the factors' layout and PEFT
 * names beside a dense layer's, lora_merge of an expert, the adapter's
 * forward equal to the merged model's, and LoRA dropout on the experts:
 * applied, the same mask in the forward and the backward (central
 * differences of one training pass). The gradients against PyTorch
 * autograd: tests/ref/train_ref.py's qwen3moe-lora-experts cases; gpt_oss's
 * stacked experts: test_lora_oss.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>

#include "check.h"
#include "tiny_train.h"
#include "model/lora.h"
#include "model/model.h"
#include "train/trainer.h"

enum { R_LORA = 4, E_TINY = 4, I_TINY = 16, D_TINY = 32 };

static const lora_tensor_ref *find_ref(const lora_tensor_ref *refs, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(refs[i].name, name)) return &refs[i];
    return NULL;
}

static void test_layout(void) {
    TEST("expert sets: a sparse layer's gate, up and down per expert (PEFT's names), the dense layer's its own");
    model_config c;
    tiny_config(&c, ARCH_QWEN3_MOE, false);
    lora l;
    gerr e = {0};
    CHECK(lora_alloc(&l, &c, R_LORA, 8, false, 0, (1u << LORA_N_TARGETS) - 1, NULL, &e) == 0);
    size_t n = lora_tensor_list(&l, NULL);
    /* layer 0: 7 targets; layer 1: q, k, v, o and 3 per expert; A and B each */
    CHECK_EQ_INT(n, 2 * (7 + 4 + 3 * E_TINY));
    lora_tensor_ref *refs = calloc(n, sizeof *refs);
    lora_tensor_list(&l, refs);
    const lora_tensor_ref *r = find_ref(refs, n, "base_model.model.model.layers.1.mlp.experts.3.down_proj.lora_B.weight");
    CHECK(r && r->set == LORA_EXP_DOWN && r->expert == 3 && r->rows == D_TINY && r->cols == R_LORA);
    r = find_ref(refs, n, "base_model.model.model.layers.1.mlp.experts.0.gate_proj.lora_A.weight");
    CHECK(r && r->rows == R_LORA && r->cols == D_TINY && r->data == l.a[LORA_EXP_GATE]);
    r = find_ref(refs, n, "base_model.model.model.layers.0.mlp.up_proj.lora_B.weight");
    CHECK(r && r->set == LORA_UP && r->expert == -1 && r->rows == c.hidden_dim);
    CHECK(!find_ref(refs, n, "base_model.model.model.layers.1.mlp.gate_proj.lora_A.weight"));
    CHECK(!find_ref(refs, n, "base_model.model.model.layers.0.mlp.experts.0.gate_proj.lora_A.weight"));
    /* the factors tile the buffer: no two overlap, none is left out */
    size_t floats = 0;
    for (size_t i = 0; i < n; i++) {
        floats += (size_t)refs[i].rows * refs[i].cols;
        CHECK(refs[i].data >= l.memory && refs[i].data + refs[i].rows * refs[i].cols <= l.memory + l.n_params);
    }
    CHECK_EQ_INT(floats, l.n_params);
    CHECK_EQ_INT(l.n_mats[LORA_EXP_UP], E_TINY);
    CHECK_EQ_INT(l.n_mats[LORA_UP], 1);
    free(refs);
    lora_free(&l);
}

/* W + scale B A of expert 2's up_proj, in double, against lora_merge. */
static void test_merge(void) {
    TEST("lora_merge: each expert's W_e += scale B_e A_e, the dense layer's as before");
    model m;
    CHECK(tiny_model(&m, ARCH_QWEN3_MOE, false) == 0);
    lora l;
    tiny_lora(&l, &m, "all", 0.0);
    fill_uniform(l.memory, l.n_params, 0.3, 0.0, 17, 0);
    float *w = model_layer_tensor(&m, P_EXP_UP, 1) + 2 * I_TINY * D_TINY;
    float *before = malloc(sizeof(float) * I_TINY * D_TINY);
    memcpy(before, w, sizeof(float) * I_TINY * D_TINY);
    float gate0 = model_layer_tensor(&m, P_W_GATE, 0)[5];
    lora_merge(&m, &l);
    const float *a = lora_a_at(&l, LORA_EXP_UP, 1, 2), *b = lora_b_at(&l, LORA_EXP_UP, 1, 2);
    double worst = 0, moved = 0;
    for (int o = 0; o < I_TINY; o++)
        for (int i = 0; i < D_TINY; i++) {
            double d = 0;
            for (int k = 0; k < R_LORA; k++) d += (double)b[o * R_LORA + k] * a[k * D_TINY + i];
            worst = fmax(worst, fabs(before[o * D_TINY + i] + l.scale * d - w[o * D_TINY + i]));
            moved = fmax(moved, fabs(l.scale * d));
        }
    CHECK(worst < 1e-6 && moved > 1e-2);
    CHECK(model_layer_tensor(&m, P_W_GATE, 0)[5] != gate0);
    free(before);
    lora_free(&l);
    model_free(&m);
}

/* The adapter's log-probs equal those of the merged model without it. */
static void test_forward_is_merged(void) {
    TEST("the adapted forward over each expert's routed rows gives the merged model's log-probs");
    model m, merged;
    CHECK(tiny_model(&m, ARCH_QWEN3_MOE, false) == 0 && tiny_model(&merged, ARCH_QWEN3_MOE, false) == 0);
    lora l;
    tiny_lora(&l, &m, "gate,up,down", 0.0);
    fill_uniform(l.memory, l.n_params, 0.3, 0.0, 19, 0);
    lora_merge(&merged, &l);
    double d, moved;
    lora_vs_merged(&m, &merged, &l, &d, &moved);
    /* float32 sums in two orders (measured about 1e-6); the adapter moved them by far more */
    CHECK(d < 1e-5 && moved > 1e-2);
    lora_free(&l);
    model_free(&m), model_free(&merged);
}

/* Every layer a mixture, the experts' adapters alone, dropout 0.3: the
 * training pass differs from the pass without dropout (the masks apply to
 * the experts' inputs), and its gradient is the central difference of its
 * loss at a fixed pass (the backward's masks are the forward's). */
static void test_dropout(void) {
    TEST("LoRA dropout on the experts: applied, and the backward's masks are the forward's (central differences)");
    model m;
    memset(&m, 0, sizeof m);
    tiny_config(&m.cfg, ARCH_QWEN3_MOE, false);
    m.cfg.moe_dense[0] = 0;
    CHECK(tiny_model_fill(&m) == 0);
    lora l;
    tiny_lora(&l, &m, "gate,up,down", 0.3);
    fill_uniform(l.memory, l.n_params, 0.3, 0.0, 23, 0);
    gerr e = {0};
    trainer t;
    CHECK(trainer_init(&t, &m, &l, TRAINER_LORA, false, 64, 0, 32, 64, &e) == 0);
    t.dropout_seed = 3, t.dropout_pass = 1;
    group_batch gb;
    make_groups(&gb, m.cfg.vocab_size, false);
    trainer_zero_grad(&t);
    double kept = linear_loss_pass(&t, &gb.b, 0.8f, true, true, 0);
    double plain = linear_loss_pass(&t, &gb.b, 0.8f, false, false, 0);
    CHECK(fabs(kept - plain) > 1e-3);
    int checked = 0, bad = 0;
    double largest = 0;
    for (int s = LORA_EXP_GATE; s < LORA_N_SETS; s++)
        for (int k = 0; k < 6; k++) {
            bool is_b = k & 1;
            size_t n = (size_t)l.n_mats[s] * l.r * (is_b ? l.out_dim[s] : l.in_dim[s]);
            size_t i = (size_t)(k * 7919 + s * 31) % n;
            float *w = (is_b ? l.b[s] : l.a[s]) + i, saved = *w, h = 1e-2f;
            *w = saved + h;
            double lp = linear_loss_pass(&t, &gb.b, 0.8f, true, false, 0);
            *w = saved - h;
            double lm = linear_loss_pass(&t, &gb.b, 0.8f, true, false, 0);
            *w = saved;
            double fd = (lp - lm) / (2.0 * h), an = (is_b ? t.grad_b[s] : t.grad_a[s])[i];
            checked++, largest = fmax(largest, fabs(an));
            /* float32 central differences of step 1e-2: ~1e-3 relative (test_train's bound) */
            if (fabs(fd - an) > 2e-3 + 2e-2 * fabs(fd)) {
                bad++;
                printf("#   set %d %c[%zu]: analytic %.6g finite-difference %.6g\n", s, is_b ? 'B' : 'A', i, an, fd);
            }
        }
    CHECK(checked == 18 && largest > 1e-3);
    CHECK_EQ_INT(bad, 0);
    trainer_free(&t);
    lora_free(&l);
    model_free(&m);
}

int main(void) {
    test_layout();
    test_merge();
    test_forward_is_merged();
    test_dropout();
    return check_done();
}
