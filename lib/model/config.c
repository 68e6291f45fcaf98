#include "config.h"

#include "../io/mapped.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


const char *model_arch_name(model_arch a) {
    switch (a) {
    case ARCH_LLAMA: return "llama";
    case ARCH_QWEN2: return "qwen2";
    case ARCH_QWEN3: return "qwen3";
    case ARCH_QWEN3_MOE: return "qwen3_moe";
    case ARCH_GPT_OSS: return "gpt_oss";
    }
    return "unknown";
}

const char *model_arch_gguf(model_arch a) {
    return a == ARCH_QWEN3_MOE ? "qwen3moe" : a == ARCH_GPT_OSS ? "gpt-oss" : model_arch_name(a);
}

/* ---- config.json ---------------------------------------------------------- */

static bool json_int(const cJSON *v, long long lo, long long hi, long long *out) {
    if (!cJSON_IsNumber(v)) return false;
    double d = v->valuedouble;
    if (!(d == floor(d)) || d < (double)lo || d > (double)hi) return false;
    *out = (long long)d;
    return true;
}

/* An integer key: required (def < 0 means absent is an error) or defaulted. */
static int get_int(const cJSON *root, const char *key, long long def, long long lo, int *out,
                   const char *name, gerr *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    long long x;
    if (!v || cJSON_IsNull(v)) {
        if (def < 0) return gerr_set(e, EX_DATAERR, "%s: key \"%s\" is missing", name, key);
        *out = (int)def;
        return 0;
    }
    if (!json_int(v, lo, 1LL << 30, &x))
        return gerr_set(e, EX_DATAERR, "%s: key \"%s\": expected an integer >= %lld", name, key, lo);
    *out = (int)x;
    return 0;
}

static int get_num(const cJSON *root, const char *key, double def, double *out, const char *name,
                   gerr *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) {
        if (isnan(def)) return gerr_set(e, EX_DATAERR, "%s: key \"%s\" is missing", name, key);
        *out = def;
        return 0;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return gerr_set(e, EX_DATAERR, "%s: key \"%s\": expected a number", name, key);
    *out = v->valuedouble;
    return 0;
}

static bool get_bool(const cJSON *root, const char *key, bool def) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : def;
}

/* eos_token_id: an int or a list of ints; absent or null leaves c alone. */
static int read_eos(model_config *c, const cJSON *root, const char *name, gerr *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "eos_token_id");
    long long x;
    if (!v || cJSON_IsNull(v)) return 0;
    c->n_eos = 0;
    if (cJSON_IsArray(v)) {
        const cJSON *el;
        cJSON_ArrayForEach(el, v) {
            if (!json_int(el, 0, INT32_MAX, &x))
                return gerr_set(e, EX_DATAERR, "%s: eos_token_id: expected integers", name);
            if (c->n_eos < MODEL_MAX_EOS) c->eos_ids[c->n_eos++] = (int32_t)x;
        }
        return 0;
    }
    if (!json_int(v, 0, INT32_MAX, &x))
        return gerr_set(e, EX_DATAERR, "%s: eos_token_id: expected an integer or a list", name);
    c->eos_ids[c->n_eos++] = (int32_t)x;
    return 0;
}

/* rope_scaling {rope_type: "yarn"}: defaults as _compute_yarn_parameters'
 * (original context: max_position_embeddings; beta_fast 32, beta_slow 1,
 * truncate true; the attention factor 0.1 ln(factor) + 1 for factor > 1,
 * or mscale / mscale_all_dim's ratio when both are given). */
