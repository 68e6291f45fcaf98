/* Whole files: the tensor files (safetensors, GGUF) mapped read-only and
 * read in place, never copied; small text files read into memory. */
#ifndef GRPO_MAPPED_H
#define GRPO_MAPPED_H

#include <stdbool.h>
#include <stddef.h>

#include "../util/err.h"

/* *map and *len describe the file; an empty file gives *map = NULL, *len = 0
 * (mmap cannot map nothing). Missing or not a regular file (a FIFO is
 * refused, never waited on): EX_NOINPUT; unreadable: EX_IOERR. Release with
 * map_release. */
int map_file(const char *path, void **map, size_t *len, gerr *e);
void map_release(void *map, size_t len);
/* The whole pages of [p, p + n), inside a mapping of map_file's, read and
 * not needed soon: dropped from this process's memory (they stay in the
 * page cache, and a later read maps them again), so that loading a model
 * does not hold the file's pages beside their copies. */
void map_drop(const void *p, size_t n);

/* A small file's whole text, NUL-terminated; *len (when not NULL) gets its
 * length. NULL with e set: EX_NOINPUT when missing, EX_IOERR when
 * unreadable. Caller frees. It reads what it is given (a pipe too: a flag's
 * <(...)); a model's files are read_regular_file's. */
char *read_whole_file(const char *path, size_t *len, gerr *e);

/* For a file that is either absent or a regular file (grpo/state.json):
 * *present false when nothing is at path (nor can be: a component is a file,
 * as in model.gguf/grpo/state.json); true for a regular file,
 * symlinks followed. Anything else is EX_NOINPUT naming path and what is
 * there: a symlink loop or one to nothing, a FIFO, a directory, a path that
 * cannot be looked up (a directory without search permission). */
int regular_file_probe(const char *path, bool *present, gerr *e);
/* read_whole_file for a regular file only: a FIFO, a device or a directory
 * is EX_NOINPUT "not a regular file (a FIFO)", found without blocking. */
char *read_regular_file(const char *path, size_t *len, gerr *e);
/* read_regular_file for a file that may be absent (a model's
 * generation_config.json, a shard index): *text NULL and 0 when nothing is
 * at path (regular_file_probe); anything but a regular file is an error, as
 * there. Caller frees *text. */
int read_optional_file(const char *path, char **text, size_t *len, gerr *e);
/* "a regular file", "a directory", "a FIFO", ... for an st_mode. */
const char *file_kind(unsigned mode);

#endif
