#include "record.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>

void record_init(record *r) { memset(r, 0, sizeof *r); }

static void free_owned(record *r) {
    for (size_t i = 0; i < r->n_owned; i++) free(r->owned[i]);
    r->n_owned = 0;
}

void record_free(record *r) {
    free_owned(r);
    free(r->owned);
    free(r->fields);
    sb_free(&r->text);
    memset(r, 0, sizeof *r);
}

void record_reset(record *r, const char *file, long line) {
    free_owned(r);
    r->n = 0;
    sb_clear(&r->text);
    r->file = file;
    r->line = line;
}

static rec_field *push_field(record *r) {
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 16;
        r->fields = xrealloc(r->fields, r->cap * sizeof *r->fields);
    }
    return &r->fields[r->n++];
}

static char *own(record *r, const char *data, size_t len) {
    if (r->n_owned == r->cap_owned) {
        r->cap_owned = r->cap_owned ? r->cap_owned * 2 : 8;
        r->owned = xrealloc(r->owned, r->cap_owned * sizeof *r->owned);
    }
    char *p = xstrndup(data, len);
    r->owned[r->n_owned++] = p;
    return p;
}

static bool key_equals(const rec_field *f, const char *key, size_t key_len) {
    if (!f->key_escaped) return f->key_len == key_len && !memcmp(f->key, key, key_len);
    strbuf dec = {0};
    json_decode_string(f->key, f->key_len, &dec);
    bool eq = dec.len == key_len && !memcmp(dec.data, key, key_len);
    sb_free(&dec);
    return eq;
}

static int invalid(const record *r, gerr *e, const json_scan_error *se) {
    return gerr_at(e, EX_DATAERR, r->file, r->line, "invalid JSON at column %zu: %s", se->column, se->msg);
}

int record_parse(record *r, const char *line, size_t len, const char *file, long line_no, gerr *e) {
    record_reset(r, file, line_no);
    sb_append(&r->text, line, len);
    const char *s = r->text.data;
    json_scan_error se = {0};
    size_t i = 0;
    while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r')) i++;
    if (i >= len || s[i] != '{') {
        if (i < len && strchr("[\"-0123456789tfn", s[i])) {
            /* valid JSON that is not an object gets a clearer message */
            size_t end = json_scan_value(s, len, i, &se);
            if (end) {
                return gerr_at(e, EX_DATAERR, file, line_no, "expected a JSON object, got %s",
                               json_kind_name(json_kind_of(s + i)));
            }
            return invalid(r, e, &se);
        }
        se.column = i + 1;
        se.msg = "expected '{'";
        return invalid(r, e, &se);
    }
    i++;
    for (;;) {
        while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')) i++;
        if (i < len && s[i] == '}' && r->n == 0) {
            i++;
            break;
        }
        if (i >= len || s[i] != '"') {
            se.column = i + 1;
            se.msg = "expected a string key";
            return invalid(r, e, &se);
        }
        /* the key is a JSON string: reuse the value scanner on it */
        size_t key_end = json_scan_value(s, len, i, &se);
        if (!key_end) return invalid(r, e, &se);
        rec_field *f = push_field(r);
        f->key = s + i + 1;
        f->key_len = key_end - i - 2;
        f->key_escaped = memchr(f->key, '\\', f->key_len) != NULL;
        i = key_end;
        while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')) i++;
        if (i >= len || s[i] != ':') {
            se.column = i + 1;
            se.msg = "expected ':' after key";
            return invalid(r, e, &se);
        }
        i++;
        while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')) i++;
        size_t val_end = json_scan_value(s, len, i, &se);
        if (!val_end) return invalid(r, e, &se);
        f->val = s + i;
        f->val_len = val_end - i;
        for (size_t k = 0; k + 1 < r->n; k++) {
            if (key_equals(&r->fields[k], f->key, f->key_len) ||
                (f->key_escaped && key_equals(f, r->fields[k].key, r->fields[k].key_len))) {
                return gerr_at(e, EX_DATAERR, file, line_no, "duplicate key \"%.*s\"", (int)f->key_len,
                               f->key);
            }
        }
        i = val_end;
        while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')) i++;
        if (i < len && s[i] == ',') {
            i++;
            continue;
        }
        if (i < len && s[i] == '}') {
            i++;
            break;
        }
        se.column = i + 1;
        se.msg = i < len ? "expected ',' or '}'" : "unexpected end of line";
        return invalid(r, e, &se);
    }
    while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r')) i++;
    if (i < len) {
        se.column = i + 1;
        se.msg = "unexpected text after the object";
        return invalid(r, e, &se);
    }
    return 0;
}

