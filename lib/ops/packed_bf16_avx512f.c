/* The AVX-512F kernel of packed_bf16.h, for CPUs without AVX512-BF16:
 * vdpbf16ps emulated with the bf16 widened to float32 (a shift or a mask)
 * and two fused multiply-adds in its order, the same bits (the products are
 * exact, so each fma rounds once as vdpbf16ps's additions do). */
#include "packed_bf16_kernels.h"

#if BF16W_X86
#include <immintrin.h>
#include <stdint.h>

#define BF16W_TARGET __attribute__((target("avx512f")))
#define BF16W_ENTRY bf16w_matmul_avx512f
#define OP_INLINE static inline __attribute__((always_inline)) BF16W_TARGET

/* A vector of pairs of bf16 as two float32 vectors: the high halves (odd k)
 * and the low ones (even k). */
typedef struct {
    __m512 odd, even;
} xop;
typedef xop wop;

OP_INLINE xop widen(__m512i pairs) {
    return (xop){_mm512_castsi512_ps(_mm512_and_si512(pairs, _mm512_set1_epi32((int)0xFFFF0000u))),
                 _mm512_castsi512_ps(_mm512_slli_epi32(pairs, 16))};
}
OP_INLINE xop bcast_x(const uint32_t *pair) { return widen(_mm512_set1_epi32((int)*pair)); }
OP_INLINE wop load_w(const unsigned char *p) { return widen(_mm512_loadu_si512(p)); }
OP_INLINE __m512 dot(__m512 acc, xop x, wop w) {
    return _mm512_fmadd_ps(x.even, w.even, _mm512_fmadd_ps(x.odd, w.odd, acc));
}

/* bf16w_round on 16 floats: nearest even by integer addition, NaN quieted
 * and truncated, float32 subnormals to signed zero. */
OP_INLINE __m256i round16(const float *x) {
    __m512i b = _mm512_castps_si512(_mm512_loadu_ps(x));
    __m512i r = _mm512_srli_epi32(
        _mm512_add_epi32(b, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF),
                                             _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1)))),
        16);
    __mmask16 nan =
        _mm512_cmpgt_epu32_mask(_mm512_and_si512(b, _mm512_set1_epi32(0x7FFFFFFF)), _mm512_set1_epi32(0x7F800000));
    __mmask16 tiny = _mm512_testn_epi32_mask(b, _mm512_set1_epi32(0x7F800000));
    r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(0x40)));
    r = _mm512_mask_mov_epi32(r, tiny, _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(0x8000)));
    return _mm512_cvtepi32_epi16(r);
}

OP_INLINE void round_row(const float *x, int k, uint32_t *pairs) {
    int i = 0;
    for (; i + 16 <= k; i += 16) _mm256_storeu_si256((__m256i *)(pairs + i / 2), round16(x + i));
    bf16w_round_pairs(x, k, i, pairs);
}

#include "packed_bf16_tile.h"
#endif
