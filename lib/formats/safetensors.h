/* safetensors files: a read-only mmap reader and an atomic writer.
 *
 * Layout (formats/checkpoint.md): 8-byte little-endian header length N, N
 * bytes of UTF-8 JSON ({"NAME": {"dtype", "shape", "data_offsets"}, ...,
 * optional "__metadata__": {string: string}}), then the data section.
 * Offsets are relative to the data section.
 *
 * The reader checks everything the header claims before handing out a
 * pointer: a malformed file is a one-line error (EX_DATAERR), never a crash
 * or a read outside the file. Tensor data points into the mapping and may be
 * unaligned: read it with memcpy or st_tensor_to_f32, not by casting.
 * As with any mapping, a file truncated by another process while open
 * raises SIGBUS on access; checkpoints are replaced by rename, never
 * rewritten in place, so this does not happen to files we write. */
#ifndef GRPO_SAFETENSORS_H
#define GRPO_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../util/progress.h"

#include "../util/err.h"

enum { ST_MAX_DIMS = 8 };
/* The reference implementation's limit on the header length. */
#define ST_MAX_HEADER_BYTES ((uint64_t)100000000)

typedef enum { ST_F32, ST_F16, ST_BF16, ST_F64, ST_I32, ST_I64, ST_U8, ST_NDTYPES } st_dtype;

/* "F32" etc.; NULL for a value outside the enum. */
const char *st_dtype_name(st_dtype d);
/* Parses a dtype string; false when it is not one we support. */
bool st_dtype_parse(const char *name, st_dtype *out);
/* Bytes per element; 0 for a value outside the enum. */
size_t st_dtype_size(st_dtype d);

typedef struct {
    const char *name; /* NUL-terminated, owned by the st_file */
    st_dtype dtype;
    int ndim; /* 0 for a scalar */
    int64_t shape[ST_MAX_DIMS];
    int64_t numel;    /* product of shape (1 for a scalar) */
    const void *data; /* inside the mapping; may be unaligned */
    size_t nbytes;    /* numel * st_dtype_size(dtype) */
} st_tensor;

typedef struct {
    const char *key, *value;
} st_meta;

typedef struct {
    char *name;          /* the path, for messages */
    void *map;           /* the mapping, NULL when parsing caller memory */
    size_t map_len;
    const unsigned char *bytes; /* whole file */
    size_t len;
    st_tensor *tensors;  /* in header order */
    size_t n_tensors;
    st_meta *meta;       /* __metadata__, in header order */
    size_t n_meta;
    size_t *by_name;     /* tensor indexes sorted by name, for lookup */
    void *json;          /* the parsed header (cJSON*): names point into it */
} st_file;

/* Maps path read-only and checks its header. Errors: EX_NOINPUT when the file
 * is missing, EX_DATAERR when malformed, EX_IOERR when it cannot be read.
 * On error f is left closed (st_close is safe but not needed). */
int st_open(st_file *f, const char *path, gerr *e);
/* Same checks over a buffer the caller keeps alive until st_close; name is
 * used in messages. */
int st_open_memory(st_file *f, const void *data, size_t len, const char *name, gerr *e);
void st_close(st_file *f);

/* NULL when absent. */
const st_tensor *st_find(const st_file *f, const char *name);
/* The __metadata__ value for key, NULL when absent. */
const char *st_meta_get(const st_file *f, const char *key);

/* Converts an F32, F16, BF16 or F64 tensor to out[numel] floats (F64 is
 * rounded). EX_DATAERR for integer dtypes, naming the tensor. */
int st_tensor_to_f32(const st_file *f, const st_tensor *t, float *out, gerr *e);
/* The same, and EX_DATAERR naming the file, the tensor and the first NaN or
 * infinity (lib/util/finite.h): how weights are loaded. */
int st_tensor_to_f32_finite(const st_file *f, const st_tensor *t, float *out, gerr *e);
/* Its rows [row0, row0 + rows) alone (a row: numel / shape[0] values) into
 * out, the same check, the index in the message the tensor's. */
int st_tensor_rows_to_f32_finite(const st_file *f, const st_tensor *t, int64_t row0, int64_t rows, float *out,
                                 gerr *e);

/* ---- writer ---------------------------------------------------------------
 * Collects tensors and metadata, then writes them in one go. Data is not
 * copied: each pointer must stay valid until st_write returns. Tensors are
 * laid out contiguously in the order added, the header is padded with spaces
 * to a multiple of 8 bytes, so the data section starts 8-aligned. */
typedef struct {
    char *name;
    st_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    const void *data;
    size_t nbytes;
    void *owned; /* data converted by st_writer_add_f32, freed with the writer */
} st_wtensor;

typedef struct {
    st_wtensor *tensors;
    size_t n_tensors, cap_tensors;
    char **meta_keys, **meta_values;
    size_t n_meta, cap_meta;
    size_t *slots; /* open-addressing hash of tensor indexes + 1, for duplicate names */
    size_t n_slots;
    progress *pg; /* not NULL: st_write counts the tensors written in it */
} st_writer;

void st_writer_init(st_writer *w);
/* Adds a tensor. EX_DATAERR for a duplicate or invalid name (not UTF-8,
 * "__metadata__"), EX_SOFTWARE for a bad dtype, ndim, shape or NULL data. */
int st_writer_add(st_writer *w, const char *name, st_dtype dtype, int ndim, const int64_t *shape,
                  const void *data, gerr *e);
/* The same from float32 data written as dtype: ST_F32 as it is (kept by
 * pointer, as st_writer_add), ST_F16 or ST_BF16 converted now (round to
 * nearest even, lib/util/half.h) into a copy the writer owns. Another dtype
 * is EX_SOFTWARE. */
int st_writer_add_f32(st_writer *w, const char *name, st_dtype dtype, int ndim, const int64_t *shape,
                      const float *data, gerr *e);
/* Sets a __metadata__ entry (a second call with the same key replaces it).
 * EX_DATAERR when key or value is not UTF-8. */
int st_writer_set_meta(st_writer *w, const char *key, const char *value, gerr *e);
/* Writes path atomically (temporary, fsync, rename). A path ending in ".zst"
 * is refused (EX_SOFTWARE): outstream would compress it, and no safetensors
 * reader reads that. */
int st_write(const st_writer *w, const char *path, gerr *e);
void st_writer_free(st_writer *w);

/* True when s[0..len) is well-formed UTF-8 (no overlong forms, surrogates
 * or code points past U+10FFFF); *bad_at gets the offset of the first bad
 * byte when not NULL. */
bool st_utf8_valid(const unsigned char *s, size_t len, size_t *bad_at);

#endif