static rec_field *find_mut(record *r, const char *key) {
    size_t key_len = strlen(key);
    for (size_t i = 0; i < r->n; i++)
        if (key_equals(&r->fields[i], key, key_len)) return &r->fields[i];
    return NULL;
}

const rec_field *record_find(const record *r, const char *key) { return find_mut((record *)r, key); }

bool record_has(const record *r, const char *key) { return record_find(r, key) != NULL; }

int record_field_error(const record *r, const char *key, const char *expected, gerr *e) {
    const rec_field *f = record_find(r, key);
    const char *got = f ? json_kind_name(json_kind_of(f->val)) : "nothing (field missing)";
    return gerr_at(e, EX_DATAERR, r->file, r->line, "field \"%s\": expected %s, got %s", key, expected, got);
}

/* Shared front of the typed getters: 0 = go on with f, else done (rc in *rc). */
static const rec_field *lookup(const record *r, const char *key, bool required, const char *expected,
                               int *present, int *rc, gerr *e) {
    const rec_field *f = record_find(r, key);
    *rc = 0;
    if (present) *present = f ? (json_kind_of(f->val) == JSON_NULL ? 1 : 2) : 0;
    if (!f || json_kind_of(f->val) == JSON_NULL) {
        if (required) *rc = record_field_error(r, key, expected, e);
        return NULL;
    }
    return f;
}

int record_get_string(const record *r, const char *key, bool required, strbuf *out, int *present, gerr *e) {
    int rc;
    const rec_field *f = lookup(r, key, required, "a string", present, &rc, e);
    if (!f) return rc;
    if (json_kind_of(f->val) != JSON_STRING) return record_field_error(r, key, "a string", e);
    sb_clear(out);
    json_decode_string(f->val + 1, f->val_len - 2, out);
    return 0;
}

int record_get_number(const record *r, const char *key, bool required, double *out, int *present, gerr *e) {
    int rc;
    const rec_field *f = lookup(r, key, required, "a number", present, &rc, e);
    if (!f) return rc;
    if (json_kind_of(f->val) != JSON_NUMBER) return record_field_error(r, key, "a number", e);
    char buf[64];
    double v;
    if (f->val_len < sizeof buf) {
        memcpy(buf, f->val, f->val_len);
        buf[f->val_len] = 0;
        v = strtod(buf, NULL);
    } else { /* absurdly long digit strings still parse */
        char *tmp = xstrndup(f->val, f->val_len);
        v = strtod(tmp, NULL);
        free(tmp);
    }
    if (!isfinite(v))
        return gerr_at(e, EX_DATAERR, r->file, r->line, "field \"%s\": expected a finite number, got %.*s",
                       key, (int)(f->val_len > 40 ? 40 : f->val_len), f->val);
    *out = v;
    return 0;
}

int record_get_int(const record *r, const char *key, bool required, long long min, long long max,
                   long long *out, int *present, gerr *e) {
    int rc;
    const rec_field *f = lookup(r, key, required, "an integer", present, &rc, e);
    if (!f) return rc;
    bool integral = json_kind_of(f->val) == JSON_NUMBER && f->val_len < 24 &&
                    !memchr(f->val, '.', f->val_len) && !memchr(f->val, 'e', f->val_len) &&
                    !memchr(f->val, 'E', f->val_len);
    if (!integral) return record_field_error(r, key, "an integer", e);
    char buf[32];
    memcpy(buf, f->val, f->val_len);
    buf[f->val_len] = 0;
    errno = 0;
    long long v = strtoll(buf, NULL, 10);
    if (errno == ERANGE || v < min || v > max)
        return gerr_at(e, EX_DATAERR, r->file, r->line, "field \"%s\": expected an integer in [%lld, %lld], got %s",
                       key, min, max, buf);
    *out = v;
    return 0;
}

int record_get_json(const record *r, const char *key, bool required, cJSON **out, gerr *e) {
    *out = NULL;
    const rec_field *f = record_find(r, key);
    if (!f) return required ? record_field_error(r, key, "a value", e) : 0;
    *out = cJSON_ParseWithLength(f->val, f->val_len);
    if (!*out) return gerr_at(e, EX_DATAERR, r->file, r->line, "field \"%s\": cannot parse value", key);
    return 0;
}

int record_get_json_unless_null(const record *r, const char *key, cJSON **out, gerr *e) {
    int rc = record_get_json(r, key, false, out, e);
    if (!rc && cJSON_IsNull(*out)) {
        cJSON_Delete(*out);
        *out = NULL;
    }
    return rc;
}

int record_get_messages(const record *r, cJSON **out, gerr *e) {
    int rc = record_get_json(r, "messages", false, out, e);
    if (rc) return rc;
    if (cJSON_IsArray(*out)) return 0;
    cJSON_Delete(*out);
    *out = NULL;
    return record_field_error(r, "messages", "an array of {role, content} messages", e);
}

