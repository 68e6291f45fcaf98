#include "json_scan.h"

#include <stdint.h>
#include <string.h>

static inline size_t skip_ws(const char *s, size_t len, size_t i) {
    while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
    return i;
}

static size_t fail(json_scan_error *err, size_t i, const char *msg) {
    err->column = i + 1;
    err->msg = msg;
    return 0;
}

static inline int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Length of the valid UTF-8 sequence at s[i] (lead byte >= 0x80), 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t len, size_t i) {
    unsigned char c = s[i];
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c == 0xE0) n = 3, lo = 0xA0;
    else if (c >= 0xE1 && c <= 0xEC) n = 3;
    else if (c == 0xED) n = 3, hi = 0x9F; /* no UTF-16 surrogates */
    else if (c >= 0xEE && c <= 0xEF) n = 3;
    else if (c == 0xF0) n = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) n = 4;
    else if (c == 0xF4) n = 4, hi = 0x8F; /* nothing above U+10FFFF */
    else return 0;
    if (i + n > len) return 0;
    if (s[i + 1] < lo || s[i + 1] > hi) return 0;
    for (size_t k = 2; k < n; k++)
        if ((s[i + k] & 0xC0) != 0x80) return 0;
    return n;
}

/* s[i] is the opening quote. */
static size_t scan_string(const char *s, size_t len, size_t i, json_scan_error *err) {
    const unsigned char *u = (const unsigned char *)s;
    i++;
    for (;;) {
        while (i < len && u[i] >= 0x20 && u[i] < 0x80 && u[i] != '"' && u[i] != '\\') i++;
        if (i >= len) return fail(err, i, "unterminated string");
        unsigned char c = u[i];
        if (c == '"') return i + 1;
        if (c == '\\') {
            if (i + 1 >= len) return fail(err, i, "unterminated string");
            char esc = s[i + 1];
            if (esc && strchr("\"\\/bfnrt", esc)) {
                i += 2;
            } else if (esc == 'u') {
                if (i + 6 > len) return fail(err, i, "truncated \\u escape");
                for (int k = 2; k < 6; k++)
                    if (hexval(s[i + k]) < 0) return fail(err, i, "invalid \\u escape");
                i += 6;
            } else {
                return fail(err, i, "invalid escape in string");
            }
        } else if (c < 0x20) {
            return fail(err, i, "control character in string (must be escaped)");
        } else {
            size_t n = utf8_seq(u, len, i);
            if (!n) return fail(err, i, "invalid UTF-8 in string");
            i += n;
        }
    }
}

static size_t scan_number(const char *s, size_t len, size_t i, json_scan_error *err) {
    size_t start = i;
    if (s[i] == '-') i++;
    if (i >= len) return fail(err, start, "invalid number");
    if (s[i] == '0') {
        i++;
    } else if (s[i] >= '1' && s[i] <= '9') {
        while (i < len && s[i] >= '0' && s[i] <= '9') i++;
    } else {
        return fail(err, start, "invalid number");
    }
    if (i < len && s[i] == '.') {
        i++;
        if (i >= len || s[i] < '0' || s[i] > '9') return fail(err, start, "invalid number");
        while (i < len && s[i] >= '0' && s[i] <= '9') i++;
    }
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < len && (s[i] == '+' || s[i] == '-')) i++;
        if (i >= len || s[i] < '0' || s[i] > '9') return fail(err, start, "invalid number");
        while (i < len && s[i] >= '0' && s[i] <= '9') i++;
    }
    return i;
}

static size_t scan_literal(const char *s, size_t len, size_t i, json_scan_error *err) {
    static const char *const words[] = {"true", "false", "null"};
    for (int k = 0; k < 3; k++) {
        size_t n = strlen(words[k]);
        if (i + n <= len && !memcmp(s + i, words[k], n)) return i + n;
    }
    return fail(err, i, "unexpected character");
}

