/* GGUF reader and dequantizers: small files built byte by byte (metadata of
 * every type, nested arrays, F32/F16 tensors), one file per malformed case,
 * every truncation of a valid file, and each quant type's blocks against
 * values worked out here in the shape of ggml's reference loops.
 *
 * Dump mode for tests/ref/check_gguf.py (gguf-py as the independent reader):
 *   GRPO_GGUF_DUMP=FILE GRPO_GGUF_DUMP_OUT=DIR [GRPO_GGUF_DUMP_TENSORS=a,b,c]
 * writes DIR/meta.json (model metadata, and each dumped tensor's type and
 * dims) and DIR/NAME.f32 (raw little-endian float32) for the listed tensors,
 * every tensor when no list is given. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "helpers.h"
#include "formats/gguf.h"
#include "formats/quant.h"
#include "util/half.h"

/* ---- helpers ------------------------------------------------------------- */

static void write_bytes(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f || (len && fwrite(data, 1, len, f) != len) || fclose(f) != 0) {
        printf("# cannot write %s\n", path);
        exit(1);
    }
}

/* A growing byte buffer that GGUF files are built in. */
typedef struct {
    unsigned char *p;
    size_t len, cap;
} bb;

static void put(bb *b, const void *d, size_t n) {
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p) exit(1);
    }
    memcpy(b->p + b->len, d, n);
    b->len += n;
}
static void put_le(bb *b, uint64_t v, int n) {
    for (int i = 0; i < n; i++) {
        unsigned char c = (unsigned char)(v >> (8 * i));
        put(b, &c, 1);
    }
}
static void put_u32(bb *b, uint32_t v) { put_le(b, v, 4); }
static void put_u64(bb *b, uint64_t v) { put_le(b, v, 8); }
static void put_f32(bb *b, float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    put_u32(b, x);
}
static void put_str(bb *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void put_key(bb *b, const char *key, uint32_t type) {
    put_str(b, key);
    put_u32(b, type);
}
static void put_header(bb *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    put(b, "GGUF", 4);
    put_u32(b, version);
    put_u64(b, n_tensors);
    put_u64(b, n_kv);
}
static void put_tensor_info(bb *b, const char *name, uint32_t n_dims, const uint64_t *dims,
                            uint32_t type, uint64_t offset) {
    put_str(b, name);
    put_u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims; i++) put_u64(b, dims[i]);
    put_u32(b, type);
    put_u64(b, offset);
}
static void pad_to(bb *b, size_t align) {
    while (b->len % align) put_le(b, 0, 1);
}

/* The valid file: 19 KVs of every type, 2 tensors (F32 4x3, F16 8), the F16
 * data last so that any cut of the file lands in something checked. */
enum { VALID_KV = 19 };
static const char *const TOKENS[] = {"<|im_start|>", "hello", "", "w\xc3\xb6rld"};

static float valid_f32(int i) { return (float)(i - 5) * 0.375f + 0.0625f; }
static float valid_f16(int i) { return f16_to_f32(f32_to_f16((float)i * -1.25f + 3.5f)); }

static void build_valid(bb *b, uint32_t version) {
    put_header(b, version, 2, VALID_KV);
    put_key(b, "general.architecture", GGUF_STRING), put_str(b, "llama");
    put_key(b, "t.u8", GGUF_U8), put_le(b, 200, 1);
    put_key(b, "t.i8", GGUF_I8), put_le(b, (uint8_t)-100, 1);
    put_key(b, "t.u16", GGUF_U16), put_le(b, 60000, 2);
    put_key(b, "t.i16", GGUF_I16), put_le(b, (uint16_t)-30000, 2);
    put_key(b, "llama.block_count", GGUF_U32), put_u32(b, 30);
    put_key(b, "t.i32", GGUF_I32), put_u32(b, (uint32_t)-7);
    put_key(b, "t.f32", GGUF_F32), put_f32(b, 1e-5f);
    put_key(b, "t.bool", GGUF_BOOL), put_le(b, 1, 1);
    put_key(b, "t.u64", GGUF_U64), put_u64(b, 0xFFFFFFFFFFull);
    put_key(b, "t.i64", GGUF_I64), put_u64(b, (uint64_t)-5000000000ll);
    put_key(b, "t.f64", GGUF_F64);
    double d = 0.1;
    put(b, &d, 8);
    put_key(b, "tokenizer.ggml.tokens", GGUF_ARRAY), put_u32(b, GGUF_STRING), put_u64(b, 4);
    for (int i = 0; i < 4; i++) put_str(b, TOKENS[i]);
    put_key(b, "tokenizer.ggml.token_type", GGUF_ARRAY), put_u32(b, GGUF_I32), put_u64(b, 4);
    for (int i = 0; i < 4; i++) put_u32(b, (uint32_t)(i == 0 ? 3 : 1));
    put_key(b, "tokenizer.ggml.scores", GGUF_ARRAY), put_u32(b, GGUF_F32), put_u64(b, 4);
    for (int i = 0; i < 4; i++) put_f32(b, -(float)i * 0.5f);
    /* [[1, 2, 3], []] of u8, then [["a", "bc"]] of strings */
    put_key(b, "t.nested", GGUF_ARRAY), put_u32(b, GGUF_ARRAY), put_u64(b, 2);
    put_u32(b, GGUF_U8), put_u64(b, 3), put_le(b, 0x030201, 3);
    put_u32(b, GGUF_U8), put_u64(b, 0);
    put_key(b, "t.nested_str", GGUF_ARRAY), put_u32(b, GGUF_ARRAY), put_u64(b, 1);
    put_u32(b, GGUF_STRING), put_u64(b, 2), put_str(b, "a"), put_str(b, "bc");
    put_key(b, "t.empty", GGUF_ARRAY), put_u32(b, GGUF_F64), put_u64(b, 0);
    put_key(b, "general.alignment", GGUF_U32), put_u32(b, 64);
    uint64_t d1[] = {4, 3}, d2[] = {8};
    put_tensor_info(b, "w.f32", 2, d1, GGML_TYPE_F32, 0);
    put_tensor_info(b, "w.f16", 1, d2, GGML_TYPE_F16, 64);
    pad_to(b, 64);
    for (int i = 0; i < 12; i++) put_f32(b, valid_f32(i));
    pad_to(b, 64);
    for (int i = 0; i < 8; i++) put_le(b, f32_to_f16((float)i * -1.25f + 3.5f), 2);
}

