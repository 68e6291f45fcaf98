/* safetensors reader and writer: round trips of every dtype from fixed-seed
 * random data, and one file per malformed-header case, built byte by byte.
 *
 * Cross-check modes for tests/ref/check_safetensors.py (the Python
 * `safetensors` package as the independent reader and writer):
 *   GRPO_ST_OUT=PATH  write the cross-check file (layout and values below) and exit
 *   GRPO_ST_IN=PATH   read a file written by Python and check every tensor
 * Both sides generate values with the same splitmix64 rule (cross_bits). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "helpers.h"
#include "formats/safetensors.h"
#include "util/half.h"

/* ---- helpers ------------------------------------------------------------- */

static char *path_in(const char *dir, const char *name) {
    static char buf[4][512]; /* a few live at once */
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, 512, "%s/%s", dir, name);
    return p;
}

static void write_bytes(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f || (len && fwrite(data, 1, len, f) != len) || fclose(f) != 0) {
        printf("# cannot write %s\n", path);
        exit(1);
    }
}

/* A file with the given header length field, header text and data bytes. */
static void write_st(const char *path, uint64_t header_len, const char *header, size_t data_len) {
    size_t hlen = strlen(header);
    size_t total = 8 + hlen + data_len;
    unsigned char *buf = malloc(total);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(header_len >> (8 * i));
    memcpy(buf + 8, header, hlen);
    fill_random_bytes(buf + 8 + hlen, data_len, 77);
    write_bytes(path, buf, total);
    free(buf);
}

/* A well-formed file: the length field matches the header. */
static void write_valid(const char *path, const char *header, size_t data_len) {
    write_st(path, strlen(header), header, data_len);
}

/* Opens path, expecting failure with code and a message holding word (and the path). */
static int open_fails(const char *path, int code, const char *word) {
    st_file f;
    gerr e = {0};
    int rc = st_open(&f, path, &e);
    int ok = rc == code && e.code == code && strstr(e.msg, word) && !strncmp(e.msg, path, strlen(path)) &&
             !strchr(e.msg, '\n');
    if (!ok) printf("#   %s: rc %d (want %d), message: %s (want '%s')\n", path, rc, code, e.msg, word);
    else if (getenv("GRPO_TEST_VERBOSE")) printf("#   %d %s\n", rc, e.msg);
    if (!rc) st_close(&f);
    return ok;
}

/* A header-only case: writes header + data_len bytes and expects EX_DATAERR. */
static int header_fails(const char *dir, const char *header, size_t data_len, const char *word) {
    const char *path = path_in(dir, "case.safetensors");
    write_valid(path, header, data_len);
    return open_fails(path, EX_DATAERR, word);
}

static int header_ok(const char *dir, const char *header, size_t data_len, size_t want_tensors) {
    const char *path = path_in(dir, "ok.safetensors");
    write_valid(path, header, data_len);
    st_file f;
    gerr e = {0};
    int rc = st_open(&f, path, &e);
    if (rc) {
        printf("#   unexpected error: %s\n", e.msg);
        return 0;
    }
    int ok = f.n_tensors == want_tensors;
    st_close(&f);
    return ok;
}

/* ---- round trip ---------------------------------------------------------- */

typedef struct {
    const char *name;
    st_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
} spec;

static size_t spec_bytes(const spec *s) {
    size_t n = st_dtype_size(s->dtype);
    for (int i = 0; i < s->ndim; i++) n *= (size_t)s->shape[i];
    return n;
}

