#include "http.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sysexits.h>
#include <unistd.h>

#include "../util/clock.h"
#include "../util/rng.h"
#include "../util/strbuf.h"

#ifndef GRPO_VERSION
#define GRPO_VERSION "0"
#endif

enum { MAX_REPLY_BYTES = 64 << 20 };

/* One transfer at a time, its easy handle reused so its connection stays warm. */
typedef struct {
    CURL *easy;
    size_t job;
    strbuf reply;
    char retry_after[64]; /* the header's value, "" when absent */
    char errbuf[CURL_ERROR_SIZE];
    bool too_big;
} slot;

typedef struct {
    double rate, cap, level, t; /* rate per second; rate 0 = unlimited */
} bucket;

struct http_client {
    http_opts c;
    char *url, *url_shown, *key;
    CURLM *multi;
    struct curl_slist *headers;
    slot *slots;
    size_t n_slots;
    bucket rps, tpm;
    rng_stream rng;
    http_stats stats;
};

/* ---- pure pieces ----------------------------------------------------------- */

double http_backoff_delay(long long attempt, double base, double cap, double u) {
    double ceiling = base * ldexp(1.0, (int)(attempt - 1 < 60 ? attempt - 1 : 60));
    if (ceiling > cap) ceiling = cap;
    return u * ceiling;
}

bool http_parse_retry_after(const char *value, time_t now, double *seconds) {
    while (*value == ' ' || *value == '\t') value++;
    size_t len = strlen(value);
    while (len && (value[len - 1] == ' ' || value[len - 1] == '\t' || value[len - 1] == '\r' || value[len - 1] == '\n'))
        len--;
    if (!len || len >= 64) return false;
    char buf[64];
    memcpy(buf, value, len);
    buf[len] = 0;
    if (buf[0] >= '0' && buf[0] <= '9') {
        char *end;
        double s = strtod(buf, &end);
        if (*end || !isfinite(s)) return false;
        *seconds = s;
        return true;
    }
    time_t at = curl_getdate(buf, NULL);
    if (at == -1) return false;
    *seconds = at > now ? (double)(at - now) : 0.0;
    return true;
}

void http_url_for_messages(const char *url, strbuf *out) {
    const char *scheme_end = strstr(url, "://");
    const char *host = scheme_end ? scheme_end + 3 : url;
    size_t authority = strcspn(host, "/?#");
    /* userinfo ends at the last '@' of the authority */
    const char *at = NULL;
    for (const char *c = host; c < host + authority; c++)
        if (*c == '@') at = c;
    sb_append(out, url, (size_t)(host - url));
    if (at) {
        host = at + 1;
        authority = strcspn(host, "/?#");
    }
    sb_append(out, host, authority + strcspn(host + authority, "?#"));
}

/* The key in environment variable var; *key NULL when unset or empty. */
static int http_key_from_env(const char *var, char **key, gerr *e) {
    *key = NULL;
    const char *v = getenv(var);
    if (!v) return 0;
    while (*v == ' ' || *v == '\t' || *v == '\n' || *v == '\r') v++;
    size_t n = strlen(v);
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == '\n' || v[n - 1] == '\r')) n--;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f)
            return gerr_set(e, EX_USAGE, "$%s: the API key holds a control character (a line break?)", var);
    if (n) *key = xstrndup(v, n);
    return 0;
}

/* ---- rate limits ------------------------------------------------------------- */

static void bucket_init(bucket *b, double per_second, double now) {
    b->rate = per_second;
    b->cap = per_second;
    b->level = per_second;
    b->t = now;
}

static void bucket_refill(bucket *b, double now) {
    if (b->rate <= 0) return;
    b->level += (now - b->t) * b->rate;
    if (b->level > b->cap) b->level = b->cap;
    b->t = now;
}

/* Seconds until `need` can be taken (0 = now); a need above the capacity waits for a full bucket. */
static double bucket_wait(bucket *b, double need, double now) {
    if (b->rate <= 0) return 0;
    bucket_refill(b, now);
    double want = need < b->cap ? need : b->cap;
    return b->level >= want ? 0 : (want - b->level) / b->rate;
}

