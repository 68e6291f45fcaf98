/* CPU model benchmark: SmolLM2-135M prefill and decode
 * throughput next to the machine's own ceilings measured in the same run
 * (sgemm GFLOP/s at the model's shapes, streaming-read GB/s), with the
 * fraction of the ceiling each reaches and the project's goals beside them.
 * A benchmark, not a test: it prints and exits 0 unless it cannot run.
 *
 *   build/bench/bench_model [MODEL.gguf [NAME]]
 * NAME (e.g. "decode B=64") runs that measurement alone, for perf record.
 * GRPO_WEIGHTS=f32|bf16|q8 packs the weights so (default: the tools' auto),
 * with the KV cache the tools take with them; GRPO_KV=f32|bf16 overrides it.
 * GRPO_BENCH_PROMPT=N: the decode measurements' context before their 32
 * steps (default 64; attention's share grows with it).
 *
 * Lines starting "kv " are key=value results for bench/model.sh. */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "ckpt/load.h"
#include "ops/blas.h"
#include "model/model.h"
#include "runner/weights.h"
#include "ops/ops.h"
#include "util/clock.h"

static void *alloc_or_die(size_t n) {
    void *p = malloc(n);
    if (!p) {
        fprintf(stderr, "bench_model: cannot allocate %zu MiB\n", n >> 20);
        exit(EX_OSERR);
    }
    return p;
}

static long peak_rss_kib(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) {
        perror("getrusage");
        return -1;
    }
    return ru.ru_maxrss; /* KiB on Linux */
}

/* ---- the machine's ceilings ------------------------------------------------ */

/* Best GFLOP/s of C[M,N] = A[M,K] B[N,K]^T (the model's layout: weights
 * [out, in], so the same transpose flags as matmul_forward), over several
 * timed batches of calls each long enough (~0.1 s) to swamp the timer;
 * OpenBLAS's sgemm (packed false), or our kernel for weights packed once in
 * format fmt. */
static void gemm_once(bool packed, weight_format fmt, int M, int K, int N, const float *a, const float *b,
                      const void *bp, float *c) {
    if (packed)
        matmul_forward_packed(c, a, bp, fmt, NULL, M, K, N);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, b, K, 0.0f, c, N);
}

static double sgemm_gflops(int M, int K, int N, bool packed, weight_format fmt) {
    float *a = alloc_or_die((size_t)M * K * sizeof(float));
    float *b = alloc_or_die((size_t)N * K * sizeof(float));
    float *c = alloc_or_die((size_t)M * N * sizeof(float));
    void *bp = packed ? alloc_or_die(weights_packed_bytes(fmt, N, K)) : NULL;
    for (size_t i = 0; i < (size_t)M * K; i++) a[i] = (float)(i % 7) * 0.01f;
    for (size_t i = 0; i < (size_t)N * K; i++) b[i] = (float)(i % 5) * 0.01f;
    if (bp) weights_pack(fmt, bp, b, N, K);
    double flop = 2.0 * M * K * N, best = 0;
    int reps = 1;
    for (;;) { /* calibrate reps so one batch takes >= 0.1 s */
        double t0 = now_seconds();
        for (int r = 0; r < reps; r++) gemm_once(packed, fmt, M, K, N, a, b, bp, c);
        if (now_seconds() - t0 >= 0.1) break;
        reps *= 2;
    }
    for (int trial = 0; trial < 5; trial++) {
        double t0 = now_seconds();
        for (int r = 0; r < reps; r++) gemm_once(packed, fmt, M, K, N, a, b, bp, c);
        double g = flop * reps / (now_seconds() - t0) / 1e9;
        if (g > best) best = g;
    }
    free(a);
    free(b);
    free(c);
    free(bp);
    return best;
}

/* Best streaming-read GB/s over a buffer far larger than the caches, on all
 * threads (what a decode step does with the weights). The sum is returned
 * through *sink so the reads cannot be optimised away. */
