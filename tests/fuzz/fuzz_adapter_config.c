/* libFuzzer target: a PEFT adapter directory, its adapter_config.json and
 * adapter_model.safetensors (the input split at its first NUL byte), loaded
 * for a fixed tiny llama. An adapter that loads has a rank, a scale and
 * factors the model's shapes allow; one that does not is a one-line
 * EX_DATAERR naming the file (both files always exist here). The base model
 * it names resolves, or is refused in one line: EX_DATAERR for a bad key,
 * EX_NOINPUT when no path it could mean exists. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt/adapter_dir.h"
#include "fuzz_util.h"
#include "model/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The tiny llama of the tests (tests/ref/model_ref.py make-tiny llama). */
static const char TINY_CONFIG[] =
    "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"hidden_size\":64,"
    "\"intermediate_size\":96,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,"
    "\"vocab_size\":97,\"max_position_embeddings\":128,\"rms_norm_eps\":1e-5,\"rope_theta\":10000,"
    "\"tie_word_embeddings\":false}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    model_config cfg;
    gerr e = {0};
    if (config_parse_hf(&cfg, TINY_CONFIG, "tiny", &e)) abort();
    char *config, *weights;
    size_t config_len, weights_len;
    fuzz_split(data, size, &config, &config_len, &weights, &weights_len);
    char path[256];
    fuzz_write("adapter_config.json", config, config_len, path, sizeof path);
    fuzz_write("adapter_model.safetensors", weights, weights_len, path, sizeof path);
    lora l;
    if (lora_load(&l, &cfg, fuzz_dir(), &e) == 0) {
        if (l.r < 1 || !isfinite(l.scale)) abort();
        lora_free(&l);
    } else {
        fuzz_check_error(&e, fuzz_dir(), EX_DATAERR, EX_DATAERR);
    }
    char *base = NULL;
    e = (gerr){0};
    if (lora_adapter_base_path(fuzz_dir(), &base, &e) == 0) {
        if (!base || !*base) abort();
        free(base);
    } else {
        fuzz_check_error(&e, fuzz_dir(), EX_DATAERR, EX_NOINPUT);
    }
    free(config);
    free(weights);
    return 0;
}
