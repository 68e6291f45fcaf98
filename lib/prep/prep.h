/* grpo-prep: dataset records or generated problems in, prompt records out
 * (formats/prompt.md). The tool's main parses flags into prep_opts and calls
 * prep_check_opts, then prep_run; everything else lives here in lib/prep. */
#ifndef GRPO_PREP_H
#define GRPO_PREP_H

#include <stdbool.h>

#include "../util/err.h"
#include "../util/flags.h"
#include "arith.h"

typedef enum { TASK_ARITH, TASK_COUNTDOWN, TASK_GSM8K, TASK_MATH, TASK_MBPP, TASK_JSONL, TASK_NONE } prep_task;
typedef enum { FORMAT_THINK_ANSWER, FORMAT_ANSWER, FORMAT_PLAIN } prep_format;

/* Which flags were on the command line: defaults alone do not count, so
 * flags that do not apply to a task can be refused and --system/--format can
 * be told apart from their defaults (jsonl records with their own messages). */
typedef struct {
    bool in, n, split, test_fraction, format, system, prompt_field, answer_field, chat_template;
    bool digits, ops, terms, word_problems;
} prep_given;

typedef struct {
    const char *task_name; /* "arith" ... as given */
    prep_task task;        /* filled by prep_check_opts */
    const char *in, *out;  /* NULL or "-": stdin / stdout */
    long long n;           /* records to output; 0 = all (datasets only) */
    long long seed;
    const char *split; /* NULL, "train" or "test" */
    double test_fraction;
    const char *format_name;
    prep_format format; /* filled by prep_check_opts */
    const char *system; /* NULL: the format's instruction */
    const char *prompt_field, *answer_field;
    bool shuffle, skip_bad, progress;
    shard_spec shard;
    const char *ops, *terms; /* arith flags as given; parsed into arith */
    long long digits;
    double word_problems;
    arith_opts arith; /* filled by prep_check_opts */
    const char *model;         /* --model: write prompt_tokens with its tokenizer and chat template */
    const char *chat_template; /* --chat-template (CHAT_TEMPLATE_CHOICES) */
    const char *reasoning_effort, *chat_date; /* harmony's; NULL = not given */
    prep_given given;
} prep_opts;

/* The defaults that --help shows. */
void prep_opts_default(prep_opts *o);

/* Checks the flags against each other and fills the parsed fields.
 * Errors are EX_USAGE with a one-line message. */
int prep_check_opts(prep_opts *o, gerr *e);

/* Reads or generates, writes the prompt records. 0 or a sysexits code. */
int prep_run(const prep_opts *o, gerr *e);

bool prep_task_is_generated(prep_task t);

#endif
