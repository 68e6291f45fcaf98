/* The wire format of grpo-rollout --server: one request per completion,
 * token ids in and token ids with their log-probabilities out, for each
 * kind of server (docs/servers.md):
 *
 *   vllm      POST /v1/completions {"model", "prompt": [ids], "max_tokens",
 *             sampling, "seed", "stop", "logprobs": 0, "return_token_ids": true}
 *             -> choices[0].token_ids, choices[0].logprobs.token_logprobs,
 *             choices[0].finish_reason
 *   sglang    POST /generate {"input_ids": [ids], "sampling_params": {sampling,
 *             "max_new_tokens", "stop", "sampling_seed"}, "return_logprob": true}
 *             -> meta_info.output_token_logprobs [[logprob, id, text], ...]
 *             (and output_ids, when the server sends them),
 *             meta_info.finish_reason.type
 *   llamacpp  POST /completion {"prompt": [ids], "n_predict", sampling,
 *             "samplers": [our order], "seed", "n_probs": 1,
 *             "post_sampling_probs", "return_tokens": true} (no "stop": its
 *             server leaves out a stop string's probabilities; the caller
 *             cuts at stop strings)
 *             -> tokens, completion_probabilities[i].{id, prob | logprob},
 *             stop_type
 *
 * Every kind is sent the same sampling settings: temperature, top-k (off:
 * vLLM and SGLang -1, llama.cpp 0), top-p, min-p, and the penalties off, so
 * the server's own defaults (a model's generation_config) do not apply.
 * GET /v1/models (each kind has it) names the server's kind (owned_by), the
 * model and its context.
 *
 * A LoRA adapter (grpo-rollout --server-lora) is loaded under a name before
 * sampling, and each request then names it:
 *
 *   vllm      POST /v1/load_lora_adapter {"lora_name", "lora_path",
 *             "load_inplace": true} -> 200 (a text body); requests have
 *             "model": the adapter's name
 *   sglang    POST /unload_lora_adapter {"lora_name"} (400 when none is
 *             loaded under the name), then POST /load_lora_adapter
 *             {"lora_name", "lora_path"} -> {"success": true, ...}; requests
 *             have "lora_path": the adapter's name
 *   llamacpp  none: its server applies only adapters given at start-up
 *
 * Pure functions: no I/O. */
#ifndef GRPO_ROLLOUT_SERVER_API_H
#define GRPO_ROLLOUT_SERVER_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../util/flags.h"
#include "../util/strbuf.h"

typedef enum { SERVER_AUTO, SERVER_VLLM, SERVER_SGLANG, SERVER_LLAMACPP } server_kind;

/* "auto", "vllm", "sglang", "llamacpp"; false for anything else. */
bool server_kind_parse(const char *name, server_kind *kind);
const char *server_kind_name(server_kind kind);
/* The generation endpoint's path: "/v1/completions", "/generate", "/completion". */
const char *server_endpoint(server_kind kind);

typedef struct {
    server_kind kind;
    const char *model;   /* the served model's name: vLLM's requests carry it */
    const char *adapter; /* the LoRA adapter's name the requests ask for; NULL: the model itself */
    double temperature, top_p, min_p;
    long long top_k; /* 0 = off */
    const string_list *stops;
    bool processed; /* llama.cpp: ask for the probabilities after sampling (post_sampling_probs) */
} server_sampling;

/* The body of one request: a completion of ids[0..n) of at most max_tokens
 * tokens, drawn with seed (replaces body). */
void server_request_body(const server_sampling *s, const int32_t *ids, size_t n, long long max_tokens,
                         uint32_t seed, strbuf *body);

typedef enum { SERVER_FINISH_STOP, SERVER_FINISH_LENGTH } server_finish;

typedef struct {
    int32_t *tokens;
    double *logprobs;
    size_t n, cap;
    server_finish finish;
} server_reply;

enum {
    SERVER_REPLY_OK = 0,
    SERVER_REPLY_NOT_JSON = 1,
    SERVER_REPLY_ABORTED = 2,
    SERVER_REPLY_BAD = 3,
    SERVER_REPLY_SPLIT = 4
};
/* Reads a generation reply of that kind into r. NOT_JSON: the body is not
 * JSON; ABORTED: the server says it aborted the request; SPLIT: llama.cpp
 * left out the probabilities of some tokens, as its server does for a
 * token that ends inside a UTF-8 character (the probabilities it gave are
 * of tokens of the reply, in order); BAD: JSON of the wrong shape (no
 * token ids, log-probabilities absent or of another count, an id that is
 * not the token's). why says what, in one line. */
int server_parse_reply(server_kind kind, const char *body, size_t len, server_reply *r, char *why, size_t cap);
void server_reply_free(server_reply *r);

typedef struct {
    server_kind kind; /* from owned_by; SERVER_AUTO when it names none of ours */
    strbuf owner;     /* owned_by as the server wrote it */
    strbuf model;     /* the id of the model asked for (the first listed when want is NULL) */
    long long context; /* its context length (max_model_len, or meta.n_ctx); 0 when not said */
} server_info;

/* Reads GET /v1/models's reply: {"data": [{"id", "owned_by", ...}, ...]}.
 * want: the model to find (NULL: the first). false with why when the body
 * is not such a list, or holds no model (or not want). */
bool server_parse_models(const char *body, size_t len, const char *want, server_info *out, char *why, size_t cap);
void server_info_free(server_info *i);

/* ---- LoRA adapters ---- */

/* The path that loads an adapter: "/v1/load_lora_adapter", "/load_lora_adapter";
 * NULL for llama.cpp, whose server cannot load one at run time. */
const char *server_lora_load_endpoint(server_kind kind);
/* The path that unloads the name first, for a server that cannot replace an
 * adapter in place (SGLang: "/unload_lora_adapter"); NULL: none. */
const char *server_lora_unload_endpoint(server_kind kind);
/* The load request of adapter directory path (absolute, as the server sees
 * it) under name (replaces body). */
void server_lora_load_body(server_kind kind, const char *name, const char *path, strbuf *body);
/* The unload request of name (replaces body). */
void server_lora_unload_body(const char *name, strbuf *body);

enum { SERVER_LORA_OK = 0, SERVER_LORA_NOT_JSON = 1, SERVER_LORA_BAD = 2, SERVER_LORA_REFUSED = 3 };
/* Reads a 2xx reply to a load. vLLM answers text: any body is OK. SGLang
 * answers {"success": bool, "error_message": ...}: REFUSED when success is
 * false (why holds its error_message), NOT_JSON when the body is not JSON,
 * BAD when it is JSON of another shape. */
int server_parse_lora_reply(server_kind kind, const char *body, size_t len, char *why, size_t cap);

#endif
