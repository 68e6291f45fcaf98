/* `grpo-reward cache stats|export|import|prune`: looking after the judge
 * cache file from the command line (formats in cache.h). */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../io/jsonl.h"
#include "../util/clock.h"
#include "cache.h"
#include "cache_db.h"

#define ANSWER_COLUMNS "key, model, request, reply, score, prompt_tokens, completion_tokens, created, last_used"

/* path, or the default path kept in *storage. */
static const char *resolve_path(const char *path, strbuf *storage) {
    if (path) return path;
    judge_cache_default_path(storage);
    return storage->data;
}

static long long file_size(const char *path, const char *suffix) {
    strbuf name = {0};
    sb_puts(&name, path);
    sb_puts(&name, suffix);
    struct stat st;
    long long size = stat(name.data, &st) == 0 ? (long long)st.st_size : 0;
    sb_free(&name);
    return size;
}

static void put_number_or_null(strbuf *b, sqlite3_stmt *st, int col) {
    if (sqlite3_column_type(st, col) == SQLITE_NULL) sb_puts(b, "null");
    else sb_json_number(b, sqlite3_column_double(st, col));
}

static void put_int_or_null(strbuf *b, sqlite3_stmt *st, int col) {
    if (sqlite3_column_type(st, col) == SQLITE_NULL) sb_puts(b, "null");
    else sb_printf(b, "%lld", (long long)sqlite3_column_int64(st, col));
}

static void put_text(strbuf *b, sqlite3_stmt *st, int col) {
    const unsigned char *text = sqlite3_column_text(st, col);
    sb_json_string(b, text ? (const char *)text : "", (size_t)sqlite3_column_bytes(st, col));
}

static int write_out(FILE *out, const strbuf *b, gerr *e) {
    if (fwrite(b->data, 1, b->len, out) != b->len || fflush(out) != 0)
        return gerr_set(e, EX_IOERR, "cannot write the output");
    return 0;
}

/* ---- stats ------------------------------------------------------------------ */

static int gather_stats(sqlite3 *db, const char *path, strbuf *js, gerr *e) {
    sqlite3_stmt *totals = NULL, *models = NULL;
    if (jc_db_exec(db, "BEGIN", path, e)) return e->code;
    int err = jc_db_prepare(db,
                            "SELECT count(*), count(score), min(created), max(created), max(last_used),"
                            " coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0)"
                            " FROM answers",
                            &totals, path, e);
    if (!err) err = jc_db_prepare(db, "SELECT model, count(*) FROM answers GROUP BY model ORDER BY model", &models,
                                  path, e);
    int rc = err ? SQLITE_OK : sqlite3_step(totals);
    if (!err && rc != SQLITE_ROW) err = jc_db_error(e, db, rc, path, "cannot read");
    if (!err) {
        sb_printf(js, ",\"entries\":%lld", (long long)sqlite3_column_int64(totals, 0));
        sb_puts(js, ",\"models\":{");
        bool first = true;
        while ((rc = sqlite3_step(models)) == SQLITE_ROW) {
            if (!first) sb_putc(js, ',');
            first = false;
            put_text(js, models, 0);
            sb_printf(js, ":%lld", (long long)sqlite3_column_int64(models, 1));
        }
        if (rc != SQLITE_DONE) err = jc_db_error(e, db, rc, path, "cannot read");
        sb_printf(js, "},\"scored\":%lld,\"oldest\":", (long long)sqlite3_column_int64(totals, 1));
        put_number_or_null(js, totals, 2);
        sb_puts(js, ",\"newest\":");
        put_number_or_null(js, totals, 3);
        sb_puts(js, ",\"last_used\":");
        put_number_or_null(js, totals, 4);
        sb_printf(js, ",\"prompt_tokens\":%lld,\"completion_tokens\":%lld",
                  (long long)sqlite3_column_int64(totals, 5), (long long)sqlite3_column_int64(totals, 6));
    }
    sqlite3_finalize(totals);
    sqlite3_finalize(models);
    if (!err) err = jc_db_exec(db, "COMMIT", path, e);
    return err;
}

