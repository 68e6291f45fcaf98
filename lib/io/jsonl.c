#include "jsonl.h"

#include <stdlib.h>
#include <string.h>

enum { CHUNK_BYTES = 1 << 18 };

int jsonl_open(jsonl_reader *r, const char *path, gerr *e) {
    memset(r, 0, sizeof *r);
    int rc = instream_open(&r->in, path, e);
    if (rc) return rc;
    r->name = r->in.name;
    r->chunk = xmalloc(CHUNK_BYTES);
    return 0;
}

static bool blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return false;
    return true;
}

/* A line longer than memory holds: named by file and line, not just "out of
 * memory". */
static int gather(jsonl_reader *r, const char *s, size_t n, gerr *e) {
    if (sb_try_append(&r->line, s, n)) return 0;
    return gerr_at(e, EX_SOFTWARE, r->name, r->line_no + 1, "out of memory reading a line of more than %zu MiB",
                   (r->line.len + n) >> 20);
}

int jsonl_next_line(jsonl_reader *r, const char **line, size_t *len, gerr *e) {
    sb_clear(&r->line);
    bool gathering = false; /* part of the line is in r->line already */
    for (;;) {
        if (r->chunk_pos == r->chunk_len) {
            if (r->eof) {
                if (!gathering) return 0;
                break; /* last line without a newline */
            }
            long n = instream_read(&r->in, r->chunk, CHUNK_BYTES, e);
            if (n < 0) {
                /* name the line where the damage shows */
                gerr copy = *e;
                const char *msg = copy.msg;
                size_t name_len = strlen(r->name);
                if (!strncmp(msg, r->name, name_len) && !strncmp(msg + name_len, ": ", 2))
                    msg += name_len + 2;
                gerr_at(e, copy.code, r->name, r->line_no + 1, "%s", msg);
                return -1;
            }
            r->chunk_pos = 0;
            r->chunk_len = (size_t)n;
            if (r->hash) sha256_update(r->hash, r->chunk, r->chunk_len);
            if (n == 0) r->eof = true;
            continue;
        }
        const char *start = r->chunk + r->chunk_pos;
        size_t avail = r->chunk_len - r->chunk_pos;
        const char *nl = memchr(start, '\n', avail);
        if (!nl) {
            if (gather(r, start, avail, e)) return -1;
            r->chunk_pos = r->chunk_len;
            gathering = true;
            continue;
        }
        size_t n = (size_t)(nl - start);
        r->chunk_pos += n + 1;
        r->line_no++;
        const char *text;
        size_t text_len;
        if (gathering) {
            if (gather(r, start, n, e)) return -1;
            text = r->line.data;
            text_len = r->line.len;
        } else {
            text = start;
            text_len = n;
        }
        if (text_len && text[text_len - 1] == '\r') text_len--;
        if (blank(text, text_len)) {
            sb_clear(&r->line);
            gathering = false;
            continue;
        }
        *line = text;
        *len = text_len;
        return 1;
    }
    r->line_no++;
    size_t text_len = r->line.len;
    if (text_len && r->line.data[text_len - 1] == '\r') text_len--;
    if (blank(r->line.data, text_len)) return 0;
    *line = r->line.data;
    *len = text_len;
    return 1;
}

int jsonl_next(jsonl_reader *r, record *rec, gerr *e) {
    const char *line;
    size_t len;
    int got = jsonl_next_line(r, &line, &len, e);
    if (got <= 0) return got;
    if (record_parse(rec, line, len, r->name, r->line_no, e)) return -1;
    return 1;
}

void jsonl_close(jsonl_reader *r) {
    instream_close(&r->in);
    sb_free(&r->line);
    free(r->chunk);
    memset(r, 0, sizeof *r);
}

int jsonl_writer_open(jsonl_writer *w, const char *path, gerr *e) {
    memset(w, 0, sizeof *w);
    return outstream_open(&w->out, path, 0, e);
}

int jsonl_write(jsonl_writer *w, const record *rec, gerr *e) {
    sb_clear(&w->line);
    record_serialize(rec, &w->line);
    sb_putc(&w->line, '\n');
    return outstream_write(&w->out, w->line.data, w->line.len, e);
}

int jsonl_write_line(jsonl_writer *w, const char *text, size_t len, gerr *e) {
    int rc = outstream_write(&w->out, text, len, e);
    return rc ? rc : outstream_write(&w->out, "\n", 1, e);
}

int jsonl_writer_commit(jsonl_writer *w, gerr *e) {
    int rc = outstream_commit(&w->out, e);
    sb_free(&w->line);
    return rc;
}

void jsonl_writer_abort(jsonl_writer *w) {
    outstream_abort(&w->out);
    sb_free(&w->line);
}