static int read_yarn(model_config *c, const cJSON *rs, const char *name, gerr *e) {
    int rc;
    double mscale, mscale_all;
    if ((rc = get_num(rs, "factor", NAN, &c->rope_factor, name, e)) ||
        (rc = get_int(rs, "original_max_position_embeddings", c->max_seq_len, 1, &c->rope_original_max_pos, name, e)) ||
        (rc = get_num(rs, "beta_fast", 32, &c->rope_beta_fast, name, e)) ||
        (rc = get_num(rs, "beta_slow", 1, &c->rope_beta_slow, name, e)) ||
        (rc = get_num(rs, "mscale", 0, &mscale, name, e)) || (rc = get_num(rs, "mscale_all_dim", 0, &mscale_all, name, e)))
        return rc;
    if (!(c->rope_factor > 0) || !(c->rope_beta_fast > 0) || !(c->rope_beta_slow > 0))
        return gerr_set(e, EX_DATAERR, "%s: rope_scaling yarn: factor, beta_fast and beta_slow must be positive", name);
    double f = c->rope_factor;
#define YARN_MSCALE(m) (f <= 1 ? 1.0 : 0.1 * (m) * log(f) + 1.0)
    double def = mscale != 0 && mscale_all != 0 ? YARN_MSCALE(mscale) / YARN_MSCALE(mscale_all) : YARN_MSCALE(1.0);
#undef YARN_MSCALE
    if ((rc = get_num(rs, "attention_factor", def, &c->rope_attn_factor, name, e))) return rc;
    if (!(c->rope_attn_factor > 0))
        return gerr_set(e, EX_DATAERR, "%s: rope_scaling yarn: attention_factor must be positive", name);
    c->rope_truncate = get_bool(rs, "truncate", true);
    c->rope_yarn = true;
    return 0;
}

/* rope_scaling (or transformers v5's rope_parameters): none, "default", "llama3" or "yarn". */
static int read_rope_scaling(model_config *c, const cJSON *rs, const char *name, gerr *e) {
    if (!rs || cJSON_IsNull(rs)) return 0;
    if (!cJSON_IsObject(rs)) return gerr_set(e, EX_DATAERR, "%s: rope_scaling: expected an object", name);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
    if (!cJSON_IsString(t)) t = cJSON_GetObjectItemCaseSensitive(rs, "type");
    const char *type = cJSON_IsString(t) ? t->valuestring : "default";
    if (!strcmp(type, "default")) return 0;
    if (!strcmp(type, "yarn")) return read_yarn(c, rs, name, e);
    if (strcmp(type, "llama3"))
        return gerr_set(e, EX_DATAERR, "%s: rope_scaling type \"%s\" is not supported (only llama3 and yarn)",
                        name, type);
    int rc;
    if ((rc = get_num(rs, "factor", NAN, &c->rope_factor, name, e)) ||
        (rc = get_num(rs, "low_freq_factor", NAN, &c->rope_low_freq_factor, name, e)) ||
        (rc = get_num(rs, "high_freq_factor", NAN, &c->rope_high_freq_factor, name, e)) ||
        (rc = get_int(rs, "original_max_position_embeddings", -1, 1, &c->rope_original_max_pos, name, e)))
        return rc;
    if (!(c->rope_factor > 0) || !(c->rope_high_freq_factor > c->rope_low_freq_factor) ||
        !(c->rope_low_freq_factor > 0))
        return gerr_set(e, EX_DATAERR, "%s: rope_scaling llama3: bad factors", name);
    c->rope_llama3 = true;
    return 0;
}

/* arch is the family's class ("Llama" + "ForCausalLM" or "ForSequenceClassification")
 * or its model_type (a causal LM). */
static bool arch_is(const char *arch, const char *family, const char *model_type, bool *seq_cls) {
    size_t n = strlen(family);
    *seq_cls = false;
    if (!strcmp(arch, model_type)) return true;
    if (strncmp(arch, family, n)) return false;
    if (!strcmp(arch + n, "ForCausalLM")) return true;
    if (strcmp(arch + n, "ForSequenceClassification")) return false;
    *seq_cls = true;
    return true;
}

/* num_labels as transformers' PretrainedConfig settles it: id2label's size
 * when the map is there (it wins over a disagreeing num_labels), else
 * num_labels; neither leaves 0 for the loader to take from score.weight. */
