/* The grpo-reward stream: read rollout records a chunk at a time, let each
 * function score the chunk, write `rewards` and `reward` into every record
 * with all other fields untouched. */
#include "stage.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../io/jsonl.h"
#include "../util/clock.h"
#include "../util/progress.h"
#include "../util/stats.h"

void reward_stage_opts_default(reward_stage_opts *o) {
    memset(o, 0, sizeof *o);
    o->shard.index = 0;
    o->shard.count = 1;
    o->chunk = 512;
}

/* ---- named values (cmd's several rewards per record) ----------------------- */

void reward_entries_add(reward_entries *r, const char *name, size_t name_len, double value) {
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 4;
        r->v = xrealloc(r->v, cap * sizeof *r->v);
        for (size_t i = r->cap; i < cap; i++) r->v[i].name = NULL;
        r->cap = cap;
    }
    reward_entry *en = &r->v[r->n++];
    free(en->name);
    en->name = xstrndup(name, name_len);
    en->value = value;
}

void reward_entries_clear(reward_entries *r) { r->n = 0; }

void reward_entries_free(reward_entries *r) {
    for (size_t i = 0; i < r->cap; i++) free(r->v[i].name);
    free(r->v);
    memset(r, 0, sizeof *r);
}

/* ---- statistics by reward name -------------------------------------------- */

typedef struct {
    welford w;
    long long nulls;
    double min, max;
} moments;

static void moments_add(moments *m, double x) {
    if (reward_is_null(x)) {
        m->nulls++;
        return;
    }
    welford_push(&m->w, x);
    if (m->w.n == 1 || x < m->min) m->min = x;
    if (m->w.n == 1 || x > m->max) m->max = x;
}

static void moments_json(const moments *m, cJSON *obj) {
    if (m->w.n) {
        cJSON_AddNumberToObject(obj, "mean", welford_mean(&m->w));
        if (m->w.n > 1) cJSON_AddNumberToObject(obj, "std", welford_std(&m->w));
        else cJSON_AddNullToObject(obj, "std");
        cJSON_AddNumberToObject(obj, "min", m->min);
        cJSON_AddNumberToObject(obj, "max", m->max);
    } else {
        cJSON_AddNullToObject(obj, "mean");
        cJSON_AddNullToObject(obj, "std");
        cJSON_AddNullToObject(obj, "min");
        cJSON_AddNullToObject(obj, "max");
    }
    cJSON_AddNumberToObject(obj, "count", (double)m->w.n);
    cJSON_AddNumberToObject(obj, "null", (double)m->nulls);
}

typedef struct {
    char *name;
    double weight;
    moments m;
} named_stat;

typedef struct {
    long long records;
    moments reward;
    named_stat *v;
    size_t n, cap;
} stage_stats;

static void stats_add(stage_stats *s, const char *name, double weight, double value) {
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->v[i].name, name)) {
            moments_add(&s->v[i].m, value);
            return;
        }
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 8;
        s->v = xrealloc(s->v, s->cap * sizeof *s->v);
    }
    named_stat *st = &s->v[s->n++];
    memset(st, 0, sizeof *st);
    st->name = xstrdup(name);
    st->weight = weight;
    moments_add(&st->m, value);
}

static void stats_free(stage_stats *s) {
    for (size_t i = 0; i < s->n; i++) free(s->v[i].name);
    free(s->v);
}

/* NULL when out of memory. */
static cJSON *stats_json(const stage_stats *s, reward_fn *fns, size_t n_fns, double seconds) {
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    cJSON_AddNumberToObject(root, "records", (double)s->records);
    cJSON_AddNumberToObject(root, "seconds", seconds);
    cJSON *reward = cJSON_AddObjectToObject(root, "reward");
    moments_json(&s->reward, reward);
    cJSON *rewards = cJSON_AddObjectToObject(root, "rewards");
    for (size_t i = 0; i < s->n; i++) {
        cJSON *o = cJSON_AddObjectToObject(rewards, s->v[i].name);
        cJSON_AddNumberToObject(o, "weight", s->v[i].weight);
        moments_json(&s->v[i].m, o);
    }
    for (size_t i = 0; i < n_fns; i++)
        if (fns[i].stats) fns[i].stats(fns[i].self, root);
    return root;
}

