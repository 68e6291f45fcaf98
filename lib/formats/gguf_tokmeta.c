#include "gguf_tokmeta.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../io/mapped.h"
#include "../tok/tokenizer.h"
#include "gguf.h"

/* llama.cpp's token types (gguf-py TokenType). */
enum { TT_NORMAL = 1, TT_CONTROL = 3, TT_USER_DEFINED = 4, TT_UNUSED = 5 };

/* ---- GGUF source ------------------------------------------------------------- */

/* "dir/name.gguf" -> "name". */
static char *base_name(const char *path) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    const char *start = path;
    for (size_t i = 0; i < n; i++)
        if (path[i] == '/' && i + 1 < n) start = path + i + 1;
    size_t len = n - (size_t)(start - path);
    if (len > 5 && !memcmp(start + len - 5, ".gguf", 5)) len -= 5;
    return xstrndup(start, len);
}

static int from_gguf(gguf_meta *out, char **name, const char *path, int vocab_size, gerr *e) {
    gguf_file f;
    int rc = gguf_open(&f, path, e);
    if (rc) return rc;
    gguf_value toks;
    if ((rc = gguf_get_array(&f, "tokenizer.ggml.tokens", GGUF_STRING, &toks, e))) goto done;
    if (toks.count != (uint64_t)vocab_size) {
        rc = gerr_set(e, EX_DATAERR, "%s: tokenizer has %llu tokens, the model's vocabulary %d", path,
                      (unsigned long long)toks.count, vocab_size);
        goto done;
    }
    for (size_t i = 0; i < f.n_kv; i++)
        if (!strncmp(f.kvs[i].key, "tokenizer.", 10)) gmeta_copy(out, f.kvs[i].key, &f.kvs[i].v);
    const gguf_kv *kv = gguf_find_kv(&f, "general.name");
    gguf_str s;
    if (kv && gguf_value_str(&kv->v, &s)) *name = xstrndup(s.ptr, s.len);
    else *name = base_name(path);
done:
    gguf_close(&f);
    return rc;
}

/* ---- Hugging Face directory ---------------------------------------------------- */

typedef struct {
    const char *dir;
    char path[4096]; /* tokenizer.json, for messages */
    cJSON *tj, *tcfg, *gen, *cfg; /* tokenizer.json; the others NULL when absent */
    const cJSON *vocab, *added;
    int V;
} hf_src;

/* Parses DIR/NAME; *out NULL when the file does not exist and !required. */
static int read_json(const char *dir, const char *name, bool required, cJSON **out, gerr *e) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    *out = NULL;
    size_t len;
    char *text = NULL;
    int rc = required ? (text = read_regular_file(path, &len, e)) ? 0 : e->code
                      : read_optional_file(path, &text, &len, e);
    if (rc || !text) return rc;
    *out = cJSON_ParseWithLength(text, len);
    free(text);
    if (!cJSON_IsObject(*out)) {
        cJSON_Delete(*out);
        *out = NULL;
        return gerr_set(e, EX_DATAERR, "%s: not a JSON object", path);
    }
    return 0;
}

static bool json_id(const cJSON *v, int V, int32_t *id) {
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 0 ||
        v->valuedouble >= V)
        return false;
    *id = (int32_t)v->valuedouble;
    return true;
}

/* A token named by its text ("<s>" or {"content": "<s>"}): added tokens
 * first, then the vocab, as HF's token_to_id. */
static int32_t token_id(const hf_src *h, const cJSON *v) {
    if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "content");
    if (!cJSON_IsString(v)) return -1;
    const cJSON *it;
    int32_t id;
    cJSON_ArrayForEach(it, h->added) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(it, "content");
        if (cJSON_IsString(c) && !strcmp(c->valuestring, v->valuestring) &&
            json_id(cJSON_GetObjectItemCaseSensitive(it, "id"), h->V, &id))
            return id;
    }
    if (json_id(cJSON_GetObjectItemCaseSensitive(h->vocab, v->valuestring), h->V, &id)) return id;
    return -1;
}

/* An id from an int or the first of a list of ints. */
static int32_t first_id(const cJSON *obj, const char *key, int V) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (cJSON_IsArray(v)) v = cJSON_GetArrayItem(v, 0);
    int32_t id;
    return json_id(v, V, &id) ? id : -1;
}

