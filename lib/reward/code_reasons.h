/* Why code runs failed, for --stats: each failed run gets a one-line
 * reason (timed out, killed by a signal, the last line of its output, an
 * exit before the test finished, or what the check of its values found),
 * and the reasons are counted, the first CODE_REASONS_MAX distinct ones by
 * their text, in the order first seen. */
#ifndef GRPO_REWARD_CODE_REASONS_H
#define GRPO_REWARD_CODE_REASONS_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "../sandbox/sandbox.h"

enum {
    CODE_REASONS_MAX = 16,
    CODE_REASON_LEN = 160, /* bytes of a reason kept */
};

typedef enum { CODE_FAIL_TIMEOUT, CODE_FAIL_SIGNAL, CODE_FAIL_ERROR, CODE_FAIL_EARLY_EXIT } code_failure;

typedef struct {
    char text[CODE_REASON_LEN];
    long long runs;
} code_reason;

typedef struct {
    code_reason reasons[CODE_REASONS_MAX];
    size_t n;
    long long other;   /* runs whose reason came after the table was full */
    long long by_kind[CODE_FAIL_EARLY_EXIT + 1];
} code_reasons;

/* The reason of a run that did not pass, in `out` (NUL-terminated). */
code_failure code_reason_describe(const sandbox_result *r, double timeout, char *out, size_t cap);

/* Counts the failed run r. */
void code_reasons_add(code_reasons *t, const sandbox_result *r, double timeout);

/* Counts a failure of that kind and reason (a run that exited 0 whose values
 * the check found wrong, missing or malformed; a test refused). */
void code_reasons_count(code_reasons *t, code_failure kind, const char *text);

/* Adds "failures" ({timeout, signal, error, early_exit}) and "reasons"
 * ([{reason, runs}], then {"reason": "(others)", runs} when the table
 * overflowed) to obj. */
void code_reasons_to_json(const code_reasons *t, cJSON *obj);

/* Adds the reasons alone as `key`: [{reason, `count`}], then the
 * "(others)" entry when the table overflowed. */
void code_reasons_list_to_json(const code_reasons *t, cJSON *obj, const char *key, const char *count);

#endif
