/* A growable byte buffer, always NUL-terminated. */
#ifndef GRPO_STRBUF_H
#define GRPO_STRBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *data;
    size_t len, cap;
} strbuf;

/* Room for extra more bytes; exit 70 when memory runs out. */
void sb_reserve(strbuf *b, size_t extra);
void sb_append(strbuf *b, const void *data, size_t len);
/* The same, returning false (the buffer unchanged) when memory runs out, for
 * callers that can name what was being read. */
bool sb_try_reserve(strbuf *b, size_t extra);
bool sb_try_append(strbuf *b, const void *data, size_t len);
void sb_puts(strbuf *b, const char *s);
void sb_putc(strbuf *b, char c);
void sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s as a JSON string literal (quotes included, escapes as needed). */
void sb_json_string(strbuf *b, const char *s, size_t len);
/* The one way numbers are written in JSON: a double in the shortest form that
 * reads back to the same value, whole numbers below 1e17 as integers (100,
 * not 1e+02), -0 as 0, and NaN and infinities (which JSON lacks) as null. */
void sb_json_number(strbuf *b, double v);
/* A double as Python's json.dumps writes a float (1e-05, 100000.0, 0.02), for
 * the HF and PEFT config files Python reads: the shortest digits that read
 * back (as a float when as_float), positional for exponents -4 .. 15 as
 * repr() does; NaN and infinities as null. */
void sb_json_pyfloat(strbuf *b, double v, bool as_float);
/* Appends [a,b,c] for n token ids. */
void sb_json_int_array(strbuf *b, const int32_t *v, size_t n);
/* The same for a float: the shortest text that reads back to the same float. */
void sb_json_float(strbuf *b, float v);
void sb_clear(strbuf *b);
void sb_free(strbuf *b);

#endif
