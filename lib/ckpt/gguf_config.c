/* A model's hyper-parameters from GGUF metadata (llama.cpp's keys under
 * general.architecture's prefix, the vocabulary's size from
 * tokenizer.ggml.tokens), for the GGUF loader (load_gguf.c). */
#include "gguf_config.h"

#include <stdio.h>
#include <string.h>

static int gguf_int(const gguf_file *f, const char *arch, const char *suffix, int64_t def, int *out,
                    gerr *e) {
    char key[256];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    const gguf_kv *kv = gguf_find_kv(f, key);
    uint64_t v;
    if (!kv) {
        if (def < 0) return gerr_set(e, EX_DATAERR, "%s: key \"%s\" is missing", f->name, key);
        *out = (int)def;
        return 0;
    }
    if (!gguf_value_u64(&kv->v, &v) || v > (1u << 30))
        return gerr_set(e, EX_DATAERR, "%s: key \"%s\": expected a small non-negative integer", f->name, key);
    *out = (int)v;
    return 0;
}

int config_load_gguf(model_config *c, const gguf_file *f, gerr *e) {
    config_defaults(c);
    gguf_str s;
    int rc;
    if ((rc = gguf_get_string(f, "general.architecture", &s, e))) return rc;
    char arch[64];
    if (s.len >= sizeof arch) s.len = sizeof arch - 1;
    memcpy(arch, s.ptr, s.len);
    arch[s.len] = 0;
    snprintf(c->architecture, sizeof c->architecture, "%s", arch);
    if (!strcmp(arch, "llama")) c->arch = ARCH_LLAMA;
    else if (!strcmp(arch, "qwen2")) c->arch = ARCH_QWEN2, c->qkv_bias = true;
    else if (!strcmp(arch, "qwen3")) c->arch = ARCH_QWEN3, c->qk_norm = true;
    else if (!strcmp(arch, "qwen3moe")) c->arch = ARCH_QWEN3_MOE, c->qk_norm = true;
    else return gerr_set(e, EX_DATAERR, "%s: unsupported architecture \"%s\"", f->name, arch);

    if ((rc = gguf_int(f, arch, "block_count", -1, &c->n_layers, e)) ||
        (rc = gguf_int(f, arch, "embedding_length", -1, &c->dim, e)) ||
        (rc = gguf_int(f, arch, "feed_forward_length", -1, &c->hidden_dim, e)) ||
        (rc = gguf_int(f, arch, "attention.head_count", -1, &c->n_heads, e)) ||
        (rc = gguf_int(f, arch, "attention.head_count_kv", c->n_heads, &c->n_kv_heads, e)) ||
        (rc = gguf_int(f, arch, "context_length", 2048, &c->max_seq_len, e)))
        return rc;
    if (c->n_heads <= 0) return gerr_set(e, EX_DATAERR, "%s: %s.attention.head_count is 0", f->name, arch);
    /* llama.cpp's qwen3moe: every layer sparse, the top k renormalised
     * always (its graph's norm_w), the expert width defaulting to
     * feed_forward_length / k as it does */
    if (c->arch == ARCH_QWEN3_MOE) {
        if ((rc = gguf_int(f, arch, "expert_count", -1, &c->n_experts, e)) ||
            (rc = gguf_int(f, arch, "expert_used_count", -1, &c->n_experts_used, e)))
            return rc;
        if (c->n_experts <= 0 || c->n_experts_used <= 0)
            return gerr_set(e, EX_DATAERR, "%s: %s.expert_count and expert_used_count must be positive", f->name, arch);
        if ((rc = gguf_int(f, arch, "expert_feed_forward_length", c->hidden_dim / c->n_experts_used,
                           &c->moe_hidden_dim, e)))
            return rc;
        c->moe_norm_topk = true, c->moe_step = 1;
    }
    if ((rc = gguf_int(f, arch, "attention.key_length", c->dim / c->n_heads, &c->head_dim, e))) return rc;
    int rope_dims;
    if ((rc = gguf_int(f, arch, "rope.dimension_count", c->head_dim, &rope_dims, e))) return rc;
    if (rope_dims != c->head_dim)
        return gerr_set(e, EX_DATAERR, "%s: partial rotary embeddings (%d of %d dims) are not supported",
                        f->name, rope_dims, c->head_dim);

    char key[256];
    const gguf_kv *kv;
    double d;
    snprintf(key, sizeof key, "%s.rope.freq_base", arch);
    c->rope_theta = 10000.0;
    if ((kv = gguf_find_kv(f, key))) {
        if (!gguf_value_f64(&kv->v, &d)) return gerr_set(e, EX_DATAERR, "%s: key \"%s\": expected a number", f->name, key);
        c->rope_theta = d;
    }
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", arch);
    if ((rc = gguf_get_f32(f, key, &c->norm_eps, e))) return rc;
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    if ((kv = gguf_find_kv(f, key)) && gguf_value_str(&kv->v, &s) &&
        !(s.len == 4 && !memcmp(s.ptr, "none", 4)))
        return gerr_set(e, EX_DATAERR, "%s: rope scaling \"%.*s\" is not supported", f->name,
                        (int)(s.len > 64 ? 64 : s.len), s.ptr);

    gguf_value toks;
    if ((rc = gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_STRING, &toks, e))) return rc;
    if (toks.count == 0 || toks.count > (1u << 30))
        return gerr_set(e, EX_DATAERR, "%s: tokenizer.ggml.tokens: bad count", f->name);
    c->vocab_size = (int)toks.count;

    uint64_t id;
    if ((kv = gguf_find_kv(f, "tokenizer.ggml.bos_token_id")) && gguf_value_u64(&kv->v, &id) && id <= INT32_MAX)
        c->bos_id = (int32_t)id;
    const char *eos_keys[] = {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"};
    for (int i = 0; i < 2; i++)
        if ((kv = gguf_find_kv(f, eos_keys[i])) && gguf_value_u64(&kv->v, &id) && id <= INT32_MAX &&
            !config_is_eos(c, (int32_t)id))
            c->eos_ids[c->n_eos++] = (int32_t)id;
    c->tied_embeddings = gguf_find_tensor(f, "output.weight") == NULL;
    return config_check(c, f->name, e);
}
