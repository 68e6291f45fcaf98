/* Between packed_q8.c and its kernels (packed_q8_avx2.c, packed_q8_vnni.c);
 * nothing else includes this. Call each only where q8w_matmul_kernel would. */
#ifndef GRPO_OPS_PACKED_Q8_KERNELS_H
#define GRPO_OPS_PACKED_Q8_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* This thread's share of `panels` in the kernels' parallel region: [*begin,
 * *end). The whole of them without OpenMP (the clang fuzz build). */
static inline void q8w_thread_panels(int panels, int *begin, int *end) {
    int threads = 1, t = 0;
#ifdef _OPENMP
    threads = omp_get_num_threads(), t = omp_get_thread_num();
#endif
    *begin = (int)((long)panels * t / threads), *end = (int)((long)panels * (t + 1) / threads);
}

#include "packed_q8.h"

/* Blocks go in pairs: the pair's 32 f16 scales (one 64-byte line), then
 * its two blocks' quants, so a panel streams front to back and every
 * group of quants is line-aligned; an odd last block pads its line. */
enum { Q8W_PAIR_BYTES = 2 * Q8W_SCALE_BYTES + 2 * Q8W_QUANT_BYTES };
static inline size_t q8w_panel_bytes(int k) {
    size_t nb = (size_t)(k / Q8W_K_BLOCK);
    return (nb + 1) / 2 * (2 * Q8W_SCALE_BYTES) + nb * Q8W_QUANT_BYTES;
}
/* Offsets of block b's 16 scales and of its quants in a panel. */
static inline size_t q8w_scales_at(int b) { return (size_t)(b / 2) * Q8W_PAIR_BYTES + (size_t)(b % 2) * Q8W_SCALE_BYTES; }
static inline size_t q8w_quants_at(int b) {
    return (size_t)(b / 2) * Q8W_PAIR_BYTES + 2 * Q8W_SCALE_BYTES + (size_t)(b % 2) * Q8W_QUANT_BYTES;
}

#if defined(__x86_64__) && defined(__GNUC__)
#define Q8W_X86 1
void q8w_matmul_avx2(float *out, const float *in, const void *w, const float *bias, int m, int k, int n);
void q8w_matmul_vnni(float *out, const float *in, const void *w, const float *bias, int m, int k, int n);
void q8w_quantize_row_avx2(const float *x, int k, int8_t *q, float *d); /* q8w_quantize_row's bits */
void q8w_matmul_widen_avx2(float *out, const float *in, const void *w, const float *bias, int m, int k, int n);
/* q8w_matmul_t's and q8w_matmul_f32's pt_decode_fn's (packed_tile_x86.c) */
void q8w_decode_t_avx2(float *s, const void *w, int n, int k, int c0, int nc, int i0);
void q8w_decode_t_avx512(float *s, const void *w, int n, int k, int c0, int nc, int i0);
void q8w_decode_f_avx2(float *s, const void *w, int n, int k, int c0, int nc, int i0);
void q8w_decode_f_avx512(float *s, const void *w, int n, int k, int c0, int nc, int i0);
#else
#define Q8W_X86 0
#endif

#endif
