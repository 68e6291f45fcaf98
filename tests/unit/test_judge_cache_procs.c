/* The judge cache under several processes: writers that create one file at
 * the same instant and write disjoint and overlapping keys while reading
 * them back, and writers killed with SIGKILL at random moments, after which
 * every answer a put returned for is there. */
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "judge_cache_fixture.h"
#include "util/clock.h"
#include "util/rng.h"

#define WRITERS 4
#define OWN 150    /* keys only one writer puts */
#define SHARED 50  /* keys every writer puts, each with its own reply */

static _Noreturn void child_fail(const char *who, const gerr *e) {
    fprintf(stderr, "# %s: %s\n", who, e->msg);
    _exit(1);
}

static void own_reply(char *out, size_t cap, int writer, int i) { snprintf(out, cap, "own %d %d", writer, i); }

/* One writer: puts its own keys (some in pairs), every third step one of the
 * shared keys, and reads both back at once. Exit 0 when everything held. */
static _Noreturn void writer(const char *path, int w, int barrier) {
    char go;
    if (read(barrier, &go, 1) != 0) _exit(2); /* EOF: the parent let everyone go */
    gerr e = {0};
    judge_cache *c = NULL;
    if (judge_cache_open(&c, path, JUDGE_CACHE_READWRITE, &e)) child_fail("open", &e);
    strbuf reply = {0};
    double score;
    char want[64], shared_reply[64], prefix[64];
    for (int i = 0; i < OWN; i += 2) {
        test_entry t[2];
        char replies[2][64];
        judge_cache_entry ens[2];
        for (int k = 0; k < 2; k++) {
            own_reply(replies[k], sizeof replies[k], w, i + k);
            make_entry(&t[k], "m", w * 1000 + i + k, replies[k], w + (i + k) / 1000.0, i, k);
            ens[k] = t[k].en;
            ens[k].request = t[k].request;
        }
        /* odd steps one put each, even steps both in one transaction */
        if ((i / 2) % 2 == 0) {
            if (judge_cache_put_many(c, ens, 2, &e)) child_fail("put_many", &e);
        } else if (judge_cache_put(c, &ens[0], &e) || judge_cache_put(c, &ens[1], &e)) child_fail("put", &e);
        for (int k = 0; k < 2; k++) {
            int got = judge_cache_get(c, ens[k].key, &reply, &score, &e);
            if (got < 0) child_fail("get", &e);
            own_reply(want, sizeof want, w, i + k);
            if (got != 1 || strcmp(reply.data, want)) {
                fprintf(stderr, "# writer %d: own key %d read back as %d '%s'\n", w, i + k, got, reply.data);
                _exit(1);
            }
        }
        for (int j = i; j < i + 2; j++) {
            if (j % 3) continue;
            int s = j % SHARED;
            test_entry t_shared;
            snprintf(shared_reply, sizeof shared_reply, "shared %d from %d", s, w);
            make_entry(&t_shared, "m", 100000 + s, shared_reply, s, -1, -1);
            t_shared.en.request = t_shared.request;
            if (judge_cache_put(c, &t_shared.en, &e)) child_fail("put shared", &e);
            int got = judge_cache_get(c, t_shared.en.key, &reply, &score, &e);
            snprintf(prefix, sizeof prefix, "shared %d from ", s);
            if (got != 1 || strncmp(reply.data, prefix, strlen(prefix))) {
                fprintf(stderr, "# writer %d: shared key %d read back as %d '%s'\n", w, s, got, reply.data);
                _exit(1);
            }
        }
    }
    judge_cache_close(c);
    sb_free(&reply);
    _exit(0);
}

static long long scalar(const char *path, const char *sql, char *text, size_t cap) {
    sqlite3 *db;
    long long v = -1;
    if (text) text[0] = 0;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) return v;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW) {
            v = sqlite3_column_int64(st, 0);
            if (text && sqlite3_column_text(st, 0)) snprintf(text, cap, "%s", sqlite3_column_text(st, 0));
        }
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return v;
}

