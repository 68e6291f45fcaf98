/* The HTTP client (lib/http), as the judge uses it, against the local test server: concurrency and
 * connection reuse, retries of every transient fault (429 with Retry-After,
 * 5xx, resets, timeouts, malformed replies), exhausted retries, statuses
 * that are not retried, rate limits, and the API key kept out of messages. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sysexits.h>
#include <unistd.h>

#include "check.h"
#include "http/http.h"
#include "judge_server_fixture.h"
#include "judge/request.h"
#include "judge/score.h"
#include "util/sha256.h"

#define KEY "sk-test-KEY123"

typedef struct {
    size_t n;
    strbuf *body, *label, *user, *content;
    http_job *jobs;
    int *answers;       /* per job: replies accepted */
    double *answered_at; /* seconds after the run started */
    double t0;
    bool report_usage;
    long long fail_job; /* the callback fails this job with EX_IOERR (-1: none) */
    strbuf reply;
} batch;

static void batch_init(batch *b, const char *const *users, size_t n) {
    memset(b, 0, sizeof *b);
    b->n = n;
    b->body = xcalloc(n, sizeof *b->body);
    b->label = xcalloc(n, sizeof *b->label);
    b->user = xcalloc(n, sizeof *b->user);
    b->content = xcalloc(n, sizeof *b->content);
    b->jobs = xcalloc(n, sizeof *b->jobs);
    b->answers = xcalloc(n, sizeof *b->answers);
    b->answered_at = xcalloc(n, sizeof *b->answered_at);
    b->report_usage = true;
    b->fail_job = -1;
    judge_request_opts p = {.model = "judge-test", .temperature = 0, .max_tokens = 4};
    strbuf canon = {0};
    uint8_t key[32];
    for (size_t i = 0; i < n; i++) {
        sb_puts(&b->user[i], users[i]);
        judge_request_build(&p, users[i], strlen(users[i]), &b->body[i], &canon, key);
        sb_printf(&b->label[i], "in.jsonl:%zu", i + 1);
        b->jobs[i] = (http_job){
            .body = b->body[i].data, .body_len = b->body[i].len, .tokens = 100.0, .label = b->label[i].data};
    }
    sb_free(&canon);
}

/* n jobs whose user messages are fmt with the job's number (fmt takes one int). */
static void batch_numbered(batch *b, size_t n, const char *fmt, int from) {
    char(*texts)[48] = xcalloc(n, sizeof *texts);
    const char **users = xcalloc(n, sizeof *users);
    for (size_t i = 0; i < n; i++) {
        snprintf(texts[i], sizeof texts[i], fmt, from + (int)i);
        users[i] = texts[i];
    }
    batch_init(b, users, n);
    free(users);
    free(texts);
}

static void batch_free(batch *b) {
    for (size_t i = 0; i < b->n; i++) {
        sb_free(&b->body[i]);
        sb_free(&b->label[i]);
        sb_free(&b->user[i]);
        sb_free(&b->content[i]);
    }
    free(b->body);
    free(b->label);
    free(b->user);
    free(b->content);
    free(b->jobs);
    free(b->answers);
    free(b->answered_at);
    sb_free(&b->reply);
}

static int on_reply(void *ctx, size_t job, const char *body, size_t len, double *used, gerr *e) {
    batch *b = ctx;
    long long pt, ct;
    if (!judge_parse_reply(body, len, &b->reply, &pt, &ct)) return HTTP_REPLY_MALFORMED;
    if ((long long)job == b->fail_job) return gerr_set(e, EX_IOERR, "cache.sqlite: disk full (test)");
    sb_clear(&b->content[job]);
    sb_append(&b->content[job], b->reply.data, b->reply.len);
    b->answers[job]++;
    b->answered_at[job] = now_seconds() - b->t0;
    *used = b->report_usage && pt >= 0 && ct >= 0 ? (double)(pt + ct) : -1;
    return HTTP_REPLY_OK;
}

static http_opts config(const test_server *s, strbuf *url) {
    sb_clear(url);
    judge_chat_url(s->base, url);
    return (http_opts){.url = url->data, .api_key = KEY, .concurrency = 4, .timeout = 5, .retries = 3,
                       .backoff_base = 0.01, .backoff_cap = 0.05, .retry_after_cap = 5, .who = "judge",
                       .flag = "--judge"};
}

static int run(const http_opts *c, batch *b, http_stats *st, gerr *e) {
    http_client *h = NULL;
    int rc = http_client_open(&h, c, e);
    if (rc) return rc;
    b->t0 = now_seconds();
    rc = http_client_run(h, b->jobs, b->n, on_reply, b, e);
    if (st) *st = *http_client_stats(h);
    http_client_close(h);
    return rc;
}

