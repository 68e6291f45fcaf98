/* The judge's pure pieces: template rendering, the request body and its
 * cache key, score parsing, backoff and Retry-After. The HTTP client is
 * test_judge_http.c; the whole function is test_judge_fn.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>

#include "check.h"
#include "http/http.h"
#include "io/record.h"
#include "judge/request.h"
#include "judge/score.h"
#include "judge/template.h"
#include "reward/reward.h"
#include "util/sha256.h"

/* Renders `tpl` over one record (JSON text); returns the exit code, fills out / e. */
static int render(const char *tpl, const char *json, strbuf *out, gerr *e) {
    judge_template *t = NULL;
    int rc = judge_template_parse(&t, tpl, strlen(tpl), "tpl.txt", e);
    if (rc) return rc;
    record r;
    record_init(&r);
    rc = record_parse(&r, json, strlen(json), "in.jsonl", 7, e);
    if (!rc) {
        strbuf comp = {0};
        int present = 0;
        const char *completion = NULL;
        if (record_get_string(&r, "completion", false, &comp, &present, NULL) == 0 && present == 2)
            completion = comp.data ? comp.data : "";
        rc = judge_template_render(t, &r, completion, comp.len, out, e);
        sb_free(&comp);
    }
    record_free(&r);
    judge_template_free(t);
    return rc;
}

static const char *REC =
    "{\"id\":\"q1\",\"messages\":[{\"role\":\"system\",\"content\":\"be terse\"},"
    "{\"role\":\"user\",\"content\":\"first\"},{\"role\":\"assistant\",\"content\":\"x\"},"
    "{\"role\":\"user\",\"content\":\"What is \\\"2+2\\\"?\\nSay \\u00e9.\"}],"
    "\"answer\":\"4\",\"n\":1.50,\"tags\":[\"a\", 2],\"ok\":true,\"none\":null,\"completion\":\"four\\tfour\"}";

