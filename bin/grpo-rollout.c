/* grpo-rollout: prompt records in, K sampled completions per prompt out.
 * Flags here; the work is in lib/rollout. */
#include <stdlib.h>

#include "chat/chat.h"
#include "io/outpath.h"
#include "ops/blas.h"
#include "rollout/rollout.h"
#include "runner/weights.h"
#include "util/err.h"
#include "util/flags.h"

int main(int argc, char **argv) {
    blas_ensure_fast_kernels(argv);
    rollout_opts o;
    rollout_opts_default(&o);
    o.reasoning_effort = CHAT_HARMONY_REASONING; /* the defaults --help shows; NULL below when not given */
    o.chat_date = CHAT_HARMONY_DATE;
    char weight_choices[48];
    const flag_spec flags[] = {
        {"--model", NULL, FLAG_STRING, &o.model, "M",
         "policy: HF directory, our checkpoint, or .gguf (required); with --server only its tokenizer, chat template "
         "and generation_config are read", 0, 0, NULL},
        {"--in", NULL, FLAG_STRING, &o.in, "F", "prompt records (JSONL, plain or zstd; - = stdin)", 0, 0, NULL},
        {"--out", NULL, FLAG_STRING, &o.out, "F", "rollout records (- = stdout; F.zst is compressed)", 0, 0, NULL},
        {"-k", "-k", FLAG_INT, &o.k, "N", "completions per prompt", 1, 4096, NULL},
        {"--max-new-tokens", NULL, FLAG_INT, &o.max_new_tokens, "N", "most tokens per completion", 1, 1 << 20, NULL},
        {"--temperature", NULL, FLAG_DOUBLE, &o.sampling.temperature, "T",
         "sampling temperature, 0 = greedy (negative: the model's generation_config, else 1)", -1, 100, NULL},
        {"--top-p", NULL, FLAG_DOUBLE, &o.sampling.top_p, "P", "nucleus: keep the most likely tokens up to mass P", 1e-9,
         1, NULL},
        {"--top-k", NULL, FLAG_INT, &o.sampling.top_k, "K", "keep the K most likely tokens, 0 = off", 0, 1 << 24, NULL},
        {"--min-p", NULL, FLAG_DOUBLE, &o.sampling.min_p, "P", "drop tokens below P times the top probability", 0, 1,
         NULL},
        {"--stop", NULL, FLAG_LIST, &o.stops, "S", "stop when the completion contains S (repeatable; S is cut off)", 0,
         0, NULL},
        {"--seed", NULL, FLAG_INT, &o.seed, "S", "sample k of record id draws from the stream (S, id, k)", 0, 1e18,
         NULL},
        {"--batch", NULL, FLAG_INT, &o.batch, "N",
         "sequences decoded together (KV cache slots); less than k is raised to k (with --server: samples in flight, "
         "at least --server-concurrency)", 1, 1 << 16, NULL},
        {"--threads", NULL, FLAG_INT, &o.threads, "N", "CPU threads for OpenMP and OpenBLAS, 0 = every core", 0, 4096,
         NULL},
        {"--device", NULL, FLAG_CHOICE, &o.device, "D",
         "where to run: auto = an NVIDIA GPU when this build has CUDA and one is present, else the CPU "
         "(default: $GRPO_DEVICE, else auto); a gpt-oss's MXFP4 experts go there as their blocks (--weights auto or "
         "mxfp4), every other matrix bf16", 0, 0, "auto|cpu|cuda"},
        {"--weights", NULL, FLAG_CHOICE, &o.weights, "W",
         "the model's matrices on the CPU: f32, bf16 (rounded once; fastest with AVX512-BF16, emulated with the same bits on AVX-512F or AVX2), q8 (8-bit blocks, "
         "GGUF Q8_0's: a Q8_0 GGUF's are taken as they are), q4k (4-bit k-quant blocks, GGUF Q4_K's: a Q4_K GGUF's "
         "are taken as they are), mxfp4 (a gpt-oss's MXFP4 experts kept as the file's blocks, "
         "the rest f32), auto = a file's MXFP4 experts kept, a LoRA checkpoint trained on a packed base (grpo-update "
         "--base-weights) run on that base as the trainer runs it (so too under that base's format), the rest bf16 "
         "where the CPU has AVX512-BF16, else f32 (default: $GRPO_WEIGHTS, else auto); logprobs are those of the "
         "weights sampled from", 0, 0,
         FLAGS_CHOICES(weight_choices, weights_names)},
        {"--kv-cache", NULL, FLAG_CHOICE, &o.kv_cache, "C",
         "the KV cache's elements: f32, or bf16 (half the memory and the bytes a decode step reads; keys and values "
         "rounded once), auto = bf16 on a GPU, and on a CPU with AVX-512 or AVX2 when the weights are bf16, q8 or q4k "
         "(not a checkpoint's frozen base), else f32",
         0, 0, "auto|f32|bf16"},
        {"--routing-record", NULL, FLAG_CHOICE, &o.routing_record, "R",
         "a mixture of experts' records carry the experts each position was routed to (routing, for grpo-update "
         "--routing replay; formats/rollout.md): on, or off to leave it out", 0, 0, "on|off"},
        {"--chat-template", NULL, FLAG_CHOICE, &o.chat_template, "T",
         "for records without prompt_tokens: auto = the model's own; harmony (gpt-oss) also decides what "
         "completion holds (its final channel)", 0, 0, CHAT_TEMPLATE_CHOICES},
        {"--reasoning-effort", NULL, FLAG_CHOICE, &o.reasoning_effort, "R",
         "harmony only: the system message's reasoning level", 0, 0, CHAT_REASONING_CHOICES},
        {"--chat-date", NULL, FLAG_STRING, &o.chat_date, "DATE",
         "harmony only: the system message's current date, YYYY-MM-DD or today (a fixed date keeps prompts "
         "the same on any day)", 0, 0, NULL},
        {"--policy", NULL, FLAG_STRING, &o.policy, "NAME", "policy id written into the records (default: model's name)",
         0, 0, NULL},
        {"--policy-step", NULL, FLAG_INT, &o.policy_step, "N",
         "optimizer step written into the records as policy_step (-1: --model's grpo/state.json step, or with "
         "--server-lora DIR's, 0 for another model; with --server: the step of the checkpoint the server serves)", -1, 1e15, NULL},
        {"--shard", NULL, FLAG_SHARD, &o.shard, "i/n", "only prompts whose id hash falls in shard i of n", 0, 0, NULL},
        {"--skip-bad", NULL, FLAG_BOOL, &o.skip_bad, NULL,
         "skip records that cannot be prompted (no id, bad or empty or too long prompt) and count them", 0, 0, NULL},
        {"--env", NULL, FLAG_STRING, &o.env, "PROGRAM",
         "multi-turn episodes against PROGRAM (sh -c, started once): JSONL requests on its stdin, answers on its "
         "stdout (formats/env.md)", 0, 0, NULL},
        {"--max-turns", NULL, FLAG_INT, &o.max_turns, "N", "with --env: assistant turns per episode", 1, 1 << 20,
         NULL},
        {"--max-total-tokens", NULL, FLAG_INT, &o.max_total_tokens, "N",
         "with --env: most completion tokens per episode, the environment's included, 0 = the model's context", 0,
         1 << 30, NULL},
        {"--env-timeout", NULL, FLAG_DOUBLE, &o.env_timeout, "S", "with --env: seconds to wait for one answer (else 75)",
         0.001, 1e6, NULL},
        {"--tools", NULL, FLAG_STRING, &o.tools, "F",
         "tool schemas (OpenAI function format, a JSON array) rendered into prompts the model family's way", 0, 0,
         NULL},
        {"--server", NULL, FLAG_STRING, &o.server, "URL",
         "generate with the inference server at URL (its root, e.g. http://127.0.0.1:8000): token ids in, token ids "
         "and log-probabilities out (docs/servers.md)", 0, 0, NULL},
        {"--server-kind", NULL, FLAG_CHOICE, &o.server_kind, "K",
         "the server's API: vllm (/v1/completions), sglang (/generate), llamacpp (/completion), auto = the owned_by "
         "of GET /v1/models", 0, 0, "auto|vllm|sglang|llamacpp"},
        {"--server-model", NULL, FLAG_STRING, &o.server_model, "NAME",
         "the served model to ask for (default: the first GET /v1/models lists); records name it", 0, 0, NULL},
        {"--server-logprobs", NULL, FLAG_CHOICE, &o.server_logprobs, "L",
         "what the server's log-probabilities are of: processed (the distribution sampled from, after temperature) or "
         "raw (the model's, before); llama.cpp is asked for it, vLLM (--logprobs-mode) and SGLang say it at start-up; "
         "auto = processed, raw for vLLM", 0, 0, "auto|processed|raw"},
        {"--server-concurrency", NULL, FLAG_INT, &o.server_concurrency, "N", "requests in flight at once", 1, 4096,
         NULL},
        {"--server-timeout", NULL, FLAG_DOUBLE, &o.server_timeout, "S", "seconds per request", 0.01, 86400, NULL},
        {"--server-retries", NULL, FLAG_INT, &o.server_retries, "N",
         "retries of a request (429, 5xx, timeouts, resets) before exit 75", 0, 1000, NULL},
        {"--server-key-env", NULL, FLAG_STRING, &o.server_key_env, "VAR",
         "environment variable holding the server's API key, sent as a Bearer token (none: no key is sent)", 0, 0,
         NULL},
        {"--server-lora", NULL, FLAG_STRING, &o.server_lora, "DIR",
         "a PEFT adapter directory (grpo-export --format peft) the server loads before sampling, in place of the "
         "one of the same name, given as DIR's absolute path (the server must see this filesystem); every request "
         "asks for it. vLLM and SGLang only (docs/servers.md)", 0, 0, NULL},
        {"--server-lora-name", NULL, FLAG_STRING, &o.server_lora_name, "NAME",
         "the name --server-lora is loaded under and asked for; records name it", 0, 0, NULL},
        {"--progress", NULL, FLAG_BOOL, &o.progress, NULL, "progress on stderr even when not a terminal; ends with tokens/s and KV cache size (with --env, "
         "the requests and the time spent waiting for answers)", 0, 0,
         NULL},
    };
    flag_parser p = {
        .usage = "grpo-rollout --model M [--in F] [--out F] [-k N] [--max-new-tokens N] [--temperature T] [flags]",
        .summary = "Samples K completions of every prompt record (formats/rollout.md): the prompt's fields, then\n"
                   "sample, prompt_tokens, completion_tokens, completion, logprobs (under softmax(logits/T) before\n"
                   "top-k/top-p/min-p), temperature, finish_reason (stop|length) and policy. The K records of a\n"
                   "prompt are written together, in sample order. Same inputs, flags and seed: same bytes.",
        .flags = flags,
        .n_flags = (int)(sizeof flags / sizeof *flags),
        .epilog = "Records need an \"id\" and either prompt_tokens or messages (rendered with the chat template).\n"
                  "A completion stops at an end-of-sequence token of the model or a --stop string (finish_reason\n"
                  "stop; the token is kept in completion_tokens, the stop string cut from completion), or after\n"
                  "--max-new-tokens or at the model's context length (length).\n"
                  "Weights or logits that are not finite (NaN, infinity) stop it with 65 naming the model.\n"
                  "With --env each sample is an episode: when an assistant turn ends, the record's fields with\n"
                  "sample, turn, messages (the conversation so far), tool_calls and last go to PROGRAM as one line;\n"
                  "it answers {id, sample, turn, messages: [{role: user|tool, content}]} to go on or\n"
                  "{id, sample, turn, done: true} to end, either with an optional reward. The answer is appended\n"
                  "as tokens and decoding resumes; other samples go on decoding meanwhile. Records then also carry\n"
                  "completion_mask (1 sampled, 0 inserted), turns, env_reward, null logprobs at inserted tokens,\n"
                  "completion = the last assistant message, finish_reason env|turns|length. A bad answer, one to\n"
                  "a request never asked, or the program's death is 65; no answer within --env-timeout is 75.\n"
                  "f32 weights on a CPU with neither AVX-512 nor AVX2+FMA go through OpenBLAS, whose sums follow\n"
                  "the rows batched together, so answer timing: reruns then agree to float rounding, not byte\n"
                  "for byte (formats/rollout.md).\n"
                  "With --server URL an inference server (vLLM, SGLang, llama.cpp's llama-server) samples: each\n"
                  "sample's token ids go as they are (with --env the whole conversation's), each with a seed from\n"
                  "its keyed stream; the reply's token ids and log-probabilities make the record, which gains\n"
                  "sampler {engine, model, logprobs: processed|raw}; with --server-lora the server first loads\n"
                  "the adapter under --server-lora-name and the requests ask for it (sampler gains adapter and\n"
                  "adapter_path; llama.cpp cannot, 64). Its records are as deterministic as the server's seeded\n"
                  "sampling. A server that cannot be reached is 69, as is a refused adapter load; a reply with\n"
                  "missing or miscounted log-probabilities is 65 naming the record; 429, 5xx and timeouts are\n"
                  "retried, then 75 (docs/servers.md).\n"
                  "example: grpo-rollout --model models/SmolLM2-135M-Instruct.Q4_1.gguf -k 8 --in prompts.jsonl "
                  "--out rollouts.jsonl.zst",
    };
    flags_parse(&p, argc, argv);
    if (!o.model) die(EX_USAGE, "--model is required (see %s --help)", tool_name());
    o.top_p_given = flags_given(&p, "--top-p");
    o.top_k_given = flags_given(&p, "--top-k");
    if (!flags_given(&p, "--reasoning-effort")) o.reasoning_effort = NULL; /* the defaults, not checked */
    if (!flags_given(&p, "--chat-date")) o.chat_date = NULL;
    if (!o.env) {
        static const char *const env_only[] = {"--max-turns", "--max-total-tokens", "--env-timeout"};
        for (size_t i = 0; i < sizeof env_only / sizeof *env_only; i++)
            if (flags_given(&p, env_only[i])) die(EX_USAGE, "%s needs --env PROGRAM", env_only[i]);
    }
    static const char *const server_only[] = {"--server-kind",    "--server-model",   "--server-logprobs",
                                              "--server-concurrency", "--server-timeout", "--server-retries",
                                              "--server-key-env", "--server-lora"};
    static const char *const engine_only[] = {"--device", "--weights", "--kv-cache", "--routing-record"};
    for (size_t i = 0; !o.server && i < sizeof server_only / sizeof *server_only; i++)
        if (flags_given(&p, server_only[i])) die(EX_USAGE, "%s needs --server URL", server_only[i]);
    if (!o.server_lora && flags_given(&p, "--server-lora-name"))
        die(EX_USAGE, "--server-lora-name needs --server-lora DIR");
    for (size_t i = 0; o.server && i < sizeof engine_only / sizeof *engine_only; i++)
        if (flags_given(&p, engine_only[i])) die(EX_USAGE, "%s chooses how our engine runs: not with --server", engine_only[i]);
    gerr e = {0};
    int rc = outpath_check(o.out, OUTPATH_FILE, &e) || rollout_run(&o, &e);
    free(o.stops.items);
    if (rc) die_err(&e);
    return 0;
}
