/* What the libFuzzer targets share: a private copy of the input (so ASan
 * sees its exact end), a scratch directory for parsers that read files, and
 * the check every failure must pass: one line, the documented code, the
 * input named first. A check that fails aborts, which libFuzzer reports as a
 * crash with the input saved. */
#ifndef GRPO_FUZZ_UTIL_H
#define GRPO_FUZZ_UTIL_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/err.h"

/* data as a NUL-terminated heap string (NULs inside are kept). */
static inline char *fuzz_copy(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s) abort();
    if (size) memcpy(s, data, size);
    s[size] = 0;
    return s;
}

/* Splits data at its first NUL byte: the part before (NUL-terminated) and
 * the rest (also NUL-terminated). Both are heap copies. */
static inline void fuzz_split(const uint8_t *data, size_t size, char **a, size_t *alen, char **b, size_t *blen) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t n = nul ? (size_t)(nul - data) : size;
    *a = fuzz_copy(data, n);
    *alen = n;
    size_t rest = nul ? size - n - 1 : 0;
    *b = fuzz_copy(nul ? nul + 1 : data, rest);
    *blen = rest;
}

/* A directory for this process's files, made once and removed at exit: in
 * memory where there is /dev/shm (rewriting a file on disk thousands of
 * times a second makes ext4 flush it on every close). A global because
 * libFuzzer's entry point has no context argument. */
static char fuzz_dir_path[64];
static void fuzz_dir_remove(void) {
    if (!fuzz_dir_path[0]) return;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fuzz_dir_path);
    if (system(cmd) != 0) fprintf(stderr, "fuzz: could not remove %s\n", fuzz_dir_path);
}
static inline const char *fuzz_dir(void) {
    if (!fuzz_dir_path[0]) {
        snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "/dev/shm/grpo-fuzz-XXXXXX");
        if (!mkdtemp(fuzz_dir_path)) {
            snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "/tmp/grpo-fuzz-XXXXXX");
            if (!mkdtemp(fuzz_dir_path)) abort();
        }
        atexit(fuzz_dir_remove);
    }
    return fuzz_dir_path;
}

/* Writes DIR/name with the bytes given (replacing it); the path in path. */
static inline void fuzz_write(const char *name, const void *data, size_t size, char *path, size_t path_size) {
    snprintf(path, path_size, "%s/%s", fuzz_dir(), name);
    unlink(path); /* a new file, not a truncated one: see fuzz_dir */
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) abort();
    if (size && write(fd, data, size) != (ssize_t)size) abort();
    if (close(fd)) abort();
}

/* A failure must be one line, with a documented code, naming `name` first. */
static inline void fuzz_check_error(const gerr *e, const char *name, int code_a, int code_b) {
    if (e->code != code_a && e->code != code_b) {
        fprintf(stderr, "fuzz: unexpected code %d: %s\n", e->code, e->msg);
        abort();
    }
    if (strchr(e->msg, '\n') || strncmp(e->msg, name, strlen(name))) {
        fprintf(stderr, "fuzz: message not one line naming %s: %s\n", name, e->msg);
        abort();
    }
}

#endif
