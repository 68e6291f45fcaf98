#include "idset.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../util/err.h"

void prep_idset_init(prep_idset *s) { memset(s, 0, sizeof *s); }

void prep_idset_free(prep_idset *s) {
    for (size_t i = 0; i < s->cap; i++) free(s->keys[i]);
    free(s->keys);
    free(s->lens);
    free(s->lines);
    memset(s, 0, sizeof *s);
}

static uint64_t fnv1a(const char *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
    return h;
}

/* The slot holding id, or the empty slot where it would go. */
static size_t slot(const prep_idset *s, const char *id, size_t len) {
    size_t mask = s->cap - 1, i = (size_t)fnv1a(id, len) & mask;
    while (s->keys[i] && !(s->lens[i] == len && !memcmp(s->keys[i], id, len))) i = (i + 1) & mask;
    return i;
}

static void grow(prep_idset *s) {
    prep_idset old = *s;
    s->cap = old.cap ? old.cap * 2 : 1024;
    s->keys = xcalloc(s->cap, sizeof *s->keys);
    s->lens = xcalloc(s->cap, sizeof *s->lens);
    s->lines = xcalloc(s->cap, sizeof *s->lines);
    for (size_t i = 0; i < old.cap; i++) {
        if (!old.keys[i]) continue;
        size_t j = slot(s, old.keys[i], old.lens[i]);
        s->keys[j] = old.keys[i];
        s->lens[j] = old.lens[i];
        s->lines[j] = old.lines[i];
    }
    free(old.keys);
    free(old.lens);
    free(old.lines);
}

long prep_idset_add(prep_idset *s, const char *id, size_t len, long line) {
    if (2 * (s->n + 1) > s->cap) grow(s); /* load factor at most 1/2 */
    size_t i = slot(s, id, len);
    if (s->keys[i]) return s->lines[i];
    s->keys[i] = xstrndup(id, len);
    s->lens[i] = len;
    s->lines[i] = line;
    s->n++;
    return 0;
}
