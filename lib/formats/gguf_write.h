/* Writing a GGUF v3 file (the layout of gguf.h) that llama.cpp loads: the
 * caller's metadata (gguf_meta.h) and tensors, each tensor's float32 rows
 * asked from the caller a chunk at a time and converted (gguf_quant.h), so
 * memory stays at one chunk however large the tensors. */
#ifndef GRPO_GGUF_WRITE_H
#define GRPO_GGUF_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"
#include "gguf_meta.h"

/* Every tensor starts at a multiple of this; the caller's metadata should
 * say so (general.alignment). */
enum { GGUF_WRITE_ALIGN = 32 };

typedef struct {
    char name[64];
    int64_t rows, cols; /* [rows, cols] row-major (GGUF dims {cols, rows}); cols 0: a vector of rows values */
    int64_t planes;     /* > 1: that many [rows, cols] matrices (vectors of rows) one after the other
                         * (GGUF dims {cols, rows, planes}, {rows, planes}: a layer's experts);
                         * 0 or 1: one */
    uint32_t type;      /* GGML_TYPE_F32, _F16, _BF16, or _Q8_0 or _MXFP4 (then cols a multiple of 32;
                         * MXFP4's values MXFP4's: gguf_quant.h), or _Q4_K (cols a multiple of 256) */
    size_t chunk_rows;  /* rows per call of the source (> 0; a vector's values count as rows) */
    uint64_t offset, nbytes; /* in the data section; set by gguf_write */
} gguf_wtensor;

/* The float32 rows [row, row + n) of tensor i (rows of all its planes, in
 * order): a pointer to them, or to tmp (room for chunk_rows * max(cols, 1)
 * floats) after filling it. */
typedef const float *(*gguf_rows_fn)(void *ctx, size_t i, size_t row, size_t n, float *tmp);

/* Writes path atomically (temporary name, fsync, rename): "GGUF", version
 * 3, the counts, meta's KVs, the tensor infos with offsets planned up front
 * (each tensor's offset and nbytes are set in t), zero padding to
 * GGUF_WRITE_ALIGN, then each tensor's data in order. EX_SOFTWARE when the
 * conversion buffers cannot be allocated, EX_IOERR when writing fails. */
int gguf_write(const char *path, const gguf_meta *meta, gguf_wtensor *t, size_t n, gguf_rows_fn rows, void *ctx,
               gerr *e);

#endif
