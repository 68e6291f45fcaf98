/* Between packed_mxfp4.c and its SIMD kernels (packed_mxfp4_avx2.c,
 * packed_mxfp4_avx512.c); nothing else includes this. Call each kernel only
 * where packed_isa_has says its instructions run. */
#ifndef GRPO_OPS_PACKED_MXFP4_KERNELS_H
#define GRPO_OPS_PACKED_MXFP4_KERNELS_H

#include <stddef.h>

#include "packed_mxfp4.h"
#include "packed_tile.h"

/* Blocks go in quads: the quad's 4 x 16 scale bytes (one 64-byte line),
 * then its blocks' 256 bytes of codes each; a short last quad pads its line. */
enum {
    MX4W_GROUP_BYTES = 64,                       /* 16 columns x 8 codes */
    MX4W_CODE_BYTES = 4 * MX4W_GROUP_BYTES,      /* one block's 16 columns */
    MX4W_QUAD_BYTES = 64 + 4 * MX4W_CODE_BYTES   /* 128 k of a panel */
};

static inline size_t mx4w_panel_bytes(int k) {
    size_t nb = (size_t)(k / MX4W_K_BLOCK);
    return (nb + 3) / 4 * 64 + nb * MX4W_CODE_BYTES;
}
/* Offsets of block b's 16 scale bytes and of its codes in a panel. */
static inline size_t mx4w_scales_at(int b) { return (size_t)(b / 4) * MX4W_QUAD_BYTES + (size_t)(b % 4) * 16; }
static inline size_t mx4w_codes_at(int b) {
    return (size_t)(b / 4) * MX4W_QUAD_BYTES + 64 + (size_t)(b % 4) * MX4W_CODE_BYTES;
}

#if defined(__x86_64__) && defined(__GNUC__)
#define MX4W_X86 1
void mx4w_matmul_avx2(float *out, const float *in, const void *w, const float *bias, int m, int k, int n);
void mx4w_matmul_avx512(float *out, const float *in, const void *w, const float *bias, int m, int k, int n);
/* pt_decode_fn's for mx4w_matmul_t */
void mx4w_decode_t_avx2(float *s, const void *w, int n, int k, int c0, int nc, int i0);
void mx4w_decode_t_avx512(float *s, const void *w, int n, int k, int c0, int nc, int i0);
#else
#define MX4W_X86 0
#endif

#endif
