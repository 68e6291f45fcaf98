/* GGUF reader (see gguf.h). One pass over the header checks every claim
 * against the bytes left in the file before acting on it; after that the
 * accessors may walk the metadata without checks. */
#include "gguf.h"

#include "../io/mapped.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../util/finite.h"
#include "../util/half.h"
#include "../util/name_index.h"
#include "format_err.h"
#include "quant.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "GGUF data is little-endian; this reader assumes a little-endian host"
#endif

static const char *const type_names[GGUF_NTYPES] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
};
/* Bytes of a fixed-size value; 0 for strings and arrays. */
static const size_t type_sizes[GGUF_NTYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

const char *gguf_type_name(gguf_type t) {
    return (unsigned)t < GGUF_NTYPES ? type_names[t] : "unknown";
}

/* ---- the parse cursor ------------------------------------------------------ */

typedef struct {
    const char *name; /* for messages */
    const unsigned char *b;
    size_t len, pos;
    gerr *e;
} cursor;

static size_t left(const cursor *c) { return c->len - c->pos; }

static uint64_t le(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* Reads an n-byte little-endian integer; "what" names it in the message. */
static int take(cursor *c, int n, uint64_t *v, const char *what) {
    *v = 0;
    if (left(c) < (size_t)n)
        return FORMAT_BAD(c, "truncated: %s at byte %zu needs %d bytes, the file has %zu", what, c->pos, n,
                   c->len);
    *v = le(c->b + c->pos, n);
    c->pos += (size_t)n;
    return 0;
}

static int take_u32(cursor *c, uint32_t *v, const char *what) {
    uint64_t x = 0;
    int rc = take(c, 4, &x, what);
    *v = (uint32_t)x;
    return rc;
}

static int take_str(cursor *c, gguf_str *s, const char *what) {
    uint64_t n = 0;
    int rc = take(c, 8, &n, what);
    if (rc) return rc;
    if (n > left(c))
        return FORMAT_BAD(c, "%s: string length %llu at byte %zu runs past the end of the file (%zu bytes)",
                   what, (unsigned long long)n, c->pos - 8, c->len);
    s->ptr = (const char *)c->b + c->pos;
    s->len = (size_t)n;
    c->pos += (size_t)n;
    return 0;
}

/* A NUL-terminated copy of a key or name, which must not hold NUL bytes. */
static int take_name(cursor *c, char **out, const char *what) {
    gguf_str s;
    int rc = take_str(c, &s, what);
    if (rc) return rc;
    if (memchr(s.ptr, 0, s.len))
        return FORMAT_BAD(c, "%s \"%.*s\" contains a NUL byte", what, (int)(s.len < 200 ? s.len : 200), s.ptr);
    *out = xstrndup(s.ptr, s.len);
    return 0;
}

/* Smallest encoded size of one element, to bound counts before allocating. */
static size_t min_size(gguf_type t) {
    return t == GGUF_STRING ? 8 : t == GGUF_ARRAY ? 12 : type_sizes[t];
}

/* Checks one value of type t at the cursor and steps over it. With v, fills
 * it in; a top-level array of strings or arrays also gets element offsets. */
static int parse_value(cursor *c, gguf_type t, int depth, gguf_value *v, const char *key) {
    if (v) *v = (gguf_value){.type = t, .data = c->b + c->pos, .base = c->b};
    if (type_sizes[t]) {
        if (left(c) < type_sizes[t])
            return FORMAT_BAD(c, "truncated: key \"%.200s\": %s value at byte %zu needs %zu bytes", key,
                       type_names[t], c->pos, type_sizes[t]);
        c->pos += type_sizes[t];
        return 0;
    }
    if (t == GGUF_STRING) {
        gguf_str s;
        return take_str(c, &s, "string value");
    }
    if (depth >= GGUF_MAX_DEPTH)
        return FORMAT_BAD(c, "key \"%.200s\": arrays nested deeper than %d levels", key, GGUF_MAX_DEPTH);
    uint32_t et = 0;
    uint64_t count = 0;
    int rc = take_u32(c, &et, "array element type");
    if (!rc) rc = take(c, 8, &count, "array count");
    if (rc) return rc;
    if (et >= GGUF_NTYPES)
        return FORMAT_BAD(c, "key \"%.200s\": unknown array element value type %u", key, et);
    if (count > left(c) / min_size((gguf_type)et))
        return FORMAT_BAD(c,
                   "key \"%.200s\": array count %llu of %s at byte %zu needs more than the %zu bytes "
                   "left in the file",
                   key, (unsigned long long)count, type_names[et], c->pos - 8, left(c));
    if (v) {
        v->elem_type = (gguf_type)et;
        v->count = count;
        v->data = c->b + c->pos;
    }
    if (type_sizes[et]) {
        c->pos += (size_t)count * type_sizes[et]; /* fits: checked against left() above */
        return 0;
    }
    uint64_t *offs = v && depth == 0 ? xmalloc((count ? count : 1) * sizeof *offs) : NULL;
    if (v) v->offs = offs;
    for (uint64_t i = 0; i < count; i++) {
        if (offs) offs[i] = c->pos;
        rc = parse_value(c, (gguf_type)et, depth + 1, NULL, key);
        if (rc) return rc; /* offs is freed with the kv by gguf_close */
    }
    return 0;
}

size_t gguf_value_bytes(gguf_type t, const unsigned char *p) {
    if (type_sizes[t]) return type_sizes[t];
    if (t == GGUF_STRING) return 8 + (size_t)le(p, 8);
    gguf_type et = (gguf_type)le(p, 4);
    uint64_t count = le(p + 4, 8);
    size_t n = 12;
    if (type_sizes[et]) return n + (size_t)count * type_sizes[et];
    for (uint64_t i = 0; i < count; i++) n += gguf_value_bytes(et, p + n);
    return n;
}

/* ---- sorting for lookup and duplicate checks ------------------------------- */

static name_array kv_names(const gguf_file *f) {
    return (name_array){f->kvs, f->n_kv, sizeof *f->kvs, offsetof(gguf_kv, key)};
}

static name_array tensor_names(const gguf_file *f) {
    return (name_array){f->tensors, f->n_tensors, sizeof *f->tensors, offsetof(gguf_tensor, name)};
}

/* ---- header ---------------------------------------------------------------- */

static int parse_kvs(cursor *c, gguf_file *f, uint64_t n) {
    /* Each KV takes at least 13 bytes: bound n before allocating. */
    if (n > left(c) / 13)
        return FORMAT_BAD(c, "truncated or corrupt: metadata count %llu is more than the %zu bytes left can hold",
                   (unsigned long long)n, left(c));
    f->kvs = xcalloc(n ? n : 1, sizeof *f->kvs);
    while (f->n_kv < n) {
        gguf_kv *kv = &f->kvs[f->n_kv];
        char *key;
        int rc = take_name(c, &key, "metadata key");
        if (rc) return rc;
        kv->key = key;
        f->n_kv++; /* from here gguf_close frees the key and any offsets */
        uint32_t t;
        rc = take_u32(c, &t, "value type");
        if (rc) return rc;
        if (t >= GGUF_NTYPES) return FORMAT_BAD(c, "key \"%.200s\": unknown value type %u", key, t);
        rc = parse_value(c, (gguf_type)t, 0, &kv->v, key);
        if (rc) return rc;
    }
    f->kv_by_key = name_index_build(kv_names(f));
    for (size_t i = 1; i < f->n_kv; i++)
        if (!strcmp(f->kvs[f->kv_by_key[i]].key, f->kvs[f->kv_by_key[i - 1]].key))
            return FORMAT_BAD(c, "duplicate metadata key \"%.200s\"", f->kvs[f->kv_by_key[i]].key);
    return 0;
}

static int parse_alignment(cursor *c, gguf_file *f) {
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    const gguf_kv *kv = gguf_find_kv(f, "general.alignment");
    if (!kv) return 0;
    uint64_t a;
    if (!gguf_value_u64(&kv->v, &a))
        return FORMAT_BAD(c, "key \"general.alignment\": expected an integer, got %s",
                   type_names[kv->v.type]);
    if (a == 0 || (a & (a - 1)) || a > (1u << 30))
        return FORMAT_BAD(c, "key \"general.alignment\": alignment %llu is not a power of two up to 2^30",
                   (unsigned long long)a);
    f->alignment = a;
    return 0;
}

static int parse_tensor_info(cursor *c, gguf_file *f, gguf_tensor *t) {
    char *name;
    int rc = take_name(c, &name, "tensor name");
    if (rc) return rc;
    t->name = name;
    uint32_t n_dims;
    rc = take_u32(c, &n_dims, "tensor n_dims");
    if (rc) return rc;
    if (n_dims > GGUF_MAX_DIMS)
        return FORMAT_BAD(c, "tensor '%.200s': n_dims %u is more than %d", name, n_dims, GGUF_MAX_DIMS);
    t->n_dims = (int)n_dims;
    t->numel = 1;
    for (int i = 0; i < GGUF_MAX_DIMS; i++) {
        t->dims[i] = 1;
        if (i >= t->n_dims) continue;
        rc = take(c, 8, &t->dims[i], "tensor dimension");
        if (rc) return rc;
        if (t->dims[i] > (uint64_t)INT64_MAX || __builtin_mul_overflow(t->numel, t->dims[i], &t->numel) ||
            t->numel > (uint64_t)INT64_MAX)
            return FORMAT_BAD(c, "tensor '%.200s': dimensions overflow", name);
    }
    rc = take_u32(c, &t->type, "tensor type");
    if (!rc) rc = take(c, 8, &t->offset, "tensor offset");
    if (rc) return rc;
    const char *tn = quant_type_name(t->type);
    if (!tn) return FORMAT_BAD(c, "tensor '%.200s': unknown tensor type %u", name, t->type);
    size_t block = quant_block_size(t->type);
    if (t->dims[0] % block)
        return FORMAT_BAD(c, "tensor '%.200s': first dimension %llu is not a multiple of %s's block size %zu",
                   name, (unsigned long long)t->dims[0], tn, block);
    uint64_t rows = t->numel / (t->dims[0] ? t->dims[0] : 1);
    if (__builtin_mul_overflow((uint64_t)(t->dims[0] / block), (uint64_t)quant_type_size(t->type),
                               &t->nbytes) ||
        __builtin_mul_overflow(t->nbytes, t->dims[0] ? rows : 0, &t->nbytes))
        return FORMAT_BAD(c, "tensor '%.200s': byte size overflows", name);
    if (t->offset % f->alignment)
        return FORMAT_BAD(c, "tensor '%.200s': offset %llu is misaligned (alignment %llu)", name,
                   (unsigned long long)t->offset, (unsigned long long)f->alignment);
    return 0;
}

static int parse_tensors(cursor *c, gguf_file *f, uint64_t n) {
    /* Each tensor info takes at least 24 bytes (empty name, 0 dims). */
    if (n > left(c) / 24)
        return FORMAT_BAD(c, "truncated or corrupt: tensor count %llu is more than the %zu bytes left can hold",
                   (unsigned long long)n, left(c));
    f->tensors = xcalloc(n ? n : 1, sizeof *f->tensors);
    for (; f->n_tensors < n; f->n_tensors++) {
        int rc = parse_tensor_info(c, f, &f->tensors[f->n_tensors]);
        if (rc) {
            f->n_tensors++; /* so gguf_close frees its name */
            return rc;
        }
    }
    /* The data section starts at the next multiple of the alignment. */
    uint64_t pad = (f->alignment - c->pos % f->alignment) % f->alignment;
    f->data_offset = (uint64_t)c->pos + pad;
    for (size_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        uint64_t begin, end;
        if (__builtin_add_overflow(f->data_offset, t->offset, &begin) ||
            __builtin_add_overflow(begin, t->nbytes, &end) || end > c->len)
            return FORMAT_BAD(c,
                       "tensor '%.200s': data (offset %llu, %llu bytes) runs past the end of the file "
                       "(%zu bytes, data section at %llu)",
                       t->name, (unsigned long long)t->offset, (unsigned long long)t->nbytes, c->len,
                       (unsigned long long)f->data_offset);
        t->data = c->b + begin;
    }
    f->tensor_by_name = name_index_build(tensor_names(f));
    for (size_t i = 1; i < f->n_tensors; i++)
        if (!strcmp(f->tensors[f->tensor_by_name[i]].name, f->tensors[f->tensor_by_name[i - 1]].name))
            return FORMAT_BAD(c, "duplicate tensor name '%.200s'", f->tensors[f->tensor_by_name[i]].name);
    return 0;
}

static int parse(cursor *c, gguf_file *f) {
    if (c->len < 4)
        return FORMAT_BAD(c, "truncated: %zu bytes, too short for the GGUF magic", c->len);
    if (memcmp(c->b, "GGUF", 4))
        return FORMAT_BAD(c, "bad magic 0x%02x%02x%02x%02x: not a GGUF file", c->b[0], c->b[1], c->b[2],
                   c->b[3]);
    c->pos = 4;
    uint64_t n_tensors = 0, n_kv = 0;
    int rc = take_u32(c, &f->version, "version");
    if (rc) return rc;
    if (f->version != 2 && f->version != 3)
        return FORMAT_BAD(c, "GGUF version %u is not supported (versions 2 and 3 are)%s", f->version,
                   f->version > 0xFFFF ? "; a big-endian file?" : "");
    rc = take(c, 8, &n_tensors, "tensor count");
    if (!rc) rc = take(c, 8, &n_kv, "metadata count");
    if (!rc) rc = parse_kvs(c, f, n_kv);
    if (!rc) rc = parse_alignment(c, f);
    if (!rc) rc = parse_tensors(c, f, n_tensors);
    return rc;
}

int gguf_open_memory(gguf_file *f, const void *data, size_t len, const char *name, gerr *e) {
    memset(f, 0, sizeof *f);
    f->name = xstrdup(name);
    f->bytes = data;
    f->len = len;
    gerr local;
    cursor c = {.name = f->name, .b = data, .len = len, .e = e ? e : &local};
    int rc = parse(&c, f);
    if (rc) gguf_close(f);
    return rc;
}

int gguf_open(gguf_file *f, const char *path, gerr *e) {
    memset(f, 0, sizeof *f);
    void *map;
    size_t len;
    int rc = map_file(path, &map, &len, e);
    if (rc) return rc;
    /* an empty file gets the parser's message */
    if ((rc = gguf_open_memory(f, map ? map : "", len, path, e))) {
        map_release(map, len);
        return rc;
    }
    f->map = map;
    f->map_len = len;
    return 0;
}

void gguf_close(gguf_file *f) {
    map_release(f->map, f->map_len);
    for (size_t i = 0; i < f->n_kv; i++) {
        free((void *)f->kvs[i].key);
        free((void *)f->kvs[i].v.offs);
    }
    for (size_t i = 0; i < f->n_tensors; i++) free((void *)f->tensors[i].name);
    free(f->kvs);
    free(f->tensors);
    free(f->kv_by_key);
    free(f->tensor_by_name);
    free(f->name);
    memset(f, 0, sizeof *f);
}

/* ---- lookup ---------------------------------------------------------------- */

const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key) {
    return name_index_find(kv_names(f), f->kv_by_key, key);
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name) {
    return name_index_find(tensor_names(f), f->tensor_by_name, name);
}

/* ---- values ---------------------------------------------------------------- */

static bool is_unsigned(gguf_type t) {
    return t == GGUF_U8 || t == GGUF_U16 || t == GGUF_U32 || t == GGUF_U64;
}
static bool is_signed(gguf_type t) {
    return t == GGUF_I8 || t == GGUF_I16 || t == GGUF_I32 || t == GGUF_I64;
}

/* Sign-extends an n-byte two's complement integer. */
static int64_t sext(uint64_t v, size_t n) {
    if (n == 8) return (int64_t)v;
    uint64_t sign = 1ull << (8 * n - 1);
    return (int64_t)((v ^ sign) - sign);
}

bool gguf_value_u64(const gguf_value *v, uint64_t *out) {
    if (is_unsigned(v->type)) {
        *out = le(v->data, (int)type_sizes[v->type]);
        return true;
    }
    if (!is_signed(v->type)) return false;
    int64_t s = sext(le(v->data, (int)type_sizes[v->type]), type_sizes[v->type]);
    if (s < 0) return false;
    *out = (uint64_t)s;
    return true;
}

bool gguf_value_i64(const gguf_value *v, int64_t *out) {
    if (is_signed(v->type)) {
        *out = sext(le(v->data, (int)type_sizes[v->type]), type_sizes[v->type]);
        return true;
    }
    if (!is_unsigned(v->type)) return false;
    uint64_t u = le(v->data, (int)type_sizes[v->type]);
    if (u > (uint64_t)INT64_MAX) return false;
    *out = (int64_t)u;
    return true;
}

/* Integers exactly representable with `bits` of mantissa. */
static bool int_as_double(const gguf_value *v, int bits, double *out) {
    int64_t s;
    uint64_t u;
    uint64_t lim = 1ull << bits;
    if (gguf_value_i64(v, &s) && (s >= 0 ? (uint64_t)s : -(uint64_t)s) <= lim) {
        *out = (double)s;
        return true;
    }
    if (gguf_value_u64(v, &u) && u <= lim) {
        *out = (double)u;
        return true;
    }
    return false;
}

bool gguf_value_f64(const gguf_value *v, double *out) {
    if (v->type == GGUF_F32) {
        float x;
        memcpy(&x, v->data, sizeof x);
        *out = x;
        return true;
    }
    if (v->type == GGUF_F64) {
        memcpy(out, v->data, sizeof *out);
        return true;
    }
    return int_as_double(v, 53, out);
}

bool gguf_value_f32(const gguf_value *v, float *out) {
    double d;
    if (v->type == GGUF_F32) {
        memcpy(out, v->data, sizeof *out);
        return true;
    }
    if (v->type == GGUF_F64) {
        memcpy(&d, v->data, sizeof d);
        /* Only when float holds it exactly (NaN and inf included). */
        if (isnan(d) || (fabs(d) <= FLT_MAX && (double)(float)d == d) || isinf(d)) {
            *out = (float)d;
            return true;
        }
        return false;
    }
    if (!int_as_double(v, 24, &d)) return false;
    *out = (float)d;
    return true;
}

bool gguf_value_bool(const gguf_value *v, bool *out) {
    if (v->type != GGUF_BOOL) return false;
    *out = v->data[0] != 0;
    return true;
}

bool gguf_value_str(const gguf_value *v, gguf_str *out) {
    if (v->type != GGUF_STRING) return false;
    out->len = (size_t)le(v->data, 8);
    out->ptr = (const char *)v->data + 8;
    return true;
}

gguf_value gguf_array_at(const gguf_value *arr, uint64_t i) {
    gguf_value v = {.type = arr->elem_type, .base = arr->base};
    size_t size = type_sizes[arr->elem_type];
    if (size) {
        v.data = arr->data + (size_t)i * size;
    } else if (arr->offs) {
        v.data = arr->base + arr->offs[i];
    } else {
        const unsigned char *p = arr->data;
        for (uint64_t k = 0; k < i; k++) p += gguf_value_bytes(arr->elem_type, p);
        v.data = p;
    }
    if (v.type == GGUF_ARRAY) {
        v.elem_type = (gguf_type)le(v.data, 4);
        v.count = le(v.data + 4, 8);
        v.data += 12;
    }
    return v;
}

gguf_str gguf_array_str(const gguf_value *arr, uint64_t i) {
    gguf_value v = gguf_array_at(arr, i);
    gguf_str s = {"", 0};
    gguf_value_str(&v, &s);
    return s;
}

int64_t gguf_array_int(const gguf_value *arr, uint64_t i) {
    gguf_value v = gguf_array_at(arr, i);
    int64_t x = 0;
    gguf_value_i64(&v, &x);
    return x;
}

double gguf_array_float(const gguf_value *arr, uint64_t i) {
    gguf_value v = gguf_array_at(arr, i);
    double x = 0;
    gguf_value_f64(&v, &x);
    return x;
}

/* ---- typed lookups --------------------------------------------------------- */

static int find(const gguf_file *f, const char *key, const gguf_kv **kv, gerr *e) {
    *kv = gguf_find_kv(f, key);
    if (!*kv) return gerr_set(e, EX_DATAERR, "%s: key \"%.200s\" is missing", f->name, key);
    return 0;
}

static int wrong(const gguf_file *f, const char *key, const char *expected, const gguf_value *v,
                 gerr *e) {
    if (v->type == GGUF_ARRAY)
        return gerr_set(e, EX_DATAERR, "%s: key \"%.200s\": expected %s, got an array of %s", f->name,
                        key, expected, type_names[v->elem_type]);
    return gerr_set(e, EX_DATAERR, "%s: key \"%.200s\": expected %s, got %s", f->name, key, expected,
                    type_names[v->type]);
}

int gguf_get_u64(const gguf_file *f, const char *key, uint64_t *out, gerr *e) {
    const gguf_kv *kv;
    int rc = find(f, key, &kv, e);
    if (rc) return rc;
    if (!gguf_value_u64(&kv->v, out)) {
        int64_t s;
        if (gguf_value_i64(&kv->v, &s))
            return gerr_set(e, EX_DATAERR, "%s: key \"%.200s\": expected a non-negative integer, got %lld",
                            f->name, key, (long long)s);
        return wrong(f, key, "an integer", &kv->v, e);
    }
    return 0;
}

int gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out, gerr *e) {
    uint64_t v;
    int rc = gguf_get_u64(f, key, &v, e);
    if (rc) return rc;
    if (v > UINT32_MAX)
        return gerr_set(e, EX_DATAERR, "%s: key \"%.200s\": %llu does not fit in 32 bits", f->name, key,
                        (unsigned long long)v);
    *out = (uint32_t)v;
    return 0;
}

