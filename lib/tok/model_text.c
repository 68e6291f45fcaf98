#include "model_text.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../chat/harmony_read.h"
#include "../io/mapped.h"
#include "../formats/gguf.h"

void model_text_add_eos(model_text *mt, int64_t id) {
    if (id < 0 || id > INT32_MAX) return;
    for (int i = 0; i < mt->n_eos; i++)
        if (mt->eos_ids[i] == id) return;
    if (mt->n_eos < MODEL_TEXT_MAX_EOS) mt->eos_ids[mt->n_eos++] = (int32_t)id;
}

bool model_text_is_eos(const model_text *mt, int32_t id) {
    for (int i = 0; i < mt->n_eos; i++)
        if (mt->eos_ids[i] == id) return true;
    return false;
}

/* ---- GGUF ------------------------------------------------------------------ */

/* llama.cpp's token types: 3 = control (special), 4 = user-defined (added, not special). */
enum { GGUF_TOKEN_CONTROL = 3, GGUF_TOKEN_USER_DEFINED = 4 };

static int load_gguf(const char *path, model_text *mt, gerr *e) {
    gguf_file f;
    int rc = gguf_open(&f, path, e);
    if (rc) return rc;
    gguf_str model_kind = {0}, pre = {0};
    gguf_value tokens, merges, types;
    char **tok_strs = NULL, **merge_strs = NULL;
    tok_added_token *added = NULL;
    size_t n_added = 0;
    char pre_name[64];
    if ((rc = gguf_get_string(&f, "tokenizer.ggml.model", &model_kind, e))) goto done;
    if (model_kind.len != 4 || memcmp(model_kind.ptr, "gpt2", 4)) {
        rc = gerr_set(e, EX_DATAERR, "%s: tokenizer.ggml.model \"%.*s\" is not supported (byte-level BPE \"gpt2\" only)",
                      path, (int)(model_kind.len > 40 ? 40 : model_kind.len), model_kind.ptr);
        goto done;
    }
    if ((rc = gguf_get_string(&f, "tokenizer.ggml.pre", &pre, e))) goto done;
    snprintf(pre_name, sizeof pre_name, "%.*s", (int)(pre.len < 63 ? pre.len : 63), pre.ptr);
    tok_arrays a = {0};
    if ((rc = tok_pre_kind_from_name(pre_name, &a.pre, e))) {
        gerr inner = *e;
        rc = gerr_set(e, inner.code, "%s: %s", path, inner.msg);
        goto done;
    }
    if ((rc = gguf_get_array(&f, "tokenizer.ggml.tokens", GGUF_STRING, &tokens, e))) goto done;
    if ((rc = gguf_get_array(&f, "tokenizer.ggml.merges", GGUF_STRING, &merges, e))) goto done;
    bool have_types = gguf_find_kv(&f, "tokenizer.ggml.token_type") != NULL;
    if (have_types && (rc = gguf_get_array(&f, "tokenizer.ggml.token_type", GGUF_NTYPES, &types, e))) goto done;
    if (have_types && types.count != tokens.count) {
        rc = gerr_set(e, EX_DATAERR, "%s: tokenizer.ggml.token_type has %llu entries for %llu tokens", path,
                      (unsigned long long)types.count, (unsigned long long)tokens.count);
        goto done;
    }
    /* the tokenizer wants NUL-terminated strings */
    tok_strs = xcalloc(tokens.count, sizeof *tok_strs);
    for (uint64_t i = 0; i < tokens.count; i++) {
        gguf_str s = gguf_array_str(&tokens, i);
        tok_strs[i] = xstrndup(s.ptr, s.len);
    }
    merge_strs = xcalloc(merges.count, sizeof *merge_strs);
    for (uint64_t i = 0; i < merges.count; i++) {
        gguf_str s = gguf_array_str(&merges, i);
        merge_strs[i] = xstrndup(s.ptr, s.len);
    }
    added = xcalloc(tokens.count, sizeof *added);
    for (uint64_t i = 0; have_types && i < tokens.count; i++) {
        int64_t type = gguf_array_int(&types, i);
        if (type != GGUF_TOKEN_CONTROL && type != GGUF_TOKEN_USER_DEFINED) continue;
        added[n_added++] = (tok_added_token){.content = tok_strs[i], .id = (int32_t)i,
                                             .special = type == GGUF_TOKEN_CONTROL,
                                             .normalized = type != GGUF_TOKEN_CONTROL};
    }
    a.tokens = (const char *const *)tok_strs;
    a.n_tokens = tokens.count;
    a.merges = (const char *const *)merge_strs;
    a.n_merges = merges.count;
    a.added = added;
    a.n_added = n_added;
    a.ignore_merges = a.pre == TOK_PRE_LLAMA3;
    if ((rc = tok_from_arrays(&a, &mt->tok, e))) {
        gerr inner = *e;
        rc = gerr_set(e, inner.code, "%s: %s", path, inner.msg);
        goto done;
    }
    gguf_str tmpl, arch;
    mt->gpt_oss = gguf_find_kv(&f, "general.architecture") &&
                  gguf_get_string(&f, "general.architecture", &arch, NULL) == 0 && arch.len == 7 &&
                  !memcmp(arch.ptr, "gpt-oss", 7);
    if (gguf_find_kv(&f, "tokenizer.chat_template") &&
        gguf_get_string(&f, "tokenizer.chat_template", &tmpl, NULL) == 0)
        mt->chat_template = xstrndup(tmpl.ptr, tmpl.len);
    static const char *const SPECIAL_KEYS[] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                               "tokenizer.ggml.eot_token_id"};
    for (int k = 0; k < 3; k++) {
        uint32_t id;
        if (!gguf_find_kv(&f, SPECIAL_KEYS[k]) || gguf_get_u32(&f, SPECIAL_KEYS[k], &id, NULL)) continue;
        if (id >= tokens.count) {
            rc = gerr_set(e, EX_DATAERR, "%s: %s %u is outside the vocabulary (%llu tokens)", path, SPECIAL_KEYS[k],
                          id, (unsigned long long)tokens.count);
            goto done;
        }
        if (k == 0) mt->bos_id = (int32_t)id;
        else model_text_add_eos(mt, id);
    }
    mt->template_source = xstrdup(path);
