#include "gguf_meta.h"

#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "GGUF is little-endian; this writer assumes a little-endian host"
#endif

void gmeta_le32(strbuf *b, uint32_t v) {
    unsigned char x[4];
    for (int i = 0; i < 4; i++) x[i] = (unsigned char)(v >> (8 * i));
    sb_append(b, x, 4);
}

void gmeta_le64(strbuf *b, uint64_t v) {
    unsigned char x[8];
    for (int i = 0; i < 8; i++) x[i] = (unsigned char)(v >> (8 * i));
    sb_append(b, x, 8);
}

void gmeta_gstr(strbuf *b, const char *s, size_t len) {
    gmeta_le64(b, len);
    sb_append(b, s, len);
}

static void key_type(gguf_meta *m, const char *key, gguf_type t) {
    gmeta_gstr(&m->b, key, strlen(key));
    gmeta_le32(&m->b, (uint32_t)t);
    m->n++;
}

void gmeta_u32(gguf_meta *m, const char *key, uint32_t v) {
    key_type(m, key, GGUF_U32);
    gmeta_le32(&m->b, v);
}

void gmeta_f32(gguf_meta *m, const char *key, float v) {
    uint32_t x;
    memcpy(&x, &v, sizeof x);
    key_type(m, key, GGUF_F32);
    gmeta_le32(&m->b, x);
}

void gmeta_bool(gguf_meta *m, const char *key, bool v) {
    key_type(m, key, GGUF_BOOL);
    sb_putc(&m->b, v ? 1 : 0);
}

void gmeta_str(gguf_meta *m, const char *key, const char *s, size_t len) {
    key_type(m, key, GGUF_STRING);
    gmeta_gstr(&m->b, s, len);
}

void gmeta_arr_str_begin(gguf_meta *m, const char *key, uint64_t n) {
    key_type(m, key, GGUF_ARRAY);
    gmeta_le32(&m->b, GGUF_STRING);
    gmeta_le64(&m->b, n);
}

void gmeta_arr_str_item(gguf_meta *m, const char *s, size_t len) { gmeta_gstr(&m->b, s, len); }

void gmeta_arr_i32(gguf_meta *m, const char *key, const int32_t *v, size_t n) {
    key_type(m, key, GGUF_ARRAY);
    gmeta_le32(&m->b, GGUF_I32);
    gmeta_le64(&m->b, n);
    for (size_t i = 0; i < n; i++) gmeta_le32(&m->b, (uint32_t)v[i]);
}

void gmeta_copy(gguf_meta *m, const char *key, const gguf_value *v) {
    key_type(m, key, v->type);
    if (v->type != GGUF_ARRAY) {
        sb_append(&m->b, v->data, gguf_value_bytes(v->type, v->data));
        return;
    }
    /* an array's data points past its header (element type, count) */
    const unsigned char *hdr = v->data - 12;
    sb_append(&m->b, hdr, gguf_value_bytes(GGUF_ARRAY, hdr));
}

void gmeta_free(gguf_meta *m) {
    sb_free(&m->b);
    m->n = 0;
}
