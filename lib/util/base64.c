/* Base64 (base64.h). */
#include "base64.h"

#include <stdlib.h>

#include "err.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void base64_encode(strbuf *out, const uint8_t *p, size_t n) {
    sb_reserve(out, (n + 2) / 3 * 4 + 1);
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < n) v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n) v |= p[i + 2];
        char g[4] = {alphabet[v >> 18], alphabet[(v >> 12) & 63], i + 1 < n ? alphabet[(v >> 6) & 63] : '=',
                     i + 2 < n ? alphabet[v & 63] : '='};
        sb_append(out, g, 4);
    }
}

/* The character's value, or -1. */
static int value_of(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

long base64_decode(const char *s, size_t len, uint8_t **out, size_t *n) {
    *out = NULL;
    *n = 0;
    if (len % 4) return (long)len; /* a group cut short */
    size_t pad = len && s[len - 1] == '=' ? (len > 1 && s[len - 2] == '=' ? 2 : 1) : 0;
    uint8_t *b = xmalloc(len / 4 * 3 + 1);
    size_t at = 0;
    for (size_t i = 0; i < len; i += 4) {
        uint32_t v = 0;
        for (size_t j = 0; j < 4; j++) {
            int x = i + j >= len - pad ? 0 : value_of(s[i + j]);
            if (x < 0) {
                free(b);
                return (long)(i + j);
            }
            v = v << 6 | (uint32_t)x;
        }
        /* the bits under the padding are 0 in the one encoding of the bytes */
        if ((i + 4 == len && pad == 2 && (v & 0xFFFF)) || (i + 4 == len && pad == 1 && (v & 0xFF))) {
            free(b);
            return (long)(len - pad - 1);
        }
        size_t keep = i + 4 == len ? 3 - pad : 3;
        for (size_t j = 0; j < keep; j++) b[at++] = (uint8_t)(v >> (16 - 8 * j));
    }
    *out = b;
    *n = at;
    return -1;
}
