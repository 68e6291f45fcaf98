/* Training on a device backend, checked without a GPU: the trainer, the
 * optimizer step and grpo-update's whole run on tests/unit/fake_device.h,
 * the CPU's ops behind memory the host cannot read (tagged pointers: a
 * host read of device memory faults, a host array handed to an op as
 * device memory aborts naming the op). Its ops are the CPU's in float32, so
 * every result must be the CPU backend's bit for bit: logp, entropies,
 * gradients, and the checkpoint's weights and AdamW moments after a run
 * with micro-batches, clipping, a KL reference and two optimizer steps
 * (the second reads the weights the first refreshed on the device), and
 * LoRA over a frozen base packed as q4k, q8 or bf16 (--base-weights, or
 * auto following a bf16 file's format as on the CPU; test_frozen_device
 * checks the upload and the trainer over such bases). What
 * this cannot check is the CUDA kernels' arithmetic: test_cuda_ops and
 * tests/bats/update_device.bats do that on a GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sysexits.h>
#include <unistd.h>

#include "check.h"
#include "ckpt/hf_dir.h"
#include "fake_device.h"
#include "tiny_train.h"
#include "train/update.h"

/* Forward (kept), then backward with an entropy term, on the CPU and on
 * the fake device: the same logp, entropies and gradients, bit for bit;
 * and a forward-only trainer's log-probs. */
static void test_trainer_on(model_arch arch, bool tied, const char *lora_targets, double dropout, bool masked,
                            bool recompute, bool replay, const char *name) {
    TEST(name);
    bool use_lora = lora_targets != NULL;
    model mc, md;
    if (tiny_model(&mc, arch, tied) || tiny_model(&md, arch, tied)) {
        CHECK(0);
        return;
    }
    gerr e = {0};
    CHECK(model_to_backend(&md, fake_device(), &e) == 0);
    lora l, ld;
    float *lmem = NULL;
    if (use_lora) {
        tiny_lora(&l, &mc, lora_targets, dropout);
        fill_uniform(l.memory, l.n_params, 0.2, 0.0, 9, 1);
        lora_on_backend(fake_device(), &ld, &l, &lmem);
    }
    trainer_mode mode = use_lora ? TRAINER_LORA : TRAINER_FULL;
    trainer tc, td, ic, id;
    CHECK(trainer_init(&tc, &mc, use_lora ? &l : NULL, mode, recompute, 64, 0, 32, 64, &e) == 0);
    CHECK(trainer_init(&td, &md, use_lora ? &ld : NULL, mode, recompute, 64, 0, 32, 64, &e) == 0);
    CHECK(trainer_init(&ic, &mc, NULL, TRAINER_INFER, false, 64, 0, 32, 64, &e) == 0);
    CHECK(trainer_init(&id, &md, NULL, TRAINER_INFER, false, 64, 0, 32, 64, &e) == 0);
    CHECK(td.be == fake_device() && tc.be == backend_cpu());
    tc.dropout_seed = td.dropout_seed = 17, tc.dropout_pass = td.dropout_pass = 2;
    group_batch gb;
    make_groups(&gb, mc.cfg.vocab_size, masked);
    int n = train_batch_targets(&gb.b);
    uint16_t routing[96 * 4];
    if (replay) tiny_replay_routing(&gb, &mc.cfg, routing);
    float lc[64], ld_[64], ec[64], ed[64], coef[64], dent[64];
    fill_uniform(coef, 64, 1.0, 0.0, 11, 0);
    fill_uniform(dent, 64, 0.5, 0.0, 12, 0);

    trainer_forward(&ic, &gb.b, 0.8f, false, false, lc, ec);
    trainer_forward(&id, &gb.b, 0.8f, false, false, ld_, ed);
    CHECK(trainer_check(&id, &e) == 0);
    CHECK(!memcmp(lc, ld_, (size_t)n * sizeof *lc) && !memcmp(ec, ed, (size_t)n * sizeof *ec));

    float *gc = malloc(tc.n_grad * sizeof *gc), *gd = malloc(td.n_grad * sizeof *gd);
    CHECK(gc && gd && td.n_grad == tc.n_grad);
    train_step_grads(&tc, &gb.b, coef, dent, lc, ec, gc);
    train_step_grads(&td, &gb.b, coef, dent, ld_, ed, gd);
    CHECK(!memcmp(lc, ld_, (size_t)n * sizeof *lc) && !memcmp(ec, ed, (size_t)n * sizeof *ec));
    double mx = 0;
    for (size_t i = 0; gc && i < tc.n_grad; i++) mx = fmax(mx, fabs((double)gc[i]));
    CHECK(mx > 0); /* a gradient that is all zeros would compare equal too */
    CHECK(gc && gd && !memcmp(gd, gc, tc.n_grad * sizeof *gd));
    free(gc), free(gd);
    trainer_free(&tc), trainer_free(&td), trainer_free(&ic), trainer_free(&id);
    if (use_lora) {
        fake_device()->mem_free(lmem);
        lora_free(&l);
    }
    model_free(&mc), model_free(&md);
}

