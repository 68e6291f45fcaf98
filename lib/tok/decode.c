/* Decoding: HF Tokenizer::decode with the ByteLevel decoder. The ids'
 * bytes are concatenated (unknown ids dropped, special ones too when asked)
 * and the whole is turned into text as Rust's String::from_utf8_lossy
 * does. The streaming form holds back an incomplete trailing character,
 * so its output is the same text, delivered early. */
#include <string.h>

#include "tok_internal.h"

static const char *id_bytes(const tokenizer *t, int32_t id, bool skip_special, size_t *len) {
    if (skip_special && tok_is_special(t, id)) return NULL;
    return tok_token_bytes(t, id, len);
}

void tok_decode(const tokenizer *t, const int32_t *ids, size_t n, bool skip_special, strbuf *out) {
    strbuf raw = {0};
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *b = id_bytes(t, ids[i], skip_special, &len);
        if (b) sb_append(&raw, b, len);
    }
    utf8_lossy_append(out, (const unsigned char *)raw.data, raw.len, false);
    sb_free(&raw);
}

void tok_stream_init(tok_stream *s, const tokenizer *t, bool skip_special) {
    memset(s, 0, sizeof *s);
    s->t = t;
    s->skip_special = skip_special;
}

void tok_stream_put(tok_stream *s, int32_t id, strbuf *out) {
    size_t len;
    const char *b = id_bytes(s->t, id, s->skip_special, &len);
    if (!b || len == 0) return;
    /* pending bytes (at most 3) in front of the token's, in a small buffer
     * when it fits; a long token goes through a heap buffer */
    unsigned char small[64];
    strbuf big = {0};
    unsigned char *buf = small;
    size_t n = (size_t)s->npend + len;
    if (n > sizeof small) {
        sb_reserve(&big, n);
        buf = (unsigned char *)big.data;
    }
    memcpy(buf, s->pend, (size_t)s->npend);
    memcpy(buf + s->npend, b, len);
    size_t held = utf8_lossy_append(out, buf, n, true);
    memcpy(s->pend, buf + n - held, held);
    s->npend = (int)held;
    sb_free(&big);
}

void tok_stream_finish(tok_stream *s, strbuf *out) {
    utf8_lossy_append(out, s->pend, (size_t)s->npend, false);
    s->npend = 0;
}
