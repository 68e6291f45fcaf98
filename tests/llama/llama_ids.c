// llama_ids: loads a GGUF with llama.cpp's own library, tokenizes a text with
// llama.cpp's tokenizer and greedily generates N tokens, printing token ids:
//   line 1: the prompt's ids
//   line 2: the N generated ids, argmax each, never stopping early: llama.cpp
//   ends generation at every token named like an end marker (<|endoftext|>,
//   <|im_end|>, ...), a wider set than the model's eos_token_id, so the
//   caller decides where a completion ends.
// The text is tokenized as is: no BOS added; special tokens written in it
// (<|im_start|>) are parsed, as Hugging Face tokenizers and grpo-prep do.
// llama.cpp's warnings and errors go to stderr; its other logging is dropped.
// Exit status: 0 ok, 64 usage, 65 llama.cpp rejected the model or the text,
// 70 a decode failed.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static void log_warnings(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level == GGML_LOG_LEVEL_WARN || level == GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

static void print_ids(const llama_token *ids, int n) {
    for (int i = 0; i < n; i++)
        printf(i ? " %d" : "%d", ids[i]);
    putchar('\n');
}

static llama_token argmax(const float *logits, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (logits[i] > logits[best])
            best = i;
    return best;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: llama_ids MODEL.gguf N TEXT\n");
        return 64;
    }
    char *end;
    long n_new = strtol(argv[2], &end, 10);
    if (*end || n_new < 0 || n_new > 4096) {
        fprintf(stderr, "llama_ids: N must be 0..4096, not %s\n", argv[2]);
        return 64;
    }
    const char *text = argv[3];
    llama_log_set(log_warnings, NULL);
    llama_backend_init();

    struct llama_model *model = llama_model_load_from_file(argv[1], llama_model_default_params());
    if (!model) {
        fprintf(stderr, "llama_ids: llama.cpp could not load %s\n", argv[1]);
        return 65;
    }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    int n_vocab = llama_vocab_n_tokens(vocab);

    int text_len = (int)strlen(text);
    int cap = text_len + 1 + (int)n_new;
    llama_token *ids = malloc(sizeof *ids * (size_t)cap);
    if (!ids) {
        fprintf(stderr, "llama_ids: out of memory\n");
        return 70;
    }
    int n_prompt = llama_tokenize(vocab, text, text_len, ids, cap, false, true);
    if (n_prompt <= 0) {
        fprintf(stderr, "llama_ids: llama.cpp tokenized the text to %d tokens\n", n_prompt);
        return 65;
    }
    print_ids(ids, n_prompt);

    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(n_prompt + n_new + 1);
    cp.n_batch = (uint32_t)n_prompt;
    cp.n_threads = cp.n_threads_batch = 1;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "llama_ids: llama.cpp could not make a context\n");
        return 65;
    }

    // Prefill the prompt, then feed back one argmax token at a time.
    struct llama_batch batch = llama_batch_get_one(ids, n_prompt);
    int n_out = 0;
    llama_token *out = ids + n_prompt;
    while (n_out < n_new) {
        if (llama_decode(ctx, batch) != 0) {
            fprintf(stderr, "llama_ids: llama_decode failed after %d tokens\n", n_out);
            return 70;
        }
        out[n_out] = argmax(llama_get_logits_ith(ctx, -1), n_vocab);
        batch = llama_batch_get_one(&out[n_out++], 1);
    }
    print_ids(out, n_out);

    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    free(ids);
    return 0;
}