/* One line per function counter object ("judge": {...}) on stderr. */
static void print_summary(const cJSON *root) {
    const cJSON *c;
    cJSON_ArrayForEach(c, root) {
        if (!cJSON_IsObject(c) || !strcmp(c->string, "reward") || !strcmp(c->string, "rewards")) continue;
        strbuf line = {0};
        const cJSON *f;
        cJSON_ArrayForEach(f, c) {
            if (!cJSON_IsNumber(f)) continue;
            sb_printf(&line, "%s%s %.15g", line.len ? ", " : "", f->string, f->valuedouble);
        }
        if (line.len) fprintf(stderr, "%s: %s: %s\n", tool_name(), c->string, line.data);
        sb_free(&line);
    }
}

/* ---- one chunk ------------------------------------------------------------ */

typedef struct {
    record rec;
    strbuf completion;
    strbuf id;
    reward_entries entries; /* every function's values, in --fn order */
    const reward_fn **from; /* from[j]: the function that gave entries.v[j] */
    size_t from_cap;
} slot;

typedef struct {
    slot *s;
    reward_item *items;
    double *values;
    reward_entries *named;
    size_t n, cap;  /* records in the chunk; records scored together */
    bool carried;   /* s[cap] holds the next chunk's first record */
    bool eof;
} chunk;

static void chunk_init(chunk *c, size_t cap) {
    memset(c, 0, sizeof *c);
    c->cap = cap;
    c->s = xcalloc(cap + 1, sizeof *c->s);
    for (size_t i = 0; i <= cap; i++) record_init(&c->s[i].rec);
    c->items = xcalloc(cap, sizeof *c->items);
    c->values = xcalloc(cap, sizeof *c->values);
    c->named = xcalloc(cap, sizeof *c->named);
}

static void chunk_free(chunk *c) {
    for (size_t i = 0; i <= c->cap; i++) {
        record_free(&c->s[i].rec);
        sb_free(&c->s[i].completion);
        sb_free(&c->s[i].id);
        reward_entries_free(&c->s[i].entries);
        free(c->s[i].from);
        if (i < c->cap) reward_entries_free(&c->named[i]);
    }
    free(c->s);
    free(c->items);
    free(c->values);
    free(c->named);
}

/* The elements of a token-id array, counted from its raw text (which passed
 * the JSON scanner): each must be a non-negative integer written as digits.
 * Returns -1 with *bad set to the first element that is not one. */
static long long count_token_ids(const char *raw, size_t len, long long *bad) {
    long long n = 0;
    size_t i = 1; /* past '[' */
    while (i < len && json_is_space(raw[i])) i++;
    if (i < len && raw[i] == ']') return 0;
    for (;;) {
        while (i < len && json_is_space(raw[i])) i++;
        size_t digits = 0;
        while (i < len && raw[i] >= '0' && raw[i] <= '9') i++, digits++;
        while (i < len && json_is_space(raw[i])) i++;
        if (digits == 0 || i >= len || (raw[i] != ',' && raw[i] != ']')) {
            *bad = n;
            return -1;
        }
        n++;
        if (raw[i++] == ']') return n;
    }
}

/* Decodes what every function reads into the slot's item. */
static int prepare_item(slot *sl, reward_item *it, gerr *e) {
    const record *r = &sl->rec;
    int present;
    sb_clear(&sl->completion);
    if (record_get_string(r, "completion", false, &sl->completion, &present, e)) return -1;
    sb_reserve(&sl->completion, 0); /* "" rather than NULL when absent */
    it->rec = r;
    it->completion = sl->completion.data;
    it->completion_len = sl->completion.len;
    it->has_completion = present == 2;
    it->n_tokens = -1;
    const rec_field *f = record_find(r, "completion_tokens");
    if (f && json_kind_of(f->val) == JSON_ARRAY) {
        long long bad = 0;
        it->n_tokens = count_token_ids(f->val, f->val_len, &bad);
        if (it->n_tokens < 0) {
            gerr_at(e, EX_DATAERR, r->file, r->line,
                    "field \"completion_tokens\": element %lld: expected a token id (an integer >= 0)", bad);
            return -1;
        }
    } else if (f && json_kind_of(f->val) != JSON_NULL) {
        record_field_error(r, "completion_tokens", "an array of token ids", e);
        return -1;
    }
    return 0;
}