static void test_concurrent_writers(void) {
    char path[512];
    snprintf(path, sizeof path, "%s", in_root("shared/judge.sqlite"));
    TEST("writers create one file at once, write disjoint and shared keys, no SQLITE_BUSY escapes");
    int barrier[2];
    CHECK(pipe(barrier) == 0);
    pid_t pids[WRITERS];
    fflush(stdout);
    for (int w = 0; w < WRITERS; w++) {
        pids[w] = fork();
        if (pids[w] == 0) {
            close(barrier[1]);
            writer(path, w, barrier[0]);
        }
        CHECK(pids[w] > 0);
    }
    close(barrier[0]);
    close(barrier[1]); /* everyone starts now */
    int ok = 0;
    for (int w = 0; w < WRITERS; w++) {
        int status;
        ok += pids[w] > 0 && waitpid(pids[w], &status, 0) == pids[w] && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    CHECK_EQ_INT(ok, WRITERS);

    TEST("afterwards every key is there with a reply its writer gave");
    CHECK_EQ_INT(scalar(path, "SELECT count(*) FROM answers", NULL, 0), WRITERS * OWN + SHARED);
    char text[64];
    scalar(path, "PRAGMA integrity_check", text, sizeof text);
    CHECK_EQ_STR(text, "ok");
    gerr e = {0};
    judge_cache *c = NULL;
    CHECK_EQ_INT(judge_cache_open(&c, path, JUDGE_CACHE_READONLY, &e), 0);
    strbuf reply = {0};
    double score;
    char want[64];
    int own_ok = 0, shared_ok = 0;
    for (int w = 0; c && w < WRITERS; w++)
        for (int i = 0; i < OWN; i++) {
            test_entry t;
            make_entry(&t, "m", w * 1000 + i, "", 0, 0, 0);
            own_reply(want, sizeof want, w, i);
            own_ok += judge_cache_get(c, t.en.key, &reply, &score, &e) == 1 && !strcmp(reply.data, want) &&
                      score == w + i / 1000.0;
        }
    for (int s = 0; c && s < SHARED; s++) {
        test_entry t;
        make_entry(&t, "m", 100000 + s, "", 0, 0, 0);
        int from = -1, s_read = -1;
        shared_ok += judge_cache_get(c, t.en.key, &reply, &score, &e) == 1 &&
                     sscanf(reply.data, "shared %d from %d", &s_read, &from) == 2 && s_read == s && from >= 0 &&
                     from < WRITERS && score == s;
    }
    CHECK_EQ_INT(own_ok, WRITERS * OWN);
    CHECK_EQ_INT(shared_ok, SHARED);
    judge_cache_close(c);
    sb_free(&reply);
}

static void victim_reply(char *out, size_t cap, int round, int i) {
    snprintf(out, cap, "round %d answer %d: Score 0.%d", round, i, i % 10);
}

/* Puts entries in a loop, telling the parent each index after put returned. */
static _Noreturn void victim(const char *path, int round, int tell) {
    gerr e = {0};
    judge_cache *c = NULL;
    if (judge_cache_open(&c, path, JUDGE_CACHE_READWRITE, &e)) child_fail("open", &e);
    int ready = -1;
    if (write(tell, &ready, sizeof ready) != sizeof ready) _exit(3);
    char reply[96];
    for (int i = 0; i < 1000000; i++) {
        test_entry t;
        victim_reply(reply, sizeof reply, round, i);
        make_entry(&t, "victim", round * 1000000 + i, reply, i % 10 / 10.0, i, 1);
        t.en.request = t.request;
        if (judge_cache_put(c, &t.en, &e)) child_fail("put", &e);
        if (write(tell, &i, sizeof i) != sizeof i) _exit(3);
    }
    _exit(4); /* never reached in time: the parent kills it first */
}

static void test_kill_9(void) {
    char path[512];
    snprintf(path, sizeof path, "%s", in_root("killed/judge.sqlite"));
    rng_stream rng;
    rng_init(&rng, 7, "kill-9", 6, 0);
    TEST("SIGKILL at random moments (some during open): every answer put returned for is there");
    int total = 0, rounds_with_answers = 0;
    for (int round = 0; round < 6; round++) {
        int tell[2];
        CHECK(pipe(tell) == 0);
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            close(tell[0]);
            victim(path, round, tell[1]);
        }
        CHECK(pid > 0);
        close(tell[1]);
        int first = 0, n = 0;
        /* even rounds wait until the cache is open and its first answer stored (so a
         * loaded machine still gets answers in before the kill), odd ones may kill
         * it while it opens or creates */
        if (round % 2 == 0) {
            CHECK(read(tell[0], &first, sizeof first) == sizeof first && first == -1);
            CHECK(read(tell[0], &first, sizeof first) == sizeof first && first == 0);
            n = 1;
        }
        usleep((useconds_t)(round % 2 == 0 ? 5000 + rng_below(&rng, 40000) : rng_below(&rng, 3000)));
        kill(pid, SIGKILL);
        int status = 0;
        CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        int i, in_order = 1;
        while (read(tell[0], &i, sizeof i) == sizeof i) {
            if (i == -1) continue;
            in_order &= i == n;
            n++;
        }
        close(tell[0]);
        CHECK(in_order);

        gerr e = {0};
        judge_cache *c = NULL;
        CHECK_EQ_INT(judge_cache_open(&c, path, JUDGE_CACHE_READWRITE, &e), 0);
        strbuf reply = {0};
        double score;
        char want[96];
        int found = 0;
        for (int k = 0; c && k < n; k++) {
            test_entry t;
            make_entry(&t, "victim", round * 1000000 + k, "", 0, 0, 0);
            victim_reply(want, sizeof want, round, k);
            found += judge_cache_get(c, t.en.key, &reply, &score, &e) == 1 && !strcmp(reply.data, want) &&
                     score == k % 10 / 10.0;
        }
        if (found != n) printf("#   round %d: %d of %d answers found\n", round, found, n);
        CHECK_EQ_INT(found, n);
        judge_cache_close(c);
        sb_free(&reply);
        total += n;
        rounds_with_answers += n > 0;
    }
    CHECK(rounds_with_answers >= 3); /* the waiting rounds got some answers stored */
    char text[64];
    scalar(path, "PRAGMA integrity_check", text, sizeof text);
    CHECK_EQ_STR(text, "ok");
    CHECK(scalar(path, "SELECT count(*) FROM answers", NULL, 0) >= total);
    printf("# %d answers checked after kills\n", total);
}

