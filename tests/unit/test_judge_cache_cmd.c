/* `grpo-reward cache stats|export|import|prune` on real files: the JSON they
 * print, export/import round trips, all-or-nothing imports with FILE:LINE
 * errors, the merge rule, pruning by age and model. */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "judge_cache_fixture.h"

/* Runs a subcommand that prints to a FILE, giving what it printed. */
#define CAPTURE(text, rc, call_with_f)                          \
    do {                                                        \
        size_t cap_len = 0;                                     \
        FILE *f = open_memstream(&(text), &cap_len);            \
        rc = call_with_f;                                       \
        fclose(f);                                              \
    } while (0)

static bool same_file(const char *a, const char *b) {
    size_t la, lb;
    char *x = slurp(a, &la), *y = slurp(b, &lb);
    bool same = x && y && la == lb && !memcmp(x, y, la);
    free(x);
    free(y);
    return same;
}

static int count_lines(const char *path) {
    size_t len;
    char *text = slurp(path, &len);
    int n = 0;
    for (size_t i = 0; text && i < len; i++) n += text[i] == '\n';
    free(text);
    return n;
}

static void fill_source(const char *path) {
    gerr e = {0};
    judge_cache *c = NULL;
    test_entry t[5];
    TEST("a source cache of five entries (two models, nulls, escapes)");
    make_entry(&t[0], "judge-a", 1, "Score: 7/10\n\"quoted\" \\ back\tslash", 0.7, 100, 10);
    make_entry(&t[1], "judge-a", 2, "ünïcödé \x01 control", NAN, -1, -1);
    make_entry(&t[2], "judge-a", 3, "0.123456789012345678", 0.12345678901234568, 7, -1);
    make_entry(&t[3], "judge-b", 4, "", 1e-300, 0, 0);
    make_entry(&t[4], "judge-b", 5, "Score: -3", -3, 5, 2);
    CHECK_EQ_INT(judge_cache_open(&c, path, JUDGE_CACHE_READWRITE, &e), 0);
    for (int i = 0; i < 5; i++) {
        t[i].en.request = t[i].request;
        CHECK_EQ_INT(judge_cache_put(c, &t[i].en, &e), 0);
    }
    judge_cache_close(c);
    CHECK(age_last_used(path, t[4].en.key, 3 * 86400.0)); /* so that last_used != created in one entry */
}

static void test_stats(const char *src) {
    gerr e = {0};
    char *text = NULL;
    int rc;
    TEST("stats: one JSON line with counts, models, tokens and times");
    CAPTURE(text, rc, judge_cache_cmd_stats(src, f, &e));
    CHECK_EQ_INT(rc, 0);
    CHECK(text && strchr(text, '\n') == text + strlen(text) - 1);
    cJSON *js = text ? cJSON_Parse(text) : NULL;
    CHECK(js != NULL);
    if (js) {
        CHECK_EQ_STR(cJSON_GetStringValue(cJSON_GetObjectItem(js, "path")), src);
        CHECK_EQ_INT(cJSON_GetNumberValue(cJSON_GetObjectItem(js, "entries")), 5);
        cJSON *models = cJSON_GetObjectItem(js, "models");
        CHECK_EQ_INT(cJSON_GetArraySize(models), 2);
        CHECK_EQ_INT(cJSON_GetNumberValue(cJSON_GetObjectItem(models, "judge-a")), 3);
        CHECK_EQ_INT(cJSON_GetNumberValue(cJSON_GetObjectItem(models, "judge-b")), 2);
        CHECK_EQ_INT(cJSON_GetNumberValue(cJSON_GetObjectItem(js, "scored")), 4);
        CHECK_EQ_INT(cJSON_GetNumberValue(cJSON_GetObjectItem(js, "prompt_tokens")), 112);
        CHECK_EQ_INT(cJSON_GetNumberValue(cJSON_GetObjectItem(js, "completion_tokens")), 12);
        double oldest = cJSON_GetNumberValue(cJSON_GetObjectItem(js, "oldest"));
        double newest = cJSON_GetNumberValue(cJSON_GetObjectItem(js, "newest"));
        double now = (double)time(NULL);
        double last_used = cJSON_GetNumberValue(cJSON_GetObjectItem(js, "last_used"));
        CHECK(oldest <= newest && newest <= now + 1 && oldest > now - 600);
        CHECK(last_used < newest && last_used >= oldest);
        CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(js, "bytes")) >= 4096);
        CHECK(cJSON_IsNumber(cJSON_GetObjectItem(js, "wal_bytes")));
    }
    cJSON_Delete(js);
    free(text);

    TEST("stats of an empty file: zeros and nulls");
    spit(in_root("empty.sqlite"), "");
    CAPTURE(text, rc, judge_cache_cmd_stats(in_root("empty.sqlite"), f, &e));
    CHECK_EQ_INT(rc, 0);
    CHECK(text && strstr(text, "\"entries\":0,\"models\":{},\"scored\":0,\"oldest\":null"));
    free(text);
}

