// The products over a frozen packed base (frozen.c) on the tensor cores,
// W [out_dim, in_dim] read as its blocks lie, with no bf16 copy of it:
//   forward         out [n, out_dim] = bf16(x) [n, in_dim] bf16(W)^T (+ bias)
//   input gradient  din [n, in_dim] (= or +=) bf16(dout) [n, out_dim] bf16(W)
// for every cu_packed_fmt. A block of 256 threads (8 warps) computes a
// 128 x 128 tile of the output, stepping through the inner dimension
// (in_dim forward, out_dim backward) 32 at a time; each step
//   - rounds the activations' 128 x 32 tile to bf16 (__float2bfloat16_rn:
//     cu_to_bf16's values), a warp per row of 32 floats (coalesced);
//   - decodes W's tile (128 x 32 forward: W's rows n0.. at columns k0..;
//     32 x 128 backward: W's rows k0.. at columns n0..), a thread per run
//     of 16 values along in_dim, the run's block found once:
//     packed_decode.h's values rounded to bf16 (nearest even: exact for
//     bf16 and MXFP4, q8's and q4k's rounded), what a whole-matrix
//     expansion would hold;
//   - multiplies the two tiles in shared memory with wmma's bf16
//     16 x 16 x 16 fragments and float32 accumulators, each warp a 64 x 32
//     part of the output tile (4 x 2 fragments).
// Past an edge (n, out_dim or in_dim not a multiple of the tile, a bf16
// base's in_dim not one of 32) both tiles hold zeros and nothing is stored.
// An output's sum runs over k in one order whatever n: a row's bytes do not
// depend on the rows beside it (no split of k, no atomics).
// The tile: 128 x 128, so each decoded weight feeds 128 rows and each
// rounded activation 128 columns (decoding, not multiplying, is what a
// packed tile costs); 32 along k, one q8/q4k/MXFP4 block, so a run's scales
// are read once. 26.5 KiB (backward) or 28 KiB of static shared memory a
// block.
#include <cuda_bf16.h>
#include <mma.h>

#include <type_traits>

#include "kernel_util.h"
#include "kernels.h"
#include "packed_decode.h"

namespace {

using namespace nvcuda;

// The output tile (kTm rows of n by kTn columns), the inner step, a decode run.
constexpr int kTm = 128, kTn = 128, kTk = 32, kRun = 16;
// Warps 2 x 4, each a kWarpM x kWarpN part of the tile in 16 x 16 fragments.
constexpr int kWarpsN = 4, kWarpM = 64, kWarpN = 32, kFragM = kWarpM / 16, kFragN = kWarpN / 16;
// bf16 elements past each shared row: rows then start 16 bytes apart modulo
// 128, so wmma's row loads take no bank conflicts.
constexpr int kPad = 8;
static_assert(kTm / kWarpM * (kTn / kWarpN) * 32 == kThreads, "a warp per kWarpM x kWarpN part");
static_assert(kTm * kTk == kThreads * kRun && kTn * kTk == kThreads * kRun, "a run per thread per tile");
static_assert(kPackedBlock % kRun == 0 && kTk % kPackedBlock == 0, "a run within one block");

// One step's shared memory. a: the activations [kTm][kTk]; b: W's tile,
// forward [kTn][kTk] (W's rows: B column-major), backward [kTk][kTn]
// (row-major); stage: a warp's 16 x 16 floats on their way out. Every
// array's size is a multiple of 32 bytes (wmma's pointer alignment).
template <bool kBwd> struct __align__(128) tiles {
    static constexpr int kALd = kTk + kPad, kBLd = (kBwd ? kTn : kTk) + kPad, kBRows = kBwd ? kTk : kTn;
    __nv_bfloat16 a[kTm * kALd];
    __nv_bfloat16 b[kBRows * kBLd];
    float stage[kThreads / 32][16 * 16];
};

// The activations' tile: a [m, K] at rows m0.., columns k0.., in bf16 (0 past an edge).
template <bool kBwd>
__device__ __forceinline__ void load_act(tiles<kBwd> &s, const float *a, int m, int K, int m0, int k0) {
    const int c = threadIdx.x % kTk, gk = k0 + c;
#pragma unroll
    for (int r = threadIdx.x / kTk; r < kTm; r += kThreads / kTk) {
        const int gr = m0 + r;
        s.a[r * tiles<kBwd>::kALd + c] = __float2bfloat16_rn(gr < m && gk < K ? a[(size_t)gr * K + gk] : 0.0f);
    }
}

// W's tile in bf16 (0 past an edge): forward W[n0 + r, k0 + c] at b[r][c],
// backward W[k0 + r, n0 + c] at b[r][c]; this thread's run is the kRun
// values along in_dim from b[r][c0].
template <cu_packed_fmt F, bool kBwd>
__device__ __forceinline__ void load_weights(tiles<kBwd> &s, const unsigned char *w, int out_dim, int in_dim, int n0,
                                             int k0) {
    constexpr int runs = (kBwd ? kTn : kTk) / kRun; // per row of b
    const int r = threadIdx.x / runs, c0 = threadIdx.x % runs * kRun;
    const int row = (kBwd ? k0 : n0) + r, i0 = (kBwd ? n0 : k0) + c0; // W's row, the run's first column
    __nv_bfloat16 *dst = s.b + r * tiles<kBwd>::kBLd + c0;
    if (row >= out_dim || i0 >= in_dim) {
#pragma unroll
        for (int u = 0; u < kRun; u++) dst[u] = __float2bfloat16_rn(0.0f);
        return;
    }
    const packed_block blk = packed_block_of(w, F, row, i0 / kPackedBlock, in_dim);
    const int t0 = i0 % kPackedBlock;
#pragma unroll
    for (int u = 0; u < kRun; u++) // past in_dim: a bf16 base's last block, short
        dst[u] = __float2bfloat16_rn(i0 + u < in_dim ? packed_block_value(blk, F, t0 + u) : 0.0f);
}

// c [m, N] (N: out_dim forward, in_dim backward): the tile (blockIdx.x,
// blockIdx.y) of a [m, K] times W's tiles, K the other of the two.
template <cu_packed_fmt F, bool kBwd>
__global__ void __launch_bounds__(kThreads) k_frozen_gemm(float *c, const float *a, const unsigned char *w,
                                                          const float *bias, int m, int out_dim, int in_dim,
                                                          bool accumulate) {
    using T = tiles<kBwd>;
    using b_layout = typename std::conditional<kBwd, wmma::row_major, wmma::col_major>::type;
    __shared__ T s;
    const int N = kBwd ? in_dim : out_dim, K = kBwd ? out_dim : in_dim;
    const int m0 = blockIdx.x * kTm, n0 = blockIdx.y * kTn, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = warp / kWarpsN * kWarpM, wn = warp % kWarpsN * kWarpN;
    const bool busy = m0 + wm < m && n0 + wn < N; // the warp's part holds outputs (one value per warp)
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kFragM][kFragN];
#pragma unroll
    for (int i = 0; i < kFragM; i++)
#pragma unroll
        for (int j = 0; j < kFragN; j++) wmma::fill_fragment(acc[i][j], 0.0f);
    for (int k0 = 0; k0 < K; k0 += kTk) {
        load_act(s, a, m, K, m0, k0);
        load_weights<F>(s, w, out_dim, in_dim, n0, k0);
        __syncthreads();
        if (busy) {
#pragma unroll
            for (int kk = 0; kk < kTk; kk += 16) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa[kFragM];
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, b_layout> fb[kFragN];
#pragma unroll
                for (int i = 0; i < kFragM; i++)
                    wmma::load_matrix_sync(fa[i], s.a + (wm + 16 * i) * T::kALd + kk, T::kALd);
#pragma unroll
                for (int j = 0; j < kFragN; j++) {
                    if constexpr (kBwd)
                        wmma::load_matrix_sync(fb[j], s.b + kk * T::kBLd + wn + 16 * j, T::kBLd);
                    else
                        wmma::load_matrix_sync(fb[j], s.b + (wn + 16 * j) * T::kBLd + kk, T::kBLd);
                }
#pragma unroll
                for (int i = 0; i < kFragM; i++)
#pragma unroll
                    for (int j = 0; j < kFragN; j++) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
            }
        }
        __syncthreads(); // the tiles are rewritten by the next step
    }
    if (!busy) return;
    float *st = s.stage[warp];
