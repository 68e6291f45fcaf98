/* Opening the judge cache's SQLite file and creating its schema. */
#include "cache_db.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../util/clock.h"

/* The request is the longest column and the one lookups never read: it goes
 * last, so a lookup reads the reply without walking the request's overflow
 * pages. */
#define SCHEMA_SQL                                                                       \
    "CREATE TABLE answers("                                                              \
    " key BLOB PRIMARY KEY NOT NULL CHECK (typeof(key) = 'blob' AND length(key) = 32),"  \
    " score REAL,"                                                                       \
    " reply TEXT NOT NULL,"                                                              \
    " last_used REAL NOT NULL,"                                                          \
    " model TEXT NOT NULL,"                                                              \
    " prompt_tokens INTEGER CHECK (prompt_tokens >= 0),"                                 \
    " completion_tokens INTEGER CHECK (completion_tokens >= 0),"                         \
    " created REAL NOT NULL,"                                                            \
    " request TEXT NOT NULL)"

int jc_db_error(gerr *e, sqlite3 *db, int rc, const char *path, const char *what) {
    int code;
    switch (rc & 0xff) {
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT: code = EX_DATAERR; break;
    case SQLITE_BUSY:
    case SQLITE_LOCKED: code = EX_TEMPFAIL; break;
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_READONLY:
    case SQLITE_PERM: code = EX_IOERR; break;
    default: code = EX_SOFTWARE;
    }
    const char *msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    return gerr_set(e, code, "judge cache %s: %s: %s", path, what, msg);
}

int jc_db_exec(sqlite3 *db, const char *sql, const char *path, gerr *e) {
    int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0 : jc_db_error(e, db, rc, path, sql);
}

int jc_db_prepare(sqlite3 *db, const char *sql, sqlite3_stmt **st, const char *path, gerr *e) {
    int rc = sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL);
    return rc == SQLITE_OK ? 0 : jc_db_error(e, db, rc, path, "cannot prepare a statement");
}

void jc_key_hex(const unsigned char key[32], char hex[65]) {
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        hex[2 * i] = digits[key[i] >> 4];
        hex[2 * i + 1] = digits[key[i] & 15];
    }
    hex[64] = 0;
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

bool jc_key_parse(const char *s, size_t len, unsigned char key[32]) {
    if (len != 64) return false;
    for (int i = 0; i < 32; i++) {
        int hi = hex_value(s[2 * i]), lo = hex_value(s[2 * i + 1]);
        if (hi < 0 || lo < 0) return false;
        key[i] = (unsigned char)(hi << 4 | lo);
    }
    return true;
}

/* mkdir -p of the directory that holds path. */
static int make_parent_dirs(const char *path, gerr *e) {
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path) return 0;
    char *dir = xstrndup(path, (size_t)(slash - path));
    int rc = 0;
    for (char *p = dir + 1;; p++) {
        if (*p != '/' && *p != 0) continue;
        char c = *p;
        *p = 0;
        if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
            rc = gerr_set(e, EX_IOERR, "judge cache %s: cannot create directory %s: %s", path, dir, strerror(errno));
            break;
        }
        *p = c;
        if (!c) break;
    }
    struct stat st;
    if (!rc && (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)))
        rc = gerr_set(e, EX_IOERR, "judge cache %s: %s is not a directory", path, dir);
    free(dir);
    return rc;
}

/* The header fields that tell a judge cache from any other SQLite file. */
typedef struct {
    long long application_id, user_version, n_objects;
} schema_state;

static int read_schema_state(sqlite3 *db, schema_state *s) {
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(db,
                                "SELECT (SELECT application_id FROM pragma_application_id),"
                                " (SELECT user_version FROM pragma_user_version),"
                                " (SELECT count(*) FROM sqlite_master)",
                                -1, &st, NULL);
    if (rc != SQLITE_OK) return rc;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        s->application_id = sqlite3_column_int64(st, 0);
        s->user_version = sqlite3_column_int64(st, 1);
        s->n_objects = sqlite3_column_int64(st, 2);
        rc = SQLITE_OK;
    }
    /* keep the step's error: finalize would report the same code, but
     * sqlite3_errmsg must still describe it */
    if (rc == SQLITE_OK) rc = sqlite3_finalize(st);
    else sqlite3_finalize(st);
    return rc;
}

static bool schema_is_empty(const schema_state *s) {
    return s->application_id == 0 && s->user_version == 0 && s->n_objects == 0;
}

