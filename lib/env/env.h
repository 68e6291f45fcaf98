/* The environment of multi-turn rollouts (grpo-rollout --env, formats/env.md):
 * a program started once that reads one JSON request per line on its stdin
 * (an assistant turn just ended) and writes one JSON answer per line on its
 * stdout. Answers carry the request's id, sample and turn, so they may come
 * in any order and many requests may be in flight at once. An answer either
 * goes on, {"messages": [{"role": "user"|"tool", "content": string}, ...]},
 * or ends the episode, {"done": true}; either may carry "reward": number.
 *
 * Errors name the record (its file and line) and the turn: an answer that
 * is not that JSON, or answers a request never asked (or answered already),
 * is EX_DATAERR, as is a program that exits with requests unanswered; no
 * answer within the timeout is EX_TEMPFAIL. */
#ifndef GRPO_ENV_H
#define GRPO_ENV_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "../util/err.h"
#include "child.h"

/* What one request asked about: the caller's tag (its slot) and where the
 * record came from, for messages. */
typedef struct {
    char *id;
    int sample, turn;
    int tag;
    const char *file; /* not owned */
    long line;
    double sent_at;
} env_request;

typedef struct {
    int tag;
    int turn;
    bool done;
    bool has_reward;
    double reward;
    cJSON *messages; /* done == false: the messages to append (owned; env_answer_free) */
} env_answer;

typedef struct {
    child_proc proc;
    double timeout; /* seconds one request may wait for its answer */
    env_request *asked;
    int n_asked, cap_asked;
    long long n_answers;
    strbuf line;
} env_conn;

int env_open(env_conn *v, const char *cmd, double timeout, gerr *e);
/* Sends one request: req_json is the request object (one line, no newline);
 * id/sample/turn its key, tag the caller's. */
int env_ask(env_conn *v, const char *req_json, size_t len, const char *id, int sample, int turn, int tag,
            const char *file, long line, gerr *e);
/* Requests sent and not yet answered. */
static inline int env_in_flight(const env_conn *v) { return v->n_asked; }
/* Waits at most wait_ms (0: only what is there now) and returns through
 * *got one answer: 1, or 0 when none came. Checks every request's deadline. */
int env_next_answer(env_conn *v, int wait_ms, env_answer *got, gerr *e);
/* One answer line (what env_next_answer reads from the program) taken
 * against the requests in flight: 0 with *got filled and its request
 * forgotten, or EX_DATAERR naming the record. Apart from the pipe so that
 * it can be fuzzed alone. */
int env_take_answer(env_conn *v, const char *text, size_t len, env_answer *got, gerr *e);
void env_answer_free(env_answer *a);
/* After the last request: the program sees the end of its input and must
 * exit 0 (within the timeout) without writing more. */
int env_finish(env_conn *v, gerr *e);
void env_close(env_conn *v);

#endif
