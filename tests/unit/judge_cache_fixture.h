/* Helpers shared by the judge cache's unit tests: a temporary directory,
 * entries keyed like the judge keys them, reading files and columns back. */
#ifndef GRPO_JUDGE_CACHE_FIXTURE_H
#define GRPO_JUDGE_CACHE_FIXTURE_H

#include <errno.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/mapped.h"
#include "judge/cache.h"
#include "util/sha256.h"

#include "helpers.h"

static char root[] = "/tmp/grpo-test-judge-cache-XXXXXX";

static inline bool make_root(void) {
    if (mkdtemp(root)) return true;
    printf("# mkdtemp: %s\n", strerror(errno));
    return false;
}

static inline void remove_root(void) { remove_tree(root); }

/* root/name, in one of 16 rotating buffers: copy what must live longer. */
static inline const char *in_root(const char *name) {
    static char buf[16][512];
    static int next;
    char *p = buf[next++ & 15];
    snprintf(p, 512, "%s/%s", root, name);
    return p;
}

static inline bool exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* The file's bytes (NUL-terminated, caller frees), NULL when unreadable. */
static inline char *slurp(const char *path, size_t *len) {
    gerr e = {0};
    return read_whole_file(path, len, &e);
}

static inline void spit(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* An entry whose key is the sha256 of its request, as the judge makes them. */
typedef struct {
    judge_cache_entry en;
    char request[256];
} test_entry;

static inline void make_entry(test_entry *t, const char *model, int i, const char *reply, double score, long long pt,
                       long long ct) {
    snprintf(t->request, sizeof t->request, "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"q%d\"}]}",
             model, i);
    sha256(t->request, strlen(t->request), t->en.key);
    t->en.model = model;
    t->en.request = t->request;
    t->en.reply = reply;
    t->en.score = score;
    t->en.prompt_tokens = pt;
    t->en.completion_tokens = ct;
}

/* One value from the file, read with SQLite directly: -2 = no row, -1 = NULL. */
static inline long long column_of(const char *path, const unsigned char key[32], const char *column) {
    sqlite3 *db;
    long long v = -3;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) return v;
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT %s FROM answers WHERE key = ?1", column);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_blob(st, 1, key, 32, SQLITE_STATIC);
        int rc = sqlite3_step(st);
        v = rc == SQLITE_ROW ? (sqlite3_column_type(st, 0) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 0)) : -2;
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return v;
}

/* Sets an entry's last_used to `seconds` before its created, as if it had
 * last been looked up that long ago; false when it did not. */
static inline bool age_last_used(const char *path, const unsigned char key[32], double seconds) {
    sqlite3 *db;
    bool ok = false;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) return false;
    sqlite3_busy_timeout(db, 10000);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "UPDATE answers SET last_used = created - ?2 WHERE key = ?1", -1, &st, NULL) ==
        SQLITE_OK) {
        sqlite3_bind_blob(st, 1, key, 32, SQLITE_STATIC);
        sqlite3_bind_double(st, 2, seconds);
        ok = sqlite3_step(st) == SQLITE_DONE && sqlite3_changes(db) == 1;
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return ok;
}

#endif