/* An explicit stack instead of recursion: hostile input cannot overflow ours. */
size_t json_scan_value(const char *s, size_t len, size_t i, json_scan_error *err) {
    char stack[JSON_MAX_DEPTH];
    int depth = 0;
    enum { WANT_VALUE, WANT_KEY, AFTER_VALUE } state = WANT_VALUE;
    for (;;) {
        i = skip_ws(s, len, i);
        if (i >= len) return fail(err, i, "unexpected end of line");
        char c = s[i];
        if (state == WANT_KEY) {
            if (c != '"') return fail(err, i, "expected a string key");
            i = scan_string(s, len, i, err);
            if (!i) return 0;
            i = skip_ws(s, len, i);
            if (i >= len || s[i] != ':') return fail(err, i, "expected ':' after key");
            i++;
            state = WANT_VALUE;
            continue;
        }
        if (state == AFTER_VALUE) {
            char close = stack[depth - 1] == '{' ? '}' : ']';
            if (c == ',') {
                i++;
                state = stack[depth - 1] == '{' ? WANT_KEY : WANT_VALUE;
            } else if (c == close) {
                i++;
                if (--depth == 0) return i;
            } else {
                return fail(err, i, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
            }
            continue;
        }
        /* WANT_VALUE */
        if (c == '{' || c == '[') {
            if (depth == JSON_MAX_DEPTH) return fail(err, i, "nesting deeper than 512 levels");
            stack[depth++] = c;
            i = skip_ws(s, len, i + 1);
            if (i < len && s[i] == (c == '{' ? '}' : ']')) {
                i++;
                if (--depth == 0) return i;
                state = AFTER_VALUE;
            } else {
                state = c == '{' ? WANT_KEY : WANT_VALUE;
            }
            continue;
        }
        if (c == '"')
            i = scan_string(s, len, i, err);
        else if (c == '-' || (c >= '0' && c <= '9')) {
            i = scan_number(s, len, i, err);
            /* token ids and logprobs: a run of numbers inside an array, without the state machine */
            while (i && depth > 0 && stack[depth - 1] == '[' && i + 1 < len && s[i] == ',' &&
                   (s[i + 1] == '-' || (s[i + 1] >= '0' && s[i + 1] <= '9')))
                i = scan_number(s, len, i + 1, err);
        } else
            i = scan_literal(s, len, i, err);
        if (!i) return 0;
        if (depth == 0) return i;
        state = AFTER_VALUE;
    }
}

static void put_utf8(strbuf *out, uint32_t cp) {
    char b[4];
    size_t n;
    if (cp < 0x80) b[0] = (char)cp, n = 1;
    else if (cp < 0x800) b[0] = (char)(0xC0 | cp >> 6), b[1] = (char)(0x80 | (cp & 63)), n = 2;
    else if (cp < 0x10000)
        b[0] = (char)(0xE0 | cp >> 12), b[1] = (char)(0x80 | ((cp >> 6) & 63)),
        b[2] = (char)(0x80 | (cp & 63)), n = 3;
    else
        b[0] = (char)(0xF0 | cp >> 18), b[1] = (char)(0x80 | ((cp >> 12) & 63)),
        b[2] = (char)(0x80 | ((cp >> 6) & 63)), b[3] = (char)(0x80 | (cp & 63)), n = 4;
    sb_append(out, b, n);
}

static uint32_t hex4(const char *p) {
    return (uint32_t)(hexval(p[0]) << 12 | hexval(p[1]) << 8 | hexval(p[2]) << 4 | hexval(p[3]));
}

void json_decode_string(const char *body, size_t len, strbuf *out) {
    sb_reserve(out, len);
    size_t i = 0;
    while (i < len) {
        const char *bs = memchr(body + i, '\\', len - i);
        size_t run = bs ? (size_t)(bs - body) - i : len - i;
        sb_append(out, body + i, run);
        i += run;
        if (i >= len) break;
        char esc = body[i + 1];
        i += 2;
        switch (esc) {
        case 'b': sb_putc(out, '\b'); break;
        case 'f': sb_putc(out, '\f'); break;
        case 'n': sb_putc(out, '\n'); break;
        case 'r': sb_putc(out, '\r'); break;
        case 't': sb_putc(out, '\t'); break;
        case 'u': {
            uint32_t cp = hex4(body + i);
            i += 4;
            if (cp >= 0xD800 && cp < 0xDC00 && i + 6 <= len && body[i] == '\\' && body[i + 1] == 'u') {
                uint32_t lo = hex4(body + i + 2);
                if (lo >= 0xDC00 && lo < 0xE000) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    i += 6;
                }
            }
            if (cp >= 0xD800 && cp < 0xE000) cp = 0xFFFD;
            put_utf8(out, cp);
            break;
        }
        default: sb_putc(out, esc); /* " \ / */
        }
    }
}

json_kind json_kind_of(const char *raw) {
    switch (raw[0]) {
    case 'n': return JSON_NULL;
    case 'f': return JSON_FALSE;
    case 't': return JSON_TRUE;
    case '"': return JSON_STRING;
    case '[': return JSON_ARRAY;
    case '{': return JSON_OBJECT;
    default: return JSON_NUMBER;
    }
}

const char *json_kind_name(json_kind k) {
    static const char *const names[] = {"null", "false", "true", "number", "string", "array", "object"};
    return names[k];
}
