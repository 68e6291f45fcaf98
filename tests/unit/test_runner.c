/* lib/runner: the capacity rules rollout and the rm reward share (a first
 * reserve sizes exactly; growth keeps the cache's contents and adds a
 * quarter of headroom up to the model's context; the scratch never shrinks)
 * and a forward through a reserved runner. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "runner/runner.h"

static int tiny_runner(model_runner *r) {
    gerr e = {0};
    memset(r, 0, sizeof *r);
    model_config *c = &r->m.cfg;
    c->arch = ARCH_LLAMA, c->dim = 16, c->hidden_dim = 24, c->n_layers = 2, c->n_heads = 2, c->n_kv_heads = 1;
    c->head_dim = 8, c->vocab_size = 11, c->max_seq_len = 40, c->rope_theta = 10000, c->norm_eps = 1e-5f;
    c->tied_embeddings = true, c->bos_id = -1;
    if (model_alloc(&r->m, &e)) return 1;
    for (size_t i = 0; i < r->m.n_params; i++) r->m.params_memory[i] = (float)((i * 7919 % 97) / 97.0 - 0.5) * 0.2f;
    return 0;
}

int main(void) {
    model_runner r;
    gerr e = {0};

    TEST("a first reserve sizes the cache and scratch exactly");
    if (tiny_runner(&r)) { /* the model could not be made: nothing below can run */
        CHECK(0);
        return check_done();
    }
    CHECK(runner_reserve(&r, 3, 10, 12, &e) == 0);
    CHECK_EQ_INT(r.cache.n_seqs, 3);
    CHECK_EQ_INT(r.cache.max_len, 10);
    CHECK_EQ_INT(r.scratch.max_rows, 12);
    CHECK(r.scratch.max_len >= r.cache.max_len);
    CHECK(r.rows.cap >= 12);

    TEST("what fits changes nothing");
    float *k_before = r.cache.k;
    CHECK(runner_reserve(&r, 3, 8, 5, &e) == 0);
    CHECK(r.cache.k == k_before);
    CHECK_EQ_INT(r.cache.max_len, 10);
    CHECK_EQ_INT(r.scratch.max_rows, 12);

    TEST("growing keeps the cache's contents and adds a quarter of headroom");
    size_t per = (size_t)r.cache.kv_dim;
    for (size_t i = 0; i < 10 * per; i++) r.cache.k[(size_t)1 * r.cache.n_layers * 10 * per + i] = (float)i;
    CHECK(runner_reserve(&r, 3, 16, 20, &e) == 0);
    CHECK_EQ_INT(r.cache.max_len, 20);
    CHECK_EQ_INT(r.scratch.max_rows, 25);
    CHECK(r.scratch.max_len >= 20);
    int same = 1;
    for (size_t i = 0; i < 10 * per; i++) same &= r.cache.k[(size_t)1 * r.cache.n_layers * 20 * per + i] == (float)i;
    CHECK(same);

    TEST("the cache never outgrows the model's context");
    CHECK(runner_reserve(&r, 3, 39, 20, &e) == 0);
    CHECK_EQ_INT(r.cache.max_len, 40);
    CHECK(runner_reserve(&r, 3, 1000, 20, &e) == 0);
    CHECK_EQ_INT(r.cache.max_len, 40);

    TEST("a forward through the reserved runner writes finite logits");
    int seq[4] = {0, 0, 0, 2}, pos[4] = {0, 1, 2, 0};
    int32_t tok[4] = {1, 2, 3, 4};
    float logits[4 * 11];
    model_forward(&r.m, &r.cache, 4, seq, pos, tok, NULL, logits, &r.scratch);
    int finite = 1;
    for (int i = 0; i < 4 * 11; i++) finite &= isfinite(logits[i]);
    CHECK(finite);
    /* the first rows of sequences 0 and 2 see the same token history length
     * but different tokens: their logits differ */
    CHECK(memcmp(logits, logits + 3 * 11, 11 * sizeof(float)) != 0);
    runner_close(&r);

    TEST("kv_fmt set before the first reserve: a bf16 cache, kept through growth, near the fp32 logits");
    float logits16[4 * 11];
    if (tiny_runner(&r)) {
        CHECK(0);
        return check_done();
    }
    r.kv_fmt = KV_BF16;
    CHECK(runner_reserve(&r, 3, 4, 4, &e) == 0);
    CHECK(r.cache.fmt == KV_BF16);
    CHECK(runner_reserve(&r, 3, 12, 4, &e) == 0);
    CHECK(r.cache.fmt == KV_BF16 && r.cache.max_len == 15);
    model_forward(&r.m, &r.cache, 4, seq, pos, tok, NULL, logits16, &r.scratch);
    /* K and V rounded to bf16 (2^-9 relative) move these small logits
     * (|logit| < 1 with weights of at most 0.1) by far less than 2^-6 */
    float worst = 0;
    for (int i = 0; i < 4 * 11; i++) worst = fmaxf(worst, fabsf(logits16[i] - logits[i]));
    CHECK(worst < 0x1.0p-6f);
    runner_close(&r);
    return check_done();
}