static int str_is(gguf_str s, const char *want) {
    return s.len == strlen(want) && !memcmp(s.ptr, want, s.len);
}

/* Opens bytes from a file in dir; expects failure with code and a one-line
 * message that starts with the path and holds word. */
static int bytes_fail(const char *dir, const void *p, size_t n, int code, const char *word) {
    char path[512];
    snprintf(path, sizeof path, "%s/case.gguf", dir);
    write_bytes(path, p, n);
    gguf_file f;
    gerr e = {0};
    int rc = gguf_open(&f, path, &e);
    int ok = rc == code && e.code == code && strstr(e.msg, word) && !strncmp(e.msg, path, strlen(path)) &&
             !strchr(e.msg, '\n');
    if (!ok) printf("#   rc %d (want %d), message: %s (want '%s')\n", rc, code, e.msg, word);
    else if (getenv("GRPO_TEST_VERBOSE")) printf("#   %d %s\n", rc, e.msg);
    if (!rc) gguf_close(&f);
    return ok;
}

static int bb_fails(const char *dir, bb *b, const char *word) {
    int ok = bytes_fail(dir, b->p, b->len, EX_DATAERR, word);
    free(b->p);
    *b = (bb){0};
    return ok;
}

/* ---- parsing a valid file -------------------------------------------------- */