static double read_gbps(size_t bytes, double *sink) {
    size_t n = bytes / sizeof(float);
    float *buf = alloc_or_die(n * sizeof(float));
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) buf[i] = (float)(i & 255); /* first touch on the reading thread */
    double best = 0, sum = 0;
    for (int trial = 0; trial < 5; trial++) {
        double t0 = now_seconds(), s = 0;
        /* simd: lets the float sum be vectorised (no -ffast-math), so the
         * loop is bound by memory and not by one add's latency. */
#pragma omp parallel for simd schedule(static) reduction(+ : s)
        for (size_t i = 0; i < n; i++) s += buf[i];
        double g = (double)bytes / (now_seconds() - t0) / 1e9;
        sum += s;
        if (g > best) best = g;
    }
    *sink = sum;
    free(buf);
    return best;
}

/* Best memcpy GB/s (bytes read + bytes written) on one thread, for reference. */
static double memcpy_gbps(size_t bytes) {
    char *src = alloc_or_die(bytes), *dst = alloc_or_die(bytes);
    memset(src, 1, bytes);
    memset(dst, 2, bytes);
    double best = 0;
    for (int trial = 0; trial < 5; trial++) {
        double t0 = now_seconds();
        memcpy(dst, src, bytes);
        double g = 2.0 * (double)bytes / (now_seconds() - t0) / 1e9;
        if (g > best) best = g;
    }
    if (dst[bytes - 1] != 1) fprintf(stderr, "bench_model: memcpy check failed\n");
    free(src);
    free(dst);
    return best;
}

/* ---- the model ----------------------------------------------------------- */

typedef struct {
    double matmul_params; /* weights a token's row multiplies, without the LM head */
    double head_params;   /* the LM head: vocab * dim */
    int n_layers, q_dim;
} flop_model;

/* FLOPs of n_rows rows of which n_logits compute logits, each row attending
 * over avg_ctx positions on average: 2 per weight per row, plus q.k and p.v
 * (2 * ctx * q_dim each) per layer. The LM head is counted only for the rows
 * that run it (prefill computes logits for its last row alone). */
static double flops(const flop_model *f, double n_rows, double n_logits, double avg_ctx) {
    return 2.0 * f->matmul_params * n_rows + 2.0 * f->head_params * n_logits +
           4.0 * f->n_layers * avg_ctx * f->q_dim * n_rows;
}

typedef struct {
    const char *name;
    double tok_s, gflops, seconds, avg_ctx;
} result;

/* One sequence of T tokens in one forward call, logits for the last row
 * (as grpo-rollout prefills). Best of `trials`. */
static result bench_prefill(const model *m, const flop_model *f, kv_format kv, int T, int trials, gerr *e, int *rc) {
    result r = {.name = NULL};
    kv_cache c;
    model_scratch s;
    if ((*rc = kv_cache_init_as(&c, NULL, &m->cfg, 1, T, kv, e))) return r;
    if ((*rc = model_scratch_init_for(&s, m, T, T, e))) {
        kv_cache_free(&c);
        return r;
    }
    int *seq = alloc_or_die((size_t)T * sizeof(int)), *pos = alloc_or_die((size_t)T * sizeof(int));
    int32_t *tok = alloc_or_die((size_t)T * sizeof(int32_t));
    bool *want = alloc_or_die((size_t)T * sizeof(bool));
    float *logits = alloc_or_die((size_t)m->cfg.vocab_size * sizeof(float));
    for (int i = 0; i < T; i++) {
        seq[i] = 0, pos[i] = i, want[i] = i == T - 1;
        tok[i] = (int32_t)((i * 7919 + 13) % m->cfg.vocab_size);
    }
    double best = 1e30;
    for (int t = 0; t < trials + 1; t++) { /* the first call warms caches and the thread pool */
        double t0 = now_seconds();
        model_forward(m, &c, T, seq, pos, tok, want, logits, &s);
        double dt = now_seconds() - t0;
        if (t > 0 && dt < best) best = dt;
    }
    r.seconds = best;
    r.avg_ctx = (T + 1) / 2.0;
    r.tok_s = T / best;
    r.gflops = flops(f, T, 1, r.avg_ctx) / best / 1e9;
    free(seq), free(pos), free(tok), free(want), free(logits);
    model_scratch_free(&s);
    kv_cache_free(&c);
    return r;
}

/* B sequences share one prefilled prompt of P tokens (copied, as K samples
 * share a prefill), then `steps` decode calls of one row per sequence with
 * logits for every row. Tokens/s counts decoded tokens. Best of `trials`. */
