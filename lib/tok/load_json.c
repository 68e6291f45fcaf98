/* Reads a Hugging Face tokenizer.json into a tokenizer. Only byte-level BPE
 * is accepted; every other component is refused by name, so a user knows
 * exactly why a model's tokenizer cannot be used (rather than getting
 * silently different ids). truncation, padding and post_processor are
 * ignored: they do not change plain encoding without special tokens. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../io/mapped.h"
#include "tok_internal.h"

/* Puts "NAME: " in front of an error from a lower layer. */
static int err_prefix(gerr *e, const char *name) {
    char msg[sizeof e->msg];
    memcpy(msg, e->msg, sizeof msg);
    return gerr_set(e, e->code, "%s: %s", name, msg);
}

/* A boolean field with HF's default when absent or null. */
static int get_bool(const cJSON *o, const char *key, bool dflt, bool *v, const char *name, gerr *e) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!f || cJSON_IsNull(f)) *v = dflt;
    else if (cJSON_IsBool(f)) *v = cJSON_IsTrue(f);
    else return gerr_set(e, EX_DATAERR, "%s: \"%s\" must be true or false", name, key);
    return 0;
}

static const char *type_of(const cJSON *o) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
    return cJSON_IsString(t) ? t->valuestring : NULL;
}

static int parse_pretok(const cJSON *o, pretok *p, const char *name, gerr *e) {
    const char *type = type_of(o);
    if (!cJSON_IsObject(o) || !type) return gerr_set(e, EX_DATAERR, "%s: pre_tokenizer has no \"type\"", name);
    if (!strcmp(type, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "pretokenizers"), *it;
        if (!cJSON_IsArray(list)) return gerr_set(e, EX_DATAERR, "%s: Sequence pre_tokenizer needs \"pretokenizers\"", name);
        cJSON_ArrayForEach(it, list) if (parse_pretok(it, p, name, e)) return e->code;
        return 0;
    }
    if (!strcmp(type, "ByteLevel")) {
        bool prefix, regex;
        if (get_bool(o, "add_prefix_space", true, &prefix, name, e) || get_bool(o, "use_regex", true, &regex, name, e))
            return e->code;
        if (pretok_add_byte_level(p, regex, prefix, e)) return err_prefix(e, name);
        return 0;
    }
    if (!strcmp(type, "Digits")) {
        bool individual;
        if (get_bool(o, "individual_digits", false, &individual, name, e)) return e->code;
        if (pretok_add_digits(p, individual, e)) return err_prefix(e, name);
        return 0;
    }
    if (!strcmp(type, "Split")) {
        static const char *behaviors[] = {"Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(o, "pattern");
        const cJSON *re = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
        const cJSON *str = cJSON_GetObjectItemCaseSensitive(pat, "String");
        const cJSON *beh = cJSON_GetObjectItemCaseSensitive(o, "behavior");
        if (!cJSON_IsString(re) && !cJSON_IsString(str))
            return gerr_set(e, EX_DATAERR, "%s: Split pre_tokenizer needs a \"pattern\" with \"Regex\" or \"String\"", name);
        if (!cJSON_IsString(beh)) return gerr_set(e, EX_DATAERR, "%s: Split pre_tokenizer needs a \"behavior\"", name);
        int b = -1;
        for (int i = 0; i < 5; i++)
            if (!strcmp(beh->valuestring, behaviors[i])) b = i;
        if (b < 0)
            return gerr_set(e, EX_DATAERR, "%s: Split behavior \"%s\" is not supported", name, beh->valuestring);
        bool invert;
        if (get_bool(o, "invert", false, &invert, name, e)) return e->code;
        bool literal = !cJSON_IsString(re);
        if (pretok_add_split(p, literal ? str->valuestring : re->valuestring, literal, b, invert, e))
            return err_prefix(e, name);
        return 0;
    }
    return gerr_set(e, EX_DATAERR, "%s: pre_tokenizer type \"%s\" is not supported", name, type);
}

/* normalizer: none, NFC (Qwen2's), or a Sequence of those; *nfc says whether
 * text is NFC-normalized before byte-level BPE */
static int parse_normalizer(const cJSON *o, const char *name, bool *nfc, gerr *e) {
    if (!o || cJSON_IsNull(o)) return 0;
    const char *type = type_of(o);
    if (type && !strcmp(type, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "normalizers"), *it;
        cJSON_ArrayForEach(it, list) if (parse_normalizer(it, name, nfc, e)) return e->code;
        return 0;
    }
    if (type && !strcmp(type, "NFC")) {
        *nfc = true;
        return 0;
    }
    return gerr_set(e, EX_DATAERR, "%s: normalizer type \"%s\" is not supported (NFC is)", name, type ? type : "(none)");
}

static int check_decoder(const cJSON *o, const char *name, gerr *e) {
    const char *type = o ? type_of(o) : NULL;
    if (type && !strcmp(type, "ByteLevel")) return 0;
    if (type && !strcmp(type, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "decoders"), *it;
        int n = 0;
        cJSON_ArrayForEach(it, list) {
            if (check_decoder(it, name, e)) return e->code;
            n++;
        }
        if (n == 1) return 0;
    }
    return gerr_set(e, EX_DATAERR, "%s: decoder %s%s%s is not supported (ByteLevel is)", name, type ? "type \"" : "",
                    type ? type : "null", type ? "\"" : "");
}

static int check_model_options(const cJSON *m, tokenizer *t, const char *name, gerr *e) {
    const cJSON *f;
    f = cJSON_GetObjectItemCaseSensitive(m, "dropout");
    if (f && !cJSON_IsNull(f) && !(cJSON_IsNumber(f) && f->valuedouble == 0.0))
        return gerr_set(e, EX_DATAERR, "%s: BPE dropout is not supported", name);
    const char *strs[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        f = cJSON_GetObjectItemCaseSensitive(m, strs[i]);
        if (f && !cJSON_IsNull(f) && !(cJSON_IsString(f) && !f->valuestring[0]))
            return gerr_set(e, EX_DATAERR, "%s: BPE %s is not supported", name, strs[i]);
    }
    bool byte_fallback;
    if (get_bool(m, "byte_fallback", false, &byte_fallback, name, e) ||
        get_bool(m, "ignore_merges", false, &t->ignore_merges, name, e) ||
        get_bool(m, "fuse_unk", false, &t->fuse_unk, name, e))
        return e->code;
    if (byte_fallback) return gerr_set(e, EX_DATAERR, "%s: BPE byte_fallback is not supported", name);
    f = cJSON_GetObjectItemCaseSensitive(m, "unk_token");
    if (cJSON_IsString(f)) {
        t->unk_id = tok_vocab_lookup(t, f->valuestring, strlen(f->valuestring));
        if (t->unk_id < 0) return gerr_set(e, EX_DATAERR, "%s: unk_token \"%s\" is not in the vocab", name, f->valuestring);
    }
    return 0;
}

static int load_merges(const cJSON *merges, tokenizer *t, const char *name, gerr *e) {
    if (!cJSON_IsArray(merges)) return gerr_set(e, EX_DATAERR, "%s: model.merges must be an array", name);
    tok_merges_reserve(t, (size_t)cJSON_GetArraySize(merges));
    uint32_t rank = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, merges) {
        const char *a, *b;
        size_t alen, blen;
        if (cJSON_IsString(m)) { /* legacy "a b": exactly one space, as HF requires */
            a = m->valuestring;
            const char *sp = strchr(a, ' ');
            if (!sp || strchr(sp + 1, ' '))
                return gerr_set(e, EX_DATAERR, "%s: merge %u \"%s\" is not \"left right\"", name, rank, a);
            alen = (size_t)(sp - a);
            b = sp + 1;
            blen = strlen(b);
        } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) &&
                   cJSON_IsString(m->child->next)) {
            a = m->child->valuestring;
            b = m->child->next->valuestring;
            alen = strlen(a);
            blen = strlen(b);
        } else
            return gerr_set(e, EX_DATAERR, "%s: merge %u is neither \"a b\" nor [\"a\", \"b\"]", name, rank);
        if (tok_add_merge(t, a, alen, b, blen, rank, e)) return err_prefix(e, name);
        rank++;
    }
    return 0;
}

