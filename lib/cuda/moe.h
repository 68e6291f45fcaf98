/* The mixture-of-experts entries of backend_cuda() (moe.c), backend.h's
 * semantics with its memory classes: probs, sel, w, logits, ye and their
 * gradients on the device; replay, slot and moe_group's outputs host arrays.
 * Internal to lib/cuda. */
#ifndef GRPO_CUDA_MOE_H
#define GRPO_CUDA_MOE_H

#include "../ops/backend.h"

void cuda_moe_route_forward(float *probs, int32_t *sel, float *w, const float *logits, int n, int n_experts, int k,
                            bool norm);
void cuda_moe_route_replay_forward(float *probs, int32_t *sel, float *w, const float *logits, const int32_t *replay,
                                   int n, int n_experts, int k, bool norm);
void cuda_moe_route_backward(float *dlogits, const float *dw, const float *probs, const int32_t *sel, const float *w,
                             int n, int n_experts, int k, bool norm);
/* The counting sort on the device, then row_of, slot_of and offsets copied
 * to their host arrays (the layer's loop over experts reads offsets): one
 * wait for the device per call. After a failure (recorded for sync) the
 * host arrays are zeros: no expert has a row. */
void cuda_moe_group(int32_t *row_of, int32_t *slot_of, int *offsets, const int32_t *sel, int n, int k, int n_experts);
void cuda_moe_combine_forward(float *out, const float *ye, const float *w, const int32_t *slot, int n, int k, int d);
void cuda_moe_combine_backward(float *dye, float *dw, const float *dout, const float *ye, const float *w,
                               const int32_t *slot, int n, int k, int d);
void cuda_swiglu_clamped_forward(float *out, const float *gate, const float *up, size_t n, float alpha, float limit);
void cuda_swiglu_clamped_backward(float *dg, float *du, const float *dh, const float *g, const float *u, size_t n,
                                  float alpha, float limit);
void cuda_attention_sinks_backward(float *dsinks, const float *out, const float *dout, const float *lse,
                                   const float *sinks, int n, int n_heads, int hd);
/* matmul_forward_packed for WEIGHTS_MXFP4 only (another format fails):
 * w_packed on the device in packed_mxfp4.h's layout (mx4w_bytes(out_dim,
 * in_dim) bytes), expanded to a bf16 scratch [out_dim, in_dim] by a kernel
 * (exact), then the bf16 product of matmul_forward. */
void cuda_matmul_forward_packed(float *out, const float *in, const void *w_packed, weight_format fmt,
                                const float *bias, int n, int in_dim, int out_dim);

#endif
