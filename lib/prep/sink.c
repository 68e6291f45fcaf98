#include "sink.h"

#include <stdlib.h>
#include <string.h>

#include "../util/idhash.h"
#include "../util/rng.h"

int prep_sink_open(prep_sink *s, const prep_opts *o, gerr *e) {
    memset(s, 0, sizeof *s);
    s->o = o;
    int rc = jsonl_writer_open(&s->w, o->out, e);
    if (rc) return rc;
    s->open = true;
    progress_start(&s->pg, "grpo-prep", "records", prep_task_is_generated(o->task) ? o->n : 0, o->progress);
    return 0;
}

bool prep_sink_selects(const prep_sink *s, const char *id, size_t len) {
    const prep_opts *o = s->o;
    if (o->split) {
        bool test = idhash_fraction(id, len) < o->test_fraction;
        if (test != !strcmp(o->split, "test")) return false;
    }
    return shard_contains(&o->shard, id, len);
}

uint64_t prep_sink_shuffle_key(uint64_t seed, const char *id, size_t len) {
    rng_stream r;
    rng_init(&r, seed, id, len, 0);
    return rng_u64(&r);
}

/* Generators stop at --n in any case; dataset tasks read everything when
 * shuffling, since any record may come first. */
static bool buffers_all(const prep_sink *s) { return s->o->shuffle && !prep_task_is_generated(s->o->task); }

bool prep_sink_full(const prep_sink *s) { return s->o->n > 0 && s->taken >= s->o->n && !buffers_all(s); }

int prep_sink_put(prep_sink *s, const record *rec, const char *id, size_t len, gerr *e) {
    s->taken++;
    progress_update(&s->pg, s->taken);
    if (!s->o->shuffle) return jsonl_write(&s->w, rec, e);
    if (s->n_buf == s->cap_buf) {
        s->cap_buf = s->cap_buf ? 2 * s->cap_buf : 1024;
        s->buf = xrealloc(s->buf, s->cap_buf * sizeof *s->buf);
    }
    strbuf line = {0};
    record_serialize(rec, &line);
    prep_sink_entry *en = &s->buf[s->n_buf++];
    en->key = prep_sink_shuffle_key((uint64_t)s->o->seed, id, len);
    en->id = xstrndup(id, len);
    en->line = line.data;
    en->len = line.len;
    return 0;
}

static int by_key(const void *pa, const void *pb) {
    const prep_sink_entry *a = pa, *b = pb;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    return strcmp(a->id, b->id); /* ids are unique: the order is total */
}

static void free_buffer(prep_sink *s) {
    for (size_t i = 0; i < s->n_buf; i++) {
        free(s->buf[i].id);
        free(s->buf[i].line);
    }
    free(s->buf);
    s->buf = NULL;
    s->n_buf = s->cap_buf = 0;
}

int prep_sink_commit(prep_sink *s, gerr *e) {
    int rc = 0;
    if (s->o->shuffle) {
        if (s->n_buf) qsort(s->buf, s->n_buf, sizeof *s->buf, by_key);
        size_t keep = s->o->n > 0 && (size_t)s->o->n < s->n_buf ? (size_t)s->o->n : s->n_buf;
        for (size_t i = 0; i < keep && !rc; i++) rc = jsonl_write_line(&s->w, s->buf[i].line, s->buf[i].len, e);
        free_buffer(s);
    }
    progress_finish(&s->pg);
    if (rc) {
        prep_sink_abort(s);
        return rc;
    }
    s->open = false;
    return jsonl_writer_commit(&s->w, e);
}

void prep_sink_abort(prep_sink *s) {
    free_buffer(s);
    if (s->open) jsonl_writer_abort(&s->w);
    s->open = false;
}
