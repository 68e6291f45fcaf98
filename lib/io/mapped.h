/* Whole files: the tensor files (safetensors, GGUF) mapped read-only and
 * read in place, never copied; small text files read into memory. */
#ifndef GRPO_MAPPED_H
#define GRPO_MAPPED_H

#include <stddef.h>

#include "../util/err.h"

/* *map and *len describe the file; an empty file gives *map = NULL, *len = 0
 * (mmap cannot map nothing). Missing or not a regular file: EX_NOINPUT;
 * unreadable: EX_IOERR. Release with map_release. */
int map_file(const char *path, void **map, size_t *len, gerr *e);
void map_release(void *map, size_t len);

/* A small file's whole text, NUL-terminated (config and tokenizer JSON);
 * *len (when not NULL) gets its length. NULL with e set: EX_NOINPUT when
 * missing, EX_IOERR when unreadable. Caller frees. */
char *read_whole_file(const char *path, size_t *len, gerr *e);

#endif
