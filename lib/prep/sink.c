#include "sink.h"

#include <stdlib.h>
#include <string.h>

#include "../util/idhash.h"
#include "../util/rng.h"

/* Loads the tokenizer and picks the chat template: the model's own
 * (recognised by its text) or the family --chat-template names. */
static int load_model_text(prep_sink *s, const prep_opts *o, gerr *e) {
    int rc = model_text_load(o->model, &s->mt, e);
    if (rc) return rc;
    s->tokenize = true;
    chat_choice c = {.family = o->chat_template, .reasoning = o->reasoning_effort, .date = o->chat_date};
    return model_text_template(&s->mt, &c, &s->tmpl, e);
}

static void free_model_text(prep_sink *s) {
    if (!s->tokenize) return;
    chat_template_free(&s->tmpl);
    model_text_free(&s->mt);
    sb_free(&s->text);
    s->tokenize = false;
}

/* prompt_tokens: the rendered conversation, ready for the assistant's turn
 * (raw: the text alone), encoded with special tokens matched in the text. */
static int add_prompt_tokens(prep_sink *s, record *rec, gerr *e) {
    int32_t *ids;
    size_t n;
    int rc = model_text_prompt_tokens(&s->mt, &s->tmpl, rec, &ids, &n, e);
    if (rc) return rc;
    sb_clear(&s->text);
    sb_json_int_array(&s->text, ids, n);
    record_set_raw_after(rec, "messages", "prompt_tokens", s->text.data, s->text.len);
    free(ids);
    return 0;
}

int prep_sink_open(prep_sink *s, const prep_opts *o, gerr *e) {
    memset(s, 0, sizeof *s);
    s->o = o;
    if (o->model) {
        int rc = load_model_text(s, o, e);
        if (rc) {
            free_model_text(s);
            return rc;
        }
    }
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

int prep_sink_put(prep_sink *s, record *rec, const char *id, size_t len, gerr *e) {
    if (s->tokenize) {
        int rc = add_prompt_tokens(s, rec, e);
        if (rc) return rc;
    }
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
    if (!rc) progress_note_empty(&s->pg, (long long)s->taken, "records");
    if (rc) {
        prep_sink_abort(s);
        return rc;
    }
    s->open = false;
    free_model_text(s);
    return jsonl_writer_commit(&s->w, e);
}

void prep_sink_abort(prep_sink *s) {
    free_buffer(s);
    free_model_text(s);
    if (s->open) jsonl_writer_abort(&s->w);
    s->open = false;
}