static int read_classifier(model_config *c, const cJSON *root, const char *name, gerr *e) {
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "id2label");
    int rc;
    if (cJSON_IsObject(map) && cJSON_GetArraySize(map) > 0) c->num_labels = cJSON_GetArraySize(map);
    else if ((rc = get_int(root, "num_labels", 0, 1, &c->num_labels, name, e))) return rc;
    const cJSON *pad = cJSON_GetObjectItemCaseSensitive(root, "pad_token_id");
    long long x;
    if (!pad || cJSON_IsNull(pad)) return 0;
    if (!json_int(pad, 0, INT32_MAX, &x))
        return gerr_set(e, EX_DATAERR, "%s: key \"pad_token_id\": expected a token id or null", name);
    c->pad_id = (int32_t)x;
    return 0;
}

/* ---- mixture of experts (qwen3_moe) --------------------------------------------- */

/* The integer expert settings of a qwen3_moe config.json with their defaults
 * (transformers' Qwen3MoeConfig) and ranges: the one place they live.
 * norm_topk_prob (default false) and mlp_only_layers (default none) are read
 * beside them; router_aux_loss_coef and output_router_logits only say what
 * transformers' training adds and change no output: accepted. */
typedef struct {
    const char *key;
    long long def, lo, hi;
    size_t at; /* offsetof the model_config field */
} int_key;
static const int_key moe_ints[] = {
    {"num_experts", 128, 1, 1 << 16, offsetof(model_config, n_experts)},
    {"num_experts_per_tok", 8, 1, 1 << 16, offsetof(model_config, n_experts_used)},
    {"moe_intermediate_size", 768, 1, 1 << 20, offsetof(model_config, moe_hidden_dim)},
    {"decoder_sparse_step", 1, 1, 1 << 16, offsetof(model_config, moe_step)},
};
static const char *const moe_other_keys[] = {"norm_topk_prob", "mlp_only_layers", "router_aux_loss_coef",
                                             "output_router_logits", "num_local_experts"};
/* A key holding one of these and none of the above is an expert setting this
 * reader does not know (a shared expert, another scoring or grouping rule):
 * refused rather than ignored. */
static const char *const moe_words[] = {"expert", "moe", "router", "topk", "routed", "scoring", "n_group"};

/* A family's expert settings: its integer keys and the others it reads or accepts. */
typedef struct {
    const char *family, *experts_key; /* the key of n_experts, for messages */
    const int_key *ints;
    size_t n_ints;
    const char *const *others;
    size_t n_others;
    const char *alias; /* another name of ints[alias_of]: when present it must hold the same */
    size_t alias_of;
} expert_keys;

static bool known_key(const expert_keys *k, const char *key) {
    for (size_t i = 0; i < k->n_ints; i++)
        if (!strcmp(key, k->ints[i].key)) return true;
    for (size_t i = 0; i < k->n_others; i++)
        if (!strcmp(key, k->others[i])) return true;
    return false;
}

/* An alias key (absent or null: fine) must hold the integer want, which key2 holds. */
static int check_alias(const cJSON *root, const char *key, int want, const char *key2, const char *name, gerr *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    long long x;
    if (v && !cJSON_IsNull(v) && (!json_int(v, 1, 1 << 16, &x) || x != want))
        return gerr_set(e, EX_DATAERR, "%s: key \"%s\": expected the same integer as %s (%d)", name, key, key2, want);
    return 0;
}

/* Refuses a key that names an expert setting the family does not have, then
 * reads its integer keys (their defaults when absent) into c. */
