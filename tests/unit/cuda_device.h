/* The CUDA unit tests' device (test_cuda_ops, test_cuda_train): opened when
 * this build has CUDA and a device answers, else NULL with the reason each
 * test then reports as its TAP skip. */
#ifndef GRPO_TESTS_CUDA_DEVICE_H
#define GRPO_TESTS_CUDA_DEVICE_H

#include <stdio.h>

#include "cuda/cuda.h"

static const backend *cuda_test_device(char *why, size_t n) {
    snprintf(why, n, "no CUDA device");
#ifdef __SANITIZE_ADDRESS__
    /* ASan's shadow memory and the CUDA driver's mappings collide, and the
     * driver's own allocations read as leaks: device code is checked by
     * compute-sanitizer instead (docs/gpu.md) */
    snprintf(why, n, "no CUDA device under ASan (compute-sanitizer checks the device)");
    return NULL;
#else
    gerr e = {0};
    if (cuda_device_count() <= 0) return NULL;
    if (cuda_open(&e)) {
        snprintf(why, n, "no CUDA device could be opened: %.150s", e.msg);
        return NULL;
    }
    return backend_cuda();
#endif
}

#endif
