/* The judge's HTTP request and its cache key.
 *
 * The body is OpenAI chat completions, compact, fields in a fixed order:
 *   {"model":M,"messages":[{"role":"system","content":S},{"role":"user","content":U}],
 *    "temperature":T,"max_tokens":N}
 * (no system message when there is none). The canonical request is the same
 * object with "template_sha256" (hex of the template file's bytes) added
 * last; the cache key is the SHA-256 of its bytes. Numbers are written in
 * the shortest form that reads back exactly, so the key depends on the
 * values only. The URL and the API key are never part of either. */
#ifndef GRPO_JUDGE_REQUEST_H
#define GRPO_JUDGE_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "../util/strbuf.h"

typedef struct {
    const char *model;
    const char *system; /* NULL: no system message */
    double temperature;
    long long max_tokens;
    uint8_t template_sha256[32];
} judge_request_opts;

/* Replaces body and canonical with the request for one rendered user
 * message, and fills key with SHA-256(canonical). */
void judge_request_build(const judge_request_opts *p, const char *user, size_t user_len, strbuf *body,
                         strbuf *canonical, uint8_t key[32]);

/* Tokens a request may use, before it is sent: its body's bytes / 4 (about
 * four bytes a token in English BPE) plus max_tokens. */
double judge_request_token_estimate(size_t body_len, long long max_tokens);

/* {base}/chat/completions with base's trailing slashes removed (appended to out). */
void judge_chat_url(const char *base, strbuf *out);

#endif