static int read_expert_ints(model_config *c, const cJSON *root, const expert_keys *k, const char *name, gerr *e) {
    const cJSON *el;
    cJSON_ArrayForEach(el, root) {
        if (known_key(k, el->string)) continue;
        for (size_t i = 0; i < sizeof moe_words / sizeof *moe_words; i++)
            if (strstr(el->string, moe_words[i]))
                return gerr_set(e, EX_DATAERR, "%s: key \"%s\": an expert setting %s does not have (not supported)",
                                name, el->string, k->family);
    }
    for (size_t i = 0; i < k->n_ints; i++) {
        const int_key *t = &k->ints[i];
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, t->key);
        long long x = t->def;
        if (v && !cJSON_IsNull(v) && !json_int(v, t->lo, t->hi, &x))
            return gerr_set(e, EX_DATAERR, "%s: key \"%s\": expected an integer from %lld to %lld", name, t->key, t->lo,
                            t->hi);
        *(int *)((char *)c + t->at) = (int)x;
    }
    if (c->n_experts_used > c->n_experts)
        return gerr_set(e, EX_DATAERR, "%s: key \"num_experts_per_tok\": %d is more than %s (%d)", name,
                        c->n_experts_used, k->experts_key, c->n_experts);
    const int_key *of = &k->ints[k->alias_of];
    return check_alias(root, k->alias, *(const int *)((const char *)c + of->at), of->key, name, e);
}


/* mlp_only_layers: null or a list of layer indices below n_layers. */
static int read_dense_layers(model_config *c, const cJSON *root, const char *name, gerr *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "mlp_only_layers"), *el;
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsArray(v)) return gerr_set(e, EX_DATAERR, "%s: key \"mlp_only_layers\": expected a list of layer indices", name);
    long long l;
    cJSON_ArrayForEach(el, v) {
        if (!json_int(el, 0, c->n_layers - 1, &l) || l >= MODEL_MAX_DENSE_LAYERS)
            return gerr_set(e, EX_DATAERR, "%s: key \"mlp_only_layers\": expected layer indices below %d (num_hidden_layers)",
                            name, c->n_layers < MODEL_MAX_DENSE_LAYERS ? c->n_layers : MODEL_MAX_DENSE_LAYERS);
        c->moe_dense[l / 64] |= 1ull << (l % 64);
    }
    return 0;
}

static int read_moe(model_config *c, const cJSON *root, const char *name, gerr *e) {
    /* transformers' attribute_map names num_experts num_local_experts too */
    const expert_keys k = {"qwen3_moe", "num_experts", moe_ints, sizeof moe_ints / sizeof *moe_ints, moe_other_keys,
                           sizeof moe_other_keys / sizeof *moe_other_keys, "num_local_experts", 0};
    int rc = read_expert_ints(c, root, &k, name, e);
    if (rc) return rc;
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "norm_topk_prob");
    if (norm && !cJSON_IsNull(norm) && !cJSON_IsBool(norm))
        return gerr_set(e, EX_DATAERR, "%s: key \"norm_topk_prob\": expected true or false", name);
    c->moe_norm_topk = cJSON_IsTrue(norm);
    return read_dense_layers(c, root, name, e);
}

/* layer_types: a list of n_layers "full_attention" or "sliding_attention",
 * the latter with the window sliding_window (required then). */
static int read_layer_types(model_config *c, const cJSON *types, const cJSON *root, const char *name, gerr *e) {
    if (!cJSON_IsArray(types) || cJSON_GetArraySize(types) != c->n_layers || c->n_layers > MODEL_MAX_DENSE_LAYERS)
        return gerr_set(e, EX_DATAERR, "%s: key \"layer_types\": expected a list of %d (num_hidden_layers) layer types",
                        name, c->n_layers);
    const cJSON *el;
    int l = 0, rc;
    cJSON_ArrayForEach(el, types) {
        const char *t = cJSON_IsString(el) ? el->valuestring : "";
        if (!strcmp(t, "sliding_attention"))
            c->swa_layers[l / 64] |= 1ull << (l % 64);
        else if (strcmp(t, "full_attention"))
            return gerr_set(e, EX_DATAERR, "%s: key \"layer_types\": entry %d: expected \"full_attention\" or \"sliding_attention\"",
                            name, l);
        l++;
    }
    bool any = false;
    for (size_t i = 0; i < sizeof c->swa_layers / sizeof *c->swa_layers; i++) any = any || c->swa_layers[i];
    if (any && (rc = get_int(root, "sliding_window", -1, 1, &c->sliding_window, name, e))) return rc;
    return 0;
}

