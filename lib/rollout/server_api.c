#include "server_api.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/err.h"

static const char *const kind_names[] = {"auto", "vllm", "sglang", "llamacpp"};
static const char *const endpoints[] = {"", "/v1/completions", "/generate", "/completion"};

bool server_kind_parse(const char *name, server_kind *kind) {
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, kind_names[i])) {
            *kind = (server_kind)i;
            return true;
        }
    return false;
}

const char *server_kind_name(server_kind kind) { return kind_names[kind]; }

const char *server_endpoint(server_kind kind) { return endpoints[kind]; }

/* ---- requests ----------------------------------------------------------------- */

static void put_number(strbuf *b, const char *key, double v) {
    sb_printf(b, ",\"%s\":", key);
    sb_json_number(b, v);
}

static void put_stops(strbuf *b, const string_list *stops) {
    sb_puts(b, ",\"stop\":[");
    for (int i = 0; stops && i < stops->n; i++) {
        if (i) sb_putc(b, ',');
        sb_json_string(b, stops->items[i], strlen(stops->items[i]));
    }
    sb_putc(b, ']');
}

/* temperature, top_p, top_k, min_p and the penalties off; top-k off is
 * off_k in the server's spelling. */
static void put_sampling(strbuf *b, const server_sampling *s, long long off_k, bool penalties) {
    put_number(b, "temperature", s->temperature);
    put_number(b, "top_p", s->top_p);
    sb_printf(b, ",\"top_k\":%lld", s->top_k > 0 ? s->top_k : off_k);
    put_number(b, "min_p", s->min_p);
    if (penalties) sb_puts(b, ",\"repetition_penalty\":1,\"frequency_penalty\":0,\"presence_penalty\":0");
}

void server_request_body(const server_sampling *s, const int32_t *ids, size_t n, long long max_tokens,
                         uint32_t seed, strbuf *b) {
    sb_clear(b);
    switch (s->kind) {
    case SERVER_VLLM: { /* an adapter is asked for as a model of its name */
        const char *model = s->adapter ? s->adapter : s->model ? s->model : "";
        sb_puts(b, "{\"model\":");
        sb_json_string(b, model, strlen(model));
        sb_puts(b, ",\"prompt\":");
        sb_json_int_array(b, ids, n);
        sb_printf(b, ",\"max_tokens\":%lld", max_tokens);
        put_sampling(b, s, -1, true);
        sb_printf(b, ",\"seed\":%u", seed);
        put_stops(b, s->stops);
        sb_puts(b, ",\"n\":1,\"logprobs\":0,\"return_token_ids\":true,\"skip_special_tokens\":false}");
        break;
    }
    case SERVER_SGLANG:
        sb_puts(b, "{\"input_ids\":");
        sb_json_int_array(b, ids, n);
        sb_printf(b, ",\"sampling_params\":{\"max_new_tokens\":%lld", max_tokens);
        put_sampling(b, s, -1, true);
        put_stops(b, s->stops);
        sb_printf(b, ",\"sampling_seed\":%u,\"skip_special_tokens\":false}", seed);
        sb_puts(b, ",\"return_logprob\":true,\"logprob_start_len\":-1,\"top_logprobs_num\":0");
        if (s->adapter) { /* its native API names a loaded adapter in lora_path */
            sb_puts(b, ",\"lora_path\":");
            sb_json_string(b, s->adapter, strlen(s->adapter));
        }
        sb_putc(b, '}');
        break;
    default: /* llama.cpp */
        sb_puts(b, "{\"prompt\":");
        sb_json_int_array(b, ids, n);
        sb_printf(b, ",\"n_predict\":%lld", max_tokens);
        put_sampling(b, s, 0, false);
        /* our order (formats/rollout.md), and nothing else in the chain: no
         * penalties, DRY, XTC, typical-p or top-n-sigma the server might default to */
        sb_puts(b, ",\"samplers\":[\"temperature\",\"top_k\",\"top_p\",\"min_p\"]");
        /* no "stop": its server leaves out the probabilities of a stop string's
         * tokens; grpo-rollout cuts at --stop strings itself */
        sb_printf(b, ",\"seed\":%u", seed);
        sb_printf(b, ",\"n_probs\":1,\"post_sampling_probs\":%s,\"return_tokens\":true,\"stream\":false}",
                  s->processed ? "true" : "false");
        break;
    }
}

/* ---- replies ------------------------------------------------------------------ */

