/* config.json of an export: the source's own with torch_dtype changed, or
 * one generated from a GGUF's hyper-parameters as transformers writes it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../io/json_scan.h"
#include "../io/mapped.h"
#include "../io/outstream.h"
#include "hf_dir.h"
#include "hf_source.h"

/* ---- editing a config.json in place ---------------------------------------------- */

typedef struct {
    char *key;                     /* decoded */
    size_t key_at, key_end, val_at, val_end; /* byte offsets in the text */
} member;

static size_t skip_ws(const char *s, size_t len, size_t i) {
    while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
    return i;
}

/* The top-level members of a JSON object text, in order. */
static int scan_members(const char *s, size_t len, member **out, size_t *n, const char *name, gerr *e) {
    *out = NULL;
    *n = 0;
    size_t cap = 0, i = skip_ws(s, len, 0);
    json_scan_error err = {0};
    if (i >= len || s[i] != '{') return gerr_set(e, EX_DATAERR, "%s: not a JSON object", name);
    size_t end = json_scan_value(s, len, i, &err);
    if (!end || skip_ws(s, len, end) != len)
        return gerr_set(e, EX_DATAERR, "%s: invalid JSON near byte %zu", name, err.column ? err.column : end);
    i = skip_ws(s, len, i + 1);
    while (s[i] != '}') {
        if (*n == cap) *out = xrealloc(*out, (cap = cap ? 2 * cap : 32) * sizeof **out);
        member *m = &(*out)[(*n)++];
        m->key_at = i;
        size_t kend = m->key_end = json_scan_value(s, len, i, &err); /* valid: checked above */
        strbuf k = {0};
        json_decode_string(s + i + 1, kend - i - 2, &k);
        sb_putc(&k, 0); /* an empty key still gets a buffer */
        m->key = k.data;
        i = skip_ws(s, len, skip_ws(s, len, kend) + 1); /* past ':' */
        m->val_at = i;
        m->val_end = json_scan_value(s, len, i, &err);
        i = skip_ws(s, len, m->val_end);
        if (s[i] == ',') i = skip_ws(s, len, i + 1);
    }
    return 0;
}

/* text with the value of top-level member key (and of alias, not NULL) set
 * to the JSON value (or left as it is without replace), or key added where
 * sorted keys put it, in the file's own style. */
static int set_member(const char *s, size_t len, const char *key, const char *alias, const char *value, bool replace,
                      strbuf *out, const char *name, gerr *e) {
    member *ms;
    size_t n;
    int rc = scan_members(s, len, &ms, &n, name, e);
    if (rc) return rc;
    strbuf val = {0};
    sb_puts(&val, value);
    size_t at = 0;
    bool found = false;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(ms[i].key, key) || (alias && !strcmp(ms[i].key, alias))) {
            found = true;
            if (!replace) continue;
            sb_append(out, s + at, ms[i].val_at - at);
            sb_append(out, val.data, val.len);
            at = ms[i].val_end;
        }
    if (!found && n == 0) {
        size_t open = skip_ws(s, len, 0);
        sb_append(out, s, open + 1);
        sb_json_string(out, key, strlen(key));
        sb_printf(out, ": %s", val.data);
        at = skip_ws(s, len, open + 1);
    } else if (!found) {
        size_t k = 0;
        while (k < n && strcmp(ms[k].key, key) < 0) k++;
        size_t first_ws = skip_ws(s, len, 0) + 1; /* the indent before each key */
        strbuf item = {0};
        sb_json_string(&item, key, strlen(key));
        sb_append(&item, s + ms[0].key_end, ms[0].val_at - ms[0].key_end); /* the file's ": " */
        sb_append(&item, val.data, val.len);
        if (k < n) {
            sb_append(out, s, ms[k].key_at);
            sb_append(out, item.data, item.len);
            sb_putc(out, ',');
            sb_append(out, s + first_ws, ms[0].key_at - first_ws);
            at = ms[k].key_at;
        } else {
            sb_append(out, s, ms[n - 1].val_end);
            sb_putc(out, ',');
            sb_append(out, s + first_ws, ms[0].key_at - first_ws);
            sb_append(out, item.data, item.len);
            at = ms[n - 1].val_end;
        }
        sb_free(&item);
    }
    sb_append(out, s + at, len - at);
    for (size_t i = 0; i < n; i++) free(ms[i].key);
    free(ms);
    sb_free(&val);
    return 0;
}

