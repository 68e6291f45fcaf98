// The element-wise, row and sampling kernels of the CUDA backend (launchers
// declared in kernels.h). Each mirrors the CPU op of the same name in
// lib/ops: the same formula in fp32, sums in double where the CPU sums in
// double, so the two differ only by rounding.
#include <cuda_bf16.h>
#include <math.h>

#include "kernels.h"
#include "kernel_util.h"

namespace {

__device__ __forceinline__ uint16_t bf16_bits(float x) {
    __nv_bfloat16 b = __float2bfloat16_rn(x);
    return *reinterpret_cast<uint16_t *>(&b);
}

__global__ void k_to_bf16(uint16_t *out, const float *x, size_t n) {
    GRID_LOOP(i, n) out[i] = bf16_bits(x[i]);
}

__global__ void k_bias_add(float *out, const float *bias, int n, int d) {
    GRID_LOOP(i, (size_t)n * d) out[i] += bias[i % d];
}

// One block per row; the mean of squares in double as norm.c.
__global__ void k_rmsnorm(float *out, float *rstd, const float *x, const float *w, int d, float eps) {
    __shared__ double part[kThreads / 32];
    const float *xr = x + (size_t)blockIdx.x * d;
    float *o = out + (size_t)blockIdx.x * d;
    double ss = 0;
    for (int i = threadIdx.x; i < d; i += blockDim.x) ss += (double)xr[i] * xr[i];
    ss = block_sum(ss, part);
    float s = (float)(1.0 / sqrt(ss / d + (double)eps));
    if (rstd && threadIdx.x == 0) rstd[blockIdx.x] = s;
    for (int i = threadIdx.x; i < d; i += blockDim.x) o[i] = w[i] * (xr[i] * s); // out may alias x
}

__global__ void k_rope(float *x, const float *cos_t, const float *sin_t, int n, int n_heads, int head_dim, float sign) {
    int half = head_dim / 2;
    GRID_LOOP(i, (size_t)n * n_heads * half) {
        size_t r = i / ((size_t)n_heads * half), h = i / half % n_heads, j = i % half;
        float *v = x + (r * n_heads + h) * head_dim;
        float c = cos_t[r * half + j], sn = sign * sin_t[r * half + j];
        float a = v[j], b = v[j + half];
        v[j] = a * c - b * sn;
        v[j + half] = b * c + a * sn;
    }
}

__global__ void k_swiglu(float *out, const float *gate, const float *up, size_t n) {
    GRID_LOOP(i, n) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

__global__ void k_add(float *x, const float *y, size_t n) {
    GRID_LOOP(i, n) x[i] += y[i];
}

__global__ void k_gather(float *dst, const float *src, const int32_t *idx, int n, int d) {
    GRID_LOOP(i, (size_t)n * d) dst[i] = src[(size_t)idx[i / d] * d + i % d];
}

__device__ __forceinline__ void put(float *c, size_t at, float x) { c[at] = x; }
__device__ __forceinline__ void put(uint16_t *c, size_t at, float x) { c[at] = bf16_bits(x); }

template <typename E>
__global__ void k_kv_write(E *kc, E *vc, const float *k, const float *v, const size_t *row_kv, const int *pos, int n,
                           int kv_dim) {
    GRID_LOOP(i, (size_t)n * kv_dim) {
        size_t r = i / kv_dim, j = i % kv_dim, at = row_kv[r] + (size_t)pos[r] * kv_dim + j;
        put(kc, at, k[i]);
        put(vc, at, v[i]);
    }
}

// One block per row: z *= inv_t, then lse and the mean of z under softmax(z)
// with sums in double, as softmax.c's logsumexp_row.
__global__ void k_head(float *z, int V, float inv_t, const int32_t *tok, float *logp, float *entropy, float *lse_out) {
    __shared__ double part[kThreads / 32];
    __shared__ float mpart[kThreads / 32];
    float *zr = z + (size_t)blockIdx.x * V;
    float m = -INFINITY;
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
        zr[i] *= inv_t;
        m = fmaxf(m, zr[i]);
    }
    m = block_max(m, mpart);
    double s = 0, sz = 0;
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
        double p = exp((double)(zr[i] - m));
        s += p;
        sz += p * zr[i];
    }
    s = block_sum(s, part);
    sz = block_sum(sz, part);
    if (threadIdx.x == 0) {
        double lse = m + log(s);
        if (logp) logp[blockIdx.x] = (float)(zr[tok[blockIdx.x]] - lse);
        if (entropy) entropy[blockIdx.x] = (float)(lse - sz / s);
        if (lse_out) lse_out[blockIdx.x] = (float)lse;
    }
}

// Philox4x32-10, word for word lib/util/rng.c's philox4x32_10.
__device__ void philox(const uint32_t c_in[4], uint32_t k0, uint32_t k1, uint32_t out[4]) {
    const uint32_t m0 = 0xD2511F53u, m1 = 0xCD9E8D57u, w0 = 0x9E3779B9u, w1 = 0xBB67AE85u;
    uint32_t c0 = c_in[0], c1 = c_in[1], c2 = c_in[2], c3 = c_in[3];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)m0 * c0, p1 = (uint64_t)m1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n1 = (uint32_t)p1;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1, n3 = (uint32_t)p0;
        c0 = n0, c1 = n1, c2 = n2, c3 = n3;
        k0 += w0, k1 += w1;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

