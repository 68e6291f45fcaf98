/* grpo/state.json and grpo/optimizer.safetensors (state.h). */
#include "state.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../io/json_scan.h"
#include "../io/mapped.h"
#include "../io/outstream.h"
#include "../io/record.h"
#include "../util/finite.h"
#include "../util/strbuf.h"

/* ---- state.json: writing ---------------------------------------------------- */

static bool is_sha256_hex(const char *s) {
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
    return s[64] == '\0';
}

/* True when text is exactly one JSON object, white space around it allowed. */
static bool is_json_object(const char *text) {
    size_t len = strlen(text), i = 0;
    while (i < len && json_is_space(text[i])) i++;
    if (i == len || text[i] != '{') return false;
    json_scan_error se;
    size_t end = json_scan_value(text, len, i, &se);
    if (!end) return false;
    while (end < len && json_is_space(text[end])) end++;
    return end == len;
}

static bool utf8_string(const char *s) { return s && st_utf8_valid((const unsigned char *)s, strlen(s), NULL); }

int state_write(const train_state *s, const char *path, gerr *e) {
    if (!s->flags_json || !is_json_object(s->flags_json))
        return gerr_set(e, EX_SOFTWARE, "%s: flags: not a JSON object", path);
    if (!is_sha256_hex(s->batch_sha256))
        return gerr_set(e, EX_SOFTWARE, "%s: batch_sha256: not 64 lower-case hex digits", path);
    if (!utf8_string(s->parent) || !utf8_string(s->version))
        return gerr_set(e, EX_SOFTWARE, "%s: parent or version missing or not UTF-8", path);
    if (s->paths_json && !is_json_object(s->paths_json))
        return gerr_set(e, EX_SOFTWARE, "%s: paths: not a JSON object", path);
    if (s->step < 0 || s->schedule_step < 0 || s->warmup_steps < 0 || s->total_steps < 0 || s->seed < 0 ||
        s->next_index < 0)
        return gerr_set(e, EX_SOFTWARE, "%s: negative step, schedule or rng count", path);
    const char *sched = sched_kind_name(s->schedule);
    if (!sched) return gerr_set(e, EX_SOFTWARE, "%s: unknown schedule %d", path, (int)s->schedule);

    strbuf b = {0};
    sb_printf(&b, "{\"step\":%lld,\"schedule\":{\"name\":\"%s\",\"step\":%lld,\"warmup_steps\":%lld,\"total_steps\":%lld},",
              s->step, sched, s->schedule_step, s->warmup_steps, s->total_steps);
    sb_printf(&b, "\"rng\":{\"seed\":%lld,\"next_index\":%lld},\"flags\":", s->seed, s->next_index);
    sb_puts(&b, s->flags_json);
    sb_printf(&b, ",\"batch_sha256\":\"%s\",\"parent\":", s->batch_sha256);
    sb_json_string(&b, s->parent, strlen(s->parent));
    if (s->paths_json) {
        sb_puts(&b, ",\"paths\":");
        sb_puts(&b, s->paths_json);
    }
    sb_puts(&b, ",\"version\":");
    sb_json_string(&b, s->version, strlen(s->version));
    sb_puts(&b, "}\n");
    int rc = write_file_atomic(path, b.data, b.len, e);
    sb_free(&b);
    return rc;
}

/* ---- state.json: reading ---------------------------------------------------- */

/* Where a field is, for messages: the file and the dotted field name. */
typedef struct {
    const char *path;
    const char *prefix; /* "schedule." or "" */
} where;

static int field_error(const where *w, const char *key, const char *expected, const char *got, gerr *e) {
    return gerr_set(e, EX_DATAERR, "%s: field \"%s%s\": expected %s, got %s", w->path, w->prefix, key, expected,
                    got);
}

/* The field `key` of kind `want`, or NULL with e set. */
static const rec_field *need(const record *r, const where *w, const char *key, json_kind want, const char *expected,
                             gerr *e) {
    const rec_field *f = record_find(r, key);
    if (!f) {
        field_error(w, key, expected, "nothing (field missing)", e);
        return NULL;
    }
    json_kind k = json_kind_of(f->val);
    if (k != want) {
        field_error(w, key, expected, json_kind_name(k), e);
        return NULL;
    }
    return f;
}

