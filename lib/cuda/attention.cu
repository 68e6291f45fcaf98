// Causal grouped-query attention over a KV view (ops.h's attention_forward)
// in kernels that do the same arithmetic per row:
//   k_attention_group decode rows (anything not in a tile): a block per
//                     (row, KV head), warp w the group's query head w; each
//                     32-position K/V chunk is loaded into shared memory once
//                     (coalesced) for the group's G heads;
//   k_attention_rows  one warp per (row, query head), reading K/V where
//                     they lie: the decode rows of a shape the group kernel
//                     cannot take (G > 32, head_dim > 128, or its shared
//                     memory over 48 KiB);
//   k_attention_tiles flash-style prefill: a block per (tile of up to kTile
//                     consecutive positions of one sequence, query head)
//                     loads each 32-position K/V chunk into shared memory
//                     once for all its rows.
// Both stream positions 0..pos[r] in chunks of 32 with an online softmax
// (running max and sum, accumulator rescaled), so no score matrix is
// stored, and both call attend_chunk in the same order: a row's result does
// not depend on the kernel it ran in or the rows beside it. The cache holds
// fp32 or bf16 (KV_BF16: half the bytes a decode step reads); a bf16 element
// is widened exactly where it is read (ld), so the arithmetic is fp32 either
// way. gpt-oss's options (ops.h's attn_shape): a sliding window masks the
// positions before a row's first key (chunks stay at multiples of 32, so a
// row's chunks are the same in any kernel; those wholly before it are
// skipped), a sink joins each row's softmax in finish_row (attention.c's
// add_sink, in double), and a scale replaces 1/sqrt(head_dim).
#include <math.h>

#include "kernel_util.h"
#include "kernels.h"