int judge_cache_cmd_stats(const char *path_arg, FILE *out, gerr *e) {
    strbuf def = {0}, js = {0};
    const char *path = resolve_path(path_arg, &def);
    sqlite3 *db;
    int err = jc_db_open(&db, path, JC_OPEN_READ_EXISTING, e);
    if (!err) {
        sb_puts(&js, "{\"path\":");
        sb_json_string(&js, path, strlen(path));
        /* bytes after reading, so a -wal file the read recovered is counted */
        strbuf rest = {0};
        if (db) err = gather_stats(db, path, &rest, e);
        else sb_puts(&rest, ",\"entries\":0,\"models\":{},\"scored\":0,\"oldest\":null,\"newest\":null,"
                            "\"last_used\":null,\"prompt_tokens\":0,\"completion_tokens\":0");
        sb_printf(&js, ",\"bytes\":%lld,\"wal_bytes\":%lld", file_size(path, ""), file_size(path, "-wal"));
        sb_append(&js, rest.data, rest.len);
        sb_puts(&js, "}\n");
        sb_free(&rest);
        sqlite3_close(db);
    }
    if (!err) err = write_out(out, &js, e);
    sb_free(&js);
    sb_free(&def);
    return err;
}

/* ---- export ----------------------------------------------------------------- */

/* The export's fields, in the order of ANSWER_COLUMNS. */
typedef enum { FIELD_TEXT, FIELD_NUMBER, FIELD_NUMBER_OR_NULL, FIELD_INT_OR_NULL } field_kind;
static const struct {
    const char *name;
    field_kind kind;
} export_fields[] = {
    {"model", FIELD_TEXT},          {"request", FIELD_TEXT},       {"reply", FIELD_TEXT},
    {"score", FIELD_NUMBER_OR_NULL}, {"prompt_tokens", FIELD_INT_OR_NULL}, {"completion_tokens", FIELD_INT_OR_NULL},
    {"created", FIELD_NUMBER},       {"last_used", FIELD_NUMBER},
};

static int entry_json(sqlite3_stmt *st, const char *path, strbuf *b, gerr *e) {
    if (sqlite3_column_bytes(st, 0) != 32 || sqlite3_column_type(st, 0) != SQLITE_BLOB)
        return gerr_set(e, EX_DATAERR, "judge cache %s: an entry whose key is not 32 bytes", path);
    char hex[65];
    jc_key_hex(sqlite3_column_blob(st, 0), hex);
    sb_clear(b);
    sb_printf(b, "{\"key\":\"%s\"", hex);
    for (int i = 0; i < (int)(sizeof export_fields / sizeof export_fields[0]); i++) {
        int col = i + 1;
        sb_printf(b, ",\"%s\":", export_fields[i].name);
        switch (export_fields[i].kind) {
        case FIELD_TEXT: put_text(b, st, col); break;
        case FIELD_NUMBER: sb_json_number(b, sqlite3_column_double(st, col)); break;
        case FIELD_NUMBER_OR_NULL: put_number_or_null(b, st, col); break;
        case FIELD_INT_OR_NULL: put_int_or_null(b, st, col); break;
        }
    }
    sb_putc(b, '}');
    return 0;
}

static int export_rows(sqlite3 *db, const char *path, jsonl_writer *w, gerr *e) {
    sqlite3_stmt *st;
    if (jc_db_exec(db, "BEGIN", path, e)) return e->code;
    if (jc_db_prepare(db, "SELECT " ANSWER_COLUMNS " FROM answers ORDER BY key", &st, path, e)) return e->code;
    strbuf line = {0};
    int rc = SQLITE_DONE, err = 0;
    while (!err && (rc = sqlite3_step(st)) == SQLITE_ROW)
        err = entry_json(st, path, &line, e) || jsonl_write_line(w, line.data, line.len, e) ? e->code : 0;
    if (!err && rc != SQLITE_DONE) err = jc_db_error(e, db, rc, path, "cannot read");
    sqlite3_finalize(st);
    sb_free(&line);
    return err ? err : jc_db_exec(db, "COMMIT", path, e);
}

