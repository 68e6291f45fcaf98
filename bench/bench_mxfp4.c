/* MXFP4 weights and the products on decoded tiles (lib/ops/packed_mxfp4.h,
 * packed_tile.h) at gpt-oss-20b's expert shapes (hidden 2880, intermediate
 * 2880: gate_up k = 2880, n = 5760; down k = n = 2880), random weights.
 *
 * 1. y = x W^T for rollout, m = 1, 4, 16, 64 rows (decode at batch 1 to a
 *    prefill chunk): mx4w_matmul on each path this CPU has beside OpenBLAS
 *    sgemm and the float32 packed kernel on float32 weights and q8w_matmul
 *    (int8 activations).
 * 2. y = x W^T for training, float32 x, m = 16, 64, 256 rows (a micro-batch's
 *    tokens): mx4w_matmul, q8w_matmul_f32 and bf16w_matmul_f32 beside sgemm.
 * 3. dX = dY W, the same rows: mx4w_matmul_t, q8w_matmul_t and
 *    bf16w_matmul_t beside sgemm.
 *
 * Prints GFLOP/s (2 m k n per call) and the weights' effective GB/s (bytes
 * of W read per call / time), after each kernel's relative RMS error
 * against float64 over the weights it holds. All threads
 * (OMP_NUM_THREADS=1: one core). Best of up to 100 timed batches of >= 2
 * ms each within 0.3 s: the machine may be shared. A benchmark, not a
 * test: exits 0 unless it cannot run.
 *
 *   build/bench/bench_mxfp4 */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "ops/packed.h"
#include "ops/packed_bf16.h"
#include "ops/packed_mxfp4.h"
#include "ops/packed_q8.h"

enum { SGEMM, F32_PACKED, Q8, BF16, MX4_AVX512, MX4_AVX2, KINDS, MAX_M = 256 };
static const char *const kind_names[KINDS] = {"sgemm f32", "f32 packed", "q8", "bf16", "mxfp4 avx512", "mxfp4 avx2"};

typedef enum { ROLLOUT, TRAIN_FORWARD, TRAIN_BACKWARD, MODES } mode;
static const char *const mode_titles[MODES] = {"y = x W^T, rollout's kernels (q8: int8 activations):",
                                               "y = x W^T with float32 x (training's forward):",
                                               "dX = dY W (training's input gradient):"};

typedef struct {
    int m, k, n;
    mode mode;
    const float *x, *w, *wf;
    const void *wq, *wb, *w4;
    float *out;
} problem;

static int run_forward(int kind, const problem *p) {
    switch (kind) {
    case SGEMM:
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, p->m, p->n, p->k, 1.0f, p->x, p->k, p->w, p->k, 0.0f,
                    p->out, p->n);
        return 0;
    case F32_PACKED:
        if (!packed_supported()) return -1;
        packed_matmul(p->out, p->x, p->wf, NULL, p->m, p->k, p->n);
        return 0;
    case Q8:
        if (p->mode == ROLLOUT)
            q8w_matmul(p->out, p->x, p->wq, NULL, p->m, p->k, p->n);
        else
            q8w_matmul_f32(p->out, p->x, p->wq, NULL, p->m, p->k, p->n);
        return 0;
    case BF16: /* rollout's bf16 kernel is bench_bf16's */
        if (p->mode == ROLLOUT) return -1;
        bf16w_matmul_f32(p->out, p->x, p->wb, NULL, p->m, p->k, p->n);
        return 0;
    case MX4_AVX512: return mx4w_matmul_isa(PACKED_AVX512, p->out, p->x, p->w4, NULL, p->m, p->k, p->n) ? 0 : -1;
    default: return mx4w_matmul_isa(PACKED_AVX2, p->out, p->x, p->w4, NULL, p->m, p->k, p->n) ? 0 : -1;
    }
}

/* x is dY [m, n] here, out dX [m, k]. */
static int run_transposed(int kind, const problem *p) {
    switch (kind) {
    case SGEMM:
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, p->m, p->k, p->n, 1.0f, p->x, p->n, p->w, p->k, 0.0f,
                    p->out, p->k);
        return 0;
    case Q8: q8w_matmul_t(p->out, p->x, p->wq, p->m, p->k, p->n, false); return 0;
    case BF16: bf16w_matmul_t(p->out, p->x, p->wb, p->m, p->k, p->n, false); return 0;
    case MX4_AVX512: return mx4w_matmul_t_isa(PACKED_AVX512, p->out, p->x, p->w4, p->m, p->k, p->n, false) ? 0 : -1;
    case MX4_AVX2: return mx4w_matmul_t_isa(PACKED_AVX2, p->out, p->x, p->w4, p->m, p->k, p->n, false) ? 0 : -1;
    default: return -1; /* no transposed product on float32 panels */
    }
}

static int run_once(int kind, const void *ctx) {
    const problem *p = ctx;
    if (p->mode == TRAIN_FORWARD && kind == F32_PACKED) return -1; /* sgemm is training's float32 product */
    return p->mode == TRAIN_BACKWARD ? run_transposed(kind, p) : run_forward(kind, p);
}

static double weight_bytes(int kind, int n, int k) {
    switch (kind) {
    case SGEMM: return sizeof(float) * (double)n * k;
    case F32_PACKED: return sizeof(float) * (double)packed_floats(n, k);
    case Q8: return (double)q8w_bytes(n, k);
    case BF16: return (double)bf16w_bytes(n, k);
    default: return (double)mx4w_bytes(n, k);
    }
}

