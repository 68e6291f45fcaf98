/* The judge cache's SQLite file: opening, schema, errors. Shared by the
 * cache itself (cache.c) and the `grpo-reward cache` subcommands
 * (cache_cmd.c); not part of the public interface.
 *
 * The file: journal_mode=WAL, synchronous=NORMAL, application_id 'grpj',
 * user_version JC_SCHEMA_VERSION, one table:
 *
 *   answers(key BLOB PRIMARY KEY (32 bytes), score REAL (NULL = none),
 *           reply TEXT, last_used REAL, model TEXT, prompt_tokens INTEGER,
 *           completion_tokens INTEGER (NULL = absent), created REAL,
 *           request TEXT)
 *
 * created: when the answer was stored; last_used: when it was stored or
 * last looked up, to within JC_LAST_USED_RESOLUTION (unix seconds).
 *
 * Why synchronous=NORMAL: in WAL mode a commit has write()n its frames into
 * the -wal file before sqlite3_step returns, so the operating system holds
 * them even when the process is killed (-9) the next instant; FULL adds an
 * fsync per commit, which only matters when the machine itself loses power
 * (then the last commits since a checkpoint may roll back, never corrupt).
 *
 * Errors name the path and say what failed, in one line:
 *   65 the file is not a SQLite database, is corrupt, or is not a judge cache
 *   66 the file is missing where it must exist (stats, export, prune)
 *   74 the file or its directory cannot be created, opened, read or written
 *   75 another process held the lock longer than JC_BUSY_TIMEOUT_MS
 *   70 anything else SQLite reports (a bug) */
#ifndef GRPO_JUDGE_CACHE_DB_H
#define GRPO_JUDGE_CACHE_DB_H

#include <sqlite3.h>
#include <stdbool.h>

#include "../util/err.h"

#define JC_SCHEMA_VERSION 1
#define JC_APPLICATION_ID 0x6772706a /* "grpj" */
/* How long a writer waits for another one. Commits take microseconds; only
 * an import or a prune holds the lock for long. */
#define JC_BUSY_TIMEOUT_MS 60000
/* Reads go through a memory map of up to this much of the file rather than
 * a read() per page: lookups/s nearly double on a 200 MB cache. (The price,
 * as SQLite documents it: an I/O error while reading the map is a SIGBUS,
 * not an error code.) */
#define JC_MMAP_BYTES (1LL << 30)
/* last_used moves only when it is older than this: one write per entry and
 * day at most, however often a rerun looks it up. */
#define JC_LAST_USED_RESOLUTION 86400.0

typedef enum {
    JC_OPEN_READ,          /* SQLITE_OPEN_READONLY; a missing or empty file gives *db = NULL */
    JC_OPEN_READ_EXISTING, /* read-only; a missing file is EX_NOINPUT */
    JC_OPEN_WRITE,         /* create the directory, the file and the schema as needed */
    JC_OPEN_WRITE_EXISTING /* write, but a missing file is EX_NOINPUT */
} jc_open_how;

/* Opens path. *db is NULL (and 0 returned) when a read finds no file, or a
 * file without the table (an empty database): every lookup misses. */
int jc_db_open(sqlite3 **db, const char *path, jc_open_how how, gerr *e);

/* Fills e from an SQLite result code (see the list above) and returns the
 * sysexits code: "judge cache PATH: WHAT: SQLite's message". */
int jc_db_error(gerr *e, sqlite3 *db, int rc, const char *path, const char *what);

/* Runs SQL without results. */
int jc_db_exec(sqlite3 *db, const char *sql, const char *path, gerr *e);
int jc_db_prepare(sqlite3 *db, const char *sql, sqlite3_stmt **st, const char *path, gerr *e);

/* 64 lower-case hex digits and a NUL. */
void jc_key_hex(const unsigned char key[32], char hex[65]);
/* Parses 64 hex digits (either case); false on anything else. */
bool jc_key_parse(const char *s, size_t len, unsigned char key[32]);

#endif