static void slot_add(slot *sl, const reward_fn *fn, const char *name, double value) {
    reward_entries_add(&sl->entries, name, strlen(name), value);
    if (sl->from_cap < sl->entries.n) {
        sl->from_cap = sl->entries.cap;
        sl->from = xrealloc(sl->from, sl->from_cap * sizeof *sl->from);
    }
    sl->from[sl->entries.n - 1] = fn;
}

static int score_chunk(chunk *c, reward_fn *fns, size_t n_fns, gerr *e) {
    for (size_t i = 0; i < c->n; i++) reward_entries_clear(&c->s[i].entries);
    for (size_t k = 0; k < n_fns; k++) {
        reward_fn *fn = &fns[k];
        if (fn->score_named) {
            for (size_t i = 0; i < c->n; i++) reward_entries_clear(&c->named[i]);
            if (fn->score_named(fn->self, c->items, c->n, c->named, e)) return -1;
            for (size_t i = 0; i < c->n; i++)
                for (size_t j = 0; j < c->named[i].n; j++)
                    slot_add(&c->s[i], fn, c->named[i].v[j].name, c->named[i].v[j].value);
        } else {
            for (size_t i = 0; i < c->n; i++) c->values[i] = REWARD_NULL;
            if (fn->score(fn->self, c->items, c->n, c->values, e)) return -1;
            for (size_t i = 0; i < c->n; i++)
                slot_add(&c->s[i], fn, fn->name, c->values[i]);
        }
    }
    return 0;
}

static int emit_chunk(chunk *c, stage_stats *st, jsonl_writer *w, gerr *e) {
    strbuf raw = {0};
    int rc = -1;
    for (size_t i = 0; i < c->n; i++) {
        slot *sl = &c->s[i];
        record *r = &sl->rec;
        sb_clear(&raw);
        sb_putc(&raw, '{');
        double sum = 0;
        bool any = false;
        for (size_t j = 0; j < sl->entries.n; j++) {
            const reward_entry *en = &sl->entries.v[j];
            const reward_fn *fn = sl->from[j];
            for (size_t p = 0; p < j; p++)
                if (!strcmp(sl->entries.v[p].name, en->name)) {
                    gerr_at(e, EX_DATAERR, r->file, r->line,
                            "reward name \"%s\" is given twice (by --fn %s and --fn %s)", en->name,
                            sl->from[p]->name, fn->name);
                    goto out;
                }
            if (j) sb_putc(&raw, ',');
            sb_json_string(&raw, en->name, strlen(en->name));
            sb_putc(&raw, ':');
            if (reward_is_null(en->value)) {
                sb_puts(&raw, "null");
            } else {
                if (!isfinite(en->value)) {
                    gerr_at(e, EX_DATAERR, r->file, r->line, "reward \"%s\" is not a finite number", en->name);
                    goto out;
                }
                sb_json_number(&raw, en->value);
                sum += fn->weight * en->value;
                any = true;
            }
            stats_add(st, en->name, fn->weight, en->value);
        }
        sb_putc(&raw, '}');
        if (any && !isfinite(sum)) {
            gerr_at(e, EX_DATAERR, r->file, r->line, "the weighted sum of the rewards is not finite");
            goto out;
        }
        record_set_raw(r, "rewards", raw.data, raw.len);
        sb_clear(&raw);
        if (any) sb_json_number(&raw, sum);
        else sb_puts(&raw, "null");
        record_set_raw_after(r, "rewards", "reward", raw.data, raw.len);
        moments_add(&st->reward, any ? sum : REWARD_NULL);
        st->records++;
        if (jsonl_write(w, r, e)) goto out;
    }
    rc = 0;
out:
    sb_free(&raw);
    return rc;
}

/* ---- the stage ------------------------------------------------------------ */

/* Reads the next record of the shard into sl: 1 = read, 0 = end of input. */
static int read_one(jsonl_reader *rd, slot *sl, const reward_stage_opts *o, progress *pg, long long *read,
                    gerr *e) {
    for (;;) {
        int got = jsonl_next(rd, &sl->rec, e);
        if (got <= 0) return got;
        progress_update(pg, ++*read);
        /* every record names its prompt group, as every stage requires */
        sb_clear(&sl->id);
        if (record_get_string(&sl->rec, "id", true, &sl->id, NULL, e)) return -1;
        if (o->shard.count <= 1) return 1;
        if (shard_contains(&o->shard, sl->id.data ? sl->id.data : "", sl->id.len)) return 1;
    }
}

