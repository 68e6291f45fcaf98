#include "item.h"

#include <stdio.h>
#include <string.h>

void prep_item_init(prep_item *it) { memset(it, 0, sizeof *it); }

void prep_item_clear(prep_item *it) {
    sb_clear(&it->id);
    sb_clear(&it->task);
    sb_clear(&it->messages);
    sb_clear(&it->answer);
    it->has_answer = false;
    it->answer_reserved = false;
    for (int i = 0; i < it->n_extras; i++) sb_clear(&it->extra_raw[i]);
    it->n_extras = 0;
    it->n_consumed = 0;
    it->overflow = NULL;
    sb_clear(&it->spill);
}

void prep_item_free(prep_item *it) {
    sb_free(&it->id);
    sb_free(&it->task);
    sb_free(&it->messages);
    sb_free(&it->answer);
    for (int i = 0; i < ITEM_MAX_EXTRAS; i++) sb_free(&it->extra_raw[i]);
    sb_free(&it->spill);
    memset(it, 0, sizeof *it);
}

strbuf *prep_item_extra(prep_item *it, const char *key) {
    if (it->n_extras == ITEM_MAX_EXTRAS) {
        it->overflow = "too many extra fields in a prompt record";
        sb_clear(&it->spill);
        return &it->spill;
    }
    it->extra_key[it->n_extras] = key;
    sb_clear(&it->extra_raw[it->n_extras]);
    return &it->extra_raw[it->n_extras++];
}

void prep_item_consume(prep_item *it, const char *name) {
    if (it->n_consumed == ITEM_MAX_CONSUMED) {
        it->overflow = "too many consumed fields in a prompt record";
        return;
    }
    it->consumed[it->n_consumed++] = name;
}

bool prep_field_named(const rec_field *f, const char *name) {
    size_t n = strlen(name);
    if (!f->key_escaped) return f->key_len == n && !memcmp(f->key, name, n);
    strbuf dec = {0};
    json_decode_string(f->key, f->key_len, &dec);
    bool eq = dec.len == n && !memcmp(dec.data, name, n);
    sb_free(&dec);
    return eq;
}

/* Whether prep writes a field of this name in this record. */
static bool written(const prep_item *it, const char *name) {
    if (!strcmp(name, "id") || !strcmp(name, "task") || !strcmp(name, "messages")) return true;
    if (!strcmp(name, "answer")) return it->has_answer || it->answer_reserved;
    for (int i = 0; i < it->n_extras; i++)
        if (!strcmp(name, it->extra_key[i])) return true;
    return false;
}

/* The name of prep's written field that f collides with, or NULL. */
static const char *collision(const prep_item *it, const rec_field *f) {
    static const char *const OWN[] = {"id", "task", "messages", "answer", "tests", "numbers", "target", "expression"};
    for (size_t i = 0; i < sizeof OWN / sizeof *OWN; i++)
        if (written(it, OWN[i]) && prep_field_named(f, OWN[i])) return OWN[i];
    return NULL;
}

static bool consumed(const prep_item *it, const rec_field *f) {
    for (int i = 0; i < it->n_consumed; i++)
        if (prep_field_named(f, it->consumed[i])) return true;
    return false;
}

int prep_item_to_record(const prep_item *it, const record *in, record *out, gerr *e) {
    if (it->overflow) return gerr_set(e, EX_SOFTWARE, "%s", it->overflow);
    record_reset(out, in ? in->file : NULL, in ? in->line : 0);
    strbuf raw = {0};
    sb_json_string(&raw, it->id.data ? it->id.data : "", it->id.len);
    record_set_raw(out, "id", raw.data, raw.len);
    sb_clear(&raw);
    sb_json_string(&raw, it->task.data ? it->task.data : "", it->task.len);
    record_set_raw(out, "task", raw.data, raw.len);
    record_set_raw(out, "messages", it->messages.data, it->messages.len);
    if (it->has_answer) {
        sb_clear(&raw);
        sb_json_string(&raw, it->answer.data ? it->answer.data : "", it->answer.len);
        record_set_raw(out, "answer", raw.data, raw.len);
    }
    sb_free(&raw);
    for (int i = 0; i < it->n_extras; i++)
        record_set_raw(out, it->extra_key[i], it->extra_raw[i].data, it->extra_raw[i].len);
    if (!in) return 0;
    for (size_t i = 0; i < in->n; i++) {
        const rec_field *f = &in->fields[i];
        if (consumed(it, f)) continue;
        const char *name = collision(it, f);
        if (!name) {
            record_append_field(out, f);
            continue;
        }
        /* prep's field would overwrite this one: keep it under a new name */
        char renamed[64];
        if (!strcmp(name, "answer") && !record_has(in, "solution"))
            snprintf(renamed, sizeof renamed, "solution");
        else
            snprintf(renamed, sizeof renamed, "source_%s", name);
        if (record_has(in, renamed) || written(it, renamed))
            return gerr_at(e, EX_DATAERR, in->file, in->line,
                           "field \"%s\": prep writes its own \"%s\" and cannot keep the input's under \"%s\", "
                           "which the record uses too",
                           name, name, renamed);
        rec_field moved = *f;
        moved.key = renamed;
        moved.key_len = strlen(renamed);
        moved.key_escaped = false;
        record_append_field(out, &moved);
    }
    return 0;
}
