/* libFuzzer target: any bytes as a GGUF model file, read for what grpo-prep
 * and the loaders take from its metadata: the tokenizer (tokenizer.ggml.*),
 * the chat template, the special ids, and the model's hyper-parameters. What
 * loads must encode and decode a conversation with ids inside the
 * vocabulary; what does not is a one-line error naming the file. */
#include <stddef.h>
#include <stdint.h>

#include "ckpt/gguf_config.h"
#include "formats/gguf.h"
#include "fuzz_util.h"
#include "tok/model_text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[256];
    fuzz_write("model.gguf", data, size, path, sizeof path);
    model_text mt;
    gerr e = {0};
    if (model_text_load(path, &mt, &e) == 0) {
        int vocab = (int)tok_vocab_size(mt.tok);
        if (mt.bos_id < -1 || mt.n_eos < 0 || mt.n_eos > MODEL_TEXT_MAX_EOS) abort();
        static const char TEXT[] = "<|im_start|>user\nWhat is 12 + 7?<|im_end|>\n";
        int32_t *ids = NULL;
        size_t n = 0;
        if (tok_encode(mt.tok, TEXT, sizeof TEXT - 1, true, &ids, &n, &e) == 0) {
            for (size_t i = 0; i < n; i++)
                if (ids[i] < 0 || ids[i] >= vocab) abort();
            strbuf out = {0};
            tok_decode(mt.tok, ids, n, true, &out);
            sb_free(&out);
            free(ids);
        }
        chat_template t;
        e = (gerr){0};
        if (model_text_template(&mt, &(chat_choice){.family = "auto"}, &t, &e) == 0) chat_template_free(&t);
        else fuzz_check_error(&e, path, EX_DATAERR, EX_DATAERR);
        model_text_free(&mt);
    } else {
        fuzz_check_error(&e, path, EX_DATAERR, EX_DATAERR);
    }
    /* the hyper-parameters, from the same bytes in memory */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) abort();
    if (size) memcpy(copy, data, size);
    gguf_file f;
    e = (gerr){0};
    if (gguf_open_memory(&f, copy, size, "model.gguf", &e) == 0) {
        model_config c;
        if (config_load_gguf(&c, &f, &e) == 0 && config_check(&c, "model.gguf", &e) == 0) {
            if (c.dim <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 || c.n_heads % c.n_kv_heads) abort();
        } else {
            fuzz_check_error(&e, "model.gguf", EX_DATAERR, EX_DATAERR);
        }
        gguf_close(&f);
    }
    free(copy);
    return 0;
}
