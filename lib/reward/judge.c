/* The `judge` reward: an LLM judge over HTTP, its answers cached (the client,
 * template, scorer and cache are lib/judge; this file drives them per chunk).
 *
 * A chunk of records is scored in four steps: render every record's request
 * (so a record the template cannot use stops the chunk before anything is
 * bought); fold identical requests together (in-flight de-duplication: one
 * lookup and at most one request per distinct cache key in the chunk); look
 * each distinct request up in the cache; send the misses, storing each
 * answer in the cache the moment it arrives. When a request fails for good
 * the chunk fails (EX_TEMPFAIL) with every answer received so far stored,
 * so a rerun buys only the rest.
 *
 * The score of a cached answer is parsed again from its stored reply, so a
 * changed --judge-regex or --judge-scale applies without buying it again. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>

#include "../http/http.h"
#include "../judge/cache.h"
#include "../judge/request.h"
#include "../judge/score.h"
#include "../judge/template.h"
#include "../util/clock.h"
#include "reward.h"

#ifndef GRPO_VERSION
#define GRPO_VERSION "0"
#endif


typedef struct {
    judge_template *tpl;
    judge_request_opts req;
    char *model, *system;
    judge_scorer *scorer;
    judge_cache *cache;
    http_client *http;

    /* per chunk, kept between chunks */
    size_t cap;
    strbuf *body, *canonical, *label; /* per record */
    uint8_t (*key)[32];
    size_t *group;    /* record -> its distinct request */
    size_t *leader;   /* distinct request -> the first record that made it */
    double *value;    /* distinct request -> its score */
    size_t *slots;    /* open-addressing table of distinct requests, SIZE_MAX = empty */
    size_t n_slots;
    http_job *jobs;
    size_t *job_group; /* job -> distinct request */
    judge_cache_lookup *lookup; /* distinct request -> its cache lookup */
    strbuf user, reply;

    long long hits, misses, deduplicated, unparsed, prompt_tokens, completion_tokens;
    double seconds;
} judge;

static void reserve(judge *j, size_t n) {
    if (n <= j->cap) return;
    size_t cap = j->cap ? j->cap : 64;
    while (cap < n) cap *= 2;
    j->body = xrealloc(j->body, cap * sizeof *j->body);
    j->canonical = xrealloc(j->canonical, cap * sizeof *j->canonical);
    j->label = xrealloc(j->label, cap * sizeof *j->label);
    for (size_t i = j->cap; i < cap; i++) {
        memset(&j->body[i], 0, sizeof j->body[i]);
        memset(&j->canonical[i], 0, sizeof j->canonical[i]);
        memset(&j->label[i], 0, sizeof j->label[i]);
    }
    j->key = xrealloc(j->key, cap * sizeof *j->key);
    j->group = xrealloc(j->group, cap * sizeof *j->group);
    j->leader = xrealloc(j->leader, cap * sizeof *j->leader);
    j->value = xrealloc(j->value, cap * sizeof *j->value);
    j->jobs = xrealloc(j->jobs, cap * sizeof *j->jobs);
    j->job_group = xrealloc(j->job_group, cap * sizeof *j->job_group);
    j->lookup = xrealloc(j->lookup, cap * sizeof *j->lookup);
    for (size_t i = j->cap; i < cap; i++) memset(&j->lookup[i], 0, sizeof j->lookup[i]);
    j->n_slots = 4 * cap;
    j->slots = xrealloc(j->slots, j->n_slots * sizeof *j->slots);
    j->cap = cap;
}

/* Folds record i into the distinct request with its key (a new one when
 * none); returns true when it is new. */
static bool fold(judge *j, size_t i, size_t *n_groups) {
    uint64_t h;
    memcpy(&h, j->key[i], sizeof h);
    size_t mask = j->n_slots - 1;
    for (size_t s = (size_t)h & mask;; s = (s + 1) & mask) {
        size_t g = j->slots[s];
        if (g == SIZE_MAX) {
            g = (*n_groups)++;
            j->slots[s] = g;
            j->leader[g] = i;
            j->group[i] = g;
            return true;
        }
        if (!memcmp(j->key[j->leader[g]], j->key[i], 32)) {
            j->group[i] = g;
            return false;
        }
    }
}

