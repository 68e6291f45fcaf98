/* The `judge` reward function end to end: records rendered through a
 * template, sent to the local server, answers kept in the SQLite cache.
 * Reruns buy nothing, identical requests are sent once, a failed chunk
 * keeps the answers it got, and the key never reaches the cache file. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sysexits.h>
#include <unistd.h>

#include "check.h"
#include "helpers.h"
#include "io/mapped.h"
#include "judge_server_fixture.h"
#include "reward/reward.h"
#include "util/sha256.h"

#define KEY "sk-live-Zq8s0m3K3yV4lue"

static char dir[] = "/tmp/grpo-test-judge-fn-XXXXXX";
static char tpl_path[256], cache_path[256];

/* Records as the stage hands them over: parsed lines and their decoded completions. */
typedef struct {
    size_t n;
    record *rec;
    strbuf *completion;
    reward_item *items;
    double *out;
} chunk;

static void chunk_init(chunk *c, const char *const *lines, size_t n) {
    c->n = n;
    c->rec = xcalloc(n, sizeof *c->rec);
    c->completion = xcalloc(n, sizeof *c->completion);
    c->items = xcalloc(n, sizeof *c->items);
    c->out = xcalloc(n, sizeof *c->out);
    for (size_t i = 0; i < n; i++) {
        gerr e = {0};
        record_init(&c->rec[i]);
        if (record_parse(&c->rec[i], lines[i], strlen(lines[i]), "rollouts.jsonl", (long)i + 1, &e))
            printf("# bad test record %zu: %s\n", i, e.msg);
        int present = 0;
        record_get_string(&c->rec[i], "completion", false, &c->completion[i], &present, &e);
        c->items[i] = (reward_item){.rec = &c->rec[i], .completion = c->completion[i].data ? c->completion[i].data : "",
                                    .completion_len = c->completion[i].len, .has_completion = present == 2,
                                    .n_tokens = -1};
    }
}

static void chunk_free(chunk *c) {
    for (size_t i = 0; i < c->n; i++) {
        record_free(&c->rec[i]);
        sb_free(&c->completion[i]);
    }
    free(c->rec);
    free(c->completion);
    free(c->items);
    free(c->out);
}

static reward_opts params(const test_server *s) {
    reward_opts p = {0};
    p.judge_url = s->base;
    p.judge_model = "judge-test";
    p.judge_template = tpl_path;
    p.judge_scale = 1.0;
    p.judge_key_env = "GRPO_TEST_JUDGE_KEY";
    p.judge_cache = cache_path;
    p.judge_cache_mode = "readwrite";
    p.judge_concurrency = 4;
    p.judge_timeout = 5;
    p.judge_retries = 2;
    p.judge_max_tokens = 4;
    return p;
}

/* Opens the function, scores the chunk, reads its stats, closes. */
static int score(const reward_opts *p, chunk *c, cJSON **stats, gerr *e) {
    reward_fn fn = {.name = "judge", .weight = 1};
    int rc = reward_open_judge(&fn, p, e);
    if (rc) return rc;
    rc = fn.score(fn.self, c->items, c->n, c->out, e);
    if (stats) {
        *stats = cJSON_CreateObject();
        fn.stats(fn.self, *stats);
    }
    fn.close(fn.self);
    return rc;
}

static long long judge_stat(const cJSON *stats, const char *name) {
    return json_int(cJSON_GetObjectItemCaseSensitive(stats, "judge"), name);
}

static long long server_requests(const test_server *s) {
    cJSON *ss = server_call(s, "/stats", NULL);
    long long n = json_int(ss, "requests");
    cJSON_Delete(ss);
    return n;
}

/* The most times the server was sent any one request body. */
static long long most_per_body(const test_server *s) {
    cJSON *ss = server_call(s, "/stats", NULL);
    long long most = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(ss, "by_body")) if (v->valuedouble > most) most =
        (long long)v->valuedouble;
    cJSON_Delete(ss);
    return most;
}

static int expected_score(const char *user) {
    uint8_t d[32];
    sha256(user, strlen(user), d);
    uint32_t v = (uint32_t)d[0] << 24 | (uint32_t)d[1] << 16 | (uint32_t)d[2] << 8 | d[3];
    return 1 + (int)(v % 10);
}

static bool file_contains(const char *path, const char *needle) {
    size_t len;
    char *text = read_whole_file(path, &len, NULL);
    bool found = text && len && memmem(text, len, needle, strlen(needle)) != NULL;
    free(text);
    return found;
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f)) printf("# cannot write %s\n", path);
}

