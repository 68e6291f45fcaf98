/* One prompt record before it is written: prep's own fields, and how the
 * input record's fields are carried after them (formats/prompt.md,
 * "Pass-through"). Both the dataset tasks and the generators fill one. */
#ifndef GRPO_PREP_ITEM_H
#define GRPO_PREP_ITEM_H

#include <stdbool.h>

#include "../io/record.h"
#include "../util/strbuf.h"

enum { ITEM_MAX_EXTRAS = 4, ITEM_MAX_CONSUMED = 4 };

typedef struct {
    strbuf id, task;
    strbuf messages; /* raw JSON array */
    strbuf answer;   /* decoded text; written as a JSON string */
    bool has_answer;
    /* The input's "answer" is not the answer (jsonl --answer-field names
     * another field): move it aside even when no answer is written. */
    bool answer_reserved;
    int n_extras;
    const char *extra_key[ITEM_MAX_EXTRAS]; /* static strings: "tests", "numbers", ... */
    strbuf extra_raw[ITEM_MAX_EXTRAS];      /* raw JSON values */
    /* Input fields that prep re-emits under the same name with the same
     * meaning (jsonl's own "id", "task", "messages", "answer"): dropped from
     * the pass-through rather than kept twice. */
    int n_consumed;
    const char *consumed[ITEM_MAX_CONSUMED];
    /* A table above was full (a bug, not the data): what to say, and where
     * the extra that found no room went. prep_item_to_record reports it. */
    const char *overflow;
    strbuf spill;
} prep_item;

void prep_item_init(prep_item *it);
/* Empties it for the next record (keeps buffers). */
void prep_item_clear(prep_item *it);
void prep_item_free(prep_item *it);
/* Returns the buffer for a new extra field `key` (a static string). When
 * the table is full, a spare buffer, and prep_item_to_record fails. */
strbuf *prep_item_extra(prep_item *it, const char *key);
void prep_item_consume(prep_item *it, const char *name);

/* Builds the output record: id, task, messages, answer, extras, then every
 * field of `in` (NULL for generated records) in input order, raw bytes
 * untouched. An input field named like one of prep's written fields is kept
 * under another name: "answer" -> "solution" (or "source_answer" when the
 * input has a "solution"), any other NAME -> "source_NAME". EX_DATAERR when
 * that name is taken too; EX_SOFTWARE when a table of the item overflowed. */
int prep_item_to_record(const prep_item *it, const record *in, record *out, gerr *e);

/* Whether field f's key, escapes decoded, equals name. */
bool prep_field_named(const rec_field *f, const char *name);

#endif
