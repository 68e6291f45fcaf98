/* A model's hyper-parameters from GGUF metadata (llama.cpp's keys under
 * general.architecture's prefix, the vocabulary's size from
 * tokenizer.ggml.tokens), for the GGUF loader (load_gguf.c). */
#include "gguf_config.h"

#include <math.h>
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

/* A number under arch's prefix: *out untouched when absent. */
static int gguf_num(const gguf_file *f, const char *arch, const char *suffix, double *out, gerr *e) {
    char key[256];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (kv && !gguf_value_f64(&kv->v, out))
        return gerr_set(e, EX_DATAERR, "%s: key \"%s\": expected a number", f->name, key);
    return 0;
}

/* The expert settings every mixture reads: expert_count and
 * expert_used_count, both required, and the expert width
 * expert_feed_forward_length (required when width_required, else
 * defaulting to feed_forward_length / k as llama.cpp's qwen3moe does). */
static int read_experts(model_config *c, const gguf_file *f, const char *arch, bool width_required, gerr *e) {
    int rc;
    if ((rc = gguf_int(f, arch, "expert_count", -1, &c->n_experts, e)) ||
        (rc = gguf_int(f, arch, "expert_used_count", -1, &c->n_experts_used, e)))
        return rc;
    if (c->n_experts <= 0 || c->n_experts_used <= 0)
        return gerr_set(e, EX_DATAERR, "%s: %s.expert_count and expert_used_count must be positive", f->name, arch);
    return gguf_int(f, arch, "expert_feed_forward_length", width_required ? -1 : c->hidden_dim / c->n_experts_used,
                    &c->moe_hidden_dim, e);
}

/* llama.cpp's gpt-oss (LLM_ARCH_OPENAI_MOE) sliding layers: every layer
 * with attention.sliding_window_pattern's entry non-zero when it is an
 * array (layers past its end full), else with pattern n (default 2) layer l
 * when n == 0 or l % n < n - 1: sliding, full, sliding, ... by default. */
static int read_oss_windows(model_config *c, const gguf_file *f, const char *arch, gerr *e) {
    int rc = gguf_int(f, arch, "attention.sliding_window", -1, &c->sliding_window, e);
    if (rc) return rc;
    if (c->sliding_window <= 0)
        return gerr_set(e, EX_DATAERR, "%s: %s.attention.sliding_window must be positive", f->name, arch);
    char key[256];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", arch);
    const gguf_kv *kv = gguf_find_kv(f, key);
    bool array = kv && kv->v.type == GGUF_ARRAY;
    gguf_value pat = {0};
    int n = 2;
    if (c->n_layers > MODEL_MAX_DENSE_LAYERS)
        return gerr_set(e, EX_DATAERR, "%s: %d layers: at most %d are supported", f->name, c->n_layers,
                        MODEL_MAX_DENSE_LAYERS);
    if (array) {
        if ((rc = gguf_get_array(f, key, GGUF_NTYPES, &pat, e))) return rc;
        if (pat.elem_type != GGUF_BOOL && pat.elem_type != GGUF_U32 && pat.elem_type != GGUF_I32)
            return gerr_set(e, EX_DATAERR, "%s: key \"%s\": expected an array of bool, u32 or i32", f->name, key);
    } else if ((rc = gguf_int(f, arch, "attention.sliding_window_pattern", 2, &n, e))) {
        return rc;
    }
    for (int l = 0; l < c->n_layers; l++) {
        bool swa = !array && (n == 0 || l % n < n - 1);
        if (array && (uint64_t)l < pat.count) {
            gguf_value v = gguf_array_at(&pat, (uint64_t)l);
            swa = pat.elem_type == GGUF_BOOL ? gguf_value_bool(&v, &swa) && swa : gguf_array_int(&pat, (uint64_t)l) != 0;
        }
        if (swa) c->swa_layers[l / 64] |= 1ull << (l % 64);
    }
    return 0;
}

/* YaRN as llama.cpp's gpt-oss computes it: rope.scaling.factor (absent:
 * 1) over rope.scaling.original_context_length (absent: the context),
 * beta_fast 32 and beta_slow 1 (llama.cpp's defaults: its gpt-oss reads no
 * yarn_beta_* key), the ramp's ends always floored and ceiled (ggml's
 * ggml_rope_yarn_corr_dims; Hugging Face's gpt-oss says truncate false),
 * and cos, sin scaled by 0.1 ln(factor) + 1 for a factor above 1, times
 * rope.scaling.attn_factor (absent: 1). */
static int read_oss_yarn(model_config *c, const gguf_file *f, const char *arch, gerr *e) {
    double factor = 0, attn = 1;
    int rc;
    if ((rc = gguf_num(f, arch, "rope.scaling.factor", &factor, e)) ||
        (rc = gguf_num(f, arch, "rope.scaling.attn_factor", &attn, e)) ||
        (rc = gguf_int(f, arch, "rope.scaling.original_context_length", c->max_seq_len, &c->rope_original_max_pos, e)))
        return rc;
    if (factor == 0) factor = 1;
    if (!(factor > 0) || !(attn > 0) || c->rope_original_max_pos <= 0)
        return gerr_set(e, EX_DATAERR, "%s: %s.rope.scaling: factor, attn_factor and original_context_length must be positive",
                        f->name, arch);
    c->rope_yarn = c->rope_truncate = true;
    c->rope_factor = factor, c->rope_beta_fast = 32, c->rope_beta_slow = 1;
    c->rope_attn_factor = (factor > 1 ? 0.1 * log(factor) + 1 : 1) * attn;
    return 0;
}

