/* The text files of an export: tokenizer.json, tokenizer_config.json and
 * generation_config.json (and chat_template.jinja where the source keeps its
 * template there), copied from a Hugging Face directory or built from a
 * GGUF's metadata. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../io/mapped.h"
#include "../io/outstream.h"
#include "../formats/gguf.h"
#include "../tok/tokenizer.h"
#include "hf_dir.h"
#include "hf_source.h"

static char *join(const char *dir, const char *file) {
    strbuf b = {0};
    sb_printf(&b, "%s/%s", dir, file);
    return b.data;
}

static int write_text(const char *dir, const char *file, const strbuf *text, gerr *e) {
    char *path = join(dir, file);
    int rc = write_file_atomic(path, text->data ? text->data : "", text->len, e);
    free(path);
    return rc;
}

/* ---- from a Hugging Face directory ------------------------------------------------ */

/* Copies file byte for byte when the source (or its adapter's base) has it;
 * *copied says whether it did. */
static int copy_file(const char *dir, const char *source, const char *file, bool *copied, gerr *e) {
    *copied = false;
    char *src;
    int rc = hf_source_file(source, file, &src, e);
    if (rc || !src) return rc;
    strbuf text = {0};
    size_t len;
    text.data = read_regular_file(src, &len, e);
    free(src);
    if (!text.data) return e->code;
    text.len = len;
    rc = write_text(dir, file, &text, e);
    sb_free(&text);
    *copied = !rc;
    return rc;
}

/* generation_config.json from config.json's token ids, as transformers
 * makes one (_from_model_config) when a model has none. */
static int generation_from_config(const char *dir, const char *source, gerr *e) {
    char *path;
    int rc = hf_source_file(source, "config.json", &path, e);
    if (rc || !path) return rc;
    size_t len;
    char *text = read_regular_file(path, &len, e);
    if (!text) {
        free(path);
        return e->code;
    }
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        rc = gerr_set(e, EX_DATAERR, "%s: not a JSON object", path);
        free(path);
        return rc;
    }
    free(path);
    strbuf out = {0};
    sb_puts(&out, "{\n  \"_from_model_config\": true");
    static const char *const keys[] = {"bos_token_id", "eos_token_id", "pad_token_id"};
    for (int i = 0; i < 3; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, keys[i]);
        if (!v || cJSON_IsNull(v)) continue;
        char *raw = cJSON_PrintUnformatted(v);
        if (!raw) continue;
        sb_printf(&out, ",\n  \"%s\": %s", keys[i], raw);
        cJSON_free(raw);
    }
    sb_puts(&out, "\n}\n");
    cJSON_Delete(root);
    rc = write_text(dir, "generation_config.json", &out, e);
    sb_free(&out);
    return rc;
}

static int from_dir(const char *dir, const char *source, gerr *e) {
    bool copied, jinja;
    int rc;
    if ((rc = copy_file(dir, source, "tokenizer.json", &copied, e)) ||
        (rc = copy_file(dir, source, "tokenizer_config.json", &copied, e)) ||
        (rc = copy_file(dir, source, "chat_template.jinja", &jinja, e)) || /* newer transformers' (gpt-oss's) */
        (rc = copy_file(dir, source, "generation_config.json", &copied, e)))
        return rc;
    return copied ? 0 : generation_from_config(dir, source, e);
}

/* ---- from a GGUF ---------------------------------------------------------------------- */

static int64_t opt_id(const gguf_file *f, const char *key, uint64_t n_tokens) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    uint64_t v;
    return kv && gguf_value_u64(&kv->v, &v) && v < n_tokens ? (int64_t)v : -1;
}

/* "key": "token text", for a token named by id key (skipped when absent). */
static void token_entry(strbuf *b, const gguf_file *f, const gguf_value *toks, const char *json_key,
                        const char *gguf_key) {
    int64_t id = opt_id(f, gguf_key, toks->count);
    if (id < 0) return;
    gguf_str s = gguf_array_str(toks, (uint64_t)id);
    sb_printf(b, ",\n  \"%s\": ", json_key);
    sb_json_string(b, s.ptr, s.len);
}

static void added_tokens_decoder(strbuf *b, const gguf_file *f, const gguf_value *toks) {
    gguf_value types;
    sb_puts(b, ",\n  \"added_tokens_decoder\": {");
    int n = 0;
    if (gguf_find_kv(f, "tokenizer.ggml.token_type") &&
        !gguf_get_array(f, "tokenizer.ggml.token_type", GGUF_NTYPES, &types, NULL) && types.count == toks->count)
        for (uint64_t i = 0; i < toks->count; i++) {
            int64_t t = gguf_array_int(&types, i);
            if (t != 3 && t != 4) continue; /* control, user-defined */
            gguf_str s = gguf_array_str(toks, i);
            sb_printf(b, "%s\n    \"%llu\": {\n      \"content\": ", n++ ? "," : "", (unsigned long long)i);
            sb_json_string(b, s.ptr, s.len);
            sb_printf(b, ",\n      \"lstrip\": false,\n      \"normalized\": %s,\n      \"rstrip\": false,\n"
                         "      \"single_word\": false,\n      \"special\": %s\n    }",
                      t == 3 ? "false" : "true", t == 3 ? "true" : "false");
        }
    sb_puts(b, n ? "\n  }" : "}");
}