static int on_reply(void *ctx, size_t job, const char *body, size_t len, double *tokens_used, gerr *e) {
    judge *j = ctx;
    long long pt, ct;
    if (!judge_parse_reply(body, len, &j->reply, &pt, &ct)) {
        snprintf(e->msg, sizeof e->msg, "a malformed reply (not chat-completions JSON)");
        return HTTP_REPLY_MALFORMED;
    }
    size_t g = j->job_group[job], lead = j->leader[g];
    double score = judge_scorer_score(j->scorer, j->reply.data, j->reply.len);
    judge_cache_entry entry = {
        .model = j->model,
        .request = j->canonical[lead].data,
        .reply = j->reply.data,
        .score = score,
        .prompt_tokens = pt,
        .completion_tokens = ct,
    };
    memcpy(entry.key, j->key[lead], 32);
    int rc = judge_cache_put(j->cache, &entry, e);
    if (rc) return rc;
    j->value[g] = score;
    if (pt > 0) j->prompt_tokens += pt;
    if (ct > 0) j->completion_tokens += ct;
    *tokens_used = pt >= 0 && ct >= 0 ? (double)(pt + ct) : -1;
    return HTTP_REPLY_OK;
}

static int judge_score(void *self, const reward_item *items, size_t n, double *out, gerr *e) {
    judge *j = self;
    double t0 = now_seconds();
    reserve(j, n);
    for (size_t s = 0; s < j->n_slots; s++) j->slots[s] = SIZE_MAX;

    size_t n_groups = 0;
    for (size_t i = 0; i < n; i++) {
        const reward_item *it = &items[i];
        int rc = judge_template_render(j->tpl, it->rec, it->has_completion ? it->completion : NULL, it->completion_len,
                                       &j->user, e);
        if (rc) return rc;
        judge_request_build(&j->req, j->user.data ? j->user.data : "", j->user.len, &j->body[i], &j->canonical[i],
                            j->key[i]);
        if (!fold(j, i, &n_groups)) j->deduplicated++;
    }

    for (size_t g = 0; g < n_groups; g++) memcpy(j->lookup[g].key, j->key[j->leader[g]], 32);
    int rc = judge_cache_get_many(j->cache, j->lookup, n_groups, e);
    if (rc) return rc;
    size_t n_jobs = 0;
    for (size_t g = 0; g < n_groups; g++) {
        size_t lead = j->leader[g];
        const judge_cache_lookup *l = &j->lookup[g];
        if (l->hit) {
            j->value[g] = judge_scorer_score(j->scorer, l->reply.data ? l->reply.data : "", l->reply.len);
            continue;
        }
        j->value[g] = REWARD_NULL;
        const record *r = items[lead].rec;
        sb_clear(&j->label[lead]);
        sb_printf(&j->label[lead], "%s:%ld", r->file ? r->file : "-", r->line);
        j->jobs[n_jobs] = (http_job){
            .body = j->body[lead].data,
            .body_len = j->body[lead].len,
            .tokens = judge_request_token_estimate(j->body[lead].len, j->req.max_tokens),
            .label = j->label[lead].data,
        };
        j->job_group[n_jobs++] = g;
    }
    /* which distinct requests came from the cache, before the misses are answered */
    bool *asked = xcalloc(n_groups ? n_groups : 1, sizeof *asked);
    for (size_t k = 0; k < n_jobs; k++) asked[j->job_group[k]] = true;
    rc = n_jobs ? http_client_run(j->http, j->jobs, n_jobs, on_reply, j, e) : 0;
    if (!rc) {
        for (size_t i = 0; i < n; i++) {
            out[i] = j->value[j->group[i]];
            if (asked[j->group[i]]) j->misses++;
            else j->hits++;
            if (reward_is_null(out[i])) j->unparsed++;
        }
    }
    free(asked);
    j->seconds += now_seconds() - t0;
    return rc;
}

static void judge_stats(void *self, cJSON *obj) {
    judge *j = self;
    const http_stats *hs = http_client_stats(j->http);
    cJSON *s = cJSON_CreateObject();
    cJSON_AddNumberToObject(s, "hits", (double)j->hits);
    cJSON_AddNumberToObject(s, "misses", (double)j->misses);
    cJSON_AddNumberToObject(s, "deduplicated", (double)j->deduplicated);
    cJSON_AddNumberToObject(s, "requests", (double)hs->requests);
    cJSON_AddNumberToObject(s, "retries", (double)hs->retries);
    cJSON_AddNumberToObject(s, "failures", (double)hs->failures);
    cJSON_AddNumberToObject(s, "unparsed", (double)j->unparsed);
    cJSON_AddNumberToObject(s, "prompt_tokens", (double)j->prompt_tokens);
    cJSON_AddNumberToObject(s, "completion_tokens", (double)j->completion_tokens);
    cJSON_AddNumberToObject(s, "seconds", round(j->seconds * 1000.0) / 1000.0);
    cJSON_AddItemToObject(obj, "judge", s);
}

