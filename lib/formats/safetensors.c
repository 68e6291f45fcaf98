/* safetensors reader: every claim of the header is checked against the file
 * before a tensor pointer is handed out. The writer is in safetensors_write.c. */
#include "safetensors.h"

#include "../io/mapped.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../util/finite.h"
#include "../util/name_index.h"
#include "../util/half.h"
#include "format_err.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this reader assumes a little-endian host"
#endif

/* Integers in the header come through cJSON as doubles: exact up to 2^53. */
#define ST_MAX_JSON_INT 9007199254740992.0

static const char *const dtype_names[ST_NDTYPES] = {
    [ST_F32] = "F32", [ST_F16] = "F16", [ST_BF16] = "BF16", [ST_F64] = "F64",
    [ST_I32] = "I32", [ST_I64] = "I64", [ST_U8] = "U8",
};
static const size_t dtype_sizes[ST_NDTYPES] = {
    [ST_F32] = 4, [ST_F16] = 2, [ST_BF16] = 2, [ST_F64] = 8, [ST_I32] = 4, [ST_I64] = 8, [ST_U8] = 1,
};

const char *st_dtype_name(st_dtype d) {
    return (unsigned)d < ST_NDTYPES ? dtype_names[d] : NULL;
}

size_t st_dtype_size(st_dtype d) { return (unsigned)d < ST_NDTYPES ? dtype_sizes[d] : 0; }

bool st_dtype_parse(const char *name, st_dtype *out) {
    for (int d = 0; d < ST_NDTYPES; d++)
        if (!strcmp(name, dtype_names[d])) {
            *out = (st_dtype)d;
            return true;
        }
    return false;
}

bool st_utf8_valid(const unsigned char *s, size_t len, size_t *bad_at) {
    size_t i = 0;
    while (i < len) {
        unsigned char c = s[i];
        size_t n;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            n = 2, cp = c & 0x1F, min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            n = 3, cp = c & 0x0F, min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            n = 4, cp = c & 0x07, min = 0x10000;
        } else {
            break;
        }
        if (len - i < n) break;
        size_t k = 1;
        for (; k < n && (s[i + k] & 0xC0) == 0x80; k++) cp = (cp << 6) | (s[i + k] & 0x3F);
        if (k < n || cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) break;
        i += n;
    }
    if (bad_at) *bad_at = i;
    return i == len;
}

/* ---- header parsing ------------------------------------------------------ */

/* What parse needs besides f: where messages point and the data section. */
typedef struct {
    const char *name;
    const unsigned char *data;
    uint64_t data_len;
    gerr *e;
} parse_ctx;

/* A JSON number that is an integer in [0, 2^53]. */
static bool json_uint(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return false;
    double d = v->valuedouble;
    if (!isfinite(d) || d < 0 || d > ST_MAX_JSON_INT || floor(d) != d) return false;
    *out = (uint64_t)d;
    return true;
}

/* Describes a JSON value's type for "expected X, got Y" messages. */
static const char *json_kind(const cJSON *v) {
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsObject(v)) return "an object";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNull(v)) return "null";
    return "an invalid value";
}

/* "-1", "1.5", "a string": what a bad integer field holds, for messages. */
static const char *json_got(const cJSON *v, char *buf, size_t size) {
    if (!cJSON_IsNumber(v)) return json_kind(v);
    snprintf(buf, size, "%.17g", v->valuedouble);
    return buf;
}

static int parse_shape(parse_ctx *p, const char *tname, const cJSON *shape, st_tensor *t) {
    if (!cJSON_IsArray(shape))
        return FORMAT_BAD(p, "tensor '%.200s': shape is %s, expected an array of integers", tname,
                   json_kind(shape));
    int ndim = cJSON_GetArraySize(shape);
    if (ndim > ST_MAX_DIMS)
        return FORMAT_BAD(p, "tensor '%.200s': shape has %d dims, at most %d supported", tname, ndim,
                   ST_MAX_DIMS);
    t->ndim = ndim;
    uint64_t numel = 1;
    int i = 0;
    for (const cJSON *d = shape->child; d; d = d->next, i++) {
        uint64_t dim;
        if (!json_uint(d, &dim)) {
            char got[32];
            return FORMAT_BAD(p, "tensor '%.200s': shape[%d] is %s, expected a non-negative integer up to 2^53",
                       tname, i, json_got(d, got, sizeof got));
        }
        t->shape[i] = (int64_t)dim;
        /* Any product past the data section is an error below; stop overflow here. */
        if (__builtin_mul_overflow(numel, dim, &numel) || numel > (uint64_t)INT64_MAX)
            return FORMAT_BAD(p, "tensor '%.200s': shape product overflows", tname);
    }
    t->numel = (int64_t)numel;
    return 0;
}

