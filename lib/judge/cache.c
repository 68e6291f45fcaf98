/* The judge cache: lookups and stores against one SQLite file (see
 * cache_db.h for the file, its durability and its errors).
 *
 * A hit moves the entry's `last_used` forward, but only once it is more
 * than JC_LAST_USED_RESOLUTION old: writing on every lookup would cost a
 * page or more of WAL per hit (measured: 4x fewer lookups/s). The keys to
 * touch wait in memory and are written in one transaction every TOUCH_BATCH
 * keys, with the next put, and at close; a kill loses at most those dates,
 * never an answer. */
#include "cache.h"

#include <math.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "../util/clock.h"
#include "cache_db.h"

#define TOUCH_BATCH 1024

struct judge_cache {
    judge_cache_mode mode;
    char *path;
    sqlite3 *db; /* NULL: off, or readonly on a missing or empty file */
    sqlite3_stmt *get, *put, *touch, *begin_read, *begin, *commit, *rollback;
    unsigned char (*touch_keys)[32]; /* last_used to move forward */
    size_t n_touch, cap_touch;
};

int judge_cache_parse_mode(const char *s, judge_cache_mode *out, gerr *e) {
    if (!strcmp(s, "readwrite")) *out = JUDGE_CACHE_READWRITE;
    else if (!strcmp(s, "readonly")) *out = JUDGE_CACHE_READONLY;
    else if (!strcmp(s, "refresh")) *out = JUDGE_CACHE_REFRESH;
    else if (!strcmp(s, "off")) *out = JUDGE_CACHE_OFF;
    else return gerr_set(e, EX_USAGE, "--judge-cache-mode: expected readwrite, readonly, refresh or off, got '%s'", s);
    return 0;
}

static void append_dir(strbuf *out, const char *dir) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    sb_append(out, dir, n);
}

void judge_cache_default_path(strbuf *out) {
    /* the XDG spec says a relative $XDG_CACHE_HOME is to be ignored */
    const char *xdg = getenv("XDG_CACHE_HOME");
    if (xdg && xdg[0] == '/') {
        append_dir(out, xdg);
        sb_puts(out, "/grpo/judge.sqlite");
        return;
    }
    const char *home = getenv("HOME");
    if (!home || !*home) {
        const struct passwd *pw = getpwuid(getuid());
        home = pw && pw->pw_dir && *pw->pw_dir ? pw->pw_dir : ".";
    }
    append_dir(out, home);
    sb_puts(out, "/.cache/grpo/judge.sqlite");
}

static int prepare_statements(judge_cache *c, gerr *e) {
    bool reads = c->mode == JUDGE_CACHE_READWRITE || c->mode == JUDGE_CACHE_READONLY;
    bool writes = c->mode == JUDGE_CACHE_READWRITE || c->mode == JUDGE_CACHE_REFRESH;
    if (jc_db_prepare(c->db, "COMMIT", &c->commit, c->path, e) ||
        jc_db_prepare(c->db, "ROLLBACK", &c->rollback, c->path, e))
        return e->code;
    if (reads && (jc_db_prepare(c->db, "SELECT reply, score, last_used FROM answers WHERE key = ?1", &c->get, c->path,
                                e) ||
                  jc_db_prepare(c->db, "BEGIN", &c->begin_read, c->path, e)))
        return e->code;
    if (writes && (jc_db_prepare(c->db,
                                 "INSERT OR REPLACE INTO answers(key, model, request, reply, score, prompt_tokens,"
                                 " completion_tokens, created, last_used) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)",
                                 &c->put, c->path, e) ||
                   jc_db_prepare(c->db, "BEGIN IMMEDIATE", &c->begin, c->path, e)))
        return e->code;
    if (c->mode == JUDGE_CACHE_READWRITE &&
        jc_db_prepare(c->db, "UPDATE answers SET last_used = max(last_used, ?2) WHERE key = ?1", &c->touch, c->path,
                      e))
        return e->code;
    return 0;
}

