/* safetensors writer: tensors contiguous in the order added, header padded
 * with spaces to a multiple of 8 (as the reference implementation does),
 * written through outstream so the file appears whole or not at all. */
#include "safetensors.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../util/half.h"
#include "../util/strbuf.h"
#include "../io/outstream.h"

/* Offsets and dims are read back as JSON doubles: keep them exact. */
#define ST_MAX_JSON_INT ((uint64_t)1 << 53)

void st_writer_init(st_writer *w) { memset(w, 0, sizeof *w); }

void st_writer_free(st_writer *w) {
    for (size_t i = 0; i < w->n_tensors; i++) {
        free(w->tensors[i].name);
        free(w->tensors[i].owned);
    }
    for (size_t i = 0; i < w->n_meta; i++) {
        free(w->meta_keys[i]);
        free(w->meta_values[i]);
    }
    free(w->tensors);
    free(w->meta_keys);
    free(w->meta_values);
    free(w->slots);
    memset(w, 0, sizeof *w);
}

static uint64_t hash_name(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* The slot holding name, or the empty slot where it would go. */
static size_t *find_slot(const st_writer *w, const char *name) {
    size_t mask = w->n_slots - 1;
    for (size_t i = hash_name(name) & mask;; i = (i + 1) & mask) {
        size_t *slot = &w->slots[i];
        if (!*slot || !strcmp(w->tensors[*slot - 1].name, name)) return slot;
    }
}

/* Keeps the table at most half full so probes stay short and always end. */
static void grow_slots(st_writer *w) {
    if (2 * (w->n_tensors + 1) <= w->n_slots) return;
    size_t n = w->n_slots ? 2 * w->n_slots : 64;
    free(w->slots);
    w->slots = xcalloc(n, sizeof *w->slots);
    w->n_slots = n;
    for (size_t i = 0; i < w->n_tensors; i++) *find_slot(w, w->tensors[i].name) = i + 1;
}

static bool utf8_ok(const char *s) { return st_utf8_valid((const unsigned char *)s, strlen(s), NULL); }

int st_writer_add(st_writer *w, const char *name, st_dtype dtype, int ndim, const int64_t *shape,
                  const void *data, gerr *e) {
    if (!utf8_ok(name)) return gerr_set(e, EX_DATAERR, "tensor name is not valid UTF-8");
    if (!strcmp(name, "__metadata__"))
        return gerr_set(e, EX_DATAERR, "tensor name '__metadata__' is reserved");
    if (!st_dtype_name(dtype))
        return gerr_set(e, EX_SOFTWARE, "tensor '%.200s': invalid dtype %d", name, (int)dtype);
    if (ndim < 0 || ndim > ST_MAX_DIMS)
        return gerr_set(e, EX_SOFTWARE, "tensor '%.200s': ndim %d outside 0..%d", name, ndim,
                        ST_MAX_DIMS);
    uint64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || (uint64_t)shape[i] > ST_MAX_JSON_INT)
            return gerr_set(e, EX_SOFTWARE, "tensor '%.200s': shape[%d] = %" PRId64 " out of range",
                            name, i, shape[i]);
        if (__builtin_mul_overflow(numel, (uint64_t)shape[i], &numel))
            return gerr_set(e, EX_SOFTWARE, "tensor '%.200s': shape product overflows", name);
    }
    uint64_t nbytes;
    if (__builtin_mul_overflow(numel, (uint64_t)st_dtype_size(dtype), &nbytes) ||
        nbytes > ST_MAX_JSON_INT || nbytes > SIZE_MAX)
        return gerr_set(e, EX_SOFTWARE, "tensor '%.200s': too large", name);
    if (nbytes && !data) return gerr_set(e, EX_SOFTWARE, "tensor '%.200s': no data", name);
    grow_slots(w);
    size_t *slot = find_slot(w, name);
    if (*slot) return gerr_set(e, EX_DATAERR, "duplicate tensor name '%.200s'", name);
    if (w->n_tensors == w->cap_tensors) {
        w->cap_tensors = w->cap_tensors ? 2 * w->cap_tensors : 16;
        w->tensors = xrealloc(w->tensors, w->cap_tensors * sizeof *w->tensors);
    }
    st_wtensor *t = &w->tensors[w->n_tensors++];
    memset(t, 0, sizeof *t);
    t->name = xstrdup(name);
    t->dtype = dtype;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    t->data = data;
    t->nbytes = (size_t)nbytes;
    *slot = w->n_tensors;
    return 0;
}