static int parse_offsets(parse_ctx *p, const char *tname, const cJSON *offs, uint64_t *begin,
                         uint64_t *end) {
    if (!cJSON_IsArray(offs))
        return FORMAT_BAD(p, "tensor '%.200s': data_offsets is %s, expected an array of 2 integers", tname,
                   json_kind(offs));
    int n = cJSON_GetArraySize(offs);
    if (n != 2)
        return FORMAT_BAD(p, "tensor '%.200s': data_offsets has %d entries, expected 2 integers", tname, n);
    for (int i = 0; i < 2; i++) {
        const cJSON *v = i ? offs->child->next : offs->child;
        if (!json_uint(v, i ? end : begin)) {
            char got[32];
            return FORMAT_BAD(p,
                       "tensor '%.200s': data_offsets[%d] is %s, expected a non-negative integer "
                       "up to 2^53",
                       tname, i, json_got(v, got, sizeof got));
        }
    }
    if (*begin > *end)
        return FORMAT_BAD(p, "tensor '%.200s': data_offsets [%llu, %llu] begin after end", tname,
                   (unsigned long long)*begin, (unsigned long long)*end);
    if (*end > p->data_len)
        return FORMAT_BAD(p, "tensor '%.200s': data_offsets end %llu beyond the data section (%llu bytes)",
                   tname, (unsigned long long)*end, (unsigned long long)p->data_len);
    return 0;
}

/* Fills t from one header entry; begin/end are kept for the layout check. */
static int parse_tensor(parse_ctx *p, const cJSON *entry, st_tensor *t, uint64_t *begin,
                        uint64_t *end) {
    const char *tname = entry->string;
    if (!cJSON_IsObject(entry))
        return FORMAT_BAD(p, "tensor '%.200s': entry is %s, expected an object", tname, json_kind(entry));
    const cJSON *dtype = NULL, *shape = NULL, *offs = NULL;
    for (const cJSON *field = entry->child; field; field = field->next) {
        const cJSON **slot = !strcmp(field->string, "dtype")          ? &dtype
                             : !strcmp(field->string, "shape")        ? &shape
                             : !strcmp(field->string, "data_offsets") ? &offs
                                                                      : NULL;
        if (!slot) continue; /* unknown fields are ignored, as the reference does */
        if (*slot) return FORMAT_BAD(p, "tensor '%.200s': duplicate field '%s'", tname, field->string);
        *slot = field;
    }
    if (!dtype) return FORMAT_BAD(p, "tensor '%.200s': missing field 'dtype'", tname);
    if (!shape) return FORMAT_BAD(p, "tensor '%.200s': missing field 'shape'", tname);
    if (!offs) return FORMAT_BAD(p, "tensor '%.200s': missing field 'data_offsets'", tname);
    if (!cJSON_IsString(dtype))
        return FORMAT_BAD(p, "tensor '%.200s': dtype is %s, expected a string", tname, json_kind(dtype));
    if (!st_dtype_parse(dtype->valuestring, &t->dtype))
        return FORMAT_BAD(p,
                   "tensor '%.200s': unsupported dtype '%.40s' (expected F32, F16, BF16, F64, I32, "
                   "I64 or U8)",
                   tname, dtype->valuestring);
    int rc = parse_shape(p, tname, shape, t);
    if (!rc) rc = parse_offsets(p, tname, offs, begin, end);
    if (rc) return rc;
    uint64_t want;
    if (__builtin_mul_overflow((uint64_t)t->numel, (uint64_t)st_dtype_size(t->dtype), &want) ||
        want != *end - *begin)
        return FORMAT_BAD(p,
                   "tensor '%.200s': data_offsets span %llu bytes, shape x dtype size needs "
                   "%lld x %zu",
                   tname, (unsigned long long)(*end - *begin), (long long)t->numel,
                   st_dtype_size(t->dtype));
    t->name = tname;
    t->data = p->data + *begin;
    t->nbytes = (size_t)want;
    return 0;
}