static int bad(char *why, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(char *why, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
    return SERVER_REPLY_BAD;
}

static const cJSON *get(const cJSON *o, const char *key) { return cJSON_GetObjectItemCaseSensitive(o, key); }

static void reply_reserve(server_reply *r, size_t n) {
    if (n <= r->cap) return;
    r->cap = n;
    r->tokens = xrealloc(r->tokens, n * sizeof *r->tokens);
    r->logprobs = xrealloc(r->logprobs, n * sizeof *r->logprobs);
}

/* A token id: an integer in [0, 2^31). */
static bool token_id(const cJSON *v, int32_t *id) {
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 2147483647.0 ||
        v->valuedouble != floor(v->valuedouble))
        return false;
    *id = (int32_t)v->valuedouble;
    return true;
}

/* ids: an array of token ids into r->tokens (r->n set). */
static int read_ids(const cJSON *ids, const char *field, server_reply *r, char *why, size_t cap) {
    if (!cJSON_IsArray(ids)) return bad(why, cap, "no %s (an array of token ids)", field);
    size_t n = (size_t)cJSON_GetArraySize(ids), i = 0;
    reply_reserve(r, n);
    const cJSON *v;
    cJSON_ArrayForEach(v, ids) {
        if (!token_id(v, &r->tokens[i])) return bad(why, cap, "%s[%zu] is not a token id", field, i);
        i++;
    }
    r->n = n;
    return SERVER_REPLY_OK;
}

static int count_mismatch(char *why, size_t cap, size_t lps, size_t n) {
    return bad(why, cap, "%zu log-probabilities for %zu tokens", lps, n);
}

static int parse_vllm(const cJSON *root, server_reply *r, char *why, size_t cap) {
    const cJSON *choices = get(root, "choices");
    const cJSON *c = cJSON_GetArrayItem(choices, 0);
    if (!cJSON_IsObject(c)) return bad(why, cap, "no choices[0]");
    int rc = read_ids(get(c, "token_ids"), "choices[0].token_ids", r, why, cap);
    if (rc) return rc;
    const cJSON *lps = get(get(c, "logprobs"), "token_logprobs");
    if (!cJSON_IsArray(lps))
        return bad(why, cap, "no log-probabilities (choices[0].logprobs.token_logprobs; was \"logprobs\" refused?)");
    size_t n = (size_t)cJSON_GetArraySize(lps), i = 0;
    if (n != r->n) return count_mismatch(why, cap, n, r->n);
    const cJSON *v;
    cJSON_ArrayForEach(v, lps) {
        if (!cJSON_IsNumber(v)) return bad(why, cap, "choices[0].logprobs.token_logprobs[%zu] is not a number", i);
        r->logprobs[i++] = v->valuedouble;
    }
    const cJSON *fr = get(c, "finish_reason");
    if (!cJSON_IsString(fr)) return bad(why, cap, "no choices[0].finish_reason");
    if (!strcmp(fr->valuestring, "abort")) return SERVER_REPLY_ABORTED;
    r->finish = !strcmp(fr->valuestring, "length") ? SERVER_FINISH_LENGTH : SERVER_FINISH_STOP;
    return SERVER_REPLY_OK;
}

static int parse_sglang(const cJSON *root, server_reply *r, char *why, size_t cap) {
    const cJSON *meta = get(root, "meta_info");
    if (!cJSON_IsObject(meta)) return bad(why, cap, "no meta_info");
    const cJSON *lps = get(meta, "output_token_logprobs");
    if (!cJSON_IsArray(lps))
        return bad(why, cap, "no log-probabilities (meta_info.output_token_logprobs; was return_logprob refused?)");
    size_t n = (size_t)cJSON_GetArraySize(lps), i = 0;
    reply_reserve(r, n);
    const cJSON *e;
    cJSON_ArrayForEach(e, lps) {
        const cJSON *lp = cJSON_GetArrayItem(e, 0);
        if (!cJSON_IsArray(e) || !cJSON_IsNumber(lp) || !token_id(cJSON_GetArrayItem(e, 1), &r->tokens[i]))
            return bad(why, cap, "meta_info.output_token_logprobs[%zu] is not [logprob, token id, ...]", i);
        r->logprobs[i++] = lp->valuedouble;
    }
    r->n = n;
    const cJSON *out = get(root, "output_ids");
    if (out) { /* sent by servers started with --return-token-ids (or newer ones): it must agree */
        if (!cJSON_IsArray(out) || (size_t)cJSON_GetArraySize(out) != n)
            return count_mismatch(why, cap, n, cJSON_IsArray(out) ? (size_t)cJSON_GetArraySize(out) : 0);
        i = 0;
        const cJSON *v;
        cJSON_ArrayForEach(v, out) {
            int32_t id;
            if (!token_id(v, &id) || id != r->tokens[i])
                return bad(why, cap, "output_ids[%zu] is not the token of output_token_logprobs[%zu]", i, i);
            i++;
        }
    }
    const cJSON *type = get(get(meta, "finish_reason"), "type");
    if (!cJSON_IsString(type)) return bad(why, cap, "no meta_info.finish_reason.type");
    if (!strcmp(type->valuestring, "abort")) return SERVER_REPLY_ABORTED;
    r->finish = !strcmp(type->valuestring, "length") ? SERVER_FINISH_LENGTH : SERVER_FINISH_STOP;
    return SERVER_REPLY_OK;
}

