/* Reward functions: the pieces grpo-reward combines.
 *
 * The stage (stage.c) reads rollout records a chunk at a time, decodes the
 * fields every function needs once (reward_item), asks each selected
 * function to score the whole chunk, and writes `rewards` (one entry per
 * function, in --fn order) and `reward` (the weighted sum over the entries
 * that are not null). Scoring a chunk rather than a record lets the slow
 * functions overlap their work: code runs -j sandboxes at once, the judge
 * keeps --judge-concurrency requests in flight, cmd streams to its program.
 *
 * A function's value for a record is a finite double, or REWARD_NULL (NaN)
 * when the function does not apply to that record (no reference answer, no
 * tests, ...): it is written as null and left out of the sum, as TRL does.
 *
 * formats/scored.md is the user-facing specification of the output. */
#ifndef GRPO_REWARD_H
#define GRPO_REWARD_H

#include <cjson/cJSON.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>

#include "../io/record.h"
#include "../util/err.h"

#define REWARD_NULL ((double)NAN)
static inline bool reward_is_null(double v) { return isnan(v); }

/* One record as the functions see it. */
typedef struct {
    const record *rec;      /* every field, for the functions that read more (tests, numbers, messages) */
    const char *completion; /* decoded `completion`, UTF-8, NUL-terminated; "" when absent or null */
    size_t completion_len;  /* bytes */
    bool has_completion;    /* the record has a string `completion` */
    long long n_tokens;     /* elements of `completion_tokens`; -1 when absent */
    bool last_of_input;     /* no record follows this one */
} reward_item;

/* Every function's parameters, one struct so that grpo-reward's flag table
 * fills them and --list prints them with their defaults. */
typedef struct {
    /* answer: final-answer match, and the countdown check */
    double answer_tol; /* |a-b| <= tol * max(1, |b|) counts as equal */

    /* format: tag layout */
    const char *format_tags; /* "think,answer": the tags, in the order they must appear */
    const char *format_mode; /* "strict" | "soft" | "partial" */

    /* length: DAPO soft overlong penalty and a minimum length */
    long long length_max;    /* --max-len: completions longer than this get -1 */
    long long length_buffer; /* --overlong-buffer: the penalty ramps from 0 to -1 over the last N */
    long long length_min;    /* --min-len: shorter completions get -1 (0 = off) */
    const char *length_unit; /* "tokens" (completion_tokens) | "chars" (Unicode code points) */

    /* repetition: n-gram repetition penalty over whitespace-separated words */
    long long rep_ngram;   /* n */
    double rep_max_penalty; /* the value of a completion that is one n-gram repeated (<= 0) */

    /* code: run the record's tests against the completion's code in a sandbox */
    const char *code_python;    /* interpreter */
    const char *code_tests_field; /* record field holding the tests (array of strings) */
    double code_timeout;        /* seconds of wall time per test run */
    long long code_memory_mb;   /* RLIMIT_AS of the sandboxed process */
    bool code_no_namespaces;    /* the sandbox's weakest level, as on a kernel that refuses namespaces */
    long long jobs;             /* -j: sandboxes at once */

    /* cmd: an external reward program speaking JSONL on stdin/stdout */
    const char *cmd;
    double cmd_timeout; /* seconds to wait for an answer before the program counts as silent */

    /* math-verify: cmd running scripts/grpo-math-verify */
    const char *math_verify_python; /* the interpreter that has the math-verify package */

    /* judge: an OpenAI-compatible chat-completions endpoint, answers cached */
    const char *judge_url;      /* base URL, requests go to {url}/chat/completions */
    const char *judge_model;
    const char *judge_template; /* path of the prompt template */
    const char *judge_system;   /* optional system message */
    const char *judge_regex;    /* the score in the reply (first capture group, else the match) */
    double judge_scale;         /* the parsed number is multiplied by this */
    const char *judge_key_env;  /* name of the environment variable holding the API key */
    const char *judge_cache;    /* SQLite path; NULL = $XDG_CACHE_HOME/grpo/judge.sqlite */
    const char *judge_cache_mode; /* "readwrite" | "readonly" | "refresh" | "off" */
    long long judge_concurrency;
    double judge_timeout;       /* seconds per request */
    long long judge_retries;    /* attempts after the first */
    double judge_rps;           /* requests per second, 0 = unlimited */
    double judge_tpm;           /* tokens per minute, 0 = unlimited */
    long long judge_max_tokens; /* max_tokens of the request */
    double judge_temperature;

    /* rm: a sequence-classification reward model scored at the last token */
    const char *rm_model;
    long long rm_batch;
    long long threads;
    const char *rm_chat_template; /* "auto" (the reward model's own; NULL = auto) or a family (CHAT_TEMPLATE_CHOICES) */
    const char *rm_device;        /* auto|cpu|cuda (lib/runner/device.h) */
    const char *rm_weights;       /* auto|f32|bf16|q8|q4k|mxfp4 on the CPU (lib/runner/weights.h) */
} reward_opts;