static int parse_metadata(parse_ctx *p, st_file *f, const cJSON *meta) {
    if (cJSON_IsNull(meta)) return 0; /* the reference reads null as "no metadata" */
    if (!cJSON_IsObject(meta))
        return FORMAT_BAD(p, "__metadata__ is %s, expected an object of strings", json_kind(meta));
    size_t n = 0;
    for (const cJSON *kv = meta->child; kv; kv = kv->next) {
        if (!cJSON_IsString(kv))
            return FORMAT_BAD(p, "__metadata__ '%.200s' is %s, expected a string", kv->string,
                       json_kind(kv));
        n++;
    }
    f->meta = xcalloc(n, sizeof *f->meta);
    for (const cJSON *kv = meta->child; kv; kv = kv->next, f->n_meta++)
        f->meta[f->n_meta] = (st_meta){kv->string, kv->valuestring};
    return 0;
}

static int cmp_str_ptr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Duplicate keys in an object: cJSON keeps them all, the format forbids them. */
static const char *find_duplicate(const char **names, size_t n) {
    qsort(names, n, sizeof *names, cmp_str_ptr);
    for (size_t i = 1; i < n; i++)
        if (!strcmp(names[i - 1], names[i])) return names[i];
    return NULL;
}

static int check_unique(parse_ctx *p, st_file *f) {
    size_t n = f->n_tensors > f->n_meta ? f->n_tensors : f->n_meta;
    const char **names = xcalloc(n, sizeof *names);
    for (size_t i = 0; i < f->n_tensors; i++) names[i] = f->tensors[i].name;
    const char *dup = find_duplicate(names, f->n_tensors);
    int rc = 0;
    if (dup) {
        rc = FORMAT_BAD(p, "duplicate tensor name '%.200s'", dup);
    } else {
        for (size_t i = 0; i < f->n_meta; i++) names[i] = f->meta[i].key;
        dup = find_duplicate(names, f->n_meta);
        if (dup) rc = FORMAT_BAD(p, "duplicate __metadata__ key '%.200s'", dup);
    }
    free(names);
    return rc;
}

typedef struct {
    uint64_t begin, end;
    size_t index;
} extent;

