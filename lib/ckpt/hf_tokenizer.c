/* tokenizer.json from a GGUF's tokenizer.ggml.* metadata: byte-level BPE with
 * the vocab and merges as stored, control tokens as special added tokens,
 * user-defined ones as plain added tokens (what lib/tok/model_text.c builds
 * from the same metadata), and the pre-tokenizer, post-processor and decoder
 * Hugging Face ships for the family tokenizer.ggml.pre names. */
#include <stdio.h>
#include <string.h>

#include "../tok/tokenizer.h"
#include "hf_dir.h"

/* llama.cpp's token types: 3 = control, 4 = user-defined. */
enum { TOKEN_CONTROL = 3, TOKEN_USER_DEFINED = 4 };

static void byte_level(strbuf *b, bool prefix, bool trim, bool regex) {
    sb_printf(b, "{\"type\": \"ByteLevel\", \"add_prefix_space\": %s, \"trim_offsets\": %s, \"use_regex\": %s}",
              prefix ? "true" : "false", trim ? "true" : "false", regex ? "true" : "false");
}

static void pre_tokenizer(strbuf *b, tok_pre_kind kind) {
    switch (kind) {
    case TOK_PRE_GPT2: byte_level(b, false, true, true); return;
    case TOK_PRE_SMOLLM:
        sb_puts(b, "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\", \"individual_digits\": true}, ");
        byte_level(b, false, true, true);
        sb_puts(b, "]}");
        return;
    case TOK_PRE_LLAMA3:
    case TOK_PRE_QWEN2:
    case TOK_PRE_GPT4O: {
        const char *re = tok_pre_kind_split(kind);
        sb_puts(b, "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": ");
        sb_json_string(b, re, strlen(re));
        sb_puts(b, "}, \"behavior\": \"Isolated\", \"invert\": false}, ");
        byte_level(b, false, kind != TOK_PRE_QWEN2, false);
        sb_puts(b, "]}");
        return;
    }
    }
}

/* One piece of a template: a special token or the sequence A / B. */
static void tmpl_item(strbuf *b, bool *first, const gguf_str *special, const char *seq, int type_id) {
    if (!*first) sb_puts(b, ", ");
    *first = false;
    if (special) {
        sb_puts(b, "{\"SpecialToken\": {\"id\": ");
        sb_json_string(b, special->ptr, special->len);
        sb_printf(b, ", \"type_id\": %d}}", type_id);
    } else {
        sb_printf(b, "{\"Sequence\": {\"id\": \"%s\", \"type_id\": %d}}", seq, type_id);
    }
}

/* "[<bos>] $A [<eos>]" for one sequence, the same again with $B for a pair. */
static void tmpl_list(strbuf *b, const gguf_str *bos, const gguf_str *eos, int parts) {
    bool first = true;
    sb_putc(b, '[');
    for (int part = 0; part < parts; part++) {
        if (bos) tmpl_item(b, &first, bos, NULL, part);
        tmpl_item(b, &first, NULL, part ? "B" : "A", part);
        if (eos) tmpl_item(b, &first, eos, NULL, part);
    }
    sb_putc(b, ']');
}

/* HF's TemplateProcessing for add_bos_token / add_eos_token (ids -1 when off). */
static void template_processing(strbuf *b, const gguf_value *toks, int64_t bos, int64_t eos) {
    gguf_str sb = {0}, se = {0};
    if (bos >= 0) sb = gguf_array_str(toks, (uint64_t)bos);
    if (eos >= 0) se = gguf_array_str(toks, (uint64_t)eos);
    sb_puts(b, "{\"type\": \"TemplateProcessing\", \"single\": ");
    tmpl_list(b, bos >= 0 ? &sb : NULL, eos >= 0 ? &se : NULL, 1);
    sb_puts(b, ", \"pair\": ");
    tmpl_list(b, bos >= 0 ? &sb : NULL, eos >= 0 ? &se : NULL, 2);
    sb_puts(b, ", \"special_tokens\": {");
    for (int k = 0; k < 2; k++) {
        int64_t id = k ? eos : bos;
        const gguf_str *s = k ? &se : &sb;
        if (id < 0 || (k && id == bos)) continue;
        if (k && bos >= 0) sb_puts(b, ", ");
        sb_json_string(b, s->ptr, s->len);
        sb_puts(b, ": {\"id\": ");
        sb_json_string(b, s->ptr, s->len);
        sb_printf(b, ", \"ids\": [%lld], \"tokens\": [", (long long)id);
        sb_json_string(b, s->ptr, s->len);
        sb_puts(b, "]}");
    }
    sb_puts(b, "}}");
}

/* An optional id key; -1 when absent or out of the vocab. */
static int64_t opt_id(const gguf_file *f, const char *key, uint64_t n_tokens) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    uint64_t v;
    return kv && gguf_value_u64(&kv->v, &v) && v < n_tokens ? (int64_t)v : -1;
}

static bool opt_bool(const gguf_file *f, const char *key) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    bool v = false;
    return kv && gguf_value_bool(&kv->v, &v) && v;
}