/* gpt_oss's expert settings with transformers' GptOssConfig defaults and
 * their ranges: the one place they live. intermediate_size is each
 * expert's width; experts_per_token (its checkpoints carry it) must equal
 * num_experts_per_tok; router_aux_loss_coef and output_router_logits
 * change no output. The routing weights are a softmax over the k selected
 * logits: norm_topk_prob's renormalised softmax, the same function. */
static const int_key oss_ints[] = {
    {"num_local_experts", 128, 1, 1 << 16, offsetof(model_config, n_experts)},
    {"num_experts_per_tok", 4, 1, 1 << 16, offsetof(model_config, n_experts_used)},
    {"intermediate_size", 2880, 1, 1 << 20, offsetof(model_config, moe_hidden_dim)},
};
static const char *const oss_other_keys[] = {"experts_per_token", "router_aux_loss_coef", "output_router_logits",
                                             "swiglu_limit"};

static int read_oss_moe(model_config *c, const cJSON *root, const char *name, gerr *e) {
    const expert_keys k = {"gpt_oss", "num_local_experts", oss_ints, sizeof oss_ints / sizeof *oss_ints, oss_other_keys,
                           sizeof oss_other_keys / sizeof *oss_other_keys, "experts_per_token", 1};
    double limit;
    int rc = read_expert_ints(c, root, &k, name, e);
    if (rc) return rc;
    if ((rc = get_num(root, "swiglu_limit", 7.0, &limit, name, e))) return rc;
    if (!(limit > 0)) return gerr_set(e, EX_DATAERR, "%s: key \"swiglu_limit\": expected a positive number", name);
    c->swiglu_limit = (float)limit, c->swiglu_alpha = 1.702f;
    c->hidden_dim = c->moe_hidden_dim; /* no dense layer: the width config_check sees */
    c->moe_step = 1, c->moe_norm_topk = true, c->moe_bias = true;
    return 0;
}