static void test_round_trip(const char *dir) {
    static const spec specs[] = {
        {"z.first.u8_odd", ST_U8, 3, {3, 1, 5}}, /* odd size: later tensors start unaligned */
        {"layers.0.attn.q_proj.weight", ST_F32, 2, {7, 5}},
        {"half", ST_F16, 3, {2, 3, 4}},
        {"bhalf", ST_BF16, 1, {9}},
        {"double", ST_F64, 2, {2, 3}},
        {"i32", ST_I32, 4, {2, 1, 2, 3}},
        {"i64", ST_I64, 1, {5}},
        {"scalar", ST_F32, 0, {0}},
        {"empty", ST_F16, 2, {0, 4}},
        {"eight.dims", ST_I32, 8, {1, 2, 1, 2, 1, 2, 1, 2}},
        {"名前/ünïcode", ST_U8, 1, {4}},
    };
    enum { N = sizeof specs / sizeof specs[0] };
    void *data[N];
    st_writer w;
    st_writer_init(&w);
    gerr e = {0};
    TEST("writer accepts every dtype, scalars, zero-size and 8 dims");
    for (int i = 0; i < N; i++) {
        data[i] = malloc(spec_bytes(&specs[i]) + 1);
        fill_random_bytes(data[i], spec_bytes(&specs[i]), 1000 + (uint64_t)i * 7919);
        CHECK_EQ_INT(st_writer_add(&w, specs[i].name, specs[i].dtype, specs[i].ndim, specs[i].shape,
                                   data[i], &e),
                     0);
    }
    CHECK_EQ_INT(st_writer_set_meta(&w, "format", "pt", &e), 0);
    CHECK_EQ_INT(st_writer_set_meta(&w, "note", "first", &e), 0);
    CHECK_EQ_INT(st_writer_set_meta(&w, "note", "quote \" backslash \\ newline \n ✓", &e), 0);
    const char *path = path_in(dir, "round.safetensors");
    CHECK_EQ_INT(st_write(&w, path, &e), 0);
    st_writer_free(&w);

    TEST("the header is padded with spaces to a multiple of 8");
    FILE *fp = fopen(path, "rb");
    unsigned char len_le[8] = {0};
    CHECK(fp && fread(len_le, 1, 8, fp) == 8);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | len_le[i];
    CHECK_EQ_INT(hlen % 8, 0);
    char *header = calloc(1, hlen + 1);
    CHECK(fp && fread(header, 1, hlen, fp) == hlen);
    size_t json_end = strlen(header);
    while (json_end && header[json_end - 1] == ' ') json_end--;
    CHECK(json_end > 0 && header[json_end - 1] == '}');
    CHECK(hlen - json_end < 8);
    CHECK(!strncmp(header, "{\"__metadata__\":{", 17)); /* metadata first, as Python writes it */
    free(header);
    if (fp) fclose(fp);

    TEST("reader gets back every tensor in the order written, bytes equal");
    st_file f;
    int rc = st_open(&f, path, &e);
    CHECK_EQ_INT(rc, 0);
    if (rc) {
        printf("#   %s\n", e.msg);
        return;
    }
    CHECK_EQ_INT(f.n_tensors, N);
    size_t offset = 0;
    for (int i = 0; i < N && i < (int)f.n_tensors; i++) {
        const st_tensor *t = &f.tensors[i];
        CHECK_EQ_STR(t->name, specs[i].name);
        CHECK_EQ_INT(t->dtype, specs[i].dtype);
        CHECK_EQ_INT(t->ndim, specs[i].ndim);
        int64_t numel = 1;
        for (int d = 0; d < specs[i].ndim; d++) {
            CHECK_EQ_INT(t->shape[d], specs[i].shape[d]);
            numel *= specs[i].shape[d];
        }
        CHECK_EQ_INT(t->numel, numel);
        CHECK_EQ_INT(t->nbytes, spec_bytes(&specs[i]));
        CHECK(t->nbytes == 0 || !memcmp(t->data, data[i], t->nbytes));
        /* Contiguous in the order added, the data section 8-aligned in the file. */
        CHECK_EQ_INT((const unsigned char *)t->data - f.bytes, 8 + hlen + offset);
        offset += t->nbytes;
        CHECK(st_find(&f, specs[i].name) == t);
    }
    CHECK_EQ_INT(8 + hlen + offset, f.len);
    CHECK(st_find(&f, "absent") == NULL);
    CHECK(st_find(&f, "") == NULL);

    TEST("metadata reads back, a repeated key replaced");
    CHECK_EQ_INT(f.n_meta, 2);
    CHECK_EQ_STR(st_meta_get(&f, "format"), "pt");
    CHECK_EQ_STR(st_meta_get(&f, "note"), "quote \" backslash \\ newline \n ✓");
    CHECK(st_meta_get(&f, "absent") == NULL);

    TEST("st_tensor_to_f32 widens F16, BF16, F64 and copies F32");
    {
        const st_tensor *t = st_find(&f, "half");
        float out[64];
        CHECK_EQ_INT(st_tensor_to_f32(&f, t, out, &e), 0);
        const uint16_t *src = data[2];
        int bad = 0;
        for (int i = 0; i < 24; i++) {
            float want = f16_to_f32(src[i]);
            bad += memcmp(&want, &out[i], 4) != 0;
        }
        CHECK_EQ_INT(bad, 0);
        t = st_find(&f, "bhalf");
        CHECK_EQ_INT(st_tensor_to_f32(&f, t, out, &e), 0);
        src = data[3];
        for (int i = 0; i < 9; i++) bad += bf16_to_f32(src[i]) != out[i] && !isnan(out[i]);
        CHECK_EQ_INT(bad, 0);
        t = st_find(&f, "double");
        CHECK_EQ_INT(st_tensor_to_f32(&f, t, out, &e), 0);
        const double *dsrc = data[4];
        for (int i = 0; i < 6; i++) {
            double d = dsrc[i];
            float want = isfinite(d) && fabs(d) > 3.4e38 ? (float)copysign(INFINITY, d) : (float)d;
            bad += want != out[i] && !(isnan(want) && isnan(out[i]));
        }
        CHECK_EQ_INT(bad, 0);
        t = st_find(&f, "layers.0.attn.q_proj.weight");
        CHECK_EQ_INT(st_tensor_to_f32(&f, t, out, &e), 0);
        CHECK(!memcmp(out, data[1], 35 * 4));
        t = st_find(&f, "i32");
        CHECK_EQ_INT(st_tensor_to_f32(&f, t, out, &e), EX_DATAERR);
        CHECK(strstr(e.msg, "i32") && strstr(e.msg, "not floating point"));
    }
    st_close(&f);
    for (int i = 0; i < N; i++) free(data[i]);

    TEST("st_open_memory parses a buffer the same way");
    {
        static const char hdr[] = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
        unsigned char buf[8 + sizeof hdr - 1 + 8];
        uint64_t n = sizeof hdr - 1;
        for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(n >> (8 * i));
        memcpy(buf + 8, hdr, n);
        float vals[2] = {1.5f, -2.25f};
        memcpy(buf + 8 + n, vals, 8);
        st_file m;
        CHECK_EQ_INT(st_open_memory(&m, buf, sizeof buf, "mem", &e), 0);
        CHECK_EQ_INT(m.n_tensors, 1);
        float out[2] = {0};
        CHECK(m.n_tensors == 1 && st_tensor_to_f32(&m, &m.tensors[0], out, &e) == 0);
        CHECK(out[0] == 1.5f && out[1] == -2.25f);
        st_close(&m);
        CHECK_EQ_INT(st_open_memory(&m, buf, sizeof buf - 1, "mem", &e), EX_DATAERR);
        CHECK(!strncmp(e.msg, "mem: ", 5));
    }

    TEST("st_tensor_to_f32_finite converts as st_tensor_to_f32 and names the first NaN or inf, in any chunk");
    {
        enum { N = 5000 }; /* two chunks */
        static const char hdr[] = "{\"w\":{\"dtype\":\"F32\",\"shape\":[5000],\"data_offsets\":[0,20000]}}";
        static unsigned char buf[8 + sizeof hdr - 1 + 4 * N];
        static float vals[N], out[N];
        uint64_t n = sizeof hdr - 1;
        for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(n >> (8 * i));
        memcpy(buf + 8, hdr, n);
        for (int i = 0; i < N; i++) vals[i] = (float)i - 2500.5f;
        memcpy(buf + 8 + n, vals, sizeof vals);
        st_file m;
        CHECK_EQ_INT(st_open_memory(&m, buf, sizeof buf, "ck/model.safetensors", &e), 0);
        CHECK_EQ_INT(st_tensor_to_f32_finite(&m, &m.tensors[0], out, &e), 0);
        CHECK(!memcmp(out, vals, sizeof vals));
        st_close(&m);
        float inf = INFINITY, nan = NAN;
        memcpy(buf + 8 + n + 4 * 4500, &inf, 4);
        CHECK_EQ_INT(st_open_memory(&m, buf, sizeof buf, "ck/model.safetensors", &e), 0);
        CHECK_EQ_INT(st_tensor_to_f32_finite(&m, &m.tensors[0], out, &e), EX_DATAERR);
        CHECK_EQ_STR(e.msg, "ck/model.safetensors: tensor 'w': value 4500 is +inf (non-finite weights: the checkpoint is broken)");
        CHECK_EQ_INT(st_tensor_to_f32(&m, &m.tensors[0], out, &e), 0); /* the unchecked form keeps it */
        st_close(&m);
        memcpy(buf + 8 + n + 4 * 7, &nan, 4);
        CHECK_EQ_INT(st_open_memory(&m, buf, sizeof buf, "ck/model.safetensors", &e), 0);
        CHECK_EQ_INT(st_tensor_to_f32_finite(&m, &m.tensors[0], out, &e), EX_DATAERR);
        CHECK(strstr(e.msg, "value 7 is NaN") != NULL);
        st_close(&m);
    }

    TEST("st_tensor_to_f32_finite takes a tensor with no rows (shape [0, 4]): nothing to convert, no error");
    {
        static const char hdr[] = "{\"w\":{\"dtype\":\"F32\",\"shape\":[0,4],\"data_offsets\":[0,0]}}";
        unsigned char buf[8 + sizeof hdr - 1];
        uint64_t n = sizeof hdr - 1;
        for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(n >> (8 * i));
        memcpy(buf + 8, hdr, n);
        st_file m;
        float out[1] = {7.0f};
        CHECK_EQ_INT(st_open_memory(&m, buf, sizeof buf, "mem", &e), 0);
        CHECK(m.n_tensors == 1 && m.tensors[0].numel == 0);
        CHECK(m.n_tensors == 1 && st_tensor_to_f32_finite(&m, &m.tensors[0], out, &e) == 0);
        CHECK(out[0] == 7.0f);
        st_close(&m);
    }

    TEST("no temporary left next to the written file");
    CHECK(access(path_in(dir, ".round.safetensors.tmp-0"), F_OK) != 0);
    char tmp_name[128];
    snprintf(tmp_name, sizeof tmp_name, ".round.safetensors.tmp-%ld", (long)getpid());
    CHECK(access(path_in(dir, tmp_name), F_OK) != 0);
}

