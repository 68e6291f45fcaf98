/* The reward functions grpo-reward knows, and every parameter's default. */
#include "../runner/device.h"
#include "../runner/weights.h"
#include <string.h>

#include "reward.h"

void reward_opts_default(reward_opts *p) {
    memset(p, 0, sizeof *p);
    p->answer_tol = 1e-6;
    p->format_tags = "think,answer";
    p->format_mode = "soft";
    p->length_unit = "tokens";
    p->rep_ngram = 3;
    p->rep_max_penalty = -1.0;
    p->code_python = "/usr/bin/python3"; /* the system interpreter: a per-user one (pyenv) is out of the sandbox user's reach */
    p->code_tests_field = "tests";
    p->code_timeout = 10;
    p->code_memory_mb = 1024;
    p->jobs = 1;
    p->cmd_timeout = 60;
    p->math_verify_python = "python3";
    p->judge_scale = 1.0;
    p->judge_key_env = "OPENAI_API_KEY";
    p->judge_cache_mode = "readwrite";
    p->judge_concurrency = 16;
    p->judge_timeout = 60;
    p->judge_retries = 6;
    p->judge_max_tokens = 16;
    p->rm_batch = 16;
    p->rm_chat_template = "auto";
    p->rm_device = device_default();
    p->rm_weights = weights_default();
    p->threads = 0;
}

const reward_fn_def reward_fn_defs[] = {
    {"answer", "1 when the final answer (last <answer>, \\boxed, ####, else last number) matches `answer` after "
               "normalisation, or the countdown equation is right (`numbers`, `target`); null without a reference",
     reward_open_answer},
    {"format", "the tag layout of --format-tags: strict (tags only, white space between), soft (tags in order "
               "anywhere) or partial (1/n per well-formed tag)",
     reward_open_format},
    {"length", "DAPO's soft overlong penalty: 0 up to --max-len minus --overlong-buffer, a ramp to -1 at --max-len, "
               "-1 beyond; -1 below --min-len",
     reward_open_length},
    {"repetition", "n-gram repetition penalty over words: (1 - unique/total n-grams) * --rep-penalty",
     reward_open_repetition},
    {"code", "the fraction of the record's tests (--code-tests-field) that pass after the completion's code (last "
             "```python block, else <answer>, else all): the sandboxed run computes each top-level assert's values, "
             "compared outside it; other tests are refused (0, counted in --stats); null without tests",
     reward_open_code},
    {"cmd", "an external program started once: records as JSONL on its stdin, one JSON answer line each "
            "({\"reward\": x} or {\"rewards\": {name: x, ...}}) on its stdout",
     reward_open_cmd},
    {"math-verify", "1 when the math-verify package (PyPI, open-r1's checker) finds the completion's answer equal to "
                    "`answer`, through cmd and scripts/grpo-math-verify; null without a reference",
     reward_open_math_verify},
    {"judge", "an LLM judge over an OpenAI-compatible chat-completions endpoint: a template filled from the "
              "record, the score parsed from the reply, answers cached in SQLite across runs",
     reward_open_judge},
    {"rm", "a reward model (--rm-model: an HF *ForSequenceClassification directory) scores the record's messages "
           "with the completion as the assistant's turn, in its own chat template; its one logit at the last token",
     reward_open_rm},
    {"env", "the environment's own reward for a multi-turn episode (the record's `env_reward`, from grpo-rollout "
            "--env); null where the record has none",
     reward_open_env},
};
const size_t reward_n_fn_defs = sizeof reward_fn_defs / sizeof reward_fn_defs[0];

const reward_fn_def *reward_find_def(const char *name) {
    for (size_t i = 0; i < reward_n_fn_defs; i++)
        if (!strcmp(reward_fn_defs[i].name, name)) return &reward_fn_defs[i];
    return NULL;
}