static void test_valid(const char *dir) {
    bb b = {0};
    build_valid(&b, 3);
    char path[512];
    snprintf(path, sizeof path, "%s/valid.gguf", dir);
    write_bytes(path, b.p, b.len);
    gguf_file f;
    gerr e = {0};
    TEST("a valid v3 file opens");
    int rc = gguf_open(&f, path, &e);
    CHECK(rc == 0);
    if (rc) {
        printf("#   %s\n", e.msg);
        free(b.p);
        return;
    }
    CHECK_EQ_INT(f.version, 3);
    CHECK_EQ_INT(f.n_kv, VALID_KV);
    CHECK_EQ_INT(f.n_tensors, 2);
    CHECK_EQ_INT(f.alignment, 64);
    CHECK_EQ_INT(f.data_offset % 64, 0);

    TEST("scalar metadata of every type");
    uint64_t u;
    int64_t s;
    float x;
    double dd;
    bool flag;
    gguf_str str;
    CHECK(gguf_get_string(&f, "general.architecture", &str, &e) == 0 && str_is(str, "llama"));
    CHECK(gguf_get_u64(&f, "t.u8", &u, &e) == 0 && u == 200);
    CHECK(gguf_get_i64(&f, "t.i8", &s, &e) == 0 && s == -100);
    CHECK(gguf_get_u64(&f, "t.u16", &u, &e) == 0 && u == 60000);
    CHECK(gguf_get_i64(&f, "t.i16", &s, &e) == 0 && s == -30000);
    uint32_t u32;
    CHECK(gguf_get_u32(&f, "llama.block_count", &u32, &e) == 0 && u32 == 30);
    CHECK(gguf_get_i64(&f, "t.i32", &s, &e) == 0 && s == -7);
    CHECK(gguf_get_f32(&f, "t.f32", &x, &e) == 0 && x == 1e-5f);
    CHECK(gguf_get_bool(&f, "t.bool", &flag, &e) == 0 && flag);
    CHECK(gguf_get_u64(&f, "t.u64", &u, &e) == 0 && u == 0xFFFFFFFFFFull);
    CHECK(gguf_get_i64(&f, "t.i64", &s, &e) == 0 && s == -5000000000ll);
    CHECK(gguf_value_f64(&gguf_find_kv(&f, "t.f64")->v, &dd) && dd == 0.1);

    TEST("lossless coercions only, with clear errors");
    CHECK(gguf_get_f32(&f, "llama.block_count", &x, &e) == 0 && x == 30.0f); /* int -> float, exact */
    CHECK(gguf_get_i64(&f, "t.u16", &s, &e) == 0 && s == 60000);
    CHECK(gguf_get_u32(&f, "general.architecture", &u32, &e) == EX_DATAERR);
    CHECK(strstr(e.msg, "key \"general.architecture\": expected an integer, got string") != NULL);
    CHECK(!strncmp(e.msg, path, strlen(path)));
    CHECK(gguf_get_u32(&f, "t.i32", &u32, &e) == EX_DATAERR && strstr(e.msg, "-7"));
    CHECK(gguf_get_u32(&f, "t.u64", &u32, &e) == EX_DATAERR && strstr(e.msg, "32 bits"));
    CHECK(gguf_get_f32(&f, "t.f64", &x, &e) == EX_DATAERR); /* 0.1 is not a float */
    CHECK(gguf_get_f32(&f, "t.i64", &x, &e) == EX_DATAERR); /* beyond 2^24 */
    CHECK(gguf_get_bool(&f, "t.u8", &flag, &e) == EX_DATAERR && strstr(e.msg, "expected a bool, got u8"));
    CHECK(gguf_get_string(&f, "tokenizer.ggml.tokens", &str, &e) == EX_DATAERR &&
          strstr(e.msg, "got an array of string"));
    CHECK(gguf_get_u32(&f, "llama.missing", &u32, &e) == EX_DATAERR && strstr(e.msg, "missing"));
    CHECK(gguf_find_kv(&f, "llama.missing") == NULL);

    TEST("arrays: strings, i32, f32, nested, empty");
    gguf_value arr;
    CHECK(gguf_get_array(&f, "tokenizer.ggml.tokens", GGUF_STRING, &arr, &e) == 0);
    CHECK_EQ_INT(arr.count, 4);
    for (int i = 0; i < 4; i++) CHECK(str_is(gguf_array_str(&arr, (uint64_t)i), TOKENS[i]));
    CHECK(gguf_get_array(&f, "tokenizer.ggml.token_type", GGUF_I32, &arr, &e) == 0);
    CHECK(arr.count == 4 && gguf_array_int(&arr, 0) == 3 && gguf_array_int(&arr, 3) == 1);
    CHECK(gguf_get_array(&f, "tokenizer.ggml.scores", GGUF_F32, &arr, &e) == 0);
    CHECK(arr.count == 4 && gguf_array_float(&arr, 3) == -1.5);
    CHECK(gguf_get_array(&f, "tokenizer.ggml.scores", GGUF_STRING, &arr, &e) == EX_DATAERR &&
          strstr(e.msg, "expected an array of string, got an array of f32"));
    CHECK(gguf_get_array(&f, "t.nested", GGUF_ARRAY, &arr, &e) == 0 && arr.count == 2);
    gguf_value in0 = gguf_array_at(&arr, 0), in1 = gguf_array_at(&arr, 1);
    CHECK(in0.type == GGUF_ARRAY && in0.elem_type == GGUF_U8 && in0.count == 3);
    CHECK(gguf_array_int(&in0, 0) == 1 && gguf_array_int(&in0, 2) == 3);
    CHECK(in1.type == GGUF_ARRAY && in1.count == 0);
    CHECK(gguf_get_array(&f, "t.nested_str", GGUF_ARRAY, &arr, &e) == 0 && arr.count == 1);
    gguf_value ins = gguf_array_at(&arr, 0);
    CHECK(ins.elem_type == GGUF_STRING && ins.count == 2);
    CHECK(str_is(gguf_array_str(&ins, 0), "a") && str_is(gguf_array_str(&ins, 1), "bc"));
    CHECK(gguf_get_array(&f, "t.empty", GGUF_NTYPES, &arr, &e) == 0 && arr.count == 0);
    CHECK(gguf_get_array(&f, "t.u8", GGUF_NTYPES, &arr, &e) == EX_DATAERR && strstr(e.msg, "expected an array"));

    TEST("tensors: lookup, shape, F32 and F16 values");
    const gguf_tensor *t = gguf_find_tensor(&f, "w.f32");
    CHECK(t && t->n_dims == 2 && t->dims[0] == 4 && t->dims[1] == 3 && t->numel == 12);
    CHECK(t && t->nbytes == 48 && t->type == GGML_TYPE_F32);
    float out[12];
    CHECK(t && gguf_tensor_to_f32(&f, t, out, &e) == 0);
    for (int i = 0; t && i < 12; i++) CHECK(out[i] == valid_f32(i));
    t = gguf_find_tensor(&f, "w.f16");
    CHECK(t && t->numel == 8 && t->nbytes == 16 && t->offset == 64);
    CHECK(t && (const unsigned char *)t->data + t->nbytes == f.bytes + f.len);
    CHECK(t && gguf_tensor_to_f32(&f, t, out, &e) == 0);
    for (int i = 0; t && i < 8; i++) CHECK(out[i] == valid_f16(i));
    CHECK(gguf_find_tensor(&f, "w.none") == NULL);
    gguf_close(&f);

    TEST("version 2 is read too; general.alignment defaults to 32");
    free(b.p);
    b = (bb){0};
    build_valid(&b, 2);
    rc = gguf_open_memory(&f, b.p, b.len, "mem", &e);
    CHECK(rc == 0 && f.version == 2);
    if (!rc) gguf_close(&f);
    free(b.p);
    b = (bb){0};
    put_header(&b, 3, 1, 0);
    uint64_t dims[] = {2};
    put_tensor_info(&b, "x", 1, dims, GGML_TYPE_F32, 0);
    pad_to(&b, 32);
    put_f32(&b, 1.0f), put_f32(&b, -2.0f);
    rc = gguf_open_memory(&f, b.p, b.len, "mem", &e);
    CHECK(rc == 0);
    if (!rc) {
        CHECK(f.alignment == 32 && f.data_offset == 64);
        gguf_close(&f);
    }
    free(b.p);
}

/* ---- malformed files ------------------------------------------------------- */