int gguf_get_i64(const gguf_file *f, const char *key, int64_t *out, gerr *e) {
    const gguf_kv *kv;
    int rc = find(f, key, &kv, e);
    if (rc) return rc;
    if (!gguf_value_i64(&kv->v, out)) {
        if (is_unsigned(kv->v.type))
            return gerr_set(e, EX_DATAERR, "%s: key \"%.200s\": value does not fit in 63 bits", f->name,
                            key);
        return wrong(f, key, "an integer", &kv->v, e);
    }
    return 0;
}

int gguf_get_f32(const gguf_file *f, const char *key, float *out, gerr *e) {
    const gguf_kv *kv;
    int rc = find(f, key, &kv, e);
    if (rc) return rc;
    if (!gguf_value_f32(&kv->v, out))
        return wrong(f, key, "a number exactly representable as f32", &kv->v, e);
    return 0;
}

int gguf_get_bool(const gguf_file *f, const char *key, bool *out, gerr *e) {
    const gguf_kv *kv;
    int rc = find(f, key, &kv, e);
    if (rc) return rc;
    if (!gguf_value_bool(&kv->v, out)) return wrong(f, key, "a bool", &kv->v, e);
    return 0;
}

int gguf_get_string(const gguf_file *f, const char *key, gguf_str *out, gerr *e) {
    const gguf_kv *kv;
    int rc = find(f, key, &kv, e);
    if (rc) return rc;
    if (!gguf_value_str(&kv->v, out)) return wrong(f, key, "a string", &kv->v, e);
    return 0;
}

