// llama_logits: llama.cpp's logits at every position of a token sequence, so
// that a model's forward is compared with llama.cpp's own on the same GGUF:
//   llama_logits MODEL.gguf TOKENS OUT
// TOKENS holds token ids separated by white space (tests/ref/model_ref.py's
// tokens.txt); OUT gets float64 [n_tokens, n_vocab], little-endian, the
// layout model_ref.py's compare reads as its reference. One batch, one
// thread, CPU. Exit status: 0 ok, 64 usage, 65 llama.cpp rejected the model
// or a token, 66 TOKENS missing, 70 the decode failed, 74 OUT not written.
// The KV cache is float32 and flash attention off (llama.cpp's defaults run
// both in f16).
#include <stdio.h>
#include <stdlib.h>

#include "llama.h"

enum { MAX_TOKENS = 4096 };

static void log_warnings(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level == GGML_LOG_LEVEL_WARN || level == GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: llama_logits MODEL.gguf TOKENS OUT\n");
        return 64;
    }
    static llama_token ids[MAX_TOKENS];
    FILE *f = fopen(argv[2], "r");
    if (!f) {
        fprintf(stderr, "llama_logits: cannot read %s\n", argv[2]);
        return 66;
    }
    int n = 0, id;
    while (n < MAX_TOKENS && fscanf(f, "%d", &id) == 1) ids[n++] = id;
    fclose(f);
    if (n == 0) {
        fprintf(stderr, "llama_logits: %s: no token ids\n", argv[2]);
        return 65;
    }
    llama_log_set(log_warnings, NULL);
    llama_backend_init();
    struct llama_model *model = llama_model_load_from_file(argv[1], llama_model_default_params());
    if (!model) {
        fprintf(stderr, "llama_logits: llama.cpp could not load %s\n", argv[1]);
        return 65;
    }
    int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= n_vocab) {
            fprintf(stderr, "llama_logits: token %d outside the vocabulary (%d)\n", ids[i], n_vocab);
            return 65;
        }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = cp.n_batch = cp.n_ubatch = (uint32_t)n;
    cp.n_threads = cp.n_threads_batch = 1;
    /* the cache in float32 and attention without flash attention's f16 (llama.cpp's defaults) */
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "llama_logits: llama.cpp could not make a context\n");
        return 65;
    }
    struct llama_batch batch = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        batch.token[i] = ids[i];
        batch.pos[i] = i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = 1;
    }
    batch.n_tokens = n;
    if (llama_decode(ctx, batch) != 0) {
        fprintf(stderr, "llama_logits: llama_decode failed\n");
        return 70;
    }
    FILE *o = fopen(argv[3], "wb");
    int rc = o ? 0 : 74;
    for (int i = 0; i < n && !rc; i++) {
        const float *z = llama_get_logits_ith(ctx, i);
        for (int v = 0; v < n_vocab && !rc; v++) {
            double x = z[v];
            if (fwrite(&x, sizeof x, 1, o) != 1) rc = 74;
        }
    }
    if (o && fclose(o)) rc = 74;
    if (rc) fprintf(stderr, "llama_logits: cannot write %s\n", argv[3]);
    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
