/* Float32 rows to the element types a GGUF export writes: F32, F16, BF16
 * (round to nearest even, lib/util/half.h), MXFP4 (values that are
 * MXFP4's, exactly, also in gpt-oss's Hugging Face order) and Q8_0 (ggml's reference
 * quantizer, quantize_row_q8_0_ref: per block of 32 values d = max|x| / 127
 * stored as f16, q = roundf(x / d) computed as x * (1/d), the same float32
 * arithmetic as gguf-py's gguf.quants.quantize, so the bytes agree) and
 * Q4_K (our quantizer's blocks, lib/ops/packed_q4k.h). */
#ifndef GRPO_GGUF_QUANT_H
#define GRPO_GGUF_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quant.h"

enum { Q8_0_BLOCK = 32, Q8_0_BYTES = 34 };

/* n values (a multiple of 32) from x into n / 32 blocks of 34 bytes:
 * d (f16, little-endian) then 32 int8. */
void gguf_quantize_q8_0(const float *x, void *out, size_t n);

/* n values (a multiple of 32) from x into n / 32 MXFP4 blocks of 17 bytes
 * (quant.h's MXFP4, packed_mxfp4.h's values) holding them exactly: each
 * block's scale the smallest that does (0 for a block of zeros), +0 as
 * code 0 and -0 as code 8 (the negative zero, which ggml reads as +0 and
 * transformers as -0). False when some block's values are not MXFP4's (out then
 * holds garbage): only weights that came from MXFP4 blocks are. */
bool gguf_mxfp4_exact(const float *x, void *out, size_t n);

/* The same blocks in gpt-oss's Hugging Face order (packed_mxfp4.h): n / 32
 * blocks of 16 bytes of codes, value 2j in byte j's low nibble and 2j + 1
 * in its high one, and their n / 32 scale bytes apart. */
bool hf_mxfp4_exact(const float *x, void *blocks, void *scales, size_t n);

/* n values from x into out as ggml type (GGML_TYPE_F32, _F16, _BF16, _Q8_0,
 * _MXFP4 or _Q4_K; for Q8_0 and MXFP4 n is a multiple of 32, and MXFP4's
 * values are MXFP4's: gguf_mxfp4_exact; for Q4_K a multiple of 256,
 * quantized by packed_q4k.h's q4kw_quantize_gguf); out holds
 * quant_row_bytes(type, n). */
void gguf_convert(uint32_t type, const float *x, void *out, size_t n);

#endif
