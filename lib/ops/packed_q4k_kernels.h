/* Between packed_q4k.c, the quantizer (packed_q4k_quant.c) and their SIMD
 * kernels (packed_q4k_avx2.c, packed_q4k_avx512.c, packed_q4k_quant_avx2.c,
 * packed_q4k_quant_avx512.c); nothing else includes this. Call each kernel
 * only where packed_isa_has says its instructions run. */
#ifndef GRPO_OPS_PACKED_Q4K_KERNELS_H
#define GRPO_OPS_PACKED_Q4K_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "packed_q4k.h"
#include "packed_tile.h"

/* A super-block of a panel: its head (d [16] and dmin [16] as float32, sc
 * [8][16], mn [8][16]), then each sub-block's 4 groups of 16 code words. */
enum {
    Q4KW_SUBS = Q4KW_K_SUPER / Q4KW_K_SUB,              /* sub-blocks per super-block */
    Q4KW_GROUP_BYTES = 64,                              /* 16 columns x 8 codes */
    Q4KW_CODE_BYTES = 4 * Q4KW_GROUP_BYTES,             /* one sub-block's 16 columns */
    Q4KW_DMIN_AT = 4 * Q4KW_NR,                         /* offsets in the head */
    Q4KW_SC_AT = 8 * Q4KW_NR,
    Q4KW_MN_AT = Q4KW_SC_AT + Q4KW_SUBS * Q4KW_NR,
    Q4KW_HEAD_BYTES = Q4KW_MN_AT + Q4KW_SUBS * Q4KW_NR, /* 384 */
    Q4KW_SUPER_BYTES = Q4KW_HEAD_BYTES + Q4KW_SUBS * Q4KW_CODE_BYTES,
    /* from this many rows on, q4kw_matmul decodes W once per tile of
     * packed_tile.h for up to 64 rows; below, its own kernels decode in
     * registers for every 8 rows (the same bits either way) */
    Q4KW_TILE_ROWS = 16
};

static inline size_t q4kw_panel_bytes(int k) {
    int subs = k / Q4KW_K_SUB, rest = subs % Q4KW_SUBS;
    return (size_t)(subs / Q4KW_SUBS) * Q4KW_SUPER_BYTES + (rest ? Q4KW_HEAD_BYTES + (size_t)rest * Q4KW_CODE_BYTES : 0);
}
/* The head of the super-block holding sub-block u (k = 32 u ..), and u's codes, in a panel. */
static inline size_t q4kw_head_at(int u) { return (size_t)(u / Q4KW_SUBS) * Q4KW_SUPER_BYTES; }
static inline size_t q4kw_codes_at(int u) {
    return q4kw_head_at(u) + Q4KW_HEAD_BYTES + (size_t)(u % Q4KW_SUBS) * Q4KW_CODE_BYTES;
}

/* One super-block of one column as a panel holds it: d and dmin, each
 * sub-block's sc and mn, and its codes as 4 words (word g: the codes of
 * k = 8 g + t of the sub-block at bits 4t .. 4t + 3). */
typedef struct {
    float d, dmin;
    uint8_t sc[Q4KW_SUBS], mn[Q4KW_SUBS];
    uint32_t code[Q4KW_SUBS][4];
} q4kw_super;

/* The quantizer (packed_q4k_quant.c, packed_q4k.h's): x[32 subs] (0 <
 * subs <= 8) into *out, the sub-blocks past subs zero, on path isa (the
 * portable code, AVX-512 or AVX2 where isa names them: the same blocks). */
void q4kw_quantize(packed_isa isa, const float *x, int subs, q4kw_super *out);

/* The quantizer's middle, scalar on every path: d, dmin, sc and mn of *out
 * from the sub-blocks' fitted scales a[s] and mins b[s] (s < subs); the
 * rest of *out zeroed. */
void q4kw_scales(const double *a, const double *b, int subs, q4kw_super *out);

#if defined(__x86_64__) && defined(__GNUC__)
#define Q4KW_X86 1
/* q4kw_quantize on AVX-512F, and on AVX2 with FMA */
void q4kw_quantize_avx512(const float *x, int subs, q4kw_super *out);
void q4kw_quantize_avx2(const float *x, int subs, q4kw_super *out);
void q4kw_matmul_avx2(float *out, const float *in, const void *w, const float *bias, int m, int k, int n);
void q4kw_matmul_avx512(float *out, const float *in, const void *w, const float *bias, int m, int k, int n);
/* pt_decode_fn's for q4kw_matmul_t (_t) and for q4kw_matmul on many rows (_f) */
void q4kw_decode_t_avx2(float *s, const void *w, int n, int k, int c0, int nc, int i0);
void q4kw_decode_t_avx512(float *s, const void *w, int n, int k, int c0, int nc, int i0);
void q4kw_decode_f_avx2(float *s, const void *w, int n, int k, int c0, int nc, int i0);
void q4kw_decode_f_avx512(float *s, const void *w, int n, int k, int c0, int nc, int i0);
#else
#define Q4KW_X86 0
#endif

#endif