namespace {

constexpr int kWarps = 4;                       // rows kernel: warps per block
constexpr int kTile = CU_ATT_TILE;              // tiles kernel: rows (one warp each) per block
constexpr int kChunk = 32;                      // positions per softmax step (one per lane)
constexpr int kMaxHeadDim = 256;                // 8 accumulator values per lane
constexpr int kTileHeadDim = CU_ATT_TILE_HEAD_DIM; // the tiles kernel's chunk: 2 * 32 * 129 floats

__device__ __forceinline__ float ld(const float *p) { return *p; }
__device__ __forceinline__ float ld(const uint16_t *p) { return __uint_as_float((uint32_t)*p << 16); }

// One chunk of nt (<= 32) positions, those before lo masked (a window's):
// lane j scores position j (q . k_j * scale, d in order), then the running
// max m, sum l and accumulator acc (dims lane + 32 k) move on. k and v rows
// are `stride` floats apart. Some lane in [lo, nt) is unmasked.
template <typename E>
__device__ __forceinline__ void attend_chunk(const float *q, const E *kb, const E *vb, int stride, int lo, int nt,
                                             int head_dim, float scale, float &m, float &l,
                                             float (&acc)[kMaxHeadDim / 32], int lane) {
    float s = -INFINITY;
    const bool live = lane >= lo && lane < nt;
    if (live) {
        const E *kt = kb + (size_t)lane * stride;
        float dot = 0;
        for (int d = 0; d < head_dim; d++) dot += q[d] * ld(kt + d);
        s = dot * scale;
    }
    float cm = s;
    for (int o = 16; o > 0; o >>= 1) cm = fmaxf(cm, __shfl_xor_sync(0xffffffffu, cm, o));
    const float m_new = fmaxf(m, cm);
    const float p = live ? expf(s - m_new) : 0.0f;
    float ps = p;
    for (int o = 16; o > 0; o >>= 1) ps += __shfl_xor_sync(0xffffffffu, ps, o);
    const float keep = expf(m - m_new); // 0 on the first chunk (m = -inf)
    l = l * keep + ps;
#pragma unroll
    for (int k = 0; k < kMaxHeadDim / 32; k++) acc[k] *= keep;
    for (int j = lo; j < nt; j++) {
        const float pj = __shfl_sync(0xffffffffu, p, j);
        const E *vt = vb + (size_t)j * stride;
#pragma unroll
        for (int k = 0; k < kMaxHeadDim / 32; k++) {
            const int d = lane + 32 * k;
            if (d < head_dim) acc[k] += pj * ld(vt + d);
        }
    }
    m = m_new;
}

// The row's output and lse; with a sink (sinks not NULL), attention.c's
// add_sink: the softmax's lse L and the sink's logit give L' = log(e^L +
// e^sink) in double, the output scaled by exp(L - L').
__device__ __forceinline__ void finish_row(float *out, float *lse, const float *sinks, int r, int h, int n_heads,
                                           int head_dim, float m, float l, const float (&acc)[kMaxHeadDim / 32],
                                           int lane) {
    float *o = out + ((size_t)r * n_heads + h) * head_dim;
    const float inv_l = 1.0f / l;
    float L = m + logf(l), f = 1.0f;
    if (sinks) {
        const double sk = sinks[h], M = fmax((double)L, sk), big = M + log(exp((double)L - M) + exp(sk - M));
        f = (float)exp((double)L - big);
        L = (float)big;
    }
#pragma unroll
    for (int k = 0; k < kMaxHeadDim / 32; k++) {
        const int d = lane + 32 * k;
        if (d < head_dim) o[d] = sinks ? acc[k] * inv_l * f : acc[k] * inv_l;
    }
    if (lse && lane == 0) lse[(size_t)r * n_heads + h] = L;
}

struct Args {
    float *out, *lse;
    const float *q;
    const void *kc, *vc; // float or uint16_t (bf16), as the kernel's E
    const size_t *row_kv;
    const int *pos;
    const float *sinks; // [n_heads] or NULL
    int n_heads, n_kv_heads, head_dim, kv_dim, window;
    float scale;
};

// The first key a row at position P sees (attention.c's first_key).
__device__ __forceinline__ int first_key(int window, int P) { return window > 0 && P >= window ? P - window + 1 : 0; }

__device__ __forceinline__ void acc_zero(float &m, float &l, float (&acc)[kMaxHeadDim / 32]) {
    m = -INFINITY, l = 0;
#pragma unroll
    for (int k = 0; k < kMaxHeadDim / 32; k++) acc[k] = 0;
}

// rows[i] (or i when rows is NULL) for i < n: one warp per (row, head).
template <typename E>
__global__ void k_attention_rows(Args a, const int *rows, int n) {
    __shared__ float qs[kWarps][kMaxHeadDim];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const long long pair = (long long)blockIdx.x * kWarps + warp;
    if (pair >= (long long)n * a.n_heads) return; // whole warps leave: no block barrier below
    const int i = (int)(pair / a.n_heads), h = (int)(pair % a.n_heads);
    const int r = rows ? rows[i] : i, g = h / (a.n_heads / a.n_kv_heads);
    const float *qr = a.q + ((size_t)r * a.n_heads + h) * a.head_dim;
    for (int d = lane; d < a.head_dim; d += 32) qs[warp][d] = qr[d];
    __syncwarp();
    const E *kb = (const E *)a.kc + a.row_kv[r] + (size_t)g * a.head_dim;
    const E *vb = (const E *)a.vc + a.row_kv[r] + (size_t)g * a.head_dim;
    const int T = a.pos[r] + 1, first = first_key(a.window, a.pos[r]);
    float m, l, acc[kMaxHeadDim / 32];
    acc_zero(m, l, acc);
    for (int t0 = first / kChunk * kChunk; t0 < T; t0 += kChunk) {
        const int nt = T - t0 < kChunk ? T - t0 : kChunk, lo = first > t0 ? first - t0 : 0;
        attend_chunk(qs[warp], kb + (size_t)t0 * a.kv_dim, vb + (size_t)t0 * a.kv_dim, a.kv_dim, lo, nt, a.head_dim,
                     a.scale, m, l, acc, lane);
    }
    finish_row(a.out, a.lse, a.sinks, r, h, a.n_heads, a.head_dim, m, l, acc, lane);
}

// Tile b is rows tiles[2b] .. tiles[2b] + tiles[2b+1] - 1 (at most kTile):
// consecutive rows of one sequence at consecutive positions. blockIdx.y is
// the query head; warp w runs the tile's row w.
template <typename E>
__global__ void k_attention_tiles(Args a, const int *tiles) {
    __shared__ float ks[kChunk][kTileHeadDim + 1], vs[kChunk][kTileHeadDim + 1]; // +1: no bank conflicts
    __shared__ float qs[kTile][kTileHeadDim];
    const int h = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32, hd = a.head_dim;
    const int r0 = tiles[2 * blockIdx.x], nr = tiles[2 * blockIdx.x + 1];
    const int g = h / (a.n_heads / a.n_kv_heads);
    const bool mine = warp < nr; // warps past the tile's rows still load chunks
    const int r = r0 + (mine ? warp : 0);
    if (mine)
        for (int d = lane; d < hd; d += 32) qs[warp][d] = a.q[((size_t)r * a.n_heads + h) * hd + d];
    const E *kb = (const E *)a.kc + a.row_kv[r0] + (size_t)g * hd, *vb = (const E *)a.vc + a.row_kv[r0] + (size_t)g * hd;
    const int T_tile = a.pos[r0 + nr - 1] + 1, T = a.pos[r] + 1, first = first_key(a.window, a.pos[r]);
    float m, l, acc[kMaxHeadDim / 32];
    acc_zero(m, l, acc);
    // from the chunk of the tile's first row's first key (the earliest)
    for (int t0 = first_key(a.window, a.pos[r0]) / kChunk * kChunk; t0 < T_tile; t0 += kChunk) {
        const int n_load = T_tile - t0 < kChunk ? T_tile - t0 : kChunk;
        __syncthreads(); // the previous chunk is read by every warp (and qs written)
        for (int i = threadIdx.x; i < n_load * hd; i += blockDim.x) {
            const int j = i / hd, d = i % hd;
            ks[j][d] = ld(kb + (size_t)(t0 + j) * a.kv_dim + d);
            vs[j][d] = ld(vb + (size_t)(t0 + j) * a.kv_dim + d);
        }
        __syncthreads();
        const int nt = T - t0 < kChunk ? T - t0 : kChunk, lo = first > t0 ? first - t0 : 0;
        if (mine && nt > 0 && t0 + kChunk > first)
            attend_chunk(qs[warp], &ks[0][0], &vs[0][0], kTileHeadDim + 1, lo, nt, hd, a.scale, m, l, acc, lane);
    }
    if (mine) finish_row(a.out, a.lse, a.sinks, r, h, a.n_heads, hd, m, l, acc, lane);
}

// Rows rows[blockIdx.x] (or blockIdx.x when rows is NULL), KV head
// blockIdx.y, its G query heads one per warp. Dynamic shared memory: the K
// and V chunk, [kChunk][head_dim + 1] each (+1: no bank conflicts), then
// each warp's query [head_dim]. attend_chunk runs over the chunk as in the
// tiles kernel: a row gets the bytes it gets in a tile or alone.
template <typename E>
__global__ void k_attention_group(Args a, const int *rows) {
    extern __shared__ float sm[];
    const int hd = a.head_dim, G = a.n_heads / a.n_kv_heads, g = blockIdx.y, stride = hd + 1;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, h = g * G + warp;
    const int r = rows ? rows[blockIdx.x] : (int)blockIdx.x;
    float *ks = sm, *vs = ks + kChunk * stride, *qs = vs + kChunk * stride + warp * hd;
    for (int d = lane; d < hd; d += 32) qs[d] = a.q[((size_t)r * a.n_heads + h) * hd + d];
    const E *kb = (const E *)a.kc + a.row_kv[r] + (size_t)g * hd, *vb = (const E *)a.vc + a.row_kv[r] + (size_t)g * hd;
    const int T = a.pos[r] + 1, first = first_key(a.window, a.pos[r]);
    float m, l, acc[kMaxHeadDim / 32];
    acc_zero(m, l, acc);
    for (int t0 = first / kChunk * kChunk; t0 < T; t0 += kChunk) {
        const int nt = T - t0 < kChunk ? T - t0 : kChunk, lo = first > t0 ? first - t0 : 0;
        __syncthreads(); // every warp is done with the previous chunk (and qs is written)
        for (int i = threadIdx.x; i < nt * hd; i += blockDim.x) {
            const int j = i / hd, d = i % hd;
            ks[j * stride + d] = ld(kb + (size_t)(t0 + j) * a.kv_dim + d);
            vs[j * stride + d] = ld(vb + (size_t)(t0 + j) * a.kv_dim + d);
        }
        __syncthreads();
        attend_chunk(qs, ks, vs, stride, lo, nt, hd, a.scale, m, l, acc, lane);
    }
    finish_row(a.out, a.lse, a.sinks, r, h, a.n_heads, hd, m, l, acc, lane);
}

} // namespace