static void bucket_take(bucket *b, double n) {
    if (b->rate > 0) b->level -= n;
}

/* ---- messages ---------------------------------------------------------------- */

/* Replaces every copy of the key in s, so no message can carry it. */
static void scrub(const char *key, char *s) {
    size_t kl = key ? strlen(key) : 0;
    if (!kl) return;
    for (char *p = strstr(s, key); p; p = strstr(p, key)) {
        memset(p, '*', kl);
        p += kl;
    }
}

/* What an error reply says: its error.message, else the start of its body,
 * on one line, at most 200 bytes, the key scrubbed. */
static void server_says(const char *key, const strbuf *reply, char *out, size_t cap) {
    out[0] = 0;
    cJSON *root = reply->len ? cJSON_ParseWithLength(reply->data, reply->len) : NULL;
    /* OpenAI's {"error": {"message"}} or {"error": "..."}, SGLang's {"error_message"}, FastAPI's {"detail"} */
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(root, "error");
    const cJSON *msg = cJSON_IsString(err) ? err : cJSON_GetObjectItemCaseSensitive(err, "message");
    if (!cJSON_IsString(msg)) msg = cJSON_GetObjectItemCaseSensitive(root, "error_message");
    if (!cJSON_IsString(msg)) msg = cJSON_GetObjectItemCaseSensitive(root, "detail");
    strbuf text = {0};
    if (cJSON_IsString(msg)) sb_puts(&text, msg->valuestring);
    else if (reply->len) sb_append(&text, reply->data, reply->len);
    cJSON_Delete(root);
    if (text.len) {
        scrub(key, text.data);
        size_t n = text.len < 200 ? text.len : 200;
        size_t j = 0;
        for (size_t i = 0; i < n && j + 1 < cap; i++) {
            unsigned char c = (unsigned char)text.data[i];
            out[j++] = c < 0x20 || c == 0x7f ? ' ' : (char)c;
        }
        out[j] = 0;
    }
    sb_free(&text);
}

/* ---- set-up -------------------------------------------------------------------- */

static size_t on_body(char *data, size_t size, size_t n, void *user) {
    slot *s = user;
    size_t len = size * n;
    if (s->reply.len + len > MAX_REPLY_BYTES) {
        s->too_big = true;
        return 0;
    }
    sb_append(&s->reply, data, len);
    return len;
}

static size_t on_header(char *data, size_t size, size_t n, void *user) {
    slot *s = user;
    size_t len = size * n;
    static const char name[] = "retry-after:";
    if (len > sizeof name - 1 && !strncasecmp(data, name, sizeof name - 1)) {
        size_t vl = len - (sizeof name - 1);
        if (vl >= sizeof s->retry_after) vl = sizeof s->retry_after - 1;
        memcpy(s->retry_after, data + sizeof name - 1, vl);
        s->retry_after[vl] = 0;
    }
    return len;
}