static void test_writer_errors(const char *dir) {
    st_writer w;
    st_writer_init(&w);
    gerr e = {0};
    float v[4] = {1, 2, 3, 4};
    int64_t shape[ST_MAX_DIMS + 1] = {4, 1, 1, 1, 1, 1, 1, 1, 1};
    TEST("writer rejects duplicate and invalid names");
    CHECK_EQ_INT(st_writer_add(&w, "a", ST_F32, 1, shape, v, &e), 0);
    CHECK_EQ_INT(st_writer_add(&w, "a", ST_F32, 1, shape, v, &e), EX_DATAERR);
    CHECK(strstr(e.msg, "duplicate") && strstr(e.msg, "'a'"));
    CHECK_EQ_INT(st_writer_add(&w, "__metadata__", ST_F32, 1, shape, v, &e), EX_DATAERR);
    CHECK_EQ_INT(st_writer_add(&w, "bad\xff", ST_F32, 1, shape, v, &e), EX_DATAERR);
    CHECK(strstr(e.msg, "UTF-8"));
    CHECK_EQ_INT(st_writer_set_meta(&w, "k", "\xc0\xaf", &e), EX_DATAERR);

    TEST("writer rejects bad dtype, ndim, shape and missing data");
    CHECK_EQ_INT(st_writer_add(&w, "b", (st_dtype)99, 1, shape, v, &e), EX_SOFTWARE);
    CHECK_EQ_INT(st_writer_add(&w, "b", ST_F32, ST_MAX_DIMS + 1, shape, v, &e), EX_SOFTWARE);
    int64_t neg[1] = {-1};
    CHECK_EQ_INT(st_writer_add(&w, "b", ST_F32, 1, neg, v, &e), EX_SOFTWARE);
    CHECK_EQ_INT(st_writer_add(&w, "b", ST_F32, 1, shape, NULL, &e), EX_SOFTWARE);
    int64_t zero[1] = {0};
    CHECK_EQ_INT(st_writer_add(&w, "b", ST_F32, 1, zero, NULL, &e), 0); /* no bytes, no data needed */

    TEST("many tensors: duplicate detection stays exact past table growth");
    char name[32];
    int failures = 0;
    for (int i = 0; i < 500; i++) {
        snprintf(name, sizeof name, "t%d", i);
        failures += st_writer_add(&w, name, ST_F32, 1, zero, NULL, &e) != 0;
    }
    for (int i = 0; i < 500; i += 7) {
        snprintf(name, sizeof name, "t%d", i);
        failures += st_writer_add(&w, name, ST_F32, 1, zero, NULL, &e) != EX_DATAERR;
    }
    CHECK_EQ_INT(failures, 0);
    CHECK_EQ_INT(w.n_tensors, 502);

    TEST("writer refuses a .zst path and reports an unwritable one");
    CHECK_EQ_INT(st_write(&w, path_in(dir, "x.safetensors.zst"), &e), EX_SOFTWARE);
    CHECK(st_write(&w, path_in(dir, "no/such/dir/x.safetensors"), &e) != 0);
    CHECK(strstr(e.msg, "no/such/dir"));
    st_writer_free(&w);

    TEST("an empty writer makes a valid file with no tensors");
    st_writer_init(&w);
    const char *path = path_in(dir, "empty.safetensors");
    CHECK_EQ_INT(st_write(&w, path, &e), 0);
    st_file f;
    CHECK_EQ_INT(st_open(&f, path, &e), 0);
    CHECK_EQ_INT(f.n_tensors, 0);
    CHECK_EQ_INT(f.len, 16); /* 8 + "{}" padded to 8 */
    st_close(&f);
    st_writer_free(&w);
}

