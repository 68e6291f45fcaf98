/* Shared by the tests of the packed products (test_packed_mxfp4.c,
 * test_packed_tile.c): random floats, canaries past an output, and the check
 * that a product's rows do not depend on the thread count or on the rows
 * beside them. Include after check.h. */
#ifndef GRPO_TEST_PACKED_FIXTURE_H
#define GRPO_TEST_PACKED_FIXTURE_H

#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/packed_isa.h"

enum { PACKED_CANARY = 16 };

/* xorshift64: the state is the test's own. */
static inline uint64_t packed_next(uint64_t *state) {
    *state ^= *state << 13, *state ^= *state >> 7, *state ^= *state << 17;
    return *state;
}
/* Uniform in [-0.5, 0.5). */
static inline float packed_uniform(uint64_t *state) { return (float)((packed_next(state) >> 11) * 0x1.0p-53 - 0.5); }

/* out[n] filled with a pattern, plus PACKED_CANARY floats past it that must survive. */
static inline void packed_fill(float *out, size_t n) { memset(out, 0x7f, sizeof(float) * (n + PACKED_CANARY)); }
static inline bool packed_canary_intact(const float *out, size_t n) {
    for (int i = 0; i < PACKED_CANARY; i++) {
        uint32_t bits;
        memcpy(&bits, out + n + i, sizeof bits);
        if (bits != 0x7f7f7f7fu) return false;
    }
    return true;
}

/* out[m, out_cols] = the product of in[m, in_cols] on the path isa; false when the CPU lacks it. */
typedef bool (*packed_run_fn)(const void *ctx, packed_isa isa, float *out, const float *in, int m);

static inline bool packed_run_threads(packed_run_fn run, const void *ctx, int threads, packed_isa isa, float *out,
                                      const float *in, int m) {
    int before = omp_get_max_threads();
    omp_set_num_threads(threads);
    bool ran = run(ctx, isa, out, in, m);
    omp_set_num_threads(before);
    return ran;
}

/* On every path this CPU has: in's m rows give the same bits on 1, 2 and 3
 * threads, and every seventh row alone, or between two random rows, gives
 * its row of the whole batch. */
static inline void packed_check_invariance(packed_run_fn run, const void *ctx, const char *what, const float *in, int m,
                                           int in_cols, int out_cols, uint64_t *state) {
    size_t outs = (size_t)m * out_cols;
    float *all = malloc(sizeof(float) * outs), *other = malloc(sizeof(float) * outs);
    float *three = malloc(sizeof(float) * 3 * (size_t)in_cols);
    CHECK(all && other && three);
    for (int isa = 0; all && other && three && isa < PACKED_ISAS; isa++) {
        if (!packed_run_threads(run, ctx, 1, (packed_isa)isa, all, in, m)) continue;
        for (int threads = 2; threads <= 3; threads++) {
            CHECK(packed_run_threads(run, ctx, threads, (packed_isa)isa, other, in, m));
            CHECK(memcmp(all, other, sizeof(float) * outs) == 0);
        }
        int differing = 0;
        for (int r = 0; r < m; r += 7) {
            const float *row = in + (size_t)r * in_cols, *want = all + (size_t)r * out_cols;
            CHECK(packed_run_threads(run, ctx, 2, (packed_isa)isa, other, row, 1));
            differing += memcmp(other, want, sizeof(float) * out_cols) != 0;
            for (int i = 0; i < in_cols; i++)
                three[i] = packed_uniform(state), three[in_cols + i] = row[i], three[2 * in_cols + i] = 5 * packed_uniform(state);
            CHECK(packed_run_threads(run, ctx, 2, (packed_isa)isa, other, three, 3));
            differing += memcmp(other + out_cols, want, sizeof(float) * out_cols) != 0;
        }
        if (differing) printf("#   %s %s: %d rows differ\n", what, packed_isa_name((packed_isa)isa), differing);
        CHECK_EQ_INT(differing, 0);
    }
    free(all), free(other), free(three);
}

#endif
