// The mixture-of-experts kernels (ops.h's moe.c and swiglu.c's clamped
// SwiGLU) and the MXFP4 expansion that feeds a packed expert to the bf16
// GEMM:
//   k_moe_route       a thread per row: moe.c's softmax (float sums per
//                     block of 256 added in double, one reciprocal) and its
//                     top k (k passes, the first of equals wins), the
//                     weights renormalised in double; or the replayed
//                     experts of the row;
//   k_moe_count/place the counting sort of moe_group: a block per expert
//                     counts its assignments, then places them in
//                     assignment order (a block-wide scan per chunk), so
//                     row_of, slot_of and offsets are moe_group's exactly;
//   k_moe_combine     the weighted sum of a row's k expert outputs, j in
//                     order as moe.c;
//   k_moe_combine_bwd a block per assignment: dye, and dw's dot in double;
//   k_moe_route_bwd   a thread per row, moe.c's expression;
//   k_swiglu_clamped  gpt-oss's activation and its backward (expf for
//                     vec_expf);
//   k_mx4w_to_bf16    packed_mxfp4.h's panels to W [n, k] in bf16, the
//                     values of packed_decode.h: every MXFP4 value is a
//                     multiple of 2^-128 with at most two significant
//                     bits, so the bf16 is exact (the float's upper half).
#include <math.h>

#include "kernel_util.h"
#include "kernels.h"
#include "packed_decode.h"

namespace {

constexpr int kSoftmaxBlock = 256; // softmax.c's BLOCK

__global__ void k_moe_route(float *probs, int32_t *sel, float *w, const float *logits, const int32_t *replay, int n,
                            int E, int k, int norm) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n) return;
    float *p = probs + (size_t)r * E;
    const float *z = logits + (size_t)r * E; // may be p itself: each value is read before it is written
    float mx = -INFINITY;
    for (int x = 0; x < E; x++) mx = z[x] > mx ? z[x] : mx;
    double sum = 0;
    for (int i0 = 0; i0 < E; i0 += kSoftmaxBlock) {
        const int i1 = E - i0 < kSoftmaxBlock ? E : i0 + kSoftmaxBlock;
        float block = 0;
        for (int x = i0; x < i1; x++) {
            p[x] = expf(z[x] - mx);
            block += p[x];
        }
        sum += block;
    }
    const float inv = (float)(1.0 / sum);
    for (int x = 0; x < E; x++) p[x] *= inv;
    int32_t *s = sel + (size_t)r * k;
    float *wr = w + (size_t)r * k;
    const int32_t *rep = replay && replay[(size_t)r * k] >= 0 ? replay + (size_t)r * k : nullptr;
    double wsum = 0;
    for (int j = 0; j < k; j++) {
        int best = -1;
        if (rep) {
            best = rep[j];
        } else {
            for (int x = 0; x < E; x++) {
                bool taken = false;
                for (int i = 0; i < j && !taken; i++) taken = s[i] == x;
                if (!taken && (best < 0 || p[x] > p[best])) best = x;
            }
        }
        s[j] = best;
        wr[j] = p[best];
        wsum += p[best];
    }
    if (norm)
        for (int j = 0; j < k; j++) wr[j] = (float)(wr[j] / wsum);
}

// counts[x] = the assignments of expert blockIdx.x.
__global__ void k_moe_count(int *counts, const int32_t *sel, int nk) {
    __shared__ double shared[kThreads / 32];
    const int x = blockIdx.x;
    int c = 0;
    for (int a = threadIdx.x; a < nk; a += blockDim.x) c += sel[a] == x;
    const double total = block_sum((double)c, shared);
    if (threadIdx.x == 0) counts[x] = (int)total;
}

