/* The generated tasks (arith, countdown): candidates 0, 1, 2, ... of the
 * seed's stream become records until --n of them are selected. */
#ifndef GRPO_PREP_GENERATE_H
#define GRPO_PREP_GENERATE_H

#include "sink.h"

/* Draws without a new selected record this many times in a row: the flags
 * leave too few distinct problems (or none in the split and shard). */
enum { GENERATE_MAX_MISSES = 200000 };

int prep_generate_run(const prep_opts *o, prep_sink *s, gerr *e);

/* "TASK/" + the first 16 hex digits of SHA-256(canonical problem text). */
void prep_generated_id(strbuf *out, const char *task, const char *canonical, size_t len);

#endif