static int tokenizer_config(const char *dir, const gguf_file *f, tok_pre_kind kind, gerr *e) {
    gguf_value toks;
    int rc = gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_STRING, &toks, e);
    if (rc) return rc;
    strbuf b = {0};
    sb_puts(&b, "{\n  \"add_prefix_space\": false");
    added_tokens_decoder(&b, f, &toks);
    token_entry(&b, f, &toks, "bos_token", "tokenizer.ggml.bos_token_id");
    gguf_str tmpl;
    if (gguf_find_kv(f, "tokenizer.chat_template") && !gguf_get_string(f, "tokenizer.chat_template", &tmpl, NULL)) {
        sb_puts(&b, ",\n  \"chat_template\": ");
        sb_json_string(&b, tmpl.ptr, tmpl.len);
    }
    sb_puts(&b, ",\n  \"clean_up_tokenization_spaces\": false");
    token_entry(&b, f, &toks, "eos_token", "tokenizer.ggml.eos_token_id");
    gguf_str arch;
    if (!gguf_get_string(f, "general.architecture", &arch, NULL)) {
        char key[128];
        snprintf(key, sizeof key, "%.*s.context_length", (int)(arch.len < 64 ? arch.len : 64), arch.ptr);
        const gguf_kv *kv = gguf_find_kv(f, key);
        uint64_t ctx;
        if (kv && gguf_value_u64(&kv->v, &ctx)) sb_printf(&b, ",\n  \"model_max_length\": %llu", (unsigned long long)ctx);
    }
    token_entry(&b, f, &toks, "pad_token", "tokenizer.ggml.padding_token_id");
    /* the class transformers writes for the family; all load the fast tokenizer from tokenizer.json */
    sb_printf(&b, ",\n  \"tokenizer_class\": \"%s\"",
              kind == TOK_PRE_LLAMA3 || kind == TOK_PRE_GPT4O ? "PreTrainedTokenizerFast" : kind == TOK_PRE_QWEN2 ? "Qwen2Tokenizer" : "GPT2Tokenizer");
    token_entry(&b, f, &toks, "unk_token", "tokenizer.ggml.unknown_token_id");
    sb_puts(&b, "\n}\n");
    rc = write_text(dir, "tokenizer_config.json", &b, e);
    sb_free(&b);
    return rc;
}

/* bos and eos (with eot, as config_load_gguf reads them) and pad. */
static int generation_config(const char *dir, const gguf_file *f, gerr *e) {
    gguf_value toks;
    int rc = gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_STRING, &toks, e);
    if (rc) return rc;
    int64_t bos = opt_id(f, "tokenizer.ggml.bos_token_id", toks.count);
    int64_t eos = opt_id(f, "tokenizer.ggml.eos_token_id", toks.count);
    int64_t eot = opt_id(f, "tokenizer.ggml.eot_token_id", toks.count);
    int64_t pad = opt_id(f, "tokenizer.ggml.padding_token_id", toks.count);
    if (eos < 0) eos = eot, eot = -1;
    if (eot == eos) eot = -1;
    strbuf b = {0};
    sb_puts(&b, "{\n  \"_from_model_config\": true");
    if (bos >= 0) sb_printf(&b, ",\n  \"bos_token_id\": %lld", (long long)bos);
    if (eos >= 0 && eot >= 0) sb_printf(&b, ",\n  \"eos_token_id\": [\n    %lld,\n    %lld\n  ]", (long long)eos, (long long)eot);
    else if (eos >= 0) sb_printf(&b, ",\n  \"eos_token_id\": %lld", (long long)eos);
    if (pad >= 0) sb_printf(&b, ",\n  \"pad_token_id\": %lld", (long long)pad);
    sb_puts(&b, "\n}\n");
    rc = write_text(dir, "generation_config.json", &b, e);
    sb_free(&b);
    return rc;
}

static int from_gguf(const char *dir, const char *source, gerr *e) {
    gguf_file f;
    int rc = gguf_open(&f, source, e);
    if (rc) return rc;
    strbuf tj = {0};
    if (!(rc = hf_gguf_tokenizer_json(&f, &tj, e)) && !(rc = write_text(dir, "tokenizer.json", &tj, e))) {
        gguf_str pre;
        tok_pre_kind kind = TOK_PRE_GPT2;
        char name[64];
        if (!gguf_get_string(&f, "tokenizer.ggml.pre", &pre, NULL)) { /* checked by hf_gguf_tokenizer_json */
            snprintf(name, sizeof name, "%.*s", (int)(pre.len < 63 ? pre.len : 63), pre.ptr);
            if (tok_pre_kind_from_name(name, &kind, NULL)) kind = TOK_PRE_GPT2;
        }
        if (!(rc = tokenizer_config(dir, &f, kind, e))) rc = generation_config(dir, &f, e);
    }
    sb_free(&tj);
    gguf_close(&f);
    return rc;
}

int hf_write_text_files(const char *dir, const char *source, gerr *e) {
    struct stat st;
    if (stat(source, &st) != 0) return gerr_set(e, EX_NOINPUT, "%s: %s", source, strerror(errno));
    return S_ISDIR(st.st_mode) ? from_dir(dir, source, e) : from_gguf(dir, source, e);
}
