/* What several unit tests share: fixed-seed random fills, paths in a
 * scratch tree and its removal. */
#ifndef GRPO_TEST_HELPERS_H
#define GRPO_TEST_HELPERS_H

#include <ftw.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static inline uint64_t splitmix64(uint64_t x) {
    uint64_t z = x + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* n bytes: byte i is byte i % 8 (little end first) of splitmix64(seed + i / 8). */
static inline void fill_random_bytes(void *buf, size_t n, uint64_t seed) {
    unsigned char *p = buf;
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(splitmix64(seed + i / 8) >> (8 * (i % 8)));
}

/* n floats uniform in [-0.5, 0.5), from xorshift64 started at state (not 0). */
static inline void fill_random_floats(float *p, size_t n, uint64_t state) {
    for (size_t i = 0; i < n; i++) {
        state ^= state << 13, state ^= state >> 7, state ^= state << 17;
        p[i] = (float)((state >> 11) * 0x1.0p-53 - 0.5);
    }
}

/* dir/rel, in one of 8 static buffers so that a few may be live at once in
 * one expression. */
static inline char *path_under(const char *dir, const char *rel) {
    static char buf[8][1024];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, rel);
    return buf[k];
}

static inline int remove_tree_entry(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)st, (void)type, (void)ftw;
    return remove(path);
}

/* Removes path and everything below it; a link goes, never what it points at. */
static inline void remove_tree(const char *path) {
    nftw(path, remove_tree_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Pages of [p, p + n) (whole pages inside it) in memory, by mincore; -1
 * when that cannot be told. */
static inline int resident_pages(const void *p, size_t n) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)p + page - 1) / page * page, hi = ((uintptr_t)p + n) / page * page;
    if (hi <= lo) return 0;
    size_t np = (hi - lo) / page;
    unsigned char *v = calloc(np, 1);
    int count = -1;
    if (v && mincore((void *)lo, hi - lo, v) == 0) {
        count = 0;
        for (size_t i = 0; i < np; i++) count += v[i] & 1;
    }
    free(v);
    return count;
}

#endif