static int cmp_extent(const void *a, const void *b) {
    const extent *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* As the format requires: tensors tile the data section exactly, no overlap,
 * no hole, nothing after the last one. Zero-size tensors sit at a boundary. */
static int check_layout(parse_ctx *p, st_file *f, extent *ext) {
    qsort(ext, f->n_tensors, sizeof *ext, cmp_extent);
    uint64_t pos = 0;
    const char *prev = NULL;
    for (size_t i = 0; i < f->n_tensors; i++) {
        const char *name = f->tensors[ext[i].index].name;
        if (ext[i].begin < pos)
            return FORMAT_BAD(p, "tensor '%.200s' at [%llu, %llu] overlaps tensor '%.200s' ending at %llu",
                       name, (unsigned long long)ext[i].begin, (unsigned long long)ext[i].end,
                       prev, (unsigned long long)pos);
        if (ext[i].begin > pos)
            return FORMAT_BAD(p, "gap of %llu unindexed bytes in the data section before tensor '%.200s'",
                       (unsigned long long)(ext[i].begin - pos), name);
        pos = ext[i].end;
        prev = name;
    }
    if (pos != p->data_len)
        return FORMAT_BAD(p, "data section has %llu trailing bytes after the last tensor",
                   (unsigned long long)(p->data_len - pos));
    return 0;
}

static name_array tensor_names(const st_file *f) {
    return (name_array){f->tensors, f->n_tensors, sizeof *f->tensors, offsetof(st_tensor, name)};
}

static int parse_entries(parse_ctx *p, st_file *f, const cJSON *root) {
    size_t n = 0;
    const cJSON *meta = NULL;
    for (const cJSON *it = root->child; it; it = it->next) {
        if (strcmp(it->string, "__metadata__")) {
            n++;
        } else {
            if (meta) return FORMAT_BAD(p, "duplicate key '__metadata__'");
            meta = it;
        }
    }
    if (meta) {
        int rc = parse_metadata(p, f, meta);
        if (rc) return rc;
    }
    f->tensors = xcalloc(n, sizeof *f->tensors);
    extent *ext = xcalloc(n, sizeof *ext);
    int rc = 0;
    for (const cJSON *it = root->child; it && !rc; it = it->next) {
        if (it == meta) continue;
        extent *x = &ext[f->n_tensors];
        rc = parse_tensor(p, it, &f->tensors[f->n_tensors], &x->begin, &x->end);
        x->index = f->n_tensors++;
    }
    if (!rc) rc = check_unique(p, f);
    if (!rc) rc = check_layout(p, f, ext);
    free(ext);
    if (rc) return rc;
    f->by_name = name_index_build(tensor_names(f));
    return 0;
}

static bool json_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static int parse_header(parse_ctx *p, st_file *f, const unsigned char *h, size_t n) {
    size_t bad_at;
    if (!st_utf8_valid(h, n, &bad_at))
        return FORMAT_BAD(p, "header is not valid UTF-8 (at header byte %zu)", bad_at);
    /* JSON allows no raw control characters; cJSON would accept some. */
    for (size_t i = 0; i < n; i++)
        if (h[i] < 0x20 && !json_space(h[i]))
            return FORMAT_BAD(p, "header is not valid JSON: control byte 0x%02x at header byte %zu", h[i],
                       i);
    /* cJSON turns \u0000 into a NUL that silently cuts a C string short: a
     * name or value would read as another one. */
    for (size_t i = 0; i + 1 < n; i++) {
        if (h[i] != '\\') continue;
        if (h[i + 1] == 'u' && n - i >= 6 && !memcmp(h + i + 2, "0000", 4))
            return FORMAT_BAD(p, "header holds \\u0000 at header byte %zu: names cannot contain NUL", i);
        i++; /* skip the escaped character, so \\u0000 is not taken for \u0000 */
    }
    if (h[0] != '{')
        return FORMAT_BAD(p, "header is not a JSON object (expected '{' at header byte 0, got 0x%02x)",
                   h[0]);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts((const char *)h, n, &end, 0);
    if (!root) {
        size_t at = end ? (size_t)((const unsigned char *)end - h) : 0;
        return FORMAT_BAD(p, "header is not valid JSON (near header byte %zu)", at);
    }
    f->json = root;
    for (size_t i = (size_t)((const unsigned char *)end - h); i < n; i++)
        if (!json_space(h[i]))
            return FORMAT_BAD(p, "header has bytes after the JSON object (at header byte %zu)", i);
    if (!cJSON_IsObject(root)) return FORMAT_BAD(p, "header is not a JSON object");
    return parse_entries(p, f, root);
}

int st_open_memory(st_file *f, const void *data, size_t len, const char *name, gerr *e) {
    memset(f, 0, sizeof *f);
    f->name = xstrdup(name);
    f->bytes = data;
    f->len = len;
    parse_ctx p = {.name = f->name, .e = e};
    gerr local;
    if (!e) p.e = &local; /* FORMAT_BAD needs somewhere to write */
    int rc;
    if (len < 8) {
        rc = FORMAT_BAD(&p, "file is %zu bytes, shorter than the 8-byte header length", len);
        goto fail;
    }
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | f->bytes[i];
    if (n == 0) {
        rc = FORMAT_BAD(&p, "header length is 0");
        goto fail;
    }
    if (n > len - 8) {
        rc = FORMAT_BAD(&p, "header length %llu runs past the end of the file (%zu bytes)",
                 (unsigned long long)n, len);
        goto fail;
    }
    if (n > ST_MAX_HEADER_BYTES) {
        rc = FORMAT_BAD(&p, "header length %llu exceeds the limit of %llu bytes", (unsigned long long)n,
                 (unsigned long long)ST_MAX_HEADER_BYTES);
        goto fail;
    }
    p.data = f->bytes + 8 + n;
    p.data_len = len - 8 - n;
    rc = parse_header(&p, f, f->bytes + 8, (size_t)n);
    if (!rc) return 0;
fail:
    st_close(f);
    return rc;
}

int st_open(st_file *f, const char *path, gerr *e) {
    memset(f, 0, sizeof *f);
    void *map;
    size_t len;
    int rc = map_file(path, &map, &len, e);
    if (rc) return rc;
    if (len < 8) {
        map_release(map, len);
        return gerr_set(e, EX_DATAERR, "%s: file is %zu bytes, shorter than the 8-byte header length", path, len);
    }
    if ((rc = st_open_memory(f, map, len, path, e))) {
        map_release(map, len);
        return rc;
    }
    f->map = map;
    f->map_len = len;
    return 0;
}

void st_close(st_file *f) {
    map_release(f->map, f->map_len);
    cJSON_Delete(f->json);
    free(f->name);
    free(f->tensors);
    free(f->meta);
    free(f->by_name);
    memset(f, 0, sizeof *f);
}

const st_tensor *st_find(const st_file *f, const char *name) {
    return name_index_find(tensor_names(f), f->by_name, name);
}

const char *st_meta_get(const st_file *f, const char *key) {
    for (size_t i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta[i].key, key)) return f->meta[i].value;
    return NULL;
}