/* The server's attempts at one job's body. */
static long long attempts_of(const cJSON *stats, const batch *b, size_t job) {
    uint8_t d[32];
    char hex[65];
    sha256(b->body[job].data, b->body[job].len, d);
    sha256_hex(d, 32, hex);
    const cJSON *by = cJSON_GetObjectItemCaseSensitive(stats, "by_body");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(by, hex);
    return cJSON_IsNumber(v) ? (long long)v->valuedouble : 0;
}

/* The score the server derives from a user message, computed here on our own. */
static int expected_score(const char *user) {
    uint8_t d[32];
    sha256(user, strlen(user), d);
    uint32_t v = (uint32_t)d[0] << 24 | (uint32_t)d[1] << 16 | (uint32_t)d[2] << 8 | d[3];
    return 1 + (int)(v % 10);
}

static void test_healthy(void) {
    test_server s;
    TEST("http: 200 requests at concurrency 8: each answered once with its own reply, over kept-alive connections");
    const char *slow[] = {"--delay", "0.01", NULL}; /* replies overlap, so concurrency shows */
    if (!server_start(&s, slow)) {
        CHECK(!"server did not start");
        return;
    }
    enum { N = 200 };
    batch b;
    batch_numbered(&b, N, "grade item %d", 0);
    strbuf url = {0};
    http_opts c = config(&s, &url);
    c.concurrency = 8;
    http_stats st;
    gerr e = {0};
    CHECK_EQ_INT(run(&c, &b, &st, &e), 0);
    int wrong = 0, unanswered = 0;
    for (int i = 0; i < N; i++) {
        unanswered += b.answers[i] != 1;
        char want[8];
        snprintf(want, sizeof want, "%d", expected_score(b.user[i].data));
        wrong += !b.content[i].data || strcmp(b.content[i].data, want) != 0;
    }
    CHECK_EQ_INT(unanswered, 0);
    CHECK_EQ_INT(wrong, 0);
    CHECK_EQ_INT(st.requests, N);
    CHECK_EQ_INT(st.retries, 0);
    CHECK_EQ_INT(st.failures, 0);
    cJSON *ss = server_call(&s, "/stats", NULL);
    CHECK_EQ_INT(json_int(ss, "requests"), N);
    printf("#   %lld connections, at most %lld requests at once\n", json_int(ss, "connections"),
           json_int(ss, "max_in_flight"));
    CHECK(json_int(ss, "connections") >= 1 && json_int(ss, "connections") <= 8 + 1); /* + this /stats call */
    CHECK(json_int(ss, "max_in_flight") >= 2 && json_int(ss, "max_in_flight") <= 8);

    TEST("http: the key goes in the Authorization header, and none is sent without one");
    const cJSON *auth = cJSON_GetObjectItemCaseSensitive(ss, "auth");
    CHECK_EQ_INT(cJSON_GetArraySize(auth), 1);
    CHECK(cJSON_IsString(cJSON_GetArrayItem(auth, 0)) &&
          !strcmp(cJSON_GetArrayItem(auth, 0)->valuestring, "Bearer " KEY));
    cJSON_Delete(ss);
    batch b2;
    const char *one[] = {"keyless"};
    batch_init(&b2, one, 1);
    test_server s2;
    if (server_start(&s2, NULL)) {
        http_opts c2 = config(&s2, &url);
        c2.api_key = "";
        CHECK_EQ_INT(run(&c2, &b2, NULL, &e), 0);
        cJSON *ss2 = server_call(&s2, "/stats", NULL);
        CHECK_EQ_INT(json_int(ss2, "requests"), 1);
        CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(ss2, "auth")), 0);
        cJSON_Delete(ss2);
        server_stop(&s2);
    } else {
        CHECK(!"second server did not start");
    }
    batch_free(&b2);
    batch_free(&b);
    sb_free(&url);
    server_stop(&s);
}