static void test_trainer(model_arch arch, bool tied, bool use_lora, double dropout, bool masked, bool recompute,
                         const char *name) {
    test_trainer_on(arch, tied, use_lora ? "q,k,v,o,gate,up,down" : NULL, dropout, masked, recompute, false, name);
}

/* ---- grpo-update's run ---------------------------------------------------------- */

/* dir/NAME's bytes into a malloc'ed buffer; NULL when unreadable. */
static char *slurp(const char *dir, const char *name, size_t *n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long len = ftell(f);
        if (len >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)len + 1)) &&
            fread(buf, 1, (size_t)len, f) != (size_t)len) {
            free(buf);
            buf = NULL;
        }
        *n = (size_t)len;
    }
    fclose(f);
    return buf;
}

static bool same_file(const char *a, const char *b, const char *name) {
    size_t na = 0, nb = 0;
    char *x = slurp(a, name, &na), *y = slurp(b, name, &nb);
    bool same = x && y && na == nb && !memcmp(x, y, na);
    free(x), free(y);
    return same;
}

/* Whether checkpoint dir's grpo/state.json says its base was held as fmt. */
static bool trained_on(const char *dir, const char *fmt) {
    size_t n = 0;
    char want[64];
    snprintf(want, sizeof want, "\"base_weights\":\"%s\"", fmt);
    char *st = slurp(dir, "grpo/state.json", &n);
    bool yes = st && memmem(st, n, want, strlen(want));
    free(st);
    return yes;
}

/* tiny_train.h's mixtures of experts as config.json says them (the
 * generated config of a dense model is hf_write_config's). */
static const char *moe_config_json(model_arch arch) {
    if (arch == ARCH_QWEN3_MOE)
        return "{\"architectures\": [\"Qwen3MoeForCausalLM\"], \"model_type\": \"qwen3_moe\", \"hidden_size\": 32, "
               "\"intermediate_size\": 48, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
               "\"num_key_value_heads\": 2, \"head_dim\": 12, \"vocab_size\": 61, \"max_position_embeddings\": 64, "
               "\"rms_norm_eps\": 1e-05, \"rope_theta\": 10000.0, \"tie_word_embeddings\": false, "
               "\"num_experts\": 4, \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 16, "
               "\"norm_topk_prob\": true, \"decoder_sparse_step\": 1, \"mlp_only_layers\": [0]}\n";
    return "{\"architectures\": [\"GptOssForCausalLM\"], \"model_type\": \"gpt_oss\", \"hidden_size\": 32, "
           "\"intermediate_size\": 32, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
           "\"num_key_value_heads\": 2, \"head_dim\": 8, \"vocab_size\": 61, \"max_position_embeddings\": 64, "
           "\"rms_norm_eps\": 1e-05, \"rope_theta\": 10000.0, \"tie_word_embeddings\": false, "
           "\"num_local_experts\": 4, \"num_experts_per_tok\": 2, \"experts_per_token\": 2, \"swiglu_limit\": 7.0, "
           "\"sliding_window\": 5, \"layer_types\": [\"sliding_attention\", \"full_attention\"], "
           "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 32.0, \"beta_fast\": 32.0, \"beta_slow\": 1.0, "
           "\"original_max_position_embeddings\": 16, \"truncate\": false}}\n";
}

/* A tiny model of arch as an HF directory (wide: tiny_model_wide's, as a
 * q8 or q4k base needs), and 4 prompt groups of 3 completions for it:
 * advantaged records as grpo-advantage writes them. */
