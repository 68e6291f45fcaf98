// llama_decode: llama.cpp's decode rate measured as build/bench/bench_model
// measures ours ("decode B=N"), for bench/moe.sh: B sequences share one
// prefilled prompt of P tokens, then 32 decode calls of one row per sequence,
// logits for every row; each row's token differs (the same stand-in for
// sampling as bench_model's), so a mixture of experts routes the rows as a
// real batch would. llama-batched-bench decodes the same token in every
// sequence, which routes a whole batch to one set of experts.
//   llama_decode [--no-repack] MODEL.gguf B [P]
// Every core, llama.cpp's default context settings (f16 KV cache, flash
// attention auto, the model mapped); --no-repack as llama.cpp's tools' -nr
// (no extra buffer types: weights not repacked, no AMX kernels). Prints
// "decode B=N: X tokens/s".
// Exit status: 0 ok, 64 usage, 65 llama.cpp rejected the model, 70 a decode
// failed.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "llama.h"

enum { STEPS = 32, TRIALS = 2 };

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void log_warnings(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level == GGML_LOG_LEVEL_WARN || level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

int main(int argc, char **argv) {
    struct llama_model_params mp = llama_model_default_params();
    if (argc > 1 && !strcmp(argv[1], "--no-repack")) {
        mp.use_extra_bufts = false;
        argc--, argv++;
    }
    int B = argc > 2 ? atoi(argv[2]) : 0, P = argc > 3 ? atoi(argv[3]) : 64;
    if (argc < 3 || argc > 4 || B < 1 || B > 256 || P < 1 || P > 4096) {
        fprintf(stderr, "usage: llama_decode [--no-repack] MODEL.gguf B [P]  (B 1..256, P 1..4096)\n");
        return 64;
    }
    llama_log_set(log_warnings, NULL);
    llama_backend_init();
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "llama_decode: llama.cpp could not load %s\n", argv[1]);
        return 65;
    }
    int V = llama_vocab_n_tokens(llama_model_get_vocab(model));
    int threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(B * (P + STEPS));
    cp.n_batch = cp.n_ubatch = (uint32_t)(P > B ? P : B);
    cp.n_seq_max = (uint32_t)B;
    cp.kv_unified = true; /* one prompt shared by every sequence, as llama-batched-bench -pps */
    cp.n_threads = cp.n_threads_batch = threads;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "llama_decode: llama.cpp could not make a context\n");
        return 65;
    }
    llama_memory_t mem = llama_get_memory(ctx);
    struct llama_batch batch = llama_batch_init(P > B ? P : B, 0, 1);
    for (int i = 0; i < P; i++) {
        batch.token[i] = (llama_token)((i * 7919 + 13) % V);
        batch.pos[i] = i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = i == P - 1;
    }
    batch.n_tokens = P;
    int rc = llama_decode(ctx, batch) ? 70 : 0;
    for (int b = 1; b < B && !rc; b++) llama_memory_seq_cp(mem, 0, b, 0, P);
    double best = 1e30;
    for (int t = 0; t < TRIALS + 1 && !rc; t++) { /* trial 0 (2 steps) warms up; every trial rewrites P.. */
        for (int b = 0; b < B; b++) llama_memory_seq_rm(mem, b, P, -1);
        double t0 = now_seconds();
        for (int k = 0; k < (t ? STEPS : 2) && !rc; k++) {
            for (int b = 0; b < B; b++) {
                batch.token[b] = (llama_token)((b * 104729 + k * 31 + 7) % V); /* a stand-in for sampling */
                batch.pos[b] = P + k;
                batch.n_seq_id[b] = 1;
                batch.seq_id[b][0] = b;
                batch.logits[b] = 1;
            }
            batch.n_tokens = B;
            if (llama_decode(ctx, batch)) rc = 70;
        }
        double dt = now_seconds() - t0;
        if (t > 0 && dt < best) best = dt;
    }
    if (rc) fprintf(stderr, "llama_decode: llama_decode failed\n");
    else printf("decode B=%d: %.2f tokens/s (%d threads)\n", B, (double)B * STEPS / best, threads);
    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
