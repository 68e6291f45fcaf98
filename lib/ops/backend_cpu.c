/* The CPU backend: the table of ops.h's functions. */
#include "backend.h"

static const backend cpu = {
    .name = "cpu",
    .rmsnorm_forward = rmsnorm_forward,
    .rmsnorm_backward = rmsnorm_backward,
    .gemm = gemm,
    .matmul_forward = matmul_forward,
    .matmul_forward_packed = matmul_forward_packed,
    .matmul_backward = matmul_backward,
    .rope_cos_sin = rope_cos_sin,
    .rope_forward = rope_forward,
    .rope_backward = rope_backward,
    .swiglu_forward = swiglu_forward,
    .swiglu_backward = swiglu_backward,
    .kv_write = kv_write,
    .attention_forward = attention_forward,
    .attention_backward = attention_backward,
    .head_logsoftmax = head_logsoftmax,
    .head_logsoftmax_backward = head_logsoftmax_backward,
    .add_inplace = add_inplace,
    .gather_rows = gather_rows,
    .scatter_add_rows = scatter_add_rows,
    .dropout_rows = dropout_rows,
    .adamw_update = adamw_update,
    .sgd_update = sgd_update,
};

const backend *backend_cpu(void) { return &cpu; }