static void judge_close(void *self) {
    judge *j = self;
    if (!j) return;
    for (size_t i = 0; i < j->cap; i++) {
        sb_free(&j->lookup[i].reply);
        sb_free(&j->body[i]);
        sb_free(&j->canonical[i]);
        sb_free(&j->label[i]);
    }
    free(j->body);
    free(j->canonical);
    free(j->label);
    free(j->key);
    free(j->group);
    free(j->leader);
    free(j->value);
    free(j->slots);
    free(j->jobs);
    free(j->job_group);
    free(j->lookup);
    sb_free(&j->user);
    sb_free(&j->reply);
    http_client_close(j->http);
    if (j->cache) judge_cache_close(j->cache);
    judge_scorer_free(j->scorer);
    judge_template_free(j->tpl);
    free(j->model);
    free(j->system);
    free(j);
}

static int check_params(const reward_opts *p, gerr *e) {
    if (!p->judge_url || !*p->judge_url) return gerr_set(e, EX_USAGE, "--fn judge needs --judge-url");
    if (!p->judge_model || !*p->judge_model) return gerr_set(e, EX_USAGE, "--fn judge needs --judge-model");
    if (!p->judge_template || !*p->judge_template)
        return gerr_set(e, EX_USAGE, "--fn judge needs --judge-template");
    if (!isfinite(p->judge_temperature) || p->judge_temperature < 0)
        return gerr_set(e, EX_USAGE, "--judge-temperature: expected a number >= 0, got %g", p->judge_temperature);
    if (p->judge_max_tokens < 1)
        return gerr_set(e, EX_USAGE, "--judge-max-tokens: expected an integer >= 1, got %lld", p->judge_max_tokens);
    return 0;
}

static int open_parts(judge *j, const reward_opts *p, gerr *e) {
    int rc = judge_template_load(&j->tpl, p->judge_template, e);
    if (rc) return rc;
    rc = judge_scorer_open(&j->scorer, p->judge_regex, p->judge_scale, e);
    if (rc) return rc;
    j->model = xstrdup(p->judge_model);
    j->system = p->judge_system ? xstrdup(p->judge_system) : NULL;
    j->req = (judge_request_opts){.model = j->model,
                                    .system = j->system,
                                    .temperature = p->judge_temperature,
                                    .max_tokens = p->judge_max_tokens};
    memcpy(j->req.template_sha256, judge_template_sha256(j->tpl), 32);

    judge_cache_mode mode;
    rc = judge_cache_parse_mode(p->judge_cache_mode ? p->judge_cache_mode : "readwrite", &mode, e);
    if (rc) return rc;
    rc = judge_cache_open(&j->cache, p->judge_cache, mode, e); /* NULL: the default path */
    if (rc) return rc;

    strbuf url = {0};
    judge_chat_url(p->judge_url, &url);
    http_opts hc = {
        .url = url.data,
        .key_env = p->judge_key_env && *p->judge_key_env ? p->judge_key_env : "OPENAI_API_KEY",
        .concurrency = p->judge_concurrency,
        .timeout = p->judge_timeout,
        .retries = p->judge_retries,
        .rps = p->judge_rps,
        .tpm = p->judge_tpm,
        .who = "judge",
        .flag = "--judge",
        .user_agent = "grpo-reward/" GRPO_VERSION,
        .exhausted_note = "; the answers received are saved, rerun to resume",
    };
    rc = http_client_open(&j->http, &hc, e);
    sb_free(&url);
    return rc;
}

int reward_open_judge(reward_fn *fn, const reward_opts *p, gerr *e) {
    int rc = check_params(p, e);
    if (rc) return rc;
    judge *j = xcalloc(1, sizeof *j);
    rc = open_parts(j, p, e);
    if (rc) {
        judge_close(j);
        return rc;
    }
    fn->self = j;
    fn->score = judge_score;
    fn->stats = judge_stats;
    fn->close = judge_close;
    return 0;
}
