/* The judge cache: answers bought from an LLM judge, kept across runs.
 *
 * One SQLite database in WAL mode, keyed by the SHA-256 of the canonical
 * request (model, fully rendered messages, sampling parameters, template
 * hash; never the API key or the URL). It stores the raw reply, the score
 * parsed from it when it was stored, token usage and timestamps. Many
 * grpo-reward processes may share one file (make -j, shards), and kill -9 at
 * any moment loses no answer that judge_cache_put returned for.
 *
 * Modes: readwrite (look up, store misses), readonly (look up, never
 * write), refresh (never look up, store and overwrite), off (no file). */
#ifndef GRPO_JUDGE_CACHE_H
#define GRPO_JUDGE_CACHE_H

#include <stdbool.h>
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
 * mode off gives a cache that misses everything and stores nothing. */
int judge_cache_open(judge_cache **c, const char *path, judge_cache_mode mode, gerr *e);
/* 1 = hit (reply and score filled; reply replaced), 0 = miss, -1 = error.
 * Always a miss in refresh and off modes. */
int judge_cache_get(judge_cache *c, const uint8_t key[32], strbuf *reply, double *score, gerr *e);
/* Stores an answer durably (committed before it returns). A no-op in
 * readonly and off modes. An existing key is overwritten. */
int judge_cache_put(judge_cache *c, const judge_cache_entry *entry, gerr *e);
void judge_cache_close(judge_cache *c);

/* `grpo-reward cache ...` */
int judge_cache_cmd_stats(const char *path, FILE *out, gerr *e);           /* one JSON object */
int judge_cache_cmd_export(const char *path, const char *out_path, gerr *e); /* JSONL, - = stdout */
int judge_cache_cmd_import(const char *path, const char *in_path, gerr *e);  /* JSONL, - = stdin; merges */
/* Removes entries older than max_age_seconds (by when they were stored) and,
 * when model is not NULL, only those of that model. Reports how many. */
int judge_cache_cmd_prune(const char *path, double max_age_seconds, const char *model, FILE *out, gerr *e);

#endif