extern "C" cudaError_t cu_attention(float *out, float *lse, const float *q, const void *kc, const void *vc,
                                    int bf16, const size_t *row_kv, const int *pos, const int *tiles, int n_tiles,
                                    const int *rows, int n_rows, int n_heads, int n_kv_heads, int head_dim,
                                    int kv_dim, int window, const float *sinks, float scale, cudaStream_t st) {
    if (head_dim > kMaxHeadDim || n_kv_heads <= 0 || n_heads % n_kv_heads) return cudaErrorInvalidValue;
    if (n_tiles > 0 && head_dim > kTileHeadDim) return cudaErrorInvalidValue;
    Args a = {out,     lse,        q,        kc,     vc,     row_kv, pos, sinks,
              n_heads, n_kv_heads, head_dim, kv_dim, window, scale > 0 ? scale : (float)(1.0 / sqrt((double)head_dim))};
    if (n_tiles > 0) {
        if (n_tiles > 0x7fffffff || n_heads > 65535) return cudaErrorInvalidConfiguration;
        dim3 grid((unsigned)n_tiles, (unsigned)n_heads);
        if (bf16)
            k_attention_tiles<uint16_t><<<grid, kTile * 32, 0, st>>>(a, tiles);
        else
            k_attention_tiles<float><<<grid, kTile * 32, 0, st>>>(a, tiles);
    }
    const int G = n_heads / n_kv_heads;
    const size_t group_shm = (2 * (size_t)kChunk * (head_dim + 1) + (size_t)G * head_dim) * sizeof(float);
    if (n_rows > 0 && G <= 32 && head_dim <= kTileHeadDim && group_shm <= 48 * 1024 && n_kv_heads <= 65535) {
        dim3 grid((unsigned)n_rows, (unsigned)n_kv_heads);
        if (bf16)
            k_attention_group<uint16_t><<<grid, G * 32, group_shm, st>>>(a, rows);
        else
            k_attention_group<float><<<grid, G * 32, group_shm, st>>>(a, rows);
        return cudaGetLastError();
    }
    long long pairs = (long long)n_rows * n_heads;
    if (pairs > 0) {
        long long blocks = (pairs + kWarps - 1) / kWarps;
        if (blocks > 0x7fffffffLL) return cudaErrorInvalidConfiguration;
        if (bf16)
            k_attention_rows<uint16_t><<<(unsigned)blocks, kWarps * 32, 0, st>>>(a, rows, n_rows);
        else
            k_attention_rows<float><<<(unsigned)blocks, kWarps * 32, 0, st>>>(a, rows, n_rows);
    }
    return cudaGetLastError();
}

