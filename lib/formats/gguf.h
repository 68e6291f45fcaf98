/* GGUF reader (versions 2 and 3): a read-only mmap, checked once at open.
 *
 * Layout (little-endian): "GGUF", u32 version, u64 tensor count, u64 KV count;
 * KVs (string key, u32 value type, value); tensor infos (string name, u32
 * n_dims, u64 dims[n_dims] innermost first, u32 ggml type, u64 offset into
 * the data section); padding to general.alignment (default 32); the data
 * section. Strings are u64 length + bytes, not NUL-terminated. Arrays are u32
 * element type, u64 count, elements (arrays may nest).
 *
 * gguf_open checks every length, count and offset against the file before
 * anything is handed out: a corrupt or truncated file is a one-line
 * EX_DATAERR "PATH: what is wrong", never a crash or a read outside the file.
 * Values point into the mapping (unaligned: read through the accessors).
 * As with any mapping, a file truncated by another process while open raises
 * SIGBUS on access. */
#ifndef GRPO_GGUF_H
#define GRPO_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"

enum { GGUF_MAX_DIMS = 4, GGUF_MAX_DEPTH = 8, GGUF_DEFAULT_ALIGNMENT = 32 };

/* The value type numbers of the format. */
typedef enum {
    GGUF_U8 = 0, GGUF_I8 = 1, GGUF_U16 = 2, GGUF_I16 = 3, GGUF_U32 = 4, GGUF_I32 = 5,
    GGUF_F32 = 6, GGUF_BOOL = 7, GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_U64 = 10,
    GGUF_I64 = 11, GGUF_F64 = 12, GGUF_NTYPES
} gguf_type;

/* "u32", "string", "array" ...; "unknown" outside the enum. */
const char *gguf_type_name(gguf_type t);

typedef struct {
    const char *ptr; /* inside the mapping; not NUL-terminated, may hold any bytes */
    size_t len;
} gguf_str;

/* A metadata value. Scalars: data points at the value's bytes. Strings: at
 * the u64 length. Arrays: at the first element, with elem_type and count;
 * offs, when not NULL, gives each element's position in the file (kept for
 * top-level arrays of strings or arrays, so element i costs O(1); nested ones
 * are walked). */
typedef struct {
    gguf_type type;
    const unsigned char *data;
    gguf_type elem_type;
    uint64_t count;
    const uint64_t *offs;
    const unsigned char *base; /* the file's first byte, for offs */
} gguf_value;

typedef struct {
    const char *key; /* NUL-terminated copy (keys with NUL bytes are rejected) */
    gguf_value v;
} gguf_kv;

typedef struct {
    const char *name;               /* NUL-terminated copy */
    int n_dims;                     /* 0..GGUF_MAX_DIMS (0: a scalar) */
    uint64_t dims[GGUF_MAX_DIMS];   /* innermost first (ggml's ne); unused ones are 1 */
    uint32_t type;                  /* ggml type number (quant.h) */
    uint64_t offset;                /* in the data section */
    uint64_t numel;
    uint64_t nbytes;
    const void *data;               /* inside the mapping; may be unaligned */
} gguf_tensor;

typedef struct {
    char *name; /* the path, for messages */
    void *map;  /* NULL when parsing caller memory */
    size_t map_len;
    const unsigned char *bytes;
    size_t len;
    uint32_t version;
    uint64_t alignment;
    uint64_t data_offset; /* start of the data section */
    gguf_kv *kvs;         /* in file order */
    size_t n_kv;
    gguf_tensor *tensors; /* in file order */
    size_t n_tensors;
    size_t *kv_by_key, *tensor_by_name; /* indexes sorted for lookup */
} gguf_file;

/* Maps path read-only and checks it. EX_NOINPUT when missing, EX_DATAERR when
 * malformed or unsupported (version, type), EX_IOERR when unreadable. On
 * error f is left closed. */