/* The ids of probs are tokens of r, in order (some left out). */
static bool ids_in_order(const cJSON *probs, const server_reply *r) {
    size_t at = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, probs) {
        int32_t id;
        if (!token_id(get(p, "id"), &id)) return false;
        while (at < r->n && r->tokens[at] != id) at++;
        if (at++ == r->n) return false;
    }
    return true;
}

/* completion_probabilities[i] is {"id", "prob"} (post_sampling_probs) or
 * {"id", "logprob"}; its id must be tokens[i]. */
static int parse_llamacpp(const cJSON *root, server_reply *r, char *why, size_t cap) {
    int rc = read_ids(get(root, "tokens"), "tokens", r, why, cap);
    if (rc) return rc;
    const cJSON *probs = get(root, "completion_probabilities");
    if (!probs && r->n)
        return bad(why, cap, "no log-probabilities (completion_probabilities; was n_probs refused?)");
    size_t n = probs ? (size_t)cJSON_GetArraySize(probs) : 0, i = 0;
    if (probs && !cJSON_IsArray(probs)) return bad(why, cap, "completion_probabilities is not an array");
    if (n != r->n) {
        int rc = bad(why, cap, "%zu log-probabilities for %zu tokens", n, r->n);
        return n < r->n && ids_in_order(probs, r) ? SERVER_REPLY_SPLIT : rc;
    }
    const cJSON *p;
    cJSON_ArrayForEach(p, probs) {
        int32_t id;
        const cJSON *prob = get(p, "prob"), *lp = get(p, "logprob");
        if (!token_id(get(p, "id"), &id) || id != r->tokens[i])
            return bad(why, cap, "completion_probabilities[%zu].id is not tokens[%zu]", i, i);
        if (cJSON_IsNumber(prob) && prob->valuedouble > 0 && prob->valuedouble <= 1)
            r->logprobs[i] = log(prob->valuedouble);
        else if (cJSON_IsNumber(lp))
            r->logprobs[i] = lp->valuedouble;
        else
            return bad(why, cap, "completion_probabilities[%zu] has no probability in (0, 1] nor a logprob", i);
        i++;
    }
    const cJSON *stop = get(root, "stop_type");
    if (!cJSON_IsString(stop)) return bad(why, cap, "no stop_type");
    r->finish = !strcmp(stop->valuestring, "limit") ? SERVER_FINISH_LENGTH : SERVER_FINISH_STOP;
    return SERVER_REPLY_OK;
}

int server_parse_reply(server_kind kind, const char *body, size_t len, server_reply *r, char *why, size_t cap) {
    why[0] = 0;
    r->n = 0;
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!root) {
        snprintf(why, cap, "a malformed reply (not JSON)");
        return SERVER_REPLY_NOT_JSON;
    }
    int rc = !cJSON_IsObject(root)               ? bad(why, cap, "not a JSON object")
             : kind == SERVER_VLLM               ? parse_vllm(root, r, why, cap)
             : kind == SERVER_SGLANG             ? parse_sglang(root, r, why, cap)
                                                 : parse_llamacpp(root, r, why, cap);
    if (rc == SERVER_REPLY_ABORTED) snprintf(why, cap, "the server aborted the request");
    if (rc == SERVER_REPLY_SPLIT) {
        size_t at = strlen(why);
        snprintf(why + at, cap - at, " (llama.cpp's server gives none for a token that ends inside a UTF-8 character)");
    }
    cJSON_Delete(root);
    return rc;
}

