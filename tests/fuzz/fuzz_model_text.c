/* libFuzzer target: a model directory's tokenizer_config.json and
 * generation_config.json (the input split at its first NUL byte) beside a
 * fixed byte-level tokenizer.json. Loading must take or refuse them (a
 * refusal is one line naming the file); what loads must give special ids
 * inside the vocabulary or -1, and a chat template that is recognised or
 * refused, and a recognised one must render and encode a conversation. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_util.h"
#include "io/record.h"
#include "tok/model_text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A tokenizer.json with the three ChatML/SmolLM2 specials and one token per
 * byte (GPT-2's byte-to-unicode map), written once per process. */
static void write_tokenizer(void) {
    static bool written;
    if (written) return;
    strbuf j = {0};
    sb_printf(&j, "{\"added_tokens\":[");
    static const char *const SPECIAL[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
    for (int i = 0; i < 3; i++)
        sb_printf(&j, "%s{\"id\":%d,\"content\":\"%s\",\"special\":true,\"normalized\":false}", i ? "," : "", i,
                   SPECIAL[i]);
    sb_printf(&j, "],\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
                   "\"use_regex\":true},\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\",\"vocab\":{");
    for (int i = 0; i < 3; i++) sb_printf(&j, "\"%s\":%d,", SPECIAL[i], i);
    for (int b = 0; b < 256; b++) {
        uint32_t cp = tok_byte_to_unicode((unsigned char)b);
        if (cp == '"' || cp == '\\') sb_printf(&j, "\"\\%c\":%d", (char)cp, 3 + b);
        else if (cp < 0x80) sb_printf(&j, "\"%c\":%d", (char)cp, 3 + b);
        else sb_printf(&j, "\"%c%c\":%d", (char)(0xC0 | (cp >> 6)), (char)(0x80 | (cp & 0x3F)), 3 + b);
        if (b < 255) sb_putc(&j, ',');
    }
    sb_printf(&j, "},\"merges\":[]}}");
    char path[256];
    fuzz_write("tokenizer.json", j.data, j.len, path, sizeof path);
    sb_free(&j);
    written = true;
}

static const char RECORD[] = "{\"id\":\"t/1\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                             "{\"role\":\"user\",\"content\":\"What is 2+2?\"}]}";

static void render(const model_text *mt, const char *choice) {
    chat_template t;
    gerr e = {0};
    if (model_text_template(mt, &(chat_choice){.family = choice}, &t, &e) != 0) {
        fuzz_check_error(&e, fuzz_dir(), EX_DATAERR, EX_DATAERR);
        return;
    }
    record r;
    record_init(&r);
    if (record_parse(&r, RECORD, sizeof RECORD - 1, "prompts.jsonl", 1, &e)) abort();
    int32_t *ids = NULL;
    size_t n = 0;
    if (model_text_prompt_tokens(mt, &t, &r, &ids, &n, &e) != 0) abort(); /* a fixed, valid conversation */
    if (n == 0) abort();
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || (size_t)ids[i] >= tok_vocab_size(mt->tok)) abort();
    free(ids);
    record_free(&r);
    chat_template_free(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    write_tokenizer();
    char *config, *generation;
    size_t config_len, generation_len;
    fuzz_split(data, size, &config, &config_len, &generation, &generation_len);
    char path[256];
    fuzz_write("tokenizer_config.json", config, config_len, path, sizeof path);
    fuzz_write("generation_config.json", generation, generation_len, path, sizeof path);
    model_text mt;
    gerr e = {0};
    if (model_text_load(fuzz_dir(), &mt, &e) == 0) {
        int vocab = (int)tok_vocab_size(mt.tok);
        if (mt.bos_id < -1 || mt.bos_id >= vocab) {
            fprintf(stderr, "fuzz: bos id %d outside [-1, %d)\n", (int)mt.bos_id, vocab);
            abort();
        }
        if (mt.n_eos < 0 || mt.n_eos > MODEL_TEXT_MAX_EOS) abort();
        for (int i = 0; i < mt.n_eos; i++)
            if (mt.eos_ids[i] < 0 || mt.eos_ids[i] >= vocab) {
                fprintf(stderr, "fuzz: eos id %d outside [0, %d)\n", (int)mt.eos_ids[i], vocab);
                abort();
            }
        render(&mt, "auto");
        render(&mt, "chatml");
        render(&mt, "llama3");
        model_text_free(&mt);
    } else {
        fuzz_check_error(&e, fuzz_dir(), EX_DATAERR, EX_DATAERR);
    }
    free(config);
    free(generation);
    return 0;
}
