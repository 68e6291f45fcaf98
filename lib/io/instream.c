#include "instream.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

enum { RAW_BYTES = 1 << 17 };

static const unsigned char zstd_magic[4] = {0x28, 0xB5, 0x2F, 0xFD};

/* Reads more raw bytes; false with e set on an I/O error. */
static bool fill(instream *in, gerr *e) {
    if (in->raw_pos > 0 && in->raw_pos == in->raw_len) in->raw_pos = in->raw_len = 0;
    while (!in->raw_eof && in->raw_len < in->raw_cap) {
        ssize_t n = read(in->fd, in->raw + in->raw_len, in->raw_cap - in->raw_len);
        if (n < 0) {
            if (errno == EINTR) continue;
            gerr_set(e, EX_IOERR, "%s: read failed: %s", in->name, strerror(errno));
            return false;
        }
        if (n == 0) in->raw_eof = true;
        in->raw_len += (size_t)n;
        if (n > 0) break;
    }
    return true;
}

int instream_open(instream *in, const char *path, gerr *e) {
    memset(in, 0, sizeof *in);
    if (!path || !strcmp(path, "-")) {
        in->fd = STDIN_FILENO;
        in->name = xstrdup("<stdin>");
    } else {
        in->name = xstrdup(path);
        in->fd = open(path, O_RDONLY | O_CLOEXEC);
        if (in->fd < 0) {
            int code = errno == ENOENT || errno == ENOTDIR ? EX_NOINPUT : EX_IOERR;
            gerr_set(e, code, "%s: cannot open: %s", path, strerror(errno));
            free(in->name);
            in->name = NULL;
            return code;
        }
        struct stat st;
        if (fstat(in->fd, &st) == 0 && S_ISDIR(st.st_mode)) {
            gerr_set(e, EX_NOINPUT, "%s: is a directory", path);
            instream_close(in);
            return EX_NOINPUT;
        }
    }
    in->raw_cap = RAW_BYTES;
    in->raw = xmalloc(in->raw_cap);
    /* Sniff the magic: read until 4 bytes are there or the input ends. */
    while (in->raw_len < 4 && !in->raw_eof)
        if (!fill(in, e)) {
            instream_close(in);
            return e ? e->code : EX_IOERR;
        }
    if (in->raw_len >= 4 && !memcmp(in->raw, zstd_magic, 4)) {
        in->is_zstd = true;
        in->dctx = ZSTD_createDCtx();
        if (!in->dctx) {
            instream_close(in);
            return gerr_set(e, EX_SOFTWARE, "%s: cannot create zstd context", path ? path : "<stdin>");
        }
    }
    return 0;
}

long instream_read(instream *in, void *buf, size_t cap, gerr *e) {
    if (!in->is_zstd) {
        if (in->raw_pos == in->raw_len) {
            if (in->raw_eof) return 0;
            if (!fill(in, e)) return -1;
            if (in->raw_pos == in->raw_len) return 0;
        }
        size_t n = in->raw_len - in->raw_pos;
        if (n > cap) n = cap;
        memcpy(buf, in->raw + in->raw_pos, n);
        in->raw_pos += n;
        return (long)n;
    }
    ZSTD_outBuffer out = {buf, cap, 0};
    while (out.pos == 0) {
        if (in->raw_pos == in->raw_len) {
            if (in->raw_eof) {
                if (in->frame_left != 0) {
                    gerr_set(e, EX_DATAERR, "%s: truncated zstd data (the stream ends inside a frame)", in->name);
                    return -1;
                }
                return 0;
            }
            if (!fill(in, e)) return -1;
            continue;
        }
        ZSTD_inBuffer zin = {in->raw, in->raw_len, in->raw_pos};
        size_t r = ZSTD_decompressStream(in->dctx, &out, &zin);
        in->raw_pos = zin.pos;
        if (ZSTD_isError(r)) {
            gerr_set(e, EX_DATAERR, "%s: corrupt zstd data: %s", in->name, ZSTD_getErrorName(r));
            return -1;
        }
        in->frame_left = r;
    }
    return (long)out.pos;
}

void instream_close(instream *in) {
    if (in->dctx) ZSTD_freeDCtx(in->dctx);
    if (in->fd > STDIN_FILENO) close(in->fd);
    free(in->raw);
    free(in->name);
    memset(in, 0, sizeof *in);
}
