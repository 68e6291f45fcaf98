#include "half.h"

#include <string.h>

static uint32_t f32_bits(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return x;
}

static float bits_f32(uint32_t x) {
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

/* Rounds v >> shift to nearest, ties to even (shift >= 1). */
static uint32_t shift_round_even(uint32_t v, unsigned shift) {
    uint32_t kept = v >> shift;
    uint32_t rest = v & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (kept & 1))) kept++;
    return kept;
}

float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1F;
    uint32_t man = h & 0x3FF;
    if (exp == 0x1F) return bits_f32(sign | 0x7F800000 | (man << 13)); /* inf, NaN payload kept */
    if (exp) return bits_f32(sign | ((exp + 112) << 23) | (man << 13)); /* rebias 15 -> 127 */
    if (!man) return bits_f32(sign);
    /* Subnormal man * 2^-24: normalise so the leading 1 becomes implicit. */
    uint32_t shift = 0;
    while (!(man & 0x400)) {
        man <<= 1;
        shift++;
    }
    return bits_f32(sign | ((113 - shift) << 23) | ((man & 0x3FF) << 13));
}

uint16_t f32_to_f16(float f) {
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t mag = x & 0x7FFFFFFF;
    if (mag > 0x7F800000) /* NaN: keep the top payload bits, force quiet so it cannot become inf */
        return (uint16_t)(sign | 0x7E00 | ((mag >> 13) & 0x3FF));
    if (mag >= 0x477FF000) return sign | 0x7C00; /* >= 65520 (and inf) rounds to inf */
    if (mag >= 0x38800000) /* normal in f16 (>= 2^-14): rebias, round; a carry may bump the exponent */
        return (uint16_t)(sign | shift_round_even(mag - 0x38000000, 13));
    if (mag < 0x33000000) return sign; /* below 2^-25: rounds to zero (2^-25 itself is a tie, handled below) */
    /* Subnormal result: count of 2^-24 units = (1.man) * 2^(exp-127+24). */
    uint32_t exp = mag >> 23;
    uint32_t man = (mag & 0x7FFFFF) | 0x800000;
    return (uint16_t)(sign | shift_round_even(man, 126 - exp)); /* may round up to 0x0400, the smallest normal */
}

float bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

void f16_to_f32_array(const uint16_t *in, float *out, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = f16_to_f32(in[i]);
}

void f32_to_f16_array(const float *in, uint16_t *out, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = f32_to_f16(in[i]);
}

void bf16_to_f32_array(const uint16_t *in, float *out, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = bf16_to_f32(in[i]);
}

void f32_to_bf16_array(const float *in, uint16_t *out, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = f32_to_bf16(in[i]);
}
