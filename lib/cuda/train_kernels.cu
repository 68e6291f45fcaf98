// The training kernels of the CUDA backend (grpo-update --device cuda; launchers declared in
// kernels.h): the backwards of RMSNorm, SwiGLU and the fused head's
// log-softmax, the scatter-add of rows, the optimizer updates, and the
// gradient norm's sum of squares and clipping scale. Each mirrors the CPU op
// of the same name in lib/ops. The optimizer updates and the scatter-add do the CPU's float
// operations in the CPU's order with rounding intrinsics (no fused
// multiply-add), so their results are the CPU's bits: a checkpoint's
// AdamW step does not depend on the device it was taken on.
#include <math.h>

#include "kernel_util.h"
#include "kernels.h"

namespace {

// dw[i] += sum over rows of dy * x * rstd, in double and in row order (as
// norm.c): one thread per column.
__global__ void k_rmsnorm_dw(float *dw, const float *dy, const float *x, const float *rstd, int n, int d) {
    GRID_LOOP(i, (size_t)d) {
        double acc = 0;
        for (int r = 0; r < n; r++) acc += (double)dy[(size_t)r * d + i] * x[(size_t)r * d + i] * rstd[r];
        dw[i] += (float)acc;
    }
}

// One block per row: dx = s w dy - (s^3 (w dy . x) / d) x.
__global__ void k_rmsnorm_dx(float *dx, const float *dy, const float *x, const float *w, const float *rstd, int d) {
    __shared__ double part[kThreads / 32];
    const float *xr = x + (size_t)blockIdx.x * d, *dyr = dy + (size_t)blockIdx.x * d;
    float *dxr = dx + (size_t)blockIdx.x * d;
    double dot = 0;
    for (int i = threadIdx.x; i < d; i += blockDim.x) dot += (double)w[i] * dyr[i] * xr[i];
    dot = block_sum(dot, part);
    float s = rstd[blockIdx.x], c = (float)((double)s * s * s * dot / d);
    for (int i = threadIdx.x; i < d; i += blockDim.x) dxr[i] = __fsub_rn(__fmul_rn(__fmul_rn(s, w[i]), dyr[i]), __fmul_rn(c, xr[i]));
}

__global__ void k_swiglu_backward(float *dg, float *du, const float *dh, const float *g, const float *u, size_t n) {
    GRID_LOOP(i, n) {
        float x = g[i], sig = 1.0f / (1.0f + expf(-x)), silu = x * sig, d = dh[i];
        du[i] = d * silu;
        dg[i] = d * u[i] * sig * (1.0f + x * (1.0f - sig));
    }
}

// One block per row: z becomes d(loss)/d(logits) = (onehot(tok) - p) g,
// with the entropy term -p (log p + H) ge where dentropy is given and not 0
// (softmax.c's head_logsoftmax_backward; expf for vec_expf).
__global__ void k_head_backward(float *z, int V, float inv_t, const int32_t *tok, const float *dlogp, const float *lse,
                                const float *dentropy, const float *entropy) {
    int j = blockIdx.x;
    float *zj = z + (size_t)j * V, g = dlogp[j] * inv_t, l = lse[j];
    bool with_h = dentropy && dentropy[j] != 0;
    float ge = with_h ? dentropy[j] * inv_t : 0.0f, h = with_h ? entropy[j] : 0.0f;
    int t = tok[j];
    for (int v = threadIdx.x; v < V; v += blockDim.x) {
        float zl = zj[v] - l, e = expf(zl);
        float d = with_h ? -(g + ge * (zl + h)) * e : -g * e;
        zj[v] = v == t ? d + g : d;
    }
}

// dst[idx[i]] += src[i] for i in order: one thread per column, so rows that
// repeat an index add up in the CPU's order.
__global__ void k_scatter_add(float *dst, const float *src, const int32_t *idx, int n, int d) {
    GRID_LOOP(c, (size_t)d) {
        for (int i = 0; i < n; i++) {
            float *to = dst + (size_t)idx[i] * d + c;
            *to = __fadd_rn(*to, src[(size_t)i * d + c]);
        }
    }
}

__global__ void k_adamw(float keep, float beta1, float one_minus_beta1, float beta2, float one_minus_beta2,
                        float neg_step, float bias2_sqrt, float eps, float *param, const float *grad, float *m,
                        float *v, size_t n) {
    GRID_LOOP(i, n) {
        float p = __fmul_rn(param[i], keep), g = grad[i];
        float mi = __fadd_rn(__fmul_rn(m[i], beta1), __fmul_rn(one_minus_beta1, g));
        float vi = __fadd_rn(__fmul_rn(v[i], beta2), __fmul_rn(__fmul_rn(one_minus_beta2, g), g));
        float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), bias2_sqrt), eps);
        m[i] = mi;
        v[i] = vi;
        param[i] = __fadd_rn(p, __fdiv_rn(__fmul_rn(neg_step, mi), denom));
    }
}

__global__ void k_sgd(float keep, float neg_lr, float *param, const float *grad, size_t n) {
    GRID_LOOP(i, n) param[i] = __fadd_rn(__fmul_rn(param[i], keep), __fmul_rn(neg_lr, grad[i]));
}