static result bench_decode(const model *m, const flop_model *f, kv_format kv, int B, int P, int steps, int trials,
                           gerr *e, int *rc) {
    result r = {.name = NULL};
    int L = P + steps, R = B > P ? B : P, V = m->cfg.vocab_size;
    kv_cache c;
    model_scratch s;
    if ((*rc = kv_cache_init_as(&c, NULL, &m->cfg, B, L, kv, e))) return r;
    if ((*rc = model_scratch_init_for(&s, m, R, L, e))) {
        kv_cache_free(&c);
        return r;
    }
    int *seq = alloc_or_die((size_t)R * sizeof(int)), *pos = alloc_or_die((size_t)R * sizeof(int));
    int32_t *tok = alloc_or_die((size_t)R * sizeof(int32_t));
    bool *want = alloc_or_die((size_t)R * sizeof(bool));
    float *logits = alloc_or_die((size_t)B * V * sizeof(float));
    for (int i = 0; i < P; i++) {
        seq[i] = 0, pos[i] = i, want[i] = i == P - 1;
        tok[i] = (int32_t)((i * 7919 + 13) % V);
    }
    model_forward(m, &c, P, seq, pos, tok, want, logits, &s);
    for (int b = 1; b < B; b++) kv_cache_copy_prefix(&c, b, 0, P);
    double best = 1e30;
    for (int t = 0; t < trials + 1; t++) { /* trial 0 (2 steps) warms up; every trial rewrites positions P.. */
        double t0 = now_seconds();
        for (int k = 0; k < (t ? steps : 2); k++) {
            for (int b = 0; b < B; b++) {
                seq[b] = b, pos[b] = P + k;
                tok[b] = (int32_t)((b * 104729 + k * 31 + 7) % V); /* a stand-in for sampling */
            }
            model_forward(m, &c, B, seq, pos, tok, NULL, logits, &s);
        }
        double dt = now_seconds() - t0;
        if (t > 0 && dt < best) best = dt;
    }
    r.seconds = best;
    r.avg_ctx = P + (steps + 1) / 2.0; /* step k attends over P + k + 1 positions */
    r.tok_s = (double)B * steps / best;
    r.gflops = flops(f, (double)B * steps, (double)B * steps, r.avg_ctx) / best / 1e9;
    free(seq), free(pos), free(tok), free(want), free(logits);
    model_scratch_free(&s);
    kv_cache_free(&c);
    return r;
}

static const char *verdict(bool met) { return met ? "MET" : "NOT MET"; }