done:
    if (tok_strs)
        for (uint64_t i = 0; i < tokens.count; i++) free(tok_strs[i]);
    if (merge_strs)
        for (uint64_t i = 0; i < merges.count; i++) free(merge_strs[i]);
    free(tok_strs);
    free(merge_strs);
    free(added);
    gguf_close(&f);
    return rc;
}

/* ---- Hugging Face directory -------------------------------------------------- */

/* Reads a small JSON file; *out NULL (and 0) when it does not exist. */
static int read_json(const char *dir, const char *name, cJSON **out, gerr *e) {
    *out = NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t len;
    char *text;
    int rc = read_optional_file(path, &text, &len, e);
    if (rc || !text) return rc;
    *out = cJSON_ParseWithLength(text, len);
    free(text);
    if (!*out) return gerr_set(e, EX_DATAERR, "%s: invalid JSON", path);
    return 0;
}

/* A special token written as "text" or {"content": "text"} -> its id. */
static int32_t special_id(const model_text *mt, const cJSON *v) {
    if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "content");
    if (!cJSON_IsString(v)) return -1;
    return tok_token_to_id(mt->tok, v->valuestring, strlen(v->valuestring));
}

/* A token id from generation_config.json: an integer inside the vocabulary
 * (an id the tokenizer does not have would never match a sampled token or
 * would prepend garbage). */