int judge_cache_open(judge_cache **out, const char *path, judge_cache_mode mode, gerr *e) {
    *out = NULL;
    judge_cache *c = xcalloc(1, sizeof *c);
    c->mode = mode;
    if (path) c->path = xstrdup(path);
    else {
        strbuf def = {0};
        judge_cache_default_path(&def);
        c->path = def.data;
    }
    if (mode != JUDGE_CACHE_OFF) {
        jc_open_how how = mode == JUDGE_CACHE_READONLY ? JC_OPEN_READ : JC_OPEN_WRITE;
        if (jc_db_open(&c->db, c->path, how, e) || (c->db && prepare_statements(c, e))) {
            judge_cache_close(c);
            return e->code;
        }
    }
    *out = c;
    return 0;
}

/* Runs one of the transaction statements. */
static int step_once(judge_cache *c, sqlite3_stmt *st, const char *what, gerr *e) {
    int rc = sqlite3_step(st);
    int err = rc == SQLITE_DONE ? 0 : jc_db_error(e, c->db, rc, c->path, what);
    sqlite3_reset(st);
    return err;
}

static void roll_back(judge_cache *c) {
    if (sqlite3_get_autocommit(c->db)) return; /* SQLite already rolled back */
    sqlite3_step(c->rollback);
    sqlite3_reset(c->rollback);
}

/* Writes the dates kept in memory, inside a transaction already begun. */
static int apply_touches(judge_cache *c, gerr *e) {
    size_t n = c->n_touch;
    c->n_touch = 0; /* dropped on failure: they are advisory */
    double now = wall_seconds();
    for (size_t i = 0; i < n; i++) {
        sqlite3_bind_blob(c->touch, 1, c->touch_keys[i], 32, SQLITE_STATIC);
        sqlite3_bind_double(c->touch, 2, now);
        if (step_once(c, c->touch, "cannot record a lookup", e)) return e->code;
    }
    return 0;
}

/* Dates are advisory: a failure here loses no answer, so callers go on
 * whatever this returns. */
static int flush_touches(judge_cache *c, gerr *e) {
    if (!c->n_touch) return 0;
    if (step_once(c, c->begin, "cannot lock", e)) return e->code;
    if (apply_touches(c, e) || step_once(c, c->commit, "cannot commit", e)) {
        roll_back(c);
        return e->code;
    }
    return 0;
}

static void queue_touch(judge_cache *c, const uint8_t key[32]) {
    if (c->n_touch == c->cap_touch) {
        c->cap_touch = c->cap_touch ? 2 * c->cap_touch : 64;
        c->touch_keys = xrealloc(c->touch_keys, c->cap_touch * sizeof *c->touch_keys);
    }
    memcpy(c->touch_keys[c->n_touch++], key, 32);
}

static void flush_touches_when_many(judge_cache *c) {
    if (c->n_touch < TOUCH_BATCH) return;
    gerr ignored = {0};
    flush_touches(c, &ignored);
}

/* One lookup: 1 hit, 0 miss, -1 error. */
static int look_up(judge_cache *c, const uint8_t key[32], strbuf *reply, double *score, double now, gerr *e) {
    sqlite3_bind_blob(c->get, 1, key, 32, SQLITE_STATIC);
    int rc = sqlite3_step(c->get);
    if (rc == SQLITE_DONE) {
        sqlite3_reset(c->get);
        return 0;
    }
    if (rc != SQLITE_ROW) {
        jc_db_error(e, c->db, rc, c->path, "cannot look up");
        sqlite3_reset(c->get);
        return -1;
    }
    const unsigned char *text = sqlite3_column_text(c->get, 0);
    size_t len = (size_t)sqlite3_column_bytes(c->get, 0);
    sb_clear(reply);
    if (text) sb_append(reply, text, len);
    *score = sqlite3_column_type(c->get, 1) == SQLITE_NULL ? (double)NAN : sqlite3_column_double(c->get, 1);
    bool stale = sqlite3_column_double(c->get, 2) < now - JC_LAST_USED_RESOLUTION;
    sqlite3_reset(c->get);
    if (c->touch && stale) queue_touch(c, key);
    return 1;
}

