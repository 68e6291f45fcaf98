/* Internals shared by the files of lib/tok; not for other modules. */
#ifndef GRPO_TOK_INTERNAL_H
#define GRPO_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer.h"

/* ---- UTF-8 and the byte map (bytes.c) ---- */

/* Decodes one code point of valid UTF-8 at p (n > 0 bytes left); returns its length. */
size_t utf8_decode(const char *p, size_t n, uint32_t *cp);
size_t utf8_encode(uint32_t cp, char out[4]);
/* Length of the leading complete-and-valid part plus how the rest looks:
 * scans s like Rust's Utf8Chunks. Returns bytes consumed; *kind is
 * 0 for a valid character, 1 for an invalid subsequence of that length,
 * 2 for an incomplete (but so far valid) sequence running to the end. */
size_t utf8_chunk(const unsigned char *s, size_t n, int *kind);
/* Appends s to out as Rust's String::from_utf8_lossy would. With hold,
 * an incomplete sequence at the very end is not emitted; its length is
 * returned (else 0). */
size_t utf8_lossy_append(strbuf *out, const unsigned char *s, size_t n, bool hold);
/* Offset of the first invalid byte, or n when s is valid UTF-8. */
size_t utf8_valid_prefix(const char *s, size_t n);
/* Unicode White_Space (Rust char::is_whitespace, Oniguruma \s). */
bool uni_is_space(uint32_t cp);

/* ---- pre-tokenization (pretok.c) ---- */

enum { SPLIT_ISOLATED, SPLIT_REMOVED, SPLIT_MERGED_PREV, SPLIT_MERGED_NEXT, SPLIT_CONTIGUOUS };

typedef struct {
    pcre2_code *re;        /* NULL: ByteLevel without regex */
    int behavior;          /* SPLIT_* */
    bool invert;
    bool byte_level;       /* the final ByteLevel step */
    bool add_prefix_space; /* ByteLevel only */
    bool jit;
} pretok_step;

enum { PRETOK_MAX_STEPS = 8 };

typedef struct {
    pretok_step steps[PRETOK_MAX_STEPS];
    int n;
} pretok;

/* Regex steps; pattern is PCRE2 syntax with \s/\S meaning Unicode White_Space
 * (as Oniguruma, which HF uses). literal: pattern is a plain string. */
int pretok_add_split(pretok *p, const char *pattern, bool literal, int behavior, bool invert, gerr *e);
int pretok_add_digits(pretok *p, bool individual, gerr *e);
int pretok_add_byte_level(pretok *p, bool use_regex, bool add_prefix_space, gerr *e);
int pretok_add_kind(pretok *p, tok_pre_kind kind, gerr *e);
void pretok_free(pretok *p);

/* ---- the tokenizer ---- */

typedef struct {
    char *content;
    size_t len;
    int32_t id;
    bool special, normalized, lstrip, rstrip, single_word;
} added_tok;

typedef struct {
    uint64_t key; /* left << 32 | right, both ids; UINT64_MAX = empty */
    uint32_t rank;
    int32_t id;
} merge_slot;

struct tokenizer {
    size_t n_ids;        /* ids 0 .. n_ids-1 */
    char **model_str;    /* model vocab string of each id, or NULL */
    int32_t *vocab_slot; /* open addressing over model_str: id or -1 */
    size_t vocab_cap;    /* power of two */
    merge_slot *merges;
    size_t merge_cap;
    int32_t byte_id[256]; /* id of the single-character token of each byte, -1 if none */
    char byte_str[256][3]; /* mapped UTF-8 of each byte, NUL-terminated */
    bool ignore_merges;
    int32_t unk_id; /* -1: unknown characters are dropped, as HF without unk_token */
    bool fuse_unk;
    bool nfc; /* the normalizer: text between non-normalized added tokens is NFC-normalized */

    added_tok *added;
    size_t n_added;
    int32_t *added_of_id; /* index into added, or -1 */
    /* per matching pass (0: normalized=false, 1: normalized=true): added
     * indices sorted by first byte, then longest first */
    int32_t *by_first[2];
    uint32_t first_start[2][257];
    pcre2_code *alnum; /* Rust regex's Unicode \w, for single_word; NULL when unused */

    char *dec_pool;    /* decoded bytes of every id */
    size_t *dec_off;   /* n_ids+1 offsets; dec_ok[id] says if the id exists */
    bool *dec_ok;

    pretok pre;
};

/* bpe.c: the model. */
tokenizer *tok_alloc(size_t n_ids);
/* Registers a vocab entry (copies s). EX_DATAERR on a duplicate id. */
int tok_set_vocab(tokenizer *t, int32_t id, const char *s, size_t len, gerr *e);
/* Call once all vocab entries are in. */
void tok_index_vocab(tokenizer *t);
int32_t tok_vocab_lookup(const tokenizer *t, const char *s, size_t len);
/* rank = order of addition; a later duplicate overrides, as HF's map does. */
int tok_add_merge(tokenizer *t, const char *a, size_t alen, const char *b, size_t blen, uint32_t rank, gerr *e);
void tok_merges_reserve(tokenizer *t, size_t n);

typedef struct bpe_work bpe_work;
bpe_work *bpe_work_new(void);
void bpe_work_free(bpe_work *w);
/* Appends the ids of one pre-token (raw bytes, not yet byte-mapped). */
void bpe_encode_word(const tokenizer *t, bpe_work *w, const char *p, size_t len, int32_t **ids, size_t *n,
                     size_t *cap);

/* tokenizer.c: added tokens, decode tables; finishes construction. */
int tok_add_added(tokenizer *t, const tok_added_token *a, gerr *e);
int tok_finish(tokenizer *t, gerr *e);

/* pretok.c: runs the chain on one piece, calling fn for every pre-token. */
typedef int (*pretok_fn)(void *ctx, const char *p, size_t len, gerr *e);
typedef struct pretok_work pretok_work;
/* NULL when out of memory (e says so). */
pretok_work *pretok_work_new(const pretok *p, gerr *e);
void pretok_work_free(pretok_work *w);
int pretok_run(const pretok *p, pretok_work *w, const char *s, size_t len, pretok_fn fn, void *ctx, gerr *e);

#endif
