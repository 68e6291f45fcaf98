/* The reasons of failed code runs as --stats reports them: one line per
 * kind of failure, the last line of the output for an error, counted by
 * text in the order first seen, with an overflow bucket. */
#include <signal.h>
#include <string.h>

#include "check.h"
#include "reward/code_reasons.h"

static sandbox_result exited(int status, const char *output) {
    sandbox_result r;
    memset(&r, 0, sizeof r);
    r.status = (status & 0xff) << 8;
    r.output_len = strlen(output);
    memcpy(r.output, output, r.output_len + 1);
    return r;
}

static void check_reason(sandbox_result r, code_failure kind, const char *want) {
    char got[CODE_REASON_LEN];
    CHECK_EQ_INT(code_reason_describe(&r, 2.5, got, sizeof got), kind);
    CHECK_EQ_STR(got, want);
}

int main(void) {
    TEST("each kind of failure has its one-line reason");
    sandbox_result r = exited(0, "");
    r.timed_out = true;
    check_reason(r, CODE_FAIL_TIMEOUT, "timed out after 2.5s");
    r = exited(0, "");
    r.status = SIGSYS;
    check_reason(r, CODE_FAIL_SIGNAL, "killed by signal 31 (SIGSYS)");
    check_reason(exited(0, "hello\n"), CODE_FAIL_EARLY_EXIT, "exited 0 before the test finished");
    check_reason(exited(1, "Traceback (most recent call last):\n  File \"x\"\nPermissionError: [Errno 1] nope\n\n"),
                 CODE_FAIL_ERROR, "PermissionError: [Errno 1] nope");
    check_reason(exited(3, ""), CODE_FAIL_ERROR, "exit status 3");

    TEST("a reason is one line of ASCII, cut to its length");
    check_reason(exited(1, "line\nbad \xc3\xa9\tbyte\r\n"), CODE_FAIL_ERROR, "bad ?? byte");
    char long_line[400];
    memset(long_line, 'x', sizeof long_line - 1);
    long_line[sizeof long_line - 1] = 0;
    char got[CODE_REASON_LEN];
    r = exited(1, long_line);
    code_reason_describe(&r, 1, got, sizeof got);
    CHECK_EQ_INT(strlen(got), CODE_REASON_LEN - 1);

    TEST("output past the cap has no last line to quote");
    r = exited(1, "");
    memset(r.output, 'y', SANDBOX_OUTPUT_CAP);
    r.output[SANDBOX_OUTPUT_CAP] = 0;
    r.output_len = SANDBOX_OUTPUT_CAP;
    check_reason(r, CODE_FAIL_ERROR, "exit status 1 after more than 4096 bytes of output");

    TEST("reasons are counted by text in the order first seen, the rest in (others)");
    code_reasons t;
    memset(&t, 0, sizeof t);
    char text[32];
    for (int i = 0; i < CODE_REASONS_MAX + 3; i++) {
        snprintf(text, sizeof text, "E%d", i);
        sandbox_result e = exited(1, text);
        code_reasons_add(&t, &e, 1);
        if (i == 1) code_reasons_add(&t, &e, 1);
    }
    sandbox_result timeout = exited(0, "");
    timeout.timed_out = true;
    code_reasons_add(&t, &timeout, 1);
    cJSON *obj = cJSON_CreateObject();
    code_reasons_to_json(&t, obj);
    char *json = cJSON_PrintUnformatted(obj);
    CHECK(json && strstr(json, "\"failures\":{\"timeout\":1,\"signal\":0,\"error\":20,\"early_exit\":0}"));
    CHECK(json && strstr(json, "\"reasons\":[{\"reason\":\"E0\",\"runs\":1},{\"reason\":\"E1\",\"runs\":2},"));
    CHECK(json && strstr(json, "{\"reason\":\"E15\",\"runs\":1},{\"reason\":\"(others)\",\"runs\":4}]"));
    cJSON_free(json);
    cJSON_Delete(obj);

    TEST("a reason counted by its text (a check's verdict, a refusal): a long one, cut, still matches itself");
    memset(&t, 0, sizeof t);
    char long_reason[400];
    memset(long_reason, 'x', sizeof long_reason - 1);
    long_reason[sizeof long_reason - 1] = 0;
    code_reasons_count(&t, CODE_FAIL_ERROR, long_reason);
    code_reasons_count(&t, CODE_FAIL_ERROR, long_reason);
    code_reasons_count(&t, CODE_FAIL_EARLY_EXIT, "exited 0 before the test finished");
    CHECK_EQ_INT(t.n, 2);
    CHECK_EQ_INT(t.reasons[0].runs, 2);
    CHECK_EQ_INT(strlen(t.reasons[0].text), CODE_REASON_LEN - 1);
    obj = cJSON_CreateObject();
    code_reasons_list_to_json(&t, obj, "refusals", "tests");
    json = cJSON_PrintUnformatted(obj);
    CHECK(json && strstr(json, "{\"refusals\":[{\"reason\":\"xxx") == json);
    CHECK(json && strstr(json, "\"tests\":2},{\"reason\":\"exited 0 before the test finished\",\"tests\":1}]}"));
    cJSON_free(json);
    cJSON_Delete(obj);
    return check_done();
}
