/* The rule rewards: format in each mode, length at its boundaries,
 * repetition on known strings, and every function's score path on records
 * built with record_parse (null, errors naming FILE:LINE and the field). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "io/record.h"
#include "reward/reward.h"
#include "reward/rules.h"

static reward_opts defaults(void) {
    reward_opts p;
    reward_opts_default(&p);
    return p;
}

static double fmt(const char *tags, const char *mode, const char *s) {
    format_spec f;
    gerr e = {0};
    if (format_spec_parse(&f, tags, mode, &e)) {
        printf("#   format_spec_parse: %s\n", e.msg);
        return -99;
    }
    return format_score(&f, s, strlen(s));
}

static void test_format(void) {
    const char *good = "<think>2 + 2 is 4</think><answer>4</answer>";
    const char *spaced = "\n  <think>\nx\n</think>\n\n<answer> 4 </answer>\n";
    const char *prose = "Sure! <think>x</think> so: <answer>4</answer> done";
    const char *swapped = "<answer>4</answer><think>x</think>";
    const char *twice = "<think>a</think><think>b</think><answer>4</answer>";
    const char *unclosed = "<think>x</think><answer>4";
    const char *nested = "<think>x <answer>4</answer></think>";
    const char *closed_first = "</think>x<think><answer>4</answer>";
    const char *empty = "<think></think><answer></answer>";

    TEST("format strict: only white space around and between the pairs");
    CHECK_EQ_INT(fmt("think,answer", "strict", good), 1);
    CHECK_EQ_INT(fmt("think,answer", "strict", spaced), 1);
    CHECK_EQ_INT(fmt("think,answer", "strict", empty), 1);
    CHECK_EQ_INT(fmt("think,answer", "strict", prose), 0);
    CHECK_EQ_INT(fmt("think,answer", "strict", "<think>x</think>So: <answer>4</answer>"), 0);
    CHECK_EQ_INT(fmt("think,answer", "strict", "<think>x</think><answer>4</answer>."), 0);
    CHECK_EQ_INT(fmt("think,answer", "strict", swapped), 0);
    CHECK_EQ_INT(fmt("think,answer", "strict", twice), 0);
    CHECK_EQ_INT(fmt("think,answer", "strict", unclosed), 0);
    CHECK_EQ_INT(fmt("think,answer", "strict", nested), 0);
    CHECK_EQ_INT(fmt("think,answer", "strict", ""), 0);
    CHECK_EQ_INT(fmt("think,answer", "strict", "<THINK>x</THINK><answer>4</answer>"), 0);

    TEST("format soft: pairs once each, in order, anything around them");
    CHECK_EQ_INT(fmt("think,answer", "soft", good), 1);
    CHECK_EQ_INT(fmt("think,answer", "soft", spaced), 1);
    CHECK_EQ_INT(fmt("think,answer", "soft", prose), 1);
    CHECK_EQ_INT(fmt("think,answer", "soft", swapped), 0);
    CHECK_EQ_INT(fmt("think,answer", "soft", twice), 0);
    CHECK_EQ_INT(fmt("think,answer", "soft", unclosed), 0);
    CHECK_EQ_INT(fmt("think,answer", "soft", nested), 0);
    CHECK_EQ_INT(fmt("think,answer", "soft", closed_first), 0);
    CHECK_EQ_INT(fmt("answer", "soft", swapped), 1);
    CHECK_EQ_INT(fmt(" answer , think ", "soft", swapped), 1);

    TEST("format partial: 1/ntags per well-formed tag");
    CHECK_NEAR(fmt("think,answer", "partial", good), 1.0, 0);
    CHECK_NEAR(fmt("think,answer", "partial", unclosed), 0.5, 0);
    CHECK_NEAR(fmt("think,answer", "partial", twice), 0.5, 0);
    CHECK_NEAR(fmt("think,answer", "partial", swapped), 1.0, 0);
    CHECK_NEAR(fmt("think,answer", "partial", nested), 1.0, 0);
    CHECK_NEAR(fmt("think,answer", "partial", closed_first), 0.5, 0);
    CHECK_NEAR(fmt("think,answer", "partial", "no tags"), 0.0, 0);
    CHECK_NEAR(fmt("a,b,c", "partial", "<a>1</a> <c>3</c> <b>"), 2.0 / 3.0, 1e-15);

    TEST("format: bad tags and modes are usage errors");
    format_spec f;
    gerr e = {0};
    CHECK_EQ_INT(format_spec_parse(&f, "think,answer", "loose", &e), EX_USAGE);
    CHECK(strstr(e.msg, "--format-mode") != NULL);
    CHECK_EQ_INT(format_spec_parse(&f, "think,,answer", "soft", &e), EX_USAGE);
    CHECK(strstr(e.msg, "--format-tags") != NULL);
    CHECK_EQ_INT(format_spec_parse(&f, "", "soft", &e), EX_USAGE);
    CHECK_EQ_INT(format_spec_parse(&f, "think,<b>", "soft", &e), EX_USAGE);
    CHECK_EQ_INT(format_spec_parse(&f, "think,think", "soft", &e), EX_USAGE);
    CHECK(strstr(e.msg, "twice") != NULL);
    CHECK_EQ_INT(format_spec_parse(&f, "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q", "soft", &e), EX_USAGE);
    CHECK_EQ_INT(format_spec_parse(&f, "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p", "soft", &e), 0);
}

static void test_length(void) {
    TEST("length: DAPO soft overlong penalty at the boundaries");
    /* max 100, buffer 20: 0 up to 80, then -1/20 per unit, -1 at 100 and past it */
    CHECK_NEAR(length_penalty(0, 100, 20, 0), 0, 0);
    CHECK_NEAR(length_penalty(80, 100, 20, 0), 0, 0);
    CHECK_NEAR(length_penalty(81, 100, 20, 0), -0.05, 1e-15);
    CHECK_NEAR(length_penalty(90, 100, 20, 0), -0.5, 1e-15);
    CHECK_NEAR(length_penalty(99, 100, 20, 0), -0.95, 1e-15);
    CHECK_NEAR(length_penalty(100, 100, 20, 0), -1, 1e-15);
    CHECK_NEAR(length_penalty(101, 100, 20, 0), -1, 0);
    CHECK_NEAR(length_penalty(100000, 100, 20, 0), -1, 0);
    /* no buffer: a hard limit */
    CHECK_NEAR(length_penalty(100, 100, 0, 0), 0, 0);
    CHECK_NEAR(length_penalty(101, 100, 0, 0), -1, 0);
    /* buffer = max: the ramp starts at 0 */
    CHECK_NEAR(length_penalty(0, 10, 10, 0), 0, 0);
    CHECK_NEAR(length_penalty(1, 10, 10, 0), -0.1, 1e-15);

    TEST("length: minimum");
    CHECK_NEAR(length_penalty(4, 0, 0, 5), -1, 0);
    CHECK_NEAR(length_penalty(5, 0, 0, 5), 0, 0);
    CHECK_NEAR(length_penalty(1000000, 0, 0, 5), 0, 0);
    CHECK_NEAR(length_penalty(0, 0, 0, 1), -1, 0);
    CHECK_NEAR(length_penalty(4, 100, 20, 5), -1, 0);
    CHECK_NEAR(length_penalty(90, 100, 20, 5), -0.5, 1e-15);

    TEST("length: code points");
    CHECK_EQ_INT(length_code_points("abc", 3), 3);
    CHECK_EQ_INT(length_code_points("\xc3\xa9t\xc3\xa9", 5), 3);            /* été */
    CHECK_EQ_INT(length_code_points("\xf0\x9f\x98\x80!", 5), 2);             /* emoji + ! */
    CHECK_EQ_INT(length_code_points("\xe4\xb8\xad\xe6\x96\x87", 6), 2);     /* 中文 */
    CHECK_EQ_INT(length_code_points("", 0), 0);
}