static const char *LINES[] = {
    "{\"id\":\"p1\",\"messages\":[{\"role\":\"user\",\"content\":\"What is 2+2?\"}],\"answer\":\"4\",\"completion\":\"4\"}",
    "{\"id\":\"p1\",\"messages\":[{\"role\":\"user\",\"content\":\"What is 2+2?\"}],\"answer\":\"4\",\"completion\":\"5\"}",
    "{\"id\":\"p1\",\"messages\":[{\"role\":\"user\",\"content\":\"What is 2+2?\"}],\"answer\":\"4\",\"completion\":\"4\"}",
    "{\"id\":\"p2\",\"messages\":[{\"role\":\"user\",\"content\":\"Name a prime.\"}],\"answer\":\"7\",\"completion\":\"11\"}",
    "{\"id\":\"p2\",\"messages\":[{\"role\":\"user\",\"content\":\"Name a prime.\"}],\"answer\":\"7\",\"completion\":\"11\"}",
    "{\"id\":\"p3\",\"messages\":[{\"role\":\"user\",\"content\":\"Say hi.\"}],\"answer\":\"hi\",\"completion\":\"[[reply:no idea]]\"}",
    "{\"id\":\"p4\",\"messages\":[{\"role\":\"user\",\"content\":\"Rate.\"}],\"answer\":\"x\",\"completion\":\"[[reply:Score: 7/10 because 3]]\"}",
};
enum { N_LINES = sizeof LINES / sizeof *LINES };
static const char *TEMPLATE = "Q: {prompt}\nReference: {answer}\nA: {completion}\n";

static void test_open_errors(const test_server *s) {
    TEST("judge: --judge-url, --judge-model and --judge-template are required (64)");
    reward_opts p = params(s);
    reward_fn fn = {0};
    gerr e = {0};
    p.judge_url = NULL;
    CHECK_EQ_INT(reward_open_judge(&fn, &p, &e), EX_USAGE);
    CHECK(strstr(e.msg, "--judge-url") != NULL);
    p = params(s);
    p.judge_model = "";
    CHECK_EQ_INT(reward_open_judge(&fn, &p, &e), EX_USAGE);
    CHECK(strstr(e.msg, "--judge-model") != NULL);
    p = params(s);
    p.judge_template = NULL;
    CHECK_EQ_INT(reward_open_judge(&fn, &p, &e), EX_USAGE);
    CHECK(strstr(e.msg, "--judge-template") != NULL);
    p = params(s);
    p.judge_cache_mode = "sometimes";
    CHECK_EQ_INT(reward_open_judge(&fn, &p, &e), EX_USAGE);
    p = params(s);
    p.judge_regex = "(";
    CHECK_EQ_INT(reward_open_judge(&fn, &p, &e), EX_USAGE);
    p = params(s);
    p.judge_concurrency = 0;
    CHECK_EQ_INT(reward_open_judge(&fn, &p, &e), EX_USAGE);

    TEST("judge: a key with a line break inside is a usage error that does not show it");
    const char *saved = getenv("GRPO_TEST_JUDGE_KEY");
    char *keep = saved ? xstrdup(saved) : NULL;
    setenv("GRPO_TEST_JUDGE_KEY", "sk-first\nX-Injected: yes", 1);
    p = params(s);
    e = (gerr){0};
    CHECK_EQ_INT(reward_open_judge(&fn, &p, &e), EX_USAGE);
    CHECK_EQ_STR(e.msg, "$GRPO_TEST_JUDGE_KEY: the API key holds a control character (a line break?)");
    if (keep) setenv("GRPO_TEST_JUDGE_KEY", keep, 1);
    free(keep);
}

