/* Timing and data shared by the kernel benchmarks (bench_q8, bench_bf16):
 * the best of several timed batches, since the machine may be shared. */
#ifndef GRPO_BENCH_UTIL_H
#define GRPO_BENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "util/clock.h"

/* One call of kind on ctx; nonzero when that kind cannot run here. */
typedef int (*bench_run_fn)(int kind, const void *ctx);

/* Best seconds per call over `trials` batches of >= batch_s seconds each
 * (fewer, but at least 3, once budget_s has been spent), or a negative
 * number when the kind cannot run. On a shared machine short batches and
 * many of them find the moments nothing else ran. */
static inline double bench_best_seconds(bench_run_fn run, int kind, const void *ctx, double batch_s, int trials,
                                        double budget_s) {
    int reps = 1;
    for (;;) { /* calibrate reps so one batch takes >= batch_s */
        double t0 = now_seconds();
        for (int r = 0; r < reps; r++)
            if (run(kind, ctx) != 0) return -1;
        if (now_seconds() - t0 >= batch_s) break;
        reps *= 2;
    }
    double best = 1e30, start = now_seconds();
    for (int trial = 0; trial < trials && (trial < 3 || now_seconds() - start < budget_s); trial++) {
        double t0 = now_seconds();
        for (int r = 0; r < reps; r++)
            if (run(kind, ctx) != 0) return -1;
        double t = (now_seconds() - t0) / reps;
        if (t < best) best = t;
    }
    return best;
}

/* a[n] uniform in [-1, 1) from the xorshift state (advanced). */
static inline void bench_fill_uniform(float *a, size_t n, uint64_t *state) {
    for (size_t i = 0; i < n; i++) {
        *state ^= *state << 13, *state ^= *state >> 7, *state ^= *state << 17;
        a[i] = (float)((*state >> 11) * 0x1.0p-52 - 1.0);
    }
}

#endif