static int check_schema(const schema_state *s, const char *path, gerr *e) {
    if (s->application_id != JC_APPLICATION_ID)
        return gerr_set(e, EX_DATAERR, "judge cache %s: an SQLite database, but not a grpo judge cache", path);
    if (s->user_version != JC_SCHEMA_VERSION)
        return gerr_set(e, EX_DATAERR, "judge cache %s: schema version %lld, this grpo reads version %d", path,
                        s->user_version, JC_SCHEMA_VERSION);
    return 0;
}

/* Runs a statement that a fresh file's creation by another process may
 * answer SQLITE_BUSY without consulting the busy handler (journal_mode),
 * retrying until the busy timeout. Returns the SQLite code. */
static int exec_retrying_busy(sqlite3 *db, const char *sql) {
    double deadline = wall_seconds() + JC_BUSY_TIMEOUT_MS / 1000.0;
    for (;;) {
        int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
        if ((rc != SQLITE_BUSY && rc != SQLITE_LOCKED) || wall_seconds() > deadline) return rc;
        usleep(1000);
    }
}

static int open_for_write(sqlite3 *db, const char *path, gerr *e) {
    int rc = exec_retrying_busy(db, "PRAGMA journal_mode=WAL");
    if (rc != SQLITE_OK) return jc_db_error(e, db, rc, path, "cannot open");
    /* journal_mode answers the mode it ended in; WAL cannot be had on some
     * file systems (no shared memory), and without it readers block writers */
    sqlite3_stmt *st;
    if (jc_db_prepare(db, "PRAGMA journal_mode", &st, path, e)) return e->code;
    rc = sqlite3_step(st);
    bool wal = rc == SQLITE_ROW && sqlite3_column_text(st, 0) &&
               !strcmp((const char *)sqlite3_column_text(st, 0), "wal");
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW) return jc_db_error(e, db, rc, path, "cannot read the journal mode");
    if (!wal) return gerr_set(e, EX_IOERR, "judge cache %s: cannot switch to WAL mode", path);
    if (jc_db_exec(db, "PRAGMA synchronous=NORMAL", path, e)) return e->code;

    rc = exec_retrying_busy(db, "BEGIN IMMEDIATE");
    if (rc != SQLITE_OK) return jc_db_error(e, db, rc, path, "cannot lock");
    schema_state s;
    rc = read_schema_state(db, &s);
    int err = 0;
    if (rc != SQLITE_OK) err = jc_db_error(e, db, rc, path, "cannot read");
    else if (schema_is_empty(&s)) {
        char sql[256];
        snprintf(sql, sizeof sql, "PRAGMA application_id=%d; PRAGMA user_version=%d;", JC_APPLICATION_ID,
                 JC_SCHEMA_VERSION);
        err = jc_db_exec(db, SCHEMA_SQL, path, e);
        if (!err) err = jc_db_exec(db, sql, path, e);
    } else err = check_schema(&s, path, e);
    if (err) {
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL); /* closing would roll back too */
        return err;
    }
    return jc_db_exec(db, "COMMIT", path, e);
}

static int open_for_read(sqlite3 *db, bool *empty, const char *path, gerr *e) {
    schema_state s;
    int rc = read_schema_state(db, &s);
    if (rc != SQLITE_OK) return jc_db_error(e, db, rc, path, "cannot read");
    *empty = schema_is_empty(&s);
    return *empty ? 0 : check_schema(&s, path, e);
}

int jc_db_open(sqlite3 **out, const char *path, jc_open_how how, gerr *e) {
    *out = NULL;
    bool write = how == JC_OPEN_WRITE || how == JC_OPEN_WRITE_EXISTING;
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno != ENOENT)
            return gerr_set(e, EX_IOERR, "judge cache %s: cannot open: %s", path, strerror(errno));
        if (how == JC_OPEN_READ) return 0;
        if (how != JC_OPEN_WRITE) return gerr_set(e, EX_NOINPUT, "judge cache %s: no such file", path);
    }
    if (write && make_parent_dirs(path, e)) return e->code;

    int flags = (write ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READONLY) | SQLITE_OPEN_NOMUTEX;
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db, flags, NULL);
    if (rc != SQLITE_OK) {
        jc_db_error(e, db, rc, path, "cannot open");
        sqlite3_close(db);
        return e->code;
    }
    sqlite3_extended_result_codes(db, 1);
    sqlite3_busy_timeout(db, JC_BUSY_TIMEOUT_MS);
    char mmap_sql[64];
    snprintf(mmap_sql, sizeof mmap_sql, "PRAGMA mmap_size=%lld", (long long)JC_MMAP_BYTES);
    bool empty = false;
    int err = jc_db_exec(db, mmap_sql, path, e);
    if (!err) err = write ? open_for_write(db, path, e) : open_for_read(db, &empty, path, e);
    if (err || empty) {
        sqlite3_close(db);
        return err;
    }
    *out = db;
    return 0;
}
