/* Products on packed weights decoded tile by tile, for training on a frozen
 * quantized base (W [n, k] packed as q8w, bf16w or mx4w; the formats'
 * entry points call these with their decoders):
 *
 *   pt_matmul_t: dX = dY W (+ dX), the input gradient of y = x W^T
 *     (dY [m, n], dX [m, k]): q8w_matmul_t, bf16w_matmul_t, mx4w_matmul_t;
 *   pt_matmul:   y = x W^T (+ bias) with x float32, never rounded (x [m, k],
 *     y [m, n]): q8w_matmul_f32, bf16w_matmul_f32 (mx4w_matmul has the
 *     same numerics in its own kernels).
 *
 * Numerics: each W[c][i] is the format's exact dequantized value (what its
 * unpack function gives, exact in float32), and each output is one float32
 * fused multiply-add chain over the summed dimension in order:
 *     dX[r][i]: acc = accumulate ? dX[r][i] : +0;  for c = 0 .. n-1: acc = fma(dY[r][c], W[c][i], acc)
 *     y[r][c]:  acc = +0;  for i = 0 .. k-1: acc = fma(x[r][i], W[c][i], acc);  y = bias ? acc + bias[c] : acc
 * (y: the bits of packed_matmul on the dequantized weights). An output
 * depends only on its own row: not on m, the other rows, the thread count
 * or the instruction set (portable C, AVX2 and AVX-512 give the same bits).
 * Its error against the float64 product over the dequantized W is that of
 * recursive summation: at most (s + 1) u (sum |a w| + |start or bias|),
 * s the summed length, u = 2^-24.
 *
 * How: the outputs are cut into tiles of PT_TK columns and PT_RC rows; a
 * task is up to PT_GROUP tiles side by side, run whole by one thread. It
 * walks the summed dimension in chunks of PT_CC; for each chunk and tile it
 * decodes the PT_CC x PT_TK weights into a 16 KB stack scratch, then runs
 * each block of rows over it with the partial sums in registers, stored into
 * the output between chunks (float32 either way: the chain is unchanged). W
 * is never widened beyond that scratch; its decode is amortized over the
 * PT_RC rows, and the rows' chunk of the input over the task's tiles.
 *
 * The input and the output must not overlap; W is read only. */
#ifndef GRPO_OPS_PACKED_TILE_H
#define GRPO_OPS_PACKED_TILE_H

#include <stdbool.h>

#include "packed_isa.h"

enum {
    PT_TK = 32,  /* output columns per tile: one quantization block of dX, one bf16 panel of y */
    PT_CC = 128, /* of the summed dimension decoded at a time: whole blocks and panels of every layout */
    PT_RC = 64,  /* rows per task: the decode of a chunk serves these */
    PT_GROUP = 8 /* tiles per task at most */
};

/* Writes s[nc][PT_TK], the exact dequantized weights of W [n, k]:
 *   for pt_matmul_t: s[cc][i] = W[c0 + cc][i0 + i]  (c0 a multiple of PT_CC below n, i0 of PT_TK below k);
 *   for pt_matmul:   s[cc][j] = W[i0 + j][c0 + cc]  (c0 a multiple of PT_CC below k, i0 of PT_TK below n);
 * 0 where the column (i0 + i or i0 + j) is past the matrix; nc <= PT_CC. */
typedef void (*pt_decode_fn)(float *s, const void *w, int n, int k, int c0, int nc, int i0);

/* dX [m, k] (+)= dY [m, n] W [n, k] as above on the path isa, W decoded by
 * decode[isa] (a format's decoders, one per path; they give the same
 * values), OpenMP over the tasks. False (nothing written) when this CPU
 * lacks the path. */
bool pt_matmul_t(packed_isa isa, const pt_decode_fn decode[PACKED_ISAS], float *dx, const float *dy, const void *w,
                 int m, int k, int n, bool accumulate);

/* y [m, n] = x [m, k] W^T (+ bias [n]) as above, the same way. */
bool pt_matmul(packed_isa isa, const pt_decode_fn decode[PACKED_ISAS], float *y, const float *x, const void *w,
               const float *bias, int m, int k, int n);

#endif