int gguf_open(gguf_file *f, const char *path, gerr *e);
/* Same over caller memory kept alive until gguf_close; name is for messages. */
int gguf_open_memory(gguf_file *f, const void *data, size_t len, const char *name, gerr *e);
void gguf_close(gguf_file *f);

/* NULL when absent. */
const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key);
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);

/* Lossless reads of a value; false when its type does not convert exactly
 * (integers of any width and sign to u64/i64 when in range; f32, f64, and
 * integers up to 2^24 to float when exact; bool only from bool; strings only
 * from strings). */
bool gguf_value_u64(const gguf_value *v, uint64_t *out);
bool gguf_value_i64(const gguf_value *v, int64_t *out);
bool gguf_value_f64(const gguf_value *v, double *out);
bool gguf_value_f32(const gguf_value *v, float *out);
bool gguf_value_bool(const gguf_value *v, bool *out);
bool gguf_value_str(const gguf_value *v, gguf_str *out);
/* Encoded size of the value of type t at p, as gguf_open checked it: a
 * string with its u64 length, an array with its element type, count and
 * every element (nested arrays walked). p points into an opened file. */
size_t gguf_value_bytes(gguf_type t, const unsigned char *p);
/* Element i (< count) of an array value. */
gguf_value gguf_array_at(const gguf_value *arr, uint64_t i);
/* Shortcuts for arrays of strings and numbers; the element type must match
 * (checked by gguf_get_array) and i < count. */
gguf_str gguf_array_str(const gguf_value *arr, uint64_t i);
int64_t gguf_array_int(const gguf_value *arr, uint64_t i);    /* any integer element type but u64 > INT64_MAX */
double gguf_array_float(const gguf_value *arr, uint64_t i);   /* f32 or f64 elements */

/* Typed lookups: EX_DATAERR "PATH: key \"K\" is missing" or "PATH: key \"K\":
 * expected an integer, got string" (or out of range). */
int gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out, gerr *e);
int gguf_get_u64(const gguf_file *f, const char *key, uint64_t *out, gerr *e);
int gguf_get_i64(const gguf_file *f, const char *key, int64_t *out, gerr *e);
int gguf_get_f32(const gguf_file *f, const char *key, float *out, gerr *e);
int gguf_get_bool(const gguf_file *f, const char *key, bool *out, gerr *e);
int gguf_get_string(const gguf_file *f, const char *key, gguf_str *out, gerr *e);
/* An array whose elements are of type elem (GGUF_NTYPES: any). */
int gguf_get_array(const gguf_file *f, const char *key, gguf_type elem, gguf_value *out, gerr *e);

/* Dequantizes a tensor into out[numel]. EX_DATAERR naming the tensor and the
 * type when the type is not supported (quant.h). */
int gguf_tensor_to_f32(const gguf_file *f, const gguf_tensor *t, float *out, gerr *e);
/* The same, and EX_DATAERR naming the file, the tensor and the first NaN or
 * infinity (lib/util/finite.h): how weights are loaded. */
int gguf_tensor_to_f32_finite(const gguf_file *f, const gguf_tensor *t, float *out, gerr *e);
/* Its rows [row0, row0 + rows) alone (a row: dims[0] values) into
 * out[rows * dims[0]], the same check, the index in the message the
 * tensor's. */
int gguf_tensor_rows_to_f32_finite(const gguf_file *f, const gguf_tensor *t, uint64_t row0, uint64_t rows, float *out,
                                   gerr *e);
/* gguf_tensor_to_f32_finite's check of a Q8_0 tensor without its floats:
 * a value q * d is finite exactly when its block's scale d is, so only the
 * scales are read. 0, or the same EX_DATAERR (the same first value) as
 * gguf_tensor_to_f32_finite; t must be Q8_0 (asserted). */
int gguf_q8_0_check_finite(const gguf_file *f, const gguf_tensor *t, gerr *e);

#endif
