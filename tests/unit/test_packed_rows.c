/* A frozen base's embedding lookup on its packed blocks (ops.h's
 * gather_rows_packed, the CPU backend's op, and each format's row
 * dequantizer: bf16w_unpack_row, q8w_unpack_row, q4kw_unpack_row): every
 * row gathered is the whole matrix's dequantization (bf16w_unpack,
 * q8w_unpack, q4kw_unpack) bit for bit, whatever the rows beside it, their
 * order, repeats and the thread count; the floats past the rows asked for
 * are left alone. */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ops/backend.h"
#include "ops/ops.h"
#include "ops/packed_bf16.h"
#include "ops/packed_q4k.h"
#include "ops/packed_q8.h"
#include "packed_fixture.h"

static uint64_t rng_state = 0x5DEECE66DULL;

/* The whole matrix dequantized, as its format's unpack gives it. */
static void unpack_all(weight_format fmt, float *dst, const void *src, int n, int k) {
    if (fmt == WEIGHTS_BF16) bf16w_unpack(dst, src, n, k);
    else weights_unpack(fmt, dst, src, n, k);
}

static void unpack_row(weight_format fmt, float *dst, const void *src, int row, int k) {
    if (fmt == WEIGHTS_BF16) bf16w_unpack_row(dst, src, row, k);
    else if (fmt == WEIGHTS_Q8) q8w_unpack_row(dst, src, row, k);
    else q4kw_unpack_row(dst, src, row, k);
}

/* W [n, k] random (a few rows scaled far apart, zeros, a negative zero),
 * packed in fmt; rows gathered in a shuffled order with repeats (the first
 * and last rows, a panel's edges) on 1 and 3 threads and through the CPU
 * backend, each compared with the unpacked matrix's row byte for byte. */
static void check_format(weight_format fmt, int n, int k, int n_idx) {
    float *w = malloc(sizeof(float) * (size_t)n * k), *full = malloc(sizeof(float) * (size_t)n * k);
    float *got = malloc(sizeof(float) * ((size_t)n_idx * k + PACKED_CANARY));
    float *row = malloc(sizeof(float) * (size_t)k);
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)n_idx);
    void *packed = malloc(weights_packed_bytes(fmt, n, k));
    CHECK(w && full && got && row && idx && packed);
    if (!(w && full && got && row && idx && packed)) goto out;
    for (int r = 0; r < n; r++) {
        float scale = r % 7 == 3 ? 1e-3f : r % 11 == 5 ? 40.0f : 1.0f;
        for (int i = 0; i < k; i++)
            w[(size_t)r * k + i] = r == 2 ? (i % 2 ? -0.0f : 0.0f) : scale * packed_uniform(&rng_state);
    }
    weights_pack(fmt, packed, w, n, k);
    unpack_all(fmt, full, packed, n, k);
    for (int i = 0; i < n_idx; i++)
        idx[i] = i == 0 ? n - 1 : i == 1 ? 0 : i == 2 ? 15 : i == 3 ? 16 : (int32_t)(packed_next(&rng_state) % (uint64_t)n);
    idx[n_idx - 1] = idx[1]; /* a repeat */
    int before = omp_get_max_threads();
    for (int pass = 0; pass < 3; pass++) {
        packed_fill(got, (size_t)n_idx * k);
        omp_set_num_threads(pass == 1 ? 3 : 1);
        if (pass < 2) gather_rows_packed(got, packed, fmt, idx, n_idx, k);
        else backend_cpu()->gather_rows_packed(got, packed, fmt, idx, n_idx, k);
        omp_set_num_threads(before);
        bool same = true;
        for (int i = 0; i < n_idx; i++)
            same = same && !memcmp(got + (size_t)i * k, full + (size_t)idx[i] * k, sizeof(float) * (size_t)k);
        CHECK(same);
        CHECK(packed_canary_intact(got, (size_t)n_idx * k));
    }
    bool rows_same = true;
    for (int r = 0; r < n; r++) {
        unpack_row(fmt, row, packed, r, k);
        rows_same = rows_same && !memcmp(row, full + (size_t)r * k, sizeof(float) * (size_t)k);
    }
    CHECK(rows_same);
out:
    free(w), free(full), free(got), free(row), free(idx), free(packed);
}

int main(void) {
    static const struct {
        weight_format fmt;
        const char *name;
    } formats[] = {{WEIGHTS_BF16, "bf16"}, {WEIGHTS_Q8, "q8"}, {WEIGHTS_Q4K, "q4k"}};
    static char titles[6][200]; /* TEST keeps the name until the next one */
    for (size_t f = 0; f < sizeof formats / sizeof *formats; f++) {
        char *title = titles[2 * f];
        snprintf(title, sizeof titles[0],
                 "%s: rows gathered from the packed blocks are the unpacked matrix's bit for bit (37 x 96, "
                 "a short last super-block for q4k; repeats, 1 and 3 threads, the backend's op)",
                 formats[f].name);
        TEST(title);
        check_format(formats[f].fmt, 37, 96, 23);
        title = titles[2 * f + 1];
        snprintf(title, sizeof titles[0],
                 "%s: the same at 300 x 288 with 300 rows gathered (the OpenMP path), every row alone too",
                 formats[f].name);
        TEST(title);
        check_format(formats[f].fmt, 300, 288, 300);
    }
    return check_done();
}