static int tokens_and_types(gguf_meta *out, const hf_src *h, gerr *e) {
    int V = h->V, rc = 0;
    const char **tok = xcalloc((size_t)V, sizeof *tok);
    int32_t *type = xcalloc((size_t)V, sizeof *type);
    const cJSON *it;
    int32_t id;
    cJSON_ArrayForEach(it, h->vocab) {
        if (!json_id(it, V, &id)) {
            rc = gerr_set(e, EX_DATAERR, "%s: vocab entry \"%.100s\": id outside 0..%d (the model's vocabulary)",
                          h->path, it->string, V - 1);
            goto done;
        }
        if (tok[id]) {
            rc = gerr_set(e, EX_DATAERR, "%s: vocab id %d is given twice", h->path, (int)id);
            goto done;
        }
        tok[id] = it->string;
        type[id] = TT_NORMAL;
    }
    cJSON_ArrayForEach(it, h->added) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(it, "content");
        if (!cJSON_IsString(c) || !json_id(cJSON_GetObjectItemCaseSensitive(it, "id"), V, &id)) {
            rc = gerr_set(e, EX_DATAERR, "%s: an added token lacks \"content\" or an id in 0..%d", h->path, V - 1);
            goto done;
        }
        tok[id] = c->valuestring;
        type[id] = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "special")) ? TT_CONTROL : TT_USER_DEFINED;
    }
    gmeta_arr_str_begin(out, "tokenizer.ggml.tokens", (uint64_t)V);
    for (int i = 0; i < V; i++) {
        if (tok[i]) {
            gmeta_arr_str_item(out, tok[i], strlen(tok[i]));
            continue;
        }
        /* convert_hf_to_gguf.py's filler for ids the tokenizer does not use */
        char pad[32];
        int n = snprintf(pad, sizeof pad, "[PAD%d]", i);
        gmeta_arr_str_item(out, pad, (size_t)n);
        type[i] = TT_UNUSED;
    }
    gmeta_arr_i32(out, "tokenizer.ggml.token_type", type, (size_t)V);
done:
    free(tok);
    free(type);
    return rc;
}

static int merges(gguf_meta *out, const hf_src *h, gerr *e) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(h->tj, "model"), "merges");
    if (m && !cJSON_IsArray(m)) return gerr_set(e, EX_DATAERR, "%s: model.merges must be an array", h->path);
    int n = cJSON_GetArraySize(m), i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, m) { /* check first: the array header carries the count */
        bool pair = cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2 && cJSON_IsString(it->child) &&
                    cJSON_IsString(it->child->next);
        if (!cJSON_IsString(it) && !pair)
            return gerr_set(e, EX_DATAERR, "%s: merge %d is neither \"a b\" nor [\"a\", \"b\"]", h->path, i);
        i++;
    }
    gmeta_arr_str_begin(out, "tokenizer.ggml.merges", (uint64_t)n);
    strbuf s = {0};
    cJSON_ArrayForEach(it, m) {
        if (cJSON_IsString(it)) {
            gmeta_arr_str_item(out, it->valuestring, strlen(it->valuestring));
            continue;
        }
        sb_clear(&s);
        sb_printf(&s, "%s %s", it->child->valuestring, it->child->next->valuestring);
        gmeta_arr_str_item(out, s.data, s.len);
    }
    sb_free(&s);
    return 0;
}

static const char *type_of(const cJSON *o) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
    return cJSON_IsString(t) ? t->valuestring : "";
}

/* A boolean field with HF's default when absent. */
static bool flag(const cJSON *o, const char *key, bool dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : dflt;
}

