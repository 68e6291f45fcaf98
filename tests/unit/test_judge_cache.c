/* The judge cache in one process: round trips, the four modes and the
 * errors of files that are not judge caches. The subcommands:
 * test_judge_cache_cmd.c; several processes at once and kill -9:
 * test_judge_cache_procs.c. */
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "judge_cache_fixture.h"

static void test_modes_and_paths(void) {
    gerr e = {0};
    judge_cache_mode m;
    TEST("parse_mode takes the four modes and refuses anything else");
    CHECK(judge_cache_parse_mode("readwrite", &m, &e) == 0 && m == JUDGE_CACHE_READWRITE);
    CHECK(judge_cache_parse_mode("readonly", &m, &e) == 0 && m == JUDGE_CACHE_READONLY);
    CHECK(judge_cache_parse_mode("refresh", &m, &e) == 0 && m == JUDGE_CACHE_REFRESH);
    CHECK(judge_cache_parse_mode("off", &m, &e) == 0 && m == JUDGE_CACHE_OFF);
    CHECK_EQ_INT(judge_cache_parse_mode("read-only", &m, &e), EX_USAGE);
    CHECK(strstr(e.msg, "read-only") != NULL);

    TEST("default path: $XDG_CACHE_HOME (absolute), else $HOME/.cache");
    char *old_xdg = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
    char *old_home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    strbuf p = {0};
    setenv("XDG_CACHE_HOME", "/x/cache/", 1);
    setenv("HOME", "/home/u", 1);
    judge_cache_default_path(&p);
    CHECK_EQ_STR(p.data, "/x/cache/grpo/judge.sqlite");
    sb_clear(&p);
    setenv("XDG_CACHE_HOME", "relative/cache", 1); /* the XDG spec: ignore it */
    judge_cache_default_path(&p);
    CHECK_EQ_STR(p.data, "/home/u/.cache/grpo/judge.sqlite");
    sb_clear(&p);
    unsetenv("XDG_CACHE_HOME");
    judge_cache_default_path(&p);
    CHECK_EQ_STR(p.data, "/home/u/.cache/grpo/judge.sqlite");
    sb_free(&p);

    TEST("opening with a NULL path uses the default path, directories made");
    setenv("XDG_CACHE_HOME", in_root("xdg"), 1);
    judge_cache *c = NULL;
    CHECK_EQ_INT(judge_cache_open(&c, NULL, JUDGE_CACHE_READWRITE, &e), 0);
    CHECK(c && !strcmp(judge_cache_path(c), in_root("xdg/grpo/judge.sqlite")));
    CHECK(exists(in_root("xdg/grpo/judge.sqlite")));
    judge_cache_close(c);

    if (old_xdg) setenv("XDG_CACHE_HOME", old_xdg, 1);
    else unsetenv("XDG_CACHE_HOME");
    if (old_home) setenv("HOME", old_home, 1);
    else unsetenv("HOME");
    free(old_xdg);
    free(old_home);
}

