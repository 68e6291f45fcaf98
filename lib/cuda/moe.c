/* The mixture-of-experts entries of backend_cuda() (moe.h): host arrays
 * staged, kernels of moe_kernels.cu launched on the context's stream, failures
 * recorded for sync. */
#include "moe.h"

#include <string.h>

#include "ctx.h"
#include "gemm.h"
#include "kernels.h"

static cudaStream_t stream(void) { return cuda_ctx_get()->stream; }

#define LAUNCH(call, what)                              \
    do {                                                \
        if (!cuda_broken()) cuda_failed((call), (what)); \
    } while (0)

void cuda_moe_route_forward(float *probs, int32_t *sel, float *w, const float *logits, int n, int n_experts, int k,
                            bool norm) {
    LAUNCH(cu_moe_route(probs, sel, w, logits, NULL, n, n_experts, k, norm, stream()), "moe_route_forward");
}

void cuda_moe_route_replay_forward(float *probs, int32_t *sel, float *w, const float *logits, const int32_t *replay,
                                   int n, int n_experts, int k, bool norm) {
    if (n <= 0) return;
    const int32_t *r = cuda_stage(replay, (size_t)n * k * sizeof *replay, 0);
    if (r) LAUNCH(cu_moe_route(probs, sel, w, logits, r, n, n_experts, k, norm, stream()), "moe_route_replay_forward");
}

void cuda_moe_route_backward(float *dlogits, const float *dw, const float *probs, const int32_t *sel, const float *w,
                             int n, int n_experts, int k, bool norm) {
    LAUNCH(cu_moe_route_backward(dlogits, dw, probs, sel, w, n, n_experts, k, norm, stream()), "moe_route_backward");
}

void cuda_moe_group(int32_t *row_of, int32_t *slot_of, int *offsets, const int32_t *sel, int n, int k, int n_experts) {
    size_t nk = n > 0 ? (size_t)n * k : 0, E = n_experts > 0 ? (size_t)n_experts : 0;
    /* one buffer: row_of, slot_of, offsets [E + 1], counts [E] */
    size_t bytes = (2 * nk + 2 * E + 1) * sizeof(int32_t);
    int32_t *d = cuda_out(bytes);
    cudaStream_t st = stream();
    bool ok = d && !cuda_failed(cu_moe_group(d, d + nk, d + 2 * nk, d + 2 * nk + E + 1, sel, n, k, n_experts, st),
                                "moe_group") &&
              !cuda_failed(cudaMemcpyAsync(row_of, d, nk * sizeof *row_of, cudaMemcpyDeviceToHost, st), "moe_group") &&
              !cuda_failed(cudaMemcpyAsync(slot_of, d + nk, nk * sizeof *slot_of, cudaMemcpyDeviceToHost, st),
                           "moe_group") &&
              !cuda_failed(cudaMemcpyAsync(offsets, d + 2 * nk, (E + 1) * sizeof *offsets, cudaMemcpyDeviceToHost, st),
                           "moe_group") &&
              !cuda_failed(cudaStreamSynchronize(st), "moe_group");
    if (!ok) { /* no expert has a row: the layer's loops do nothing until sync reports */
        memset(row_of, 0, nk * sizeof *row_of);
        memset(slot_of, 0, nk * sizeof *slot_of);
        memset(offsets, 0, (E + 1) * sizeof *offsets);
    }
}

void cuda_moe_combine_forward(float *out, const float *ye, const float *w, const int32_t *slot, int n, int k, int d) {
    if (n <= 0) return;
    const int32_t *s = cuda_stage(slot, (size_t)n * k * sizeof *slot, 0);
    if (s) LAUNCH(cu_moe_combine(out, ye, w, s, n, k, d, stream()), "moe_combine_forward");
}

void cuda_moe_combine_backward(float *dye, float *dw, const float *dout, const float *ye, const float *w,
                               const int32_t *slot, int n, int k, int d) {
    if (n <= 0) return;
    const int32_t *s = cuda_stage(slot, (size_t)n * k * sizeof *slot, 0);
    if (s) LAUNCH(cu_moe_combine_backward(dye, dw, dout, ye, w, s, n, k, d, stream()), "moe_combine_backward");
}

void cuda_swiglu_clamped_forward(float *out, const float *gate, const float *up, size_t n, float alpha, float limit) {
    LAUNCH(cu_swiglu_clamped(out, gate, up, n, alpha, limit, stream()), "swiglu_clamped");
}

void cuda_swiglu_clamped_backward(float *dg, float *du, const float *dh, const float *g, const float *u, size_t n,
                                  float alpha, float limit) {
    LAUNCH(cu_swiglu_clamped_backward(dg, du, dh, g, u, n, alpha, limit, stream()), "swiglu_clamped backward");
}

void cuda_attention_sinks_backward(float *dsinks, const float *out, const float *dout, const float *lse,
                                   const float *sinks, int n, int n_heads, int hd) {
    LAUNCH(cu_attention_sinks_backward(dsinks, out, dout, lse, sinks, n, n_heads, hd, stream()),
           "attention_sinks_backward");
}

void cuda_matmul_forward_packed(float *out, const float *in, const void *w_packed, weight_format fmt,
                                const float *bias, int n, int in_dim, int out_dim) {
    if (cuda_broken() || n <= 0) return;
    if (fmt != WEIGHTS_MXFP4) {
        cuda_fail_msg("packed weights on cuda are MXFP4 only");
        return;
    }
    /* slot 1: cuda_matmul_bf16 rounds its input into slot 0 */
    uint16_t *w16 = cuda_act16_slot(1, (size_t)out_dim * in_dim);
    if (!w16 || cuda_failed(cu_mx4w_to_bf16(w16, w_packed, out_dim, in_dim, stream()), "mxfp4 to bf16")) return;
    cuda_matmul_bf16(out, in, w16, bias, n, in_dim, out_dim);
}