__global__ void k_philox(uint32_t *out, const uint32_t *counter, const uint32_t *key, int n) {
    GRID_LOOP(i, (size_t)n) philox(counter + 4 * i, key[2 * i], key[2 * i + 1], out + 4 * i);
}

// rows.c's dropout_rows: thread i is row i / groups, elements 4 (i % groups)
// .. + 3, their Philox block keyed as the CPU keys it.
__global__ void k_dropout_rows(float *x, int n_rows, int n, const uint64_t *row_key, const int *row_pos, uint32_t k0,
                               uint32_t k1, uint32_t threshold, float keep_scale) {
    const int groups = (n + 3) / 4;
    GRID_LOOP(i, (size_t)n_rows * groups) {
        const int r = (int)(i / groups), c = (int)(i % groups) * 4;
        const uint64_t key = row_key[r];
        const uint32_t ctr[4] = {(uint32_t)(c / 4), (uint32_t)key, (uint32_t)(key >> 32), (uint32_t)row_pos[r]};
        uint32_t w[4];
        philox(ctr, k0, k1, w);
        float *xr = x + (size_t)r * n;
        for (int j = 0; j < 4 && c + j < n; j++) xr[c + j] = w[j] < threshold ? 0.0f : __fmul_rn(xr[c + j], keep_scale);
    }
}

// rng.c's rng_u32 on a stream whose next block is *block with *used words
// of the previous block taken (4: none left).
__device__ uint32_t next_u32(uint32_t k0, uint32_t k1, uint64_t *block, int *used) {
    uint32_t buf[4];
    uint64_t b = *used == 4 ? *block : *block - 1;
    uint32_t ctr[4] = {(uint32_t)b, (uint32_t)(b >> 32), 0, 0};
    philox(ctr, k0, k1, buf);
    if (*used == 4) {
        (*block)++;
        *used = 0;
    }
    uint32_t w = buf[0];
    for (int i = 1; i < 4; i++) // a constant index keeps buf in registers
        if (i == *used) w = buf[i];
    (*used)++;
    return w;
}

// One block per row. The draw walks the ids in order: each thread sums a
// contiguous chunk, the chunks' prefix sums find the thread whose chunk
// holds the draw, and that thread walks its chunk.
__global__ void k_sample_plain(int32_t *tok_out, float *logp_out, const float *logits, int V, float inv_t,
                               const uint32_t *key, const uint64_t *block, const int *used) {
    __shared__ double part[kThreads / 32];
    __shared__ float mpart[kThreads / 32];
    __shared__ double chunk_sum[kThreads];
    __shared__ int best_at[kThreads];
    __shared__ float best_v[kThreads];
    const int j = blockIdx.x, t = threadIdx.x;
    const float *lr = logits + (size_t)j * V;
    const bool greedy = inv_t <= 0;
    const float it = greedy ? 1.0f : inv_t;
    // the scaled maximum, and (for greedy) the first argmax of the raw logits
    float m = -INFINITY, bv = -INFINITY;
    int bi = V;
    for (int i = t; i < V; i += blockDim.x) {
        m = fmaxf(m, lr[i] * it);
        if (lr[i] > bv) bv = lr[i], bi = i;
    }
    best_v[t] = bv;
    best_at[t] = bi;
    m = block_max(m, mpart);
    double s = 0;
    for (int i = t; i < V; i += blockDim.x) s += exp((double)(lr[i] * it - m));
    s = block_sum(s, part);
    const double lse = m + log(s);
    if (!isfinite(lse)) { // NaN or infinite logits: the host reports the model broken (as sample_token's -1)
        if (t == 0) tok_out[j] = -1, logp_out[j] = NAN;
        return;
    }
    if (greedy) {
        if (t == 0) {
            int b = best_at[0];
            float v = best_v[0];
            for (int k = 1; k < (int)blockDim.x; k++)
                if (best_v[k] > v || (best_v[k] == v && best_at[k] < b)) v = best_v[k], b = best_at[k];
            tok_out[j] = b;
            logp_out[j] = (float)(lr[b] * it - lse);
        }
        return;
    }
    const int per = (V + blockDim.x - 1) / blockDim.x, lo = t * per, hi = lo + per < V ? lo + per : V;
    double cs = 0;
    for (int i = lo; i < hi; i++) cs += exp((double)(lr[i] * it) - lse);
    chunk_sum[t] = cs;
    __syncthreads();
    if (t == 0) {
        uint64_t b = block[j];
        int u = used[j];
        uint64_t hi64 = next_u32(key[2 * j], key[2 * j + 1], &b, &u);
        uint64_t w = hi64 << 32 | next_u32(key[2 * j], key[2 * j + 1], &b, &u);
        double total = 0;
        for (int k = 0; k < (int)blockDim.x; k++) total += chunk_sum[k];
        double target = (double)(w >> 11) * 0x1.0p-53 * total, acc = 0;
        int k = 0;
        while (k < (int)blockDim.x - 1 && acc + chunk_sum[k] <= target) acc += chunk_sum[k++];
        int i0 = k * per, i1 = i0 + per < V ? i0 + per : V, chosen = V - 1;
        for (int i = i0; i < i1; i++) {
            acc += exp((double)(lr[i] * it) - lse);
            if (target < acc) {
                chosen = i;
                break;
            }
        }
        tok_out[j] = chosen;
        logp_out[j] = (float)(lr[chosen] * it - lse);
    }
}

} // namespace