#pragma unroll
    for (int i = 0; i < kFragM; i++)
#pragma unroll
        for (int j = 0; j < kFragN; j++) {
            wmma::store_matrix_sync(st, acc[i][j], 16, wmma::mem_row_major);
            __syncwarp();
            for (int e = lane; e < 16 * 16; e += 32) {
                const int r = m0 + wm + 16 * i + e / 16, col = n0 + wn + 16 * j + e % 16;
                if (r >= m || col >= N) continue;
                float *o = c + (size_t)r * N + col;
                if (kBwd)
                    *o = accumulate ? *o + st[e] : st[e];
                else
                    *o = bias ? st[e] + bias[col] : st[e];
            }
            __syncwarp(); // st is rewritten by the next fragment
        }
}

template <bool kBwd>
cudaError_t launch(float *c, const float *a, const void *w, cu_packed_fmt fmt, const float *bias, int n, int in_dim,
                   int out_dim, bool accumulate, cudaStream_t st) {
    if (n < 0 || out_dim < 0 || (unsigned)fmt > CU_PACKED_MXFP4 || !takes_width(fmt, in_dim))
        return cudaErrorInvalidValue;
    const long long N = kBwd ? in_dim : out_dim;
    const dim3 grid((unsigned)(((long long)n + kTm - 1) / kTm), (unsigned)((N + kTn - 1) / kTn));
    if (grid.y > 65535u) return cudaErrorInvalidValue;
    if (!grid.x || !grid.y) return cudaSuccess;
    // a kernel per format, indexed by cu_packed_fmt
    static_assert(CU_PACKED_BF16 == 0 && CU_PACKED_Q8 == 1 && CU_PACKED_Q4K == 2 && CU_PACKED_MXFP4 == 3, "the order");
    using kernel = void (*)(float *, const float *, const unsigned char *, const float *, int, int, int, bool);
    const kernel by_fmt[] = {k_frozen_gemm<CU_PACKED_BF16, kBwd>, k_frozen_gemm<CU_PACKED_Q8, kBwd>,
                             k_frozen_gemm<CU_PACKED_Q4K, kBwd>, k_frozen_gemm<CU_PACKED_MXFP4, kBwd>};
    by_fmt[fmt]<<<grid, kThreads, 0, st>>>(c, a, static_cast<const unsigned char *>(w), bias, n, out_dim, in_dim,
                                           accumulate);
    return cudaGetLastError();
}

} // namespace

extern "C" {

cudaError_t cu_frozen_forward(float *out, const float *x, const void *w, cu_packed_fmt fmt, const float *bias, int n,
                              int in_dim, int out_dim, cudaStream_t st) {
    return launch<false>(out, x, w, fmt, bias, n, in_dim, out_dim, false, st);
}

cudaError_t cu_frozen_backward(float *din, const float *dout, const void *w, cu_packed_fmt fmt, int n, int in_dim,
                               int out_dim, int accumulate, cudaStream_t st) {
    return launch<true>(din, dout, w, fmt, nullptr, n, in_dim, out_dim, accumulate != 0, st);
}

} // extern "C"