static void test_malformed(const char *dir) {
    bb b = {0};
    build_valid(&b, 3);
    size_t full = b.len;

    TEST("every truncation of a valid file is a clean error");
    int all_ok = 1;
    for (size_t n = 0; n < full && all_ok; n++) {
        /* A heap copy of exactly n bytes, so ASan sees any read past it. */
        unsigned char *copy = malloc(n ? n : 1);
        memcpy(copy, b.p, n);
        gguf_file f;
        gerr e = {0};
        int rc = gguf_open_memory(&f, copy, n, "cut.gguf", &e);
        if (rc != EX_DATAERR || strncmp(e.msg, "cut.gguf: ", 10) || strchr(e.msg, '\n') ||
            !(strstr(e.msg, "truncated") || strstr(e.msg, "past the end") || strstr(e.msg, "count"))) {
            printf("#   cut at %zu: rc %d: %s\n", n, rc, e.msg);
            all_ok = 0;
        }
        if (!rc) gguf_close(&f);
        free(copy);
    }
    CHECK(all_ok);
    CHECK(bytes_fail(dir, b.p, 0, EX_DATAERR, "truncated"));
    CHECK(bytes_fail(dir, b.p, 30, EX_DATAERR, "truncated"));

    TEST("bad magic, version 1, unknown versions");
    b.p[0] = 'X';
    CHECK(bytes_fail(dir, b.p, full, EX_DATAERR, "magic"));
    b.p[0] = 'G';
    b.p[4] = 1;
    CHECK(bytes_fail(dir, b.p, full, EX_DATAERR, "version 1 is not supported"));
    b.p[4] = 4;
    CHECK(bytes_fail(dir, b.p, full, EX_DATAERR, "version 4"));
    b.p[4] = 0, b.p[7] = 3;
    CHECK(bytes_fail(dir, b.p, full, EX_DATAERR, "big-endian"));
    free(b.p);
    b = (bb){0};

    TEST("missing file is EX_NOINPUT");
    char path[512];
    snprintf(path, sizeof path, "%s/none.gguf", dir);
    CHECK(bytes_fail(dir, "", 0, EX_DATAERR, "truncated"));
    gguf_file f;
    gerr e = {0};
    CHECK(gguf_open(&f, path, &e) == EX_NOINPUT && strstr(e.msg, "none.gguf"));

    TEST("huge lengths and counts are rejected before allocating");
    put_header(&b, 3, 0, 1), put_u64(&b, 1ull << 62), put(&b, "key", 3), put_u64(&b, 0), put_u64(&b, 0);
    CHECK(bb_fails(dir, &b, "string length"));
    put_header(&b, 3, 0, 1), put_key(&b, "a", GGUF_ARRAY), put_u32(&b, GGUF_U32), put_u64(&b, 1ull << 61);
    put_u64(&b, 0);
    CHECK(bb_fails(dir, &b, "array count"));
    put_header(&b, 3, 0, 1), put_key(&b, "a", GGUF_ARRAY), put_u32(&b, GGUF_STRING), put_u64(&b, 3);
    put_u64(&b, 0), put_u64(&b, 0);
    CHECK(bb_fails(dir, &b, "array count"));
    put_header(&b, 3, 0, 1), put_key(&b, "s", GGUF_STRING), put_u64(&b, UINT64_MAX);
    CHECK(bb_fails(dir, &b, "string length"));
    put_header(&b, 3, 0, 1ull << 60), put_u64(&b, 0);
    CHECK(bb_fails(dir, &b, "metadata count"));
    put_header(&b, 3, UINT64_MAX, 0), put_u64(&b, 0);
    CHECK(bb_fails(dir, &b, "tensor count"));

    TEST("unknown value types and deep nesting");
    put_header(&b, 3, 0, 1), put_key(&b, "k", 13), put_u64(&b, 0);
    CHECK(bb_fails(dir, &b, "unknown value type 13"));
    put_header(&b, 3, 0, 1), put_key(&b, "k", GGUF_ARRAY), put_u32(&b, 99), put_u64(&b, 0);
    CHECK(bb_fails(dir, &b, "unknown array element value type 99"));
    put_header(&b, 3, 0, 1), put_key(&b, "deep", GGUF_ARRAY);
    for (int i = 0; i < GGUF_MAX_DEPTH + 1; i++) put_u32(&b, GGUF_ARRAY), put_u64(&b, 1);
    put_u32(&b, GGUF_U8), put_u64(&b, 0);
    CHECK(bb_fails(dir, &b, "nested deeper"));
    put_header(&b, 3, 0, 1), put_key(&b, "deep", GGUF_ARRAY);
    for (int i = 0; i < GGUF_MAX_DEPTH - 1; i++) put_u32(&b, GGUF_ARRAY), put_u64(&b, 1);
    put_u32(&b, GGUF_U8), put_u64(&b, 0);
    int rc = gguf_open_memory(&f, b.p, b.len, "mem", &e); /* the deepest allowed */
    CHECK(rc == 0);
    if (!rc) gguf_close(&f);
    free(b.p);
    b = (bb){0};

    TEST("keys and names: NUL bytes, duplicates");
    put_header(&b, 3, 0, 1), put_u64(&b, 3), put(&b, "a\0b", 3), put_u32(&b, GGUF_U8), put_le(&b, 0, 1);
    CHECK(bb_fails(dir, &b, "NUL"));
    put_header(&b, 3, 0, 2), put_key(&b, "k", GGUF_U8), put_le(&b, 0, 1), put_key(&b, "k", GGUF_U8);
    put_le(&b, 0, 1);
    CHECK(bb_fails(dir, &b, "duplicate metadata key \"k\""));
    uint64_t d4[] = {4};
    put_header(&b, 3, 2, 0), put_tensor_info(&b, "t", 1, d4, 0, 0), put_tensor_info(&b, "t", 1, d4, 0, 32);
    pad_to(&b, 32), put(&b, (unsigned char[48]){0}, 48);
    CHECK(bb_fails(dir, &b, "duplicate tensor name 't'"));

    TEST("tensor infos: n_dims, types, block multiples, alignment, data range");
    uint64_t d5[] = {1, 1, 1, 1, 1};
    put_header(&b, 3, 1, 0), put_tensor_info(&b, "t", 5, d5, 0, 0), pad_to(&b, 32), put_u64(&b, 0);
    CHECK(bb_fails(dir, &b, "n_dims 5"));
    put_header(&b, 3, 1, 0), put_tensor_info(&b, "t", 1, d4, 4, 0), pad_to(&b, 32), put_u64(&b, 0);
    CHECK(bb_fails(dir, &b, "unknown tensor type 4"));
    uint64_t d31[] = {31};
    put_header(&b, 3, 1, 0), put_tensor_info(&b, "t", 1, d31, GGML_TYPE_Q8_0, 0), pad_to(&b, 32);
    put(&b, (unsigned char[64]){0}, 64);
    CHECK(bb_fails(dir, &b, "block size 32"));
    put_header(&b, 3, 1, 0), put_tensor_info(&b, "t", 1, d4, 0, 4), pad_to(&b, 32);
    put(&b, (unsigned char[64]){0}, 64);
    CHECK(bb_fails(dir, &b, "misaligned"));
    put_header(&b, 3, 1, 0), put_tensor_info(&b, "t", 1, d4, 0, 1024), pad_to(&b, 32), put_u64(&b, 0);
    CHECK(bb_fails(dir, &b, "past the end"));
    put_header(&b, 3, 1, 0), put_tensor_info(&b, "t", 1, d4, 0, UINT64_MAX - 31), pad_to(&b, 32);
    CHECK(bb_fails(dir, &b, "past the end"));
    uint64_t dbig[] = {1ull << 32, 1ull << 32};
    put_header(&b, 3, 1, 0), put_tensor_info(&b, "t", 2, dbig, 0, 0), pad_to(&b, 32);
    CHECK(bb_fails(dir, &b, "overflow"));
    put_header(&b, 3, 0, 1), put_key(&b, "general.alignment", GGUF_U32), put_u32(&b, 3);
    CHECK(bb_fails(dir, &b, "alignment 3 is not a power of two"));
    put_header(&b, 3, 0, 1), put_key(&b, "general.alignment", GGUF_STRING), put_str(&b, "32");
    CHECK(bb_fails(dir, &b, "alignment"));

    TEST("a type we cannot dequantize opens, and converting names it");
    uint64_t d256[] = {256};
    put_header(&b, 3, 1, 0), put_tensor_info(&b, "blk.0.q", 1, d256, GGML_TYPE_Q2_K, 0), pad_to(&b, 32);
    put(&b, (unsigned char[84]){0}, 84);
    rc = gguf_open_memory(&f, b.p, b.len, "q2.gguf", &e);
    CHECK(rc == 0);
    if (!rc) {
        float out[256];
        CHECK(gguf_tensor_to_f32(&f, &f.tensors[0], out, &e) == EX_DATAERR);
        CHECK(strstr(e.msg, "q2.gguf: tensor 'blk.0.q': unsupported tensor type Q2_K (10)") != NULL);
        gguf_close(&f);
    }
    free(b.p);
}

