/* For tests of the sandbox: one run of a script, its report NUL-terminated. */
#ifndef GRPO_TEST_SANDBOX_RUN_H
#define GRPO_TEST_SANDBOX_RUN_H

#include <stdio.h>
#include <string.h>

#include "check.h"
#include "sandbox/sandbox.h"

static inline sandbox_result sandbox_run_one(const sandbox *sb, const char *script) {
    sandbox_result r;
    size_t len = strlen(script);
    gerr e = {0};
    int rc = sandbox_run_batch(sb, &script, &len, 1, 1, &r, &e);
    CHECK_EQ_INT(rc, 0);
    if (rc) printf("#   run: %s\n", e.msg);
    r.report[r.report_len < SANDBOX_REPORT_CAP ? r.report_len : SANDBOX_REPORT_CAP - 1] = 0;
    return r;
}

#endif
