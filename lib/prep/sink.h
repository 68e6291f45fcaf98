/* Where selected prompt records go: --split and --shard decide which ids
 * are kept, --shuffle buffers and reorders them, --n stops the output, and
 * the writer makes the file appear whole or not at all. */
#ifndef GRPO_PREP_SINK_H
#define GRPO_PREP_SINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../chat/chat.h"
#include "../io/jsonl.h"
#include "../tok/model_text.h"
#include "../util/progress.h"
#include "prep.h"

typedef struct {
    uint64_t key; /* shuffle order */
    char *id;
    char *line; /* serialized record, no newline */
    size_t len;
} prep_sink_entry;

typedef struct {
    const prep_opts *o;
    jsonl_writer w;
    bool open;
    long long taken; /* records written or buffered */
    prep_sink_entry *buf; /* --shuffle */
    size_t n_buf, cap_buf;
    progress pg;
    bool tokenize; /* --model: prompt_tokens from the rendered chat template */
    model_text mt;
    chat_template tmpl;
    strbuf text; /* scratch: prompt_tokens as JSON */
} prep_sink;

int prep_sink_open(prep_sink *s, const prep_opts *o, gerr *e);
/* Whether --split and --shard keep the record with this id. */
bool prep_sink_selects(const prep_sink *s, const char *id, size_t len);
/* Takes a selected record (adding prompt_tokens after messages with --model). */
int prep_sink_put(prep_sink *s, record *rec, const char *id, size_t len, gerr *e);
/* Whether --n records are taken, so reading or generating can stop. */
bool prep_sink_full(const prep_sink *s);
/* Writes what --shuffle buffered (the first --n of it) and commits the output. */
int prep_sink_commit(prep_sink *s, gerr *e);
/* Removes the temporary output. */
void prep_sink_abort(prep_sink *s);

/* The --shuffle sort key of an id: the first u64 of the random stream keyed
 * (seed, id, 0). */
uint64_t prep_sink_shuffle_key(uint64_t seed, const char *id, size_t len);

#endif
