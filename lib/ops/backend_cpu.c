/* The CPU backends: the table of ops.h's functions, and the same table with
 * its matrix products in bf16 (gemm_bf16.h) for training with
 * grpo-update --compute bf16. */
#include "backend.h"

#include <string.h>

#include "gemm_bf16.h"

/* Every op but the matrix products, which the two tables choose. */
#define CPU_OPS                                                                                                       \
    .rmsnorm_forward = rmsnorm_forward, .rmsnorm_backward = rmsnorm_backward,                                         \
    .matmul_forward_packed = matmul_forward_packed, .matmul_forward_frozen = matmul_forward_frozen,                  \
    .matmul_backward_frozen = matmul_backward_frozen, .gather_rows_packed = gather_rows_packed,                      \
    .rope_cos_sin = rope_cos_sin, .rope_forward = rope_forward,                                                      \
    .rope_backward = rope_backward, .swiglu_forward = swiglu_forward, .swiglu_backward = swiglu_backward,              \
    .swiglu_clamped_forward = swiglu_clamped_forward, .swiglu_clamped_backward = swiglu_clamped_backward,              \
    .kv_write = kv_write, .attention_forward = attention_forward, .attention_backward = attention_backward,          \
    .attention_sinks_backward = attention_sinks_backward,                                                             \
    .head_logsoftmax = head_logsoftmax, .head_logsoftmax_backward = head_logsoftmax_backward,                         \
    .add_inplace = add_inplace, .gather_rows = gather_rows, .scatter_add_rows = scatter_add_rows,                     \
    .dropout_rows = dropout_rows, .moe_route_forward = moe_route_forward,                                          \
    .moe_route_replay_forward = moe_route_replay_forward,                                                            \
    .moe_route_backward = moe_route_backward, .moe_balance_backward = moe_balance_backward,                          \
    .moe_combine_forward = moe_combine_forward,                                                                      \
    .moe_combine_backward = moe_combine_backward, .moe_group = moe_group, .adamw_update = adamw_update, .sgd_update = sgd_update

static const backend cpu = {
    .name = "cpu",
    .gemm = gemm,
    .matmul_forward = matmul_forward,
    .matmul_backward = matmul_backward,
    CPU_OPS,
};

const backend *backend_cpu(void) { return &cpu; }

/* matmul_forward and matmul_backward (ops.h) on gemm_bf16. */
static void matmul_forward_bf16(float *out, const float *in, const float *w, const float *bias, int n, int in_dim,
                                int out_dim) {
    if (n <= 0) return;
    if (bias)
        for (int r = 0; r < n; r++) memcpy(out + (size_t)r * out_dim, bias, (size_t)out_dim * sizeof *out);
    gemm_bf16(false, true, n, out_dim, in_dim, 1.0f, in, in_dim, w, in_dim, bias ? 1.0f : 0.0f, out, out_dim);
}

static void matmul_backward_bf16(float *din, float *dw, float *db, const float *dout, const float *in, const float *w,
                                 int n, int in_dim, int out_dim, bool accumulate) {
    if (n <= 0) return;
    if (din)
        gemm_bf16(false, false, n, in_dim, out_dim, 1.0f, dout, out_dim, w, in_dim, accumulate ? 1.0f : 0.0f, din,
                  in_dim);
    if (dw) gemm_bf16(true, false, out_dim, in_dim, n, 1.0f, dout, out_dim, in, in_dim, 1.0f, dw, in_dim);
    if (db) matmul_backward(NULL, NULL, db, dout, in, w, n, in_dim, out_dim, false); /* float32 column sums */
}

static const backend cpu_bf16 = {
    .name = "cpu-bf16",
    .gemm = gemm_bf16,
    .matmul_forward = matmul_forward_bf16,
    .matmul_backward = matmul_backward_bf16,
    CPU_OPS,
};

const backend *backend_cpu_bf16(void) { return gemm_bf16_supported() ? &cpu_bf16 : NULL; }