static void post_processor(strbuf *b, const gguf_file *f, tok_pre_kind kind, const gguf_value *toks) {
    int64_t bos = opt_bool(f, "tokenizer.ggml.add_bos_token") ? opt_id(f, "tokenizer.ggml.bos_token_id", toks->count) : -1;
    int64_t eos = opt_bool(f, "tokenizer.ggml.add_eos_token") ? opt_id(f, "tokenizer.ggml.eos_token_id", toks->count) : -1;
    bool qwen = kind == TOK_PRE_QWEN2;
    if (bos < 0 && eos < 0) {
        byte_level(b, !qwen, false, !qwen);
        return;
    }
    sb_puts(b, "{\"type\": \"Sequence\", \"processors\": [");
    byte_level(b, !qwen, false, !qwen);
    sb_puts(b, ", ");
    template_processing(b, toks, bos, eos);
    sb_puts(b, "]}");
}

static void added_tokens(strbuf *b, const gguf_value *toks, const gguf_value *types) {
    sb_puts(b, "  \"added_tokens\": [");
    int n = 0;
    for (uint64_t i = 0; types && i < toks->count; i++) {
        int64_t t = gguf_array_int(types, i);
        if (t != TOKEN_CONTROL && t != TOKEN_USER_DEFINED) continue;
        gguf_str s = gguf_array_str(toks, i);
        sb_printf(b, "%s\n    {\"id\": %llu, \"content\": ", n++ ? "," : "", (unsigned long long)i);
        sb_json_string(b, s.ptr, s.len);
        /* as model_text.c reads the GGUF: control tokens matched before
         * normalization and special, user-defined ones after and plain */
        bool control = t == TOKEN_CONTROL;
        sb_printf(b, ", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": %s, "
                     "\"special\": %s}",
                  control ? "false" : "true", control ? "true" : "false");
    }
    sb_puts(b, n ? "\n  ],\n" : "],\n");
}

int hf_gguf_tokenizer_json(const gguf_file *f, strbuf *out, gerr *e) {
    gguf_str kind_s, pre_s;
    gguf_value toks, merges, types;
    int rc;
    if ((rc = gguf_get_string(f, "tokenizer.ggml.model", &kind_s, e))) return rc;
    if (kind_s.len != 4 || memcmp(kind_s.ptr, "gpt2", 4))
        return gerr_set(e, EX_DATAERR,
                        "%s: tokenizer.ggml.model \"%.*s\" is not supported (byte-level BPE \"gpt2\" only)", f->name,
                        (int)(kind_s.len > 40 ? 40 : kind_s.len), kind_s.ptr);
    if ((rc = gguf_get_string(f, "tokenizer.ggml.pre", &pre_s, e))) return rc;
    char pre_name[64];
    snprintf(pre_name, sizeof pre_name, "%.*s", (int)(pre_s.len < 63 ? pre_s.len : 63), pre_s.ptr);
    tok_pre_kind kind;
    if ((rc = tok_pre_kind_from_name(pre_name, &kind, e))) {
        gerr inner = *e;
        return gerr_set(e, inner.code, "%s: %s", f->name, inner.msg);
    }
    if ((rc = gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_STRING, &toks, e)) ||
        (rc = gguf_get_array(f, "tokenizer.ggml.merges", GGUF_STRING, &merges, e)))
        return rc;
    bool have_types = gguf_find_kv(f, "tokenizer.ggml.token_type") != NULL;
    if (have_types && (rc = gguf_get_array(f, "tokenizer.ggml.token_type", GGUF_NTYPES, &types, e))) return rc;
    if (have_types && types.count != toks.count)
        return gerr_set(e, EX_DATAERR, "%s: tokenizer.ggml.token_type has %llu entries for %llu tokens", f->name,
                        (unsigned long long)types.count, (unsigned long long)toks.count);

    sb_puts(out, "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n");
    added_tokens(out, &toks, have_types ? &types : NULL);
    sb_puts(out, "  \"normalizer\": null,\n  \"pre_tokenizer\": ");
    pre_tokenizer(out, kind);
    sb_puts(out, ",\n  \"post_processor\": ");
    post_processor(out, f, kind, &toks);
    sb_puts(out, ",\n  \"decoder\": ");
    if (kind == TOK_PRE_QWEN2) byte_level(out, false, false, false);
    else byte_level(out, true, true, true);
    sb_printf(out, ",\n  \"model\": {\n    \"type\": \"BPE\",\n    \"dropout\": null,\n    \"unk_token\": null,\n"
                   "    \"continuing_subword_prefix\": null,\n    \"end_of_word_suffix\": null,\n"
                   "    \"fuse_unk\": false,\n    \"byte_fallback\": false,\n    \"ignore_merges\": %s,\n"
                   "    \"vocab\": {",
              kind == TOK_PRE_LLAMA3 ? "true" : "false");
    for (uint64_t i = 0; i < toks.count; i++) {
        gguf_str s = gguf_array_str(&toks, i);
        sb_puts(out, i ? ",\n      " : "\n      ");
        sb_json_string(out, s.ptr, s.len);
        sb_printf(out, ": %llu", (unsigned long long)i);
    }
    sb_puts(out, "\n    },\n    \"merges\": [");
    for (uint64_t i = 0; i < merges.count; i++) {
        gguf_str s = gguf_array_str(&merges, i);
        sb_puts(out, i ? ",\n      " : "\n      ");
        sb_json_string(out, s.ptr, s.len);
    }
    sb_puts(out, merges.count ? "\n    ]\n  }\n}\n" : "]\n  }\n}\n");
    return 0;
}