static double rep(const char *s, long long n, double max_penalty) {
    return repetition_penalty(s, strlen(s), n, max_penalty);
}

static void test_repetition(void) {
    TEST("repetition: known strings");
    /* 6 words, 4 trigrams, all distinct */
    CHECK_NEAR(rep("the cat sat on the mat", 3, -1), 0, 0);
    /* "a b c a b c a b c": 7 trigrams, 3 distinct -> (1 - 3/7) * -1 */
    CHECK_NEAR(rep("a b c a b c a b c", 3, -1), -(1 - 3.0 / 7), 1e-15);
    /* case and white space are folded: same as above */
    CHECK_NEAR(rep("A b\tC\na  B c a B\r\nc", 3, -1), -(1 - 3.0 / 7), 1e-15);
    /* one word repeated 10 times, bigrams: 9 total, 1 distinct, penalty -0.5 */
    CHECK_NEAR(rep("go go go go go go go go go go", 2, -0.5), -0.5 * (1 - 1.0 / 9), 1e-15);
    /* unigrams */
    CHECK_NEAR(rep("x y x y", 1, -1), -0.5, 1e-15);
    /* fewer words than n, and the empty text */
    CHECK_NEAR(rep("just two", 3, -1), 0, 0);
    CHECK_NEAR(rep("", 3, -1), 0, 0);
    CHECK_NEAR(rep("   \n ", 1, -1), 0, 0);
    /* exactly n words: one n-gram, unique */
    CHECK_NEAR(rep("a a a", 3, -1), 0, 0);
    /* words that differ only after the first bytes stay distinct */
    CHECK_NEAR(rep("abcd abce abcd abce", 1, -1), -0.5, 1e-15);

    TEST("repetition: a long text against a direct count");
    /* 2000 words from a 7-word vocabulary in a fixed pattern; count trigrams naively */
    static const char *const VOCAB[] = {"alpha", "Beta", "gamma", "delta", "eps", "zeta", "eta"};
    strbuf t = {0};
    int idx[2000];
    unsigned x = 12345;
    for (int i = 0; i < 2000; i++) {
        x = x * 1103515245u + 12345u;
        idx[i] = (int)((x >> 16) % 7);
        sb_printf(&t, "%s%s", i ? " " : "", VOCAB[idx[i]]);
    }
    int total = 1998, distinct = 0;
    for (int i = 0; i < total; i++) {
        bool seen = false;
        for (int j = 0; j < i && !seen; j++)
            seen = idx[j] == idx[i] && idx[j + 1] == idx[i + 1] && idx[j + 2] == idx[i + 2];
        distinct += !seen;
    }
    CHECK_NEAR(repetition_penalty(t.data, t.len, 3, -1), -(1 - (double)distinct / total), 1e-12);
    sb_free(&t);
}