/* Rounds like the hardware, without C's undefined behaviour past FLT_MAX. */
static float double_to_float(double d) {
    if (isfinite(d) && fabs(d) > FLT_MAX) {
        /* Below FLT_MAX + half an ulp rounds down; from there (a tie goes to even) up to inf. */
        float mag = fabs(d) >= 0x1.ffffffp127 ? INFINITY : FLT_MAX;
        return d < 0 ? -mag : mag;
    }
    return (float)d;
}

/* Converts elements [i0, i0 + n) of a floating-point tensor (f32_chunk_fn). */
static int convert_range(const void *tensor, float *out, size_t i0, size_t n) {
    const st_tensor *t = tensor;
    const unsigned char *src = t->data;
    switch (t->dtype) {
    case ST_F32:
        memcpy(out, src + 4 * i0, n * sizeof(float));
        return 0;
    case ST_F16:
    case ST_BF16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * (i0 + i), sizeof h); /* the mapping may be unaligned */
            out[i] = t->dtype == ST_F16 ? f16_to_f32(h) : bf16_to_f32(h);
        }
        return 0;
    case ST_F64:
        for (size_t i = 0; i < n; i++) {
            double d;
            memcpy(&d, src + 8 * (i0 + i), sizeof d);
            out[i] = double_to_float(d);
        }
        return 0;
    default:
        return EX_DATAERR;
    }
}

static int not_float(const st_file *f, const st_tensor *t, gerr *e) {
    return gerr_set(e, EX_DATAERR, "%s: tensor '%.200s': dtype %s is not floating point", f->name ? f->name : "-",
                    t->name, st_dtype_name(t->dtype));
}

int st_tensor_to_f32(const st_file *f, const st_tensor *t, float *out, gerr *e) {
    return convert_range(t, out, 0, (size_t)t->numel) ? not_float(f, t, e) : 0;
}

/* Values [first, first + n) of t into out, checked finite, a non-finite
 * one named by its index in t. */
static int values_to_f32_finite(const st_file *f, const st_tensor *t, int64_t first, int64_t n_values, float *out,
                                gerr *e) {
    st_tensor v = *t; /* the values alone */
    v.data = (const unsigned char *)t->data + (size_t)first * st_dtype_size(t->dtype);
    v.numel = n_values;
    v.nbytes = (size_t)v.numel * st_dtype_size(t->dtype);
    int rc;
    size_t n = (size_t)v.numel, bad = f32_fill_finite(out, n, convert_range, &v, &rc);
    if (rc) return not_float(f, t, e);
    return bad < n ? nonfinite_error(e, f->name ? f->name : "-", t->name, (size_t)first + bad, out[bad]) : 0;
}

int st_tensor_rows_to_f32_finite(const st_file *f, const st_tensor *t, int64_t row0, int64_t rows, float *out,
                                 gerr *e) {
    int64_t cols = t->ndim ? t->numel / t->shape[0] : 1; /* rows exist: shape[0] > 0 */
    return values_to_f32_finite(f, t, row0 * cols, rows * cols, out, e);
}

int st_tensor_to_f32_finite(const st_file *f, const st_tensor *t, float *out, gerr *e) {
    return values_to_f32_finite(f, t, 0, t->numel, out, e);
}