int gguf_get_array(const gguf_file *f, const char *key, gguf_type elem, gguf_value *out, gerr *e) {
    const gguf_kv *kv;
    int rc = find(f, key, &kv, e);
    if (rc) return rc;
    if (kv->v.type != GGUF_ARRAY) return wrong(f, key, "an array", &kv->v, e);
    if (elem != GGUF_NTYPES && kv->v.elem_type != elem) {
        char want[40];
        snprintf(want, sizeof want, "an array of %s", gguf_type_name(elem));
        return wrong(f, key, want, &kv->v, e);
    }
    *out = kv->v;
    return 0;
}

/* ---- tensors --------------------------------------------------------------- */

int gguf_tensor_to_f32(const gguf_file *f, const gguf_tensor *t, float *out, gerr *e) {
    gerr local;
    gerr *inner = e ? e : &local; /* quant_dequantize has no path: add ours */
    if (t->numel > SIZE_MAX / sizeof(float))
        return gerr_set(e, EX_DATAERR, "%s: tensor '%.200s': too large", f->name, t->name);
    int rc = quant_dequantize(t->type, t->data, out, (size_t)t->numel, inner);
    if (rc) {
        char msg[sizeof inner->msg];
        snprintf(msg, sizeof msg, "%s", inner->msg);
        return gerr_set(e, rc, "%s: tensor '%.200s': %s", f->name, t->name, msg);
    }
    return 0;
}