/* ---- the score path through records -------------------------------------- */

typedef struct {
    record rec;
    strbuf completion;
    reward_item item;
} held;

static void hold(held *h, const char *json, long line) {
    record_init(&h->rec);
    gerr e = {0};
    if (record_parse(&h->rec, json, strlen(json), "in.jsonl", line, &e)) printf("#   record_parse: %s\n", e.msg);
    memset(&h->item, 0, sizeof h->item);
    h->item.rec = &h->rec;
    strbuf *c = &h->completion;
    memset(c, 0, sizeof *c);
    int present = 0;
    record_get_string(&h->rec, "completion", false, c, &present, &e);
    sb_append(c, "", 0);
    h->item.completion = c->data;
    h->item.completion_len = c->len;
    h->item.has_completion = present == 2;
    h->item.n_tokens = -1;
    const rec_field *f = record_find(&h->rec, "completion_tokens");
    if (f && f->val[0] == '[') {
        long long n = f->val_len > 2;
        for (size_t i = 0; i < f->val_len; i++) n += f->val[i] == ',';
        h->item.n_tokens = n;
    }
}

/* Scores one record with fn: the value, or NAN with *rc and e set. */
static double score(reward_fn *fn, const char *json, long line, int *rc, gerr *e) {
    held h;
    hold(&h, json, line);
    double v = -99;
    *rc = fn->score(fn->self, &h.item, 1, &v, e);
    record_free(&h.rec);
    sb_free(&h.completion);
    return v;
}