static void test_template(void) {
    strbuf out = {0};
    gerr e = {0};
    TEST("template: placeholders, decoded strings, raw JSON for other values, doubled braces");
    CHECK_EQ_INT(render("Q: {prompt}\nA: {completion}\nRef: {answer} n={n} t={tags} {ok}/{none} {{\"x\": 1}}", REC,
                        &out, &e),
                 0);
    CHECK_EQ_STR(out.data,
                 "Q: What is \"2+2\"?\nSay \xc3\xa9.\nA: four\tfour\nRef: 4 n=1.50 t=[\"a\", 2] true/null {\"x\": 1}");

    TEST("template: text alone, and an empty template");
    CHECK_EQ_INT(render("no placeholders }} here", REC, &out, &e), 0);
    CHECK_EQ_STR(out.data, "no placeholders } here");
    CHECK_EQ_INT(render("", REC, &out, &e), 0);
    CHECK_EQ_INT(out.len, 0);

    TEST("template: {prompt} falls back to a top-level prompt field when there are no messages");
    CHECK_EQ_INT(render("[{prompt}]", "{\"prompt\":\"plain \\\"text\\\"\"}", &out, &e), 0);
    CHECK_EQ_STR(out.data, "[plain \"text\"]");

    TEST("template: errors in the template name its line");
    const char *bad[] = {"line one\nscore as {\"score\": 1}", "a\nb }", "x\n{}", "x\n{name", "x\n{na me}", "{a.b}"};
    const char *where[] = {"tpl.txt:2:", "tpl.txt:2:", "tpl.txt:2:", "tpl.txt:2:", "tpl.txt:2:", "tpl.txt:1:"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        e = (gerr){0};
        CHECK_EQ_INT(render(bad[i], REC, &out, &e), EX_DATAERR);
        CHECK(strstr(e.msg, where[i]) == e.msg);
    }

    TEST("template: a record without a field the template uses names the record, the field and the template line");
    e = (gerr){0};
    CHECK_EQ_INT(render("x\ny {difficulty}", REC, &out, &e), EX_DATAERR);
    CHECK(strstr(e.msg, "in.jsonl:7:") == e.msg);
    CHECK(strstr(e.msg, "\"difficulty\"") != NULL);
    CHECK(strstr(e.msg, "tpl.txt:2") != NULL);

    TEST("template: {prompt} without a user message, with non-string content, with neither messages nor prompt");
    const char *recs[] = {"{\"messages\":[{\"role\":\"system\",\"content\":\"s\"}]}",
                          "{\"messages\":[{\"role\":\"user\",\"content\":[1]}]}", "{\"messages\":\"hi\"}",
                          "{\"id\":\"x\"}"};
    for (size_t i = 0; i < sizeof recs / sizeof *recs; i++) {
        e = (gerr){0};
        CHECK_EQ_INT(render("{prompt}", recs[i], &out, &e), EX_DATAERR);
        CHECK(strstr(e.msg, "in.jsonl:7: field \"messages\"") == e.msg);
    }

    TEST("template: {completion} missing or not a string");
    e = (gerr){0};
    CHECK_EQ_INT(render("{completion}", "{\"id\":\"x\"}", &out, &e), EX_DATAERR);
    CHECK(strstr(e.msg, "field \"completion\"") != NULL);
    e = (gerr){0};
    CHECK_EQ_INT(render("{completion}", "{\"completion\":3}", &out, &e), EX_DATAERR);
    CHECK(strstr(e.msg, "field \"completion\": expected a string, got number") != NULL);

    TEST("template: {turns} is a multi-turn record's turns as written, else the completion as one assistant message");
    CHECK_EQ_INT(render("T={turns} C={completion}",
                        "{\"completion\":\"42\",\"turns\":[{\"role\":\"assistant\",\"content\":\"calc 6*7\"},"
                        "{\"role\":\"tool\",\"content\":\"42\"}, {\"role\":\"assistant\",\"content\":\"42\"}]}",
                        &out, &e),
                 0);
    CHECK_EQ_STR(out.data, "T=[{\"role\":\"assistant\",\"content\":\"calc 6*7\"},{\"role\":\"tool\",\"content\":\"42\"}, "
                           "{\"role\":\"assistant\",\"content\":\"42\"}] C=42");
    CHECK_EQ_INT(render("{turns}", REC, &out, &e), 0);
    CHECK_EQ_STR(out.data, "[{\"role\":\"assistant\",\"content\":\"four\\tfour\"}]");
    CHECK_EQ_INT(render("{turns}", "{\"turns\":null,\"completion\":\"a\\\"b\"}", &out, &e), 0);
    CHECK_EQ_STR(out.data, "[{\"role\":\"assistant\",\"content\":\"a\\\"b\"}]");
    e = (gerr){0};
    CHECK_EQ_INT(render("x\n{turns}", "{\"turns\":\"hi\"}", &out, &e), EX_DATAERR);
    CHECK(strstr(e.msg, "in.jsonl:7: field \"turns\": expected an array of messages, got string") == e.msg);
    e = (gerr){0};
    CHECK_EQ_INT(render("x\n{turns}", "{\"id\":\"x\"}", &out, &e), EX_DATAERR);
    CHECK(strstr(e.msg, "in.jsonl:7: field \"turns\": the judge template (tpl.txt:2) uses it") == e.msg);

    TEST("template: the hash is the SHA-256 of the file's bytes; a missing file is EX_NOINPUT");
    const char *text = "Rate {completion} 1-10.";
    judge_template *t = NULL;
    CHECK_EQ_INT(judge_template_parse(&t, text, strlen(text), "t", &e), 0);
    unsigned char want[32];
    sha256(text, strlen(text), want);
    CHECK(t && !memcmp(judge_template_sha256(t), want, 32));
    judge_template_free(t);
    t = NULL;
    e = (gerr){0};
    CHECK_EQ_INT(judge_template_load(&t, "/nonexistent/judge-template.txt", &e), EX_NOINPUT);
    CHECK(strstr(e.msg, "--judge-template: /nonexistent/judge-template.txt") == e.msg);
    sb_free(&out);
}

