/* libFuzzer target: any bytes as a Hugging Face config.json. A config that
 * parses must hold sizes a model can be built from (config_check's promise,
 * checked again here, and a bounded product); one that does not is a
 * one-line EX_DATAERR naming the file. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_util.h"
#include "model/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *json = fuzz_copy(data, size);
    model_config c;
    gerr e = {0};
    if (config_parse_hf(&c, json, "config.json", &e) == 0) {
        if (c.dim <= 0 || c.hidden_dim <= 0 || c.n_layers <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 ||
            c.head_dim <= 0 || c.vocab_size <= 0 || c.max_seq_len <= 0 || c.n_heads % c.n_kv_heads ||
            c.head_dim % 2 || !(c.rope_theta > 0) || !(c.norm_eps >= 0))
            abort();
        if (c.n_eos < 0 || c.n_eos > MODEL_MAX_EOS) abort();
        for (int i = 0; i < c.n_eos; i++)
            if (c.eos_ids[i] >= c.vocab_size) abort();
        if (c.bos_id < -1 || c.pad_id < -1 || c.num_labels < 0) abort();
        if (c.rope_llama3 && !(c.rope_factor > 0 && c.rope_original_max_pos > 0)) abort();
        if (!memchr(c.architecture, 0, sizeof c.architecture)) abort();
        if (config_is_eos(&c, -1)) abort();
        /* a mixture: k of its experts, and every layer of one kind or the other */
        if (c.n_experts > 0 && (c.n_experts_used < 1 || c.n_experts_used > c.n_experts || c.moe_hidden_dim <= 0 ||
                                c.moe_step < 1 || c.arch != ARCH_QWEN3_MOE))
            abort();
        if (config_ffn_layers(&c, true) + config_ffn_layers(&c, false) != c.n_layers) abort();
    } else {
        fuzz_check_error(&e, "config.json", EX_DATAERR, EX_DATAERR);
    }
    free(json);
    return 0;
}