static void test_runs(const test_server *s) {
    chunk c;
    chunk_init(&c, LINES, N_LINES);
    reward_opts p = params(s);
    cJSON *st = NULL;
    gerr e = {0};
    long long before = server_requests(s);

    TEST("judge: a chunk is scored; identical requests in it are sent once");
    int rc = score(&p, &c, &st, &e);
    CHECK_EQ_INT(rc, 0);
    if (rc) printf("#   %s\n", e.msg);
    CHECK_EQ_INT(server_requests(s) - before, 5); /* 7 records, 5 distinct requests */
    CHECK_EQ_INT(judge_stat(st, "requests"), 5);
    CHECK_EQ_INT(judge_stat(st, "deduplicated"), 2);
    CHECK_EQ_INT(judge_stat(st, "misses"), 7);
    CHECK_EQ_INT(judge_stat(st, "hits"), 0);
    CHECK_EQ_INT(judge_stat(st, "unparsed"), 1);
    CHECK(judge_stat(st, "prompt_tokens") > 0 && judge_stat(st, "completion_tokens") > 0);
    for (int i = 0; i < 5; i++) {
        strbuf user = {0};
        static const char *q[] = {"What is 2+2?", "What is 2+2?", "What is 2+2?", "Name a prime.", "Name a prime."};
        static const char *ref[] = {"4", "4", "4", "7", "7"};
        static const char *a[] = {"4", "5", "4", "11", "11"};
        sb_printf(&user, "Q: %s\nReference: %s\nA: %s\n", q[i], ref[i], a[i]);
        CHECK_NEAR(c.out[i], expected_score(user.data), 0);
        sb_free(&user);
    }
    CHECK(c.out[0] == c.out[2] && c.out[3] == c.out[4]);
    CHECK(reward_is_null(c.out[5]));
    CHECK_NEAR(c.out[6], 7, 0);
    double first[N_LINES];
    memcpy(first, c.out, sizeof first);
    cJSON_Delete(st);

    TEST("judge: a second run asks nothing and gives the same values, unparsed replies included");
    before = server_requests(s);
    for (size_t i = 0; i < c.n; i++) c.out[i] = -99;
    CHECK_EQ_INT(score(&p, &c, &st, &e), 0);
    CHECK_EQ_INT(server_requests(s) - before, 0);
    CHECK_EQ_INT(judge_stat(st, "requests"), 0);
    CHECK_EQ_INT(judge_stat(st, "hits"), 7);
    CHECK_EQ_INT(judge_stat(st, "misses"), 0);
    CHECK_EQ_INT(judge_stat(st, "unparsed"), 1);
    CHECK_EQ_INT(judge_stat(st, "prompt_tokens"), 0);
    for (size_t i = 0; i < c.n; i++)
        CHECK(c.out[i] == first[i] || (reward_is_null(c.out[i]) && reward_is_null(first[i])));
    cJSON_Delete(st);

    TEST("judge: a cached reply is parsed again, so a new --judge-regex and --judge-scale apply without a request");
    reward_opts q = p;
    q.judge_regex = "because (\\d+)";
    q.judge_scale = 0.5;
    before = server_requests(s);
    CHECK_EQ_INT(score(&q, &c, NULL, &e), 0);
    CHECK_EQ_INT(server_requests(s) - before, 0);
    CHECK_NEAR(c.out[6], 1.5, 0);
    CHECK(reward_is_null(c.out[0])); /* "7"-style replies hold no "because N" */

    TEST("judge: the model, the system message, the template and max_tokens are part of the key");
    const char *changes[] = {"model", "system", "max_tokens", "template"};
    for (int k = 0; k < 4; k++) {
        q = p;
        if (k == 0) q.judge_model = "judge-test-2";
        if (k == 1) q.judge_system = "Be strict.";
        if (k == 2) q.judge_max_tokens = 5;
        if (k == 3) write_file(tpl_path, "Q: {prompt}\nReference: {answer}\nA: {completion}\n\n");
        before = server_requests(s);
        CHECK_EQ_INT(score(&q, &c, NULL, &e), 0);
        if (server_requests(s) - before != 5) printf("#   changing %s: %lld requests\n", changes[k], server_requests(s) - before);
        CHECK_EQ_INT(server_requests(s) - before, 5);
    }
    write_file(tpl_path, TEMPLATE);
    CHECK_EQ_INT(most_per_body(s), 1); /* so far no request body went out twice */

    TEST("judge: --judge-cache-mode off asks again every run; readonly asks and stores nothing");
    q = p;
    q.judge_cache_mode = "off";
    before = server_requests(s);
    CHECK_EQ_INT(score(&q, &c, NULL, &e), 0);
    CHECK_EQ_INT(server_requests(s) - before, 5);
    q.judge_model = "judge-readonly";
    q.judge_cache_mode = "readonly";
    for (int r = 0; r < 2; r++) {
        before = server_requests(s);
        CHECK_EQ_INT(score(&q, &c, NULL, &e), 0);
        CHECK_EQ_INT(server_requests(s) - before, 5);
    }

    TEST("judge: the key was sent, and is nowhere in the cache files");
    cJSON *ss = server_call(s, "/stats", NULL);
    const cJSON *auth = cJSON_GetObjectItemCaseSensitive(ss, "auth");
    CHECK(cJSON_GetArraySize(auth) == 1 && !strcmp(cJSON_GetArrayItem(auth, 0)->valuestring, "Bearer " KEY));
    cJSON_Delete(ss);
    char wal[300];
    snprintf(wal, sizeof wal, "%s-wal", cache_path);
    CHECK(file_contains(cache_path, "judge-test") || file_contains(wal, "judge-test")); /* the files are read */
    CHECK(!file_contains(cache_path, KEY) && !file_contains(wal, KEY));
    CHECK(!file_contains(cache_path, "Zq8s0m3K") && !file_contains(wal, "Zq8s0m3K"));
    CHECK(!file_contains(cache_path, "127.0.0.1") && !file_contains(wal, "127.0.0.1"));

    TEST("judge: a record the template cannot fill stops the chunk before any request");
    const char *bad[] = {LINES[0], "{\"id\":\"p9\",\"completion\":\"x\",\"answer\":\"1\"}"};
    chunk cb;
    chunk_init(&cb, bad, 2);
    q = p;
    q.judge_model = "judge-never";
    before = server_requests(s);
    e = (gerr){0};
    CHECK_EQ_INT(score(&q, &cb, NULL, &e), EX_DATAERR);
    CHECK(strstr(e.msg, "rollouts.jsonl:2: field \"messages\"") == e.msg);
    CHECK_EQ_INT(server_requests(s) - before, 0);
    chunk_free(&cb);
    chunk_free(&c);
}