static void test_export_import(const char *src) {
    gerr e = {0};
    char a[512], b[512], copy[512];
    snprintf(a, sizeof a, "%s", in_root("a.jsonl"));
    snprintf(b, sizeof b, "%s", in_root("b.jsonl"));
    TEST("export: one line per entry, sorted by key, nulls where none");
    CHECK_EQ_INT(judge_cache_cmd_export(src, a, &e), 0);
    CHECK_EQ_INT(count_lines(a), 5);
    size_t len;
    char *text = slurp(a, &len);
    char prev[65] = "";
    int sorted = 0, with_null_score = 0, used_before = 0;
    for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        cJSON *js = cJSON_Parse(line);
        const char *key = cJSON_GetStringValue(cJSON_GetObjectItem(js, "key"));
        sorted += key && strlen(key) == 64 && strcmp(prev, key) < 0;
        if (key) snprintf(prev, sizeof prev, "%s", key);
        with_null_score += cJSON_IsNull(cJSON_GetObjectItem(js, "score")) &&
                           cJSON_IsNull(cJSON_GetObjectItem(js, "prompt_tokens"));
        double created = cJSON_GetNumberValue(cJSON_GetObjectItem(js, "created"));
        double last_used = cJSON_GetNumberValue(cJSON_GetObjectItem(js, "last_used"));
        CHECK(last_used == created || last_used == created - 3 * 86400.0);
        used_before += last_used < created;
        cJSON_Delete(js);
    }
    CHECK_EQ_INT(sorted, 5);
    CHECK_EQ_INT(with_null_score, 1);
    CHECK_EQ_INT(used_before, 1);
    free(text);

    TEST("import into a fresh file, export again: the same bytes");
    snprintf(copy, sizeof copy, "%s", in_root("merged/copy.sqlite"));
    CHECK_EQ_INT(judge_cache_cmd_import(copy, a, &e), 0);
    CHECK_EQ_INT(judge_cache_cmd_export(copy, b, &e), 0);
    CHECK(same_file(a, b));

    TEST("the imported cache answers lookups");
    test_entry t;
    make_entry(&t, "judge-a", 1, "", 0, 0, 0);
    judge_cache *c = NULL;
    strbuf reply = {0};
    double score = 0;
    CHECK_EQ_INT(judge_cache_open(&c, copy, JUDGE_CACHE_READONLY, &e), 0);
    CHECK_EQ_INT(judge_cache_get(c, t.en.key, &reply, &score, &e), 1);
    CHECK_EQ_STR(reply.data, "Score: 7/10\n\"quoted\" \\ back\tslash");
    CHECK(score == 0.7);
    judge_cache_close(c);
    sb_free(&reply);

    TEST("export to - writes stdout");
    fflush(stdout);
    int saved = dup(1);
    int fd = open(in_root("stdout.jsonl"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(saved >= 0 && fd >= 0 && dup2(fd, 1) == 1);
    int rc = judge_cache_cmd_export(src, "-", &e);
    dup2(saved, 1);
    close(fd);
    close(saved);
    CHECK_EQ_INT(rc, 0);
    CHECK(same_file(a, in_root("stdout.jsonl")));
}

static const char *KEY1 = "00000000000000000000000000000000000000000000000000000000000000a1";

/* An import of text into the copy fails with 65 and msg, and changes nothing. */
static void check_bad_import(const char *copy, const char *text, const char *msg) {
    gerr e = {0};
    const char *bad = in_root("bad.jsonl");
    spit(bad, text);
    CHECK_EQ_INT(judge_cache_cmd_import(copy, bad, &e), EX_DATAERR);
    char want[1200];
    snprintf(want, sizeof want, "%s:%s", bad, msg);
    if (strncmp(e.msg, want, strlen(want))) printf("#   got: %s\n#   want: %s\n", e.msg, want);
    CHECK(!strncmp(e.msg, want, strlen(want)));
    CHECK(!strchr(e.msg, '\n'));
    CHECK_EQ_INT(judge_cache_cmd_export(copy, in_root("after.jsonl"), &e), 0);
    CHECK(same_file(in_root("a.jsonl"), in_root("after.jsonl")));
}

static void test_bad_imports(void) {
    char copy[512];
    snprintf(copy, sizeof copy, "%s", in_root("merged/copy.sqlite"));
    char good[512];
    snprintf(good, sizeof good,
             "{\"key\":\"%s\",\"model\":\"m\",\"request\":\"{}\",\"reply\":\"r\",\"score\":1,\"created\":1700000000}\n",
             KEY1);
    char text[2048];
    TEST("import of a line without its reply: FILE:LINE, nothing stored (not even the good line before)");
    snprintf(text, sizeof text, "%s{\"key\":\"%s\",\"model\":\"m\",\"request\":\"{}\",\"created\":1}\n", good,
             "00000000000000000000000000000000000000000000000000000000000000b2");
    check_bad_import(copy, text, "2: field \"reply\"");

    TEST("import: bad keys, a line that is not JSON, wrong kinds, counted blank lines");
    check_bad_import(copy, "{\"key\":\"abc\",\"model\":\"m\",\"request\":\"{}\",\"reply\":\"r\",\"created\":1}\n",
                     "1: field \"key\": expected 64 hex digits, got 3 characters");
    snprintf(text, sizeof text, "{\"key\":\"%.63sg\",\"model\":\"m\",\"request\":\"{}\",\"reply\":\"r\",\"created\":1}\n",
             KEY1);
    check_bad_import(copy, text, "1: field \"key\": expected 64 hex digits, got a non-hex character");
    snprintf(text, sizeof text, "%snot json\n", good);
    check_bad_import(copy, text, "2: ");
    snprintf(text, sizeof text, "\n\n{\"key\":\"%s\",\"model\":\"m\",\"request\":\"{}\",\"reply\":\"r\",\"created\":-5}\n",
             KEY1);
    check_bad_import(copy, text, "3: field \"created\"");
    snprintf(text, sizeof text,
             "{\"key\":\"%s\",\"model\":\"m\",\"request\":\"{}\",\"reply\":\"r\",\"score\":\"0.5\",\"created\":1}\n", KEY1);
    check_bad_import(copy, text, "1: field \"score\"");
    snprintf(text, sizeof text,
             "%s{\"key\":\"%s\",\"model\":\"m\",\"request\":\"{}\",\"reply\":\"r\",\"prompt_tokens\":-3,\"created\":1}\n",
             good, KEY1);
    check_bad_import(copy, text, "2: field \"prompt_tokens\"");
    snprintf(text, sizeof text, "{\"key\":\"%s\",\"model\":7,\"request\":\"{}\",\"reply\":\"r\",\"created\":1}\n", KEY1);
    check_bad_import(copy, text, "1: field \"model\"");

    TEST("import of a missing file: 66, nothing created");
    gerr e = {0};
    CHECK_EQ_INT(judge_cache_cmd_import(in_root("never.sqlite"), in_root("no-such.jsonl"), &e), EX_NOINPUT);
    CHECK(!exists(in_root("never.sqlite")));
}

/* The reply stored under key in path ("" when none). */
static void reply_of(const char *path, const char *hex, strbuf *reply) {
    unsigned char key[32];
    for (int i = 0; i < 32; i++) sscanf(hex + 2 * i, "%2hhx", &key[i]);
    gerr e = {0};
    judge_cache *c = NULL;
    double score;
    sb_clear(reply);
    sb_puts(reply, "");
    if (judge_cache_open(&c, path, JUDGE_CACHE_READONLY, &e) == 0) {
        if (judge_cache_get(c, key, reply, &score, &e) != 1) sb_puts(reply, "");
        judge_cache_close(c);
    }
}

static void import_line(const char *path, const char *reply, double created) {
    char text[512];
    snprintf(text, sizeof text, "{\"key\":\"%s\",\"model\":\"m\",\"request\":\"{}\",\"reply\":\"%s\",\"created\":%.17g}\n",
             KEY1, reply, created);
    spit(in_root("one.jsonl"), text);
    gerr e = {0};
    CHECK_EQ_INT(judge_cache_cmd_import(path, in_root("one.jsonl"), &e), 0);
}

static void test_merge(void) {
    char path[512];
    snprintf(path, sizeof path, "%s", in_root("merge.sqlite"));
    strbuf reply = {0};
    TEST("import merges: the later `created` wins, an earlier one or a tie keeps what is there");
    const struct {
        const char *reply;
        double created;
        const char *stored; /* after the import */
    } steps[] = {{"first", 1700000000.5, "first"},
                 {"newer", 1700000100.5, "newer"},
                 {"older", 1600000000, "newer"},
                 {"tie", 1700000100.5, "newer"}};
    for (int i = 0; i < 4; i++) {
        import_line(path, steps[i].reply, steps[i].created);
        reply_of(path, KEY1, &reply);
        CHECK_EQ_STR(reply.data, steps[i].stored);
    }
    sb_free(&reply);
}

/* Prunes entries older than 500 s (of model, when not NULL), expecting `want`. */
static void check_prune(const char *path, const char *model, const char *want) {
    gerr e = {0};
    char *out = NULL;
    int rc;
    CAPTURE(out, rc, judge_cache_cmd_prune(path, 500, model, f, &e));
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_STR(out, want);
    free(out);
}

static void test_prune(void) {
    gerr e = {0};
    char path[512];
    snprintf(path, sizeof path, "%s", in_root("prune.sqlite"));
    double now = (double)time(NULL);
    char text[2048] = "";
    const char *models[4] = {"a", "b", "a", "b"};
    double ages[4] = {1000, 1000, 0, 0};
    for (int i = 0; i < 4; i++) {
        char line[400];
        snprintf(line, sizeof line,
                 "{\"key\":\"%063d%d\",\"model\":\"%s\",\"request\":\"{}\",\"reply\":\"r%d\",\"created\":%.17g}\n", 0, i,
                 models[i], i, now - ages[i]);
        strcat(text, line);
    }
    spit(in_root("prune.jsonl"), text);
    CHECK_EQ_INT(judge_cache_cmd_import(path, in_root("prune.jsonl"), &e), 0);
    strbuf reply = {0};

    TEST("prune by age and model removes only that model's old entries");
    check_prune(path, "a", "{\"removed\":1,\"entries\":3}\n");
    reply_of(path, "0000000000000000000000000000000000000000000000000000000000000000", &reply);
    CHECK_EQ_STR(reply.data, "");
    reply_of(path, "0000000000000000000000000000000000000000000000000000000000000001", &reply);
    CHECK_EQ_STR(reply.data, "r1");

    TEST("prune by age alone, then again removes nothing; the WAL is emptied");
    check_prune(path, NULL, "{\"removed\":1,\"entries\":2}\n");
    reply_of(path, "0000000000000000000000000000000000000000000000000000000000000001", &reply);
    CHECK_EQ_STR(reply.data, "");
    reply_of(path, "0000000000000000000000000000000000000000000000000000000000000003", &reply);
    CHECK_EQ_STR(reply.data, "r3");
    check_prune(path, NULL, "{\"removed\":0,\"entries\":2}\n");
    char wal[600];
    snprintf(wal, sizeof wal, "%s-wal", path);
    size_t wal_len = 0;
    char *wal_text = slurp(wal, &wal_len);
    CHECK_EQ_INT(wal_len, 0);
    free(wal_text);

    TEST("prune with a negative or NaN age is a usage error");
    CHECK_EQ_INT(judge_cache_cmd_prune(path, -1, NULL, stdout, &e), EX_USAGE);
    CHECK_EQ_INT(judge_cache_cmd_prune(path, NAN, NULL, stdout, &e), EX_USAGE);
    sb_free(&reply);
}

int main(void) {
    if (!make_root()) return 1;
    char src_path[512];
    snprintf(src_path, sizeof src_path, "%s", in_root("src.sqlite"));
    fill_source(src_path);
    test_stats(src_path);
    test_export_import(src_path);
    test_bad_imports();
    test_merge();
    test_prune();
    remove_root();
    return check_done();
}