extern "C" {

cudaError_t cu_to_bf16(uint16_t *out, const float *x, size_t n, cudaStream_t st) {
    if (n) k_to_bf16<<<blocks_for(n), kThreads, 0, st>>>(out, x, n);
    return cudaGetLastError();
}

cudaError_t cu_bias_add(float *out, const float *bias, int n, int d, cudaStream_t st) {
    if (n && d) k_bias_add<<<blocks_for((size_t)n * d), kThreads, 0, st>>>(out, bias, n, d);
    return cudaGetLastError();
}

cudaError_t cu_rmsnorm(float *out, float *rstd, const float *x, const float *w, int n, int d, float eps,
                       cudaStream_t st) {
    if (n > 0) k_rmsnorm<<<n, kThreads, 0, st>>>(out, rstd, x, w, d, eps);
    return cudaGetLastError();
}

cudaError_t cu_rope(float *x, const float *cos_t, const float *sin_t, int n, int n_heads, int head_dim, float sign,
                    cudaStream_t st) {
    size_t total = (size_t)n * n_heads * (head_dim / 2);
    if (total) k_rope<<<blocks_for(total), kThreads, 0, st>>>(x, cos_t, sin_t, n, n_heads, head_dim, sign);
    return cudaGetLastError();
}

cudaError_t cu_swiglu(float *out, const float *gate, const float *up, size_t n, cudaStream_t st) {
    if (n) k_swiglu<<<blocks_for(n), kThreads, 0, st>>>(out, gate, up, n);
    return cudaGetLastError();
}

cudaError_t cu_add(float *x, const float *y, size_t n, cudaStream_t st) {
    if (n) k_add<<<blocks_for(n), kThreads, 0, st>>>(x, y, n);
    return cudaGetLastError();
}

cudaError_t cu_gather(float *dst, const float *src, const int32_t *idx, int n, int d, cudaStream_t st) {
    if (n && d) k_gather<<<blocks_for((size_t)n * d), kThreads, 0, st>>>(dst, src, idx, n, d);
    return cudaGetLastError();
}

cudaError_t cu_kv_write(void *kc, void *vc, const float *k, const float *v, const size_t *row_kv, const int *pos,
                        int n, int kv_dim, int bf16, cudaStream_t st) {
    if (!n || !kv_dim) return cudaSuccess;
    if (bf16)
        k_kv_write<<<blocks_for((size_t)n * kv_dim), kThreads, 0, st>>>((uint16_t *)kc, (uint16_t *)vc, k, v, row_kv,
                                                                        pos, n, kv_dim);
    else
        k_kv_write<<<blocks_for((size_t)n * kv_dim), kThreads, 0, st>>>((float *)kc, (float *)vc, k, v, row_kv, pos, n,
                                                                        kv_dim);
    return cudaGetLastError();
}

cudaError_t cu_head_logsoftmax(float *z, int n, int V, float inv_t, const int32_t *tok, float *logp, float *entropy,
                               float *lse_out, cudaStream_t st) {
    if (n > 0) k_head<<<n, kThreads, 0, st>>>(z, V, inv_t, tok, logp, entropy, lse_out);
    return cudaGetLastError();
}

cudaError_t cu_dropout_rows(float *x, int n_rows, int n, const uint64_t *row_key, const int *row_pos,
                            const uint32_t stream_key[2], uint32_t threshold, float keep_scale, cudaStream_t st) {
    if (n_rows > 0 && n > 0)
        k_dropout_rows<<<blocks_for((size_t)n_rows * ((n + 3) / 4)), kThreads, 0, st>>>(
            x, n_rows, n, row_key, row_pos, stream_key[0], stream_key[1], threshold, keep_scale);
    return cudaGetLastError();
}

cudaError_t cu_philox(uint32_t *out, const uint32_t *counter, const uint32_t *key, int n, cudaStream_t st) {
    if (n > 0) k_philox<<<blocks_for((size_t)n), kThreads, 0, st>>>(out, counter, key, n);
    return cudaGetLastError();
}

cudaError_t cu_sample_plain(int32_t *tok_out, float *logp_out, const float *logits, int n, int V, float inv_t,
                            const uint32_t *key, const uint64_t *block, const int *used, cudaStream_t st) {
    if (n > 0) k_sample_plain<<<n, kThreads, 0, st>>>(tok_out, logp_out, logits, V, inv_t, key, block, used);
    return cudaGetLastError();
}

} // extern "C"
