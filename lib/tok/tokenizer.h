/* Byte-level BPE tokenizer with exact Hugging Face `tokenizers` parity.
 *
 * Encoding follows HF's pipeline step by step: added tokens are split out
 * of the text first (leftmost-longest, non-normalized ones, then normalized
 * ones), each remaining piece is pre-tokenized (Split / Digits / ByteLevel
 * regexes, run with PCRE2), every pre-token's bytes are mapped through the
 * GPT-2 byte<->unicode table and merged by rank. Nothing is added around
 * the text (HF add_special_tokens=False).
 *
 * A tokenizer is immutable after construction; encode and decode may run
 * from several threads at once. */
#ifndef GRPO_TOKENIZER_H
#define GRPO_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../util/err.h"
#include "../util/strbuf.h"

typedef struct tokenizer tokenizer;

/* The pre-tokenizers of the model families we support, for callers that
 * know the family by name (GGUF's tokenizer.ggml.pre) rather than by a
 * tokenizer.json. Each ends in ByteLevel:
 *   GPT2:   ByteLevel with the GPT-2 regex
 *   LLAMA3: Split(Llama-3 regex, isolated), ByteLevel without regex
 *   QWEN2:  Split(Qwen2 regex, isolated), ByteLevel without regex
 *   SMOLLM: Digits(individual_digits), ByteLevel with the GPT-2 regex
 *   GPT4O:  Split(o200k regex, isolated), ByteLevel without regex (GPT-4o, gpt-oss) */
typedef enum { TOK_PRE_GPT2, TOK_PRE_LLAMA3, TOK_PRE_QWEN2, TOK_PRE_SMOLLM, TOK_PRE_GPT4O } tok_pre_kind;

/* The names tok_pre_kind_name gives, for messages. */
#define TOK_PRE_NAMES "gpt-2, smollm, llama-bpe, qwen2, gpt-4o"

/* Maps llama.cpp's tokenizer.ggml.pre names ("gpt-2", "llama-bpe", "qwen2",
 * "smollm", "gpt-4o", ...) to a kind. 0, or EX_DATAERR naming the unsupported name. */
int tok_pre_kind_from_name(const char *name, tok_pre_kind *kind, gerr *e);
/* The name llama.cpp's converter writes for the kind ("llama-bpe" for LLAMA3). */
const char *tok_pre_kind_name(tok_pre_kind kind);
/* The kind's Split regex as its tokenizer.json writes it (JSON-decoded);
 * NULL for GPT2 and SMOLLM, whose only regex is ByteLevel's. */
const char *tok_pre_kind_split(tok_pre_kind kind);
/* The kind whose Split regex is exactly pattern: true and *kind, else false. */
bool tok_pre_kind_of_split(const char *pattern, tok_pre_kind *kind);

/* An added token as tokenizer.json's "added_tokens" describes it. */
typedef struct {
    const char *content; /* UTF-8, not byte-mapped ("<|im_start|>") */
    int32_t id;
    bool special;     /* control token: skipped by decode(skip_special) */
    bool normalized;  /* matched after normalization (no normalizer here: same text, second pass) */
    bool lstrip, rstrip; /* the match swallows white space on that side */
    bool single_word; /* only matched when not inside a word */
} tok_added_token;

/* Everything a tokenizer is built from, as in-memory arrays (what a GGUF
 * file holds). The strings are copied; the caller keeps ownership. */
typedef struct {
    const char *const *tokens; /* tokens[i] is the byte-mapped string of id i */
    size_t n_tokens;
    const char *const *merges; /* "left right", rank = index */
    size_t n_merges;
    const tok_added_token *added;
    size_t n_added;
    tok_pre_kind pre;
    bool ignore_merges; /* a pre-token found whole in the vocab is not merged (Llama 3) */
} tok_arrays;

int tok_from_arrays(const tok_arrays *a, tokenizer **out, gerr *e);

/* Reads a Hugging Face tokenizer.json. Anything outside byte-level BPE
 * (another model type, a normalizer, Metaspace, ...) is EX_DATAERR naming it;
 * an unreadable file is EX_NOINPUT / EX_IOERR. */
int tok_load_json(const char *path, tokenizer **out, gerr *e);
/* The same from the file's text; name is used in messages. */
int tok_load_json_text(const char *text, size_t len, const char *name, tokenizer **out, gerr *e);

void tok_free(tokenizer *t);

/* Encodes UTF-8 text into *ids (xmalloc'd, caller frees; *n may be 0).
 * allow_special=false matches special added tokens as plain text (HF's
 * split_special_tokens); non-special added tokens are always matched.
 * Invalid UTF-8 is EX_DATAERR. */
int tok_encode(const tokenizer *t, const char *text, size_t len, bool allow_special, int32_t **ids, size_t *n,
               gerr *e);

/* Appends the decoded text of ids to out, exactly as HF decode(ids,
 * skip_special_tokens): unknown ids are dropped, invalid UTF-8 becomes
 * U+FFFD per maximal invalid subsequence. */
void tok_decode(const tokenizer *t, const int32_t *ids, size_t n, bool skip_special, strbuf *out);

/* Streaming decode: put ids one at a time; text is appended as soon as its
 * UTF-8 is complete, a partial character waits for the next token. After
 * finish, the concatenated output equals tok_decode of all the ids. */
typedef struct {
    const tokenizer *t;
    bool skip_special;
    unsigned char pend[4];
    int npend;
} tok_stream;
void tok_stream_init(tok_stream *s, const tokenizer *t, bool skip_special);
void tok_stream_put(tok_stream *s, int32_t id, strbuf *out);
void tok_stream_finish(tok_stream *s, strbuf *out);

/* Lookups. Ids run 0 .. tok_vocab_size()-1 (there may be unused ids). */
size_t tok_vocab_size(const tokenizer *t);
/* Added tokens first, then the model's vocab, as HF token_to_id; -1 if absent. */
int32_t tok_token_to_id(const tokenizer *t, const char *s, size_t len);
/* The token's string as the vocab writes it ("Ġthe"), or NULL for an unused id. */
const char *tok_id_to_token(const tokenizer *t, int32_t id);
/* The raw bytes a token decodes to (not NUL-terminated; may be a partial
 * UTF-8 character), or NULL for an unused id. */
const char *tok_token_bytes(const tokenizer *t, int32_t id, size_t *len);
bool tok_is_special(const tokenizer *t, int32_t id);
bool tok_is_added(const tokenizer *t, int32_t id);

/* The GPT-2 byte<->unicode map: every byte has a printable code point. */
uint32_t tok_byte_to_unicode(unsigned char b);
/* -1 when cp is not the image of a byte. */
int tok_unicode_to_byte(uint32_t cp);

#endif
