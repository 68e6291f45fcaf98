/* An HTTP client for JSON APIs: POSTs request bodies (or GETs) through
 * libcurl's multi interface, in one thread. The judge (lib/reward/judge.c)
 * and grpo-rollout --server (lib/rollout/server.c) both use it.
 *
 * Up to `concurrency` transfers at once over kept-alive connections. A
 * failed attempt is retried (up to `retries` more attempts) after an
 * exponential backoff with full jitter, or after the server's Retry-After
 * when that is longer: HTTP 408, 409, 429 and 5xx; timeouts; refused, reset
 * and dropped connections (with fail_unreachable, a connection that cannot
 * be made stops the run with EX_UNAVAILABLE (69) instead); and replies the
 * caller calls malformed. Any other status (400, 401, 403, 404, ...) is not
 * retried: the run stops with EX_UNAVAILABLE (69) and a message naming the
 * status and the job. A job that has used all its attempts stops the run
 * with EX_TEMPFAIL (75). Stopping starts nothing new but waits for the
 * transfers in flight, so every answer already paid for still reaches the
 * caller.
 *
 * Rate limits are token buckets, each holding one second's worth and
 * starting full: `rps` requests per second on request starts, `tpm` tokens
 * per minute charged with each job's estimate when it starts and corrected
 * by the tokens its reply reports. A job larger than the bucket waits for
 * a full bucket. The API key goes only into the Authorization header; no
 * message this client makes contains it. */
#ifndef GRPO_HTTP_H
#define GRPO_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "../util/err.h"
#include "../util/strbuf.h"

/* The strings are the caller's and must outlive the client. */
typedef struct {
    const char *url;     /* the URL of jobs that name none */
    const char *api_key; /* NULL or "": no Authorization header */
    /* with api_key NULL: the environment variable that holds the key (NULL:
     * none), white space around it removed (a key read from a file often
     * ends in a newline); a control character in it is EX_USAGE */
    const char *key_env;
    long long concurrency;
    double timeout; /* seconds per attempt */
    long long retries;
    double rps, tpm; /* 0: unlimited */
    /* seconds: attempt k waits uniform [0, min(cap, base * 2^k)), or the
     * server's Retry-After up to retry_after_cap; 0: 0.5, 30 and 300 */
    double backoff_base, backoff_cap;
    double retry_after_cap;
    const char *who;            /* names the client in messages: "judge" gives "rollouts.jsonl:3: judge: ..." */
    const char *flag;           /* the flags' prefix in usage errors: "--judge" gives "--judge-timeout: ..." */
    const char *user_agent;     /* NULL: "grpo/VERSION" */
    const char *exhausted_note; /* appended to the message of a job out of attempts; NULL: nothing */
    bool fail_unreachable;      /* a refused connection or an unknown host: 69 at once, not retried */
} http_opts;

typedef struct {
    const char *body; /* JSON, POSTed as is; NULL: a GET */
    size_t body_len;
    double tokens;     /* estimated tokens, for tpm */
    const char *label; /* names the job in messages ("rollouts.jsonl:17") */
    const char *url;   /* NULL: the client's */
    long accept_status; /* a status (400, ...) whose reply goes to the caller as a 2xx's does; 0: none */
} http_job;

typedef struct {
    long long requests; /* attempts sent */
    long long retries;  /* attempts after a job's first */
    long long failures; /* attempts that got no usable answer */
} http_stats;

/* What the caller says of a 2xx reply. */
enum { HTTP_REPLY_OK = 0, HTTP_REPLY_MALFORMED = -1 };
/* Called once for each job that got a 2xx reply (or its accept_status) in the order they arrive:
 * HTTP_REPLY_OK accepts it (with *tokens_used its actual tokens, or < 0
 * when unknown), HTTP_REPLY_MALFORMED retries the job (e->msg, when set,
 * says why, for the message of a job out of attempts), and any other
 * value is an error code (e filled) that stops the run. */
typedef int (*http_on_reply)(void *ctx, size_t job, const char *body, size_t len, double *tokens_used, gerr *e);

typedef struct http_client http_client;

/* EX_USAGE on a bad setting (concurrency < 1, timeout <= 0, ...) or a key
 * env variable that holds a control character. */
int http_client_open(http_client **h, const http_opts *c, gerr *e);
/* Runs jobs[0..n-1] until each is answered, or until the run stops
 * (returning its code with e filled, after the transfers in flight end). */
int http_client_run(http_client *h, const http_job *jobs, size_t n, http_on_reply on_reply, void *ctx, gerr *e);
const http_stats *http_client_stats(const http_client *h);
void http_client_close(http_client *h);

/* The wait before retry `attempt` (1 = the first retry): u * min(cap,
 * base * 2^(attempt-1)), u uniform in [0, 1). */
double http_backoff_delay(long long attempt, double base, double cap, double u);
/* A Retry-After value: delay-seconds (a decimal fraction is accepted) or an
 * HTTP date, as seconds from `now` (0 for a date already past). false when
 * it is neither. */
bool http_parse_retry_after(const char *value, time_t now, double *seconds);

/* The URL as messages may show it: without user:password@ and without the
 * query and fragment, where a key could hide (appended to out). */
void http_url_for_messages(const char *url, strbuf *out);

#endif
