/* The backward of each layer operation of lib/model/ops.h, beside the
 * forward it inverts (llm.c style), plus the linear layer with an optional
 * LoRA adapter. Gradients of weights are accumulated (+=) so micro-batches
 * add up; gradients of activations are written (=) unless a function says
 * it accumulates. Row-major throughout; W is [out, in] as in HF. */
#ifndef GRPO_TRAIN_OPS_H
#define GRPO_TRAIN_OPS_H

#include <stddef.h>

/* y = x * rstd * w (RMSNorm) over n rows of d.
 * dx = rstd * (w*dy) - rstd^3/d * x * sum(w*dy*x); dw += sum_rows dy*x*rstd.
 * dx may alias dy. dw may be NULL (frozen). */
void rmsnorm_backward(float *dx, float *dw, const float *dy, const float *x, const float *w, const float *rstd,
                      int n, int d);

/* y = x W^T + b: din = dout W (accumulated when accumulate, else written);
 * dw += dout^T in (dw NULL: frozen); db += column sums of dout (NULL: none). */
void matmul_backward(float *din, float *dw, float *db, const float *dout, const float *in, const float *w, int n,
                     int in_dim, int out_dim, int accumulate);

/* Inverse rotation: the gradient of rope_forward in place. */
void rope_backward(float *dx, const float *cos_t, const float *sin_t, int n, int n_heads, int head_dim);

/* h = silu(g) * u: dg = dh * u * silu'(g), du = dh * silu(g). dg may alias
 * dh; du must not. */
void swiglu_backward(float *dg, float *du, const float *dh, const float *g, const float *u, size_t n);

#endif