static int parse_root(model_config *c, const cJSON *root, const char *name, gerr *e) {
    if (!cJSON_IsObject(root)) return gerr_set(e, EX_DATAERR, "%s: expected a JSON object", name);
    /* architectures[0] names the class; model_type when it is absent. */
    const cJSON *archs = cJSON_GetObjectItemCaseSensitive(root, "architectures");
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    const char *arch = NULL;
    if (cJSON_IsArray(archs) && cJSON_IsString(cJSON_GetArrayItem(archs, 0)))
        arch = cJSON_GetArrayItem(archs, 0)->valuestring;
    else if (cJSON_IsString(mt))
        arch = mt->valuestring;
    if (!arch) return gerr_set(e, EX_DATAERR, "%s: no \"architectures\" or \"model_type\"", name);
    snprintf(c->architecture, sizeof c->architecture, "%s", arch);
    bool mistral = false;
    long long def_max_pos = 2048;
    if (arch_is(arch, "Llama", "llama", &c->seq_cls)) {
        c->arch = ARCH_LLAMA;
    } else if (arch_is(arch, "Mistral", "mistral", &c->seq_cls)) {
        c->arch = ARCH_LLAMA, mistral = true, def_max_pos = 4096 * 32;
    } else if (arch_is(arch, "Qwen2", "qwen2", &c->seq_cls)) {
        c->arch = ARCH_QWEN2, c->qkv_bias = true, def_max_pos = 32768;
    } else if (arch_is(arch, "Qwen3Moe", "qwen3_moe", &c->seq_cls)) {
        c->arch = ARCH_QWEN3_MOE, c->qk_norm = true, def_max_pos = 32768;
    } else if (arch_is(arch, "Qwen3", "qwen3", &c->seq_cls)) {
        c->arch = ARCH_QWEN3, c->qk_norm = true, def_max_pos = 32768;
    } else if (arch_is(arch, "GptOss", "gpt_oss", &c->seq_cls) && !c->seq_cls) {
        c->arch = ARCH_GPT_OSS, c->qkv_bias = c->attn_o_bias = c->attn_sinks = true, def_max_pos = 131072;
    } else {
        return gerr_set(e, EX_DATAERR, "%s: unsupported architecture \"%s\"", name, arch);
    }
    int rc;
    bool moe = c->arch == ARCH_QWEN3_MOE;
    if (c->seq_cls && (rc = read_classifier(c, root, name, e))) return rc;
    if ((rc = get_int(root, "hidden_size", -1, 1, &c->dim, name, e)) ||
        (rc = get_int(root, "intermediate_size", moe ? 6144 : c->arch == ARCH_GPT_OSS ? 2880 : -1, 1, &c->hidden_dim,
                      name, e)) ||
        (rc = get_int(root, "num_hidden_layers", -1, 1, &c->n_layers, name, e)) ||
        (rc = get_int(root, "num_attention_heads", -1, 1, &c->n_heads, name, e)) ||
        (rc = get_int(root, "num_key_value_heads", c->n_heads, 1, &c->n_kv_heads, name, e)) ||
        (rc = get_int(root, "vocab_size", -1, 1, &c->vocab_size, name, e)) ||
        (rc = get_int(root, "max_position_embeddings", def_max_pos, 1, &c->max_seq_len, name, e)))
        return rc;
    /* Qwen3 defaults head_dim to 128; the others (Qwen3-MoE too) derive it. */
    long long def_hd = c->arch == ARCH_QWEN3 ? 128 : c->arch == ARCH_GPT_OSS ? 64 : c->dim / c->n_heads;
    if ((rc = get_int(root, "head_dim", def_hd, 1, &c->head_dim, name, e))) return rc;
    if (moe && (rc = read_moe(c, root, name, e))) return rc;
    if (c->arch == ARCH_GPT_OSS && (rc = read_oss_moe(c, root, name, e))) return rc;
    double eps;
    if ((rc = get_num(root, "rope_theta", c->arch == ARCH_GPT_OSS ? 150000.0 : 10000.0, &c->rope_theta, name, e)) ||
        (rc = get_num(root, "rms_norm_eps", 1e-6, &eps, name, e)))
        return rc;
    c->norm_eps = (float)eps;
    c->tied_embeddings = get_bool(root, "tie_word_embeddings", false);

    const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, "hidden_act");
    if (cJSON_IsString(act) && strcmp(act->valuestring, "silu"))
        return gerr_set(e, EX_DATAERR, "%s: hidden_act \"%s\" is not supported (only silu)", name,
                        act->valuestring);
    if (c->arch != ARCH_QWEN2 && c->arch != ARCH_GPT_OSS && get_bool(root, "attention_bias", false))
        return gerr_set(e, EX_DATAERR, "%s: attention_bias is not supported for %s", name, arch);
    if (get_bool(root, "mlp_bias", false))
        return gerr_set(e, EX_DATAERR, "%s: mlp_bias is not supported", name);

    /* layer_types names the layers with a sliding window. Without it a window
     * narrower than the context changes attention in a way not read here:
     * refused. Qwen configs carry sliding_window but only use it with
     * use_sliding_window. */
    const cJSON *sw = cJSON_GetObjectItemCaseSensitive(root, "sliding_window");
    const cJSON *types = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
    bool sw_used = mistral || get_bool(root, "use_sliding_window", false);
    if (types && !cJSON_IsNull(types)) {
        if ((rc = read_layer_types(c, types, root, name, e))) return rc;
    } else if (sw_used && sw && !cJSON_IsNull(sw)) {
        long long w;
        if (!json_int(sw, 0, 1LL << 40, &w))
            return gerr_set(e, EX_DATAERR, "%s: sliding_window: expected an integer or null", name);
        if (w < c->max_seq_len)
            return gerr_set(e, EX_DATAERR, "%s: sliding window not supported (sliding_window %lld < %d positions)",
                            name, w, c->max_seq_len);
    }

    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
    if (cJSON_IsObject(rp)) {
        if ((rc = get_num(rp, "rope_theta", c->rope_theta, &c->rope_theta, name, e))) return rc;
        if ((rc = read_rope_scaling(c, rp, name, e))) return rc;
    } else if ((rc = read_rope_scaling(c, cJSON_GetObjectItemCaseSensitive(root, "rope_scaling"), name, e))) {
        return rc;
    }

    const cJSON *bos = cJSON_GetObjectItemCaseSensitive(root, "bos_token_id");
    long long b;
    if (bos && !cJSON_IsNull(bos)) {
        if (!json_int(bos, 0, INT32_MAX, &b))
            return gerr_set(e, EX_DATAERR, "%s: bos_token_id: expected an integer", name);
        c->bos_id = (int32_t)b;
    }
    return read_eos(c, root, name, e);
}

