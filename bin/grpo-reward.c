/* grpo-reward: rollout records in, scored records out (formats/scored.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"
#include "io/outpath.h"
#include "judge/cache.h"
#include "sandbox/sandbox.h"
#include "reward/preset.h"
#include "reward/reward.h"
#include "reward/stage.h"
#include "runner/weights.h"
#include "ops/blas.h"
#include "util/err.h"
#include "util/flags.h"

/* A flag of grpo-reward's table and the reward function whose parameter it
 * sets (NULL: a flag of the stage itself), so --list can group them. */
typedef struct {
    const char *fn;
    flag_spec spec;
} reward_flag;

/* --list: each function, then the flags that set its parameters. */
static void print_list(const reward_flag *flags, int n_flags) {
    for (size_t k = 0; k < reward_n_fn_defs; k++) {
        const reward_fn_def *d = &reward_fn_defs[k];
        printf("%s\n    %s\n", d->name, d->summary);
        for (int i = 0; i < n_flags; i++)
            if (flags[i].fn && !strcmp(flags[i].fn, d->name)) flags_print_one(&flags[i].spec);
    }
    printf("\npresets (--preset NAME: the --fn list it stands for)\n");
    for (size_t k = 0; k < reward_n_presets; k++)
        printf("%-10s --fn %s\n    %s\n", reward_presets[k].name, reward_presets[k].fns, reward_presets[k].summary);
}