static void test_round_trip(void) {
    gerr e = {0};
    const char *path = in_root("a/b/c/judge.sqlite"); /* directories made on open */
    judge_cache *c = NULL;
    test_entry t1, t2, t3;
    make_entry(&t1, "judge-7b", 1, "Score: 0.75\n\"fine\" — ünïcödé", 0.75, 120, 9);
    make_entry(&t2, "judge-7b", 2, "no number here", NAN, -1, -1);
    make_entry(&t3, "judge-7b", 3, "stored late", 1, 1, 1);
    strbuf reply = {0};
    double score = 0;

    TEST("put then get: the reply, score and token counts come back");
    CHECK_EQ_INT(judge_cache_open(&c, path, JUDGE_CACHE_READWRITE, &e), 0);
    CHECK(exists(path));
    CHECK_EQ_INT(judge_cache_put(c, &t1.en, &e), 0);
    CHECK_EQ_INT(judge_cache_get(c, t1.en.key, &reply, &score, &e), 1);
    CHECK_EQ_STR(reply.data, t1.en.reply);
    CHECK(score == 0.75);
    CHECK_EQ_INT(column_of(path, t1.en.key, "prompt_tokens"), 120);
    CHECK_EQ_INT(column_of(path, t1.en.key, "completion_tokens"), 9);

    TEST("a NaN score and -1 token counts are stored as none and come back NaN");
    CHECK_EQ_INT(judge_cache_put(c, &t2.en, &e), 0);
    score = 0;
    CHECK_EQ_INT(judge_cache_get(c, t2.en.key, &reply, &score, &e), 1);
    CHECK_EQ_STR(reply.data, "no number here");
    CHECK(isnan(score));
    CHECK_EQ_INT(column_of(path, t2.en.key, "score IS NULL"), 1);
    CHECK_EQ_INT(column_of(path, t2.en.key, "prompt_tokens"), -1);
    CHECK_EQ_INT(column_of(path, t2.en.key, "completion_tokens"), -1);

    TEST("an unknown key misses and leaves the reply alone");
    sb_clear(&reply);
    sb_puts(&reply, "untouched");
    CHECK_EQ_INT(judge_cache_get(c, t3.en.key, &reply, &score, &e), 0);
    CHECK_EQ_STR(reply.data, "untouched");

    TEST("put overwrites an existing key");
    test_entry t1b = t1;
    t1b.en.request = t1b.request;
    t1b.en.reply = "Score: 0.25";
    t1b.en.score = 0.25;
    CHECK_EQ_INT(judge_cache_put(c, &t1b.en, &e), 0);
    CHECK_EQ_INT(judge_cache_get(c, t1.en.key, &reply, &score, &e), 1);
    CHECK_EQ_STR(reply.data, "Score: 0.25");
    CHECK(score == 0.25);

    TEST("a lookup leaves a day-fresh last_used alone");
    CHECK_EQ_INT(judge_cache_get(c, t2.en.key, &reply, &score, &e), 1);
    judge_cache_close(c);
    CHECK_EQ_INT(column_of(path, t2.en.key, "last_used = created"), 1);

    TEST("a lookup moves an older last_used to now: with the next put, or at close");
    CHECK(age_last_used(path, t1.en.key, 2 * 86400.0));
    CHECK(age_last_used(path, t2.en.key, 3 * 86400.0));
    CHECK_EQ_INT(judge_cache_open(&c, path, JUDGE_CACHE_READONLY, &e), 0);
    CHECK_EQ_INT(judge_cache_get(c, t1.en.key, &reply, &score, &e), 1);
    judge_cache_close(c);
    CHECK_EQ_INT(column_of(path, t1.en.key, "last_used = created - 2 * 86400"), 1); /* readonly writes nothing */
    CHECK_EQ_INT(judge_cache_open(&c, path, JUDGE_CACHE_READWRITE, &e), 0);
    CHECK_EQ_INT(judge_cache_get(c, t1.en.key, &reply, &score, &e), 1);
    CHECK_EQ_INT(judge_cache_get(c, t2.en.key, &reply, &score, &e), 1);
    CHECK_EQ_INT(column_of(path, t1.en.key, "last_used < created"), 1); /* not yet written */
    CHECK_EQ_INT(judge_cache_put(c, &t3.en, &e), 0);
    CHECK_EQ_INT(column_of(path, t1.en.key, "last_used >= created AND last_used > strftime('%s', 'now') - 600"), 1);
    CHECK_EQ_INT(column_of(path, t2.en.key, "last_used >= created AND last_used > strftime('%s', 'now') - 600"), 1);
    CHECK(age_last_used(path, t2.en.key, 3 * 86400.0));
    CHECK_EQ_INT(judge_cache_get(c, t2.en.key, &reply, &score, &e), 1);
    judge_cache_close(c);
    CHECK_EQ_INT(column_of(path, t2.en.key, "last_used >= created AND last_used > strftime('%s', 'now') - 600"), 1);
    CHECK_EQ_INT(column_of(path, t3.en.key, "last_used = created"), 1);

    TEST("put_many stores all in one go; the answers survive reopening");
    test_entry many[50];
    judge_cache_entry ens[50];
    char replies[50][32];
    for (int i = 0; i < 50; i++) {
        snprintf(replies[i], sizeof replies[i], "reply %d", i);
        make_entry(&many[i], "judge-70b", 100 + i, replies[i], i / 10.0, i, 2 * i);
        ens[i] = many[i].en;
        ens[i].request = many[i].request;
    }
    CHECK_EQ_INT(judge_cache_open(&c, path, JUDGE_CACHE_READWRITE, &e), 0);
    CHECK_EQ_INT(judge_cache_put_many(c, ens, 50, &e), 0);
    judge_cache_close(c);
    CHECK_EQ_INT(judge_cache_open(&c, path, JUDGE_CACHE_READWRITE, &e), 0);
    int good = 0;
    for (int i = 0; i < 50; i++)
        good += judge_cache_get(c, ens[i].key, &reply, &score, &e) == 1 && !strcmp(reply.data, replies[i]) &&
                score == i / 10.0;
    CHECK_EQ_INT(good, 50);
    CHECK_EQ_INT(judge_cache_get(c, t1.en.key, &reply, &score, &e), 1);
    CHECK_EQ_STR(reply.data, "Score: 0.25");

    TEST("get_many: hits and misses in one go, replies and scores where hit");
    test_entry unknown;
    make_entry(&unknown, "judge-70b", 5000, "", 0, 0, 0);
    judge_cache_lookup ls[4] = {0};
    memcpy(ls[0].key, t2.en.key, 32);
    memcpy(ls[1].key, unknown.en.key, 32);
    memcpy(ls[2].key, ens[7].key, 32);
    memcpy(ls[3].key, t1.en.key, 32);
    ls[1].hit = true; /* to be cleared */
    CHECK(age_last_used(path, ens[7].key, 2 * 86400.0));
    CHECK_EQ_INT(judge_cache_get_many(c, ls, 4, &e), 0);
    CHECK(ls[0].hit && !ls[1].hit && ls[2].hit && ls[3].hit);
    CHECK_EQ_STR(ls[0].reply.data, "no number here");
    CHECK(isnan(ls[0].score));
    CHECK_EQ_STR(ls[2].reply.data, "reply 7");
    CHECK(ls[2].score == 0.7);
    CHECK_EQ_STR(ls[3].reply.data, "Score: 0.25");
    CHECK_EQ_INT(judge_cache_get_many(c, ls, 0, &e), 0);
    judge_cache_close(c);
    CHECK_EQ_INT(column_of(path, ens[7].key, "last_used >= created"), 1); /* its stale date moved */
    for (int i = 0; i < 4; i++) sb_free(&ls[i].reply);
    CHECK_EQ_INT(judge_cache_open(&c, path, JUDGE_CACHE_READWRITE, &e), 0);

    TEST("an entry without a reply is refused and stores nothing of its batch");
    ens[0].reply = NULL;
    make_entry(&t3, "judge-70b", 999, "in the failed batch", 1, 1, 1);
    ens[1] = t3.en;
    ens[1].request = t3.request;
    CHECK_EQ_INT(judge_cache_put_many(c, ens, 2, &e), EX_SOFTWARE);
    CHECK_EQ_INT(judge_cache_get(c, t3.en.key, &reply, &score, &e), 0);
    judge_cache_close(c);
    sb_free(&reply);
}

