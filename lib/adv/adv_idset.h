/* The set of group ids already seen, so that a group whose records are not
 * contiguous (its id comes back after another group) is caught. Memory grows
 * with the number of distinct ids, never with the records. */
#ifndef GRPO_ADV_IDSET_H
#define GRPO_ADV_IDSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../util/strbuf.h"

typedef struct {
    uint64_t hash;
    size_t off, len; /* the id's bytes in the arena */
    long line;       /* last line of the group, for the error message */
} adv_idset_slot;

typedef struct {
    adv_idset_slot *slots; /* open addressing; len == SIZE_MAX marks an empty slot */
    size_t cap, n;         /* cap is a power of two */
    strbuf arena;
} adv_idset;

void adv_idset_init(adv_idset *s);
void adv_idset_free(adv_idset *s);
/* The line stored with id, or 0 when id is not in the set. */
long adv_idset_find(const adv_idset *s, const char *id, size_t len);
/* Adds id with the last line of its group (an id already there gets the new line). */
void adv_idset_add(adv_idset *s, const char *id, size_t len, long line);

#endif