/* grpo-reward cache stats|export|import|prune [flags] */
static int cache_main(int argc, char **argv) {
    const char *path = NULL, *in = "-", *out = "-", *model = NULL;
    double max_age = -1;
    const flag_spec flags[] = {
        {"--judge-cache", NULL, FLAG_STRING, &path, "PATH", "the cache file (default: $XDG_CACHE_HOME/grpo/judge.sqlite, else ~/.cache/grpo/judge.sqlite)",
         0, 0, NULL},
        {"--in", NULL, FLAG_STRING, &in, "F", "import: JSONL to merge (plain or zstd; - = stdin)", 0, 0, NULL},
        {"--out", NULL, FLAG_STRING, &out, "F", "export: where the JSONL goes (- = stdout; F.zst compresses)", 0, 0,
         NULL},
        {"--max-age", NULL, FLAG_DOUBLE, &max_age, "SECONDS", "prune: remove entries stored more than SECONDS ago", 0,
         0, NULL},
        {"--model", NULL, FLAG_STRING, &model, "NAME", "prune: only entries of this judge model", 0, 0, NULL},
    };
    flag_parser fp = {
        .usage = "grpo-reward cache stats|export|import|prune [--judge-cache PATH] [--in F] [--out F] "
                 "[--max-age SECONDS [--model NAME]]",
        .summary = "The judge cache (formats/judge-cache.md): stats prints one JSON object; export writes every\n"
                   "entry as JSONL sorted by key; import merges such JSONL in one transaction (the newer answer\n"
                   "wins); prune removes entries older than --max-age and compacts the file.",
        .flags = flags,
        .n_flags = (int)(sizeof flags / sizeof flags[0]),
        .epilog = "example: grpo-reward cache export --judge-cache a.sqlite | grpo-reward cache import "
                  "--judge-cache b.sqlite",
    };
    if (argc >= 2 && argv[1][0] == '-') flags_parse(&fp, argc, argv); /* --help, --version */
    if (argc < 2 || argv[1][0] == '-')
        die(EX_USAGE, "cache: expected stats, export, import or prune (see grpo-reward cache --help)");
    const char *sub = argv[1];
    flags_parse(&fp, argc - 1, argv + 1);
    strbuf def = {0};
    if (!path) {
        judge_cache_default_path(&def);
        path = def.data;
    }
    gerr e = {0};
    int rc;
    if (!strcmp(sub, "stats")) rc = judge_cache_cmd_stats(path, stdout, &e);
    else if (!strcmp(sub, "export"))
        rc = outpath_distinct((outpath_use[]){{"--judge-cache", path, OUTPATH_INPLACE}, {"--out", out, OUTPATH_REPLACE}},
                              2, &e) || outpath_check(out, OUTPATH_FILE, &e)
                 ? e.code
                 : judge_cache_cmd_export(path, out, &e);
    else if (!strcmp(sub, "import")) rc = judge_cache_cmd_import(path, in, &e);
    else if (!strcmp(sub, "prune")) {
        if (!flags_given(&fp, "--max-age")) die(EX_USAGE, "cache prune needs --max-age SECONDS");
        rc = judge_cache_cmd_prune(path, max_age, model, stdout, &e);
    } else
        die(EX_USAGE, "cache: expected stats, export, import or prune, got '%s'", sub);
    sb_free(&def);
    if (rc) die_err(&e);
    if (fflush(stdout)) die(EX_IOERR, "<stdout>: write failed");
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "cache")) return cache_main(argc - 1, argv + 1);
    blas_ensure_fast_kernels(argv); /* the reward model's matrix products */
    reward_opts p;
    reward_opts_default(&p);
    reward_stage_opts o;
    reward_stage_opts_default(&o);
    string_list fn_specs = {0};
    long long chunk = (long long)o.chunk;
    bool list = false;
    const char *in = "-", *out = "-", *preset = NULL;
    /* Every flag with the function whose parameter it sets (NULL: the stage's own). */
    char rm_weight_choices[48];
    const reward_flag rflags[] = {
        {NULL,
         {"--fn", NULL, FLAG_LIST, &fn_specs, "NAME[:W],...",
          "reward functions and their weights (repeatable; --list shows them)", 0, 0, NULL}},
        {NULL,
         {"--preset", NULL, FLAG_CHOICE, &preset, "math|code|general|reasoning|auto",
          "a task's --fn list with weights (--list shows them; auto: per record by its `task`); --fn adds to it", 0,
          0, "math|code|general|reasoning|auto"}},
        {NULL, {"--in", NULL, FLAG_STRING, &in, "F", "rollout records (JSONL, plain or zstd; - = stdin)", 0, 0, NULL}},
        {NULL,
         {"--out", NULL, FLAG_STRING, &out, "F", "scored records (- = stdout; F.zst is zstd-compressed)", 0, 0, NULL}},
        {NULL,
         {"--list", NULL, FLAG_BOOL, &list, NULL, "list the reward functions and their parameters, then exit", 0, 0,
          NULL}},
        {NULL,
         {"--stats", NULL, FLAG_STRING, &o.stats, "F",
          "write statistics (per reward: mean, std, nulls; per function: counters) as one JSON object to F", 0, 0,
          NULL}},
        {NULL,
         {"--shard", NULL, FLAG_SHARD, &o.shard, "i/n",
          "score and write only the records whose id hashes into shard i of n", 0, 0, NULL}},
        {NULL,
         {"--chunk", NULL, FLAG_INT, &chunk, "N",
          "records scored together (code, judge and cmd overlap their work within a chunk)", 1, 1 << 20, NULL}},
        {NULL,
         {"--threads", NULL, FLAG_INT, &p.threads, "N", "threads for the reward model (0 = all cores)", 0, 4096, NULL}},
        {NULL,
         {"--progress", NULL, FLAG_BOOL, &o.progress, NULL, "show progress on stderr even when it is not a terminal", 0,
          0, NULL}},
        {NULL,
         {"--quiet", NULL, FLAG_BOOL, &o.quiet, NULL, "no closing counter lines (judge, code, cmd) on stderr", 0, 0,
          NULL}},

        {"answer",
         {"--answer-tol", NULL, FLAG_DOUBLE, &p.answer_tol, "X", "integers and fractions match exactly; where a side is a decimal that may be rounded, within X * max(1, |b|) and half its last digit", 0,
          1, NULL}},

        {"format",
         {"--format-tags", NULL, FLAG_STRING, &p.format_tags, "LIST", "the tags, in the order they must appear", 0, 0,
          NULL}},
        {"format",
         {"--format-mode", NULL, FLAG_CHOICE, &p.format_mode, "strict|soft|partial",
          "strict layout only, tags in order anywhere, or credit per well-formed tag", 0, 0, "strict|soft|partial"}},

        {"length",
         {"--max-len", NULL, FLAG_INT, &p.length_max, "N", "completions longer than N get -1 (0 = off)", 0, 1e12,
          NULL}},
        {"length",
         {"--overlong-buffer", NULL, FLAG_INT, &p.length_buffer, "N",
          "the penalty ramps from 0 to -1 over the last N before --max-len (DAPO)", 0, 1e12, NULL}},
        {"length",
         {"--min-len", NULL, FLAG_INT, &p.length_min, "N", "completions shorter than N get -1 (0 = off)", 0, 1e12,
          NULL}},
        {"length",
         {"--length-unit", NULL, FLAG_CHOICE, &p.length_unit, "tokens|chars",
          "count completion_tokens, or the completion's Unicode code points", 0, 0, "tokens|chars"}},

        {"repetition",
         {"--rep-ngram", NULL, FLAG_INT, &p.rep_ngram, "N", "n-gram size of the repetition penalty", 1, 64, NULL}},
        {"repetition",
         {"--rep-penalty", NULL, FLAG_DOUBLE, &p.rep_max_penalty, "X",
          "value of a completion that is one n-gram repeated (<= 0)", -1e9, 0, NULL}},

        {"code",
         {"--code-python", NULL, FLAG_STRING, &p.code_python, "PATH",
          "the Python interpreter the tests run with (as an unprivileged user: not one under /root)", 0, 0, NULL}},
        {"code",
         {"--code-tests-field", NULL, FLAG_STRING, &p.code_tests_field, "NAME",
          "the record field holding the tests (an array of Python snippets)", 0, 0, NULL}},
        {"code",
         {"--code-timeout", NULL, FLAG_DOUBLE, &p.code_timeout, "S", "wall-clock seconds per test run", 0.01, 86400,
          NULL}},
        {"code",
         {"--code-memory", NULL, FLAG_INT, &p.code_memory_mb, "MB", "address-space limit of a test run", 16, 1 << 20,
          NULL}},
        {"code",
         {"--code-no-namespaces", NULL, FLAG_BOOL, &p.code_no_namespaces, NULL,
          "run without namespaces, as on a kernel that refuses them (to see what the fallback holds; "
          "stderr names what is missing)", 0, 0, NULL}},
        {"code", {"--jobs", "-j", FLAG_INT, &p.jobs, "N", "sandboxed test runs at once", 1, 1024, NULL}},

        {"cmd",
         {"--cmd", NULL, FLAG_STRING, &p.cmd, "'PROGRAM'", "the reward program, run with /bin/sh -c", 0, 0, NULL}},
        {"cmd",
         {"--cmd-timeout", NULL, FLAG_DOUBLE, &p.cmd_timeout, "S",
          "seconds to wait for an answer before the program counts as silent", 0.01, 86400, NULL}},

        {"math-verify",
         {"--math-verify-python", NULL, FLAG_STRING, &p.math_verify_python, "PATH",
          "the Python interpreter that has the math-verify package", 0, 0, NULL}},

        {"judge",
         {"--judge-url", NULL, FLAG_STRING, &p.judge_url, "URL",
          "OpenAI-compatible base URL (requests go to URL/chat/completions)", 0, 0, NULL}},
        {"judge", {"--judge-model", NULL, FLAG_STRING, &p.judge_model, "NAME", "the judge model", 0, 0, NULL}},
        {"judge",
         {"--judge-template", NULL, FLAG_STRING, &p.judge_template, "F",
          "prompt template: {prompt}, {completion}, {answer}, {FIELD}; {{ }} are braces", 0, 0, NULL}},
        {"judge",
         {"--judge-system", NULL, FLAG_STRING, &p.judge_system, "TEXT", "a system message for the judge", 0, 0, NULL}},
        {"judge",
         {"--judge-regex", NULL, FLAG_STRING, &p.judge_regex, "RE",
          "where the score is in the reply, its first group (default: the first number)", 0, 0, NULL}},
        {"judge",
         {"--judge-scale", NULL, FLAG_DOUBLE, &p.judge_scale, "X", "the parsed score is multiplied by X", 0, 0, NULL}},
        {"judge",
         {"--judge-key-env", NULL, FLAG_STRING, &p.judge_key_env, "VAR",
          "environment variable holding the API key (sent as a Bearer token, never logged or cached)", 0, 0, NULL}},
        {"judge",
         {"--judge-cache", NULL, FLAG_STRING, &p.judge_cache, "PATH",
          "SQLite cache of answers (default: $XDG_CACHE_HOME/grpo/judge.sqlite, else ~/.cache/grpo/judge.sqlite)", 0, 0, NULL}},
        {"judge",
         {"--judge-cache-mode", NULL, FLAG_CHOICE, &p.judge_cache_mode, "readwrite|readonly|refresh|off",
          "use and fill the cache, only use it, only fill it, or neither", 0, 0, "readwrite|readonly|refresh|off"}},
        {"judge",
         {"--judge-concurrency", NULL, FLAG_INT, &p.judge_concurrency, "N", "requests in flight at once", 1, 4096,
          NULL}},
        {"judge",
         {"--judge-timeout", NULL, FLAG_DOUBLE, &p.judge_timeout, "S", "seconds per request", 0.01, 86400, NULL}},
        {"judge",
         {"--judge-retries", NULL, FLAG_INT, &p.judge_retries, "N",
          "retries of a request (429, 5xx, timeouts, resets) before exit 75", 0, 1000, NULL}},
        {"judge",
         {"--judge-rps", NULL, FLAG_DOUBLE, &p.judge_rps, "X", "at most X requests per second (0 = no limit)", 0, 1e9,
          NULL}},
        {"judge",
         {"--judge-tpm", NULL, FLAG_DOUBLE, &p.judge_tpm, "X", "at most X tokens per minute (0 = no limit)", 0, 1e12,
          NULL}},
        {"judge",
         {"--judge-max-tokens", NULL, FLAG_INT, &p.judge_max_tokens, "N", "max_tokens of each request", 1, 1 << 20,
          NULL}},
        {"judge",
         {"--judge-temperature", NULL, FLAG_DOUBLE, &p.judge_temperature, "T", "temperature of each request", 0, 2,
          NULL}},

        {"rm",
         {"--rm-model", NULL, FLAG_STRING, &p.rm_model, "M",
          "reward model: HF directory of a LlamaForSequenceClassification / Qwen2ForSequenceClassification", 0, 0,
          NULL}},
        {"rm",
         {"--rm-batch", NULL, FLAG_INT, &p.rm_batch, "N", "sequences the reward model scores at once", 1, 4096, NULL}},
        {"rm",
         {"--rm-chat-template", NULL, FLAG_CHOICE, &p.rm_chat_template, CHAT_TEMPLATE_CHOICES,
          "chat template the reward model's text is rendered with (auto: the reward model's own)", 0, 0,
          CHAT_TEMPLATE_CHOICES}},
        {"rm",
         {"--rm-device", NULL, FLAG_CHOICE, &p.rm_device, "D",
          "where the reward model runs: auto = an NVIDIA GPU when this build has CUDA and one is present, else the "
          "CPU (default: $GRPO_DEVICE, else auto)",
          0, 0, "auto|cpu|cuda"}},
        {"rm",
         {"--rm-weights", NULL, FLAG_CHOICE, &p.rm_weights, "W",
          "the reward model's matrices on the CPU: f32, bf16 (rounded once; fastest with AVX512-BF16, emulated with the same bits on AVX-512F or AVX2), q8 (8-bit "
          "blocks, GGUF Q8_0's), mxfp4 (MXFP4 experts kept, the rest f32), auto = bf16 where the CPU has "
          "AVX512-BF16, else f32 (default: $GRPO_WEIGHTS, else auto)",
          0, 0, FLAGS_CHOICES(rm_weight_choices, weights_names)}},
    };
    enum { N_FLAGS = sizeof rflags / sizeof rflags[0] };
    flag_spec flags[N_FLAGS];
    for (int i = 0; i < N_FLAGS; i++) flags[i] = rflags[i].spec;
    flag_parser fp = {
        .usage = "grpo-reward --fn NAME[:WEIGHT][,NAME[:WEIGHT]...] | --preset NAME [--in F] [--out F] [--stats F] "
                 "[--shard i/n] [--list] [function flags]",
        .summary =
            "Scores rollout records: each function in --fn writes rewards.NAME (null where it does not apply),\n"
            "and `reward` is the weighted sum over the entries that are not null (null when none applies).\n"
            "Every other field is copied unchanged and in order; records keep their input order.",
        .flags = flags,
        .n_flags = N_FLAGS,
        .epilog = "Functions: answer, format, length, repetition, code, cmd, math-verify, judge, rm, env (grpo-reward --list).\n"
                  "The judge cache: grpo-reward cache stats|export|import|prune (grpo-reward cache --help).\n"
                  "judge: answers are stored in the cache as they arrive; when a request still fails after\n"
                  "--judge-retries the tool exits 75 and a rerun buys only what is missing. A status the\n"
                  "endpoint will not change its mind on (400, 401, 403, 404, ...) is exit 69. The API key is\n"
                  "never written to output, messages or the cache.\n"
                  "code: " SANDBOX_DEGRADED_HELP "\n"
                  "\n"
                  "examples:\n"
                  "  grpo-reward --fn answer:1,format:0.2 --in rollouts.jsonl.zst --out scored.jsonl.zst\n"
                  "  grpo-reward --preset auto < rollouts.jsonl > scored.jsonl   # math, code or general by `task`\n"
                  "  grpo-reward --fn cmd --cmd 'python3 my_reward.py' < rollouts.jsonl > scored.jsonl",
    };
    flags_parse(&fp, argc, argv);
    if (list) {
        print_list(rflags, N_FLAGS);
        return 0;
    }
    o.in = in;
    o.out = out;
    o.chunk = (size_t)chunk;

    gerr e = {0};
    const outpath_use uses[] = {{"--in", in, OUTPATH_READ}, {"--out", out, OUTPATH_REPLACE},
                                {"--stats", o.stats, OUTPATH_REPLACE}, {"--judge-cache", p.judge_cache, OUTPATH_INPLACE}};
    if (outpath_distinct(uses, 4, &e) || outpath_check(out, OUTPATH_FILE, &e) || outpath_check(o.stats, OUTPATH_FILE, &e))
        die_err(&e);
    reward_fn *fns;
    size_t n_fns;
    int opened = preset ? reward_open_preset(preset, (const char *const *)fn_specs.items, fn_specs.n, &p, &fns, &n_fns, &e)
                        : reward_open_fns((const char *const *)fn_specs.items, fn_specs.n, &p, &fns, &n_fns, &e);
    free(fn_specs.items);
    if (opened) die_err(&e);
    int rc = reward_stage_run(&o, fns, n_fns, &e);
    reward_close_fns(fns, n_fns);
    if (rc) die_err(&e);
    return 0;
}
