/* The reward functions grpo-reward knows, and every parameter's default. */
#include <string.h>

#include "reward.h"

reward_params reward_default_params(void) {
    reward_params p;
    memset(&p, 0, sizeof p);
    p.answer_tol = 1e-6;
    p.format_tags = "think,answer";
    p.format_mode = "soft";
    p.length_unit = "tokens";
    p.rep_ngram = 3;
    p.rep_max_penalty = -1.0;
    p.code_python = "python3";
    p.code_tests_field = "tests";
    p.code_timeout = 10;
    p.code_memory_mb = 1024;
    p.jobs = 1;
    p.cmd_timeout = 60;
    p.judge_scale = 1.0;
    p.judge_key_env = "OPENAI_API_KEY";
    p.judge_cache_mode = "readwrite";
    p.judge_concurrency = 16;
    p.judge_timeout = 60;
    p.judge_retries = 6;
    p.judge_max_tokens = 16;
    p.rm_batch = 16;
    p.threads = 0;
    return p;
}

const reward_fn_def reward_fn_defs[] = {
    {"cmd", "an external program started once: records as JSONL on its stdin, one JSON answer line each "
            "({\"reward\": x} or {\"rewards\": {name: x, ...}}) on its stdout",
     reward_open_cmd},
    {"rm", "a reward model (--rm-model: an HF *ForSequenceClassification directory) scores the record's messages "
           "with the completion as the assistant's turn, in its own chat template; its one logit at the last token",
     reward_open_rm},
};
const size_t reward_n_fn_defs = sizeof reward_fn_defs / sizeof reward_fn_defs[0];

const reward_fn_def *reward_find_def(const char *name) {
    for (size_t i = 0; i < reward_n_fn_defs; i++)
        if (!strcmp(reward_fn_defs[i].name, name)) return &reward_fn_defs[i];
    return NULL;
}
