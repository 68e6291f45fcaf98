/* Causal grouped-query attention over whole sequences, for training:
 * the forward keeps only the output and each row's log-sum-exp, the
 * backward recomputes the scores tile by tile (flash-attention's scheme), so
 * no [T x T] matrix outlives one tile of ATTN_TILE query positions.
 *
 * Rows of one sequence are consecutive in the batch at positions 0, 1, ...:
 * sequence s is rows start[s] .. start[s+1]-1. q/out are [R, n_heads*hd],
 * k/v [R, n_kv_heads*hd] (after RoPE), lse [R, n_heads]. */
#ifndef GRPO_ATTN_TRAIN_H
#define GRPO_ATTN_TRAIN_H

#include <stddef.h>

#include "../model/config.h"

enum { ATTN_TILE = 64 };

/* Floats of scratch one thread needs for sequences up to max_len. */
size_t attn_train_scratch(const model_config *cf, int max_len);

/* buf: n_threads * attn_train_scratch floats. */
void attn_train_forward(float *out, float *lse, const float *q, const float *k, const float *v, int n_seqs,
                        const int *start, const model_config *cf, float *buf, int max_len);

/* Writes dq, dk, dv (all rows of the batch) from dout and the forward's q,
 * k, v, out and lse. */
void attn_train_backward(float *dq, float *dk, float *dv, const float *dout, const float *out, const float *lse,
                         const float *q, const float *k, const float *v, int n_seqs, const int *start,
                         const model_config *cf, float *buf, int max_len);

#endif
