/* grpo-prep: dataset records or generated problems in, prompt records out.
 * Flags here; the work is in lib/prep. */
#include <stdio.h>

#include "chat/chat.h"
#include "io/outpath.h"
#include "prep/prep.h"
#include "util/err.h"
#include "util/flags.h"

int main(int argc, char **argv) {
    prep_opts o;
    prep_opts_default(&o);
    o.reasoning_effort = CHAT_HARMONY_REASONING; /* the defaults --help shows; NULL below when not given */
    o.chat_date = CHAT_HARMONY_DATE;
    const flag_spec flags[] = {
        {"--task", NULL, FLAG_CHOICE, &o.task_name, "TASK", "what to make prompts of (required)", 0, 0,
         "arith|countdown|gsm8k|math|mbpp|jsonl"},
        {"--in", "-i", FLAG_STRING, &o.in, "F", "dataset JSONL(.zst) for gsm8k|math|mbpp|jsonl; none or - = stdin", 0, 0,
         NULL},
        {"--out", "-o", FLAG_STRING, &o.out, "F", "output JSONL, .zst compresses; none or - = stdout", 0, 0, NULL},
        {"--n", "-n", FLAG_INT, &o.n, "N",
         "records to output: arith|countdown make exactly N (required); datasets at most N, 0 = all", 0, 1e15, NULL},
        {"--seed", NULL, FLAG_INT, &o.seed, "S", "seed of the generators and of --shuffle", 0, 1e18, NULL},
        {"--split", NULL, FLAG_CHOICE, &o.split, "SPLIT",
         "keep only train or test records, by a hash of the id (none = all)", 0, 0, "train|test"},
        {"--test-fraction", NULL, FLAG_DOUBLE, &o.test_fraction, "X",
         "share of ids in the test split: SHA-256 fraction of the id < X", 0, 1, NULL},
        {"--format", NULL, FLAG_CHOICE, &o.format_name, "FMT",
         "system instruction: <think>..</think><answer>..</answer>, <answer> only, or plain (none)", 0, 0,
         "think-answer|answer|plain"},
        {"--system", NULL, FLAG_STRING, &o.system, "TEXT", "system message instead of the --format one ('' = none)", 0,
         0, NULL},
        {"--prompt-field", NULL, FLAG_STRING, &o.prompt_field, "NAME",
         "jsonl: field with the user message (a string, or an array of messages)", 0, 0, NULL},
        {"--answer-field", NULL, FLAG_STRING, &o.answer_field, "NAME",
         "jsonl: field with the answer (a string or a number)", 0, 0, NULL},
        {"--shuffle", NULL, FLAG_BOOL, &o.shuffle, NULL,
         "output in an order set by --seed and the ids (buffers the selected records)", 0, 0, NULL},
        {"--shard", NULL, FLAG_SHARD, &o.shard, "i/n", "only records whose id hash falls in shard i of n", 0, 0, NULL},
        {"--skip-bad", NULL, FLAG_BOOL, &o.skip_bad, NULL,
         "skip records that do not fit the task, and count them on stderr, instead of exit 65", 0, 0, NULL},
        {"--digits", NULL, FLAG_INT, &o.digits, "N", "arith: most digits per operand", 1, ARITH_MAX_DIGITS, NULL},
        {"--ops", NULL, FLAG_STRING, &o.ops, "OPS", "arith: operations allowed, some of +-*/ (division only exact)", 0,
         0, NULL},
        {"--terms", NULL, FLAG_STRING, &o.terms, "A..B", "arith: operands per problem, N or A..B within 2..6", 0, 0,
         NULL},
        {"--word-problems", NULL, FLAG_DOUBLE, &o.word_problems, "X", "arith: share of word problems", 0, 1, NULL},
        {"--model", NULL, FLAG_STRING, &o.model, "M",
         "write prompt_tokens with this model's tokenizer and chat template (HF directory or .gguf)", 0, 0, NULL},
        {"--chat-template", NULL, FLAG_CHOICE, &o.chat_template, "T",
         "auto = the model's own (ChatML, Llama 3 or harmony, recognised; a gpt-oss without one: harmony); raw = "
         "the text alone, no special tokens added, and --format plain unless --format/--system is given",
         0, 0, CHAT_TEMPLATE_CHOICES},
        {"--reasoning-effort", NULL, FLAG_CHOICE, &o.reasoning_effort, "R",
         "harmony only: the system message's reasoning level", 0, 0, CHAT_REASONING_CHOICES},
        {"--chat-date", NULL, FLAG_STRING, &o.chat_date, "DATE",
         "harmony only: the system message's current date, YYYY-MM-DD or today (a fixed date gives the same "
         "prompt_tokens on any day)", 0, 0, NULL},
        {"--progress", NULL, FLAG_BOOL, &o.progress, NULL, "show progress on stderr even when it is not a terminal", 0,
         0, NULL},
    };
    flag_parser p = {
        .usage = "grpo-prep --task arith|countdown|gsm8k|math|mbpp|jsonl [--in F] [--out F] [flags]",
        .summary = "Writes prompt records (formats/prompt.md): id, task, messages, answer and task extras, then\n"
                   "every other input field unchanged. Dataset tasks read JSONL; arith and countdown generate\n"
                   "problems from --seed. Same flags and seed, same bytes.",
        .flags = flags,
        .n_flags = (int)(sizeof flags / sizeof *flags),
        .epilog = "ids: dataset tasks TASK/LINE (jsonl: the record's own string \"id\" if it has one);\n"
                  "arith/countdown: TASK/ + 16 hex digits of SHA-256 of the problem, so the same problem\n"
                  "always lands in the same split. A replaced input field is kept: GSM8K's \"answer\"\n"
                  "(the worked solution) as \"solution\".\n"
                  "examples:\n"
                  "  grpo-prep --task arith --n 1000 --split train --out train.jsonl\n"
                  "  grpo-prep --task gsm8k --in gsm8k.jsonl --split test --format answer > test.jsonl\n"
                  "  grpo-prep --task jsonl --prompt-field text --answer-field label < mine.jsonl",
    };
    flags_parse(&p, argc, argv);
    if (!flags_given(&p, "--reasoning-effort")) o.reasoning_effort = NULL; /* the defaults, not checked */
    if (!flags_given(&p, "--chat-date")) o.chat_date = NULL;
    o.given = (prep_given){
        .in = flags_given(&p, "--in"),
        .n = flags_given(&p, "--n"),
        .split = flags_given(&p, "--split"),
        .test_fraction = flags_given(&p, "--test-fraction"),
        .format = flags_given(&p, "--format"),
        .system = flags_given(&p, "--system"),
        .prompt_field = flags_given(&p, "--prompt-field"),
        .answer_field = flags_given(&p, "--answer-field"),
        .chat_template = flags_given(&p, "--chat-template"),
        .digits = flags_given(&p, "--digits"),
        .ops = flags_given(&p, "--ops"),
        .terms = flags_given(&p, "--terms"),
        .word_problems = flags_given(&p, "--word-problems"),
    };
    gerr e = {0};
    if (outpath_check(o.out, OUTPATH_FILE, &e) || prep_check_opts(&o, &e) || prep_run(&o, &e)) die_err(&e);
    return 0;
}