/* text without its top-level member key (as it is when there is none), the
 * rest in the file's own style. */
static int drop_member(const char *s, size_t len, const char *key, strbuf *out, const char *name, gerr *e) {
    member *ms;
    size_t n, i = 0;
    int rc = scan_members(s, len, &ms, &n, name, e);
    if (rc) return rc;
    while (i < n && strcmp(ms[i].key, key)) i++;
    if (i == n) sb_append(out, s, len);
    else if (i + 1 < n) { /* up to the next key */
        sb_append(out, s, ms[i].key_at);
        sb_append(out, s + ms[i + 1].key_at, len - ms[i + 1].key_at);
    } else if (i > 0) { /* the last: from the end of the one before */
        sb_append(out, s, ms[i - 1].val_end);
        sb_append(out, s + ms[i].val_end, len - ms[i].val_end);
    } else { /* the only one */
        sb_append(out, s, skip_ws(s, len, 0) + 1);
        sb_append(out, s + ms[i].val_end, len - ms[i].val_end);
    }
    for (size_t j = 0; j < n; j++) free(ms[j].key);
    free(ms);
    return 0;
}

/* The quantization_config gpt-oss's own config.json has. */
static const char OSS_MXFP4[] = "{\"modules_to_not_convert\": [\"model.layers.*.self_attn\", "
                                "\"model.layers.*.mlp.router\", \"model.embed_tokens\", \"lm_head\"], "
                                "\"quant_method\": \"mxfp4\"}";

/* The source's config.json with the dtype written, and its
 * "quantization_config" kept (or gpt-oss's added) when the experts are
 * written as MXFP4 blocks, else removed: transformers must look for
 * quantized tensors where they are and only there. */
static int copy_config(const char *out_path, const char *source, const char *dtype, bool mxfp4, gerr *e) {
    char *path;
    int rc = hf_source_file(source, "config.json", &path, e);
    if (rc) return rc;
    if (!path) return gerr_set(e, EX_NOINPUT, "%s/config.json: no such file", source);
    size_t len;
    char *text = read_regular_file(path, &len, e);
    if (!text) {
        free(path);
        return e->code;
    }
    strbuf kept = {0}, out = {0}, val = {0};
    sb_json_string(&val, dtype, strlen(dtype));
    if (mxfp4) rc = set_member(text, len, "quantization_config", NULL, OSS_MXFP4, false, &kept, path, e);
    else rc = drop_member(text, len, "quantization_config", &kept, path, e);
    if (!rc) rc = set_member(kept.data, kept.len, "torch_dtype", "dtype", val.data, true, &out, path, e);
    if (!rc) rc = write_file_atomic(out_path, out.data, out.len, e);
    sb_free(&kept);
    sb_free(&out);
    sb_free(&val);
    free(text);
    free(path);
    return rc;
}

/* ---- generating one from a GGUF's hyper-parameters ----------------------------------- */

typedef struct {
    const char *key;
    strbuf val;
} entry;

typedef struct {
    entry items[40];
    int n;
} entries;

static strbuf *put(entries *es, const char *key) {
    entry *it = &es->items[es->n++];
    it->key = key;
    memset(&it->val, 0, sizeof it->val);
    return &it->val;
}

static int cmp_entry(const void *a, const void *b) {
    return strcmp(((const entry *)a)->key, ((const entry *)b)->key);
}

/* llama.cpp keeps llama3 RoPE scaling only as per-frequency divisors
 * (rope_freqs.weight, already in m->inv_freq): find the rope_scaling that
 * gives the same frequencies. Llama 3.1/3.2/3.3 all use low 1, high 4 and
 * an original context of 8192; the factor is the lowest frequency's divisor. */
static int find_rope_scaling(const model *m, model_config *c, const char *source, gerr *e) {
    float plain[512];
    int half = c->head_dim / 2;
    rope_inv_freq(plain, c);
    bool same = true;
    for (int i = 0; i < half; i++) same = same && fabsf(plain[i] - m->inv_freq[i]) <= 1e-6f * plain[i];
    if (same || c->rope_llama3) return 0;
    model_config t = *c;
    t.rope_llama3 = true;
    t.rope_factor = round((double)plain[half - 1] / m->inv_freq[half - 1] * 1e4) / 1e4;
    t.rope_low_freq_factor = 1, t.rope_high_freq_factor = 4, t.rope_original_max_pos = 8192;
    float scaled[512];
    rope_inv_freq(scaled, &t);
    for (int i = 0; i < half; i++)
        if (!(fabsf(scaled[i] - m->inv_freq[i]) <= 1e-5f * scaled[i]))
            return gerr_set(e, EX_DATAERR,
                            "%s: the RoPE frequencies of rope_freqs.weight match no llama3 rope_scaling "
                            "(tried factor %g, low 1, high 4, original context 8192)",
                            source, t.rope_factor);
    *c = t;
    return 0;
}

