/* A set of record ids with the line each was first seen on: duplicate ids
 * are an error that names both lines. Open addressing, FNV-1a. */
#ifndef GRPO_PREP_IDSET_H
#define GRPO_PREP_IDSET_H

#include <stddef.h>

typedef struct {
    char **keys; /* NUL-terminated copies; NULL = empty slot */
    size_t *lens;
    long *lines;
    size_t n, cap;
} prep_idset;

void prep_idset_init(prep_idset *s);
void prep_idset_free(prep_idset *s);
/* Adds id; returns 0 when it is new, else the line it was first seen on
 * (lines are >= 1; generated records pass their candidate number + 1). */
long prep_idset_add(prep_idset *s, const char *id, size_t len, long line);

#endif
