#include "idset.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

/* FNV-1a with a final mix: ids are short and often share long prefixes. */
static uint64_t hash_id(const char *id, size_t len) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)id[i];
        h *= 0x100000001b3ull;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

void idset_init(idset *s) { memset(s, 0, sizeof *s); }

void idset_free(idset *s) {
    free(s->slots);
    sb_free(&s->arena);
    memset(s, 0, sizeof *s);
}

static idset_slot *probe(const idset *s, uint64_t h, const char *id, size_t len) {
    size_t mask = s->cap - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        idset_slot *slot = &s->slots[i];
        if (slot->len == SIZE_MAX) return slot;
        if (slot->hash == h && slot->len == len && !memcmp(s->arena.data + slot->off, id, len)) return slot;
    }
}

static void grow(idset *s) {
    idset_slot *old = s->slots;
    size_t old_cap = s->cap;
    s->cap = old_cap ? old_cap * 2 : 1024;
    s->slots = xmalloc(s->cap * sizeof *s->slots);
    for (size_t i = 0; i < s->cap; i++) s->slots[i].len = SIZE_MAX;
    size_t mask = s->cap - 1;
    for (size_t i = 0; i < old_cap; i++) {
        if (old[i].len == SIZE_MAX) continue;
        size_t j = (size_t)old[i].hash & mask;
        while (s->slots[j].len != SIZE_MAX) j = (j + 1) & mask;
        s->slots[j] = old[i];
    }
    free(old);
}

long idset_find(const idset *s, const char *id, size_t len) {
    if (!s->cap) return 0;
    const idset_slot *slot = probe(s, hash_id(id, len), id, len);
    return slot->len == SIZE_MAX ? 0 : slot->line;
}

long idset_add(idset *s, const char *id, size_t len, long line) {
    if ((s->n + 1) * 2 > s->cap) grow(s); /* load factor at most 1/2 */
    uint64_t h = hash_id(id, len);
    idset_slot *slot = probe(s, h, id, len);
    if (slot->len != SIZE_MAX) return slot->line;
    slot->hash = h;
    slot->off = s->arena.len;
    slot->len = len;
    slot->line = line;
    sb_append(&s->arena, id, len);
    s->n++;
    return 0;
}

size_t idset_index(idset *s, const char *id, size_t len) {
    long seen = idset_add(s, id, len, (long)s->n + 1); /* stored as number + 1: 0 means new */
    return seen ? (size_t)(seen - 1) : s->n - 1;
}
