/* A set of record ids, each with a line number: duplicate ids (grpo-prep) and
 * groups whose id comes back after another group (grpo-advantage) are errors
 * that name the line where the id was seen before. Memory grows with the
 * number of distinct ids, never with the records. */
#ifndef GRPO_IDSET_H
#define GRPO_IDSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strbuf.h"

typedef struct {
    uint64_t hash;
    size_t off, len; /* the id's bytes in the arena */
    long line;       /* last line of the group, for the error message */
} idset_slot;

typedef struct {
    idset_slot *slots; /* open addressing; len == SIZE_MAX marks an empty slot */
    size_t cap, n;         /* cap is a power of two */
    strbuf arena;
} idset;

void idset_init(idset *s);
void idset_free(idset *s);
/* The line stored with id, or 0 when id is not in the set. */
long idset_find(const idset *s, const char *id, size_t len);
/* Adds id with its line (lines are >= 1). Returns 0 when id is new, else the
 * line stored with it before (which is kept). */
long idset_add(idset *s, const char *id, size_t len, long line);
/* The set as a map from ids to 0, 1, 2, ... in order of first appearance
 * (grpo-update's groups): id's number, numbering it when new. A set keeps
 * numbers or lines, never both: use idset_index or idset_add, not the two. */
size_t idset_index(idset *s, const char *id, size_t len);

#endif