// Expert blockIdx.x's assignments in order: slot offsets[x] + (their rank).
// Block 0 also writes offsets (the counts' prefix sums).
__global__ void k_moe_place(int32_t *row_of, int32_t *slot_of, int *offsets, const int *counts, const int32_t *sel,
                            int nk, int k, int E) {
    __shared__ int base, warp_n[kThreads / 32];
    const int x = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (threadIdx.x == 0) {
        int at = 0;
        for (int i = 0; i < x; i++) at += counts[i];
        base = at;
        if (x == 0) {
            offsets[0] = 0;
            for (int i = 0; i < E; i++) offsets[i + 1] = offsets[i] + counts[i];
        }
    }
    __syncthreads();
    int next = base; // every thread keeps the same running slot
    for (int a0 = 0; a0 < nk; a0 += blockDim.x) {
        const int a = a0 + threadIdx.x;
        const bool mine = a < nk && sel[a] == x;
        const unsigned ballot = __ballot_sync(0xffffffffu, mine);
        if (lane == 0) warp_n[warp] = __popc(ballot);
        __syncthreads();
        int before = 0, total = 0;
        for (int i = 0; i < kThreads / 32; i++) {
            before += i < warp ? warp_n[i] : 0;
            total += warp_n[i];
        }
        if (mine) {
            const int slot = next + before + __popc(ballot & ((1u << lane) - 1u));
            slot_of[a] = slot;
            row_of[slot] = a / k;
        }
        next += total;
        __syncthreads(); // warp_n is rewritten by the next chunk
    }
}

__global__ void k_moe_combine(float *out, const float *ye, const float *w, const int32_t *slot, int n, int k, int d) {
    GRID_LOOP(i, (size_t)n * d) {
        const size_t r = i / d, c = i % d;
        float o = 0;
        for (int j = 0; j < k; j++) o += w[r * k + j] * ye[(size_t)slot[r * k + j] * d + c];
        out[i] = o;
    }
}

// Block a: assignment a = (row r, j).
__global__ void k_moe_combine_bwd(float *dye, float *dw, const float *dout, const float *ye, const float *w,
                                  const int32_t *slot, int k, int d) {
    __shared__ double shared[kThreads / 32];
    const size_t a = blockIdx.x, r = a / k, at = (size_t)slot[a] * d;
    const float wj = w[a], *g = dout + r * d;
    double dot = 0;
    for (int c = threadIdx.x; c < d; c += blockDim.x) {
        dye[at + c] = wj * g[c];
        dot += (double)g[c] * ye[at + c];
    }
    const double total = block_sum(dot, shared);
    if (dw && threadIdx.x == 0) dw[a] = (float)total;
}

__global__ void k_moe_route_bwd(float *dlogits, const float *dw, const float *probs, const int32_t *sel, const float *w,
                                int n, int E, int k, int norm) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n) return;
    const float *p = probs + (size_t)r * E, *dwr = dw + (size_t)r * k, *wr = w + (size_t)r * k;
    const int32_t *s = sel + (size_t)r * k;
    float *dz = dlogits + (size_t)r * E;
    double dot = 0, S = 0, mean = 0;
    for (int j = 0; j < k; j++) dot += (double)dwr[j] * wr[j], S += p[s[j]];
    for (int j = 0; j < k; j++) mean += p[s[j]] * (norm ? (dwr[j] - dot) / S : (double)dwr[j]);
    for (int x = 0; x < E; x++) dz[x] = (float)(-p[x] * mean);
    for (int j = 0; j < k; j++) dz[s[j]] = (float)(p[s[j]] * ((norm ? (dwr[j] - dot) / S : (double)dwr[j]) - mean));
}

__global__ void k_swiglu_clamped(float *out, const float *gate, const float *up, size_t n, float alpha, float limit) {
    GRID_LOOP(i, n) {
        const float g = gate[i] < limit ? gate[i] : limit;
        const float u = up[i] < -limit ? -limit : up[i] > limit ? limit : up[i];
        out[i] = g / (1.0f + expf(-alpha * g)) * (u + 1.0f);
    }
}

__global__ void k_swiglu_clamped_bwd(float *dg, float *du, const float *dh, const float *g, const float *u, size_t n,
                                     float alpha, float limit) {
    GRID_LOOP(i, n) {
        const float gi = g[i], ui = u[i], d = dh[i]; // dg may be dh
        const float x = gi < limit ? gi : limit, y = ui < -limit ? -limit : ui > limit ? limit : ui;
        const float sig = 1.0f / (1.0f + expf(-alpha * x));
        du[i] = ui >= -limit && ui <= limit ? d * x * sig : 0.0f;
        dg[i] = gi <= limit ? d * (y + 1.0f) * sig * (1.0f + alpha * x * (1.0f - sig)) : 0.0f;
    }
}

