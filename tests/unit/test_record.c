/* The JSON scanner and the pass-through record: what is valid, what each
 * error says, and that untouched fields come back byte for byte. */
#include <stdlib.h>

#include "check.h"
#include "io/record.h"

static int parse(record *r, const char *s, gerr *e) {
    memset(e, 0, sizeof *e);
    return record_parse(r, s, strlen(s), "in.jsonl", 7, e);
}

static void roundtrip_is(const char *in, const char *want) {
    record r;
    record_init(&r);
    gerr e;
    int rc = parse(&r, in, &e);
    CHECK_EQ_INT(rc, 0);
    if (rc) printf("#   error: %s\n", e.msg);
    strbuf out = {0};
    record_serialize(&r, &out);
    CHECK_EQ_STR(out.data, want);
    sb_free(&out);
    record_free(&r);
}

static void error_is(const char *in, const char *fragment) {
    record r;
    record_init(&r);
    gerr e;
    int rc = parse(&r, in, &e);
    CHECK_EQ_INT(rc, EX_DATAERR);
    CHECK(strstr(e.msg, "in.jsonl:7: ") == e.msg);
    if (!strstr(e.msg, fragment)) printf("#   message '%s' lacks '%s'\n", e.msg, fragment);
    CHECK(strstr(e.msg, fragment) != NULL);
    record_free(&r);
}

