/* A validating JSON scanner that does not build a tree.
 *
 * Stages own a handful of top-level fields and pass every other field
 * through byte for byte, so a record is kept as its original text cut into
 * (key, raw value) slices. Only the fields a stage reads are ever decoded.
 * That keeps numbers like 1e400 or 123456789012345678901 exactly as written,
 * and is several times faster than building a cJSON tree for every line. */
#ifndef GRPO_JSON_SCAN_H
#define GRPO_JSON_SCAN_H

#include <stdbool.h>
#include <stddef.h>

#include "../util/strbuf.h"

/* JSON's white space. Not strchr(" \t\r\n", c), which also matches c == 0
 * (the string's terminator) and so takes a NUL byte for a space. */
static inline bool json_is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

enum { JSON_MAX_DEPTH = 512 };

typedef struct {
    size_t column;   /* 1-based byte column of the fault */
    const char *msg; /* static text */
} json_scan_error;

/* Validates one JSON value starting at s[i] (after optional white space).
 * Returns the index just past it, or 0 with *err filled. */
size_t json_scan_value(const char *s, size_t len, size_t i, json_scan_error *err);

/* Decodes the body of a JSON string literal (between the quotes, escapes
 * still in it) as UTF-8 into out (appended). The text must have passed the
 * scanner. Lone surrogate escapes become U+FFFD. */
void json_decode_string(const char *body, size_t len, strbuf *out);

/* The kind of a raw JSON value, from its first byte. */
typedef enum { JSON_NULL, JSON_FALSE, JSON_TRUE, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_kind;
json_kind json_kind_of(const char *raw);
const char *json_kind_name(json_kind k);

#endif