void reward_opts_default(reward_opts *p);

/* Named values, for functions whose answer per record is several entries
 * of `rewards` (cmd's {"rewards": {...}}). */
typedef struct {
    char *name; /* decoded, NUL-terminated */
    double value; /* finite or REWARD_NULL */
} reward_entry;

typedef struct {
    reward_entry *v;
    size_t n, cap;
} reward_entries;

void reward_entries_add(reward_entries *r, const char *name, size_t name_len, double value);
void reward_entries_clear(reward_entries *r); /* keeps the buffers */
void reward_entries_free(reward_entries *r);

/* An opened function. `score` fills out[0..n-1] (they hold REWARD_NULL beforehand); a record it cannot read is
 * EX_DATAERR naming FILE:LINE and the field; an endpoint that still fails
 * after its retries is EX_TEMPFAIL, after everything already answered has
 * been saved. `stats` (optional) adds the function's counters to a JSON
 * object for --stats; `close` frees. */
typedef struct reward_fn {
    const char *name; /* the name in `rewards` */
    double weight;
    void *self;
    int (*score)(void *self, const reward_item *items, size_t n, double *out, gerr *e);
    /* Instead of score, for several named values per record: appends them to out[i]. */
    int (*score_named)(void *self, const reward_item *items, size_t n, reward_entries *out, gerr *e);
    void (*stats)(void *self, cJSON *obj);
    /* Optional: called once after the last chunk, before the output is
     * committed (a program that must exit cleanly, a final check). */
    int (*finish)(void *self, gerr *e);
    void (*close)(void *self);
} reward_fn;

/* The functions grpo-reward knows (registry.c). */
typedef struct {
    const char *name;
    const char *summary; /* one line, for --list */
    int (*open)(reward_fn *fn, const reward_opts *p, gerr *e);
} reward_fn_def;

extern const reward_fn_def reward_fn_defs[];
extern const size_t reward_n_fn_defs;
const reward_fn_def *reward_find_def(const char *name);

/* Opening each function (one file each). They fill fn->self, score, stats, close. */
int reward_open_answer(reward_fn *fn, const reward_opts *p, gerr *e);
int reward_open_format(reward_fn *fn, const reward_opts *p, gerr *e);
int reward_open_length(reward_fn *fn, const reward_opts *p, gerr *e);
int reward_open_repetition(reward_fn *fn, const reward_opts *p, gerr *e);
int reward_open_code(reward_fn *fn, const reward_opts *p, gerr *e);
int reward_open_cmd(reward_fn *fn, const reward_opts *p, gerr *e);
/* One answer line of a cmd program ({"reward": x} or {"rewards": {...}}):
 * its values appended to out; NULL when taken, else what was expected
 * instead (the entries added before a bad value stay in out). */
const char *reward_cmd_answer_parse(const char *line, size_t len, reward_entries *out);
int reward_open_judge(reward_fn *fn, const reward_opts *p, gerr *e);
int reward_open_rm(reward_fn *fn, const reward_opts *p, gerr *e);
int reward_open_env(reward_fn *fn, const reward_opts *p, gerr *e);
int reward_open_math_verify(reward_fn *fn, const reward_opts *p, gerr *e);

#endif
