/* The state of one sampled completion while it is generated: its tokens,
 * log-probabilities, decoded text (for stop strings) and why it ended. */
#ifndef GRPO_ROLLOUT_SEQS_H
#define GRPO_ROLLOUT_SEQS_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "../tok/model_text.h"
#include "../util/flags.h"
#include "../util/rng.h"
#include "../util/strbuf.h"

/* env and turns end multi-turn episodes only (the environment said done;
 * --max-turns was reached). */
typedef enum { FINISH_NONE, FINISH_STOP, FINISH_LENGTH, FINISH_ENV, FINISH_TURNS } finish_reason;

typedef struct {
    int sample;       /* 0..K-1 */
    int pos;          /* next position to write in the KV cache */
    int cached;       /* positions already in the cache: the next forward call writes [cached, pos) */
    rng_stream rng;
    int32_t *tokens;  /* completion tokens */
    /* a mixture of experts' routing at each completion position the model
     * ran on (routing_field.h's packed ids, route_bytes per position; set
     * route_bytes after seq_start, 0: none kept) */
    uint8_t *routing;
    size_t route_bytes;
    float *logprobs;
    int n, cap;
    tok_stream dec;
    strbuf text;      /* decoded completion (special tokens left out) */
    size_t text_end;  /* text length to report (a stop string cuts it) */
    finish_reason finish; /* of the turn being generated, then of the episode */
    /* multi-turn episodes (--env) only */
    bool multi_turn;
    uint8_t *mask;      /* per completion token: 1 sampled, 0 inserted by the environment */
    int turn;           /* 0-based index of the assistant turn being generated */
    int turn_start;     /* index in tokens of that turn's first token */
    bool bound_hit;     /* the total bound or the context ended the turn: no turn can follow */
    bool waiting;       /* its request is with the environment */
    double asked_at;    /* when that request went out (now_seconds) */
    cJSON *turns;       /* the messages appended after the prompt */
    bool has_env_reward;
    double env_reward;
} rollout_seq;

void seq_start(rollout_seq *s, const tokenizer *tok, int sample, int pos, uint64_t seed,
               const char *id, size_t id_len, bool multi_turn);
void seq_free(rollout_seq *s);

/* Appends a sampled token and decides whether the turn is done: an
 * end-of-sequence id or a stop string ends it with "stop" (the stop string is
 * cut from the text, the tokens stay), max_new tokens in this turn with
 * "length", and so do max_total completion tokens in all (0: no bound) or
 * the model's context (limit_pos), which also set bound_hit. */
void seq_push(rollout_seq *s, const model_text *mt, int32_t token, float logprob, const string_list *stops,
              int max_new, int max_total, int limit_pos);
/* Ends the turn for a reason seq_push did not see (the server ended it):
 * the text as decoded so far, nothing cut. */
void seq_end(rollout_seq *s, finish_reason why);
/* Appends tokens the environment inserted (mask 0, no log-probability) and
 * starts the next assistant turn: its text starts empty. They, and the
 * turn's last sampled token before them, are not yet in the cache. */
void seq_append_env(rollout_seq *s, const tokenizer *tok, const int32_t *ids, size_t n);

#endif