/* The weights: random MXFP4 blocks (scales 2^-6 .. 2^-3, as a trained
 * model's), dequantized; the other formats pack the dequantized floats. */
typedef struct {
    float *x, *w, *wf, *out;
    void *wq, *wb, *w4;
} buffers;

static void buffers_free(buffers *b) {
    free(b->x), free(b->w), free(b->wf), free(b->out), free(b->wq), free(b->wb), free(b->w4);
}

static bool buffers_make(buffers *b, int k, int n, uint64_t *state) {
    size_t rows = (size_t)(k > n ? k : n) * MAX_M;
    unsigned char *blocks = malloc((size_t)n * (k / 32) * MX4W_GGUF_BYTES);
    *b = (buffers){malloc(sizeof(float) * rows), malloc(sizeof(float) * (size_t)n * k),
                   malloc(sizeof(float) * packed_floats(n, k)), malloc(sizeof(float) * rows),
                   malloc(q8w_bytes(n, k)), malloc(bf16w_bytes(n, k)), malloc(mx4w_bytes(n, k))};
    if (!blocks || !b->x || !b->w || !b->wf || !b->out || !b->wq || !b->wb || !b->w4) {
        free(blocks);
        return false;
    }
    for (size_t i = 0; i < (size_t)n * (k / 32) * MX4W_GGUF_BYTES; i++) {
        *state ^= *state << 13, *state ^= *state >> 7, *state ^= *state << 17;
        blocks[i] = (unsigned char)(i % MX4W_GGUF_BYTES == 0 ? 121 + (*state >> 20) % 4 : *state >> 24);
    }
    mx4w_pack_gguf(b->w4, blocks, n, k);
    free(blocks);
    mx4w_unpack(b->w, b->w4, n, k);
    if (packed_supported()) packed_pack(b->wf, b->w, n, k);
    q8w_pack(b->wq, b->w, n, k);
    bf16w_pack(b->wb, b->w, n, k);
    bench_fill_uniform(b->x, rows, state);
    return true;
}

/* Relative RMS error of each kind against float64 over the weights it
 * holds (for q8 and bf16 its own dequantized ones) at m rows. */
static void error_report(const buffers *b, mode md, int m, int k, int n) {
    bool transposed = md == TRAIN_BACKWARD;
    float *deq = malloc(sizeof(float) * (size_t)n * k);
    if (!deq) return;
    printf("relative RMS error against float64 over each format's weights (m=%d):", m);
    for (int kind = 0; kind < KINDS; kind++) {
        problem p = {m, k, n, md, b->x, b->w, b->wf, b->wq, b->wb, b->w4, b->out};
        if (run_once(kind, &p) != 0) continue;
        if (kind == Q8)
            q8w_unpack(deq, b->wq, n, k);
        else if (kind == BF16)
            bf16w_unpack(deq, b->wb, n, k);
        const float *w = kind == Q8 || kind == BF16 ? deq : b->w;
        int outs = transposed ? k : n, inner = transposed ? n : k;
        double err = 0, ref2 = 0;
        for (int r = 0; r < m; r++)
            for (int o = 0; o < outs; o++) {
                double ref = 0;
                for (int i = 0; i < inner; i++)
                    ref += (double)b->x[(size_t)r * inner + i] * (transposed ? w[(size_t)i * k + o] : w[(size_t)o * k + i]);
                double d = b->out[(size_t)r * outs + o] - ref;
                err += d * d, ref2 += ref * ref;
            }
        printf("  %s %.1e", kind_names[kind], sqrt(err / ref2));
    }
    printf("\n");
    free(deq);
}

static void bench_shape(const buffers *b, mode md, int k, int n) {
    static const int rollout_ms[] = {1, 4, 16, 64}, training_ms[] = {16, 64, 256};
    const int *ms = md == ROLLOUT ? rollout_ms : training_ms;
    int count = md == ROLLOUT ? 4 : 3;
    for (int mi = 0; mi < count; mi++) {
        problem p = {ms[mi], k, n, md, b->x, b->w, b->wf, b->wq, b->wb, b->w4, b->out};
        double flop = 2.0 * p.m * k * n;
        printf("k=%-5d n=%-5d m=%-4d", k, n, p.m);
        for (int kind = 0; kind < KINDS; kind++) {
            double s = bench_best_seconds(run_once, kind, &p, 0.002, 100, 0.3);
            if (s >= 0) printf("  %s %6.1f GFLOP/s %5.1f GB/s", kind_names[kind], flop / s / 1e9, weight_bytes(kind, n, k) / s / 1e9);
        }
        printf("\n");
        fflush(stdout);
    }
}

int main(void) {
    static const int shapes[][2] = {{2880, 5760}, {2880, 2880}}; /* k, n: gate_up, down */
    uint64_t state = 0x9E3779B97F4A7C15ULL;
    printf("MXFP4 and the products on decoded tiles, %d threads, fastest path %s (GB/s: weight bytes read per second)\n",
           omp_get_max_threads(), packed_isa_name(packed_isa_best()));
    for (int md = 0; md < MODES; md++) {
        printf("%s\n", mode_titles[md]);
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            buffers b;
            if (!buffers_make(&b, shapes[s][0], shapes[s][1], &state)) {
                fprintf(stderr, "bench_mxfp4: cannot allocate the %dx%d problem\n", shapes[s][1], shapes[s][0]);
                buffers_free(&b);
                return 1;
            }
            if (s == 0) error_report(&b, (mode)md, 4, shapes[s][0], shapes[s][1]);
            bench_shape(&b, (mode)md, shapes[s][0], shapes[s][1]);
            buffers_free(&b);
        }
    }
    return 0;
}