int main(int argc, char **argv) {
    blas_ensure_fast_kernels(argv); /* measure the kernels the tools run */
    const char *path = "models/SmolLM2-135M-Instruct.Q4_1.gguf", *only = NULL;
    if (argc > 1) path = argv[1];
    if (argc > 2) only = argv[2]; /* e.g. "decode B=64": run just that one */
    double load[3];
    if (getloadavg(load, 3) == 3 && load[0] > 0.5)
        fprintf(stderr, "bench_model: warning: load average %.1f before start; numbers will be low\n", load[0]);
    int n_threads = omp_get_max_threads();
    gerr e = {0};
    int rc;
    /* the weights $GRPO_WEIGHTS names (grpo-rollout's --weights) and the KV
     * cache the tools take with them, unless $GRPO_KV says f32 or bf16 */
    weight_choice choice;
    if ((rc = weights_select("GRPO_WEIGHTS", weights_default(), &choice, &e))) {
        fprintf(stderr, "bench_model: %s\n", e.msg);
        return rc;
    }
    weight_format fmt = choice.fmt;
    const char *kv_env = getenv("GRPO_KV");
    kv_format kv = weights_kv_format(fmt);
    if (kv_env && *kv_env) {
        if (strcmp(kv_env, "bf16") != 0 && strcmp(kv_env, "f32") != 0) {
            fprintf(stderr, "bench_model: GRPO_KV=%s: f32 or bf16\n", kv_env);
            return EX_USAGE;
        }
        kv = strcmp(kv_env, "bf16") == 0 ? KV_BF16 : KV_F32;
    }
    const char *kv_name = kv == KV_BF16 ? "bf16" : "fp32";

    /* ---- the model first, so peak RSS is the model's, not the ceiling buffers' */
    model m;
    double t0 = now_seconds();
    /* packed weights, as grpo-rollout loads them (packing counted in the load time) */
    if ((rc = model_load_for_inference(&m, path, false, choice, &e))) {
        fprintf(stderr, "bench_model: %s\n", e.msg);
        return rc;
    }
    double load_s = now_seconds() - t0;
    const model_config *cf = &m.cfg;
    int qd = cf->n_heads * cf->head_dim, kvd = cf->n_kv_heads * cf->head_dim;
    flop_model f = {
        .matmul_params = (double)cf->n_layers * ((double)qd * cf->dim * 2 + (double)kvd * cf->dim * 2 +
                                                 3.0 * cf->hidden_dim * cf->dim),
        .head_params = (double)cf->vocab_size * cf->dim,
        .n_layers = cf->n_layers,
        .q_dim = qd,
    };
    /* the weights one decode step reads: q8 is 34 bytes per 32 (a float16 scale per block) */
    double bytes_per_weight = !m.packed || fmt == WEIGHTS_F32 ? 4.0 : fmt == WEIGHTS_BF16 ? 2.0 : 34.0 / 32;
    double weight_bytes = bytes_per_weight * (f.matmul_params + f.head_params);

    enum { STEPS = 32 };
    const char *prompt_env = getenv("GRPO_BENCH_PROMPT");
    int prompt = prompt_env ? atoi(prompt_env) : 64;
    if (prompt < 1 || prompt + STEPS > m.cfg.max_seq_len) {
        fprintf(stderr, "bench_model: GRPO_BENCH_PROMPT=%s: expected 1 .. %d\n", prompt_env, m.cfg.max_seq_len - STEPS);
        model_free(&m);
        return 64;
    }
    result res[5] = {{0}};
    const char *names[5] = {"prefill T=128", "prefill T=512", "decode B=1", "decode B=16", "decode B=64"};
    int prefill_T[2] = {128, 512}, decode_B[3] = {1, 16, 64};
    for (int i = 0; i < 5; i++) {
        if (only && strcmp(names[i], only) != 0) continue;
        if (i < 2) res[i] = bench_prefill(&m, &f, kv, prefill_T[i], 2, &e, &rc);
        else res[i] = bench_decode(&m, &f, kv, decode_B[i - 2], prompt, STEPS, 2, &e, &rc);
        if (rc) goto fail;
        res[i].name = names[i];
    }
    if (only) { /* profiling one measurement (perf record): no ceilings, no report */
        printf("KV cache: %s\n", kv_name);
        for (int i = 0; i < 5; i++)
            if (res[i].name) printf("%s: %.1f tokens/s\n", res[i].name, res[i].tok_s);
        model_free(&m);
        return 0;
    }
    long rss = peak_rss_kib();

    /* ---- the machine's ceilings */
    /* each shape through OpenBLAS and through our packed kernel (when the
     * CPU has it): the ceiling is the best of all, so our forward is held
     * to the fastest matmul this machine has, ours included */
    const int shapes[4][3] = {{64, 576, 1536},   /* decode B=64: gate/up shape */
                              {512, 576, 1536},  /* prefill T=512 */
                              {64, 1536, 576},   /* down_proj */
                              {64, 576, 49152}}; /* LM head at B=64 */
    double g_blas[4], g_packed[4] = {0}, ceiling = 0, sgemm_best = 0;
    for (int i = 0; i < 4; i++) {
        g_blas[i] = sgemm_gflops(shapes[i][0], shapes[i][1], shapes[i][2], false, fmt);
        if (m.packed) g_packed[i] = sgemm_gflops(shapes[i][0], shapes[i][1], shapes[i][2], true, fmt);
        sgemm_best = fmax(sgemm_best, g_blas[i]);
        ceiling = fmax(ceiling, fmax(sgemm_best, g_packed[i]));
    }
    double sink;
    double bw = read_gbps((size_t)1 << 30, &sink);
    double cp = memcpy_gbps((size_t)512 << 20);

    char described[256];
    printf("model benchmark: %s, %d threads, weights %s\n", path, n_threads, weight_format_name(fmt));
    printf("  %s: dim %d, hidden %d, %d layers, %d/%d heads x %d, vocab %d\n", model_arch_name(cf->arch), cf->dim,
           cf->hidden_dim, cf->n_layers, cf->n_heads, cf->n_kv_heads, cf->head_dim, cf->vocab_size);
    printf("  matmul weights per token: %.1f M + LM head %.1f M = %.1f MB of %s\n", f.matmul_params / 1e6,
           f.head_params / 1e6, weight_bytes / 1e6, m.packed ? weight_format_name(fmt) : "f32");
    printf("  load %.2f s (weights %s, packed once; OpenBLAS packs row-major f32 per call), peak RSS %.0f MiB\n",
           load_s, model_weights_describe(&m, described, sizeof described), rss / 1024.0);
    printf("  KV cache: %s (GRPO_KV)\n\n", kv_name);
    /* OpenBLAS 0.3.21 takes some newer Xeons (in VMs) for a Prescott and
     * runs its SSE3 kernels: say so, it moves every number here ~3x. */
    const char *core = openblas_get_corename();
    printf("ceiling (same run, %d threads, best of 5; OpenBLAS core %s):\n", n_threads, core ? core : "?");
    if (core && strcmp(core, "Prescott") == 0 && __builtin_cpu_supports("avx2"))
        printf("  warning: the CPU has AVX2 but OpenBLAS runs its SSE3 kernels; try OPENBLAS_CORETYPE=%s\n",
               __builtin_cpu_supports("avx512f") ? "SkylakeX (or Cooperlake)" : "Haswell");
    printf("  %-24s %9s %9s\n", "GFLOP/s", "OpenBLAS", m.packed ? weight_format_name(fmt) : "");
    for (int i = 0; i < 4; i++) {
        printf("  sgemm %4d x %4d x %-6d %9.1f", shapes[i][0], shapes[i][1], shapes[i][2], g_blas[i]);
        if (m.packed) printf(" %9.1f", g_packed[i]);
        printf("\n");
    }
    printf("  => ceiling                %7.1f GFLOP/s (best shape and kernel)\n", ceiling);
    printf("  streaming read 1 GiB      %7.1f GB/s\n", bw);
    printf("  memcpy 512 MiB (r+w)      %7.1f GB/s (1 thread)\n\n", cp);

    double bound = bw * 1e9 / weight_bytes; /* decode B=1: every weight read once per token */
    printf("%-15s %10s %9s %10s %9s\n", "", "tokens/s", "GFLOP/s", "ceiling", "avg ctx");
    for (int i = 0; i < 5; i++)
        printf("%-15s %10.1f %9.1f %9.0f%% %9.1f\n", res[i].name, res[i].tok_s, res[i].gflops,
               100 * res[i].gflops / ceiling, res[i].avg_ctx);
    printf("  decode B=1 bandwidth bound: %.1f GB/s / %.0f MB = %.1f tokens/s; reached %.0f%%\n\n", bw,
           weight_bytes / 1e6, bound, 100 * res[2].tok_s / bound);

    double pre_frac = res[1].gflops / ceiling, pre128 = res[0].gflops / ceiling;
    double dec64 = res[4].gflops / ceiling, bw_ratio = bound / res[2].tok_s;
    printf("goals:\n");
    printf("  decode B=64 >= 50%% of ceiling:      %3.0f%%  %s\n", 100 * dec64, verdict(dec64 >= 0.5));
    printf("  prefill >= 60%% of ceiling:          %3.0f%% (T=512), %.0f%% (T=128)  %s\n", 100 * pre_frac,
           100 * pre128, verdict(pre_frac >= 0.6 && pre128 >= 0.6));
    printf("  decode B=1 within 2x of bandwidth:  %.2fx  %s\n", bw_ratio, verdict(bw_ratio <= 2.0));
    printf("(FLOPs = 2 x matmul weights per row + LM head for rows with logits + 4 x layers x ctx x q_dim)\n");

    /* machine-readable lines for bench/model.sh */
    for (int i = 0; i < 5; i++) printf("kv %s tok_s=%.3f\n", res[i].name, res[i].tok_s);
    printf("kv ceiling gflops=%.3f sgemm=%.3f bw=%.3f\n", ceiling, sgemm_best, bw);
    model_free(&m);
    return 0;
fail:
    fprintf(stderr, "bench_model: %s\n", e.msg);
    model_free(&m);
    return rc;
}