// ---- the backward (training): ops.h's attention_backward over a batch's own
// K/V, sequence s being rows start[s] .. start[s+1]-1 at positions 0, 1, ...
// Correctness first: scores and probabilities are recomputed from lse per
// (query, key) pair, once for dq and once for dk/dv, each warp summing in a
// fixed order (no atomics: the same bytes every run).
namespace {

struct BwdArgs {
    float *dq, *dk, *dv, *di;
    const float *dout, *out, *lse, *q, *k, *v;
    const int *row_seq, *start;
    int n_heads, n_kv_heads, head_dim, window;
    float scale;
};

__device__ __forceinline__ float warp_sum(float x) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

// One warp per (query row, head): di = out . dout (double, as the CPU), then
// dq = scale * sum_t ds_t k_t with ds_t = p_t (dout . v_t - di).
__global__ void k_attention_bwd_q(BwdArgs a, int n_rows) {
    const int lane = threadIdx.x % 32;
    const long long pair = (long long)blockIdx.x * kWarps + threadIdx.x / 32;
    if (pair >= (long long)n_rows * a.n_heads) return;
    const int r = (int)(pair / a.n_heads), h = (int)(pair % a.n_heads), hd = a.head_dim;
    const int G = a.n_heads / a.n_kv_heads, g = h / G, kvd = a.n_kv_heads * hd;
    const int s0 = a.start[a.row_seq[r]], pos = r - s0;
    const size_t at = ((size_t)r * a.n_heads + h) * hd;
    double dip = 0;
    for (int d = lane; d < hd; d += 32) dip += (double)a.out[at + d] * a.dout[at + d];
    for (int o = 16; o > 0; o >>= 1) dip += __shfl_xor_sync(0xffffffffu, dip, o);
    const float di = (float)dip, l = a.lse[(size_t)r * a.n_heads + h];
    if (lane == 0) a.di[(size_t)r * a.n_heads + h] = di;
    float acc[kMaxHeadDim / 32] = {0};
    for (int t = first_key(a.window, pos); t <= pos; t++) {
        const float *kt = a.k + (size_t)(s0 + t) * kvd + (size_t)g * hd, *vt = a.v + (size_t)(s0 + t) * kvd + (size_t)g * hd;
        float s = 0, dp = 0;
        for (int d = lane; d < hd; d += 32) s += a.q[at + d] * kt[d], dp += a.dout[at + d] * vt[d];
        s = warp_sum(s), dp = warp_sum(dp);
        const float p = expf(s * a.scale - l), ds = p * (dp - di);
#pragma unroll
        for (int k = 0; k < kMaxHeadDim / 32; k++) {
            const int d = lane + 32 * k;
            if (d < hd) acc[k] += ds * kt[d];
        }
    }
#pragma unroll
    for (int k = 0; k < kMaxHeadDim / 32; k++) {
        const int d = lane + 32 * k;
        if (d < hd) a.dq[at + d] = a.scale * acc[k];
    }
}

// One warp per (key row, KV head): over the later rows of its sequence and
// the heads of the group, dk = scale * sum ds q and dv = sum p dout.
__global__ void k_attention_bwd_kv(BwdArgs a, int n_rows) {
    const int lane = threadIdx.x % 32;
    const long long pair = (long long)blockIdx.x * kWarps + threadIdx.x / 32;
    if (pair >= (long long)n_rows * a.n_kv_heads) return;
    const int t_row = (int)(pair / a.n_kv_heads), g = (int)(pair % a.n_kv_heads), hd = a.head_dim;
    const int G = a.n_heads / a.n_kv_heads, kvd = a.n_kv_heads * hd;
    const int sq = a.row_seq[t_row];
    // the rows whose window reaches this key: those before t_row + window
    const int end = a.window > 0 && t_row + a.window < a.start[sq + 1] ? t_row + a.window : a.start[sq + 1];
    const size_t kat = (size_t)t_row * kvd + (size_t)g * hd;
    const float *kt = a.k + kat, *vt = a.v + kat;
    float dk[kMaxHeadDim / 32] = {0}, dv[kMaxHeadDim / 32] = {0};
    for (int r = t_row; r < end; r++)
        for (int j = 0; j < G; j++) {
            const int h = g * G + j;
            const size_t at = ((size_t)r * a.n_heads + h) * hd;
            float s = 0, dp = 0;
            for (int d = lane; d < hd; d += 32) s += a.q[at + d] * kt[d], dp += a.dout[at + d] * vt[d];
            s = warp_sum(s), dp = warp_sum(dp);
            const float p = expf(s * a.scale - a.lse[(size_t)r * a.n_heads + h]);
            const float ds = p * (dp - a.di[(size_t)r * a.n_heads + h]);
#pragma unroll
            for (int k = 0; k < kMaxHeadDim / 32; k++) {
                const int d = lane + 32 * k;
                if (d < hd) dk[k] += ds * a.q[at + d], dv[k] += p * a.dout[at + d];
            }
        }
#pragma unroll
    for (int k = 0; k < kMaxHeadDim / 32; k++) {
        const int d = lane + 32 * k;
        if (d < hd) a.dk[kat + d] = a.scale * dk[k], a.dv[kat + d] = dv[k];
    }
}

} // namespace

