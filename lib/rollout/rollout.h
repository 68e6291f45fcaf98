/* grpo-rollout: K sampled completions per prompt record (formats/rollout.md).
 *
 * Continuous batching: --batch KV-cache slots; whenever K of them are free
 * the next prompt is admitted, prefilled once and its cache forked to its K
 * samples; every sequence in flight advances one token per forward call (one
 * row each). Prompts are written in input order as soon as all their samples
 * are done. Sample k of
 * record `id` draws its numbers from the stream keyed (seed, id, k), so its
 * tokens do not depend on which other prompts share the batch beyond
 * float-summation effects of the batched matrix products.
 *
 * With --env (episode.c) a sample is a multi-turn episode: when its
 * assistant turn ends the slot waits for the environment's answer while the
 * other slots go on decoding; the answer's messages are rendered as a
 * continuation, prefilled into the slot's cache after what it holds, and
 * decoding resumes on the same random stream.
 *
 * With --server (server.c) an inference server generates instead: the
 * samples in flight are sent, token ids in, token ids and log-probabilities
 * out, and taken as our engine's tokens are; with --server-lora the server
 * first loads a LoRA adapter under a fixed name, and every request asks for
 * it. */
#ifndef GRPO_ROLLOUT_H
#define GRPO_ROLLOUT_H

#include <stdbool.h>

#include "../sample/sample.h"
#include "../util/err.h"
#include "../util/flags.h"

typedef struct {
    const char *model;
    const char *in, *out;
    const char *policy;        /* id written into every record; NULL = the model's directory or file name */
    long long policy_step;     /* policy_step written into every record; < 0: --model's (ckpt_step_read) */
    const char *chat_template; /* CHAT_TEMPLATE_CHOICES, for records without prompt_tokens */
    const char *reasoning_effort, *chat_date; /* harmony's (chat_set_harmony); NULL = not given */
    long long k;               /* samples per prompt */
    long long max_new_tokens;
    sample_opts sampling;    /* temperature < 0: the model's generation_config, else 1 */
    bool top_p_given, top_k_given;
    string_list stops;
    long long seed;
    long long batch;   /* sequences decoded together */
    long long threads; /* 0 = every core */
    const char *device;
    const char *weights; /* auto|f32|bf16|q8|q4k|mxfp4 (lib/runner/weights.h) */
    const char *kv_cache; /* auto|f32|bf16 */
    const char *routing_record; /* on|off: a mixture of experts' records carry the sampler's routing */
    shard_spec shard;
    bool progress;
    bool skip_bad; /* skip records that cannot be prompted (exit 65 otherwise), count them */
    const char *env;            /* multi-turn: the environment program (sh -c); NULL = single-turn */
    long long max_turns;        /* assistant turns per episode */
    long long max_total_tokens; /* completion tokens per episode, the environment's included; 0 = the context */
    double env_timeout;         /* seconds one request may wait for its answer */
    const char *tools;          /* file of tool schemas (a JSON array) rendered into prompts; NULL = none */
    /* --server: an inference server generates (server.c); --model gives the tokenizer and chat template */
    const char *server;         /* its root URL; NULL = our engine */
    const char *server_kind;    /* auto|vllm|sglang|llamacpp */
    const char *server_model;   /* the model to ask for; NULL = the first GET /v1/models lists */
    const char *server_logprobs; /* auto|processed|raw: what the server's log-probabilities are of */
    const char *server_key_env; /* environment variable holding an API key; NULL = none sent */
    long long server_concurrency; /* requests in flight at once */
    double server_timeout;        /* seconds per request */
    long long server_retries;     /* retries of a request before exit 75 */
    const char *server_lora;      /* a PEFT adapter directory loaded into the server before sampling; NULL: none */
    const char *server_lora_name; /* the name it is loaded under and asked for */
} rollout_opts;

void rollout_opts_default(rollout_opts *o);
int rollout_run(const rollout_opts *o, gerr *e);

#endif
