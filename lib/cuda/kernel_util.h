// Device helpers shared by the kernel files (kernels.cu, train_kernels.cu):
// the block size, a capped grid, a grid-stride loop and block-wide
// reductions. CUDA C++: included by .cu files only; inline, so a file
// that uses some of them warns about none.
#ifndef GRPO_CUDA_KERNEL_UTIL_H
#define GRPO_CUDA_KERNEL_UTIL_H

#include <math.h>
#include <stddef.h>

namespace {

constexpr int kThreads = 256;

inline int blocks_for(size_t n) {
    size_t b = (n + kThreads - 1) / kThreads;
    return (int)(b < 65535u * 16u ? b : 65535u * 16u);
}

// A grid-stride loop: any n with a capped grid.
#define GRID_LOOP(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

// Block-wide sum of one double per thread (blockDim.x == kThreads).
__device__ inline double block_sum(double v, double *shared) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads(); // shared may still be read from a previous call
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < kThreads / 32 ? shared[lane] : 0.0;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
        if (lane == 0) shared[0] = v;
    }
    __syncthreads();
    return shared[0];
}

__device__ inline float block_max(float v, float *shared) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < kThreads / 32 ? shared[lane] : -INFINITY;
        for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));
        if (lane == 0) shared[0] = v;
    }
    __syncthreads();
    return shared[0];
}

} // namespace

#endif