extern "C" cudaError_t cu_attention_backward(float *dq, float *dk, float *dv, float *di, const float *dout,
                                             const float *out, const float *lse, const float *q, const float *k,
                                             const float *v, const int *row_seq, const int *start, int n_rows,
                                             int n_heads, int n_kv_heads, int head_dim, int window, float scale,
                                             cudaStream_t st) {
    if (head_dim > kMaxHeadDim || n_kv_heads <= 0 || n_heads % n_kv_heads) return cudaErrorInvalidValue;
    if (n_rows <= 0) return cudaSuccess;
    BwdArgs a = {dq,  dk,      dv,         di,       dout,  out, lse, q, k, v, row_seq, start, n_heads, n_kv_heads,
                 head_dim, window, scale > 0 ? scale : (float)(1.0 / sqrt((double)head_dim))};
    long long bq = ((long long)n_rows * n_heads + kWarps - 1) / kWarps;
    long long bkv = ((long long)n_rows * n_kv_heads + kWarps - 1) / kWarps;
    if (bq > 0x7fffffffLL || bkv > 0x7fffffffLL) return cudaErrorInvalidConfiguration;
    k_attention_bwd_q<<<(unsigned)bq, kWarps * 32, 0, st>>>(a, n_rows); // writes di, read below
    k_attention_bwd_kv<<<(unsigned)bkv, kWarps * 32, 0, st>>>(a, n_rows);
    return cudaGetLastError();
}

