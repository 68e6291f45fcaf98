/* Reading and applying a rollout record's completion_mask (see
 * completion_mask.h). */
#include "completion_mask.h"

#include <math.h>
#include <stdlib.h>
#include <sysexits.h>

int completion_mask_read(const record *r, size_t n_completion, uint8_t **mask, gerr *e) {
    *mask = NULL;
    cJSON *a = NULL;
    if (record_get_json(r, "completion_mask", false, &a, e)) return e->code;
    if (!a || cJSON_IsNull(a)) {
        cJSON_Delete(a);
        return 0;
    }
    if (!cJSON_IsArray(a)) {
        cJSON_Delete(a);
        return record_field_error(r, "completion_mask", "an array of 0 and 1, one per completion token", e);
    }
    int got = cJSON_GetArraySize(a);
    if ((size_t)got != n_completion) {
        cJSON_Delete(a);
        return gerr_at(e, EX_DATAERR, r->file, r->line,
                       "field \"completion_mask\": expected one entry per completion token (%zu), got %d",
                       n_completion, got);
    }
    uint8_t *m = xmalloc(n_completion ? n_completion : 1);
    int i = 0;
    for (const cJSON *v = a->child; v; v = v->next, i++) {
        if (!cJSON_IsNumber(v) || (v->valuedouble != 0 && v->valuedouble != 1)) {
            cJSON_Delete(a);
            free(m);
            return gerr_at(e, EX_DATAERR, r->file, r->line, "field \"completion_mask\": entry %d: expected 0 or 1", i);
        }
        m[i] = v->valuedouble == 1;
    }
    cJSON_Delete(a);
    *mask = m;
    return 0;
}

int completion_mask_logprobs(const record *r, const uint8_t *mask, int n_completion, float *out, gerr *e) {
    cJSON *a = NULL;
    if (record_get_json(r, "logprobs", true, &a, e)) return e->code;
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != n_completion) {
        int got = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : -1;
        cJSON_Delete(a);
        if (got < 0) return record_field_error(r, "logprobs", "an array of numbers", e);
        return gerr_at(e, EX_DATAERR, r->file, r->line,
                       "field \"logprobs\": expected one per completion token (%d), got %d", n_completion, got);
    }
    int i = 0;
    for (const cJSON *v = a->child; v; v = v->next, i++) {
        if (mask && !mask[i]) { /* an environment token: context only, its log-prob is never used */
            if (!cJSON_IsNull(v) && !cJSON_IsNumber(v)) {
                cJSON_Delete(a);
                return gerr_at(e, EX_DATAERR, r->file, r->line,
                               "field \"logprobs\": entry %d: expected null or a number (completion_mask 0)", i);
            }
            out[i] = 0;
            continue;
        }
        if (!cJSON_IsNumber(v) || !(v->valuedouble <= 0) || !isfinite(v->valuedouble)) {
            cJSON_Delete(a);
            return gerr_at(e, EX_DATAERR, r->file, r->line,
                           "field \"logprobs\": entry %d: expected a finite log-probability <= 0%s", i,
                           mask ? " (completion_mask 1: the policy sampled it)" : "");
        }
        out[i] = (float)v->valuedouble;
    }
    cJSON_Delete(a);
    return 0;
}

int completion_mask_select(float *v, const uint8_t *mask, int n) {
    if (!mask) return n;
    int k = 0;
    for (int t = 0; t < n; t++)
        if (mask[t]) v[k++] = v[t];
    return k;
}

int completion_mask_count(const uint8_t *mask, int n) {
    if (!mask) return n;
    int k = 0;
    for (int t = 0; t < n; t++) k += mask[t];
    return k;
}