static void put_int(entries *es, const char *key, long long v) { sb_printf(put(es, key), "%lld", v); }

static void put_ids(entries *es, const char *key, const int32_t *ids, int n) {
    strbuf *b = put(es, key);
    if (n == 0) sb_puts(b, "null");
    else if (n == 1) sb_printf(b, "%d", (int)ids[0]);
    else
        for (int i = 0; i < n; i++) sb_printf(b, "%s\n    %d%s", i ? "," : "[", (int)ids[i], i == n - 1 ? "\n  ]" : "");
}

/* gpt-oss: biases on the attention, the expert settings config.c reads
 * (intermediate_size, written above, is each expert's width), its clamp,
 * and the layers that slide (layer_types, one per layer, with the window). */
static void put_oss(entries *es, const model_config *c) {
    sb_puts(put(es, "attention_bias"), "true");
    put_int(es, "num_local_experts", c->n_experts);
    put_int(es, "num_experts_per_tok", c->n_experts_used);
    put_int(es, "experts_per_token", c->n_experts_used);
    sb_json_pyfloat(put(es, "swiglu_limit"), c->swiglu_limit, false);
    sb_puts(put(es, "output_router_logits"), "false");
    strbuf *lt = put(es, "layer_types");
    for (int l = 0; l < c->n_layers; l++)
        sb_printf(lt, "%s\n    \"%s\"%s", l ? "," : "[", config_layer_window(c, l) ? "sliding_attention" : "full_attention",
                  l == c->n_layers - 1 ? "\n  ]" : "");
    if (c->sliding_window > 0) put_int(es, "sliding_window", c->sliding_window);
    else sb_puts(put(es, "sliding_window"), "null");
}

