/* The judge cache: answers bought from an LLM judge, kept across runs.
 *
 * One SQLite database in WAL mode, keyed by the SHA-256 of the canonical
 * request (model, fully rendered messages, sampling parameters, template
 * hash; never the API key or the URL). It stores the raw reply, the score
 * parsed from it when it was stored, token usage and timestamps. Many
 * grpo-reward processes may share one file (make -j, shards), and kill -9 at
 * any moment loses no answer that judge_cache_put returned for.
 *
 * The caller never hands the cache an API key or a URL, so neither can end
 * up in the file or in an export: the key hashes only what the request JSON
 * holds, and the request JSON must leave both out.
 *
 * Modes: readwrite (look up, store misses), readonly (look up, never
 * write; opened SQLITE_OPEN_READONLY, a missing file misses everything),
 * refresh (never look up, store and overwrite), off (no file at all).
 *
 * Durability: synchronous=NORMAL. A put has written its answer into the
 * -wal file before it returns, which survives the process being killed;
 * after a power loss the newest answers may be missing, the file is never
 * corrupt. Writers wait up to 60 s for each other's locks, then fail with 75.
 *
 * Errors name the path in one line: 65 a file that is not a SQLite database
 * (or is corrupt, or is another program's database), 66 a missing file
 * where one must exist, 74 a file or directory that cannot be created,
 * opened, read or written, 75 a lock held too long. One judge_cache is used
 * by one thread at a time; processes open their own (never across fork). */
#ifndef GRPO_JUDGE_CACHE_H
#define GRPO_JUDGE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../util/err.h"
#include "../util/strbuf.h"

typedef enum { JUDGE_CACHE_READWRITE, JUDGE_CACHE_READONLY, JUDGE_CACHE_REFRESH, JUDGE_CACHE_OFF } judge_cache_mode;

/* "readwrite|readonly|refresh|off"; EX_USAGE on anything else. */
int judge_cache_parse_mode(const char *s, judge_cache_mode *out, gerr *e);

/* The default path: $XDG_CACHE_HOME/grpo/judge.sqlite, else
 * $HOME/.cache/grpo/judge.sqlite (appended to out). */
void judge_cache_default_path(strbuf *out);

typedef struct judge_cache judge_cache;

/* One stored answer. */
typedef struct {
    uint8_t key[32];
    const char *model;
    const char *request; /* the canonical request JSON the key hashes (kept for export and debugging) */
    const char *reply;   /* the judge's raw reply text (choices[0].message.content) */
    double score;        /* parsed when stored; NaN when the reply held no score */
    long long prompt_tokens, completion_tokens; /* from `usage`, -1 when absent */
} judge_cache_entry;

/* Opens (creating the file and its directory where the mode writes).
 * path NULL = judge_cache_default_path. mode off gives a cache that misses
 * everything and stores nothing, and touches no file. */
int judge_cache_open(judge_cache **c, const char *path, judge_cache_mode mode, gerr *e);
/* 1 = hit (reply and score filled; reply replaced), 0 = miss, -1 = error.
 * Always a miss in refresh and off modes. */
int judge_cache_get(judge_cache *c, const uint8_t key[32], strbuf *reply, double *score, gerr *e);
/* Many lookups in one read transaction (one snapshot; about twice as fast
 * than one judge_cache_get per key): fill key, get hit, and, where hit,
 * reply (a strbuf the caller owns and frees) and score. 0 or an error code,
 * after which the hits are not to be trusted. Never a hit in refresh and
 * off modes. */
typedef struct {
    uint8_t key[32];
    bool hit;
    double score;
    strbuf reply;
} judge_cache_lookup;
int judge_cache_get_many(judge_cache *c, judge_cache_lookup *lookups, size_t n, gerr *e);
/* Stores an answer durably (committed before it returns). A no-op in
 * readonly and off modes. An existing key is overwritten. A non-finite
 * score is stored as none, negative token counts as absent. */
int judge_cache_put(judge_cache *c, const judge_cache_entry *entry, gerr *e);
/* The same for n answers in one transaction: all stored or none. */
int judge_cache_put_many(judge_cache *c, const judge_cache_entry *entries, size_t n, gerr *e);
/* The file's path (the default one when opened with NULL), for messages. */
const char *judge_cache_path(const judge_cache *c);
void judge_cache_close(judge_cache *c);

/* `grpo-reward cache ...`. path NULL = the default path. stats, export and
 * prune need the file to exist (66 otherwise); import creates it.
 *
 * stats: one JSON object and a newline:
 *   {"path":P,"bytes":B,"wal_bytes":W,"entries":N,"models":{"M":N,...},
 *    "scored":N,"oldest":T,"newest":T,"last_used":T,
 *    "prompt_tokens":N,"completion_tokens":N}
 * (bytes: the database file, wal_bytes: its -wal file; models sorted by
 * name; T: unix seconds, null when empty; scored: entries with a score;
 * token totals over the entries that have them). */
int judge_cache_cmd_stats(const char *path, FILE *out, gerr *e);
/* export: JSONL (- or NULL = stdout; a path is written whole or not at all,
 * .zst compressed), one line per entry sorted by key, every column:
 *   {"key":HEX64,"model":S,"request":S,"reply":S,"score":X|null,
 *    "prompt_tokens":N|null,"completion_tokens":N|null,"created":T,
 *    "last_used":T}
 * from one consistent snapshot. created: when the answer was stored;
 * last_used: when it was stored or last looked up, to within a day. */
int judge_cache_cmd_export(const char *path, const char *out_path, gerr *e);
/* import: merges such JSONL (- or NULL = stdin, plain or zstd) in one
 * transaction: any bad line is FILE:LINE: field "NAME": ... (65) and nothing
 * is stored. key, model, request, reply and created are required; score and
 * the token counts may be null or absent; last_used defaults to created;
 * other fields are ignored. Where a key is already present the
 * entry with the later `created` (the newer answer) wins whole, and a tie
 * keeps the one present. Importing an export into a fresh file and
 * exporting again gives the same bytes. The import holds the write lock
 * throughout (other writers wait, up to 60 s). Specified, with the file and
 * the other subcommands, in formats/judge-cache.md. */
int judge_cache_cmd_import(const char *path, const char *in_path, gerr *e);
/* Removes entries stored more than max_age_seconds ago (by `created`) and,
 * when model is not NULL, only those of that model; then compacts the file
 * (VACUUM, and a truncating WAL checkpoint). Prints {"removed":N,"entries":M}
 * and a newline. A negative or non-finite age is 64. */
int judge_cache_cmd_prune(const char *path, double max_age_seconds, const char *model, FILE *out, gerr *e);

#endif