void server_reply_free(server_reply *r) {
    free(r->tokens);
    free(r->logprobs);
    memset(r, 0, sizeof *r);
}

/* ---- /v1/models ----------------------------------------------------------------- */

bool server_parse_models(const char *body, size_t len, const char *want, server_info *out, char *why, size_t cap) {
    why[0] = 0;
    out->kind = SERVER_AUTO;
    out->context = 0;
    sb_clear(&out->owner);
    sb_clear(&out->model);
    cJSON *root = cJSON_ParseWithLength(body, len);
    const cJSON *data = get(root, "data"), *m = NULL, *found = NULL;
    if (!cJSON_IsArray(data)) {
        snprintf(why, cap, "GET /v1/models: not {\"data\": [models]}");
        cJSON_Delete(root);
        return false;
    }
    cJSON_ArrayForEach(m, data) {
        const cJSON *id = get(m, "id");
        if (!cJSON_IsString(id)) continue;
        if (!want || !strcmp(want, id->valuestring)) {
            found = m;
            break;
        }
    }
    if (!found) {
        snprintf(why, cap, want ? "GET /v1/models: the server lists no model \"%s\"" : "GET /v1/models: no model listed",
                 want);
        cJSON_Delete(root);
        return false;
    }
    const cJSON *id = get(found, "id"), *owner = get(found, "owned_by");
    sb_puts(&out->model, id->valuestring);
    if (cJSON_IsString(owner)) {
        sb_puts(&out->owner, owner->valuestring);
        server_kind k;
        if (server_kind_parse(owner->valuestring, &k) && k != SERVER_AUTO) out->kind = k;
    }
    const cJSON *ctx = get(found, "max_model_len");
    if (!cJSON_IsNumber(ctx)) ctx = get(get(found, "meta"), "n_ctx");
    if (cJSON_IsNumber(ctx) && ctx->valuedouble >= 1) out->context = (long long)ctx->valuedouble;
    cJSON_Delete(root);
    return true;
}

void server_info_free(server_info *i) {
    sb_free(&i->owner);
    sb_free(&i->model);
}

/* ---- LoRA adapters -------------------------------------------------------------- */

static const char *const lora_load[] = {NULL, "/v1/load_lora_adapter", "/load_lora_adapter", NULL};
static const char *const lora_unload[] = {NULL, NULL, "/unload_lora_adapter", NULL};

const char *server_lora_load_endpoint(server_kind kind) { return lora_load[kind]; }

const char *server_lora_unload_endpoint(server_kind kind) { return lora_unload[kind]; }

static void put_string(strbuf *b, const char *key, const char *v) {
    sb_printf(b, "\"%s\":", key);
    sb_json_string(b, v, strlen(v));
}

void server_lora_load_body(server_kind kind, const char *name, const char *path, strbuf *b) {
    sb_clear(b);
    sb_putc(b, '{');
    put_string(b, "lora_name", name);
    sb_putc(b, ',');
    put_string(b, "lora_path", path);
    /* vLLM replaces the adapter of that name (its other requests see the new
     * weights); SGLang has no such flag: the name is unloaded first */
    if (kind == SERVER_VLLM) sb_puts(b, ",\"load_inplace\":true");
    sb_putc(b, '}');
}

void server_lora_unload_body(const char *name, strbuf *b) {
    sb_clear(b);
    sb_putc(b, '{');
    put_string(b, "lora_name", name);
    sb_putc(b, '}');
}

int server_parse_lora_reply(server_kind kind, const char *body, size_t len, char *why, size_t cap) {
    why[0] = 0;
    if (kind != SERVER_SGLANG) return SERVER_LORA_OK; /* vLLM: "Success: LoRA adapter 'NAME' added successfully." */
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!root) {
        snprintf(why, cap, "a malformed reply (not JSON)");
        return SERVER_LORA_NOT_JSON;
    }
    const cJSON *ok = get(root, "success"), *msg = get(root, "error_message");
    int rc = SERVER_LORA_OK;
    if (!cJSON_IsBool(ok)) {
        snprintf(why, cap, "a reply without \"success\" (true or false)");
        rc = SERVER_LORA_BAD;
    } else if (cJSON_IsFalse(ok)) {
        snprintf(why, cap, "%s", cJSON_IsString(msg) && *msg->valuestring ? msg->valuestring : "no error_message");
        rc = SERVER_LORA_REFUSED;
    }
    cJSON_Delete(root);
    return rc;
}