// A thread per (column, block of 32): its 32 values into W's row col.
__global__ void k_mx4w_to_bf16(uint16_t *dst, const unsigned char *src, int n, int k) {
    const int nb = k / kPackedBlock;
    GRID_LOOP(i, (size_t)n * nb) {
        const int col = (int)(i / nb), b = (int)(i % nb);
        const packed_block blk = packed_block_of(src, CU_PACKED_MXFP4, col, b, k);
        uint16_t *o = dst + (size_t)col * k + (size_t)b * kPackedBlock;
        for (int t = 0; t < kPackedBlock; t++)
            o[t] = (uint16_t)(__float_as_uint(packed_block_value(blk, CU_PACKED_MXFP4, t)) >> 16);
    }
}

inline unsigned row_blocks(int n) { return (unsigned)((n + kThreads - 1) / kThreads); }

} // namespace

extern "C" {

cudaError_t cu_moe_route(float *probs, int32_t *sel, float *w, const float *logits, const int32_t *replay, int n,
                         int n_experts, int k, int norm, cudaStream_t st) {
    if (n <= 0) return cudaSuccess;
    if (k <= 0 || k > n_experts) return cudaErrorInvalidValue;
    k_moe_route<<<row_blocks(n), kThreads, 0, st>>>(probs, sel, w, logits, replay, n, n_experts, k, norm);
    return cudaGetLastError();
}

cudaError_t cu_moe_group(int32_t *row_of, int32_t *slot_of, int *offsets, int *counts, const int32_t *sel, int n,
                         int k, int n_experts, cudaStream_t st) {
    if (n_experts <= 0 || n_experts > 0x7fffffff) return cudaErrorInvalidValue;
    const int nk = n * k;
    k_moe_count<<<(unsigned)n_experts, kThreads, 0, st>>>(counts, sel, nk);
    k_moe_place<<<(unsigned)n_experts, kThreads, 0, st>>>(row_of, slot_of, offsets, counts, sel, nk, k, n_experts);
    return cudaGetLastError();
}

cudaError_t cu_moe_combine(float *out, const float *ye, const float *w, const int32_t *slot, int n, int k, int d,
                           cudaStream_t st) {
    const size_t total = (size_t)n * d;
    if (total) k_moe_combine<<<blocks_for(total), kThreads, 0, st>>>(out, ye, w, slot, n, k, d);
    return cudaGetLastError();
}

cudaError_t cu_moe_combine_backward(float *dye, float *dw, const float *dout, const float *ye, const float *w,
                                    const int32_t *slot, int n, int k, int d, cudaStream_t st) {
    const long long nk = (long long)n * k;
    if (nk <= 0) return cudaSuccess;
    if (nk > 0x7fffffffLL) return cudaErrorInvalidConfiguration;
    k_moe_combine_bwd<<<(unsigned)nk, kThreads, 0, st>>>(dye, dw, dout, ye, w, slot, k, d);
    return cudaGetLastError();
}

cudaError_t cu_moe_route_backward(float *dlogits, const float *dw, const float *probs, const int32_t *sel,
                                  const float *w, int n, int n_experts, int k, int norm, cudaStream_t st) {
    if (n <= 0) return cudaSuccess;
    k_moe_route_bwd<<<row_blocks(n), kThreads, 0, st>>>(dlogits, dw, probs, sel, w, n, n_experts, k, norm);
    return cudaGetLastError();
}

cudaError_t cu_swiglu_clamped(float *out, const float *gate, const float *up, size_t n, float alpha, float limit,
                              cudaStream_t st) {
    if (n) k_swiglu_clamped<<<blocks_for(n), kThreads, 0, st>>>(out, gate, up, n, alpha, limit);
    return cudaGetLastError();
}

cudaError_t cu_swiglu_clamped_backward(float *dg, float *du, const float *dh, const float *g, const float *u, size_t n,
                                       float alpha, float limit, cudaStream_t st) {
    if (n) k_swiglu_clamped_bwd<<<blocks_for(n), kThreads, 0, st>>>(dg, du, dh, g, u, n, alpha, limit);
    return cudaGetLastError();
}

cudaError_t cu_mx4w_to_bf16(uint16_t *dst, const void *src, int n, int k, cudaStream_t st) {
    if (k % kPackedBlock) return cudaErrorInvalidValue;
    const size_t total = (size_t)n * (k / kPackedBlock);
    if (total) k_mx4w_to_bf16<<<blocks_for(total), kThreads, 0, st>>>(dst, (const unsigned char *)src, n, k);
    return cudaGetLastError();
}

} // extern "C"