#define SETOPT(easy, opt, val)                                                                 \
    do {                                                                                    \
        if (curl_easy_setopt((easy), (opt), (val)) != CURLE_OK)                                \
            return gerr_set(e, EX_SOFTWARE, "%s: libcurl refused option %s", h->c.who, #opt);      \
    } while (0)

static int slot_init(http_client *h, slot *s, gerr *e) {
    s->easy = curl_easy_init();
    if (!s->easy) return gerr_set(e, EX_SOFTWARE, "%s: curl_easy_init failed", h->c.who);
    CURL *c = s->easy;
    SETOPT(c, CURLOPT_PROTOCOLS_STR, "http,https");
    SETOPT(c, CURLOPT_HTTPHEADER, h->headers);
    SETOPT(c, CURLOPT_USERAGENT, h->c.user_agent ? h->c.user_agent : "grpo/" GRPO_VERSION);
    SETOPT(c, CURLOPT_WRITEFUNCTION, on_body);
    SETOPT(c, CURLOPT_WRITEDATA, s);
    SETOPT(c, CURLOPT_HEADERFUNCTION, on_header);
    SETOPT(c, CURLOPT_HEADERDATA, s);
    SETOPT(c, CURLOPT_ERRORBUFFER, s->errbuf);
    SETOPT(c, CURLOPT_PRIVATE, s);
    SETOPT(c, CURLOPT_NOSIGNAL, 1L);
    SETOPT(c, CURLOPT_TCP_KEEPALIVE, 1L);
    SETOPT(c, CURLOPT_TIMEOUT_MS, (long)ceil(h->c.timeout * 1000.0));
    return 0;
}

static int check_config(const http_opts *c, gerr *e) {
    if (c->concurrency < 1 || c->concurrency > 4096)
        return gerr_set(e, EX_USAGE, "%s-concurrency: expected 1..4096, got %lld", c->flag, c->concurrency);
    if (!(c->timeout > 0) || c->timeout > 86400)
        return gerr_set(e, EX_USAGE, "%s-timeout: expected seconds in (0, 86400], got %g", c->flag, c->timeout);
    if (c->retries < 0 || c->retries > 1000)
        return gerr_set(e, EX_USAGE, "%s-retries: expected 0..1000, got %lld", c->flag, c->retries);
    if (!(c->rps >= 0) || !isfinite(c->rps))
        return gerr_set(e, EX_USAGE, "%s-rps: expected a number >= 0 (0 = unlimited), got %g", c->flag, c->rps);
    if (!(c->tpm >= 0) || !isfinite(c->tpm))
        return gerr_set(e, EX_USAGE, "%s-tpm: expected a number >= 0 (0 = unlimited), got %g", c->flag, c->tpm);
    return 0;
}

int http_client_open(http_client **out, const http_opts *given, gerr *e) {
    http_opts named = *given;
    if (!named.who) named.who = "http";
    if (!named.flag) named.flag = "--http";
    if (named.backoff_base <= 0) named.backoff_base = 0.5;
    if (named.backoff_cap <= 0) named.backoff_cap = 30;
    if (named.retry_after_cap <= 0) named.retry_after_cap = 300;
    const http_opts *c = &named;
    int rc = check_config(c, e);
    if (rc) return rc;
    /* a line break in the key would end the header and start another */
    if (c->api_key && strpbrk(c->api_key, "\r\n"))
        return gerr_set(e, EX_USAGE, "%s: the API key holds a line break", c->who);
    char *env_key = NULL;
    if (!c->api_key && c->key_env && (rc = http_key_from_env(c->key_env, &env_key, e))) return rc;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        free(env_key);
        return gerr_set(e, EX_SOFTWARE, "%s: curl_global_init failed", c->who);
    }
    http_client *h = xcalloc(1, sizeof *h);
    h->c = *c;
    h->url = xstrdup(c->url);
    strbuf shown = {0};
    http_url_for_messages(c->url, &shown);
    h->url_shown = shown.data;
    h->c.url = h->url;
    h->c.api_key = NULL;
    h->c.key_env = NULL;
    h->key = env_key ? env_key : c->api_key && *c->api_key ? xstrdup(c->api_key) : NULL;
    double now = now_seconds();
    bucket_init(&h->rps, c->rps, now);
    bucket_init(&h->tpm, c->tpm / 60.0, now);
    if (h->rps.rate > 0 && h->rps.cap < 1) h->rps.cap = h->rps.level = 1; /* at least one request fits */
    uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    rng_init(&h->rng, seed, "http-backoff", 12, 0);

    struct curl_slist *l = curl_slist_append(NULL, "Content-Type: application/json");
    if (l) h->headers = l;
    /* no "Expect: 100-continue": it costs a round trip (or a second) per request */
    if (l) l = curl_slist_append(h->headers, "Expect:");
    if (l && h->key) {
        strbuf auth = {0};
        sb_printf(&auth, "Authorization: Bearer %s", h->key);
        l = curl_slist_append(h->headers, auth.data);
        memset(auth.data, 0, auth.len);
        sb_free(&auth);
    }
    h->multi = curl_multi_init();
    if (!l || !h->multi) {
        http_client_close(h);
        return gerr_set(e, EX_SOFTWARE, "%s: libcurl set-up failed", c->who);
    }
    curl_multi_setopt(h->multi, CURLMOPT_MAXCONNECTS, (long)c->concurrency);
    h->n_slots = (size_t)c->concurrency;
    h->slots = xcalloc(h->n_slots, sizeof *h->slots);
    for (size_t i = 0; i < h->n_slots; i++) {
        rc = slot_init(h, &h->slots[i], e);
        if (rc) {
            http_client_close(h);
            return rc;
        }
    }
    *out = h;
    return 0;
}