/* A non-negative integer written without sign, fraction or exponent. */
static int need_count(const record *r, const where *w, const char *key, long long *out, gerr *e) {
    const char *expected = "an integer >= 0";
    const rec_field *f = need(r, w, key, JSON_NUMBER, expected, e);
    if (!f) return e->code;
    char buf[24];
    bool digits = f->val_len < sizeof buf;
    for (size_t i = 0; digits && i < f->val_len; i++) digits = f->val[i] >= '0' && f->val[i] <= '9';
    if (!digits) {
        char got[64];
        snprintf(got, sizeof got, "%.*s", (int)(f->val_len > 40 ? 40 : f->val_len), f->val);
        return field_error(w, key, expected, got, e);
    }
    memcpy(buf, f->val, f->val_len);
    buf[f->val_len] = 0;
    errno = 0;
    long long v = strtoll(buf, NULL, 10);
    if (errno == ERANGE) return field_error(w, key, "an integer below 2^63", buf, e);
    *out = v;
    return 0;
}

static int need_string(const record *r, const where *w, const char *key, strbuf *out, gerr *e) {
    const rec_field *f = need(r, w, key, JSON_STRING, "a string", e);
    if (!f) return e->code;
    sb_clear(out);
    json_decode_string(f->val + 1, f->val_len - 2, out);
    sb_reserve(out, 0); /* "" still gets a buffer */
    return 0;
}

/* The raw text of a string value for messages, cut short. */
static void quoted(const rec_field *f, char *buf, size_t cap) {
    snprintf(buf, cap, "%.*s", (int)(f->val_len > 80 ? 80 : f->val_len), f->val);
}

static int read_schedule(const record *top, const char *path, train_state *s, gerr *e) {
    where w = {path, ""};
    const rec_field *f = need(top, &w, "schedule", JSON_OBJECT, "an object", e);
    if (!f) return e->code;
    record r;
    record_init(&r);
    strbuf name = {0};
    int rc = record_parse(&r, f->val, f->val_len, path, 0, e);
    w.prefix = "schedule.";
    if (!rc) rc = need_string(&r, &w, "name", &name, e);
    if (!rc) {
        gerr ignored;
        if (sched_kind_parse(name.data, &s->schedule, &ignored)) {
            char got[96];
            quoted(record_find(&r, "name"), got, sizeof got);
            rc = field_error(&w, "name", "constant, linear or cosine", got, e);
        }
    }
    if (!rc) rc = need_count(&r, &w, "step", &s->schedule_step, e);
    if (!rc) rc = need_count(&r, &w, "warmup_steps", &s->warmup_steps, e);
    if (!rc) rc = need_count(&r, &w, "total_steps", &s->total_steps, e);
    sb_free(&name);
    record_free(&r);
    return rc;
}

static int read_rng(const record *top, const char *path, train_state *s, gerr *e) {
    where w = {path, ""};
    const rec_field *f = need(top, &w, "rng", JSON_OBJECT, "an object", e);
    if (!f) return e->code;
    record r;
    record_init(&r);
    int rc = record_parse(&r, f->val, f->val_len, path, 0, e);
    w.prefix = "rng.";
    if (!rc) rc = need_count(&r, &w, "seed", &s->seed, e);
    if (!rc) rc = need_count(&r, &w, "next_index", &s->next_index, e);
    record_free(&r);
    return rc;
}

static int read_fields(const record *r, const char *path, train_state *s, gerr *e) {
    where w = {path, ""};
    int rc = need_count(r, &w, "step", &s->step, e);
    if (!rc) rc = read_schedule(r, path, s, e);
    if (!rc) rc = read_rng(r, path, s, e);
    if (rc) return rc;
    const rec_field *flags = need(r, &w, "flags", JSON_OBJECT, "an object", e);
    if (!flags) return e->code;
    s->flags_json = xstrndup(flags->val, flags->val_len);

    strbuf str = {0};
    rc = need_string(r, &w, "batch_sha256", &str, e);
    if (!rc && (str.len != 64 || !is_sha256_hex(str.data))) {
        char got[96];
        quoted(record_find(r, "batch_sha256"), got, sizeof got);
        rc = field_error(&w, "batch_sha256", "64 lower-case hex digits", got, e);
    }
    if (!rc) memcpy(s->batch_sha256, str.data, 65);
    if (!rc) rc = need_string(r, &w, "parent", &str, e);
    if (!rc) s->parent = xstrdup(str.data);
    const rec_field *paths = rc ? NULL : record_find(r, "paths");
    if (paths && json_kind_of(paths->val) != JSON_NULL) {
        if (json_kind_of(paths->val) != JSON_OBJECT)
            rc = field_error(&w, "paths", "an object", json_kind_name(json_kind_of(paths->val)), e);
        else
            s->paths_json = xstrndup(paths->val, paths->val_len);
    }
    if (!rc) rc = need_string(r, &w, "version", &str, e);
    if (!rc) s->version = xstrdup(str.data);
    sb_free(&str);
    return rc;
}

