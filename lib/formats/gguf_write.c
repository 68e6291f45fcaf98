/* The GGUF file writer (see gguf_write.h): header built in memory, then the
 * data section streamed through outstream a chunk of rows at a time. */
#include "gguf_write.h"

#include <stdlib.h>
#include <string.h>

#include "../io/outstream.h"
#include "gguf_quant.h"
#include "quant.h"

enum { ALIGN = GGUF_WRITE_ALIGN };

static size_t cols_of(const gguf_wtensor *t) { return (size_t)(t->cols ? t->cols : 1); }
/* Rows of every plane of a matrix; the values of every plane of a vector. */
static size_t rows_of(const gguf_wtensor *t) { return (size_t)t->rows * (size_t)(t->planes > 1 ? t->planes : 1); }

static void plan_offsets(gguf_wtensor *t, size_t n) {
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        t[i].nbytes = t[i].cols ? quant_row_bytes(t[i].type, (size_t)t[i].cols) * (uint64_t)rows_of(&t[i])
                                : quant_row_bytes(t[i].type, rows_of(&t[i]));
        t[i].offset = off;
        off += (t[i].nbytes + ALIGN - 1) / ALIGN * ALIGN;
    }
}

static void tensor_infos(strbuf *b, const gguf_wtensor *plan, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const gguf_wtensor *t = &plan[i];
        gmeta_gstr(b, t->name, strlen(t->name));
        if (t->cols) { /* dims innermost first: [rows, cols] is {cols, rows} */
            gmeta_le32(b, t->planes > 1 ? 3 : 2);
            gmeta_le64(b, (uint64_t)t->cols);
            gmeta_le64(b, (uint64_t)t->rows);
            if (t->planes > 1) gmeta_le64(b, (uint64_t)t->planes);
        } else { /* {rows}, or {rows, planes}: a layer's experts' vectors */
            gmeta_le32(b, t->planes > 1 ? 2 : 1);
            gmeta_le64(b, (uint64_t)t->rows);
            if (t->planes > 1) gmeta_le64(b, (uint64_t)t->planes);
        }
        gmeta_le32(b, t->type);
        gmeta_le64(b, t->offset);
    }
}

static int pad(outstream *o, uint64_t len, gerr *e) {
    static const char zeros[ALIGN];
    size_t n = (size_t)((ALIGN - len % ALIGN) % ALIGN);
    return n ? outstream_write(o, zeros, n, e) : 0;
}

/* Converts and writes tensor i, chunk by chunk. A vector counts as rows of
 * one value; only matrices are quantized, so Q8_0 chunks always hold whole
 * rows. tmp and out hold a chunk's floats and its bytes. */
static int write_tensor(outstream *o, const gguf_wtensor *t, size_t i, gguf_rows_fn rows_fn, void *ctx, float *tmp,
                        unsigned char *out, gerr *e) {
    size_t cols = cols_of(t), rows = rows_of(t), step = t->chunk_rows;
    for (size_t r = 0; r < rows; r += step) {
        size_t nr = rows - r < step ? rows - r : step;
        const float *src = rows_fn(ctx, i, r, nr, tmp);
        gguf_convert(t->type, src, out, nr * cols);
        int rc = outstream_write(o, out, quant_row_bytes(t->type, nr * cols), e);
        if (rc) return rc;
    }
    return pad(o, t->nbytes, e);
}

int gguf_write(const char *path, const gguf_meta *meta, gguf_wtensor *t, size_t n, gguf_rows_fn rows, void *ctx,
               gerr *e) {
    plan_offsets(t, n);
    size_t cap = 1;
    for (size_t i = 0; i < n; i++) {
        size_t c = t[i].chunk_rows * cols_of(&t[i]);
        if (c > cap) cap = c;
    }
    float *tmp = malloc(cap * sizeof *tmp);
    unsigned char *bytes = malloc(cap * sizeof(float));
    if (!tmp || !bytes) {
        free(tmp);
        free(bytes);
        return gerr_set(e, EX_SOFTWARE, "%s: cannot allocate %zu MiB of conversion buffers", path,
                        cap * 2 * sizeof(float) >> 20);
    }
    strbuf head = {0};
    sb_append(&head, "GGUF", 4);
    gmeta_le32(&head, 3);
    gmeta_le64(&head, n);
    gmeta_le64(&head, meta->n);
    sb_append(&head, meta->b.data, meta->b.len);
    tensor_infos(&head, t, n);
    outstream o;
    int rc = outstream_open(&o, path, 0, e);
    if (!rc) {
        rc = outstream_write(&o, head.data, head.len, e);
        if (!rc) rc = pad(&o, head.len, e);
        for (size_t i = 0; i < n && !rc; i++) rc = write_tensor(&o, &t[i], i, rows, ctx, tmp, bytes, e);
        if (!rc) rc = outstream_commit(&o, e);
        else outstream_abort(&o);
    }
    sb_free(&head);
    free(tmp);
    free(bytes);
    return rc;
}
