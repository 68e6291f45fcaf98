/* The state grpo-rollout's parts share (rollout.c: admitting prompts and
 * decoding; episode.c: multi-turn episodes against --env). Not an API. */
#ifndef GRPO_ROLLOUT_INTERNAL_H
#define GRPO_ROLLOUT_INTERNAL_H

#include "../chat/chat.h"
#include "../env/env.h"
#include "../io/jsonl.h"
#include "../runner/runner.h"
#include "rollout.h"
#include "seqs.h"

/* A prompt in flight: its record, tokens and the K completions being made.
 * Prompts leave in input order, each once all its samples are done. */
typedef struct {
    record rec;
    strbuf id;
    int32_t *tokens;
    size_t n_tokens;
    bool had_tokens; /* prompt_tokens came with the record */
    rollout_seq *samples; /* [K] */
    int n_done;
    cJSON *messages; /* --env: the prompt's messages (an empty array without them) */
} prompt_slot;

typedef struct {
    const rollout_opts *o;
    const backend *be; /* the device the model runs on; NULL: the CPU */
    weight_format weights; /* how the CPU packs the weights (--weights) */
    model_runner run;
    bool have_template;
    chat_template tmpl;
    cJSON *tools; /* --tools */
    sample_opts sp;
    char *policy;
    long long policy_step; /* the checkpoint's optimizer steps (its state.json), 0 for another model */
    strbuf sampler; /* the records' "sampler" field (lib/io/sampler_field.h) */
    /* [n_smp] scratch: a decode step samples its rows on up to n_smp
     * threads, a sampler each (smp[0] where one thread samples) */
    sampler *smp;
    int n_smp;
    float *logits;  /* [n_slots, vocab] on the host, where sampling reads them */
    float *dlogits; /* [n_slots, vocab] in the device's memory (be only) */
    /* Decode steps sample on the device when no top-k, top-p or min-p
     * truncates (cuda.h's cuda_sample_plain: the same draws), so only
     * tokens and log-probs come back. */
    bool device_sampling;
    rng_stream **rngs; /* [n_slots] (be only) */
    int32_t *toks;     /* [n_slots] a decode step's tokens and their log-probs, */
    float *lps;        /* row by row, before they are taken */
    int *step_slot; /* [n_slots] the slot of each row of logits a decode step wants */
    int n_slots;   /* sequences decoded together (KV cache slots) */
    /* slot -> the sample generating in it (NULL when free) and its prompt */
    rollout_seq **slot_seq;
    prompt_slot **slot_prompt;
    /* prompts in input order: [head, head + n_fifo) in a ring */
    prompt_slot **fifo;
    int fifo_cap, fifo_head, n_fifo;
    prompt_slot **spare; /* finished prompt slots kept for reuse */
    int n_spare;
    long long tokens_made, skipped;
    gerr first_skip;
    /* --env: the environment, and what running it costs */
    bool multi_turn;
    env_conn env;
    bool env_open;
    long long env_requests;
    double env_wait_seconds; /* time spent with nothing to decode but answers to wait for */
    double env_hold_seconds; /* time a decode step was held for answers due (episode_take_answers) */
    /* the last decode step: when its forward call ended, how long it took,
     * how many sequences it advanced */
    double step_ended, step_seconds;
    int step_seqs;
    /* how long the latest answers took after their request (seconds; a ring) */
    double env_latency[8];
    int n_env_latency;
} rollout;


/* Room in every cache slot for `positions` positions, and forward calls of
 * `rows` rows. */
int rollout_reserve(rollout *r, int positions, int rows, gerr *e);
/* The slot's sample is done: frees the slot and counts it for its prompt. */
void rollout_release(rollout *r, int slot);

/* episode.c */
int episode_open(rollout *r, gerr *e);
/* The slot's assistant turn ended: asks the environment what follows, or
 * ends the episode when no turn can follow. */
int episode_turn_ended(rollout *r, int slot, gerr *e);
/* Takes the environment's answers before a decode step: each ends its
 * episode, or appends its messages as tokens that the next decode step
 * prefills (with the other sequences' next tokens, in the same call). With
 * block (nothing else to do) it waits up to a second for the first. The
 * answers to requests the last step sent are waited for a little (at most
 * what that step cost per sequence) when the environment has answered that
 * fast lately: a sequence whose answer misses a step sits that step out. */
int episode_take_answers(rollout *r, bool block, gerr *e);
/* The multi-turn fields of a record (formats/rollout.md), after the
 * completion's tokens. */
void episode_write_fields(const rollout *r, const rollout_seq *s, record *out);
/* The environment must exit cleanly at the end. */
int episode_finish(rollout *r, gerr *e);
void episode_close(rollout *r);

#endif