static void test_faults(void) {
    test_server s;
    const char *flags[] = {"--retry-after", "0.3", "--slow", "4", NULL};
    TEST("http: 429 with Retry-After, 5xx, resets, malformed replies and timeouts are retried");
    if (!server_start(&s, flags)) {
        CHECK(!"server did not start");
        return;
    }
    const char *users[] = {"a [[429x2]]",         "b [[500x2]]", "c [[503]][[502]]", "d [[resetx2]]",
                           "e [[malformedx2]]",   "f [[nochoices]]", "g [[slow]]", "h [[score:9]]"};
    const long long faults[] = {2, 2, 2, 2, 2, 1, 1, 0};
    size_t n = sizeof users / sizeof *users;
    batch b;
    batch_init(&b, users, n);
    strbuf url = {0};
    http_opts c = config(&s, &url);
    c.timeout = 1.0;
    http_stats st;
    gerr e = {0};
    int rc = run(&c, &b, &st, &e);
    CHECK_EQ_INT(rc, 0);
    if (rc) printf("#   %s\n", e.msg);
    cJSON *ss = server_call(&s, "/stats", NULL);
    long long total_faults = 0;
    for (size_t i = 0; i < n; i++) {
        CHECK_EQ_INT(b.answers[i], 1);
        CHECK_EQ_INT(attempts_of(ss, &b, i), faults[i] + 1);
        total_faults += faults[i];
    }
    CHECK_EQ_STR(b.content[7].data, "9");
    /* libcurl itself resends once, on a fresh connection, a request whose kept-alive
     * connection died before any reply byte: a reset may cost the server an attempt
     * the client never sees */
    CHECK(st.retries == total_faults || st.retries == total_faults - 1);
    CHECK_EQ_INT(st.failures, st.retries);
    CHECK_EQ_INT(st.requests, (long long)n + st.retries);

    TEST("http: Retry-After is honoured (two 429s with Retry-After: 0.3 take at least 0.6 s)");
    CHECK(b.answered_at[0] >= 0.6);
    CHECK(b.answered_at[0] < 4.0);
    TEST("http: a reply slower than the timeout is abandoned after the timeout and retried");
    CHECK(b.answered_at[6] >= 1.0);
    CHECK(b.answered_at[6] < 3.9);
    cJSON_Delete(ss);
    batch_free(&b);
    sb_free(&url);
    server_stop(&s);
}

static void test_exhausted(void) {
    test_server s;
    const char *flags[] = {"--delay", "0.3", NULL};
    TEST("http: a job failing every attempt stops the run with 75 after its retries; answers in flight still arrive");
    if (!server_start(&s, flags)) {
        CHECK(!"server did not start");
        return;
    }
    enum { N = 41 };
    batch b;
    batch_numbered(&b, N, "healthy %d", 0);
    /* the first job fails every attempt */
    judge_request_opts rp = {.model = "judge-test", .temperature = 0, .max_tokens = 4};
    strbuf canon = {0};
    uint8_t key[32];
    judge_request_build(&rp, "doomed [[500x*]]", 16, &b.body[0], &canon, key);
    b.jobs[0].body = b.body[0].data;
    b.jobs[0].body_len = b.body[0].len;
    sb_free(&canon);
    strbuf url = {0};
    http_opts c = config(&s, &url);
    c.retries = 2;
    http_stats st;
    gerr e = {0};
    CHECK_EQ_INT(run(&c, &b, &st, &e), EX_TEMPFAIL);
    CHECK(strstr(e.msg, "in.jsonl:1: judge: no answer after 3 attempts (last: HTTP 500: injected 500)") == e.msg);
    cJSON *ss = server_call(&s, "/stats", NULL);
    CHECK_EQ_INT(attempts_of(ss, &b, 0), 3);
    int delivered = 0;
    for (int i = 1; i < N; i++) delivered += b.answers[i];
    /* every answer the server gave reached the caller, and the run stopped starting new work */
    CHECK_EQ_INT(json_int(ss, "answered"), delivered);
    CHECK(delivered >= 1);
    CHECK(json_int(ss, "requests") < N + 2);
    cJSON_Delete(ss);
    batch_free(&b);
    sb_free(&url);
    server_stop(&s);
}

static void test_not_retried(void) {
    test_server s;
    TEST("http: a 401 is not retried: 69, naming the status and the job, without the key the server quoted");
    if (!server_start(&s, NULL)) {
        CHECK(!"server did not start");
        return;
    }
    const char *users[] = {"fine", "no entry [[401]]"};
    batch b;
    batch_init(&b, users, 2);
    strbuf url = {0};
    http_opts c = config(&s, &url);
    c.concurrency = 1;
    gerr e = {0};
    CHECK_EQ_INT(run(&c, &b, NULL, &e), EX_UNAVAILABLE);
    CHECK(strstr(e.msg, "in.jsonl:2: judge: HTTP 401 from http://127.0.0.1:") == e.msg);
    CHECK(strstr(e.msg, "injected 401 for Bearer ****") != NULL);
    CHECK(strstr(e.msg, KEY) == NULL);
    CHECK(strstr(e.msg, "KEY123") == NULL);
    cJSON *ss = server_call(&s, "/stats", NULL);
    CHECK_EQ_INT(attempts_of(ss, &b, 1), 1);
    cJSON_Delete(ss);

    TEST("http: the callback's own error stops the run with its code and message");
    const char *three[] = {"x1", "x2", "x3"};
    batch b3;
    batch_init(&b3, three, 3);
    b3.fail_job = 1;
    e = (gerr){0};
    CHECK_EQ_INT(run(&c, &b3, NULL, &e), EX_IOERR);
    CHECK_EQ_STR(e.msg, "cache.sqlite: disk full (test)");
    CHECK_EQ_INT(b3.answers[0], 1);
    CHECK_EQ_INT(b3.answers[2], 0);
    batch_free(&b3);

    TEST("http: a URL of another scheme is a usage error; bad settings are usage errors");
    e = (gerr){0};
    http_opts bad = c;
    bad.url = "ftp://" KEY "@127.0.0.1/chat/completions";
    CHECK_EQ_INT(run(&bad, &b, NULL, &e), EX_USAGE);
    CHECK(strstr(e.msg, "--judge-url ftp://127.0.0.1/chat/completions") == e.msg);
    CHECK(strstr(e.msg, KEY) == NULL);
    http_client *h = NULL;
    bad = c;
    bad.concurrency = 0;
    CHECK_EQ_INT(http_client_open(&h, &bad, &e), EX_USAGE);
    CHECK(strstr(e.msg, "--judge-concurrency") == e.msg);
    bad = c;
    bad.timeout = 0;
    CHECK_EQ_INT(http_client_open(&h, &bad, &e), EX_USAGE);
    bad = c;
    bad.rps = -1;
    CHECK_EQ_INT(http_client_open(&h, &bad, &e), EX_USAGE);
    batch_free(&b);
    sb_free(&url);
    server_stop(&s);
}