int judge_cache_cmd_export(const char *path_arg, const char *out_path, gerr *e) {
    strbuf def = {0};
    const char *path = resolve_path(path_arg, &def);
    sqlite3 *db;
    int err = jc_db_open(&db, path, JC_OPEN_READ_EXISTING, e);
    if (!err) {
        jsonl_writer w;
        err = jsonl_writer_open(&w, out_path, e);
        if (!err && db) err = export_rows(db, path, &w, e);
        if (!err) err = jsonl_writer_commit(&w, e);
        else jsonl_writer_abort(&w);
        sqlite3_close(db);
    }
    sb_free(&def);
    return err;
}

/* ---- import ----------------------------------------------------------------- */

typedef struct {
    strbuf key_text, model, request, reply;
    unsigned char key[32];
    double score, created, last_used;
    int has_score;
    long long prompt_tokens, completion_tokens;
    int has_prompt_tokens, has_completion_tokens;
} import_entry;

static int read_entry(const record *r, import_entry *en, gerr *e) {
    int present;
    if (record_get_string(r, "key", true, &en->key_text, NULL, e)) return e->code;
    if (!jc_key_parse(en->key_text.data, en->key_text.len, en->key)) {
        if (en->key_text.len != 64)
            return gerr_at(e, EX_DATAERR, r->file, r->line, "field \"key\": expected 64 hex digits, got %zu characters",
                           en->key_text.len);
        return gerr_at(e, EX_DATAERR, r->file, r->line, "field \"key\": expected 64 hex digits, got a non-hex character");
    }
    if (record_get_string(r, "model", true, &en->model, NULL, e) ||
        record_get_string(r, "request", true, &en->request, NULL, e) ||
        record_get_string(r, "reply", true, &en->reply, NULL, e) ||
        record_get_number(r, "score", false, &en->score, &en->has_score, e) ||
        record_get_int(r, "prompt_tokens", false, 0, LLONG_MAX, &en->prompt_tokens, &en->has_prompt_tokens, e) ||
        record_get_int(r, "completion_tokens", false, 0, LLONG_MAX, &en->completion_tokens,
                       &en->has_completion_tokens, e) ||
        record_get_number(r, "created", true, &en->created, NULL, e))
        return e->code;
    if (en->created < 0)
        return gerr_at(e, EX_DATAERR, r->file, r->line, "field \"created\": expected unix seconds >= 0, got %.17g",
                       en->created);
    if (record_get_number(r, "last_used", false, &en->last_used, &present, e)) return e->code;
    if (present != 2) en->last_used = en->created;
    return 0;
}

static void bind_import_entry(sqlite3_stmt *st, const import_entry *en) {
    sqlite3_bind_blob(st, 1, en->key, 32, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, en->model.data, (int)en->model.len, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, en->request.data, (int)en->request.len, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, en->reply.data, (int)en->reply.len, SQLITE_STATIC);
    if (en->has_score == 2) sqlite3_bind_double(st, 5, en->score);
    else sqlite3_bind_null(st, 5);
    if (en->has_prompt_tokens == 2) sqlite3_bind_int64(st, 6, en->prompt_tokens);
    else sqlite3_bind_null(st, 6);
    if (en->has_completion_tokens == 2) sqlite3_bind_int64(st, 7, en->completion_tokens);
    else sqlite3_bind_null(st, 7);
    sqlite3_bind_double(st, 8, en->created);
    sqlite3_bind_double(st, 9, en->last_used);
}

static int import_lines(sqlite3 *db, const char *path, jsonl_reader *in, gerr *e) {
    sqlite3_stmt *st;
    if (jc_db_prepare(db,
                      "INSERT INTO answers(" ANSWER_COLUMNS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
                      " ON CONFLICT(key) DO UPDATE SET model = excluded.model, request = excluded.request,"
                      " reply = excluded.reply, score = excluded.score, prompt_tokens = excluded.prompt_tokens,"
                      " completion_tokens = excluded.completion_tokens, created = excluded.created,"
                      " last_used = excluded.last_used"
                      " WHERE excluded.created > answers.created",
                      &st, path, e))
        return e->code;
    record rec;
    record_init(&rec);
    import_entry en = {0};
    const char *line;
    size_t len;
    int got = 0, err = 0;
    while (!err && (got = jsonl_next_line(in, &line, &len, e)) == 1) {
        if (record_parse(&rec, line, len, in->name, in->line_no, e) || read_entry(&rec, &en, e)) {
            err = e->code;
            break;
        }
        bind_import_entry(st, &en);
        int rc = sqlite3_step(st);
        if (rc != SQLITE_DONE) err = jc_db_error(e, db, rc, path, "cannot store");
        sqlite3_reset(st);
    }
    if (!err && got < 0) err = e->code;
    sqlite3_finalize(st);
    record_free(&rec);
    sb_free(&en.key_text);
    sb_free(&en.model);
    sb_free(&en.request);
    sb_free(&en.reply);
    return err;
}

