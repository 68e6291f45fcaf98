#include "strbuf.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

bool sb_try_reserve(strbuf *b, size_t extra) {
    size_t need = b->len + extra + 1;
    if (need <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap *= 2;
    char *data = realloc(b->data, cap);
    if (!data) return false;
    b->data = data;
    b->cap = cap;
    b->data[b->len] = 0; /* a fresh buffer is "" too */
    return true;
}

void sb_reserve(strbuf *b, size_t extra) {
    if (!sb_try_reserve(b, extra)) die(EX_SOFTWARE, "out of memory allocating %zu bytes", b->len + extra + 1);
}

bool sb_try_append(strbuf *b, const void *data, size_t len) {
    if (!sb_try_reserve(b, len)) return false;
    if (len) memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = 0;
    return true;
}

void sb_append(strbuf *b, const void *data, size_t len) {
    sb_reserve(b, len);
    if (len) memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = 0;
}

void sb_puts(strbuf *b, const char *s) { sb_append(b, s, strlen(s)); }

void sb_putc(strbuf *b, char c) {
    sb_reserve(b, 1);
    b->data[b->len++] = c;
    b->data[b->len] = 0;
}

void sb_printf(strbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    sb_reserve(b, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void sb_json_string(strbuf *b, const char *s, size_t len) {
    static const char hex[] = "0123456789abcdef";
    sb_reserve(b, len + 2);
    sb_putc(b, '"');
    size_t run = 0; /* bytes copied verbatim in one go */
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        sb_append(b, s + run, i - run);
        run = i + 1;
        switch (c) {
        case '"': sb_puts(b, "\\\""); break;
        case '\\': sb_puts(b, "\\\\"); break;
        case '\n': sb_puts(b, "\\n"); break;
        case '\r': sb_puts(b, "\\r"); break;
        case '\t': sb_puts(b, "\\t"); break;
        case '\b': sb_puts(b, "\\b"); break;
        case '\f': sb_puts(b, "\\f"); break;
        default: {
            char esc[7] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15], 0};
            sb_puts(b, esc);
        }
        }
    }
    sb_append(b, s + run, len - run);
    sb_putc(b, '"');
}

void sb_json_number(strbuf *b, double v) {
    if (!isfinite(v)) { /* JSON has no inf/nan; callers check, this keeps output valid */
        sb_puts(b, "null");
        return;
    }
    if (v == 0) { /* -0 prints as 0: the sign carries no meaning in a record */
        sb_putc(b, '0');
        return;
    }
    char buf[40];
    if (v == floor(v) && fabs(v) < 1e17) {
        /* whole numbers print as integers (100, not 1e+02); exact below 1e17 */
        snprintf(buf, sizeof buf, "%.0f", v);
    } else {
        /* Any decimal of <= 15 significant digits survives %.15g (doubles carry
         * 15.9), so the shortest form is the first of 15, 16, 17 digits that
         * reads back; subnormals have fewer digits and need the full search. */
        int prec = fabs(v) < DBL_MIN ? 1 : 15;
        for (; prec <= 17; prec++) {
            snprintf(buf, sizeof buf, "%.*g", prec, v);
            if (strtod(buf, NULL) == v) break;
        }
    }
    sb_puts(b, buf);
}

void sb_json_pyfloat(strbuf *b, double v, bool as_float) {
    if (!isfinite(v)) {
        sb_puts(b, "null");
        return;
    }
    char buf[48];
    int prec = 1; /* significant digits: the fewest that read back */
    for (; prec < 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec - 1, v);
        double back = strtod(buf, NULL);
        if (as_float ? (float)back == (float)v : back == v) break;
    }
    snprintf(buf, sizeof buf, "%.*e", prec - 1, v);
    int x = atoi(strchr(buf, 'e') + 1);
    if (x >= -4 && x < 16) {
        snprintf(buf, sizeof buf, "%.*f", prec - 1 - x > 1 ? prec - 1 - x : 1, v);
    } else {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (!strpbrk(buf, ".e")) strcat(buf, ".0");
    }
    sb_puts(b, buf);
}

void sb_json_int_array(strbuf *b, const int32_t *v, size_t n) {
    sb_reserve(b, n * 7 + 2);
    sb_putc(b, '[');
    for (size_t i = 0; i < n; i++) {
        char num[16];
        int k = snprintf(num, sizeof num, i ? ",%d" : "%d", (int)v[i]);
        sb_append(b, num, (size_t)k);
    }
    sb_putc(b, ']');
}

void sb_json_float(strbuf *b, float v) {
    if (!isfinite(v)) {
        sb_puts(b, "null");
        return;
    }
    if (v == 0) {
        sb_putc(b, '0');
        return;
    }
    char buf[32];
    for (int prec = 1; prec <= 9; prec++) { /* 9 digits always identify a float */
        snprintf(buf, sizeof buf, "%.*g", prec, (double)v);
        if (strtof(buf, NULL) == v) break;
    }
    sb_puts(b, buf);
}

void sb_clear(strbuf *b) {
    b->len = 0;
    if (b->data) b->data[0] = 0;
}

void sb_free(strbuf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