int state_read(train_state *s, const char *path, gerr *e) {
    memset(s, 0, sizeof *s);
    size_t len;
    char *text = read_regular_file(path, &len, e);
    if (!text) return e->code;
    /* the record parser wants the object alone on its line: trim around it */
    size_t begin = 0, end = len;
    while (begin < end && json_is_space(text[begin])) begin++;
    while (end > begin && json_is_space(text[end - 1])) end--;
    record r;
    record_init(&r);
    int rc = record_parse(&r, text + begin, end - begin, path, 0, e);
    if (!rc) rc = read_fields(&r, path, s, e);
    record_free(&r);
    free(text);
    if (rc) state_free(s);
    return rc;
}

void state_free(train_state *s) {
    free(s->flags_json);
    free(s->parent);
    free(s->paths_json);
    free(s->version);
    memset(s, 0, sizeof *s);
}

/* ---- optimizer.safetensors ---------------------------------------------------- */

static const char *const moment_prefix[2] = {"exp_avg.", "exp_avg_sq."};

static void moment_name(strbuf *b, int which, const char *param) {
    sb_clear(b);
    sb_puts(b, moment_prefix[which]);
    sb_puts(b, param);
}

int optim_state_write(const char *path, optim_kind kind, const optim_tensor *t, size_t n, gerr *e) {
    const char *kind_name = optim_kind_name(kind);
    if (!kind_name) return gerr_set(e, EX_SOFTWARE, "%s: unknown optimizer %d", path, (int)kind);
    st_writer w;
    st_writer_init(&w);
    strbuf name = {0};
    int rc = st_writer_set_meta(&w, "format", "grpo", e);
    if (!rc) rc = st_writer_set_meta(&w, "optimizer", kind_name, e);
    for (size_t i = 0; !rc && kind == OPTIM_ADAMW && i < n; i++) {
        if (t[i].partial) rc = gerr_set(e, EX_SOFTWARE, "tensor \"%s\": only a slice is here, the file holds whole ones", t[i].name);
        for (int which = 0; !rc && which < 2; which++) {
            moment_name(&name, which, t[i].name);
            rc = st_writer_add(&w, name.data, ST_F32, t[i].ndim, t[i].shape, which ? t[i].v : t[i].m, e);
        }
    }
    if (rc) {
        char msg[sizeof e->msg];
        memcpy(msg, e->msg, sizeof msg);
        gerr_set(e, rc, "%s: %s", path, msg);
    } else {
        rc = st_write(&w, path, e);
    }
    sb_free(&name);
    st_writer_free(&w);
    return rc;
}

static void shape_text(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t used = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%lld", i ? "," : "", (long long)shape[i]);
    if (used < cap) snprintf(buf + used, cap - used, "]");
}

/* Checks one moment tensor against its parameter and copies it out. */
static int load_moment(const st_file *f, const char *path, const char *name, const optim_tensor *p, float *out,
                       gerr *e) {
    const st_tensor *t = st_find(f, name);
    if (!t)
        return gerr_set(e, EX_DATAERR, "%s: tensor \"%s\" missing: was the checkpoint trained on other parameters?",
                        path, name);
    if (t->dtype != ST_F32)
        return gerr_set(e, EX_DATAERR, "%s: tensor \"%s\": expected dtype F32, got %s", path, name,
                        st_dtype_name(t->dtype));
    bool same = t->ndim == p->ndim;
    for (int d = 0; same && d < t->ndim; d++) same = t->shape[d] == p->shape[d];
    if (!same) {
        char want[160], got[160];
        shape_text(want, sizeof want, p->ndim, p->shape);
        shape_text(got, sizeof got, t->ndim, t->shape);
        return gerr_set(e, EX_DATAERR, "%s: tensor \"%s\": expected shape %s, got %s", path, name, want, got);
    }
    if (!p->partial) return st_tensor_to_f32(f, t, out, e);
    /* F32 is checked above: the slice is copied straight out of the mapping */
    if (p->first < 0 || p->count < 0 || p->first + p->count > t->numel)
        return gerr_set(e, EX_SOFTWARE, "%s: tensor \"%s\": slice %lld+%lld outside its %lld elements", path, name,
                        (long long)p->first, (long long)p->count, (long long)t->numel);
    if (p->count) memcpy(out, (const char *)t->data + sizeof(float) * (size_t)p->first, sizeof(float) * (size_t)p->count);
    return 0;
}

/* One moment's values: finite, and a second moment (exp_avg_sq) >= 0;
 * index is the element's place in the whole tensor. */
