/* GGUF metadata (the key/value section) built in memory for the writer.
 *
 * Each call appends one complete KV in the file's encoding (gguf.h:
 * string key, u32 value type, value; little-endian) and counts it, so the
 * header can be written as count + bytes once everything is known. Keys are
 * not checked for duplicates: the writer owns the key set. */
#ifndef GRPO_GGUF_META_H
#define GRPO_GGUF_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"
#include "../util/strbuf.h"

typedef struct {
    strbuf b;   /* the encoded KVs, in order */
    uint64_t n; /* how many */
} gguf_meta;

void gmeta_u32(gguf_meta *m, const char *key, uint32_t v);
void gmeta_f32(gguf_meta *m, const char *key, float v);
void gmeta_bool(gguf_meta *m, const char *key, bool v);
/* s need not be NUL-terminated. */
void gmeta_str(gguf_meta *m, const char *key, const char *s, size_t len);
/* An array of n strings: begin, then exactly n gmeta_arr_str_item calls. */
void gmeta_arr_str_begin(gguf_meta *m, const char *key, uint64_t n);
void gmeta_arr_str_item(gguf_meta *m, const char *s, size_t len);
void gmeta_arr_i32(gguf_meta *m, const char *key, const int32_t *v, size_t n);
/* A value of an opened GGUF file, copied byte for byte (any type, nested
 * arrays included) under key. */
void gmeta_copy(gguf_meta *m, const char *key, const gguf_value *v);
void gmeta_free(gguf_meta *m);

/* Little-endian integers appended to a buffer (the header uses them too). */
void gmeta_le32(strbuf *b, uint32_t v);
void gmeta_le64(strbuf *b, uint64_t v);
/* u64 length + bytes, GGUF's string encoding. */
void gmeta_gstr(strbuf *b, const char *s, size_t len);

#endif