static void test_modes(void) {
    gerr e = {0};
    judge_cache *c = NULL;
    strbuf reply = {0};
    double score;
    test_entry stored, fresh;
    make_entry(&stored, "m", 1, "stored", 0.5, 1, 1);
    make_entry(&fresh, "m", 2, "fresh", 1, 1, 1);

    TEST("readonly on a missing file: every lookup misses, nothing is created");
    const char *missing = in_root("ro-missing/judge.sqlite");
    judge_cache_lookup one = {0};
    memcpy(one.key, stored.en.key, 32);
    CHECK_EQ_INT(judge_cache_open(&c, missing, JUDGE_CACHE_READONLY, &e), 0);
    CHECK_EQ_INT(judge_cache_get(c, stored.en.key, &reply, &score, &e), 0);
    CHECK(judge_cache_get_many(c, &one, 1, &e) == 0 && !one.hit);
    CHECK_EQ_INT(judge_cache_put(c, &stored.en, &e), 0);
    judge_cache_close(c);
    CHECK(!exists(missing));
    CHECK(!exists(in_root("ro-missing")));

    const char *path = in_root("modes.sqlite");
    CHECK_EQ_INT(judge_cache_open(&c, path, JUDGE_CACHE_READWRITE, &e), 0);
    CHECK_EQ_INT(judge_cache_put(c, &stored.en, &e), 0);
    judge_cache_close(c);

    TEST("readonly on a file: hits, and a put stores nothing");
    CHECK_EQ_INT(judge_cache_open(&c, path, JUDGE_CACHE_READONLY, &e), 0);
    CHECK_EQ_INT(judge_cache_get(c, stored.en.key, &reply, &score, &e), 1);
    CHECK_EQ_STR(reply.data, "stored");
    CHECK(judge_cache_get_many(c, &one, 1, &e) == 0 && one.hit && !strcmp(one.reply.data, "stored"));
    CHECK_EQ_INT(judge_cache_put(c, &fresh.en, &e), 0);
    CHECK_EQ_INT(judge_cache_get(c, fresh.en.key, &reply, &score, &e), 0);
    judge_cache_close(c);
    CHECK_EQ_INT(column_of(path, fresh.en.key, "1"), -2);

    TEST("readonly on an empty file misses everything");
    spit(in_root("empty.sqlite"), "");
    CHECK_EQ_INT(judge_cache_open(&c, in_root("empty.sqlite"), JUDGE_CACHE_READONLY, &e), 0);
    CHECK_EQ_INT(judge_cache_get(c, stored.en.key, &reply, &score, &e), 0);
    judge_cache_close(c);

    TEST("refresh never reads, and its put replaces");
    CHECK_EQ_INT(judge_cache_open(&c, path, JUDGE_CACHE_REFRESH, &e), 0);
    CHECK_EQ_INT(judge_cache_get(c, stored.en.key, &reply, &score, &e), 0);
    CHECK(judge_cache_get_many(c, &one, 1, &e) == 0 && !one.hit);
    test_entry again = stored;
    again.en.request = again.request;
    again.en.reply = "bought again";
    CHECK_EQ_INT(judge_cache_put(c, &again.en, &e), 0);
    CHECK_EQ_INT(judge_cache_get(c, stored.en.key, &reply, &score, &e), 0);
    judge_cache_close(c);
    CHECK_EQ_INT(judge_cache_open(&c, path, JUDGE_CACHE_READWRITE, &e), 0);
    CHECK_EQ_INT(judge_cache_get(c, stored.en.key, &reply, &score, &e), 1);
    CHECK_EQ_STR(reply.data, "bought again");
    judge_cache_close(c);

    TEST("off: no file, no directory, misses, puts do nothing");
    const char *off = in_root("off-dir/judge.sqlite");
    CHECK_EQ_INT(judge_cache_open(&c, off, JUDGE_CACHE_OFF, &e), 0);
    CHECK_EQ_INT(judge_cache_put(c, &stored.en, &e), 0);
    CHECK_EQ_INT(judge_cache_get(c, stored.en.key, &reply, &score, &e), 0);
    judge_cache_close(c);
    CHECK(!exists(in_root("off-dir")));
    CHECK_EQ_INT(judge_cache_open(&c, path, JUDGE_CACHE_OFF, &e), 0);
    CHECK_EQ_INT(judge_cache_get(c, stored.en.key, &reply, &score, &e), 0);
    CHECK(judge_cache_get_many(c, &one, 1, &e) == 0 && !one.hit);
    judge_cache_close(c);
    sb_free(&reply);
    sb_free(&one.reply);
}