int main(void) {
    TEST("numbers keep their text through a record");
    roundtrip_is("{\"a\":1e400,\"b\":123456789012345678901234567890,\"c\":-0.0E-00}",
                 "{\"a\":1e400,\"b\":123456789012345678901234567890,\"c\":-0.0E-00}");

    TEST("nested values keep their bytes, top-level spacing is compacted");
    roundtrip_is("  { \"x\" : { \"y\" : [ 1 , 2 ,{}] } , \"s\":\"\\u00e9\\n\\\"\" }  ",
                 "{\"x\":{ \"y\" : [ 1 , 2 ,{}] },\"s\":\"\\u00e9\\n\\\"\"}");

    TEST("empty object and UTF-8 text");
    roundtrip_is("{}", "{}");
    roundtrip_is("{\"k\":\"caf\xc3\xa9 \xf0\x9f\x98\x80\"}", "{\"k\":\"caf\xc3\xa9 \xf0\x9f\x98\x80\"}");

    TEST("invalid JSON names the column and the fault");
    error_is("{\"a\":1,}", "expected a string key");
    error_is("{\"a\":01}", "expected ',' or '}'");
    error_is("{\"a\":[1,2}", "expected ',' or ']'");
    error_is("{\"a\":tru}", "unexpected character");
    error_is("{\"a\":\"x}", "unterminated string");
    error_is("{\"a\":\"\\q\"}", "invalid escape");
    error_is("{\"a\":\"\\u12G4\"}", "invalid \\u escape");
    error_is("{\"a\":\"\x01\"}", "control character");
    error_is("{\"a\":\"\xc3\x28\"}", "invalid UTF-8");
    error_is("{\"a\":\"\xed\xa0\x80\"}", "invalid UTF-8");
    error_is("{\"a\":1} x", "unexpected text after the object");
    error_is("{\"a\" 1}", "expected ':'");
    error_is("{\"a\":-}", "invalid number");
    error_is("{\"a\":1.}", "invalid number");
    error_is("{\"a\":1e}", "invalid number");
    error_is("", "expected '{'");
    error_is("{\"a\":1", "unexpected end of line");
    error_is("[1,2]", "expected a JSON object, got array");
    error_is("\"s\"", "expected a JSON object, got string");
    error_is("{\"a\":1,\"a\":2}", "duplicate key \"a\"");
    error_is("{\"a\":1,\"\\u0061\":2}", "duplicate key");

    TEST("deep nesting is an error, not a stack overflow");
    {
        size_t depth = 100000;
        char *s = malloc(depth * 2 + 16);
        strcpy(s, "{\"a\":");
        size_t n = strlen(s);
        for (size_t i = 0; i < depth; i++) s[n++] = '[';
        for (size_t i = 0; i < depth; i++) s[n++] = ']';
        s[n++] = '}';
        s[n] = 0;
        error_is(s, "nesting deeper than 512");
        free(s);
    }

    TEST("typed getters and their errors name file, line and field");
    {
        record r;
        record_init(&r);
        gerr e;
        CHECK_EQ_INT(parse(&r, "{\"id\":\"g\\u00e91\",\"r\":0.25,\"n\":null,\"big\":1e400,\"i\":42,\"f\":4.5}", &e), 0);
        strbuf s = {0};
        int present = -1;
        CHECK_EQ_INT(record_get_string(&r, "id", true, &s, &present, &e), 0);
        CHECK_EQ_STR(s.data, "g\xc3\xa9" "1");
        CHECK_EQ_INT(present, 2);
        double d = 0;
        CHECK_EQ_INT(record_get_number(&r, "r", true, &d, &present, &e), 0);
        CHECK_NEAR(d, 0.25, 0);
        CHECK_EQ_INT(record_get_number(&r, "n", false, &d, &present, &e), 0);
        CHECK_EQ_INT(present, 1);
        CHECK_EQ_INT(record_get_number(&r, "absent", false, &d, &present, &e), 0);
        CHECK_EQ_INT(present, 0);
        CHECK_EQ_INT(record_get_number(&r, "n", true, &d, &present, &e), EX_DATAERR);
        CHECK_EQ_STR(e.msg, "in.jsonl:7: field \"n\": expected a number, got null");
        CHECK_EQ_INT(record_get_number(&r, "id", true, &d, &present, &e), EX_DATAERR);
        CHECK_EQ_STR(e.msg, "in.jsonl:7: field \"id\": expected a number, got string");
        CHECK_EQ_INT(record_get_number(&r, "big", true, &d, &present, &e), EX_DATAERR);
        CHECK(strstr(e.msg, "expected a finite number") != NULL);
        CHECK_EQ_INT(record_get_string(&r, "missing", true, &s, &present, &e), EX_DATAERR);
        CHECK_EQ_STR(e.msg, "in.jsonl:7: field \"missing\": expected a string, got nothing (field missing)");
        long long i = 0;
        CHECK_EQ_INT(record_get_int(&r, "i", true, 0, 100, &i, &present, &e), 0);
        CHECK_EQ_INT(i, 42);
        CHECK_EQ_INT(record_get_int(&r, "i", true, 0, 10, &i, &present, &e), EX_DATAERR);
        CHECK_EQ_INT(record_get_int(&r, "f", true, 0, 10, &i, &present, &e), EX_DATAERR);
        cJSON *j = NULL;
        CHECK_EQ_INT(record_get_json(&r, "r", true, &j, &e), 0);
        CHECK(j && cJSON_IsNumber(j));
        cJSON_Delete(j);
        sb_free(&s);
        record_free(&r);
    }

    TEST("setting replaces in place or appends; removing keeps order");
    {
        record r;
        record_init(&r);
        gerr e;
        CHECK_EQ_INT(parse(&r, "{\"a\":1,\"advantage\":9,\"z\":[true]}", &e), 0);
        record_set_number(&r, "advantage", -0.1);
        record_set_string(&r, "note", "tab\there \"q\"", 12);
        record_set_null(&r, "n");
        record_set_int(&r, "k", -12345678901234LL);
        strbuf out = {0};
        record_serialize(&r, &out);
        CHECK_EQ_STR(out.data, "{\"a\":1,\"advantage\":-0.1,\"z\":[true],\"note\":\"tab\\there \\\"q\\\"\",\"n\":null,\"k\":-12345678901234}");
        record_remove(&r, "a");
        record_remove(&r, "nope");
        sb_clear(&out);
        record_serialize(&r, &out);
        CHECK(strncmp(out.data, "{\"advantage\":-0.1,\"z\"", 20) == 0);
        sb_free(&out);
        record_free(&r);
    }

    TEST("record_set_raw_after inserts after its anchor, replaces in place, appends without anchor");
    {
        record r;
        record_init(&r);
        gerr e;
        CHECK_EQ_INT(parse(&r, "{\"id\":\"a\",\"messages\":[],\"x\":1}", &e), 0);
        record_set_raw_after(&r, "messages", "prompt_tokens", "[1,2]", 5);
        strbuf out = {0};
        record_serialize(&r, &out);
        CHECK_EQ_STR(out.data, "{\"id\":\"a\",\"messages\":[],\"prompt_tokens\":[1,2],\"x\":1}");
        record_set_raw_after(&r, "id", "prompt_tokens", "[3]", 3);
        record_set_raw_after(&r, "absent", "y", "true", 4);
        sb_clear(&out);
        record_serialize(&r, &out);
        CHECK_EQ_STR(out.data, "{\"id\":\"a\",\"messages\":[],\"prompt_tokens\":[3],\"x\":1,\"y\":true}");
        sb_free(&out);
        record_free(&r);
    }

    TEST("numbers are written in their shortest round-trip form");
    {
        const double v[] = {0.1, 1.0 / 3, 1e-300, 123456789.0, -2.5e17, 5e-324, 1.7976931348623157e308};
        for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
            strbuf b = {0};
            sb_json_number(&b, v[i]);
            CHECK(strtod(b.data, NULL) == v[i]);
            sb_free(&b);
        }
        strbuf b = {0};
        sb_json_number(&b, 0.1);
        CHECK_EQ_STR(b.data, "0.1");
        sb_clear(&b);
        sb_json_number(&b, -0.0);
        CHECK_EQ_STR(b.data, "0");
        sb_clear(&b);
        sb_json_number(&b, 100);
        CHECK_EQ_STR(b.data, "100");
        sb_clear(&b);
        sb_json_number(&b, -2.5);
        CHECK_EQ_STR(b.data, "-2.5");
        sb_clear(&b);
        sb_json_number(&b, 5e-324);
        CHECK_EQ_STR(b.data, "5e-324");
        sb_clear(&b);
        sb_json_number(&b, 1e-5);
        CHECK_EQ_STR(b.data, "1e-05");
        sb_free(&b);
    }

    TEST("messages: an array is returned; absent or another kind names the field");
    {
        record r;
        record_init(&r);
        gerr e = {0};
        cJSON *m = NULL;
        CHECK(parse(&r, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &e) == 0);
        CHECK(record_get_messages(&r, &m, &e) == 0);
        CHECK(cJSON_IsArray(m) && cJSON_GetArraySize(m) == 1);
        cJSON_Delete(m);
        CHECK(parse(&r, "{\"messages\":\"hi\"}", &e) == 0);
        CHECK_EQ_INT(record_get_messages(&r, &m, &e), EX_DATAERR);
        CHECK(m == NULL);
        CHECK(strstr(e.msg, "in.jsonl:7: field \"messages\": expected an array of {role, content} messages") != NULL);
        CHECK(parse(&r, "{\"id\":\"x\"}", &e) == 0);
        CHECK_EQ_INT(record_get_messages(&r, &m, &e), EX_DATAERR);
        CHECK(strstr(e.msg, "field \"messages\"") != NULL);
        record_free(&r);
    }
    TEST("token id arrays are written as JSON arrays");
    {
        strbuf b = {0};
        const int32_t ids[] = {1, 49151, 0, -3};
        sb_json_int_array(&b, ids, 4);
        CHECK_EQ_STR(b.data, "[1,49151,0,-3]");
        sb_clear(&b);
        sb_json_int_array(&b, ids, 0);
        CHECK_EQ_STR(b.data, "[]");
        sb_free(&b);
    }

    TEST("floats are written in the shortest form that reads back to the same float");
    {
        strbuf b = {0};
        sb_json_float(&b, 0.1f);
        CHECK_EQ_STR(b.data, "0.1");
        sb_clear(&b);
        sb_json_float(&b, -3.622171f);
        CHECK_EQ_STR(b.data, "-3.622171");
        unsigned int x = 12345;
        int bad = 0;
        for (int i = 0; i < 100000; i++) {
            x ^= x << 13, x ^= x >> 17, x ^= x << 5;
            float v;
            memcpy(&v, &x, sizeof v);
            if (!isfinite(v)) continue;
            sb_clear(&b);
            sb_json_float(&b, v);
            bad += strtof(b.data, NULL) != v && v != 0;
        }
        CHECK_EQ_INT(bad, 0);
        sb_free(&b);
    }

    TEST("100000 random doubles round-trip through their written form");
    {
        unsigned long long x = 0x9E3779B97F4A7C15ULL;
        int bad = 0;
        strbuf b = {0};
        for (int i = 0; i < 100000; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            double v;
            memcpy(&v, &x, sizeof v);
            if (!isfinite(v)) continue;
            sb_clear(&b);
            sb_json_number(&b, v);
            bad += strtod(b.data, NULL) != v && v != 0;
        }
        CHECK_EQ_INT(bad, 0);
        sb_free(&b);
    }
    return check_done();
}
