/* GGML tensor types: block geometry of every type ggml defines, and
 * dequantization to float32 of the ones we load (F32, F16, BF16, Q8_0, Q4_0,
 * Q4_1, Q5_0, Q5_1, Q4_K, Q6_K, MXFP4).
 *
 * A quantized row is a run of blocks: block_size values stored in type_size
 * bytes. Layouts are ggml's (ggml-common.h); the arithmetic is done in the
 * same order as gguf-py's numpy dequantizers so results match bit for bit.
 * Sources may be unaligned (they point into a mapped file). */
#ifndef GRPO_QUANT_H
#define GRPO_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"

/* The numbers GGUF files store (ggml.h's enum ggml_type). */
enum {
    GGML_TYPE_F32 = 0,
    GGML_TYPE_F16 = 1,
    GGML_TYPE_Q4_0 = 2,
    GGML_TYPE_Q4_1 = 3,
    GGML_TYPE_Q5_0 = 6,
    GGML_TYPE_Q5_1 = 7,
    GGML_TYPE_Q8_0 = 8,
    GGML_TYPE_Q8_1 = 9,
    GGML_TYPE_Q2_K = 10,
    GGML_TYPE_Q3_K = 11,
    GGML_TYPE_Q4_K = 12,
    GGML_TYPE_Q5_K = 13,
    GGML_TYPE_Q6_K = 14,
    GGML_TYPE_Q8_K = 15,
    GGML_TYPE_BF16 = 30,
    GGML_TYPE_MXFP4 = 39,
    GGML_TYPE_COUNT = 40 /* one past the largest number we know */
};

enum { QK_K = 256 }; /* values per K-quant super-block */

/* "Q4_K" etc.; NULL for a number ggml does not define (or no longer does). */
const char *quant_type_name(uint32_t type);
/* Values per block (1 for plain floats); 0 for an unknown type. */
size_t quant_block_size(uint32_t type);
/* Bytes per block; 0 for an unknown type. */
size_t quant_type_size(uint32_t type);
/* True for the types quant_dequantize handles. */
bool quant_supported(uint32_t type);
/* Bytes holding n values: 0 when the type is unknown, n is not a multiple of
 * the block size, or the size overflows. */
size_t quant_row_bytes(uint32_t type, size_t n);

/* Dequantizes n values (n a multiple of the block size) from src into dst.
 * EX_DATAERR for an unsupported or unknown type (the message names it, e.g.
 * "unsupported tensor type Q2_K (10)") or a bad n. The message has no path:
 * callers prefix theirs. */
int quant_dequantize(uint32_t type, const void *src, float *dst, size_t n, gerr *e);
/* The same on the calling thread only, for callers that run chunks of a
 * tensor on threads themselves (gguf_tensor_to_f32_finite). */
int quant_dequantize_here(uint32_t type, const void *src, float *dst, size_t n, gerr *e);

#endif
