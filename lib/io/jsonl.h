/* JSON Lines in and out: one object per line, lines of any length, plain or
 * zstd (see instream/outstream). Blank lines are skipped but counted, so the
 * line numbers in messages are the file's own. */
#ifndef GRPO_JSONL_H
#define GRPO_JSONL_H

#include "../util/sha256.h"
#include "instream.h"
#include "outstream.h"
#include "record.h"

typedef struct {
    instream in;
    const char *name; /* points into in.name */
    long line_no;     /* of the line last returned */
    strbuf line;      /* a line that spans chunks is gathered here */
    char *chunk;
    size_t chunk_len, chunk_pos;
    bool eof;
    sha256_ctx *hash; /* when set, every byte read (decompressed) goes into it */
} jsonl_reader;

int jsonl_open(jsonl_reader *r, const char *path, gerr *e);
/* 1 = a line in line and len (valid until the next call), 0 = end, -1 = error. */
int jsonl_next_line(jsonl_reader *r, const char **line, size_t *len, gerr *e);
/* 1 = a record parsed into rec, 0 = end, -1 = error. */
int jsonl_next(jsonl_reader *r, record *rec, gerr *e);
void jsonl_close(jsonl_reader *r);

typedef struct {
    outstream out;
    strbuf line;
} jsonl_writer;

int jsonl_writer_open(jsonl_writer *w, const char *path, gerr *e);
int jsonl_write(jsonl_writer *w, const record *rec, gerr *e);
/* Writes text that is already one JSON line (without the newline). */
int jsonl_write_line(jsonl_writer *w, const char *text, size_t len, gerr *e);
int jsonl_writer_commit(jsonl_writer *w, gerr *e);
void jsonl_writer_abort(jsonl_writer *w);

#endif