static int generate_config(const char *out_path, const model *m, const char *source, const char *dtype, bool mxfp4,
                           gerr *e) {
    model_config c = m->cfg;
    int rc = find_rope_scaling(m, &c, source, e);
    if (rc) return rc;
    static const char *const classes[] = {[ARCH_LLAMA] = "LlamaForCausalLM", [ARCH_QWEN2] = "Qwen2ForCausalLM",
                                          [ARCH_QWEN3] = "Qwen3ForCausalLM", [ARCH_QWEN3_MOE] = "Qwen3MoeForCausalLM",
                                          [ARCH_GPT_OSS] = "GptOssForCausalLM"};
    entries es = {.n = 0};
    sb_printf(put(&es, "architectures"), "[\n    \"%s\"\n  ]", classes[c.arch]);
    sb_printf(put(&es, "model_type"), "\"%s\"", model_arch_name(c.arch));
    sb_puts(put(&es, "attention_dropout"), "0.0");
    if (c.bos_id >= 0) put_int(&es, "bos_token_id", c.bos_id);
    else sb_puts(put(&es, "bos_token_id"), "null");
    put_ids(&es, "eos_token_id", c.eos_ids, c.n_eos);
    put_int(&es, "head_dim", c.head_dim);
    sb_puts(put(&es, "hidden_act"), "\"silu\"");
    put_int(&es, "hidden_size", c.dim);
    sb_puts(put(&es, "initializer_range"), "0.02");
    put_int(&es, "intermediate_size", c.hidden_dim);
    put_int(&es, "max_position_embeddings", c.max_seq_len);
    put_int(&es, "num_attention_heads", c.n_heads);
    put_int(&es, "num_hidden_layers", c.n_layers);
    put_int(&es, "num_key_value_heads", c.n_kv_heads);
    sb_json_pyfloat(put(&es, "rms_norm_eps"), c.norm_eps, true);
    sb_json_pyfloat(put(&es, "rope_theta"), c.rope_theta, false);
    strbuf *rs = put(&es, "rope_scaling");
    if (c.rope_yarn) { /* gpt-oss: every field config.c's read_yarn reads */
        sb_puts(rs, "{\n    \"attention_factor\": ");
        sb_json_pyfloat(rs, c.rope_attn_factor, false);
        sb_puts(rs, ",\n    \"beta_fast\": ");
        sb_json_pyfloat(rs, c.rope_beta_fast, false);
        sb_puts(rs, ",\n    \"beta_slow\": ");
        sb_json_pyfloat(rs, c.rope_beta_slow, false);
        sb_puts(rs, ",\n    \"factor\": ");
        sb_json_pyfloat(rs, c.rope_factor, false);
        sb_printf(rs, ",\n    \"original_max_position_embeddings\": %d,\n    \"rope_type\": \"yarn\",\n    \"truncate\": %s\n  }",
                  c.rope_original_max_pos, c.rope_truncate ? "true" : "false");
    } else if (c.rope_llama3) {
        sb_puts(rs, "{\n    \"factor\": ");
        sb_json_pyfloat(rs, c.rope_factor, false);
        sb_puts(rs, ",\n    \"high_freq_factor\": ");
        sb_json_pyfloat(rs, c.rope_high_freq_factor, false);
        sb_puts(rs, ",\n    \"low_freq_factor\": ");
        sb_json_pyfloat(rs, c.rope_low_freq_factor, false);
        sb_printf(rs, ",\n    \"original_max_position_embeddings\": %d,\n    \"rope_type\": \"llama3\"\n  }",
                  c.rope_original_max_pos);
    } else {
        sb_puts(rs, "null");
    }
    sb_puts(put(&es, "tie_word_embeddings"), c.tied_embeddings ? "true" : "false");
    sb_json_string(put(&es, "torch_dtype"), dtype, strlen(dtype));
    sb_puts(put(&es, "use_cache"), "true");
    put_int(&es, "vocab_size", c.vocab_size);
    if (c.arch == ARCH_GPT_OSS) { /* GptOssConfig's own keys */
        put_oss(&es, &c);
    } else if (c.arch == ARCH_LLAMA) { /* LlamaConfig's own keys */
        sb_puts(put(&es, "attention_bias"), "false");
        sb_puts(put(&es, "mlp_bias"), "false");
        put_int(&es, "pretraining_tp", 1);
    } else { /* Qwen2Config / Qwen3Config / Qwen3MoeConfig (q/k/v biases are implied by qwen2) */
        if (c.arch != ARCH_QWEN2) sb_puts(put(&es, "attention_bias"), "false");
        put_int(&es, "max_window_layers", c.n_layers);
        sb_puts(put(&es, "sliding_window"), "null");
        sb_puts(put(&es, "use_sliding_window"), "false");
    }
    if (c.n_experts > 0 && c.arch != ARCH_GPT_OSS) { /* a GGUF's mixture: every layer sparse (gguf_config.c) */
        put_int(&es, "num_experts", c.n_experts);
        put_int(&es, "num_experts_per_tok", c.n_experts_used);
        put_int(&es, "moe_intermediate_size", c.moe_hidden_dim);
        sb_puts(put(&es, "norm_topk_prob"), c.moe_norm_topk ? "true" : "false");
        put_int(&es, "decoder_sparse_step", c.moe_step);
        sb_puts(put(&es, "mlp_only_layers"), "[]");
    }
    if (mxfp4) sb_puts(put(&es, "quantization_config"), OSS_MXFP4);
    qsort(es.items, (size_t)es.n, sizeof *es.items, cmp_entry);
    strbuf out = {0};
    for (int i = 0; i < es.n; i++) {
        sb_puts(&out, i ? ",\n  " : "{\n  ");
        sb_json_string(&out, es.items[i].key, strlen(es.items[i].key));
        sb_puts(&out, ": ");
        sb_append(&out, es.items[i].val.data, es.items[i].val.len);
        sb_free(&es.items[i].val);
    }
    sb_puts(&out, "\n}\n");
    rc = write_file_atomic(out_path, out.data, out.len, e);
    sb_free(&out);
    return rc;
}

int hf_write_config(const char *out_path, const model *m, const char *source, const char *torch_dtype, bool mxfp4,
                    gerr *e) {
    struct stat st;
    if (stat(source, &st) != 0) return gerr_set(e, EX_NOINPUT, "%s: no such file or directory", source);
    return S_ISDIR(st.st_mode) ? copy_config(out_path, source, torch_dtype, mxfp4, e)
                               : generate_config(out_path, m, source, torch_dtype, mxfp4, e);
}
