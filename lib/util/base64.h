/* Base64 (RFC 4648's standard alphabet, with '=' padding), for binary data
 * carried in JSON strings (a rollout record's routing, formats/rollout.md). */
#ifndef GRPO_BASE64_H
#define GRPO_BASE64_H

#include <stddef.h>
#include <stdint.h>

#include "strbuf.h"

/* Appends the encoding of p[0..n) to out: 4 characters per 3 bytes, the
 * last group padded. */
void base64_encode(strbuf *out, const uint8_t *p, size_t n);

/* Decodes s[0..len) into out (xmalloc'd, *n bytes; the caller frees it).
 * Returns -1 when it is base64, else the index of the first character that
 * is not in its place (outside the alphabet, padding before the end,
 * nonzero bits under the padding), or len when len is not a multiple of 4;
 * out is then NULL. */
long base64_decode(const char *s, size_t len, uint8_t **out, size_t *n);

#endif