int judge_cache_cmd_import(const char *path_arg, const char *in_path, gerr *e) {
    strbuf def = {0};
    const char *path = resolve_path(path_arg, &def);
    jsonl_reader in;
    int err = jsonl_open(&in, in_path, e);
    if (err) {
        sb_free(&def);
        return err;
    }
    sqlite3 *db;
    err = jc_db_open(&db, path, JC_OPEN_WRITE, e);
    if (!err) {
        /* one transaction: a bad line anywhere leaves the file as it was */
        err = jc_db_exec(db, "BEGIN IMMEDIATE", path, e);
        if (!err) err = import_lines(db, path, &in, e);
        if (!err) err = jc_db_exec(db, "COMMIT", path, e);
        if (err && !sqlite3_get_autocommit(db)) sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        sqlite3_close(db);
    }
    jsonl_close(&in);
    sb_free(&def);
    return err;
}

/* ---- prune ------------------------------------------------------------------ */

static int delete_old(sqlite3 *db, const char *path, double cutoff, const char *model, long long *removed,
                      long long *left, gerr *e) {
    sqlite3_stmt *del = NULL, *count = NULL;
    if (jc_db_exec(db, "BEGIN IMMEDIATE", path, e)) return e->code;
    int err = jc_db_prepare(db, "DELETE FROM answers WHERE created < ?1 AND (?2 IS NULL OR model = ?2)", &del, path, e);
    if (!err) err = jc_db_prepare(db, "SELECT count(*) FROM answers", &count, path, e);
    if (!err) {
        sqlite3_bind_double(del, 1, cutoff);
        if (model) sqlite3_bind_text(del, 2, model, -1, SQLITE_STATIC);
        int rc = sqlite3_step(del);
        if (rc != SQLITE_DONE) err = jc_db_error(e, db, rc, path, "cannot delete");
        *removed = sqlite3_changes64(db);
    }
    if (!err) {
        int rc = sqlite3_step(count);
        if (rc != SQLITE_ROW) err = jc_db_error(e, db, rc, path, "cannot count");
        else *left = sqlite3_column_int64(count, 0);
    }
    sqlite3_finalize(del);
    sqlite3_finalize(count);
    if (!err) err = jc_db_exec(db, "COMMIT", path, e);
    if (err && !sqlite3_get_autocommit(db)) sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return err;
}

int judge_cache_cmd_prune(const char *path_arg, double max_age_seconds, const char *model, FILE *out, gerr *e) {
    if (!isfinite(max_age_seconds) || max_age_seconds < 0)
        return gerr_set(e, EX_USAGE, "cache prune: expected a maximum age in seconds >= 0, got %g", max_age_seconds);
    strbuf def = {0};
    const char *path = resolve_path(path_arg, &def);
    sqlite3 *db;
    int err = jc_db_open(&db, path, JC_OPEN_WRITE_EXISTING, e);
    long long removed = 0, left = 0;
    if (!err) {
        err = delete_old(db, path, wall_seconds() - max_age_seconds, model, &removed, &left, e);
        /* give the freed pages back to the file system, and empty the -wal
         * file; a reader still in it only keeps the WAL from shrinking */
        if (!err && removed) err = jc_db_exec(db, "VACUUM", path, e);
        if (!err) {
            int rc = sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
            if (rc != SQLITE_OK && (rc & 0xff) != SQLITE_BUSY)
                err = jc_db_error(e, db, rc, path, "cannot checkpoint");
        }
        sqlite3_close(db);
    }
    if (!err) {
        strbuf js = {0};
        sb_printf(&js, "{\"removed\":%lld,\"entries\":%lld}\n", removed, left);
        err = write_out(out, &js, e);
        sb_free(&js);
    }
    sb_free(&def);
    return err;
}