static void key_hex(const uint8_t key[32], char hex[65]) { sha256_hex(key, 32, hex); }

static void test_request(void) {
    judge_request_opts p = {.model = "judge-1", .system = "You grade.", .temperature = 0.7, .max_tokens = 16};
    sha256("T", 1, p.template_sha256);
    char th[65];
    sha256_hex(p.template_sha256, 32, th);
    strbuf body = {0}, canon = {0};
    uint8_t key[32], key2[32];

    TEST("request: the body is compact chat completions, fields in a fixed order, strings escaped");
    judge_request_build(&p, "Is \"7\" right?\n", 14, &body, &canon, key);
    CHECK_EQ_STR(body.data, "{\"model\":\"judge-1\",\"messages\":[{\"role\":\"system\",\"content\":\"You grade.\"},"
                            "{\"role\":\"user\",\"content\":\"Is \\\"7\\\" right?\\n\"}],\"temperature\":0.7,"
                            "\"max_tokens\":16}");

    TEST("request: the canonical request is the body plus the template hash; the key is its SHA-256");
    strbuf want = {0};
    sb_append(&want, body.data, body.len - 1);
    sb_printf(&want, ",\"template_sha256\":\"%s\"}", th);
    CHECK_EQ_STR(canon.data, want.data);
    uint8_t k[32];
    sha256(want.data, want.len, k);
    CHECK(!memcmp(k, key, 32));
    /* the key of this exact request, computed independently (python3 hashlib) */
    char hex[65];
    key_hex(key, hex);
    CHECK_EQ_STR(hex, "4acc5a87ff1322b142f80217f828da0ae375668ce85411703b43617a3fdcd740");

    TEST("request: no system message when there is none; temperature 0 is written as 0");
    judge_request_opts q = p;
    q.system = NULL;
    q.temperature = 0;
    judge_request_build(&q, "u", 1, &body, &canon, key2);
    CHECK_EQ_STR(body.data, "{\"model\":\"judge-1\",\"messages\":[{\"role\":\"user\",\"content\":\"u\"}],"
                            "\"temperature\":0,\"max_tokens\":16}");

    TEST("request: every part of the request changes the key; the same request gives the same key");
    judge_request_build(&p, "u", 1, &body, &canon, key);
    judge_request_build(&p, "u", 1, &body, &canon, key2);
    CHECK(!memcmp(key, key2, 32));
    judge_request_opts vary[5];
    for (int i = 0; i < 5; i++) vary[i] = p;
    vary[0].model = "judge-2";
    vary[1].system = "You grade!";
    vary[2].temperature = 0.70000000001;
    vary[3].max_tokens = 17;
    vary[4].template_sha256[31] ^= 1;
    for (int i = 0; i < 5; i++) {
        judge_request_build(&vary[i], "u", 1, &body, &canon, key2);
        CHECK(memcmp(key, key2, 32) != 0);
    }
    judge_request_build(&p, "v", 1, &body, &canon, key2);
    CHECK(memcmp(key, key2, 32) != 0);

    TEST("request: token estimate is body bytes / 4 plus max_tokens");
    CHECK_NEAR(judge_request_token_estimate(400, 16), 116.0, 0);

    TEST("url: trailing slashes go, /chat/completions is appended");
    strbuf u = {0};
    judge_chat_url("http://127.0.0.1:8000/v1/", &u);
    CHECK_EQ_STR(u.data, "http://127.0.0.1:8000/v1/chat/completions");
    sb_clear(&u);
    judge_chat_url("https://api.example.com//", &u);
    CHECK_EQ_STR(u.data, "https://api.example.com/chat/completions");

    TEST("url: messages show no user:password and no query or fragment");
    sb_clear(&u);
    http_url_for_messages("https://me:sk-secret@host:8/v1/chat/completions?api-key=sk-secret#f", &u);
    CHECK_EQ_STR(u.data, "https://host:8/v1/chat/completions");
    sb_clear(&u);
    http_url_for_messages("http://a@b@host/v1?x", &u);
    CHECK_EQ_STR(u.data, "http://host/v1");
    sb_clear(&u);
    http_url_for_messages("http://host", &u);
    CHECK_EQ_STR(u.data, "http://host");
    sb_free(&u);
    sb_free(&want);
    sb_free(&body);
    sb_free(&canon);
}