static void test_answer_records(void) {
    reward_opts p = defaults();
    reward_fn fn = {0};
    gerr e = {0};
    int rc;
    TEST("answer fn: opens, scores string and number references");
    CHECK_EQ_INT(reward_open_answer(&fn, &p, &e), 0);
    CHECK_NEAR(score(&fn, "{\"answer\":\"1250\",\"completion\":\"<answer>$1,250</answer>\"}", 1, &rc, &e), 1, 0);
    CHECK_EQ_INT(rc, 0);
    CHECK_NEAR(score(&fn, "{\"answer\":1250,\"completion\":\"#### 1,250\"}", 2, &rc, &e), 1, 0);
    CHECK_NEAR(score(&fn, "{\"answer\":\"\\\\frac{1}{2}\",\"completion\":\"so \\\\boxed{0.5}\"}", 3, &rc, &e), 1, 0);
    CHECK_NEAR(score(&fn, "{\"answer\":\"1250\",\"completion\":\"<answer>125</answer> 1250\"}", 4, &rc, &e), 0, 0);
    CHECK_NEAR(score(&fn, "{\"answer\":\"7\",\"completion\":\"nothing at all\"}", 5, &rc, &e), 0, 0);
    CHECK_NEAR(score(&fn, "{\"answer\":\"7\"}", 6, &rc, &e), 0, 0); /* no completion: the empty one */

    TEST("answer fn: the K samples of a prompt share a reference (cache stays right)");
    CHECK_NEAR(score(&fn, "{\"answer\":\"5\",\"completion\":\"5\"}", 7, &rc, &e), 1, 0);
    CHECK_NEAR(score(&fn, "{\"answer\":\"5\",\"completion\":\"6\"}", 8, &rc, &e), 0, 0);
    CHECK_NEAR(score(&fn, "{\"answer\":\"6\",\"completion\":\"6\"}", 9, &rc, &e), 1, 0);
    CHECK_NEAR(score(&fn, "{\"answer\":\"6\",\"completion\":\"5\"}", 10, &rc, &e), 0, 0);

    TEST("answer fn: null when there is no reference");
    CHECK(reward_is_null(score(&fn, "{\"completion\":\"<answer>4</answer>\"}", 11, &rc, &e)));
    CHECK_EQ_INT(rc, 0);
    CHECK(reward_is_null(score(&fn, "{\"answer\":null,\"completion\":\"4\"}", 12, &rc, &e)));
    /* a lone `numbers` beside an answer is not a countdown record */
    CHECK_NEAR(score(&fn, "{\"answer\":\"4\",\"numbers\":\"x\",\"completion\":\"4\"}", 13, &rc, &e), 1, 0);

    TEST("answer fn: wrong-type fields are 65 naming FILE:LINE and the field");
    score(&fn, "{\"answer\":[1],\"completion\":\"1\"}", 14, &rc, &e);
    CHECK_EQ_INT(rc, EX_DATAERR);
    CHECK(strstr(e.msg, "in.jsonl:14:") == e.msg);
    CHECK(strstr(e.msg, "\"answer\"") && strstr(e.msg, "got array"));
    score(&fn, "{\"answer\":true,\"completion\":\"1\"}", 15, &rc, &e);
    CHECK_EQ_INT(rc, EX_DATAERR);
    score(&fn, "{\"numbers\":[1,2],\"target\":\"3\",\"completion\":\"1+2\"}", 16, &rc, &e);
    CHECK_EQ_INT(rc, EX_DATAERR);
    CHECK(strstr(e.msg, "in.jsonl:16:") == e.msg && strstr(e.msg, "\"target\""));
    score(&fn, "{\"numbers\":[1,\"2\"],\"target\":3,\"completion\":\"1+2\"}", 17, &rc, &e);
    CHECK_EQ_INT(rc, EX_DATAERR);
    CHECK(strstr(e.msg, "in.jsonl:17:") == e.msg && strstr(e.msg, "\"numbers\": element 1"));
    score(&fn, "{\"numbers\":[1,2.5],\"target\":3,\"completion\":\"1+2\"}", 18, &rc, &e);
    CHECK_EQ_INT(rc, EX_DATAERR);
    score(&fn, "{\"numbers\":[],\"target\":3,\"completion\":\"1+2\"}", 19, &rc, &e);
    CHECK_EQ_INT(rc, EX_DATAERR);
    CHECK(strstr(e.msg, "\"numbers\"") != NULL);
    score(&fn, "{\"numbers\":{\"a\":1},\"target\":3,\"completion\":\"1+2\"}", 20, &rc, &e);
    CHECK_EQ_INT(rc, EX_DATAERR);
    score(&fn, "{\"numbers\":[1,2],\"completion\":\"1+2\"}", 21, &rc, &e); /* target missing */
    CHECK_EQ_INT(rc, EX_DATAERR);
    CHECK(strstr(e.msg, "in.jsonl:21:") == e.msg && strstr(e.msg, "\"target\"") && strstr(e.msg, "missing"));
    score(&fn, "{\"numbers\":[1,2],\"target\":10000000000000000,\"completion\":\"1+2\"}", 22, &rc, &e);
    CHECK_EQ_INT(rc, EX_DATAERR);

    TEST("answer fn: countdown records");
    CHECK_NEAR(score(&fn,
                     "{\"numbers\":[25,3,7,50],\"target\":204,"
                     "\"completion\":\"<think>hm</think><answer>(25 - 3) * 7 + 50</answer>\"}",
                     23, &rc, &e),
               1, 0);
    CHECK_NEAR(score(&fn, "{\"numbers\":[25,3,7,50],\"target\":204,\"completion\":\"I think\\n(25-3)*7+50 = 204\"}", 24,
                     &rc, &e),
               1, 0);
    CHECK_NEAR(score(&fn, "{\"numbers\":[25,3,7,50],\"target\":204,\"completion\":\"<answer>204</answer>\"}", 25, &rc,
                     &e),
               0, 0);
    CHECK_NEAR(score(&fn, "{\"numbers\":[25,3,7,50],\"target\":204,\"completion\":\"\"}", 26, &rc, &e), 0, 0);
    /* the countdown check wins over an `answer` the record may carry */
    CHECK_NEAR(score(&fn,
                     "{\"answer\":\"204\",\"numbers\":[25,3,7,50],\"target\":204,\"completion\":\"<answer>204</answer>\"}",
                     27, &rc, &e),
               0, 0);
    CHECK_EQ_INT(rc, 0);

    TEST("answer fn: stats count sources and countdown results");
    cJSON *obj = cJSON_CreateObject();
    fn.stats(fn.self, obj);
    const cJSON *a = cJSON_GetObjectItem(obj, "answer");
    CHECK(a != NULL);
    const cJSON *from = a ? cJSON_GetObjectItem(a, "extracted_from") : NULL;
    CHECK(from && cJSON_GetObjectItem(from, "answer_tag")->valuedouble >= 2);
    const cJSON *cd = a ? cJSON_GetObjectItem(a, "countdown") : NULL;
    CHECK(cd && cJSON_GetObjectItem(cd, "ok")->valuedouble == 2);
    CHECK(cd && cJSON_GetObjectItem(cd, "numbers")->valuedouble == 2);
    CHECK(cd && cJSON_GetObjectItem(cd, "empty")->valuedouble == 1);
    CHECK(a && cJSON_GetObjectItem(a, "null")->valuedouble == 2);
    cJSON_Delete(obj);
    fn.close(fn.self);

    TEST("answer fn: a bad tolerance is a usage error");
    p.answer_tol = -1;
    CHECK_EQ_INT(reward_open_answer(&fn, &p, &e), EX_USAGE);
    CHECK(strstr(e.msg, "--answer-tol") != NULL);
}

