/* The AVX512-BF16 kernel of packed_bf16.h: vdpbf16ps, two pairs of k
 * products per lane and instruction (packed_bf16_tile.h has the tiles). */
#include "packed_bf16_kernels.h"

#if BF16W_X86
#include <immintrin.h>
#include <stdint.h>

#define BF16W_TARGET __attribute__((target("avx512f,avx512bf16")))
#define BF16W_ENTRY bf16w_matmul_avx512bf16
#define OP_INLINE static inline __attribute__((always_inline)) BF16W_TARGET

typedef __m512bh xop;
typedef __m512bh wop;

OP_INLINE xop bcast_x(const uint32_t *pair) { return (__m512bh)_mm512_set1_epi32((int)*pair); }
OP_INLINE wop load_w(const unsigned char *p) {
    __m512i v = _mm512_loadu_si512(p);
    __asm__("" : "+v"(v)); /* held in a register: GCC 12 otherwise reloads it for every row of small tiles */
    return (__m512bh)v;
}
/* measured on Zen 4: the odd product added first, then the even one, each
 * rounded to nearest even (subnormal sums flushed) */
OP_INLINE __m512 dot(__m512 acc, xop x, wop w) { return _mm512_dpbf16_ps(acc, x, w); }

/* vcvtne2ps2bf16 rounds as bf16w_round, bit for bit */
OP_INLINE void round_row(const float *x, int k, uint32_t *pairs) {
    int i = 0;
    for (; i + 32 <= k; i += 32)
        _mm512_storeu_si512(pairs + i / 2,
                            (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(x + i)));
    bf16w_round_pairs(x, k, i, pairs);
}

#include "packed_bf16_tile.h"
#endif
