/* lib/train/completion_mask: reading a multi-turn record's completion_mask
 * and its logprobs (null allowed only where the mask is 0), every failure
 * naming FILE:LINE and the field, and picking the mask-1 entries. */
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>

#include "check.h"
#include "io/record.h"
#include "io/completion_mask.h"

static int parse(record *r, const char *s, gerr *e) { return record_parse(r, s, strlen(s), "in.jsonl", 7, e); }

/* The mask of a one-field record, or the error's code (0 when read). */
static int read_mask(const char *json, size_t n, uint8_t **mask, gerr *e) {
    record r;
    record_init(&r);
    int rc = parse(&r, json, e);
    if (!rc) rc = completion_mask_read(&r, n, mask, e);
    record_free(&r);
    return rc;
}

static int read_logprobs(const char *json, const uint8_t *mask, int n, float *out, gerr *e) {
    record r;
    record_init(&r);
    int rc = parse(&r, json, e);
    if (!rc) rc = completion_mask_logprobs(&r, mask, n, out, e);
    record_free(&r);
    return rc;
}

static void test_read(void) {
    TEST("completion_mask: absent or null is no mask; 0s and 1s are read");
    gerr e = {0};
    uint8_t *m = (uint8_t *)1;
    CHECK_EQ_INT(read_mask("{\"a\":1}", 3, &m, &e), 0);
    CHECK(m == NULL);
    CHECK_EQ_INT(read_mask("{\"completion_mask\":null}", 3, &m, &e), 0);
    CHECK(m == NULL);
    CHECK_EQ_INT(read_mask("{\"completion_mask\":[1,0,0,1]}", 4, &m, &e), 0);
    CHECK(m && m[0] == 1 && m[1] == 0 && m[2] == 0 && m[3] == 1);
    free(m);
    CHECK_EQ_INT(read_mask("{\"completion_mask\":[]}", 0, &m, &e), 0);
    CHECK(m != NULL);
    free(m);
}

static void test_read_errors(void) {
    TEST("completion_mask: wrong length, values other than 0/1, not an array: 65 naming file, line, field");
    gerr e = {0};
    uint8_t *m = NULL;
    CHECK_EQ_INT(read_mask("{\"completion_mask\":[1,0]}", 3, &m, &e), EX_DATAERR);
    CHECK(strstr(e.msg, "in.jsonl:7: field \"completion_mask\": expected one entry per completion token (3), got 2"));
    CHECK(m == NULL);
    const char *bad[] = {"[1,2,0]", "[1,0.5,0]", "[1,\"0\",0]", "[1,true,0]", "[1,null,0]", "[1,-1,0]"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char json[64];
        snprintf(json, sizeof json, "{\"completion_mask\":%s}", bad[i]);
        gerr e2 = {0};
        CHECK_EQ_INT(read_mask(json, 3, &m, &e2), EX_DATAERR);
        CHECK(strstr(e2.msg, "in.jsonl:7: field \"completion_mask\": entry 1: expected 0 or 1"));
        CHECK(m == NULL);
    }
    CHECK_EQ_INT(read_mask("{\"completion_mask\":\"110\"}", 3, &m, &e), EX_DATAERR);
    CHECK(strstr(e.msg, "in.jsonl:7: field \"completion_mask\": expected an array"));
}

static void test_logprobs(void) {
    TEST("logprobs: null or any number where the mask is 0, a log-probability where it is 1");
    gerr e = {0};
    const uint8_t mask[4] = {1, 0, 0, 1};
    float out[4];
    CHECK_EQ_INT(read_logprobs("{\"logprobs\":[-0.5,null,3,-1.25]}", mask, 4, out, &e), 0);
    CHECK(out[0] == -0.5f && out[1] == 0 && out[2] == 0 && out[3] == -1.25f);
    CHECK_EQ_INT(read_logprobs("{\"logprobs\":[null,null,null,-1]}", mask, 4, out, &e), EX_DATAERR);
    CHECK(strstr(e.msg, "in.jsonl:7: field \"logprobs\": entry 0: expected a finite log-probability <= 0 (completion_mask 1"));
    CHECK_EQ_INT(read_logprobs("{\"logprobs\":[-1,\"x\",null,-1]}", mask, 4, out, &e), EX_DATAERR);
    CHECK(strstr(e.msg, "in.jsonl:7: field \"logprobs\": entry 1: expected null or a number (completion_mask 0)"));
    CHECK_EQ_INT(read_logprobs("{\"logprobs\":[-1,null,-1]}", mask, 4, out, &e), EX_DATAERR);
    CHECK(strstr(e.msg, "field \"logprobs\": expected one per completion token (4), got 3"));
    CHECK_EQ_INT(read_logprobs("{\"logprobs\":[-1,0.5,null,-1]}", NULL, 4, out, &e), EX_DATAERR);
    CHECK(strstr(e.msg, "entry 1: expected a finite log-probability <= 0") && !strstr(e.msg, "completion_mask"));
    CHECK_EQ_INT(read_logprobs("{\"a\":1}", NULL, 4, out, &e), EX_DATAERR);
}

static void test_select(void) {
    TEST("select keeps the mask-1 entries in order; count counts them; NULL keeps all");
    float v[6] = {1, 2, 3, 4, 5, 6};
    const uint8_t mask[6] = {0, 1, 1, 0, 0, 1};
    CHECK_EQ_INT(completion_mask_count(mask, 6), 3);
    CHECK_EQ_INT(completion_mask_select(v, mask, 6), 3);
    CHECK(v[0] == 2 && v[1] == 3 && v[2] == 6);
    CHECK_EQ_INT(completion_mask_count(NULL, 6), 6);
    CHECK_EQ_INT(completion_mask_select(v, NULL, 6), 6);
    CHECK(v[0] == 2 && v[5] == 6);
}

int main(void) {
    test_read();
    test_read_errors();
    test_logprobs();
    test_select();
    return check_done();
}