static double first(const char *s) {
    double v;
    return judge_first_number(s, strlen(s), &v) ? v : NAN;
}

static double scored(const char *regex, double scale, const char *reply) {
    judge_scorer *s = NULL;
    gerr e = {0};
    if (judge_scorer_open(&s, regex, scale, &e)) return -12345;
    double v = judge_scorer_score(s, reply, strlen(reply));
    judge_scorer_free(s);
    return v;
}

static void test_score(void) {
    TEST("score: the first number anywhere in the reply");
    struct {
        const char *text;
        double want;
    } cases[] = {
        {"7", 7},          {"Score: 8/10", 8},     {"-3.5 points", -3.5}, {"+2", 2},
        {".5 of 1", 0.5},  {"1e3", 1000},          {"2E-2", 0.02},        {"1e", 1},
        {"9.", 9},         {"v 2.0.", 2},          {"score:-1", -1},      {"GPT-4 says 6", 4},
        {"3-5", 3},        {"--7", -7},            {"0007", 7},           {"x1,000", 1},
        {"-.25", -0.25},   {"\n\t 42\n", 42},      {"1.5e+1x", 15},       {"ab.c 3", 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        double v = first(cases[i].text);
        if (!(v == cases[i].want)) printf("#   \"%s\": got %.17g, want %.17g\n", cases[i].text, v, cases[i].want);
        CHECK(v == cases[i].want);
    }

    TEST("score: no number, or one that is not finite, is no score");
    const char *none[] = {"", "no number", "- . e", "+", "-.", "1e999", "x-"};
    for (size_t i = 0; i < sizeof none / sizeof *none; i++) CHECK(isnan(first(none[i])));

    TEST("score: the default scorer scales, and gives null without a number");
    CHECK_NEAR(scored(NULL, 0.1, "I give it 7 out of 10"), 0.7, 1e-15);
    CHECK_NEAR(scored(NULL, -2, "3"), -6, 0);
    CHECK(reward_is_null(scored(NULL, 1, "cannot say")));
    CHECK(reward_is_null(scored(NULL, 1e300, "1e10")));

    TEST("score: --judge-regex takes the first group, else the whole match; the text must be one number");
    CHECK_NEAR(scored("Score:\\s*(\\S+)", 1, "thinking 1 2 3 Score: 7.5 "), 7.5, 0);
    CHECK(reward_is_null(scored("Score:\\s*(\\S+)", 1, "Score: 7/10")));
    CHECK_NEAR(scored("\\d+(?=/10)", 1, "1st try: 8/10"), 8, 0);
    CHECK_NEAR(scored("(?:yes|no)\\s*\\(( ?-?\\d+ )\\)", 2, "no ( -4 )"), -8, 0);
    CHECK(reward_is_null(scored("Score: (\\d+)|none", 1, "none")));
    CHECK(reward_is_null(scored("Score: (\\d+)", 1, "score: 5")));
    CHECK(reward_is_null(scored("(\\d+)", 1, "\xff\xfe no digits \xc3")));
    CHECK_NEAR(scored("(\\d+)", 1, "\xff\xfe 12 \xc3"), 12, 0);

    TEST("score: a regex that does not compile, or a scale that is not finite, is a usage error");
    judge_scorer *s = NULL;
    gerr e = {0};
    CHECK_EQ_INT(judge_scorer_open(&s, "Score: (\\d+", 1, &e), EX_USAGE);
    CHECK(strstr(e.msg, "--judge-regex: ") == e.msg);
    CHECK_EQ_INT(judge_scorer_open(&s, NULL, INFINITY, &e), EX_USAGE);

    TEST("reply: content and usage from a chat-completions body");
    strbuf c = {0};
    long long pt = 0, ct = 0;
    const char *ok = "{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":\"8 \\u2713\"}}],"
                     "\"usage\":{\"prompt_tokens\":31,\"completion_tokens\":2}}";
    CHECK(judge_parse_reply(ok, strlen(ok), &c, &pt, &ct));
    CHECK_EQ_STR(c.data, "8 \xe2\x9c\x93");
    CHECK_EQ_INT(pt, 31);
    CHECK_EQ_INT(ct, 2);
    const char *no_usage = "{\"choices\":[{\"message\":{\"content\":\"\"}}]}";
    CHECK(judge_parse_reply(no_usage, strlen(no_usage), &c, &pt, &ct));
    CHECK_EQ_STR(c.data, "");
    CHECK_EQ_INT(pt, -1);
    CHECK_EQ_INT(ct, -1);

    TEST("reply: a null or absent content is an empty reply (a reasoning model out of tokens), not a failure");
    const char *empty[] = {"{\"choices\":[{\"message\":{\"content\":null,\"reasoning_content\":\"7\"}}]}",
                           "{\"choices\":[{\"message\":{\"role\":\"assistant\"}}],\"usage\":{\"prompt_tokens\":3}}"};
    for (size_t i = 0; i < 2; i++) {
        sb_clear(&c);
        sb_puts(&c, "stale");
        CHECK(judge_parse_reply(empty[i], strlen(empty[i]), &c, &pt, &ct));
        CHECK_EQ_STR(c.data, "");
    }
    CHECK_EQ_INT(pt, 3);

    TEST("reply: not JSON, no choices, empty choices, no message, content of another type: malformed");
    const char *bad[] = {"", "{\"choices\": [", "<html>502</html>", "{\"object\":\"chat.completion\"}",
                         "{\"choices\":[]}", "{\"choices\":[{\"message\":{\"content\":7}}]}",
                         "{\"choices\":[{\"text\":\"7\"}]}",
                         "{\"choices\":{\"message\":{\"content\":\"7\"}}}", "[1]"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) CHECK(!judge_parse_reply(bad[i], strlen(bad[i]), &c, &pt, &ct));
    sb_free(&c);
}

static void test_backoff(void) {
    TEST("backoff: full jitter under base * 2^(retry-1), capped");
    CHECK_NEAR(http_backoff_delay(1, 0.5, 30, 0.5), 0.25, 1e-15);
    CHECK_NEAR(http_backoff_delay(3, 0.5, 30, 0.75), 1.5, 1e-15);
    CHECK_NEAR(http_backoff_delay(10, 0.5, 30, 0.5), 15, 1e-12);
    CHECK_NEAR(http_backoff_delay(1000, 0.5, 30, 0.999), 29.97, 1e-9);
    CHECK_NEAR(http_backoff_delay(4, 0.5, 30, 0), 0, 0);

    TEST("retry-after: seconds, fractions, HTTP dates, garbage");
    double s = -1;
    time_t now = 1445412480; /* Wed, 21 Oct 2015 07:28:00 GMT */
    CHECK(http_parse_retry_after("2", now, &s));
    CHECK_NEAR(s, 2, 0);
    CHECK(http_parse_retry_after(" 0.25 \r\n", now, &s));
    CHECK_NEAR(s, 0.25, 0);
    CHECK(http_parse_retry_after("Wed, 21 Oct 2015 07:29:40 GMT", now, &s));
    CHECK_NEAR(s, 100, 0);
    CHECK(http_parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now, &s));
    CHECK_NEAR(s, 0, 0);
    const char *bad[] = {"", "   ", "soon", "2s", "-1", "1e999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) CHECK(!http_parse_retry_after(bad[i], now, &s));
}

int main(void) {
    test_template();
    test_request();
    test_score();
    test_backoff();
    return check_done();
}
