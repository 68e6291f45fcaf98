/* The transposed product on packed weights: dX = dY W, the input gradient
 * of y = x W^T (W [n, k] packed: q8w, bf16w or mx4w; dY [m, n]; dX [m, k]),
 * for training on a frozen quantized base. The formats' entry points
 * (q8w_matmul_t, bf16w_matmul_t, mx4w_matmul_t) call pt_matmul with their
 * decoder; this header defines what every one of them computes.
 *
 * Numerics: each W[c][i] is the format's exact dequantized value (what its
 * unpack function gives, exact in float32), and each output is one float32
 * fused multiply-add chain over c in order:
 *     acc = accumulate ? dX[r][i] : +0;  for c = 0 .. n-1: acc = fma(dY[r][c], W[c][i], acc);  dX[r][i] = acc.
 * So dX depends only on its own row of dY: not on m, the other rows, the
 * thread count or the instruction set (portable C, AVX2 and AVX-512 give the
 * same bits). Its error against the float64 product over the dequantized W
 * is that of recursive summation, at most (n + 1) u sum_c |dY[r][c] W[c][i]|
 * (u = 2^-24; plus |dX| u with accumulate).
 *
 * How: the outputs are cut into tiles of PT_TK columns of dX (one
 * quantization block) and PT_RC rows; a task is up to PT_GROUP tiles side
 * by side, run whole by one thread. It walks W's columns c in chunks of
 * PT_CC; for each chunk and tile it decodes the PT_CC x PT_TK weights
 * (W[c][i0 .. i0 + PT_TK)) into a 16 KB stack scratch, then runs each block
 * of rows over it with the partial sums in registers, stored into dX
 * between chunks (float32 either way: the chain is unchanged). W is never
 * widened beyond that scratch; its decode is amortized over the PT_RC rows,
 * and the rows' chunk of dY over the task's tiles.
 *
 * dY and dX must not overlap; W is read only. */
#ifndef GRPO_OPS_PACKED_T_H
#define GRPO_OPS_PACKED_T_H

#include <stdbool.h>

#include "packed_isa.h"

enum {
    PT_TK = 32,  /* columns of dX per task: one quantization block of k */
    PT_CC = 128, /* columns of W (rows of W^T) decoded at a time: whole panels of every layout */
    PT_RC = 64,  /* rows of dY per task: the decode of a chunk serves these */
    PT_GROUP = 8 /* tiles of PT_TK columns per task at most */
};

/* Writes s[nc][PT_TK]: s[cc][i] = W[c0 + cc][i0 + i], the exact dequantized
 * weight, 0 where i0 + i >= k. c0 is a multiple of PT_CC, nc <= PT_CC,
 * i0 a multiple of PT_TK below k. */
typedef void (*pt_decode_fn)(float *s, const void *w, int n, int k, int c0, int nc, int i0);

/* dX [m, k] (+)= dY [m, n] W [n, k] as above on the path isa, W decoded by
 * decode[isa] (a format's decoders, one per path; they give the same
 * values), OpenMP over the tasks. False (nothing written) when this CPU
 * lacks the path. */
bool pt_matmul(packed_isa isa, const pt_decode_fn decode[PACKED_ISAS], float *dx, const float *dy, const void *w, int m,
               int k, int n, bool accumulate);

#endif