/* The pre-tokenizer families llama.cpp (and lib/tok) know by name. */
static int pre_name(const hf_src *h, const char **name, gerr *e) {
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(h->tj, "pre_tokenizer");
    const cJSON *steps[3] = {0};
    int n = 0;
    if (!strcmp(type_of(pre), "Sequence")) {
        const cJSON *it;
        cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(pre, "pretokenizers")) {
            if (n == 3) break;
            steps[n++] = it;
        }
    } else if (cJSON_IsObject(pre)) {
        steps[n++] = pre;
    }
    *name = NULL;
    const cJSON *last = n ? steps[n - 1] : NULL;
    bool byte_level = last && !strcmp(type_of(last), "ByteLevel") && !flag(last, "add_prefix_space", true);
    bool regex = byte_level && flag(last, "use_regex", true);
    if (n == 1 && regex) *name = tok_pre_kind_name(TOK_PRE_GPT2);
    if (n == 2 && regex && !strcmp(type_of(steps[0]), "Digits") && flag(steps[0], "individual_digits", false))
        *name = tok_pre_kind_name(TOK_PRE_SMOLLM);
    if (n == 2 && byte_level && !regex && !strcmp(type_of(steps[0]), "Split") && !flag(steps[0], "invert", false)) {
        const cJSON *beh = cJSON_GetObjectItemCaseSensitive(steps[0], "behavior");
        const cJSON *re = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(steps[0], "pattern"), "Regex");
        tok_pre_kind kind;
        if (cJSON_IsString(beh) && !strcmp(beh->valuestring, "Isolated") && cJSON_IsString(re) &&
            tok_pre_kind_of_split(re->valuestring, &kind))
            *name = tok_pre_kind_name(kind);
    }
    if (*name) return 0;
    return gerr_set(e, EX_DATAERR,
                    "%s: pre_tokenizer is none of the families GGUF names (" TOK_PRE_NAMES ")",
                    h->path);
}

/* add_bos/add_eos from a TemplateProcessing post-processor (alone or in a
 * Sequence): a special token first / last in its "single" template. */
static bool template_adds(const cJSON *pp, bool *bos, bool *eos) {
    if (!strcmp(type_of(pp), "Sequence")) {
        const cJSON *it;
        cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(pp, "processors")) if (template_adds(it, bos, eos)) return true;
        return false;
    }
    if (strcmp(type_of(pp), "TemplateProcessing")) return false;
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(pp, "single");
    int n = cJSON_GetArraySize(single);
    if (!cJSON_IsArray(single) || n == 0) return false;
    *bos = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(single, 0), "SpecialToken") != NULL;
    *eos = n > 1 && cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(single, n - 1), "SpecialToken") != NULL;
    return true;
}

static void special_ids(gguf_meta *out, const hf_src *h) {
    const char *keys[3] = {"bos_token", "eos_token", "pad_token"};
    const char *ids[3] = {"bos_token_id", "eos_token_id", "pad_token_id"};
    const char *gkeys[3] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                            "tokenizer.ggml.padding_token_id"};
    for (int i = 0; i < 3; i++) {
        int32_t id = token_id(h, cJSON_GetObjectItemCaseSensitive(h->tcfg, keys[i]));
        if (id < 0 && i < 2) id = first_id(h->gen, ids[i], h->V);
        if (id < 0 && i < 2) id = first_id(h->cfg, ids[i], h->V);
        if (id >= 0) gmeta_u32(out, gkeys[i], (uint32_t)id);
    }
    int32_t unk = token_id(h, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(h->tj, "model"),
                                                               "unk_token"));
    if (unk >= 0) gmeta_u32(out, "tokenizer.ggml.unknown_token_id", (uint32_t)unk);
    const cJSON *ab = cJSON_GetObjectItemCaseSensitive(h->tcfg, "add_bos_token");
    const cJSON *ae = cJSON_GetObjectItemCaseSensitive(h->tcfg, "add_eos_token");
    bool bos = false, eos = false;
    bool tmpl = template_adds(cJSON_GetObjectItemCaseSensitive(h->tj, "post_processor"), &bos, &eos);
    if (cJSON_IsBool(ab)) gmeta_bool(out, "tokenizer.ggml.add_bos_token", cJSON_IsTrue(ab));
    else if (tmpl) gmeta_bool(out, "tokenizer.ggml.add_bos_token", bos);
    if (cJSON_IsBool(ae)) gmeta_bool(out, "tokenizer.ggml.add_eos_token", cJSON_IsTrue(ae));
    else if (tmpl) gmeta_bool(out, "tokenizer.ggml.add_eos_token", eos);
}