// ---- the sinks' gradient: a block per head, rows strided over its threads,
// block_sum's fixed tree (the same bytes every run).
namespace {

__global__ void k_sinks_bwd(float *dsinks, const float *out, const float *dout, const float *lse, const float *sinks,
                            int n, int n_heads, int hd) {
    __shared__ double shared[kThreads / 32];
    const int h = blockIdx.x;
    double sum = 0;
    for (int r = threadIdx.x; r < n; r += blockDim.x) {
        const size_t at = (size_t)r * n_heads + h;
        const float *o = out + at * hd, *d = dout + at * hd;
        double di = 0;
        for (int i = 0; i < hd; i++) di += (double)o[i] * d[i];
        sum += exp((double)sinks[h] - lse[at]) * di;
    }
    const double total = block_sum(sum, shared);
    if (threadIdx.x == 0) dsinks[h] -= (float)total;
}

} // namespace

extern "C" cudaError_t cu_attention_sinks_backward(float *dsinks, const float *out, const float *dout, const float *lse,
                                                   const float *sinks, int n, int n_heads, int head_dim,
                                                   cudaStream_t st) {
    if (n <= 0 || n_heads <= 0) return cudaSuccess;
    k_sinks_bwd<<<(unsigned)n_heads, kThreads, 0, st>>>(dsinks, out, dout, lse, sinks, n, n_heads, head_dim);
    return cudaGetLastError();
}