int st_writer_add_f32(st_writer *w, const char *name, st_dtype dtype, int ndim, const int64_t *shape,
                      const float *data, gerr *e) {
    if (dtype != ST_F32 && dtype != ST_F16 && dtype != ST_BF16)
        return gerr_set(e, EX_SOFTWARE, "tensor '%.200s': float32 data cannot be written as %s", name,
                        st_dtype_name(dtype) ? st_dtype_name(dtype) : "an unknown dtype");
    /* checked and added with the float32 data; the halves replace it below */
    int rc = st_writer_add(w, name, dtype, ndim, shape, data, e);
    if (rc || dtype == ST_F32) return rc;
    st_wtensor *t = &w->tensors[w->n_tensors - 1];
    size_t numel = t->nbytes / 2;
    uint16_t *half = xmalloc(numel ? t->nbytes : 1);
    if (dtype == ST_F16) f32_to_f16_array(data, half, numel);
    else f32_to_bf16_array(data, half, numel);
    t->data = t->owned = half;
    return 0;
}

int st_writer_set_meta(st_writer *w, const char *key, const char *value, gerr *e) {
    if (!utf8_ok(key)) return gerr_set(e, EX_DATAERR, "__metadata__ key is not valid UTF-8");
    if (!utf8_ok(value))
        return gerr_set(e, EX_DATAERR, "__metadata__ '%.200s': value is not valid UTF-8", key);
    for (size_t i = 0; i < w->n_meta; i++)
        if (!strcmp(w->meta_keys[i], key)) {
            free(w->meta_values[i]);
            w->meta_values[i] = xstrdup(value);
            return 0;
        }
    if (w->n_meta == w->cap_meta) {
        w->cap_meta = w->cap_meta ? 2 * w->cap_meta : 8;
        w->meta_keys = xrealloc(w->meta_keys, w->cap_meta * sizeof *w->meta_keys);
        w->meta_values = xrealloc(w->meta_values, w->cap_meta * sizeof *w->meta_values);
    }
    w->meta_keys[w->n_meta] = xstrdup(key);
    w->meta_values[w->n_meta] = xstrdup(value);
    w->n_meta++;
    return 0;
}

/* The header JSON, padded with spaces so the data section starts 8-aligned. */
static void build_header(const st_writer *w, strbuf *h) {
    sb_putc(h, '{');
    if (w->n_meta) {
        sb_puts(h, "\"__metadata__\":{");
        for (size_t i = 0; i < w->n_meta; i++) {
            if (i) sb_putc(h, ',');
            sb_json_string(h, w->meta_keys[i], strlen(w->meta_keys[i]));
            sb_putc(h, ':');
            sb_json_string(h, w->meta_values[i], strlen(w->meta_values[i]));
        }
        sb_putc(h, '}');
    }
    uint64_t offset = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        const st_wtensor *t = &w->tensors[i];
        if (i || w->n_meta) sb_putc(h, ',');
        sb_json_string(h, t->name, strlen(t->name));
        sb_printf(h, ":{\"dtype\":\"%s\",\"shape\":[", st_dtype_name(t->dtype));
        for (int d = 0; d < t->ndim; d++) sb_printf(h, "%s%" PRId64, d ? "," : "", t->shape[d]);
        sb_printf(h, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", offset, offset + t->nbytes);
        offset += t->nbytes;
    }
    sb_putc(h, '}');
    while (h->len % 8) sb_putc(h, ' ');
}

int st_write(const st_writer *w, const char *path, gerr *e) {
    size_t plen = strlen(path);
    if (plen >= 4 && !strcmp(path + plen - 4, ".zst"))
        return gerr_set(e, EX_SOFTWARE, "%s: safetensors files are not written compressed", path);
    uint64_t total = 0;
    for (size_t i = 0; i < w->n_tensors; i++) total += w->tensors[i].nbytes;
    if (total > ST_MAX_JSON_INT)
        return gerr_set(e, EX_SOFTWARE, "%s: data section of %" PRIu64 " bytes is too large", path,
                        total);
    strbuf h = {0};
    build_header(w, &h);
    if (h.len > ST_MAX_HEADER_BYTES) {
        size_t n = h.len;
        sb_free(&h);
        return gerr_set(e, EX_SOFTWARE, "%s: header of %zu bytes exceeds the limit", path, n);
    }
    unsigned char len_le[8];
    for (int i = 0; i < 8; i++) len_le[i] = (unsigned char)((uint64_t)h.len >> (8 * i));
    outstream o;
    int rc = outstream_open(&o, path, 0, e);
    if (rc) {
        sb_free(&h);
        return rc;
    }
    rc = outstream_write(&o, len_le, sizeof len_le, e);
    if (!rc) rc = outstream_write(&o, h.data, h.len, e);
    for (size_t i = 0; i < w->n_tensors && !rc; i++) {
        rc = outstream_write(&o, w->tensors[i].data, w->tensors[i].nbytes, e);
        if (w->pg) progress_update(w->pg, (int64_t)i + 1);
    }
    sb_free(&h);
    if (rc) {
        outstream_abort(&o);
        return rc;
    }
    return outstream_commit(&o, e);
}