static int load_added(const cJSON *list, tokenizer *t, const char *name, gerr *e) {
    const cJSON *it;
    cJSON_ArrayForEach(it, list) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(it, "content");
        if (!cJSON_IsNumber(id) || !cJSON_IsString(content))
            return gerr_set(e, EX_DATAERR, "%s: an added token lacks \"id\" or \"content\"", name);
        tok_added_token a = {.content = content->valuestring, .id = (int32_t)id->valuedouble};
        if (get_bool(it, "special", false, &a.special, name, e) ||
            get_bool(it, "normalized", true, &a.normalized, name, e) ||
            get_bool(it, "lstrip", false, &a.lstrip, name, e) || get_bool(it, "rstrip", false, &a.rstrip, name, e) ||
            get_bool(it, "single_word", false, &a.single_word, name, e))
            return e->code;
        if (tok_add_added(t, &a, e)) return err_prefix(e, name);
    }
    return 0;
}

enum { TOK_MAX_ID = (1 << 22) - 1 };

static bool valid_id(const cJSON *v) {
    return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= TOK_MAX_ID &&
           v->valuedouble == (int32_t)v->valuedouble;
}

static int build(const cJSON *root, const char *name, tokenizer **out, gerr *e) {
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!cJSON_IsObject(model)) return gerr_set(e, EX_DATAERR, "%s: no \"model\" object", name);
    const char *mtype = type_of(model);
    if (mtype && strcmp(mtype, "BPE"))
        return gerr_set(e, EX_DATAERR, "%s: model type \"%s\" is not supported (BPE is)", name, mtype);
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (!cJSON_IsObject(vocab)) return gerr_set(e, EX_DATAERR, "%s: model.vocab must be an object", name);
    if (added && !cJSON_IsNull(added) && !cJSON_IsArray(added))
        return gerr_set(e, EX_DATAERR, "%s: added_tokens must be an array", name);
    bool nfc = false;
    if (parse_normalizer(cJSON_GetObjectItemCaseSensitive(root, "normalizer"), name, &nfc, e) ||
        check_decoder(cJSON_GetObjectItemCaseSensitive(root, "decoder"), name, e))
        return e->code;

    /* ids run to the largest one in the vocab or the added tokens; every
     * table is sized by it, so a file naming id 99999999 would cost seconds
     * and gigabytes (found by fuzz_tokenizer_json): ids stop at TOK_MAX_ID,
     * 16 times the largest vocabulary in use (Gemma 3's 262,144) */
    double max_id = -1;
    const cJSON *it;
    cJSON_ArrayForEach(it, vocab) {
        if (!valid_id(it))
            return gerr_set(e, EX_DATAERR, "%s: vocab entry \"%s\" has no valid id (an integer from 0 to %d)", name,
                            it->string, TOK_MAX_ID);
        if (it->valuedouble > max_id) max_id = it->valuedouble;
    }
    cJSON_ArrayForEach(it, added) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
        if (!valid_id(id))
            return gerr_set(e, EX_DATAERR, "%s: an added token has no valid \"id\" (an integer from 0 to %d)", name,
                            TOK_MAX_ID);
        if (id->valuedouble > max_id) max_id = id->valuedouble;
    }
    tokenizer *t = tok_alloc((size_t)(max_id + 1));
    t->nfc = nfc;
    cJSON_ArrayForEach(it, vocab) if (tok_set_vocab(t, (int32_t)it->valuedouble, it->string, strlen(it->string), e)) {
        err_prefix(e, name);
        goto fail;
    }
    tok_index_vocab(t);
    if (check_model_options(model, t, name, e) ||
        load_merges(cJSON_GetObjectItemCaseSensitive(model, "merges"), t, name, e) || load_added(added, t, name, e))
        goto fail;
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    if (!pre || cJSON_IsNull(pre)) {
        gerr_set(e, EX_DATAERR, "%s: a null pre_tokenizer is not supported (ByteLevel is needed)", name);
        goto fail;
    }
    if (parse_pretok(pre, &t->pre, name, e)) goto fail;
    if (t->pre.n == 0 || !t->pre.steps[t->pre.n - 1].byte_level) {
        gerr_set(e, EX_DATAERR, "%s: pre_tokenizer must end in ByteLevel", name);
        goto fail;
    }
    if (tok_finish(t, e)) goto fail;
    *out = t;
    return 0;
fail:
    tok_free(t);
    return e->code;
}

int tok_load_json_text(const char *text, size_t len, const char *name, tokenizer **out, gerr *e) {
    *out = NULL;
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        size_t off = at && at >= text && at <= text + len ? (size_t)(at - text) : 0;
        return gerr_set(e, EX_DATAERR, "%s: malformed JSON near byte %zu", name, off);
    }
    int rc = cJSON_IsObject(root) ? build(root, name, out, e)
                                  : gerr_set(e, EX_DATAERR, "%s: not a JSON object", name);
    cJSON_Delete(root);
    return rc;
}

int tok_load_json(const char *path, tokenizer **out, gerr *e) {
    *out = NULL;
    size_t len;
    char *text = read_regular_file(path, &len, e);
    if (!text) return e->code;
    int rc = tok_load_json_text(text, len, path, out, e);
    free(text);
    return rc;
}