/* Dequantizes values [i0, i0 + n) of a tensor (f32_chunk_fn); i0 and n are
 * whole blocks. */
static int dequantize_range(const void *tensor, float *out, size_t i0, size_t n) {
    const gguf_tensor *t = tensor;
    gerr ignored; /* gguf_tensor_to_f32 gives the message */
    return quant_dequantize_here(t->type, (const unsigned char *)t->data + quant_row_bytes(t->type, i0), out, n,
                                 &ignored);
}

/* Values [first, first + n) of t into out (first whole blocks), checked
 * finite, a non-finite one named by its index in t. */
static int values_to_f32_finite(const gguf_file *f, const gguf_tensor *t, uint64_t first, uint64_t n_values,
                                float *out, gerr *e) {
    assert(first + n_values <= t->numel && first % quant_block_size(t->type) == 0);
    gguf_tensor v = *t; /* the values alone: whole blocks */
    v.data = (const unsigned char *)t->data + quant_row_bytes(t->type, (size_t)first);
    v.numel = n_values;
    size_t n = (size_t)v.numel, bs = quant_block_size(t->type), bad;
    int rc = 0;
    if (!quant_supported(t->type) || n % bs || FINITE_CHUNK % bs || n > SIZE_MAX / sizeof(float))
        bad = (rc = gguf_tensor_to_f32(f, &v, out, e)) ? n : f32_first_nonfinite(out, n); /* its error, or one pass */
    else if ((bad = f32_fill_finite(out, n, dequantize_range, &v, &rc)), rc)
        rc = gguf_tensor_to_f32(f, &v, out, e); /* cannot fail after the checks above: its message if it does */
    if (rc) return rc;
    return bad < n ? nonfinite_error(e, f->name, t->name, (size_t)first + bad, out[bad]) : 0;
}

