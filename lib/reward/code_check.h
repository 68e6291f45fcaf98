/* The code reward's value protocol, C side: the inputs of the harness's
 * three modes (code_harness.c) and the parsing of what its trusted modes
 * report. A test passes only when the check, a run of the harness that
 * never holds the completion, finds the test's asserts true with the values
 * the program's run reported; the program's run never sees an expected
 * value and reports data, never a verdict. */
#ifndef GRPO_REWARD_CODE_CHECK_H
#define GRPO_REWARD_CODE_CHECK_H

#include <stdbool.h>
#include <stddef.h>

#include "../util/err.h"
#include "../util/strbuf.h"
#include "code_reasons.h"

/* Appends one item: its length on a line, then its bytes. */
void code_frame(strbuf *in, const char *s, size_t len);

/* What the plan says of one test. */
typedef struct {
    bool refused;
    strbuf reason;   /* when refused */
    strbuf skeleton; /* what the run executes after the program */
} code_plan;

void code_plan_free(code_plan *p);

/* Reads the plan's report: one JSON line per test, n of them, into
 * plans[0..n-1] (filled; free each with code_plan_free). EX_SOFTWARE when
 * the report is not that. */
int code_plans_parse(const char *report, size_t len, size_t n, code_plan *plans, gerr *e);

/* The check's word on one run. */
typedef struct {
    bool pass;
    code_failure kind; /* when not: CODE_FAIL_EARLY_EXIT or CODE_FAIL_ERROR */
    char reason[CODE_REASON_LEN];
} code_verdict;

/* Reads the check's report: one line per pair, n of them. EX_SOFTWARE when
 * the report is not that. */
int code_verdicts_parse(const char *report, size_t len, size_t n, code_verdict *v, gerr *e);

#endif
