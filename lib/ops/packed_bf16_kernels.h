/* Between packed_bf16.c and its SIMD kernels (packed_bf16_avx512bf16.c,
 * packed_bf16_avx512f.c, both built from packed_bf16_tile.h, and
 * packed_bf16_avx2.c); nothing else
 * includes this but the unit test, which runs every kernel the CPU has. */
#ifndef GRPO_OPS_PACKED_BF16_KERNELS_H
#define GRPO_OPS_PACKED_BF16_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "packed_bf16.h"
#include "../util/half.h"

/* Bytes of one panel: ceil(k/2) pairs of k, each the panel's columns' two values. */
static inline size_t bf16w_panel_bytes(int k) { return (size_t)((k + 1) / 2) * BF16W_NR * 4; }

/* f32_to_bf16 with float32 subnormals flushed to zero (sign kept): bit for
 * bit what vcvtne2ps2bf16 gives, NaN and infinity included. */
static inline uint16_t bf16w_round(float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if ((bits & 0x7F800000u) == 0) return (uint16_t)(bits >> 16 & 0x8000u); /* vdpbf16ps reads these as zero */
    return f32_to_bf16(f);
}

/* x[from..k) rounded into pairs[from/2 ..]: element 2i in the low half of
 * pairs[i], 2i+1 in the high half, zero past k (from even). */
void bf16w_round_pairs(const float *x, int k, int from, uint32_t *pairs);

/* bf16w_matmul_t's portable pt_decode_fn (packed_tile.h): s[c][i] = W[c0 + c][i0 + i]. */
void bf16w_decode_t(float *s, const void *w, int n, int k, int c0, int nc, int i0);

#if defined(__x86_64__) && defined(__GNUC__)
#define BF16W_X86 1
bool bf16w_has_avx512f(void);
/* AVX2 with FMA (packed_bf16_avx2.c). */
bool bf16w_has_avx2(void);
/* Call only when the CPU has the instructions (bf16w_native(), bf16w_has_avx512f()). */
void bf16w_matmul_avx512bf16(float *out, const float *in, const void *w, const float *bias, int m, int k, int n);
void bf16w_matmul_avx512f(float *out, const float *in, const void *w, const float *bias, int m, int k, int n);
void bf16w_matmul_avx2(float *out, const float *in, const void *w, const float *bias, int m, int k, int n);
/* bf16w_matmul_t's and bf16w_matmul_f32's SIMD pt_decode_fn's (packed_tile_x86.c) */
void bf16w_decode_t_avx2(float *s, const void *w, int n, int k, int c0, int nc, int i0);
void bf16w_decode_t_avx512(float *s, const void *w, int n, int k, int c0, int nc, int i0);
void bf16w_decode_f_avx2(float *s, const void *w, int n, int k, int c0, int nc, int i0);
void bf16w_decode_f_avx512(float *s, const void *w, int n, int k, int c0, int nc, int i0);
#else
#define BF16W_X86 0
#endif

#endif