static int check_moment(const float *x, size_t n, size_t first, bool squares, const char *where, const char *name,
                        const char *why, gerr *e) {
    size_t i = f32_first_nonfinite(x, n);
    if (i < n)
        return gerr_set(e, EX_DATAERR, "%s: tensor \"%s\": value %zu is %s (non-finite optimizer state: %s)", where,
                        name, first + i, isnan(x[i]) ? "NaN" : x[i] > 0 ? "+inf" : "-inf", why);
    for (i = 0; squares && i < n; i++)
        if (x[i] < 0)
            return gerr_set(e, EX_DATAERR, "%s: tensor \"%s\": value %zu is %g (a second moment is never negative: %s)",
                            where, name, first + i, x[i], why);
    return 0;
}

int optim_state_check(const optim_tensor *t, size_t n, const char *where, const char *why, gerr *e) {
    strbuf name = {0};
    int rc = 0;
    for (size_t i = 0; !rc && i < n; i++) {
        size_t numel = 1;
        for (int d = 0; d < t[i].ndim; d++) numel *= (size_t)t[i].shape[d];
        size_t first = t[i].partial ? (size_t)t[i].first : 0, count = t[i].partial ? (size_t)t[i].count : numel;
        for (int which = 0; !rc && which < 2; which++) {
            const float *x = which ? t[i].v : t[i].m;
            if (!x || !count) continue;
            moment_name(&name, which, t[i].name);
            rc = check_moment(x, count, first, which == 1, where, name.data, why, e);
        }
    }
    sb_free(&name);
    return rc;
}

/* The first tensor of f that is no moment of a listed parameter, or NULL. */
static const char *unexpected_tensor(const st_file *f, optim_kind kind, const optim_tensor *t, size_t n) {
    for (size_t i = 0; i < f->n_tensors; i++) {
        const char *name = f->tensors[i].name;
        bool known = false;
        for (int which = 0; kind == OPTIM_ADAMW && !known && which < 2; which++) {
            size_t plen = strlen(moment_prefix[which]);
            if (strncmp(name, moment_prefix[which], plen)) continue;
            for (size_t j = 0; !known && j < n; j++) known = !strcmp(name + plen, t[j].name);
        }
        if (!known) return name;
    }
    return NULL;
}

static int check_meta(const st_file *f, const char *path, optim_kind kind, gerr *e) {
    const char *format = st_meta_get(f, "format");
    if (!format || strcmp(format, "grpo"))
        return gerr_set(e, EX_DATAERR, "%s: metadata \"format\": expected \"grpo\", got %s%.80s%s", path,
                        format ? "\"" : "", format ? format : "nothing", format ? "\"" : "");
    const char *opt = st_meta_get(f, "optimizer");
    optim_kind got;
    gerr ignored;
    if (!opt || optim_kind_parse(opt, &got, &ignored))
        return gerr_set(e, EX_DATAERR, "%s: metadata \"optimizer\": expected adamw or sgd, got %s%.80s%s", path,
                        opt ? "\"" : "", opt ? opt : "nothing", opt ? "\"" : "");
    if (got != kind)
        return gerr_set(e, EX_DATAERR,
                        "%s: optimizer state is for --optimizer %s, this run has --optimizer %s: moments of "
                        "one optimizer do not resume another",
                        path, opt, optim_kind_name(kind));
    return 0;
}

int optim_state_read(const char *path, optim_kind kind, optim_tensor *t, size_t n, gerr *e) {
    if (!optim_kind_name(kind)) return gerr_set(e, EX_SOFTWARE, "%s: unknown optimizer %d", path, (int)kind);
    st_file f;
    int rc = st_open(&f, path, e);
    if (rc == EX_NOINPUT) {
        char msg[sizeof e->msg];
        memcpy(msg, e->msg, sizeof msg);
        return gerr_set(e, rc, "%.900s (a checkpoint with grpo/state.json resumes its optimizer state from this file)",
                        msg);
    }
    if (rc) return rc;
    rc = check_meta(&f, path, kind, e);
    strbuf name = {0};
    for (size_t i = 0; !rc && kind == OPTIM_ADAMW && i < n; i++) {
        for (int which = 0; !rc && which < 2; which++) {
            moment_name(&name, which, t[i].name);
            rc = load_moment(&f, path, name.data, &t[i], which ? t[i].v : t[i].m, e);
        }
    }
    size_t want = kind == OPTIM_ADAMW ? 2 * n : 0;
    if (!rc && f.n_tensors != want) { /* every expected one is there: the rest are extra */
        const char *extra = unexpected_tensor(&f, kind, t, n);
        if (extra)
            rc = gerr_set(e, EX_DATAERR, "%s: tensor \"%.200s\" belongs to no trained parameter of this run", path,
                          extra);
    }
    if (!rc && kind == OPTIM_ADAMW) rc = optim_state_check(t, n, path, "the checkpoint is broken", e);
    sb_free(&name);
    st_close(&f);
    return rc;
}
