/* Attention's decode-row kernels, called by attention.c for a row that is
 * not part of a tile: over a bf16 KV cache (attention_bf16.c) and over a
 * float32 one (attention_f32.c). Each comes as SIMD code and portable code
 * that give the same bits, so which one a CPU runs never changes a result. */
#ifndef GRPO_ATTENTION_ROW_H
#define GRPO_ATTENTION_ROW_H

#include <stdbool.h>
#include <stdint.h>

/* Which code runs: each gives the same bits. */
typedef enum { ATTN_PORTABLE, ATTN_AVX2, ATTN_AVX512 } attn_kernel;
/* The fastest this CPU runs (AVX-512 F/BW/VL, else AVX2 with FMA, else portable). */
attn_kernel attn_kernel_best(void);

/* One decode row: the G query heads q[G, hd] sharing one KV head attend
 * over its positions 0..T-1, key t at k + t*kvd (value likewise).
 * out[G, hd]; lse[G] (optional) each head's log-sum-exp; sc[G*T] scratch.
 * Scores are 16-lane fmaf sums over hd summed in one fixed tree, times
 * scale; the output sums fmaf(p_t, v_t, .) over t in order. */
void attend_row_bf16(float *out, float *lse, const float *q, const uint16_t *k, const uint16_t *v, int T, int G, int hd,
                     int kvd, float scale, float *sc, attn_kernel kernel);

/* dst[T, hd] = rows src + t*kvd widened to fp32 (exact). */
void widen_rows_bf16(float *dst, const uint16_t *src, int T, int hd, int kvd, attn_kernel kernel);

/* attend_row_bf16 over float32 keys and values. A score's lane l sums
 * elements l, l+16, l+32, ... of hd (attend_row_bf16's lanes hold pairs);
 * the tree, the scale, the softmax and the output's sums are the same.
 * ATTN_AVX512 runs the AVX2 code. */
void attend_row_f32(float *out, float *lse, const float *q, const float *k, const float *v, int T, int G, int hd,
                    int kvd, float scale, float *sc, attn_kernel kernel);

#endif
