/* One JSONL record: its text cut into top-level (key, raw value) fields.
 *
 * Fields a stage does not own are written back exactly as read (same bytes,
 * same order); fields it sets replace the old value in place or are appended.
 * Readers that fail say FILE:LINE: field "NAME": expected X, got Y. */
#ifndef GRPO_RECORD_H
#define GRPO_RECORD_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"
#include "../util/strbuf.h"
#include "json_scan.h"

typedef struct {
    const char *key; /* key text between the quotes, escapes not decoded */
    size_t key_len;
    const char *val; /* raw value text */
    size_t val_len;
    bool key_escaped;
} rec_field;

typedef struct {
    const char *file; /* for messages; not owned */
    long line;
    strbuf text;      /* copy of the parsed line */
    rec_field *fields;
    size_t n, cap;
    char **owned; /* values and keys set by the stage */
    size_t n_owned, cap_owned;
} record;

void record_init(record *r);
void record_free(record *r);
/* Empties r (keeps its buffers) for a record built from scratch. */
void record_reset(record *r, const char *file, long line);

/* Parses a line that must hold one JSON object. Errors: EX_DATAERR. */
int record_parse(record *r, const char *line, size_t len, const char *file, long line_no, gerr *e);

const rec_field *record_find(const record *r, const char *key);
bool record_has(const record *r, const char *key);

/* Typed access. `required` fields that are absent are an error; otherwise
 * *present tells absent (0), null (1) or a value (2). */
int record_get_string(const record *r, const char *key, bool required, strbuf *out, int *present, gerr *e);
int record_get_number(const record *r, const char *key, bool required, double *out, int *present, gerr *e);
/* An integer in [min, max] written without fraction or exponent. */
int record_get_int(const record *r, const char *key, bool required, long long min, long long max,
                   long long *out, int *present, gerr *e);
/* Parses one field with cJSON (NULL when absent). Caller frees with cJSON_Delete. */
int record_get_json(const record *r, const char *key, bool required, cJSON **out, gerr *e);
/* The same for an optional field whose null means absent: *out NULL for both. */
int record_get_json_unless_null(const record *r, const char *key, cJSON **out, gerr *e);

/* The chat `messages` as a cJSON array (caller frees with cJSON_Delete).
 * Absent or not an array: FILE:LINE: field "messages": expected an array of
 * {role, content} messages, got KIND. */
int record_get_messages(const record *r, cJSON **out, gerr *e);

/* A JSON array of token ids in [0, vocab) into *ids (xmalloc'd, caller
 * frees; NULL on error) and *n. Errors name the field and the element:
 * FILE:LINE: field "key": element I: expected a token id in [0, V). */
int record_get_token_ids(const record *r, const char *key, int vocab, int32_t **ids, size_t *n, gerr *e);

/* Reports a field of the wrong kind: FILE:LINE: field "key": expected WHAT, got KIND. */
int record_field_error(const record *r, const char *key, const char *expected, gerr *e);

/* Setting: replaces in place when the key exists, else appends. */
void record_set_raw(record *r, const char *key, const char *raw, size_t raw_len);
/* Like record_set_raw, but a new field goes right after `after` (appended
 * when `after` is absent). */
void record_set_raw_after(record *r, const char *after, const char *key, const char *raw, size_t raw_len);
void record_set_string(record *r, const char *key, const char *s, size_t len);
void record_set_number(record *r, const char *key, double v);
void record_set_int(record *r, const char *key, long long v);
void record_set_null(record *r, const char *key);
/* EX_SOFTWARE when cJSON runs out of memory printing v. */
int record_set_json(record *r, const char *key, const cJSON *v, gerr *e);
/* Appends a field copied from another record (its raw key and value). */
void record_append_field(record *r, const rec_field *f);
void record_remove(record *r, const char *key);

/* Appends the record as one compact JSON object (no newline). */
void record_serialize(const record *r, strbuf *out);

#endif
