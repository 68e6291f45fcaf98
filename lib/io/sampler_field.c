/* The rollout record's `sampler` field (sampler_field.h). */
#include "sampler_field.h"

#include <string.h>
#include <sysexits.h>

#include <cjson/cJSON.h>

static const char *const devices[] = {"cpu", "cuda", NULL};
static const char *const weights[] = {"f32", "bf16", "q8", "mxfp4", "q4k", NULL};
static const char *const caches[] = {"f32", "bf16", NULL};
static const char *const logprobs[] = {"processed", "raw", NULL};
static const char *const bases[] = {"frozen", NULL};

static void kv(strbuf *b, const char *key, const char *value, bool first) {
    if (!first) sb_putc(b, ',');
    sb_json_string(b, key, strlen(key));
    sb_putc(b, ':');
    sb_json_string(b, value, strlen(value));
}

void sampler_field_ours(strbuf *b, const char *device, const char *w, bool frozen, const char *kv_cache) {
    sb_putc(b, '{');
    kv(b, "engine", "grpo", true);
    kv(b, "device", device, false);
    kv(b, "weights", w, false);
    if (frozen) kv(b, "base", "frozen", false);
    kv(b, "kv_cache", kv_cache, false);
    sb_putc(b, '}');
}

/* The index of the member key's string among names, or -1 (with e filled). */
static int one_of(const record *r, const cJSON *o, const char *key, const char *const *names, gerr *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    for (int i = 0; names[i] && cJSON_IsString(v); i++)
        if (!strcmp(v->valuestring, names[i])) return i;
    strbuf want = {0};
    for (int i = 0; names[i]; i++) sb_printf(&want, "%s\"%s\"", i ? (names[i + 1] ? ", " : " or ") : "", names[i]);
    gerr_at(e, EX_DATAERR, r->file, r->line, "field \"sampler\": member \"%s\": expected %s", key, want.data);
    sb_free(&want);
    return -1;
}

/* Whether weights of format name hold the float32 values themselves: f32,
 * and mxfp4 (MXFP4's values are exact in float32). */
static bool float_values(const char *name) { return !strcmp(name, "f32") || !strcmp(name, "mxfp4"); }

/* Whether our engine's device d, weights w, base and cache c (indices into
 * the names above) compute what a float32 trainer on a frozen base of
 * format trainer_base computes. */
static bool ours_exact(const record *r, const cJSON *o, int d, int w, int c, const char *trainer_base,
                       const char *trainer_compute, int *rc, gerr *e) {
    bool frozen = cJSON_GetObjectItemCaseSensitive(o, "base") != NULL;
    if (frozen && one_of(r, o, "base", bases, e) < 0) {
        *rc = EX_DATAERR;
        return false;
    }
    if (d != 0 || c != 0 || strcmp(trainer_compute, "f32")) return false;
    /* on a frozen base: the trainer's own base; float32 products on the float32
     * values (f32, or mxfp4's exact ones) against a trainer on those values */
    if (frozen && !strcmp(weights[w], trainer_base)) return true;
    return float_values(weights[w]) && float_values(trainer_base);
}

int sampler_field_read(const record *r, const char *trainer_base, const char *trainer_compute, sampler_kind *kind,
                       gerr *e) {
    *kind = SAMPLER_ABSENT;
    cJSON *o = NULL;
    int rc = record_get_json_unless_null(r, "sampler", &o, e);
    if (rc || !o) return rc;
    const cJSON *engine = cJSON_GetObjectItemCaseSensitive(o, "engine");
    if (!cJSON_IsObject(o) || !cJSON_IsString(engine) || !*engine->valuestring) {
        cJSON_Delete(o);
        return gerr_at(e, EX_DATAERR, r->file, r->line,
                       "field \"sampler\": expected an object with a non-empty string \"engine\"");
    }
    *kind = SAMPLER_OTHER;
    if (strcmp(engine->valuestring, "grpo") && cJSON_GetObjectItemCaseSensitive(o, "logprobs")) {
        int l = one_of(r, o, "logprobs", logprobs, e);
        if (l < 0) rc = EX_DATAERR;
        else if (l == 1) *kind = SAMPLER_RAW;
    } else if (!strcmp(engine->valuestring, "grpo")) {
        int d = one_of(r, o, "device", devices, e), w = d < 0 ? -1 : one_of(r, o, "weights", weights, e),
            c = w < 0 ? -1 : one_of(r, o, "kv_cache", caches, e);
        if (c < 0) rc = EX_DATAERR;
        else if (ours_exact(r, o, d, w, c, trainer_base, trainer_compute, &rc, e)) *kind = SAMPLER_EXACT;
    }
    cJSON_Delete(o);
    return rc;
}