int gguf_tensor_rows_to_f32_finite(const gguf_file *f, const gguf_tensor *t, uint64_t row0, uint64_t rows, float *out,
                                   gerr *e) {
    uint64_t cols = t->n_dims ? t->dims[0] : 1;
    return values_to_f32_finite(f, t, row0 * cols, rows * cols, out, e);
}

int gguf_tensor_to_f32_finite(const gguf_file *f, const gguf_tensor *t, float *out, gerr *e) {
    return values_to_f32_finite(f, t, 0, t->numel, out, e);
}

int gguf_q8_0_check_finite(const gguf_file *f, const gguf_tensor *t, gerr *e) {
    assert(t->type == GGML_TYPE_Q8_0);
    const unsigned char *b = t->data;
    size_t n_blocks = (size_t)t->numel / quant_block_size(t->type), bytes = quant_type_size(t->type);
    for (size_t i = 0; i < n_blocks; i++, b += bytes) {
        uint16_t d = (uint16_t)(b[0] | b[1] << 8);
        if ((d & 0x7C00) != 0x7C00) continue; /* f16 exponent all ones: inf or NaN */
        /* the block's first value is q[0] * d, as the dequantizer computes it */
        return nonfinite_error(e, f->name, t->name, i * quant_block_size(t->type),
                               (float)(int8_t)b[2] * f16_to_f32(d));
    }
    return 0;
}
