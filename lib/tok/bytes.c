/* The GPT-2 byte<->unicode map and the UTF-8 helpers the tokenizer needs.
 *
 * GPT-2 gives every byte a printable character so that BPE can work on
 * strings: the printable Latin-1 bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') map
 * to themselves, the other 68 bytes in order to U+0100, U+0101, ...
 * (so ' ' -> U+0120 'Ġ', '\n' -> U+010A 'Ċ'). */
#include "tok_internal.h"

static bool printable(unsigned b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

uint32_t tok_byte_to_unicode(unsigned char b) {
    if (printable(b)) return b;
    /* rank among the non-printable bytes: 0x00-0x20, 0x7F-0xA0, 0xAD */
    if (b <= 0x20) return 256u + b;
    if (b <= 0xA0) return 256u + 33 + (b - 0x7Fu);
    return 256u + 67; /* 0xAD */
}

int tok_unicode_to_byte(uint32_t cp) {
    if (cp < 256) return printable(cp) ? (int)cp : -1;
    if (cp < 256 + 33) return (int)(cp - 256);
    if (cp < 256 + 67) return (int)(cp - 256 - 33 + 0x7F);
    if (cp == 256 + 67) return 0xAD;
    return -1;
}

size_t utf8_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t utf8_decode(const char *p, size_t n, uint32_t *cp) {
    const unsigned char *s = (const unsigned char *)p;
    if (s[0] < 0x80 || n < 2) {
        *cp = s[0];
        return 1;
    }
    if (s[0] < 0xE0) {
        *cp = (uint32_t)(s[0] & 0x1F) << 6 | (s[1] & 0x3F);
        return 2;
    }
    if (s[0] < 0xF0 || n < 4) {
        *cp = n < 3 ? 0xFFFD : (uint32_t)(s[0] & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
        return n < 3 ? n : 3;
    }
    *cp = (uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3F) << 12 | (uint32_t)(s[2] & 0x3F) << 6 |
          (s[3] & 0x3F);
    return 4;
}

/* Mirrors Rust's Utf8Chunks (core/src/str/lossy.rs): the ranges of the
 * second byte come from Unicode table 3-7; a bad byte ends the invalid
 * subsequence without being part of it. */
size_t utf8_chunk(const unsigned char *s, size_t n, int *kind) {
    unsigned b = s[0];
    if (b < 0x80) {
        *kind = 0;
        return 1;
    }
    size_t w;
    unsigned lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) w = 2;
    else if (b >= 0xE0 && b <= 0xEF) {
        w = 3;
        if (b == 0xE0) lo = 0xA0;
        if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        w = 4;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F;
    } else {
        *kind = 1;
        return 1;
    }
    for (size_t i = 1; i < w; i++) {
        if (i >= n) {
            *kind = 2;
            return i;
        }
        unsigned c = s[i];
        if (i == 1 ? (c < lo || c > hi) : (c & 0xC0) != 0x80) {
            *kind = 1;
            return i;
        }
    }
    *kind = 0;
    return w;
}

/* The offset of the first chunk from i on that is not valid UTF-8 (n when
 * none), with its utf8_chunk kind and length. */
static size_t first_invalid(const unsigned char *s, size_t i, size_t n, int *kind, size_t *len) {
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t k = utf8_chunk(s + i, n - i, kind);
        if (*kind != 0) {
            *len = k;
            return i;
        }
        i += k;
    }
    return n;
}

size_t utf8_lossy_append(strbuf *out, const unsigned char *s, size_t n, bool hold) {
    size_t run = 0; /* start of the pending valid stretch */
    for (;;) {
        int kind = 0;
        size_t k = 0, i = first_invalid(s, run, n, &kind, &k);
        sb_append(out, s + run, i - run);
        if (i == n) return 0;
        if (kind == 2 && hold) return k;
        sb_append(out, "\xEF\xBF\xBD", 3);
        run = i + k;
    }
}

size_t utf8_valid_prefix(const char *p, size_t n) {
    int kind;
    size_t k;
    return first_invalid((const unsigned char *)p, 0, n, &kind, &k);
}

bool uni_is_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}