static int chat_template(gguf_meta *out, const hf_src *h, gerr *e) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(h->tcfg, "chat_template");
    if (cJSON_IsString(t)) {
        gmeta_str(out, "tokenizer.chat_template", t->valuestring, strlen(t->valuestring));
        return 0;
    }
    if (cJSON_IsArray(t)) { /* [{name, template}], as convert_hf_to_gguf.py writes them */
        const cJSON *it;
        int n_named = 0;
        cJSON_ArrayForEach(it, t) {
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");
            const cJSON *text = cJSON_GetObjectItemCaseSensitive(it, "template");
            if (!cJSON_IsString(name) || !cJSON_IsString(text)) continue;
            char key[300];
            if (!strcmp(name->valuestring, "default")) {
                snprintf(key, sizeof key, "tokenizer.chat_template");
            } else {
                if (snprintf(key, sizeof key, "tokenizer.chat_template.%s", name->valuestring) >= (int)sizeof key)
                    continue;
                n_named++;
            }
            gmeta_str(out, key, text->valuestring, strlen(text->valuestring));
        }
        if (n_named) {
            gmeta_arr_str_begin(out, "tokenizer.chat_templates", (uint64_t)n_named);
            cJSON_ArrayForEach(it, t) {
                const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");
                const cJSON *text = cJSON_GetObjectItemCaseSensitive(it, "template");
                if (cJSON_IsString(name) && cJSON_IsString(text) && strcmp(name->valuestring, "default") &&
                    strlen(name->valuestring) < 300 - 24)
                    gmeta_arr_str_item(out, name->valuestring, strlen(name->valuestring));
            }
        }
        return 0;
    }
    /* newer transformers keep the template in its own file */
    char path[4096];
    snprintf(path, sizeof path, "%s/chat_template.jinja", h->dir);
    size_t len;
    char *text;
    int rc = read_optional_file(path, &text, &len, e);
    if (rc || !text) return rc;
    gmeta_str(out, "tokenizer.chat_template", text, len);
    free(text);
    return 0;
}

static int from_dir(gguf_meta *out, char **name, const char *dir, int vocab_size, gerr *e) {
    hf_src h = {.dir = dir, .V = vocab_size};
    snprintf(h.path, sizeof h.path, "%s/tokenizer.json", dir);
    int rc;
    if ((rc = read_json(dir, "tokenizer.json", true, &h.tj, e)) ||
        (rc = read_json(dir, "tokenizer_config.json", false, &h.tcfg, e)) ||
        (rc = read_json(dir, "generation_config.json", false, &h.gen, e)) ||
        (rc = read_json(dir, "config.json", false, &h.cfg, e)))
        goto done;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(h.tj, "model");
    const char *mtype = type_of(model);
    if (*mtype && strcmp(mtype, "BPE")) {
        rc = gerr_set(e, EX_DATAERR, "%s: model type \"%s\" is not supported (BPE is)", h.path, mtype);
        goto done;
    }
    h.vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    h.added = cJSON_GetObjectItemCaseSensitive(h.tj, "added_tokens");
    if (!cJSON_IsObject(h.vocab)) {
        rc = gerr_set(e, EX_DATAERR, "%s: model.vocab must be an object", h.path);
        goto done;
    }
    if (h.added && !cJSON_IsArray(h.added)) {
        rc = gerr_set(e, EX_DATAERR, "%s: added_tokens must be an array", h.path);
        goto done;
    }
    const char *pre;
    if ((rc = pre_name(&h, &pre, e))) goto done;
    gmeta_str(out, "tokenizer.ggml.model", "gpt2", 4);
    gmeta_str(out, "tokenizer.ggml.pre", pre, strlen(pre));
    if ((rc = tokens_and_types(out, &h, e)) || (rc = merges(out, &h, e))) goto done;
    special_ids(out, &h);
    if ((rc = chat_template(out, &h, e))) goto done;
    *name = base_name(dir);
done:
    cJSON_Delete(h.tj);
    cJSON_Delete(h.tcfg);
    cJSON_Delete(h.gen);
    cJSON_Delete(h.cfg);
    return rc;
}

int gguf_tok_meta(gguf_meta *out, char **name, const char *source, int vocab_size, gerr *e) {
    *name = NULL;
    struct stat st;
    if (!source || stat(source, &st) != 0)
        return gerr_set(e, EX_NOINPUT, "%s: cannot open tokenizer source: %s", source ? source : "(none)",
                        source ? strerror(errno) : "no path given");
    return S_ISDIR(st.st_mode) ? from_dir(out, name, source, vocab_size, e)
                               : from_gguf(out, name, source, vocab_size, e);
}