static void write_fixture(const char *dir, const char *batch, model_arch arch, bool wide) {
    gerr e = {0};
    model m;
    CHECK((wide ? tiny_model_wide(&m, arch, false) : tiny_model(&m, arch, false)) == 0);
    char path[512];
    CHECK(mkdir(dir, 0755) == 0);
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (m.cfg.n_experts > 0) {
        FILE *cf = fopen(path, "w");
        CHECK(cf && fputs(moe_config_json(arch), cf) >= 0);
        CHECK(cf && fclose(cf) == 0);
    } else {
        CHECK(hf_write_config(path, &m, "/dev/null", "float32", false, &e) == 0); /* not a directory: generated */
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    CHECK(hf_write_weights(path, &m, EXPORT_F32, &e) == 0);
    FILE *f = fopen(batch, "w");
    CHECK(f != NULL);
    rng_stream r;
    rng_init(&r, 21, "batch", 5, 0);
    for (int g = 0; f && g < 4; g++) {
        int np = 3 + g % 3;
        int32_t prompt[8];
        for (int i = 0; i < np; i++) prompt[i] = (int32_t)rng_below(&r, (uint64_t)m.cfg.vocab_size);
        for (int k = 0; k < 3; k++) {
            fprintf(f, "{\"id\":\"g%d\",\"prompt_tokens\":[", g);
            for (int i = 0; i < np; i++) fprintf(f, "%s%d", i ? "," : "", prompt[i]);
            int nc = 2 + (g * 3 + k * 5) % 7;
            fprintf(f, "],\"completion_tokens\":[");
            for (int i = 0; i < nc; i++) fprintf(f, "%s%d", i ? "," : "", (int)rng_below(&r, (uint64_t)m.cfg.vocab_size));
            fprintf(f, "],\"logprobs\":[");
            for (int i = 0; i < nc; i++) fprintf(f, "%s%.4f", i ? "," : "", -3.5 - 0.5 * rng_uniform(&r));
            fprintf(f, "],\"advantage\":%.3f}\n", (k - 1) * 0.8 + 0.1 * g);
        }
    }
    CHECK(f && fclose(f) == 0);
    model_free(&m);
}

/* grpo-update on the CPU and on the fake device with the same flags: the
 * same checkpoint weights and optimizer state, byte for byte. The model is
 * root/tiny (a llama) or root/MODEL; base: --base-weights (NULL: left out). */
static void test_update_run_on(const char *root, const char *model, const char *what, long long lora_r, double dropout,
                               const char *ref, double aux, const char *targets, const char *base, const char *name) {
    TEST(name);
    char model_dir[512], batch[512], out_cpu[512], out_dev[512];
    snprintf(model_dir, sizeof model_dir, "%s/%s", root, model);
    snprintf(batch, sizeof batch, "%s/batch.jsonl", root);
    snprintf(out_cpu, sizeof out_cpu, "%s/%s-cpu", root, what);
    snprintf(out_dev, sizeof out_dev, "%s/%s-dev", root, what);
    update_opts o;
    update_opts_default(&o);
    update_run_opts *r = &o.run;
    r->model = model_dir, r->in = batch, r->ref = ref;
    o.optim.lr = 1e-3, o.optim.max_grad_norm = 0.05; /* clipping on: the device's norm and scale */
    r->iterations = 2, r->micro_batch = 24, r->threads = 1, r->seed = 5;
    r->lora_r = lora_r, r->lora_dropout = dropout, o.loss.router_aux_coef = aux;
    if (targets) o.lora_targets = targets, r->lora_targets_given = true; /* else the model's default */
    if (base) r->base_weights = base, r->base_weights_given = true;
    gerr e = {0};
    r->out = out_cpu;
    update_plan plan;
    int rc = update_plan_resolve(&o, &plan, &e);
    CHECK(rc == 0);
    if (!rc) rc = update_run(&plan, &e);
    if (rc) fprintf(stderr, "# cpu: %s\n", e.msg);
    CHECK(rc == 0);
    r->out = out_dev, r->backend = fake_device();
    rc = update_plan_resolve(&o, &plan, &e);
    CHECK(rc == 0);
    if (!rc) rc = update_run(&plan, &e);
    if (rc) fprintf(stderr, "# fake device: %s\n", e.msg);
    CHECK(rc == 0);
    CHECK(same_file(out_cpu, out_dev, lora_r ? "adapter_model.safetensors" : "model.safetensors"));
    CHECK(same_file(out_cpu, out_dev, "grpo/optimizer.safetensors"));
    /* the steps moved the weights (a run that trained nothing would pass the
     * above; the LoRA cases' gradients are checked non-zero by test_trainer) */
    if (!lora_r) CHECK(!same_file(model_dir, out_dev, "model.safetensors"));
    if (base) CHECK(trained_on(out_dev, base)); /* the device trained on that base */
    if (targets) { /* the only caller's: gpt_oss's experts, a stacked adapter */
        size_t n = 0;
        const char *want = "\"target_parameters\": [\n    \"mlp.experts.gate_up_proj\"";
        char *cfg = slurp(out_dev, "adapter_config.json", &n);
        CHECK(cfg && memmem(cfg, n, want, strlen(want)));
        free(cfg);
    }
}

static void test_update_run(const char *root, const char *what, long long lora_r, double dropout, const char *ref,
                            const char *name) {
    test_update_run_on(root, "tiny", what, lora_r, dropout, ref, 0, NULL, NULL, name);
}

/* --router-aux-coef on a device without the balance loss's backward (the
 * fake with that entry taken out, as CUDA's): 64 in one line naming the
 * flag, nothing written. */
static void test_aux_refused(const char *root, const char *model_dir, const char *batch) {
    TEST("grpo-update --router-aux-coef on a device without the balance loss's op: 64, one line, nothing written");
    update_opts o;
    update_opts_default(&o);
    char out[700];
    snprintf(out, sizeof out, "%s/aux", root);
    backend lacking = *fake_device();
    lacking.moe_balance_backward = NULL;
    update_run_opts *r = &o.run;
    r->model = model_dir, r->in = batch, r->out = out, r->threads = 1, r->backend = &lacking;
    o.loss.router_aux_coef = 0.01;
    gerr e = {0};
    update_plan plan;
    CHECK(update_plan_resolve(&o, &plan, &e) == 0);
    CHECK_EQ_INT(update_run(&plan, &e), EX_USAGE);
    CHECK(strstr(e.msg, "--router-aux-coef 0.01: the router's load-balancing loss runs on the CPU only") &&
          !strchr(e.msg, '\n'));
    CHECK(access(out, F_OK) != 0);
}

static void test_group_sums_refused(void) {
    TEST("--group-sums on a device: trainer_keep_sums refuses (64), as update_run does");
    model m;
    CHECK(tiny_model(&m, ARCH_LLAMA, false) == 0);
    gerr e = {0};
    CHECK(model_to_backend(&m, fake_device(), &e) == 0);
    trainer t;
    CHECK(trainer_init(&t, &m, NULL, TRAINER_FULL, false, 64, 0, 32, 64, &e) == 0);
    CHECK(trainer_keep_sums(&t, &e) == EX_USAGE);
    CHECK(strstr(e.msg, "--group-sums") != NULL);
    CHECK(t.grad_sum == NULL);
    trainer_free(&t);
    model_free(&m);
}

int main(void) {
    test_trainer(ARCH_LLAMA, true, false, 0, false, false, "llama (tied), full: logp, entropy, gradients as the CPU's");
    test_group_sums_refused();
    test_trainer(ARCH_QWEN2, false, false, 0, true, false, "qwen2 (biases), full, multi-turn mask");
    test_trainer(ARCH_QWEN3, false, false, 0, false, true, "qwen3 (q/k norm), full, --recompute");
    test_trainer(ARCH_LLAMA, false, true, 0, false, false, "llama, LoRA (prompts shared)");
    test_trainer(ARCH_QWEN3, false, true, 0.1, true, false, "qwen3, LoRA with dropout, multi-turn mask");
    test_trainer(ARCH_QWEN3_MOE, false, false, 0, false, false, "qwen3_moe (a mixture of experts), full");
    test_trainer_on(ARCH_QWEN3_MOE, false, NULL, 0, true, true, true,
                    "qwen3_moe, full, a replayed routing, --recompute, multi-turn mask");
    test_trainer(ARCH_QWEN3_MOE, false, true, 0.1, false, false,
                 "qwen3_moe, LoRA on every expert's projections with dropout");
    test_trainer(ARCH_GPT_OSS, false, false, 0, false, false,
                 "gpt_oss (sinks, window, YaRN, biases, clamped SwiGLU), full");
    test_trainer_on(ARCH_GPT_OSS, false, "q,k,v,o", 0, false, false, false, "gpt_oss, LoRA on its attention");
    test_trainer_on(ARCH_GPT_OSS, false, "q,k,v,o,gate,up,down", 0, false, true, false,
                    "gpt_oss, LoRA on its stacked experts too (gate and up share A_e), --recompute");

    char root[] = "/tmp/test_train_device.XXXXXX";
    if (!mkdtemp(root)) {
        TEST("grpo-update's fixture");
        CHECK(0);
        return check_done();
    }
    char dir[600], batch[600], ref[600];
    snprintf(dir, sizeof dir, "%s/tiny", root);
    snprintf(batch, sizeof batch, "%s/batch.jsonl", root);
    snprintf(ref, sizeof ref, "%s/ref", root);
    write_fixture(dir, batch, ARCH_LLAMA, false);
    write_fixture(ref, "/dev/null", ARCH_LLAMA, false);
    char moe[600], oss[600], wide[600];
    snprintf(moe, sizeof moe, "%s/moe", root);
    snprintf(oss, sizeof oss, "%s/oss", root);
    snprintf(wide, sizeof wide, "%s/wide", root);
    write_fixture(moe, "/dev/null", ARCH_QWEN3_MOE, false);
    write_fixture(oss, "/dev/null", ARCH_GPT_OSS, false);
    write_fixture(wide, "/dev/null", ARCH_LLAMA, true);
    char wide16[600], path[700];
    snprintf(wide16, sizeof wide16, "%s/wide16", root);
    write_fixture(wide16, "/dev/null", ARCH_LLAMA, true);
    { /* its weights again as bf16 */
        model m;
        gerr e = {0};
        snprintf(path, sizeof path, "%s/model.safetensors", wide16);
        CHECK(tiny_model_wide(&m, ARCH_LLAMA, false) == 0 && hf_write_weights(path, &m, EXPORT_BF16, &e) == 0);
        model_free(&m);
    }
    test_update_run(root, "full", 0, 0, NULL, "grpo-update full fine-tuning on the device: the CPU's checkpoint bytes");
    test_update_run(root, "lora", 4, 0.1, NULL, "grpo-update LoRA with dropout on the device: the CPU's checkpoint bytes");
    test_update_run(root, "ref", 0, 0, ref, "grpo-update with --ref (a second model on the device): the CPU's bytes");
    test_update_run_on(root, "moe", "moe", 0, 0, NULL, 0.01, NULL, NULL,
                       "grpo-update qwen3_moe full fine-tuning with --router-aux-coef on the device: the CPU's bytes");
    test_update_run_on(root, "moe", "moe-lora", 4, 0, NULL, 0, NULL, NULL,
                       "grpo-update qwen3_moe LoRA on the device: the CPU's bytes");
    test_update_run_on(root, "oss", "oss", 0, 0, NULL, 0, NULL, NULL,
                       "grpo-update gpt_oss full fine-tuning on the device: the CPU's bytes");
    test_update_run_on(root, "oss", "oss-lora", 4, 0, NULL, 0, "all", NULL,
                       "grpo-update gpt_oss LoRA on its stacked experts (PEFT's ParamWrapper) on the device: the CPU's bytes");
    test_update_run_on(root, "wide", "q4k", 4, 0.1, NULL, 0, NULL, "q4k",
                       "grpo-update LoRA with dropout on a q4k frozen base on the device: the CPU's bytes");
    test_update_run_on(root, "wide", "q8", 4, 0, NULL, 0, NULL, "q8",
                       "grpo-update LoRA on a q8 frozen base on the device: the CPU's bytes");
    test_update_run_on(root, "wide", "bf16", 4, 0, NULL, 0, NULL, "bf16",
                       "grpo-update LoRA on a bf16 frozen base on the device: the CPU's bytes");
    test_update_run_on(root, "wide16", "auto16", 4, 0, NULL, 0, NULL, NULL,
                       "grpo-update LoRA on a bf16 file, --base-weights auto, on the device: the CPU's bytes");
    TEST("--base-weights auto on a device follows the file's format, as on the CPU: bf16");
    snprintf(path, sizeof path, "%s/auto16-dev", root);
    CHECK(trained_on(path, "bf16"));
    test_aux_refused(root, moe, batch);
    {
        TEST("grpo-update --group-sums on the caller's device: 64, nothing written");
        update_opts o;
        update_opts_default(&o);
        char out[700];
        snprintf(out, sizeof out, "%s/gs", root);
        update_run_opts *r = &o.run;
        r->model = dir, r->in = batch, r->out = out, r->threads = 1, r->group_sums = true, r->backend = fake_device();
        gerr e = {0};
        update_plan plan;
        CHECK(update_plan_resolve(&o, &plan, &e) == 0);
        CHECK(update_run(&plan, &e) == EX_USAGE);
        CHECK(strstr(e.msg, "--group-sums") != NULL);
        CHECK(access(out, F_OK) != 0);
    }
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) fprintf(stderr, "# could not remove %s\n", root);
    return check_done();
}
