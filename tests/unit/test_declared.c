/* Unit tests of the declared-size check (lib/ckpt/declared.c): the weights
 * a config declares equal what model_alloc allocates for every kind of
 * model (tied, biases, per-head norms, a classifier head); more than twice
 * what the file holds is 65 naming the file and its size fields, in config.json's or
 * GGUF's names; absurd sizes never overflow. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "ckpt/declared.h"
#include "model/model.h"

static model_config tiny(model_arch arch, bool tied, bool cls) {
    model_config c;
    memset(&c, 0, sizeof c);
    c.arch = arch;
    c.dim = 32, c.hidden_dim = 48, c.n_layers = 3, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 8;
    c.vocab_size = 50, c.max_seq_len = 64, c.rope_theta = 10000, c.norm_eps = 1e-6f;
    c.tied_embeddings = tied, c.qkv_bias = arch == ARCH_QWEN2, c.qk_norm = arch == ARCH_QWEN3;
    c.seq_cls = cls, c.num_labels = cls ? 3 : 0;
    return c;
}

static void test_equals_alloc(void) {
    TEST("model_declared_values equals model_alloc's n_params for llama, qwen2, qwen3, tied, a classifier");
    for (int arch = ARCH_LLAMA; arch <= ARCH_QWEN3; arch++)
        for (int tied = 0; tied < 2; tied++)
            for (int cls = 0; cls < 2; cls++) {
                model m;
                memset(&m, 0, sizeof m);
                m.cfg = tiny((model_arch)arch, tied, cls);
                gerr e = {0};
                if (model_alloc(&m, &e)) {
                    printf("#   %s\n", e.msg);
                    check_current_failed = 1;
                    continue;
                }
                CHECK_EQ_INT((long long)model_declared_values(&m.cfg), (long long)m.n_params);
                /* a few tensors missing: left to the loader, which names them */
                CHECK_EQ_INT(model_check_declared(&m.cfg, (double)m.n_params / 2, "c", false, "w", &e), 0);
                CHECK_EQ_INT(model_check_declared(&m.cfg, (double)m.n_params / 2 - 1, "c", false, "w", &e), EX_DATAERR);
                model_free(&m);
            }
}

static void test_messages(void) {
    TEST("absurd sizes: 65 naming the file and the size fields, HF and GGUF names, no overflow");
    model_config c = tiny(ARCH_LLAMA, true, false);
    c.n_layers = 1000000000;
    gerr e = {0};
    CHECK_EQ_INT(model_check_declared(&c, 1e6, "m/config.json", false, "m/model.safetensors", &e), EX_DATAERR);
    CHECK(strstr(e.msg, "m/config.json: the sizes it declares (num_hidden_layers 1000000000, hidden_size 32,") == e.msg);
    CHECK(strstr(e.msg, "vocab_size 50) need 7.744e+12 weights") && strstr(e.msg, "and the tensors of m/model.safetensors hold 1e+06"));
    c = tiny(ARCH_QWEN2, false, false);
    c.n_layers = c.dim = c.hidden_dim = c.vocab_size = 2147483647;
    CHECK(model_declared_values(&c) > 1e28); /* beyond 2^64: no wrap-around */
    CHECK_EQ_INT(model_check_declared(&c, 1e9, "x.gguf", true, "x.gguf", &e), EX_DATAERR);
    CHECK(strstr(e.msg, "x.gguf: the sizes it declares (qwen2.block_count 2147483647, qwen2.embedding_length"));
    CHECK(strstr(e.msg, "tokenizer.ggml.tokens 2147483647"));
}

int main(void) {
    test_equals_alloc();
    test_messages();
    return check_done();
}