/* llama.cpp's gpt-oss: every layer a mixture with biases, the softmax over
 * the top k's logits, its SwiGLU clamped at 7 with alpha 1.702 (both
 * hardcoded there), sinks, biases on q, k, v and o, sliding layers; one
 * RoPE base for every layer (a different rope.freq_base_swa is refused). */
static int read_oss(model_config *c, const gguf_file *f, const char *arch, gerr *e) {
    int rc;
    if ((rc = read_experts(c, f, arch, true, e)) || (rc = read_oss_windows(c, f, arch, e))) return rc;
    double swa_base = c->rope_theta;
    if ((rc = gguf_num(f, arch, "rope.freq_base_swa", &swa_base, e))) return rc;
    if ((float)swa_base != (float)c->rope_theta)
        return gerr_set(e, EX_DATAERR, "%s: %s.rope.freq_base_swa %g differs from rope.freq_base %g: not supported",
                        f->name, arch, swa_base, c->rope_theta);
    c->hidden_dim = c->moe_hidden_dim; /* no dense layer: the width config_check sees */
    c->qkv_bias = c->attn_o_bias = c->attn_sinks = c->moe_bias = true;
    c->moe_norm_topk = true, c->moe_step = 1;
    c->swiglu_limit = 7.0f, c->swiglu_alpha = 1.702f;
    return 0;
}

/* rope.scaling.type: none, or yarn for gpt-oss. */
static int read_rope_scaling(model_config *c, const gguf_file *f, const char *arch, gerr *e) {
    char key[256];
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    const gguf_kv *kv = gguf_find_kv(f, key);
    gguf_str s;
    if (!kv || !gguf_value_str(&kv->v, &s) || (s.len == 4 && !memcmp(s.ptr, "none", 4))) return 0;
    if (c->arch == ARCH_GPT_OSS && s.len == 4 && !memcmp(s.ptr, "yarn", 4)) return read_oss_yarn(c, f, arch, e);
    return gerr_set(e, EX_DATAERR, "%s: rope scaling \"%.*s\" is not supported%s", f->name,
                    (int)(s.len > 64 ? 64 : s.len), s.ptr, c->arch == ARCH_GPT_OSS ? " (none or yarn)" : "");
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
    else if (!strcmp(arch, "gpt-oss")) c->arch = ARCH_GPT_OSS;
    else return gerr_set(e, EX_DATAERR, "%s: unsupported architecture \"%s\"", f->name, arch);

    if ((rc = gguf_int(f, arch, "block_count", -1, &c->n_layers, e)) ||
        (rc = gguf_int(f, arch, "embedding_length", -1, &c->dim, e)) ||
        (rc = gguf_int(f, arch, "feed_forward_length", c->arch == ARCH_GPT_OSS ? 0 : -1, &c->hidden_dim, e)) ||
        (rc = gguf_int(f, arch, "attention.head_count", -1, &c->n_heads, e)) ||
        (rc = gguf_int(f, arch, "attention.head_count_kv", c->n_heads, &c->n_kv_heads, e)) ||
        (rc = gguf_int(f, arch, "context_length", 2048, &c->max_seq_len, e)))
        return rc;
    if (c->n_heads <= 0) return gerr_set(e, EX_DATAERR, "%s: %s.attention.head_count is 0", f->name, arch);
    /* llama.cpp's qwen3moe: every layer sparse, the top k renormalised
     * always (its graph's norm_w) */
    if (c->arch == ARCH_QWEN3_MOE) {
        if ((rc = read_experts(c, f, arch, false, e))) return rc;
        c->moe_norm_topk = true, c->moe_step = 1;
    }
    int rope_dims, v_dims;
    if ((rc = gguf_int(f, arch, "attention.key_length", c->dim / c->n_heads, &c->head_dim, e)) ||
        (rc = gguf_int(f, arch, "attention.value_length", c->head_dim, &v_dims, e)) ||
        (rc = gguf_int(f, arch, "rope.dimension_count", c->head_dim, &rope_dims, e)))
        return rc;
    if (rope_dims != c->head_dim)
        return gerr_set(e, EX_DATAERR, "%s: partial rotary embeddings (%d of %d dims) are not supported",
                        f->name, rope_dims, c->head_dim);
    if (v_dims != c->head_dim)
        return gerr_set(e, EX_DATAERR, "%s: %s.attention.value_length %d differs from key_length %d: not supported",
                        f->name, arch, v_dims, c->head_dim);

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
    if (c->arch == ARCH_GPT_OSS && (rc = read_oss(c, f, arch, e))) return rc;
    if ((rc = read_rope_scaling(c, f, arch, e))) return rc;

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