static int json_token_id(const model_text *mt, const cJSON *v, const char *path, const char *field, int32_t *out,
                         gerr *e) {
    size_t vocab = tok_vocab_size(mt->tok);
    if (!(v->valuedouble >= 0 && v->valuedouble < (double)vocab && v->valuedouble == (double)(int64_t)v->valuedouble))
        return gerr_set(e, EX_DATAERR, "%s: field \"%s\": expected a token id in [0, %zu), got %.17g", path, field,
                        vocab, v->valuedouble);
    *out = (int32_t)v->valuedouble;
    return 0;
}

/* eos_token_id: an id or a list of ids (null: none). */
static int add_eos_json(model_text *mt, const cJSON *v, const char *path, gerr *e) {
    int32_t id;
    if (cJSON_IsNumber(v)) {
        if (json_token_id(mt, v, path, "eos_token_id", &id, e)) return e->code;
        model_text_add_eos(mt, id);
        return 0;
    }
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsArray(v))
        return gerr_set(e, EX_DATAERR, "%s: field \"eos_token_id\": expected a token id or a list of them", path);
    const cJSON *item;
    cJSON_ArrayForEach(item, v) {
        if (!cJSON_IsNumber(item))
            return gerr_set(e, EX_DATAERR, "%s: field \"eos_token_id\": expected a list of token ids", path);
        if (json_token_id(mt, item, path, "eos_token_id", &id, e)) return e->code;
        model_text_add_eos(mt, id);
    }
    return 0;
}

static double number_or(const cJSON *obj, const char *key, double dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

static int load_dir(const char *dir, model_text *mt, gerr *e) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    int rc = tok_load_json(path, &mt->tok, e);
    if (rc) return rc;
    cJSON *cfg = NULL, *gen = NULL, *model_cfg = NULL;
    if ((rc = read_json(dir, "tokenizer_config.json", &cfg, e))) return rc;
    if ((rc = read_json(dir, "generation_config.json", &gen, e)) ||
        (rc = read_json(dir, "config.json", &model_cfg, e))) {
        cJSON_Delete(cfg);
        cJSON_Delete(gen);
        return rc;
    }
    const cJSON *model_type = cJSON_GetObjectItemCaseSensitive(model_cfg, "model_type");
    mt->gpt_oss = cJSON_IsString(model_type) && !strcmp(model_type->valuestring, "gpt_oss");
    cJSON_Delete(model_cfg);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    mt->template_source = xstrdup(path);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
    if (cJSON_IsString(t)) {
        mt->chat_template = xstrdup(t->valuestring);
    } else if (cJSON_IsArray(t)) { /* [{name, template}]: the one named "default" */
        const cJSON *item;
        cJSON_ArrayForEach(item, t) {
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(item, "name");
            const cJSON *text = cJSON_GetObjectItemCaseSensitive(item, "template");
            if (cJSON_IsString(name) && !strcmp(name->valuestring, "default") && cJSON_IsString(text))
                mt->chat_template = xstrdup(text->valuestring);
        }
    } else { /* newer transformers keep it in a file of its own (gpt-oss does) */
        snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
        gerr missing = {0};
        mt->chat_template = read_whole_file(path, NULL, &missing);
        if (mt->chat_template) {
            free(mt->template_source);
            mt->template_source = xstrdup(path);
        } else if (missing.code != EX_NOINPUT) {
            rc = gerr_set(e, missing.code, "%s", missing.msg);
            goto done;
        }
    }
    mt->bos_id = special_id(mt, cJSON_GetObjectItemCaseSensitive(cfg, "bos_token"));
    int32_t eos = special_id(mt, cJSON_GetObjectItemCaseSensitive(cfg, "eos_token"));
    if (eos >= 0) model_text_add_eos(mt, eos);
    if (gen) {
        snprintf(path, sizeof path, "%s/generation_config.json", dir);
        const cJSON *bos = cJSON_GetObjectItemCaseSensitive(gen, "bos_token_id");
        if (cJSON_IsNumber(bos) && (rc = json_token_id(mt, bos, path, "bos_token_id", &mt->bos_id, e))) goto done;
        if ((rc = add_eos_json(mt, cJSON_GetObjectItemCaseSensitive(gen, "eos_token_id"), path, e))) goto done;
        mt->temperature = number_or(gen, "temperature", -1);
        if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(gen, "temperature")) &&
            !(mt->temperature >= 0 && mt->temperature <= 1e6)) {
            rc = gerr_set(e, EX_DATAERR, "%s: field \"temperature\": expected a number in [0, 1e6], got %.17g", path,
                          mt->temperature);
            goto done;
        }
        mt->top_p = number_or(gen, "top_p", -1);
        double top_k = number_or(gen, "top_k", -1);
        /* out of long long's range is no bound at all; the sampler reads < 0 as "not given" */
        mt->top_k = top_k >= 0 && top_k < 9e18 ? (long long)top_k : -1;
    }