static void test_refused(void) {
    TEST("http: a refused connection is retried, then 75; with fail_unreachable it is 69 at once");
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &al) == 0);
    close(fd); /* nobody listens there now */
    char url[96];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/chat/completions", ntohs(a.sin_port));
    const char *users[] = {"nobody home"};
    batch b;
    batch_init(&b, users, 1);
    http_opts c = {.url = url, .api_key = KEY, .concurrency = 2, .timeout = 2, .retries = 2,
                   .backoff_base = 0.01, .backoff_cap = 0.05, .retry_after_cap = 5, .who = "judge"};
    http_stats st;
    gerr e = {0};
    CHECK_EQ_INT(run(&c, &b, &st, &e), EX_TEMPFAIL);
    CHECK(strstr(e.msg, "in.jsonl:1: judge: no answer after 3 attempts (last: ") == e.msg);
    CHECK(strstr(e.msg, KEY) == NULL);
    CHECK_EQ_INT(st.requests, 3);
    CHECK_EQ_INT(st.failures, 3);
    /* fail_unreachable (grpo-rollout --server): 69 at the first refusal, naming the URL */
    c.fail_unreachable = true;
    c.who = "server";
    CHECK_EQ_INT(run(&c, &b, &st, &e), EX_UNAVAILABLE);
    CHECK(strstr(e.msg, "in.jsonl:1: server: cannot connect to http://127.0.0.1:") == e.msg);
    CHECK_EQ_INT(st.requests, 1);
    batch_free(&b);
}

static void test_rate_limits(void) {
    test_server s;
    TEST("http: --judge-rps spaces request starts (80 at 50/s, a second's worth at once, take at least 0.58 s)");
    if (!server_start(&s, NULL)) {
        CHECK(!"server did not start");
        return;
    }
    enum { N = 80 };
    batch b;
    batch_numbered(&b, N, "rate %d", 0);
    strbuf url = {0};
    http_opts c = config(&s, &url);
    c.concurrency = 16;
    c.rps = 50;
    gerr e = {0};
    double t0 = now_seconds();
    CHECK_EQ_INT(run(&c, &b, NULL, &e), 0);
    double rps_time = now_seconds() - t0;
    CHECK(rps_time >= 0.58);

    TEST("http: --judge-tpm charges the estimate and refunds what usage reports");
    /* 100 estimated tokens a request, 200 tokens/s: without usage, 6 requests need >= 2 s;
     * with usage (a few tokens each) the refunds let them through at once */
    c.rps = 0;
    c.tpm = 12000;
    c.concurrency = 1;
    batch_free(&b);
    batch_numbered(&b, 6, "tpm %d", 0);
    b.report_usage = false;
    t0 = now_seconds();
    CHECK_EQ_INT(run(&c, &b, NULL, &e), 0);
    double unknown = now_seconds() - t0;
    CHECK(unknown >= 1.95);
    batch_free(&b);
    batch_numbered(&b, 6, "tpm %d", 6);
    t0 = now_seconds();
    CHECK_EQ_INT(run(&c, &b, NULL, &e), 0);
    double known = now_seconds() - t0;
    CHECK(known < unknown / 2);
    batch_free(&b);
    sb_free(&url);
    server_stop(&s);
}

int main(void) {
    srandom((unsigned)getpid());
    test_healthy();
    test_faults();
    test_exhausted();
    test_not_retried();
    test_refused();
    test_rate_limits();
    return check_done();
}
