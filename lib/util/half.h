/* IEEE 754 binary16 (f16) and bfloat16 (bf16) conversions.
 *
 * Halves travel as raw uint16_t bit patterns (C11 has no half type).
 * Narrowing f32 -> f16/bf16 rounds to nearest, ties to even; values too large
 * become infinity; NaN stays NaN (quiet, sign kept). Widening is exact. */
#ifndef GRPO_HALF_H
#define GRPO_HALF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
float bf16_to_f32(uint16_t h);
/* Inline, so that loops over arrays (packing, the KV cache) vectorize. */
static inline uint16_t f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7FFFFFFF) > 0x7F800000) /* NaN: truncation could clear every payload bit left */
        return (uint16_t)((x >> 16) | 0x0040);
    /* Round to nearest even; a carry overflows into inf exactly when it should. */
    return (uint16_t)((x + 0x7FFF + ((x >> 16) & 1)) >> 16);
}

/* Array forms; in and out must not overlap. */
void f16_to_f32_array(const uint16_t *in, float *out, size_t n);
void f32_to_f16_array(const float *in, uint16_t *out, size_t n);
void bf16_to_f32_array(const uint16_t *in, float *out, size_t n);
void f32_to_bf16_array(const float *in, uint16_t *out, size_t n);

#endif