// One thread per column: the rows in order, in double, as matmul.c's db.
__global__ void k_colsum_add(float *db, const float *dout, int n, int d) {
    GRID_LOOP(o, (size_t)d) {
        double acc = 0;
        for (int r = 0; r < n; r++) acc += dout[(size_t)r * d + o];
        db[o] += (float)acc;
    }
}

// Sum of squares, deterministic: a fixed grid of CU_SUM_BLOCKS blocks (not
// sized by the device or by n), thread t of the grid summing x[t],
// x[t + stride], ... in that order in double (stride = CU_SUM_BLOCKS *
// kThreads), each block's partial through block_sum's fixed shuffle tree;
// then one block sums the partials (thread t: partials t, t + kThreads, ...
// in order, then block_sum). The same bits every run, whatever else runs.
// A float's square is exact in double.
__global__ void k_sum_squares_part(double *part, const float *x, size_t n) {
    __shared__ double red[kThreads / 32];
    double acc = 0;
    GRID_LOOP(i, n) {
        double v = x[i];
        acc += v * v;
    }
    acc = block_sum(acc, red);
    if (threadIdx.x == 0) part[blockIdx.x] = acc;
}

__global__ void k_sum_squares_final(double *out, const double *part) {
    __shared__ double red[kThreads / 32];
    double acc = 0;
    for (int i = threadIdx.x; i < CU_SUM_BLOCKS; i += kThreads) acc += part[i];
    acc = block_sum(acc, red);
    if (threadIdx.x == 0) *out = acc;
}

// optim.c's grad_scale: g[j] *= f, one rounding (no contraction to worry
// about, but __fmul_rn says so).
__global__ void k_scale(float *x, float f, size_t n) {
    GRID_LOOP(i, n) x[i] = __fmul_rn(x[i], f);
}

} // namespace

extern "C" {

cudaError_t cu_sum_squares(double *work, const float *x, size_t n, cudaStream_t st) {
    if (n) {
        k_sum_squares_part<<<CU_SUM_BLOCKS, kThreads, 0, st>>>(work, x, n);
        k_sum_squares_final<<<1, kThreads, 0, st>>>(work + CU_SUM_BLOCKS, work);
    }
    return cudaGetLastError();
}

cudaError_t cu_scale(float *x, float f, size_t n, cudaStream_t st) {
    if (n) k_scale<<<blocks_for(n), kThreads, 0, st>>>(x, f, n);
    return cudaGetLastError();
}

cudaError_t cu_rmsnorm_backward(float *dx, float *dw, const float *dy, const float *x, const float *w,
                                const float *rstd, int n, int d, cudaStream_t st) {
    if (n > 0 && d > 0) {
        if (dw) k_rmsnorm_dw<<<blocks_for((size_t)d), kThreads, 0, st>>>(dw, dy, x, rstd, n, d);
        k_rmsnorm_dx<<<n, kThreads, 0, st>>>(dx, dy, x, w, rstd, d);
    }
    return cudaGetLastError();
}

cudaError_t cu_swiglu_backward(float *dg, float *du, const float *dh, const float *g, const float *u, size_t n,
                               cudaStream_t st) {
    if (n) k_swiglu_backward<<<blocks_for(n), kThreads, 0, st>>>(dg, du, dh, g, u, n);
    return cudaGetLastError();
}

cudaError_t cu_head_logsoftmax_backward(float *z, int n, int V, float inv_t, const int32_t *tok, const float *dlogp,
                                        const float *lse, const float *dentropy, const float *entropy,
                                        cudaStream_t st) {
    if (n > 0 && V > 0) k_head_backward<<<n, kThreads, 0, st>>>(z, V, inv_t, tok, dlogp, lse, dentropy, entropy);
    return cudaGetLastError();
}

cudaError_t cu_colsum_add(float *db, const float *dout, int n, int d, cudaStream_t st) {
    if (n > 0 && d > 0) k_colsum_add<<<blocks_for((size_t)d), kThreads, 0, st>>>(db, dout, n, d);
    return cudaGetLastError();
}

cudaError_t cu_scatter_add(float *dst, const float *src, const int32_t *idx, int n, int d, cudaStream_t st) {
    if (n > 0 && d > 0) k_scatter_add<<<blocks_for((size_t)d), kThreads, 0, st>>>(dst, src, idx, n, d);
    return cudaGetLastError();
}

cudaError_t cu_adamw(const float consts[8], float *param, const float *grad, float *m, float *v, size_t n,
                     cudaStream_t st) {
    if (n)
        k_adamw<<<blocks_for(n), kThreads, 0, st>>>(consts[0], consts[1], consts[2], consts[3], consts[4], consts[5],
                                                    consts[6], consts[7], param, grad, m, v, n);
    return cudaGetLastError();
}

cudaError_t cu_sgd(float keep, float neg_lr, float *param, const float *grad, size_t n, cudaStream_t st) {
    if (n) k_sgd<<<blocks_for(n), kThreads, 0, st>>>(keep, neg_lr, param, grad, n);
    return cudaGetLastError();
}

} // extern "C"