const http_stats *http_client_stats(const http_client *h) { return &h->stats; }

void http_client_close(http_client *h) {
    if (!h) return;
    for (size_t i = 0; h->slots && i < h->n_slots; i++) {
        if (h->slots[i].easy) curl_easy_cleanup(h->slots[i].easy);
        sb_free(&h->slots[i].reply);
    }
    free(h->slots);
    if (h->multi) curl_multi_cleanup(h->multi);
    curl_slist_free_all(h->headers);
    if (h->key) {
        memset(h->key, 0, strlen(h->key));
        free(h->key);
    }
    free(h->url);
    free(h->url_shown);
    free(h);
    curl_global_cleanup();
}

/* ---- one run ------------------------------------------------------------------- */

typedef struct {
    size_t job;
    double ready_at;
} waiting;

typedef struct {
    http_client *h;
    const http_job *jobs;
    size_t n;
    http_on_reply on_reply;
    void *ctx;
    long long *attempts; /* per job: attempts started */
    size_t next_fresh;   /* jobs[next_fresh..] have not been tried */
    waiting *retry;      /* failed jobs waiting for their next attempt */
    size_t n_retry, cap_retry;
    slot **idle;
    size_t n_idle;
    size_t active;
    bool stopping, reply_failed;
    gerr stop; /* why the run stopped (the first reason) */
} run_state;