/* ---- dequantization -------------------------------------------------------- */

static void put_half(unsigned char *p, float v) {
    uint16_t h = f32_to_f16(v);
    memcpy(p, &h, 2);
}
static float get_half(const unsigned char *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return f16_to_f32(h);
}

/* Random blocks with their f16 scales set to finite, non-zero values. */
static void random_blocks(unsigned char *p, uint32_t type, int nblk, uint64_t seed) {
    size_t bs = quant_type_size(type);
    fill_random_bytes(p, bs * (size_t)nblk, seed);
    for (int k = 0; k < nblk; k++) {
        unsigned char *b = p + bs * (size_t)k;
        float s1 = 0.0123f * (float)(k + 1), s2 = -0.5f + 0.25f * (float)k;
        switch (type) {
        case GGML_TYPE_Q8_0: case GGML_TYPE_Q4_0: case GGML_TYPE_Q5_0: put_half(b, s1); break;
        case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_1: case GGML_TYPE_Q4_K:
            put_half(b, s1), put_half(b + 2, s2 == 0 ? 0.1f : s2);
            break;
        case GGML_TYPE_Q6_K: put_half(b + 208, s1); break;
        default: break;
        }
    }
}

/* The expected values, written after ggml's dequantize_row_* loops. */
static void expect_block(uint32_t type, const unsigned char *b, float *y) {
    switch (type) {
    case GGML_TYPE_Q8_0:
        for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)b[2 + j] * get_half(b);
        break;
    case GGML_TYPE_Q4_0:
    case GGML_TYPE_Q4_1: {
        int m1 = type == GGML_TYPE_Q4_1;
        float d = get_half(b), m = m1 ? get_half(b + 2) : 0;
        const unsigned char *qs = b + (m1 ? 4 : 2);
        for (int j = 0; j < 16; j++) {
            int x0 = qs[j] & 0x0F, x1 = qs[j] >> 4;
            if (m1) {
                float a = (float)x0 * d, c = (float)x1 * d;
                y[j] = a + m, y[j + 16] = c + m;
            } else {
                y[j] = (float)(x0 - 8) * d, y[j + 16] = (float)(x1 - 8) * d;
            }
        }
        break;
    }
    case GGML_TYPE_Q5_0:
    case GGML_TYPE_Q5_1: {
        int m1 = type == GGML_TYPE_Q5_1;
        float d = get_half(b), m = m1 ? get_half(b + 2) : 0;
        const unsigned char *p = b + (m1 ? 4 : 2);
        uint32_t qh;
        memcpy(&qh, p, 4);
        const unsigned char *qs = p + 4;
        for (int j = 0; j < 16; j++) {
            int xh0 = ((qh >> j) << 4) & 0x10, xh1 = (qh >> (j + 12)) & 0x10;
            int x0 = (qs[j] & 0x0F) | xh0, x1 = (qs[j] >> 4) | xh1;
            if (m1) {
                float a = (float)x0 * d, c = (float)x1 * d;
                y[j] = a + m, y[j + 16] = c + m;
            } else {
                y[j] = (float)(x0 - 16) * d, y[j + 16] = (float)(x1 - 16) * d;
            }
        }
        break;
    }
    case GGML_TYPE_Q4_K: {
        float d = get_half(b), dmin = get_half(b + 2);
        const unsigned char *sc = b + 4, *q = b + 16;
        int is = 0;
        for (int j = 0; j < QK_K; j += 64) {
            int s[2], mn[2];
            for (int h = 0; h < 2; h++) {
                int k = is + h;
                if (k < 4) s[h] = sc[k] & 63, mn[h] = sc[k + 4] & 63;
                else s[h] = (sc[k + 4] & 0xF) | ((sc[k - 4] >> 6) << 4), mn[h] = (sc[k + 4] >> 4) | ((sc[k] >> 6) << 4);
            }
            float d1 = d * (float)s[0], m1 = dmin * (float)mn[0], d2 = d * (float)s[1], m2 = dmin * (float)mn[1];
            for (int l = 0; l < 32; l++) {
                float a = d1 * (float)(q[l] & 0xF), c = d2 * (float)(q[l] >> 4);
                y[j + l] = a - m1, y[j + 32 + l] = c - m2;
            }
            q += 32, is += 2;
        }
        break;
    }
    case GGML_TYPE_Q6_K: {
        const unsigned char *ql = b, *qh = b + 128;
        const int8_t *sc = (const int8_t *)(b + 192);
        float d = get_half(b + 208);
        for (int n = 0; n < QK_K; n += 128) {
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                int q1 = (int)((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                int q2 = (int)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                int q3 = (int)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                int q4 = (int)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[n + l] = d * (float)sc[is] * (float)q1;
                y[n + l + 32] = d * (float)sc[is + 2] * (float)q2;
                y[n + l + 64] = d * (float)sc[is + 4] * (float)q3;
                y[n + l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
            ql += 64, qh += 32, sc += 8;
        }
        break;
    }
    default:
        break;
    }
}

static void test_quant_table(void) {
    TEST("type table: names, block sizes, row bytes");
    CHECK_EQ_STR(quant_type_name(GGML_TYPE_Q4_K), "Q4_K");
    CHECK_EQ_STR(quant_type_name(GGML_TYPE_BF16), "BF16");
    CHECK(quant_type_name(4) == NULL && quant_type_name(1000) == NULL);
    CHECK(quant_block_size(GGML_TYPE_Q8_0) == 32 && quant_type_size(GGML_TYPE_Q8_0) == 34);
    CHECK(quant_block_size(GGML_TYPE_Q6_K) == 256 && quant_type_size(GGML_TYPE_Q6_K) == 210);
    CHECK(quant_type_size(GGML_TYPE_Q4_K) == 144 && quant_type_size(GGML_TYPE_Q5_1) == 24);
    CHECK(quant_row_bytes(GGML_TYPE_Q4_K, 512) == 288);
    CHECK(quant_row_bytes(GGML_TYPE_Q4_1, 576) == 360);
    CHECK(quant_row_bytes(GGML_TYPE_F16, 7) == 14);
    CHECK(quant_row_bytes(GGML_TYPE_Q8_0, 33) == 0 && quant_row_bytes(4, 32) == 0);
    CHECK(quant_row_bytes(GGML_TYPE_F32, SIZE_MAX / 2) == 0);
    CHECK(quant_supported(GGML_TYPE_Q6_K) && !quant_supported(GGML_TYPE_Q2_K) && !quant_supported(23));

    TEST("unsupported and unknown types are EX_DATAERR naming the type");
    gerr e = {0};
    unsigned char blk[292] = {0};
    float out[256];
    CHECK(quant_dequantize(GGML_TYPE_Q2_K, blk, out, 256, &e) == EX_DATAERR);
    CHECK(strstr(e.msg, "Q2_K (10)") != NULL);
    CHECK(quant_dequantize(19, blk, out, 256, &e) == EX_DATAERR && strstr(e.msg, "IQ1_S (19)"));
    CHECK(quant_dequantize(77, blk, out, 256, &e) == EX_DATAERR && strstr(e.msg, "unknown tensor type 77"));
    CHECK(quant_dequantize(GGML_TYPE_Q8_0, blk, out, 33, &e) == EX_DATAERR && strstr(e.msg, "block size"));
}

static void test_dequant(void) {
    static const uint32_t types[] = {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0,
                                     GGML_TYPE_Q5_1, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K};
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        uint32_t type = types[ti];
        static char names[8][64]; /* TEST keeps the pointer until the next TEST */
        char *name = names[ti];
        snprintf(name, sizeof names[ti], "%s: random blocks match the reference loops",
                 quant_type_name(type));
        TEST(name);
        enum { NBLK = 3 };
        size_t bs = quant_type_size(type), bk = quant_block_size(type), n = bk * NBLK;
        /* One byte of offset so the blocks are unaligned, as in a mapping. */
        unsigned char *raw = malloc(bs * NBLK + 1), *p = raw + 1;
        float *got = malloc(n * sizeof *got), *want = malloc(n * sizeof *want);
        random_blocks(p, type, NBLK, 1000 + type);
        gerr e = {0};
        CHECK(quant_dequantize(type, p, got, n, &e) == 0);
        for (int k = 0; k < NBLK; k++) expect_block(type, p + bs * (size_t)k, want + bk * (size_t)k);
        int same = 1, nonzero = 0;
        for (size_t i = 0; i < n; i++) {
            if (memcmp(&got[i], &want[i], 4)) {
                if (same) printf("#   value %zu: %.9g vs %.9g\n", i, got[i], want[i]);
                same = 0;
            }
            nonzero += got[i] != 0;
        }
        CHECK(same);
        CHECK(nonzero > (int)n / 2);
        free(raw), free(got), free(want);
    }

    TEST("hand-computed values of each type");
    unsigned char b[256] = {0};
    float y[256];
    gerr e = {0};
    /* Q8_0: d = 0.5, q = -3, 127 -> -1.5, 63.5 */
    put_half(b, 0.5f), b[2] = (unsigned char)-3, b[3] = 127;
    CHECK(quant_dequantize(GGML_TYPE_Q8_0, b, y, 32, &e) == 0 && y[0] == -1.5f && y[1] == 63.5f && y[2] == 0);
    /* Q4_0: d = 2, byte 0x1F -> value 0 = (15-8)*2 = 14, value 16 = (1-8)*2 = -14 */
    memset(b, 0, sizeof b), put_half(b, 2.0f), b[2] = 0x1F;
    CHECK(quant_dequantize(GGML_TYPE_Q4_0, b, y, 32, &e) == 0 && y[0] == 14 && y[16] == -14 && y[1] == -16);
    /* Q4_1: d = 0.25, m = -1, byte 0x84 -> 4*0.25-1 = 0, 8*0.25-1 = 1 */
    memset(b, 0, sizeof b), put_half(b, 0.25f), put_half(b + 2, -1.0f), b[4] = 0x84;
    CHECK(quant_dequantize(GGML_TYPE_Q4_1, b, y, 32, &e) == 0 && y[0] == 0 && y[16] == 1 && y[1] == -1);
    /* Q5_0: d = 1, qh bit 0 and bit 17 set, qs[0] = 0x00, qs[1] = 0x30 ->
     * value 0 = 16-16 = 0, value 1 = 0-16, value 17 = (3|16)-16 = 3 */
    memset(b, 0, sizeof b), put_half(b, 1.0f), b[2] = 0x01, b[4] = 0x02, b[7] = 0x30;
    CHECK(quant_dequantize(GGML_TYPE_Q5_0, b, y, 32, &e) == 0 && y[0] == 0 && y[1] == -16 && y[17] == 3);
    /* Q5_1: d = 0.5, m = 2, qh bit 31, qs[15] = 0xF0 -> value 31 = 31*0.5+2 = 17.5 */
    memset(b, 0, sizeof b), put_half(b, 0.5f), put_half(b + 2, 2.0f), b[7] = 0x80, b[23] = 0xF0;
    CHECK(quant_dequantize(GGML_TYPE_Q5_1, b, y, 32, &e) == 0 && y[31] == 17.5f && y[0] == 2);
    /* Q4_K: d = 1, dmin = 0.5; sub-block 0 scale 5 min 3; sub-block 5 scale
     * (sc[9]&15)|(sc[1]>>6)<<4 = 2|16 = 18, min (sc[9]>>4)|(sc[5]>>6)<<4 = 1|32 = 33.
     * qs[0] = 0x27 -> value 0 = 5*7 - 1.5 = 33.5. Value 160 (sub-block 5,
     * high nibble of qs[64]) with qs[64] = 0x30 -> 18*3 - 16.5 = 37.5 */
    memset(b, 0, sizeof b), put_half(b, 1.0f), put_half(b + 2, 0.5f);
    b[4] = 5, b[8] = 3, b[4 + 9] = 0x12, b[4 + 1] = 0x40, b[4 + 5] = 0x80, b[16] = 0x27, b[16 + 64] = 0x30;
    CHECK(quant_dequantize(GGML_TYPE_Q4_K, b, y, 256, &e) == 0 && y[0] == 33.5f && y[160] == 37.5f);
    CHECK(y[1] == -1.5f && y[32] == 0.0f); /* sub-block 1: scale sc[1]&63 = 0, min sc[5]&63 = 0 */
    /* Q6_K: d = 0.25, scale[0] = 2, scale[15] = -4; value 0: ql[0] = 0x05,
     * qh[0] bits 0-1 = 2 -> (5|32)-32 = 5 -> 0.25*2*5 = 2.5; value 255
     * (n=128, l=31, q4): ql[64+63]>>4 = 0xF, qh[32+31]>>6 = 3 -> 63-32 = 31 -> 0.25*-4*31 = -31 */
    memset(b, 0, 210), put_half(b + 208, 0.25f), b[192] = 2, b[207] = (unsigned char)-4;
    b[0] = 0x05, b[128] = 0x02, b[127] = 0xF0, b[128 + 63] = 0xC0;
    CHECK(quant_dequantize(GGML_TYPE_Q6_K, b, y, 256, &e) == 0 && y[0] == 2.5f && y[255] == -31.0f);
    /* MXFP4: e = 130 -> 4 per half unit; byte 0x9F -> value 0 code 15 = -12
     * halves = -48, value 16 code 9 = -1 half = -4; e = 0 -> 2^-128 (subnormal) */
    memset(b, 0, 17), b[0] = 130, b[1] = 0x9F, b[16] = 0x07;
    CHECK(quant_dequantize(GGML_TYPE_MXFP4, b, y, 32, &e) == 0 && y[0] == -48 && y[16] == -4 && y[15] == 48);
    CHECK(y[1] == 0 && y[31] == 0);
    b[0] = 0, b[1] = 0x01;
    CHECK(quant_dequantize(GGML_TYPE_MXFP4, b, y, 32, &e) == 0 && y[0] == 0x1p-128f && y[15] == 12 * 0x1p-128f);

    TEST("F16 and BF16 widen exactly");
    uint16_t h[3] = {f32_to_f16(-0.3330078125f), f32_to_f16(65504.0f), 0x0001};
    CHECK(quant_dequantize(GGML_TYPE_F16, h, y, 3, &e) == 0);
    CHECK(y[0] == -0.3330078125f && y[1] == 65504.0f && y[2] == 0x1p-24f);
    uint16_t bh[2] = {0x3FC0, 0xC2F7}; /* 1.5, -123.5 */
    CHECK(quant_dequantize(GGML_TYPE_BF16, bh, y, 2, &e) == 0 && y[0] == 1.5f && y[1] == -123.5f);
}

/* ---- dump mode for tests/ref/check_gguf.py --------------------------------- */

static void json_str(FILE *o, const char *p, size_t n) {
    fputc('"', o);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '"' || c == '\\') fprintf(o, "\\%c", c);
        else if (c < 0x20) fprintf(o, "\\u%04x", c);
        else fputc(c, o);
    }
    fputc('"', o);
}

