/* The state of one sampled completion while it is generated: its tokens,
 * log-probabilities, decoded text (for stop strings) and why it ended. */
#ifndef GRPO_ROLLOUT_SEQS_H
#define GRPO_ROLLOUT_SEQS_H

#include <stdbool.h>
#include <stdint.h>

#include "../tok/model_text.h"
#include "../util/flags.h"
#include "../util/rng.h"
#include "../util/strbuf.h"

typedef enum { FINISH_NONE, FINISH_STOP, FINISH_LENGTH } finish_reason;

typedef struct {
    int sample;       /* 0..K-1 */
    int pos;          /* next position to write in the KV cache */
    rng_stream rng;
    int32_t *tokens;  /* completion tokens */
    float *logprobs;
    int n, cap;
    tok_stream dec;
    strbuf text;      /* decoded completion (special tokens left out) */
    size_t text_end;  /* text length to report (a stop string cuts it) */
    finish_reason finish;
} rollout_seq;

void seq_start(rollout_seq *s, const tokenizer *tok, int sample, int pos, uint64_t seed,
               const char *id, size_t id_len);
void seq_free(rollout_seq *s);

/* Appends a sampled token and decides whether the sequence is done: an
 * end-of-sequence id or a stop string ends it with "stop" (the stop string is
 * cut from the text, the tokens stay), max_new tokens or the model's context
 * (limit_pos) with "length". */
void seq_push(rollout_seq *s, const model_text *mt, int32_t token, float logprob, const string_list *stops,
              int max_new, int limit_pos);

#endif