static void stop_run(run_state *r, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void stop_run(run_state *r, int code, const char *fmt, ...) {
    if (r->stopping) return;
    r->stopping = true;
    va_list ap;
    va_start(ap, fmt);
    gerr_vset(&r->stop, code, fmt, ap);
    va_end(ap);
    scrub(r->h->key, r->stop.msg);
}

static void stop_with(run_state *r, const gerr *e) {
    if (r->stopping) return;
    r->stopping = true;
    r->stop = *e;
    scrub(r->h->key, r->stop.msg);
}

static bool curl_error_is_transient(CURLcode rc) {
    switch (rc) {
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR: return true;
    default: return false;
    }
}

static bool status_is_transient(long status) {
    return status == 408 || status == 409 || status == 429 || (status >= 500 && status <= 599);
}

/* An attempt that got no usable answer: schedule the next one, or stop the run. */
static void attempt_failed(run_state *r, slot *s, const char *why) {
    http_client *h = r->h;
    size_t job = s->job;
    h->stats.failures++;
    if (r->stopping) return;
    long long made = r->attempts[job];
    if (made > h->c.retries) {
        stop_run(r, EX_TEMPFAIL,
                 "%s: %s: no answer after %lld attempts (last: %s)%s", r->jobs[job].label, h->c.who, made, why,
                 h->c.exhausted_note ? h->c.exhausted_note : "");
        return;
    }
    double delay = http_backoff_delay(made, h->c.backoff_base, h->c.backoff_cap, rng_uniform(&h->rng));
    double after;
    if (s->retry_after[0] && http_parse_retry_after(s->retry_after, time(NULL), &after)) {
        if (after > h->c.retry_after_cap) after = h->c.retry_after_cap;
        if (after > delay) delay = after;
    }
    if (r->n_retry == r->cap_retry) {
        r->cap_retry = r->cap_retry ? 2 * r->cap_retry : 16;
        r->retry = xrealloc(r->retry, r->cap_retry * sizeof *r->retry);
    }
    r->retry[r->n_retry++] = (waiting){job, now_seconds() + delay};
}

static void finish(run_state *r, slot *s, CURLcode result) {
    http_client *h = r->h;
    size_t job = s->job;
    const char *label = r->jobs[job].label;
    curl_multi_remove_handle(h->multi, s->easy);
    r->active--;
    r->idle[r->n_idle++] = s;
    char why[512];
    strbuf shown = {0};
    if (r->jobs[job].url) http_url_for_messages(r->jobs[job].url, &shown);
    const char *url = shown.data ? shown.data : h->url_shown;
    if (result != CURLE_OK) {
        const char *text = s->errbuf[0] ? s->errbuf : curl_easy_strerror(result);
        snprintf(why, sizeof why, "%s", text);
        scrub(h->key, why);
        if (s->too_big)
            stop_run(r, EX_UNAVAILABLE, "%s: %s: a reply larger than %d MiB from %s", label, h->c.who,
                     MAX_REPLY_BYTES >> 20, url);
        else if (h->c.fail_unreachable && (result == CURLE_COULDNT_CONNECT || result == CURLE_COULDNT_RESOLVE_HOST))
            stop_run(r, EX_UNAVAILABLE, "%s: %s: cannot connect to %s: %s", label, h->c.who, url, why);
        else if (curl_error_is_transient(result))
            attempt_failed(r, s, why);
        else if (result == CURLE_URL_MALFORMAT || result == CURLE_UNSUPPORTED_PROTOCOL)
            stop_run(r, EX_USAGE, "%s-url %s: %s", h->c.flag, url, why);
        else
            stop_run(r, EX_UNAVAILABLE, "%s: %s: %s: %s", label, h->c.who, url, why);
        sb_free(&shown);
        return;
    }
    long status = 0;
    curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
    if ((status >= 200 && status <= 299) || (status && status == r->jobs[job].accept_status)) {
        if (r->reply_failed) return;
        gerr e = {0};
        double used = -1;
        int rc = r->on_reply(r->ctx, job, s->reply.data ? s->reply.data : "", s->reply.len, &used, &e);
        if (rc == HTTP_REPLY_MALFORMED) {
            attempt_failed(r, s, e.msg[0] ? e.msg : "a malformed reply");
        } else if (rc) {
            r->reply_failed = true;
            stop_with(r, &e);
        } else if (used >= 0) {
            h->tpm.level += r->jobs[job].tokens - used;
        }
        sb_free(&shown);
        return;
    }
    char says[256];
    server_says(h->key, &s->reply, says, sizeof says);
    if (status_is_transient(status)) {
        snprintf(why, sizeof why, "HTTP %ld%s%s", status, says[0] ? ": " : "", says);
        attempt_failed(r, s, why);
    } else {
        h->stats.failures++;
        stop_run(r, EX_UNAVAILABLE, "%s: %s: HTTP %ld from %s%s%s (not retried)", label, h->c.who, status, url,
                 says[0] ? ": " : "", says);
    }
    sb_free(&shown);
}

static int start(run_state *r, size_t job, gerr *e) {
    http_client *h = r->h;
    slot *s = r->idle[--r->n_idle];
    s->job = job;
    sb_clear(&s->reply);
    s->retry_after[0] = 0;
    s->errbuf[0] = 0;
    s->too_big = false;
    const http_job *j = &r->jobs[job];
    if (curl_easy_setopt(s->easy, CURLOPT_URL, j->url ? j->url : h->url) != CURLE_OK)
        return gerr_set(e, EX_SOFTWARE, "%s: libcurl refused a URL", h->c.who);
    bool ok = j->body ? curl_easy_setopt(s->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)j->body_len) == CURLE_OK &&
                            curl_easy_setopt(s->easy, CURLOPT_POSTFIELDS, j->body) == CURLE_OK
                      : curl_easy_setopt(s->easy, CURLOPT_HTTPGET, 1L) == CURLE_OK;
    if (!ok) return gerr_set(e, EX_SOFTWARE, "%s: libcurl refused a request body", h->c.who);
    CURLMcode mc = curl_multi_add_handle(h->multi, s->easy);
    if (mc != CURLM_OK) return gerr_set(e, EX_SOFTWARE, "%s: curl_multi_add_handle: %s", h->c.who, curl_multi_strerror(mc));
    if (r->attempts[job]++) h->stats.retries++;
    h->stats.requests++;
    r->active++;
    return 0;
}

