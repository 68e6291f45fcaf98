/* The rollout record's `routing` field (routing_field.h). */
#include "routing_field.h"

#include <stdlib.h>
#include <string.h>
#include <sysexits.h>

#include <cjson/cJSON.h>

#include "../util/base64.h"

routing_shape routing_shape_of(const model_config *c) {
    int layers = config_ffn_layers(c, true);
    return (routing_shape){layers, layers ? c->n_experts_used : 0, layers ? c->n_experts : 0};
}

int routing_id_bytes(routing_shape sh) { return sh.experts > 256 ? 2 : 1; }

size_t routing_position_ids(routing_shape sh) { return (size_t)sh.layers * (size_t)sh.k; }

size_t routing_position_bytes(routing_shape sh) { return routing_position_ids(sh) * (size_t)routing_id_bytes(sh); }

void routing_pack(routing_shape sh, const int32_t *ids, size_t n, uint8_t *out) {
    if (routing_id_bytes(sh) == 1) {
        for (size_t i = 0; i < n; i++) out[i] = (uint8_t)ids[i];
        return;
    }
    for (size_t i = 0; i < n; i++) out[2 * i] = (uint8_t)ids[i], out[2 * i + 1] = (uint8_t)(ids[i] >> 8);
}

void routing_field_write(strbuf *b, routing_shape sh, const uint8_t *packed, size_t n_positions) {
    sb_printf(b, "{\"layers\":%d,\"k\":%d,\"experts\":%d,\"ids\":\"", sh.layers, sh.k, sh.experts);
    base64_encode(b, packed, n_positions * routing_position_bytes(sh));
    sb_puts(b, "\"}");
}

/* A member that must be the model's integer. */
static int check_member(const record *r, const cJSON *o, const char *key, int want, const char *what, gerr *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || v->valuedouble != (double)(int)v->valuedouble)
        return gerr_at(e, EX_DATAERR, r->file, r->line, "field \"routing\": member \"%s\": expected an integer", key);
    if ((int)v->valuedouble != want)
        return gerr_at(e, EX_DATAERR, r->file, r->line,
                       "field \"routing\": member \"%s\": the model has %d %s, the record %d (sampled by another "
                       "model?)", key, want, what, (int)v->valuedouble);
    return 0;
}

/* Each position's ids in each layer: k different experts below experts. */
static int check_ids(const record *r, routing_shape sh, const uint16_t *ids, size_t n_positions, gerr *e) {
    for (size_t p = 0; p < n_positions; p++)
        for (int l = 0; l < sh.layers; l++) {
            const uint16_t *x = ids + (p * (size_t)sh.layers + (size_t)l) * (size_t)sh.k;
            for (int j = 0; j < sh.k; j++) {
                if (x[j] >= sh.experts)
                    return gerr_at(e, EX_DATAERR, r->file, r->line,
                                   "field \"routing\": member \"ids\": position %zu, layer %d: expert %d of %d", p, l,
                                   x[j], sh.experts);
                for (int i = 0; i < j; i++)
                    if (x[i] == x[j])
                        return gerr_at(e, EX_DATAERR, r->file, r->line,
                                       "field \"routing\": member \"ids\": position %zu, layer %d: expert %d twice", p,
                                       l, x[j]);
            }
        }
    return 0;
}

int routing_field_read(const record *r, routing_shape want, size_t n_positions, bool *present, uint16_t **ids,
                       gerr *e) {
    *present = false;
    *ids = NULL;
    cJSON *o = NULL;
    int rc = record_get_json_unless_null(r, "routing", &o, e);
    if (rc || !o) return rc;
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, "ids");
    if (!cJSON_IsObject(o) || !cJSON_IsString(s))
        rc = gerr_at(e, EX_DATAERR, r->file, r->line,
                     "field \"routing\": expected an object {\"layers\", \"k\", \"experts\", \"ids\": base64}");
    if (!rc) rc = check_member(r, o, "layers", want.layers, "layers with experts", e);
    if (!rc) rc = check_member(r, o, "k", want.k, "experts per token", e);
    if (!rc) rc = check_member(r, o, "experts", want.experts, "experts per layer", e);
    uint8_t *bytes = NULL;
    size_t n = 0, per = routing_position_bytes(want), n_ids = n_positions * (size_t)want.layers * (size_t)want.k;
    if (!rc) {
        long bad = base64_decode(s->valuestring, strlen(s->valuestring), &bytes, &n);
        if (bad >= 0)
            rc = gerr_at(e, EX_DATAERR, r->file, r->line,
                         "field \"routing\": member \"ids\": not base64 (at character %ld of %zu)", bad,
                         strlen(s->valuestring));
    }
    if (!rc && n != n_positions * per)
        rc = gerr_at(e, EX_DATAERR, r->file, r->line,
                     "field \"routing\": member \"ids\": expected %zu positions (the prompt and completion tokens but "
                     "the last) of %zu bytes, got %zu bytes", n_positions, per, n);
    if (!rc) {
        uint16_t *x = xmalloc((n_ids ? n_ids : 1) * sizeof *x);
        bool two = routing_id_bytes(want) == 2;
        for (size_t i = 0; i < n_ids; i++) x[i] = two ? (uint16_t)(bytes[2 * i] | bytes[2 * i + 1] << 8) : bytes[i];
        rc = check_ids(r, want, x, n_positions, e);
        if (rc) free(x);
        else *ids = x, *present = true;
    }
    free(bytes);
    cJSON_Delete(o);
    return rc;
}
