/* libFuzzer target: any bytes as a tokenizer.json. A file that loads must
 * encode and decode without crashing: every id encode gives is in the
 * vocabulary, streaming decode equals whole decode, and decoding what a
 * byte-complete tokenizer encoded gives the text back. A file that does not
 * load is a one-line EX_DATAERR naming it. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_util.h"
#include "tok/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Whether every byte has a token of its own (then encoding cannot lose text). */
static bool byte_complete(const tokenizer *t) {
    for (int b = 0; b < 256; b++) {
        char utf8[5] = {0};
        uint32_t cp = tok_byte_to_unicode((unsigned char)b);
        size_t n = cp < 0x80 ? (utf8[0] = (char)cp, 1)
                             : (utf8[0] = (char)(0xC0 | (cp >> 6)), utf8[1] = (char)(0x80 | (cp & 0x3F)), 2);
        if (cp >= 0x800) return false; /* the GPT-2 map stays below U+0800 */
        if (tok_token_to_id(t, utf8, n) < 0) return false;
    }
    return true;
}

static void round_trip(const tokenizer *t, const char *text, size_t len, bool complete) {
    int32_t *ids = NULL;
    size_t n = 0;
    gerr e = {0};
    if (tok_encode(t, text, len, false, &ids, &n, &e) != 0) {
        if (e.code != EX_DATAERR) abort(); /* invalid UTF-8 */
        return;
    }
    size_t vocab = tok_vocab_size(t);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || (size_t)ids[i] >= vocab) abort();
    strbuf whole = {0}, streamed = {0};
    tok_decode(t, ids, n, false, &whole);
    tok_stream s;
    tok_stream_init(&s, t, false);
    for (size_t i = 0; i < n; i++) tok_stream_put(&s, ids[i], &streamed);
    tok_stream_finish(&s, &streamed);
    if (whole.len != streamed.len || (whole.len && memcmp(whole.data, streamed.data, whole.len))) abort();
    if (complete && (whole.len != len || (len && memcmp(whole.data, text, len)))) {
        fprintf(stderr, "fuzz: decode(encode(text)) is not the text: %zu bytes in, %zu out\n", len, whole.len);
        abort();
    }
    sb_free(&whole);
    sb_free(&streamed);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fuzz_copy(data, size);
    tokenizer *t = NULL;
    gerr e = {0};
    if (tok_load_json_text(text, size, "tokenizer.json", &t, &e) == 0) {
        bool complete = byte_complete(t);
        static const char *const SAMPLES[] = {"Hello, world! 12345 +- 6.7e8", "  two  spaces\n\nand\ttabs ",
                                              "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x99\x82 it's we'll I'M",
                                              "<|im_start|>user\nhi<|im_end|>"};
        for (size_t i = 0; i < sizeof SAMPLES / sizeof *SAMPLES; i++)
            round_trip(t, SAMPLES[i], strlen(SAMPLES[i]), complete);
        round_trip(t, text, size < 256 ? size : 256, complete);
        for (size_t id = 0; id < tok_vocab_size(t) && id < 4096; id++) {
            size_t n = 0;
            const char *bytes = tok_token_bytes(t, (int32_t)id, &n);
            if ((bytes == NULL) != (tok_id_to_token(t, (int32_t)id) == NULL)) abort();
        }
        tok_free(t);
    } else {
        fuzz_check_error(&e, "tokenizer.json", EX_DATAERR, EX_DATAERR);
    }
    free(text);
    return 0;
}