void config_defaults(model_config *c) {
    memset(c, 0, sizeof *c);
    c->bos_id = -1;
    c->pad_id = -1;
}

int config_parse_hf(model_config *c, const char *json, const char *name, gerr *e) {
    config_defaults(c);
    cJSON *root = cJSON_Parse(json);
    if (!root) return gerr_set(e, EX_DATAERR, "%s: not valid JSON", name);
    int rc = parse_root(c, root, name, e);
    cJSON_Delete(root);
    return rc ? rc : config_check(c, name, e);
}

int config_load_hf(model_config *c, const char *dir, gerr *e) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *text = read_regular_file(path, NULL, e);
    if (!text) return e->code;
    int rc = config_parse_hf(c, text, path, e);
    free(text);
    if (rc) return rc;
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    if ((rc = read_optional_file(path, &text, NULL, e)) || !text) return rc;
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return gerr_set(e, EX_DATAERR, "%s: not a JSON object", path);
    }
    rc = read_eos(c, root, path, e);
    cJSON_Delete(root);
    return rc;
}

/* ---- RoPE frequencies ----------------------------------------------------- */

/* The dimension whose frequency turns n times over the original context
 * (_compute_yarn_parameters' find_correction_dim). */
static double yarn_dim(double n, const model_config *c) {
    return c->head_dim * log(c->rope_original_max_pos / (n * 2 * M_PI)) / (2 * log(c->rope_theta));
}

/* YaRN over the plain frequencies (float32, as HF's pos_freqs): pair i
 * keeps its frequency below the ramp (i <= low), is divided by factor above
 * it (i >= high), and mixes the two linearly between. */
static void yarn_inv_freq(float *inv_freq, const model_config *c) {
    int half = c->head_dim / 2;
    double low = yarn_dim(c->rope_beta_fast, c), high = yarn_dim(c->rope_beta_slow, c);
    if (c->rope_truncate) low = floor(low), high = ceil(high);
    low = fmax(low, 0), high = fmin(high, c->head_dim - 1);
    if (low == high) high += 0.001;
    for (int i = 0; i < half; i++) {
        float ramp = (float)(((float)i - low) / (high - low)); /* HF: float32 arange less min over max - min */
        ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
        double keep = 1 - (double)ramp, f = inv_freq[i];
        inv_freq[i] = (float)(f / c->rope_factor * (1 - keep) + f * keep);
    }
}

double rope_score_scale(const model_config *c) {
    return c->rope_yarn ? c->rope_attn_factor * c->rope_attn_factor : 1.0;
}

int config_layer_window(const model_config *c, int l) {
    if (c->sliding_window <= 0 || l >= MODEL_MAX_DENSE_LAYERS) return 0;
    return c->swa_layers[l / 64] >> (l % 64) & 1 ? c->sliding_window : 0;
}

