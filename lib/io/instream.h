/* Input bytes from a path or stdin, transparently zstd-decompressed when the
 * data starts with a zstd frame: the frame magic (28 B5 2F FD) or a skippable
 * frame's (5? 2A 4D 18, as pzstd writes). Streaming: memory stays constant
 * however large the input. Concatenated frames are read in turn; a frame cut
 * short is an error at the end, not silent truncation. Data that looks like
 * damaged zstd (3 of a magic's 4 bytes, or a name ending in .zst and a first
 * byte no JSON line starts with) is "not zstd data" at open. */
#ifndef GRPO_INSTREAM_H
#define GRPO_INSTREAM_H

#include <stdbool.h>
#include <stddef.h>

#include "../util/err.h"

typedef struct {
    char *name; /* the path, or "<stdin>" */
    int fd;
    bool is_zstd;
    void *dctx;   /* ZSTD_DCtx* */
    char *raw;    /* bytes read from fd */
    size_t raw_len, raw_pos, raw_cap;
    bool raw_eof;
    size_t frame_left; /* last ZSTD_decompressStream result: 0 = at a frame boundary */
} instream;

/* NULL or "-" reads stdin. A missing file is EX_NOINPUT. */
int instream_open(instream *in, const char *path, gerr *e);
/* Reads up to cap bytes; returns the count (0 at end) or -1 with e set. */
long instream_read(instream *in, void *buf, size_t cap, gerr *e);
void instream_close(instream *in);

#endif
