/* Between packed_q8.c and its kernels (packed_q8_avx2.c, packed_q8_vnni.c);
 * nothing else includes this. Call each only where q8w_matmul_kernel would. */
#ifndef GRPO_OPS_PACKED_Q8_KERNELS_H
#define GRPO_OPS_PACKED_Q8_KERNELS_H

#include <stdint.h>

/* Row x [k] quantized per 32-block: d[k/32] = max|x| / 127 and q[k] =
 * round(x * (1/d)), float32, half away from zero (d = 0: all q = 0). */
void q8w_quantize_row(const float *x, int k, int8_t *q, float *d);

#if defined(__x86_64__) && defined(__GNUC__)
#define Q8W_X86 1
void q8w_matmul_avx2(float *out, const float *in, const void *w, const float *bias, int m, int k, int n);
void q8w_matmul_vnni(float *out, const float *in, const void *w, const float *bias, int m, int k, int n);
void q8w_quantize_row_avx2(const float *x, int k, int8_t *q, float *d); /* q8w_quantize_row's bits */
void q8w_matmul_widen_avx2(float *out, const float *in, const void *w, const float *bias, int m, int k, int n);
#else
#define Q8W_X86 0
#endif

#endif
