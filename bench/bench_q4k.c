/* Q4_K weights (lib/ops/packed_q4k.h) at Qwen2.5-1.5B's shapes (hidden
 * 1536, FFN 8960: q/o k = n = 1536; gate/up k = 1536, n = 8960; down
 * k = 8960, n = 1536), random weights: what grpo-update --base-weights
 * q4k spends on its frozen base, measured apart.
 *
 * 1. The load: q4kw_pack (the quantizer, float32 in) and q4kw_pack_gguf
 *    (a Q4_K file's blocks moved), nanoseconds a weight on each path this
 *    CPU has (portable, AVX2, AVX-512), all threads; and the seconds the
 *    model's 28 layers would take (1.31 G layer weights) at that rate.
 * 2. y = x W^T with float32 x, m = 1, 16, 64, 1024 rows (decode to the
 *    bench's micro-batch of 1,024 tokens): q4kw_matmul on each path beside
 *    OpenBLAS sgemm on the float32 weights.
 * 3. dX = dY W, m = 64 and 1024: q4kw_matmul_t beside sgemm.
 *
 * GFLOP/s (2 m k n per call) and the ratio to sgemm's. Best of up to 20
 * timed batches of >= 20 ms each within 2 s: the machine may be shared. A
 * benchmark, not a test: exits 0 unless it cannot run.
 *
 *   build/bench/bench_q4k [--load] [OMP_NUM_THREADS=1 for one core]
 * --load: part 1 alone. */
#include <cblas.h>
#include <omp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "ops/packed_q4k.h"

enum { LAYER_WEIGHTS = 28 * (2 * 1536 * 1536 + 2 * 256 * 1536 + 3 * 1536 * 8960) };

typedef struct {
    int m, k, n;
    const float *x, *w;
    const void *wq, *blocks;
    void *packed;
    float *out;
} problem;

/* kind: 0 sgemm, 1 + isa q4k's path; pack: q4kw_pack_isa (kind = isa), pack_gguf */
enum { PACK, PACK_GGUF, FORWARD, BACKWARD };
typedef struct {
    int what;
    const problem *p;
} job;

static int run(int kind, const void *ctx) {
    const job *j = ctx;
    const problem *p = j->p;
    switch (j->what) {
    case PACK: return q4kw_pack_isa((packed_isa)kind, p->packed, p->w, p->n, p->k) ? 0 : -1;
    case PACK_GGUF: q4kw_pack_gguf(p->packed, p->blocks, p->n, p->k); return 0;
    case FORWARD:
        if (kind == 0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, p->m, p->n, p->k, 1.0f, p->x, p->k, p->w, p->k, 0.0f,
                        p->out, p->n);
        else if (!q4kw_matmul_isa((packed_isa)(kind - 1), p->out, p->x, p->wq, NULL, p->m, p->k, p->n))
            return -1;
        return 0;
    default:
        if (kind == 0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, p->m, p->k, p->n, 1.0f, p->x, p->n, p->w, p->k,
                        0.0f, p->out, p->k);
        else if (!q4kw_matmul_t_isa((packed_isa)(kind - 1), p->out, p->x, p->wq, p->m, p->k, p->n, false))
            return -1;
        return 0;
    }
}

/* Random GGUF Q4_K blocks with finite f16 d and dmin (0x3C00: 1.0 scaled down). */
static void random_blocks(unsigned char *b, size_t blocks, uint64_t *st) {
    for (size_t i = 0; i < blocks * Q4KW_GGUF_BYTES; i++) {
        *st ^= *st << 13, *st ^= *st >> 7, *st ^= *st << 17;
        b[i] = (unsigned char)(*st >> 24);
    }
    for (size_t i = 0; i < blocks; i++) {
        unsigned char *h = b + i * Q4KW_GGUF_BYTES;
        h[1] = (unsigned char)(0x20 + (h[1] & 7)), h[3] = (unsigned char)(0x20 + (h[3] & 7));
    }
}

int main(int argc, char **argv) {
    bool load_only = argc == 2 && !strcmp(argv[1], "--load");
    if (argc > 1 && !load_only) return fprintf(stderr, "usage: bench_q4k [--load]\n"), 2;
    static const int shapes[][2] = {{1536, 1536}, {1536, 8960}, {8960, 1536}}; /* k, n */
    static const int ms[] = {1, 16, 64, 1024};
    uint64_t st = 0x243F6A8885A308D3ULL;
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("Q4_K at Qwen2.5-1.5B's shapes, %d threads\n", omp_get_max_threads());
    printf("load: ns a weight (seconds for the model's %.2f G layer weights)\n", LAYER_WEIGHTS / 1e9);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int k = shapes[s][0], n = shapes[s][1], mmax = 1024;
        float *w = malloc(sizeof(float) * (size_t)n * k), *x = malloc(sizeof(float) * (size_t)mmax * (k > n ? k : n));
        float *out = malloc(sizeof(float) * (size_t)mmax * (k > n ? k : n));
        void *wq = malloc(q4kw_bytes(n, k)), *packed = malloc(q4kw_bytes(n, k));
        unsigned char *blocks = malloc((size_t)n * (k / Q4KW_K_SUPER) * Q4KW_GGUF_BYTES);
        if (!w || !x || !out || !wq || !packed || !blocks) return fprintf(stderr, "bench_q4k: out of memory\n"), 70;
        bench_fill_uniform(w, (size_t)n * k, &st);
        for (size_t i = 0; i < (size_t)n * k; i++) w[i] *= 0.02f;
        bench_fill_uniform(x, (size_t)mmax * (k > n ? k : n), &st);
        random_blocks(blocks, (size_t)n * (k / Q4KW_K_SUPER), &st);
        q4kw_pack(wq, w, n, k);
        problem p = {0, k, n, x, w, wq, blocks, packed, out};
        printf("  W [%d, %d]:", n, k);
        for (int isa = 0; isa < PACKED_ISAS; isa++) {
            job j = {PACK, &p};
            double t = bench_best_seconds(run, isa, &j, 0.02, 3, 1.0);
            if (t > 0)
                printf("  pack %s %.1f ns (%.1f s)", packed_isa_name((packed_isa)isa), t * 1e9 / ((double)n * k),
                       t / ((double)n * k) * LAYER_WEIGHTS);
        }
        job jg = {PACK_GGUF, &p};
        double tg = bench_best_seconds(run, 0, &jg, 0.02, 5, 2.0);
        printf("  from GGUF blocks %.2f ns (%.1f s)\n", tg * 1e9 / ((double)n * k), tg / ((double)n * k) * LAYER_WEIGHTS);
        for (int dir = FORWARD; dir <= BACKWARD && !load_only; dir++)
            for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
                if (dir == BACKWARD && ms[mi] < 64) continue;
                p.m = ms[mi];
                job j = {dir, &p};
                double flop = 2.0 * p.m * k * n, t0 = bench_best_seconds(run, 0, &j, 0.02, 20, 2.0);
                printf("    %s m=%-4d sgemm %6.1f GFLOP/s", dir == FORWARD ? "y = x W^T" : "dX = dY W", p.m, flop / t0 / 1e9);
                for (int isa = 0; isa < PACKED_ISAS; isa++) {
                    double t = bench_best_seconds(run, 1 + isa, &j, 0.02, 20, 2.0);
                    if (t > 0)
                        printf("  q4k %s %6.1f (%.2fx)", packed_isa_name((packed_isa)isa), flop / t / 1e9, t0 / t);
                }
                printf("\n");
            }
        free(w), free(x), free(out), free(wq), free(packed), free(blocks);
    }
    return 0;
}