static void test_exhausted(void) {
    test_server s;
    const char *flags[] = {"--fail-after", "6", NULL};
    TEST("judge: retries exhausted: 75, the answers received are stored, a rerun asks only for the rest");
    if (!server_start(&s, flags)) {
        CHECK(!"server did not start");
        return;
    }
    enum { N = 20 };
    char lines[N][160];
    const char *ptr[N];
    for (int i = 0; i < N; i++) {
        snprintf(lines[i], sizeof lines[i],
                 "{\"id\":\"q%d\",\"messages\":[{\"role\":\"user\",\"content\":\"item %d\"}],\"answer\":\"%d\","
                 "\"completion\":\"%d\"}",
                 i, i, i, i * 3);
        ptr[i] = lines[i];
    }
    chunk c;
    chunk_init(&c, ptr, N);
    reward_opts p = params(&s);
    p.judge_model = "judge-exhaust";
    p.judge_concurrency = 2;
    gerr e = {0};
    CHECK_EQ_INT(score(&p, &c, NULL, &e), EX_TEMPFAIL);
    CHECK(strstr(e.msg, "rollouts.jsonl:") == e.msg);
    CHECK(strstr(e.msg, "no answer after 3 attempts (last: HTTP 500") != NULL);
    CHECK(strstr(e.msg, KEY) == NULL);
    cJSON *ss = server_call(&s, "/stats", NULL);
    long long answered = json_int(ss, "answered");
    cJSON_Delete(ss);
    CHECK_EQ_INT(answered, 6);
    /* healed: the rerun sends exactly the requests that never got an answer */
    cJSON_Delete(server_call(&s, "/control", "{\"fail_after\": null}"));
    long long before = server_requests(&s);
    cJSON *st = NULL;
    CHECK_EQ_INT(score(&p, &c, &st, &e), 0);
    CHECK_EQ_INT(judge_stat(st, "hits"), 6);
    CHECK_EQ_INT(judge_stat(st, "requests"), N - 6);
    CHECK_EQ_INT(server_requests(&s) - before, N - 6);
    ss = server_call(&s, "/stats", NULL);
    CHECK_EQ_INT(json_int(ss, "answered"), N);
    cJSON_Delete(ss);
    for (int i = 0; i < N; i++) CHECK(!reward_is_null(c.out[i]));
    cJSON_Delete(st);
    chunk_free(&c);
    server_stop(&s);
}

int main(void) {
    srandom((unsigned)getpid());
    if (!mkdtemp(dir)) {
        printf("# mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    snprintf(tpl_path, sizeof tpl_path, "%s/judge.txt", dir);
    snprintf(cache_path, sizeof cache_path, "%s/cache/judge.sqlite", dir);
    write_file(tpl_path, TEMPLATE);
    setenv("GRPO_TEST_JUDGE_KEY", "  " KEY "\n", 1); /* sent trimmed, as a key read from a file */
    test_server s;
    if (!server_start(&s, NULL)) {
        TEST("judge: the test server starts");
        CHECK(!"server did not start");
    } else {
        test_open_errors(&s);
        test_runs(&s);
        server_stop(&s);
    }
    test_exhausted();
    remove_tree(dir);
    return check_done();
}
