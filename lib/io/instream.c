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
/* A skippable frame: 5? 2A 4D 18 (0x184D2A50..5F little-endian); pzstd
 * writes one first. The first byte's low nibble is free. */
static const unsigned char skip_magic[4] = {0x50, 0x2A, 0x4D, 0x18};

/* How many of the 4 bytes agree with a magic (the skippable one's free nibble masked). */
static int magic_agrees(const unsigned char *b, const unsigned char *magic, unsigned char mask0) {
    return ((b[0] & mask0) == magic[0]) + (b[1] == magic[1]) + (b[2] == magic[2]) + (b[3] == magic[3]);
}

static bool ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), m = strlen(tail);
    return n >= m && !strcmp(s + n - m, tail);
}

/* 1 if the data starts with a zstd frame (data or skippable), -1 if it looks
 * like zstd that is damaged: 3 of a magic's 4 bytes, or a name ending in .zst
 * and a first byte no JSON line starts with. 0: plain data. */
static int sniff_zstd(const unsigned char *b, size_t len, const char *name) {
    if (len >= 4) {
        int data = magic_agrees(b, zstd_magic, 0xFF), skip = magic_agrees(b, skip_magic, 0xF0);
        if (data == 4 || skip == 4) return 1;
        if (data == 3 || skip == 3) return -1;
    }
    if (len > 0 && ends_with(name, ".zst") && (!b[0] || !strchr("{ \t\r\n", b[0]))) return -1;
    return 0;
}

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
    int sniff = sniff_zstd((const unsigned char *)in->raw, in->raw_len, in->name);
    if (sniff < 0) {
        const unsigned char *b = (const unsigned char *)in->raw;
        gerr_set(e, EX_DATAERR, "%s: not zstd data (starts %02x %02x %02x %02x, expected 28 b5 2f fd)",
                 in->name, b[0], in->raw_len > 1 ? b[1] : 0, in->raw_len > 2 ? b[2] : 0, in->raw_len > 3 ? b[3] : 0);
        instream_close(in);
        return EX_DATAERR;
    }
    if (sniff > 0) {
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