/* Holds the write lock of path for `ms` milliseconds, after telling `tell`. */
static _Noreturn void lock_holder(const char *path, int ms, int tell) {
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK || sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        _exit(1);
    char locked = 1;
    if (write(tell, &locked, 1) != 1) _exit(1);
    usleep((useconds_t)ms * 1000);
    _exit(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK ? 0 : 1);
}

static void test_waits_for_a_lock(void) {
    char path[512];
    snprintf(path, sizeof path, "%s", in_root("locked.sqlite"));
    gerr e = {0};
    judge_cache *c = NULL;
    TEST("a put waits while another process holds the write lock, then stores");
    CHECK_EQ_INT(judge_cache_open(&c, path, JUDGE_CACHE_READWRITE, &e), 0);
    int tell[2];
    CHECK(pipe(tell) == 0);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(tell[0]);
        lock_holder(path, 300, tell[1]);
    }
    close(tell[1]);
    char locked = 0;
    CHECK(read(tell[0], &locked, 1) == 1 && locked == 1);
    close(tell[0]);
    test_entry t;
    make_entry(&t, "m", 1, "after the lock", 1, 1, 1);
    double t0 = now_seconds();
    CHECK_EQ_INT(judge_cache_put(c, &t.en, &e), 0);
    double waited = now_seconds() - t0;
    CHECK(waited > 0.2);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    strbuf reply = {0};
    double score;
    CHECK_EQ_INT(judge_cache_get(c, t.en.key, &reply, &score, &e), 1);
    CHECK_EQ_STR(reply.data, "after the lock");
    judge_cache_close(c);
    sb_free(&reply);
}

int main(void) {
    if (!make_root()) return 1;
    test_waits_for_a_lock();
    test_concurrent_writers();
    test_kill_9();
    remove_root();
    return check_done();
}
