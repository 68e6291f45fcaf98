/* The AVX2 kernels behind packed_q8.c's dispatch (packed_q8_avx2.c); only
 * packed_q8.c includes this. Call them only when q8w_supported(). */
#ifndef GRPO_OPS_PACKED_Q8_KERNELS_H
#define GRPO_OPS_PACKED_Q8_KERNELS_H

#include <stdbool.h>

#if defined(__x86_64__) && defined(__GNUC__)
#define Q8W_X86 1
void q8w_matmul_avx2(float *out, const float *in, const void *w, const float *bias, int m, int k, int n);
bool q8w_matmul_int8_avx2(float *out, const float *in, const void *w, const float *bias, int m, int k, int n);
#else
#define Q8W_X86 0
#endif

#endif
