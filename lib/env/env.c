#include "env.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/clock.h"

int env_open(env_conn *v, const char *cmd, double timeout, gerr *e) {
    memset(v, 0, sizeof *v);
    v->timeout = timeout;
    if (!cmd || !*cmd) return gerr_set(e, EX_USAGE, "--env needs a program");
    return child_start(&v->proc, cmd, e);
}

int env_ask(env_conn *v, const char *req_json, size_t len, const char *id, int sample, int turn, int tag,
            const char *file, long line, gerr *e) {
    if (v->n_asked == v->cap_asked) {
        v->cap_asked = v->cap_asked ? 2 * v->cap_asked : 16;
        v->asked = xrealloc(v->asked, (size_t)v->cap_asked * sizeof *v->asked);
    }
    v->asked[v->n_asked++] = (env_request){.id = xstrdup(id), .sample = sample, .turn = turn, .tag = tag,
                                           .file = file, .line = line, .sent_at = now_seconds()};
    child_queue(&v->proc, req_json, len);
    child_queue(&v->proc, "\n", 1);
    return child_pump(&v->proc, 0, e);
}

static void forget(env_conn *v, int i) {
    free(v->asked[i].id);
    v->asked[i] = v->asked[--v->n_asked];
}

static int name_len(const env_conn *v) { return child_name_len(&v->proc); }

/* The request an answer names, or -1. */
static int find_request(const env_conn *v, const char *id, int sample, int turn) {
    for (int i = 0; i < v->n_asked; i++)
        if (v->asked[i].sample == sample && v->asked[i].turn == turn && !strcmp(v->asked[i].id, id)) return i;
    return -1;
}

/* Checks the messages of an answer: a non-empty array of {role: user|tool,
 * content: string}. NULL when good, else what was expected. */
static const char *check_messages(const cJSON *msgs) {
    if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0)
        return "\"messages\" to be a non-empty array of {\"role\": \"user\"|\"tool\", \"content\": string}";
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (!cJSON_IsString(role) || (strcmp(role->valuestring, "user") && strcmp(role->valuestring, "tool")))
            return "each message's \"role\" to be \"user\" or \"tool\"";
        if (!cJSON_IsString(content)) return "each message's \"content\" to be a string";
    }
    return NULL;
}

static int oldest(const env_conn *v);

/* An answer that names no request it may answer: the error names the
 * request waiting longest (the record and turn that go unanswered). */
static int stray_answer(env_conn *v, const char *what, const char *text, size_t len, gerr *e) {
    const env_request *rq = &v->asked[oldest(v)];
    return gerr_at(e, EX_DATAERR, rq->file, rq->line,
                   "env '%.*s': answer %lld %s (waiting: record \"%s\", sample %d, turn %d), got: %.*s", name_len(v),
                   v->proc.cmd, v->n_answers + 1, what, rq->id, rq->sample, rq->turn, (int)(len > 80 ? 80 : len),
                   text);
}

int env_take_answer(env_conn *v, const char *text, size_t len, env_answer *got, gerr *e) {
    const int shown = (int)(len > 80 ? 80 : len);
    if (!v->n_asked) {
        return gerr_set(e, EX_DATAERR, "env '%.*s': answer %lld came with no request waiting, got: %.*s", name_len(v),
                        v->proc.cmd, v->n_answers + 1, shown, text);
    }
    cJSON *j = cJSON_ParseWithLength(text, len);
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
    const cJSON *sample = cJSON_GetObjectItemCaseSensitive(j, "sample");
    const cJSON *turn = cJSON_GetObjectItemCaseSensitive(j, "turn");
    if (!cJSON_IsObject(j) || !cJSON_IsString(id) || !cJSON_IsNumber(sample) || !cJSON_IsNumber(turn)) {
        cJSON_Delete(j);
        return stray_answer(v, "is not a JSON object with \"id\", \"sample\" and \"turn\"", text, len, e);
    }
    int at = find_request(v, id->valuestring, sample->valueint, turn->valueint);
    if (at < 0 || sample->valuedouble != sample->valueint || turn->valuedouble != turn->valueint) {
        cJSON_Delete(j);
        return stray_answer(v, "answers a request never asked or answered already", text, len, e);
    }
    const env_request *rq = &v->asked[at];
    const cJSON *done = cJSON_GetObjectItemCaseSensitive(j, "done");
    const cJSON *reward = cJSON_GetObjectItemCaseSensitive(j, "reward");
    cJSON *msgs = cJSON_GetObjectItemCaseSensitive(j, "messages");
    const char *why = NULL;
    if (reward && !cJSON_IsNull(reward) && !(cJSON_IsNumber(reward) && isfinite(reward->valuedouble)))
        why = "\"reward\" to be a finite number";
    else if (done && !cJSON_IsBool(done)) why = "\"done\" to be true or false";
    else if (!cJSON_IsTrue(done)) why = check_messages(msgs);
    if (why) {
        int rc = gerr_at(e, EX_DATAERR, rq->file, rq->line, "env '%.*s': record \"%s\", sample %d, turn %d: expected %s, got: %.*s",
                         name_len(v), v->proc.cmd, rq->id, rq->sample, rq->turn, why, shown, text);
        cJSON_Delete(j);
        return rc;
    }
    *got = (env_answer){.tag = rq->tag, .turn = rq->turn, .done = cJSON_IsTrue(done)};
    if (cJSON_IsNumber(reward)) {
        got->has_reward = true;
        got->reward = reward->valuedouble;
    }
    if (!got->done) got->messages = cJSON_DetachItemViaPointer(j, msgs);
    cJSON_Delete(j);
    forget(v, at);
    v->n_answers++;
    return 0;
}