/* Every way of opening fails with code and a one-line message naming path. */
static void check_open_fails(const char *path, int code, const char *words) {
    gerr e = {0};
    judge_cache *c = NULL;
    judge_cache_mode modes[] = {JUDGE_CACHE_READWRITE, JUDGE_CACHE_READONLY, JUDGE_CACHE_REFRESH};
    for (int i = 0; i < 3; i++) {
        memset(&e, 0, sizeof e);
        CHECK_EQ_INT(judge_cache_open(&c, path, modes[i], &e), code);
        CHECK(c == NULL);
        CHECK(strstr(e.msg, path) && strstr(e.msg, words) && !strchr(e.msg, '\n'));
    }
    memset(&e, 0, sizeof e);
    CHECK_EQ_INT(judge_cache_cmd_stats(path, stdout, &e), code);
    CHECK(strstr(e.msg, path) != NULL);
    CHECK_EQ_INT(judge_cache_cmd_export(path, in_root("never.jsonl"), &e), code);
    CHECK(!exists(in_root("never.jsonl")));
}

static void test_bad_files(void) {
    TEST("a file of random bytes: 65 naming the path, the file untouched");
    const char *junk = in_root("junk.sqlite");
    unsigned char bytes[8192];
    uint64_t s = 0x5eed;
    for (size_t i = 0; i < sizeof bytes; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        bytes[i] = (unsigned char)s;
    }
    FILE *f = fopen(junk, "wb");
    CHECK(f && fwrite(bytes, 1, sizeof bytes, f) == sizeof bytes);
    if (f) fclose(f);
    check_open_fails(junk, EX_DATAERR, "not a database");
    size_t len = 0;
    char *after = slurp(junk, &len);
    CHECK(after && len == sizeof bytes && !memcmp(after, bytes, len));
    free(after);

    TEST("another program's SQLite database: 65, not a judge cache");
    const char *other = in_root("other.sqlite");
    sqlite3 *db;
    CHECK(sqlite3_open(other, &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES (1)", NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
    check_open_fails(other, EX_DATAERR, "not a grpo judge cache");

    TEST("a judge cache from a newer schema: 65 with both versions");
    const char *newer = in_root("newer.sqlite");
    gerr e = {0};
    judge_cache *c = NULL;
    CHECK_EQ_INT(judge_cache_open(&c, newer, JUDGE_CACHE_READWRITE, &e), 0);
    judge_cache_close(c);
    CHECK(sqlite3_open(newer, &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db, "PRAGMA user_version=7", NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
    check_open_fails(newer, EX_DATAERR, "schema version 7");

    TEST("a directory at the path, or a file in the way of the directory: 74");
    mkdir(in_root("a-dir.sqlite"), 0777);
    check_open_fails(in_root("a-dir.sqlite"), EX_IOERR, "a-dir.sqlite");
    spit(in_root("plain"), "x");
    CHECK_EQ_INT(judge_cache_open(&c, in_root("plain/judge.sqlite"), JUDGE_CACHE_READWRITE, &e), EX_IOERR);
    CHECK(strstr(e.msg, in_root("plain/judge.sqlite")) != NULL);

    TEST("stats, export and prune of a missing file: 66");
    const char *missing = in_root("missing.sqlite");
    CHECK_EQ_INT(judge_cache_cmd_stats(missing, stdout, &e), EX_NOINPUT);
    CHECK(strstr(e.msg, missing) != NULL);
    CHECK_EQ_INT(judge_cache_cmd_export(missing, "-", &e), EX_NOINPUT);
    CHECK_EQ_INT(judge_cache_cmd_prune(missing, 10, NULL, stdout, &e), EX_NOINPUT);
    CHECK(!exists(missing));
}

int main(void) {
    if (!make_root()) return 1;
    test_modes_and_paths();
    test_round_trip();
    test_modes();
    test_bad_files();
    remove_root();
    return check_done();
}