done:
    cJSON_Delete(cfg);
    cJSON_Delete(gen);
    return rc;
}

int model_text_load(const char *path, model_text *mt, gerr *e) {
    memset(mt, 0, sizeof *mt);
    mt->bos_id = -1;
    mt->temperature = mt->top_p = -1;
    mt->top_k = -1;
    struct stat st;
    if (stat(path, &st) != 0)
        return gerr_set(e, EX_NOINPUT, "%s: cannot open model: %s", path, strerror(errno));
    int rc = S_ISDIR(st.st_mode) ? load_dir(path, mt, e) : load_gguf(path, mt, e);
    if (rc) model_text_free(mt);
    return rc;
}

void model_text_free(model_text *mt) {
    if (mt->tok) tok_free(mt->tok);
    free(mt->chat_template);
    free(mt->template_source);
    memset(mt, 0, sizeof *mt);
}

int model_text_template(const model_text *mt, const chat_choice *c, chat_template *out, gerr *e) {
    int rc;
    if (strcmp(c->family, "auto")) {
        chat_family f;
        if ((rc = chat_family_parse(c->family, &f, e))) return rc;
        chat_template_force(f, mt->chat_template, out);
    } else if (!mt->chat_template && mt->gpt_oss) {
        chat_template_force(CHAT_HARMONY, NULL, out);
    } else if ((rc = chat_template_detect(mt->chat_template, mt->template_source, out, e))) {
        return rc;
    }
    harmony_tokens h; /* a harmony prompt is made of its special tokens */
    if ((out->family == CHAT_HARMONY && (rc = harmony_tokens_find(mt->tok, mt->template_source, &h, e))) ||
        (rc = chat_set_harmony(out, c->reasoning, c->date, e)))
        chat_template_free(out);
    return rc;
}

bool model_text_is_harmony(const model_text *mt, const char *family) {
    if (strcmp(family, "auto")) return !strcmp(family, "harmony");
    chat_template t;
    gerr quiet = {0};
    if (model_text_template(mt, &(chat_choice){.family = family}, &t, &quiet)) return false;
    bool harmony = t.family == CHAT_HARMONY;
    chat_template_free(&t);
    return harmony;
}

int model_text_prompt_tokens(const model_text *mt, const chat_template *t, const record *rec, int32_t **ids,
                             size_t *n, gerr *e) {
    *ids = NULL;
    *n = 0;
    cJSON *messages = NULL;
    int rc = record_get_json(rec, "messages", true, &messages, e);
    if (rc) return rc;
    strbuf text = {0};
    rc = chat_render(t, messages, t->family != CHAT_RAW, &text, e);
    cJSON_Delete(messages);
    if (rc) {
        sb_free(&text);
        return gerr_at(e, rc, rec->file, rec->line, "%s", e->msg);
    }
    rc = tok_encode(mt->tok, text.data ? text.data : "", text.len, true, ids, n, e);
    sb_free(&text);
    if (rc) return gerr_at(e, rc, rec->file, rec->line, "field \"messages\": %s", e->msg);
    return 0;
}