/* The request waiting longest, or -1. */
static int oldest(const env_conn *v) {
    int at = -1;
    for (int i = 0; i < v->n_asked; i++)
        if (at < 0 || v->asked[i].sent_at < v->asked[at].sent_at) at = i;
    return at;
}

int env_next_answer(env_conn *v, int wait_ms, env_answer *got, gerr *e) {
    double until = now_seconds() + wait_ms / 1000.0;
    for (;;) {
        if (child_take_line(&v->proc, &v->line)) {
            const char *s = v->line.data;
            size_t n = v->line.len;
            while (n && (s[n - 1] == '\r' || s[n - 1] == ' ')) n--;
            if (!n) continue; /* blank lines are let through */
            return env_take_answer(v, s, n, got, e) ? -1 : 1;
        }
        int at = oldest(v);
        if (at >= 0 && now_seconds() - v->asked[at].sent_at > v->timeout) {
            const env_request *rq = &v->asked[at];
            gerr_at(e, EX_TEMPFAIL, rq->file, rq->line,
                    "env '%.*s' gave no answer for record \"%s\", sample %d, turn %d within %g s (--env-timeout; "
                    "a program must flush each answer line: python3 -u, jq --unbuffered)",
                    name_len(v), v->proc.cmd, rq->id, rq->sample, rq->turn, v->timeout);
            return -1;
        }
        if (v->proc.eof) {
            if (at < 0) return 0;
            const env_request *rq = &v->asked[at];
            char how[64];
            child_reap(&v->proc, how, sizeof how);
            gerr_at(e, EX_DATAERR, rq->file, rq->line, "env '%.*s' %s before answering record \"%s\", sample %d, turn %d",
                    name_len(v), v->proc.cmd, how, rq->id, rq->sample, rq->turn);
            return -1;
        }
        double left = until - now_seconds();
        if (at >= 0) { /* wake up for the oldest request's deadline */
            double to_deadline = v->asked[at].sent_at + v->timeout - now_seconds();
            if (to_deadline < left) left = to_deadline;
        }
        if (left < 0) left = 0;
        size_t had = v->proc.in.len;
        bool was_eof = v->proc.eof;
        if (child_pump(&v->proc, (int)(left * 1000) + (left > 0), e)) return -1;
        if (v->proc.in.len == had && v->proc.eof == was_eof && now_seconds() >= until &&
            !(at >= 0 && now_seconds() - v->asked[at].sent_at > v->timeout))
            return 0;
    }
}

void env_answer_free(env_answer *a) {
    cJSON_Delete(a->messages);
    a->messages = NULL;
}

int env_finish(env_conn *v, gerr *e) {
    if (!child_finish(&v->proc, v->timeout, e)) return 0;
    char why[sizeof e->msg];
    snprintf(why, sizeof why, "%s", e->msg);
    return gerr_set(e, e->code, "env %s", why);
}

void env_close(env_conn *v) {
    child_close(&v->proc);
    for (int i = 0; i < v->n_asked; i++) free(v->asked[i].id);
    free(v->asked);
    sb_free(&v->line);
    memset(v, 0, sizeof *v);
}