/* "KEY": value for an arch-prefixed or plain key; null when absent. */
static void json_num_key(FILE *o, const gguf_file *f, const char *key, const char *as, int *first) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    fprintf(o, "%s\n  \"%s\": ", *first ? "" : ",", as);
    *first = 0;
    int64_t s;
    double d;
    if (!kv) fputs("null", o);
    else if (gguf_value_i64(&kv->v, &s)) fprintf(o, "%lld", (long long)s);
    else if (gguf_value_f64(&kv->v, &d)) fprintf(o, "%.17g", d);
    else fputs("\"?\"", o);
}

static int dump(const char *path, const char *outdir, const char *list) {
    gguf_file f;
    gerr e = {0};
    if (gguf_open(&f, path, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return e.code;
    }
    char p[1024];
    snprintf(p, sizeof p, "%s/meta.json", outdir);
    FILE *o = fopen(p, "w");
    if (!o) {
        perror(p);
        return EX_IOERR;
    }
    gguf_str arch = {"", 0}, s;
    gguf_get_string(&f, "general.architecture", &arch, NULL);
    char a[64];
    snprintf(a, sizeof a, "%.*s", (int)(arch.len < 60 ? arch.len : 60), arch.ptr);
    fprintf(o, "{\n  \"version\": %u, \"n_kv\": %zu, \"n_tensors\": %zu, \"alignment\": %llu,",
            f.version, f.n_kv, f.n_tensors, (unsigned long long)f.alignment);
    fprintf(o, "\n  \"architecture\": ");
    json_str(o, arch.ptr, arch.len);
    int first = 0;
    static const char *const arch_keys[] = {
        "block_count", "embedding_length", "feed_forward_length", "context_length",
        "attention.head_count", "attention.head_count_kv", "rope.freq_base",
        "attention.layer_norm_rms_epsilon", "rope.dimension_count", "vocab_size"};
    for (size_t i = 0; i < sizeof arch_keys / sizeof *arch_keys; i++) {
        char k[128];
        snprintf(k, sizeof k, "%s.%s", a, arch_keys[i]);
        json_num_key(o, &f, k, arch_keys[i], &first);
    }
    json_num_key(o, &f, "tokenizer.ggml.bos_token_id", "bos_token_id", &first);
    json_num_key(o, &f, "tokenizer.ggml.eos_token_id", "eos_token_id", &first);
    json_num_key(o, &f, "tokenizer.ggml.padding_token_id", "padding_token_id", &first);
    json_num_key(o, &f, "general.alignment", "general.alignment", &first);
    fprintf(o, ",\n  \"chat_template_length\": ");
    if (gguf_get_string(&f, "tokenizer.chat_template", &s, NULL) == 0) fprintf(o, "%zu", s.len);
    else fputs("null", o);
    fprintf(o, ",\n  \"pre\": ");
    if (gguf_get_string(&f, "tokenizer.ggml.pre", &s, NULL) == 0) json_str(o, s.ptr, s.len);
    else fputs("null", o);
    fprintf(o, ",\n  \"model\": ");
    if (gguf_get_string(&f, "tokenizer.ggml.model", &s, NULL) == 0) json_str(o, s.ptr, s.len);
    else fputs("null", o);
    gguf_value arr;
    static const char *const arrays[] = {"tokenizer.ggml.tokens", "tokenizer.ggml.merges",
                                         "tokenizer.ggml.token_type", "tokenizer.ggml.scores"};
    for (size_t i = 0; i < 4; i++) {
        fprintf(o, ",\n  \"%s\": ", arrays[i]);
        if (gguf_get_array(&f, arrays[i], GGUF_NTYPES, &arr, NULL)) {
            fputs("null", o);
            continue;
        }
        /* count, and the first, middle and last elements */
        fprintf(o, "{\"count\": %llu, \"type\": \"%s\", \"sample\": [", (unsigned long long)arr.count,
                gguf_type_name(arr.elem_type));
        uint64_t at[3] = {0, arr.count / 2, arr.count ? arr.count - 1 : 0};
        for (int j = 0; j < 3 && arr.count; j++) {
            if (j) fputs(", ", o);
            if (arr.elem_type == GGUF_STRING) {
                gguf_str es = gguf_array_str(&arr, at[j]);
                json_str(o, es.ptr, es.len);
            } else if (arr.elem_type == GGUF_F32 || arr.elem_type == GGUF_F64) {
                fprintf(o, "%.9g", gguf_array_float(&arr, at[j]));
            } else {
                fprintf(o, "%lld", (long long)gguf_array_int(&arr, at[j]));
            }
        }
        fputs("]}", o);
    }
    fprintf(o, ",\n  \"tensors\": {");
    int rc = 0, n_out = 0;
    for (size_t i = 0; i < f.n_tensors && !rc; i++) {
        const gguf_tensor *t = &f.tensors[i];
        if (list && *list) { /* comma-separated names */
            size_t nl = strlen(t->name);
            const char *q = list;
            int hit = 0;
            while (*q && !hit) {
                const char *end = strchr(q, ',');
                size_t len = end ? (size_t)(end - q) : strlen(q);
                hit = len == nl && !memcmp(q, t->name, nl);
                q += len + (end ? 1 : 0);
            }
            if (!hit) continue;
        }
        float *buf = malloc((t->numel ? t->numel : 1) * sizeof *buf);
        if (!buf) return EX_OSERR;
        rc = gguf_tensor_to_f32(&f, t, buf, &e);
        if (rc) {
            fprintf(stderr, "%s\n", e.msg);
        } else {
            snprintf(p, sizeof p, "%s/%s.f32", outdir, t->name);
            write_bytes(p, buf, t->numel * sizeof *buf);
            fprintf(o, "%s\n    \"%s\": {\"type\": \"%s\", \"dims\": [", n_out++ ? "," : "", t->name,
                    quant_type_name(t->type));
            for (int d = 0; d < t->n_dims; d++) fprintf(o, "%s%llu", d ? ", " : "", (unsigned long long)t->dims[d]);
            fprintf(o, "], \"offset\": %llu}", (unsigned long long)t->offset);
        }
        free(buf);
    }
    fprintf(o, "\n  }\n}\n");
    if (fclose(o) != 0) rc = EX_IOERR;
    gguf_close(&f);
    return rc;
}

int main(void) {
    const char *dump_in = getenv("GRPO_GGUF_DUMP"), *dump_out = getenv("GRPO_GGUF_DUMP_OUT");
    if (dump_in && *dump_in) return dump(dump_in, dump_out && *dump_out ? dump_out : ".",
                                         getenv("GRPO_GGUF_DUMP_TENSORS"));
    char dir[] = "/tmp/grpo-test-gguf-XXXXXX";
    if (!mkdtemp(dir)) {
        printf("# mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    test_valid(dir);
    test_malformed(dir);
    test_quant_table();
    test_dequant();
    remove_tree(dir);
    return check_done();
}