/* 1 = the chunk holds records, 0 = end of input, -1 = error. One record is
 * read ahead (into the spare slot c->s[cap]), so the chunk knows whether
 * input follows it: its last item says so (a program fed by cmd gets end of
 * input with the last record, and buffered output still arrives). */
static int read_chunk(jsonl_reader *rd, chunk *c, const reward_stage_opts *o, progress *pg, long long *read,
                      gerr *e) {
    c->n = 0;
    if (c->carried) {
        slot t = c->s[0];
        c->s[0] = c->s[c->cap];
        c->s[c->cap] = t;
        c->carried = false;
        c->n = 1;
    } else if (!c->eof) {
        int got = read_one(rd, &c->s[0], o, pg, read, e);
        if (got < 0) return -1;
        if (got == 0) c->eof = true;
        else c->n = 1;
    }
    while (!c->eof && c->n <= c->cap) {
        int got = read_one(rd, &c->s[c->n], o, pg, read, e);
        if (got < 0) return -1;
        if (got == 0) c->eof = true;
        else c->n++;
    }
    if (c->n > c->cap) { /* the look-ahead record starts the next chunk */
        c->n = c->cap;
        c->carried = true;
    }
    for (size_t i = 0; i < c->n; i++) {
        if (prepare_item(&c->s[i], &c->items[i], e)) return -1;
        c->items[i].last_of_input = c->eof && i + 1 == c->n;
    }
    return c->n > 0;
}

int reward_stage_run(const reward_stage_opts *o, reward_fn *fns, size_t n_fns, gerr *e) {
    jsonl_reader rd;
    jsonl_writer w;
    outstream stats_out;
    bool rd_open = false, w_open = false, stats_open = false;
    chunk c;
    chunk_init(&c, o->chunk ? o->chunk : 512);
    stage_stats st;
    memset(&st, 0, sizeof st);
    progress pg;
    double started = now_seconds();
    long long read = 0;
    int rc = -1, got;
    cJSON *summary = NULL;

    if (jsonl_open(&rd, o->in, e)) goto out;
    rd_open = true;
    /* Outputs are opened before any work, so a bad path fails at once. */
    if (jsonl_writer_open(&w, o->out, e)) goto out;
    w_open = true;
    if (o->stats) {
        if (outstream_open(&stats_out, o->stats, 0, e)) goto out;
        stats_open = true;
    }
    progress_start(&pg, "grpo-reward", "records", 0, o->progress);
    while ((got = read_chunk(&rd, &c, o, &pg, &read, e)) == 1)
        if (score_chunk(&c, fns, n_fns, e) || emit_chunk(&c, &st, &w, e)) goto out;
    if (got < 0) goto out;
    for (size_t k = 0; k < n_fns; k++)
        if (fns[k].finish && fns[k].finish(fns[k].self, e)) goto out;
    progress_finish(&pg);

    summary = stats_json(&st, fns, n_fns, now_seconds() - started);
    if (!summary) {
        gerr_set(e, EX_SOFTWARE, "out of memory");
        goto out;
    }
    w_open = false;
    if (jsonl_writer_commit(&w, e)) goto out;
    if (stats_open) {
        char *text = cJSON_PrintUnformatted(summary);
        if (!text) {
            gerr_set(e, EX_SOFTWARE, "out of memory");
            goto out;
        }
        int wrc = outstream_write(&stats_out, text, strlen(text), e);
        if (!wrc) wrc = outstream_write(&stats_out, "\n", 1, e);
        cJSON_free(text);
        if (wrc) goto out;
        stats_open = false;
        if (outstream_commit(&stats_out, e)) goto out;
    }
    if (!o->quiet) print_summary(summary);
    progress_note_empty(&pg, (long long)read, "records");
    rc = 0;
out:
    cJSON_Delete(summary);
    if (w_open) jsonl_writer_abort(&w);
    if (stats_open) outstream_abort(&stats_out);
    if (rd_open) jsonl_close(&rd);
    chunk_free(&c);
    stats_free(&st);
    return rc ? (e->code ? e->code : EX_SOFTWARE) : 0;
}