static void test_other_records(void) {
    reward_opts p = defaults();
    reward_fn fn = {0};
    gerr e = {0};
    int rc;
    TEST("format fn on records");
    p.format_mode = "strict";
    CHECK_EQ_INT(reward_open_format(&fn, &p, &e), 0);
    CHECK_NEAR(score(&fn, "{\"completion\":\"<think>a</think>\\n<answer>4</answer>\"}", 1, &rc, &e), 1, 0);
    CHECK_NEAR(score(&fn, "{\"completion\":\"x<think>a</think><answer>4</answer>\"}", 2, &rc, &e), 0, 0);
    CHECK_NEAR(score(&fn, "{\"id\":\"a\"}", 3, &rc, &e), 0, 0);
    fn.close(fn.self);
    p.format_mode = "wild";
    CHECK_EQ_INT(reward_open_format(&fn, &p, &e), EX_USAGE);
    p.format_mode = "soft";

    TEST("length fn: tokens, chars, and its usage errors");
    p.length_max = 4;
    p.length_buffer = 2;
    CHECK_EQ_INT(reward_open_length(&fn, &p, &e), 0);
    CHECK_NEAR(score(&fn, "{\"completion\":\"abcdefgh\",\"completion_tokens\":[1,2]}", 1, &rc, &e), 0, 0);
    CHECK_NEAR(score(&fn, "{\"completion\":\"a\",\"completion_tokens\":[1,2,3]}", 2, &rc, &e), -0.5, 0);
    CHECK_NEAR(score(&fn, "{\"completion\":\"a\",\"completion_tokens\":[1,2,3,4,5]}", 3, &rc, &e), -1, 0);
    score(&fn, "{\"completion\":\"abc\"}", 4, &rc, &e);
    CHECK_EQ_INT(rc, EX_DATAERR);
    CHECK(strstr(e.msg, "in.jsonl:4:") == e.msg && strstr(e.msg, "\"completion_tokens\""));
    fn.close(fn.self);
    p.length_unit = "chars";
    CHECK_EQ_INT(reward_open_length(&fn, &p, &e), 0);
    CHECK_NEAR(score(&fn, "{\"completion\":\"\\u00e9\\u00e9\\u00e9\"}", 5, &rc, &e), -0.5, 0); /* 3 code points */
    CHECK_NEAR(score(&fn, "{\"completion\":\"ab\",\"completion_tokens\":[1,2,3,4,5,6]}", 6, &rc, &e), 0, 0);
    fn.close(fn.self);
    p.length_unit = "words";
    CHECK_EQ_INT(reward_open_length(&fn, &p, &e), EX_USAGE);
    CHECK(strstr(e.msg, "--length-unit") != NULL);
    p.length_unit = "tokens";
    p.length_buffer = 5;
    CHECK_EQ_INT(reward_open_length(&fn, &p, &e), EX_USAGE);
    CHECK(strstr(e.msg, "--overlong-buffer") && strstr(e.msg, "--max-len"));
    p.length_max = 0;
    p.length_buffer = 0;
    CHECK_EQ_INT(reward_open_length(&fn, &p, &e), EX_USAGE);
    CHECK(strstr(e.msg, "--max-len") && strstr(e.msg, "--min-len"));
    p.length_min = 3;
    CHECK_EQ_INT(reward_open_length(&fn, &p, &e), 0);
    CHECK_NEAR(score(&fn, "{\"completion_tokens\":[1,2]}", 7, &rc, &e), -1, 0);
    CHECK_NEAR(score(&fn, "{\"completion_tokens\":[1,2,3]}", 8, &rc, &e), 0, 0);
    fn.close(fn.self);
    p.length_max = 2;
    CHECK_EQ_INT(reward_open_length(&fn, &p, &e), EX_USAGE); /* min above max */
    p.length_max = -1;
    CHECK_EQ_INT(reward_open_length(&fn, &p, &e), EX_USAGE);

    TEST("repetition fn and its usage errors");
    p = defaults();
    CHECK_EQ_INT(reward_open_repetition(&fn, &p, &e), 0);
    CHECK_NEAR(score(&fn, "{\"completion\":\"a b c a b c a b c\"}", 1, &rc, &e), -(1 - 3.0 / 7), 1e-15);
    CHECK_NEAR(score(&fn, "{\"completion\":\"one two three four\"}", 2, &rc, &e), 0, 0);
    fn.close(fn.self);
    p.rep_max_penalty = 0.5;
    CHECK_EQ_INT(reward_open_repetition(&fn, &p, &e), EX_USAGE);
    CHECK(strstr(e.msg, "--rep-penalty") != NULL);
    p.rep_max_penalty = -1;
    p.rep_ngram = 0;
    CHECK_EQ_INT(reward_open_repetition(&fn, &p, &e), EX_USAGE);
    CHECK(strstr(e.msg, "--rep-ngram") != NULL);
}

int main(void) {
    test_format();
    test_length();
    test_repetition();
    test_answer_records();
    test_other_records();
    return check_done();
}
