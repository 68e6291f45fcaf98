/* A whole regular file mapped read-only: the tensor files (safetensors,
 * GGUF) are read in place, never copied. */
#ifndef GRPO_MAPPED_H
#define GRPO_MAPPED_H

#include <stddef.h>

#include "../util/err.h"

/* *map and *len describe the file; an empty file gives *map = NULL, *len = 0
 * (mmap cannot map nothing). Missing or not a regular file: EX_NOINPUT;
 * unreadable: EX_IOERR. Release with map_release. */
int map_file(const char *path, void **map, size_t *len, gerr *e);
void map_release(void *map, size_t len);

#endif