int judge_cache_get(judge_cache *c, const uint8_t key[32], strbuf *reply, double *score, gerr *e) {
    if (!c->get || !c->db) return 0;
    int got = look_up(c, key, reply, score, wall_seconds(), e);
    flush_touches_when_many(c);
    return got;
}

int judge_cache_get_many(judge_cache *c, judge_cache_lookup *lookups, size_t n, gerr *e) {
    for (size_t i = 0; i < n; i++) lookups[i].hit = false;
    if (!c->get || !c->db || n == 0) return 0;
    /* one read transaction: one snapshot and one WAL read lock for the lot
     * instead of a lock and an unlock (two fcntl calls) per key */
    if (step_once(c, c->begin_read, "cannot read", e)) return e->code;
    double now = wall_seconds();
    int err = 0;
    for (size_t i = 0; !err && i < n; i++) {
        int got = look_up(c, lookups[i].key, &lookups[i].reply, &lookups[i].score, now, e);
        if (got < 0) err = e->code;
        lookups[i].hit = got == 1;
    }
    if (!err) err = step_once(c, c->commit, "cannot read", e);
    if (err) roll_back(c);
    flush_touches_when_many(c);
    return err;
}

/* Writes one answer, inside a transaction already begun. */
static int store_entry(judge_cache *c, const judge_cache_entry *en, double now, gerr *e) {
    if (!en->model || !en->request || !en->reply)
        return gerr_set(e, EX_SOFTWARE, "judge cache %s: an entry without its model, request or reply", c->path);
    sqlite3_stmt *st = c->put;
    sqlite3_bind_blob(st, 1, en->key, 32, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, en->model, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, en->request, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, en->reply, -1, SQLITE_STATIC);
    /* JSON cannot carry inf, so an export would not round-trip it: none */
    if (isfinite(en->score)) sqlite3_bind_double(st, 5, en->score);
    else sqlite3_bind_null(st, 5);
    if (en->prompt_tokens >= 0) sqlite3_bind_int64(st, 6, en->prompt_tokens);
    else sqlite3_bind_null(st, 6);
    if (en->completion_tokens >= 0) sqlite3_bind_int64(st, 7, en->completion_tokens);
    else sqlite3_bind_null(st, 7);
    sqlite3_bind_double(st, 8, now);
    int err = step_once(c, st, "cannot store", e);
    sqlite3_clear_bindings(st); /* the bound strings belong to the caller */
    return err;
}

int judge_cache_put_many(judge_cache *c, const judge_cache_entry *entries, size_t n, gerr *e) {
    if (!c->put || !c->db || n == 0) return 0;
    double now = wall_seconds();
    if (step_once(c, c->begin, "cannot lock", e)) return e->code;
    /* the same commit carries the dates of earlier lookups */
    int err = c->n_touch ? apply_touches(c, e) : 0;
    for (size_t i = 0; !err && i < n; i++) err = store_entry(c, &entries[i], now, e);
    if (!err) err = step_once(c, c->commit, "cannot commit", e);
    if (err) roll_back(c);
    return err;
}

int judge_cache_put(judge_cache *c, const judge_cache_entry *entry, gerr *e) {
    return judge_cache_put_many(c, entry, 1, e);
}

const char *judge_cache_path(const judge_cache *c) { return c->path; }

void judge_cache_close(judge_cache *c) {
    if (!c) return;
    if (c->db && c->touch) {
        gerr ignored = {0};
        flush_touches(c, &ignored);
    }
    sqlite3_stmt *all[] = {c->get, c->put, c->touch, c->begin_read, c->begin, c->commit, c->rollback};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) sqlite3_finalize(all[i]);
    if (c->db) sqlite3_close(c->db); /* every statement is finalized, so this cannot be SQLITE_BUSY */
    free(c->touch_keys);
    free(c->path);
    free(c);
}