void rope_inv_freq(float *inv_freq, const model_config *c) {
    int half = c->head_dim / 2;
    for (int i = 0; i < half; i++)
        inv_freq[i] = (float)(1.0 / pow(c->rope_theta, (double)(2 * i) / c->head_dim));
    if (c->rope_yarn) {
        yarn_inv_freq(inv_freq, c);
        return;
    }
    if (!c->rope_llama3) return;
    /* transformers' _compute_llama3_parameters: long wavelengths are slowed
     * by factor, short ones kept, the band between interpolated. */
    double factor = c->rope_factor, lo = c->rope_low_freq_factor, hi = c->rope_high_freq_factor;
    double old_ctx = c->rope_original_max_pos;
    double low_freq_wavelen = old_ctx / lo, high_freq_wavelen = old_ctx / hi;
    for (int i = 0; i < half; i++) {
        double f = inv_freq[i], wavelen = 2 * M_PI / f;
        double g = wavelen > low_freq_wavelen ? f / factor : f;
        if (!(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen)) {
            double smooth = (old_ctx / wavelen - lo) / (hi - lo);
            g = (1 - smooth) * g / factor + smooth * g;
        }
        inv_freq[i] = (float)g;
    }
}

int config_check(const model_config *c, const char *src, gerr *e) {
    if (c->dim <= 0 || c->hidden_dim <= 0 || c->n_layers <= 0 || c->n_heads <= 0 ||
        c->n_kv_heads <= 0 || c->head_dim <= 0 || c->vocab_size <= 0 || c->max_seq_len <= 0)
        return gerr_set(e, EX_DATAERR, "%s: model sizes must be positive", src);
    if (c->n_heads % c->n_kv_heads)
        return gerr_set(e, EX_DATAERR, "%s: %d attention heads are not a multiple of %d key/value heads",
                        src, c->n_heads, c->n_kv_heads);
    if (c->head_dim % 2 || c->head_dim > 1024)
        return gerr_set(e, EX_DATAERR, "%s: head_dim %d is not supported (even, at most 1024)", src, c->head_dim);
    if (!(c->rope_theta > 0) || !(c->norm_eps >= 0))
        return gerr_set(e, EX_DATAERR, "%s: bad rope_theta or rms_norm_eps", src);
    if (c->n_experts > 0 && (c->n_experts_used < 1 || c->n_experts_used > c->n_experts || c->moe_hidden_dim <= 0 ||
                             c->moe_step <= 0))
        return gerr_set(e, EX_DATAERR, "%s: %d of %d experts per token (expert width %d, every %d layers) is not a mixture of experts",
                        src, c->n_experts_used, c->n_experts, c->moe_hidden_dim, c->moe_step);
    for (int i = 0; i < c->n_eos; i++)
        if (c->eos_ids[i] >= c->vocab_size)
            return gerr_set(e, EX_DATAERR, "%s: eos id %d outside the vocabulary (%d)", src,
                            (int)c->eos_ids[i], c->vocab_size);
    return 0;
}

bool config_layer_moe(const model_config *c, int l) {
    if (c->n_experts <= 0 || c->moe_step <= 0 || (l + 1) % c->moe_step) return false;
    return !(l < MODEL_MAX_DENSE_LAYERS && (c->moe_dense[l / 64] >> (l % 64) & 1));
}

/* The sparse layers below layer l: the multiples of the step, less those
 * mlp_only_layers names (at most MODEL_MAX_DENSE_LAYERS bits to look at,
 * whatever the layer count). */
static int sparse_before(const model_config *c, int l) {
    if (c->n_experts <= 0 || c->moe_step <= 0) return 0;
    int n = l / c->moe_step;
    for (int i = 0; i < l && i < MODEL_MAX_DENSE_LAYERS; i++)
        n -= (c->moe_dense[i / 64] >> (i % 64) & 1) && (i + 1) % c->moe_step == 0;
    return n;
}

int config_ffn_layers(const model_config *c, bool moe) {
    int sparse = sparse_before(c, c->n_layers);
    return moe ? sparse : c->n_layers - sparse;
}

int config_ffn_slot(const model_config *c, int l) {
    int sparse = sparse_before(c, l);
    return config_layer_moe(c, l) ? sparse : l - sparse;
}

bool config_is_eos(const model_config *c, int32_t tok) {
    for (int i = 0; i < c->n_eos; i++)
        if (c->eos_ids[i] == tok) return true;
    return false;
}