/* The next job to try now (the retry due first, then fresh ones); *wake
 * gets the time the earliest waiting retry becomes due. */
static bool next_job(run_state *r, double now, size_t *job, size_t *retry_index, double *wake) {
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < r->n_retry; i++) {
        if (r->retry[i].ready_at <= now && (best == SIZE_MAX || r->retry[i].ready_at < r->retry[best].ready_at))
            best = i;
        else if (r->retry[i].ready_at > now && r->retry[i].ready_at < *wake)
            *wake = r->retry[i].ready_at;
    }
    if (best != SIZE_MAX) {
        *job = r->retry[best].job;
        *retry_index = best;
        return true;
    }
    if (r->next_fresh < r->n) {
        *job = r->next_fresh;
        *retry_index = SIZE_MAX;
        return true;
    }
    return false;
}

/* Starts what the slots and rate limits allow; returns when the next start may be possible. */
static int start_ready(run_state *r, double *wake, gerr *e) {
    http_client *h = r->h;
    while (!r->stopping && r->n_idle) {
        double now = now_seconds();
        size_t job, ri;
        if (!next_job(r, now, &job, &ri, wake)) break;
        double tokens = r->jobs[job].tokens;
        double wait = fmax(bucket_wait(&h->rps, 1, now), bucket_wait(&h->tpm, tokens, now));
        if (wait > 0) {
            if (now + wait < *wake) *wake = now + wait;
            break;
        }
        bucket_take(&h->rps, 1);
        bucket_take(&h->tpm, tokens);
        if (ri == SIZE_MAX) r->next_fresh++;
        else r->retry[ri] = r->retry[--r->n_retry];
        int rc = start(r, job, e);
        if (rc) return rc;
    }
    return 0;
}

int http_client_run(http_client *h, const http_job *jobs, size_t n, http_on_reply on_reply, void *ctx,
                   gerr *e) {
    run_state r = {.h = h, .jobs = jobs, .n = n, .on_reply = on_reply, .ctx = ctx};
    r.attempts = xcalloc(n ? n : 1, sizeof *r.attempts);
    r.idle = xmalloc(h->n_slots * sizeof *r.idle);
    for (size_t i = 0; i < h->n_slots; i++) r.idle[r.n_idle++] = &h->slots[i];
    int rc = 0;
    for (;;) {
        double wake = INFINITY;
        rc = start_ready(&r, &wake, e);
        if (rc) break;
        if (!r.active && (r.stopping || (r.next_fresh == n && !r.n_retry))) break;
        double now = now_seconds();
        int timeout_ms = 1000;
        if (wake < INFINITY) timeout_ms = (int)fmin(1000.0, fmax(0.0, ceil((wake - now) * 1000.0)));
        CURLMcode mc = curl_multi_poll(h->multi, NULL, 0, timeout_ms, NULL);
        int running;
        if (mc == CURLM_OK) mc = curl_multi_perform(h->multi, &running);
        if (mc != CURLM_OK) {
            rc = gerr_set(e, EX_SOFTWARE, "%s: libcurl: %s", h->c.who, curl_multi_strerror(mc));
            break;
        }
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(h->multi, &left))) {
            if (msg->msg != CURLMSG_DONE) continue;
            slot *s = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&s);
            finish(&r, s, msg->data.result);
        }
    }
    if (rc) {
        /* an internal failure: abandon the transfers in flight */
        for (size_t i = 0; i < h->n_slots; i++) curl_multi_remove_handle(h->multi, h->slots[i].easy);
    } else if (r.stopping) {
        *e = r.stop;
        rc = r.stop.code;
    }
    free(r.attempts);
    free(r.retry);
    free(r.idle);
    return rc;
}