void record_set_raw(record *r, const char *key, const char *raw, size_t raw_len) {
    rec_field *f = find_mut(r, key);
    if (!f) {
        f = push_field(r);
        f->key_len = strlen(key);
        f->key = own(r, key, f->key_len);
        f->key_escaped = false;
    }
    f->val = own(r, raw, raw_len);
    f->val_len = raw_len;
}

void record_set_raw_after(record *r, const char *after, const char *key, const char *raw, size_t raw_len) {
    const rec_field *anchor = record_find(r, after);
    if (record_find(r, key) || !anchor) {
        record_set_raw(r, key, raw, raw_len);
        return;
    }
    size_t at = (size_t)(anchor - r->fields) + 1;
    push_field(r); /* may move the array: positions, not pointers, from here */
    memmove(&r->fields[at + 1], &r->fields[at], (r->n - 1 - at) * sizeof *r->fields);
    rec_field *f = &r->fields[at];
    f->key_len = strlen(key);
    f->key = own(r, key, f->key_len);
    f->key_escaped = false;
    f->val = own(r, raw, raw_len);
    f->val_len = raw_len;
}

void record_set_string(record *r, const char *key, const char *s, size_t len) {
    strbuf b = {0};
    sb_json_string(&b, s, len);
    record_set_raw(r, key, b.data, b.len);
    sb_free(&b);
}

void record_set_number(record *r, const char *key, double v) {
    strbuf b = {0};
    sb_json_number(&b, v);
    record_set_raw(r, key, b.data, b.len);
    sb_free(&b);
}

void record_set_int(record *r, const char *key, long long v) {
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%lld", v);
    record_set_raw(r, key, buf, (size_t)n);
}

void record_set_null(record *r, const char *key) { record_set_raw(r, key, "null", 4); }

int record_set_json(record *r, const char *key, const cJSON *v, gerr *e) {
    char *s = cJSON_PrintUnformatted(v);
    if (!s) return gerr_set(e, EX_SOFTWARE, "out of memory printing field \"%s\"", key);
    record_set_raw(r, key, s, strlen(s));
    cJSON_free(s);
    return 0;
}

void record_append_field(record *r, const rec_field *src) {
    rec_field *f = push_field(r);
    f->key = own(r, src->key, src->key_len);
    f->key_len = src->key_len;
    f->key_escaped = src->key_escaped;
    f->val = own(r, src->val, src->val_len);
    f->val_len = src->val_len;
}

void record_remove(record *r, const char *key) {
    rec_field *f = find_mut(r, key);
    if (!f) return;
    size_t i = (size_t)(f - r->fields);
    memmove(&r->fields[i], &r->fields[i + 1], (r->n - i - 1) * sizeof *f);
    r->n--;
}

void record_serialize(const record *r, strbuf *out) {
    size_t need = 2;
    for (size_t i = 0; i < r->n; i++) need += r->fields[i].key_len + r->fields[i].val_len + 4;
    sb_reserve(out, need);
    char *p = out->data + out->len;
    *p++ = '{';
    for (size_t i = 0; i < r->n; i++) {
        const rec_field *f = &r->fields[i];
        if (i) *p++ = ',';
        *p++ = '"';
        memcpy(p, f->key, f->key_len);
        p += f->key_len;
        *p++ = '"';
        *p++ = ':';
        memcpy(p, f->val, f->val_len);
        p += f->val_len;
    }
    *p++ = '}';
    *p = 0;
    out->len = (size_t)(p - out->data);
}

int record_get_token_ids(const record *r, const char *key, int vocab, int32_t **ids, size_t *n, gerr *e) {
    *ids = NULL;
    *n = 0;
    cJSON *arr = NULL;
    int rc = record_get_json(r, key, true, &arr, e);
    if (rc) return rc;
    if (!cJSON_IsArray(arr)) {
        cJSON_Delete(arr);
        return record_field_error(r, key, "an array of token ids", e);
    }
    int count = cJSON_GetArraySize(arr);
    int32_t *out = xmalloc((size_t)(count ? count : 1) * sizeof *out);
    size_t k = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, arr) {
        double v = cJSON_IsNumber(item) ? item->valuedouble : -1;
        if (v < 0 || v >= vocab || v != (int32_t)v) {
            cJSON_Delete(arr);
            free(out);
            return gerr_at(e, EX_DATAERR, r->file, r->line, "field \"%s\": element %zu: expected a token id in [0, %d)",
                           key, k, vocab);
        }
        out[k++] = (int32_t)v;
    }
    cJSON_Delete(arr);
    *ids = out;
    *n = k;
    return 0;
}