/* ---- malformed files ----------------------------------------------------- */

#define T_(dtype, shape, offs) "{\"dtype\":" dtype ",\"shape\":" shape ",\"data_offsets\":" offs "}"
#define F32_(shape, offs) T_("\"F32\"", shape, offs)

static void test_malformed(const char *dir) {
    const char *path = path_in(dir, "raw.safetensors");
    TEST("missing file, directory");
    CHECK(open_fails(path_in(dir, "absent.safetensors"), EX_NOINPUT, "No such file"));
    CHECK(open_fails(dir, EX_NOINPUT, "not a regular file"));

    TEST("file shorter than 8 bytes");
    write_bytes(path, "", 0);
    CHECK(open_fails(path, EX_DATAERR, "shorter"));
    write_bytes(path, "\x02\0\0\0\0\0\0", 7);
    CHECK(open_fails(path, EX_DATAERR, "shorter"));

    TEST("header length 0, past the end, over the limit");
    write_st(path, 0, "{}", 0);
    CHECK(open_fails(path, EX_DATAERR, "header length is 0"));
    write_st(path, 1000, "{}      ", 0);
    CHECK(open_fails(path, EX_DATAERR, "past the end"));
    write_st(path, UINT64_MAX, "{}      ", 0);
    CHECK(open_fails(path, EX_DATAERR, "past the end"));
    /* A sparse file large enough that only the 100 MB limit is wrong. */
    write_st(path, ST_MAX_HEADER_BYTES + 1, "{}", 0);
    CHECK(truncate(path, (off_t)(ST_MAX_HEADER_BYTES + 64)) == 0);
    CHECK(open_fails(path, EX_DATAERR, "exceeds the limit"));

    TEST("header not JSON, not an object, not UTF-8");
    CHECK(header_fails(dir, "{\"a\":", 0, "not valid JSON"));
    CHECK(header_fails(dir, "{\"a\" 1}", 0, "not valid JSON"));
    CHECK(header_fails(dir, "[1,2]   ", 0, "not a JSON object"));
    CHECK(header_fails(dir, "  {}    ", 0, "not a JSON object"));
    CHECK(header_fails(dir, "\"str\"", 0, "not a JSON object"));
    CHECK(header_fails(dir, "{\"\xff\":1}", 0, "UTF-8"));
    CHECK(header_fails(dir, "{\"\xc0\xaf\":1}", 0, "UTF-8")); /* overlong '/' */
    CHECK(header_fails(dir, "{\"\xed\xa0\x80\":1}", 0, "UTF-8")); /* a surrogate */
    CHECK(header_fails(dir, "{\"\xe2\x82\":1}", 0, "UTF-8"));     /* truncated */
    CHECK(header_fails(dir, "{\"a\x01\":1}", 0, "control byte"));
    CHECK(header_fails(dir, "{} x    ", 0, "after the JSON object"));
    CHECK(header_fails(dir, "{\"a\\u0000b\":5}", 0, "\\u0000")); /* would read as "a" */
    CHECK(header_fails(dir, "{}{}    ", 0, "after the JSON object"));

    TEST("entry not an object; dtype missing, mistyped, unsupported");
    CHECK(header_fails(dir, "{\"a\":5}", 0, "expected an object"));
    CHECK(header_fails(dir, "{\"a\":[1]}", 0, "tensor 'a': entry is an array"));
    CHECK(header_fails(dir, "{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "missing field 'dtype'"));
    CHECK(header_fails(dir, "{\"a\":" T_("4", "[1]", "[0,4]") "}", 4, "dtype is a number"));
    CHECK(header_fails(dir, "{\"wq\":" T_("\"F8_E4M3\"", "[1]", "[0,1]") "}", 1,
                       "tensor 'wq': unsupported dtype 'F8_E4M3'"));
    CHECK(header_fails(dir, "{\"a\":" T_("\"f32\"", "[1]", "[0,4]") "}", 4, "unsupported dtype"));
    CHECK(header_fails(dir, "{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                       4, "duplicate field 'dtype'"));

    TEST("shape missing, mistyped, negative, fractional, huge, too many dims, overflowing");
    CHECK(header_fails(dir, "{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "missing field 'shape'"));
    CHECK(header_fails(dir, "{\"a\":" F32_("\"1\"", "[0,4]") "}", 4, "shape is a string"));
    CHECK(header_fails(dir, "{\"a\":" F32_("[-1]", "[0,4]") "}", 4, "shape[0]"));
    CHECK(header_fails(dir, "{\"a\":" F32_("[1,1.5]", "[0,4]") "}", 4, "shape[1]"));
    CHECK(header_fails(dir, "{\"a\":" F32_("[\"2\"]", "[0,8]") "}", 8, "shape[0]"));
    CHECK(header_fails(dir, "{\"a\":" F32_("[1e300]", "[0,4]") "}", 4, "shape[0]"));
    CHECK(header_fails(dir, "{\"a\":" F32_("[9007199254740994]", "[0,4]") "}", 4, "shape[0]"));
    CHECK(header_fails(dir, "{\"a\":" F32_("[1,1,1,1,1,1,1,1,1]", "[0,4]") "}", 4, "9 dims"));
    CHECK(header_fails(dir, "{\"a\":" F32_("[4294967296,4294967296]", "[0,4]") "}", 4, "overflows"));
    CHECK(header_fails(dir, "{\"a\":" F32_("[4294967296,2147483648]", "[0,4]") "}", 4, "overflows"));

    TEST("data_offsets missing, mistyped, reversed, past the data");
    CHECK(header_fails(dir, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "missing field 'data_offsets'"));
    CHECK(header_fails(dir, "{\"a\":" F32_("[1]", "[0,4,8]") "}", 4, "data_offsets"));
    CHECK(header_fails(dir, "{\"a\":" F32_("[1]", "[4]") "}", 4, "data_offsets"));
    CHECK(header_fails(dir, "{\"a\":" F32_("[1]", "{}") "}", 4, "data_offsets is an object"));
    CHECK(header_fails(dir, "{\"a\":" F32_("[1]", "[-4,0]") "}", 4, "data_offsets"));
    CHECK(header_fails(dir, "{\"a\":" F32_("[1]", "[0,4.5]") "}", 4, "data_offsets"));
    CHECK(header_fails(dir, "{\"a\":" F32_("[0]", "[4,0]") "}", 4, "begin after end"));
    CHECK(header_fails(dir, "{\"a\":" F32_("[2]", "[0,8]") "}", 4, "beyond the data section"));
    CHECK(header_fails(dir, "{\"a\":" F32_("[1]", "[0,18446744073709551616]") "}", 4, "data_offsets"));

    TEST("size mismatch, overlap, gap, trailing bytes");
    CHECK(header_fails(dir, "{\"a\":" F32_("[3]", "[0,8]") "}", 8, "span 8 bytes"));
    CHECK(header_fails(dir, "{\"a\":" T_("\"F16\"", "[2]", "[0,8]") "}", 8, "span"));
    CHECK(header_fails(dir, "{\"a\":" F32_("[2]", "[0,8]") ",\"b\":" F32_("[2]", "[4,12]") "}", 12,
                       "overlaps"));
    CHECK(header_fails(dir, "{\"a\":" F32_("[2]", "[0,8]") ",\"b\":" F32_("[2]", "[0,8]") "}", 8,
                       "overlaps"));
    CHECK(header_fails(dir, "{\"a\":" F32_("[2]", "[0,8]") ",\"z\":" F32_("[0]", "[4,4]") "}", 8,
                       "overlaps"));
    CHECK(header_fails(dir, "{\"a\":" F32_("[1]", "[0,4]") ",\"b\":" F32_("[1]", "[8,12]") "}", 12, "gap"));
    CHECK(header_fails(dir, "{\"a\":" F32_("[1]", "[4,8]") "}", 8, "gap"));
    CHECK(header_fails(dir, "{\"a\":" F32_("[1]", "[0,4]") "}", 12, "8 trailing bytes"));
    CHECK(header_fails(dir, "{}", 1, "1 trailing bytes"));

    TEST("duplicate tensor names and metadata keys");
    CHECK(header_fails(dir, "{\"a\":" F32_("[1]", "[0,4]") ",\"a\":" F32_("[1]", "[4,8]") "}", 8,
                       "duplicate tensor name 'a'"));
    CHECK(header_fails(dir, "{\"__metadata__\":{\"k\":\"1\",\"j\":\"2\",\"k\":\"3\"}}", 0,
                       "duplicate __metadata__ key 'k'"));
    CHECK(header_fails(dir, "{\"__metadata__\":{},\"__metadata__\":{}}", 0, "duplicate key '__metadata__'"));

    TEST("metadata not an object, non-string values");
    CHECK(header_fails(dir, "{\"__metadata__\":[\"a\"]}", 0, "__metadata__ is an array"));
    CHECK(header_fails(dir, "{\"__metadata__\":{\"k\":1}}", 0, "__metadata__ 'k' is a number"));
    CHECK(header_fails(dir, "{\"__metadata__\":{\"k\":{\"x\":\"y\"}}}", 0, "'k' is an object"));

    TEST("valid edge cases are accepted");
    CHECK(header_ok(dir, "{}      ", 0, 0));
    CHECK(header_ok(dir, "{}", 0, 0)); /* padding is optional */
    CHECK(header_ok(dir, "{\"__metadata__\":null}", 0, 0));
    CHECK(header_ok(dir, "{\n\t\"a\" : " F32_("[]", "[0,4]") "\r\n}", 4, 1));
    /* Zero-size tensors at a boundary, listed out of offset order. */
    CHECK(header_ok(dir,
                    "{\"b\":" F32_("[1]", "[8,12]") ",\"z\":" F32_("[0,5]", "[8,8]") ",\"a\":" F32_(
                        "[2]", "[0,8]") ",\"e\":" F32_("[0]", "[12,12]") ",\"s\":" F32_("[0]", "[0,0]") "}",
                    12, 5));
    /* Fields the reference ignores are ignored. */
    CHECK(header_ok(dir, "{\"a\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,3],\"x\":[]}}", 3, 1));
    CHECK(header_ok(dir, "{\"a\":" T_("\"U8\"", "[2.0e0]", "[0,2]") "}", 2, 1));
    CHECK(header_ok(dir, "{\"\\\\u0000\":" T_("\"U8\"", "[1]", "[0,1]") "}", 1, 1)); /* escaped backslash */

    TEST("error messages are one line even when a name holds a newline");
    CHECK(header_fails(dir, "{\"a\\nb\":5}", 0, "a b"));
}

/* ---- cross-check with Python --------------------------------------------- */

/* Layout shared with tests/ref/check_safetensors.py (CROSS_TENSORS there). */
static const spec cross_specs[] = {
    {"model.embed.weight", ST_F32, 2, {3, 5}},
    {"a.half", ST_F16, 3, {2, 3, 4}},
    {"b.bfloat", ST_BF16, 1, {7}},
    {"c.double", ST_F64, 2, {2, 2}},
    {"d.int32", ST_I32, 2, {4, 3}},
    {"e.int64", ST_I64, 1, {5}},
    {"f.bytes", ST_U8, 4, {3, 1, 2, 2}},
    {"g.scalar", ST_F32, 0, {0}},
    {"h.empty", ST_F32, 2, {0, 3}},
};
enum { N_CROSS = sizeof cross_specs / sizeof cross_specs[0] };
static const char *const cross_meta[][2] = {
    {"format", "pt"},
    {"grpo.note", "cross-check \xe2\x9c\x93 \"quoted\" back\\slash\ttab"},
};

/* Element i of tensor k as raw little-endian bits: splitmix64((k+1)<<32 | i),
 * cut to the dtype's width, with an all-ones float exponent flipped so no
 * value is inf or NaN (comparisons stay bitwise). */
static uint64_t cross_bits(int k, uint64_t i, st_dtype d) {
    uint64_t u = splitmix64(((uint64_t)(k + 1) << 32) + i);
    switch (d) {
    case ST_F32:
        u &= 0xFFFFFFFFu;
        if (((u >> 23) & 0xFF) == 0xFF) u ^= 1u << 30;
        return u;
    case ST_F16:
        u &= 0xFFFF;
        if (((u >> 10) & 0x1F) == 0x1F) u ^= 1u << 14;
        return u;
    case ST_BF16:
        u &= 0xFFFF;
        if (((u >> 7) & 0xFF) == 0xFF) u ^= 1u << 14;
        return u;
    case ST_F64:
        if (((u >> 52) & 0x7FF) == 0x7FF) u ^= 1ull << 62;
        return u;
    case ST_I32: return u & 0xFFFFFFFFu;
    case ST_U8: return u & 0xFF;
    default: return u;
    }
}

static unsigned char *cross_data(int k) {
    const spec *s = &cross_specs[k];
    size_t size = st_dtype_size(s->dtype), n = spec_bytes(s) / size;
    unsigned char *buf = malloc(spec_bytes(s) + 1);
    for (size_t i = 0; i < n; i++) {
        uint64_t b = cross_bits(k, i, s->dtype);
        for (size_t j = 0; j < size; j++) buf[i * size + j] = (unsigned char)(b >> (8 * j));
    }
    return buf;
}

static int cross_write(const char *path) {
    st_writer w;
    st_writer_init(&w);
    gerr e = {0};
    unsigned char *data[N_CROSS];
    TEST("cross-check file written");
    for (int k = 0; k < N_CROSS; k++) {
        data[k] = cross_data(k);
        const spec *s = &cross_specs[k];
        CHECK_EQ_INT(st_writer_add(&w, s->name, s->dtype, s->ndim, s->shape, data[k], &e), 0);
    }
    for (size_t m = 0; m < sizeof cross_meta / sizeof cross_meta[0]; m++)
        CHECK_EQ_INT(st_writer_set_meta(&w, cross_meta[m][0], cross_meta[m][1], &e), 0);
    CHECK_EQ_INT(st_write(&w, path, &e), 0);
    if (e.code) printf("#   %s\n", e.msg);
    st_writer_free(&w);
    for (int k = 0; k < N_CROSS; k++) free(data[k]);
    return check_done();
}

static int cross_read(const char *path) {
    st_file f;
    gerr e = {0};
    TEST("cross-check file opens");
    int rc = st_open(&f, path, &e);
    CHECK_EQ_INT(rc, 0);
    if (rc) {
        printf("#   %s\n", e.msg);
        return check_done();
    }
    CHECK_EQ_INT(f.n_tensors, N_CROSS);
    for (int k = 0; k < N_CROSS; k++) {
        const spec *s = &cross_specs[k];
        TEST(s->name);
        const st_tensor *t = st_find(&f, s->name);
        CHECK(t != NULL);
        if (!t) continue;
        CHECK_EQ_STR(st_dtype_name(t->dtype), st_dtype_name(s->dtype));
        CHECK_EQ_INT(t->ndim, s->ndim);
        for (int d = 0; d < s->ndim && d < t->ndim; d++) CHECK_EQ_INT(t->shape[d], s->shape[d]);
        CHECK_EQ_INT(t->nbytes, spec_bytes(s));
        unsigned char *want = cross_data(k);
        CHECK(t->nbytes != spec_bytes(s) || t->nbytes == 0 || !memcmp(t->data, want, t->nbytes));
        free(want);
    }
    TEST("cross-check metadata");
    for (size_t m = 0; m < sizeof cross_meta / sizeof cross_meta[0]; m++)
        CHECK_EQ_STR(st_meta_get(&f, cross_meta[m][0]), cross_meta[m][1]);
    st_close(&f);
    return check_done();
}

static void test_dtypes(void) {
    TEST("dtype names, sizes and parsing");
    static const char *const names[] = {"F32", "F16", "BF16", "F64", "I32", "I64", "U8"};
    static const size_t sizes[] = {4, 2, 2, 8, 4, 8, 1};
    for (int d = 0; d < ST_NDTYPES; d++) {
        st_dtype got;
        CHECK_EQ_STR(st_dtype_name((st_dtype)d), names[d]);
        CHECK_EQ_INT(st_dtype_size((st_dtype)d), sizes[d]);
        CHECK(st_dtype_parse(names[d], &got) && got == (st_dtype)d);
    }
    st_dtype got;
    CHECK(!st_dtype_parse("BOOL", &got) && !st_dtype_parse("f32", &got) && !st_dtype_parse("", &got));
    CHECK(st_dtype_name(ST_NDTYPES) == NULL && st_dtype_size(ST_NDTYPES) == 0);
}

int main(void) {
    const char *out = getenv("GRPO_ST_OUT"), *in = getenv("GRPO_ST_IN");
    if (out && *out) return cross_write(out);
    if (in && *in) return cross_read(in);

    char dir[] = "/tmp/grpo-test-st-XXXXXX";
    if (!mkdtemp(dir)) {
        printf("# mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    test_dtypes();
    test_round_trip(dir);
    test_writer_errors(dir);
    test_malformed(dir);
    remove_tree(dir);
    return check_done();
}
