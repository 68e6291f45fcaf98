/* Failed code runs, described in one line each and counted. */
#include "code_reasons.h"
#include "../io/json_scan.h"

#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

/* The last non-empty line of the output head, trimmed; "" when none. A head
 * cut at the cap ends mid-line, so it has no last line worth quoting. */
static void last_line(const sandbox_result *r, char *out, size_t cap) {
    out[0] = 0;
    if (r->output_len >= SANDBOX_OUTPUT_CAP) return;
    size_t end = r->output_len;
    while (end > 0 && json_is_space(r->output[end - 1])) end--;
    size_t start = end;
    while (start > 0 && r->output[start - 1] != '\n') start--;
    size_t len = end - start;
    if (len >= cap) len = cap - 1;
    memcpy(out, r->output + start, len);
    out[len] = 0;
    /* One line of ASCII: the cut may split a UTF-8 sequence, and the
     * program may print bytes that are not UTF-8 at all. */
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)out[i];
        if (ch < 0x20) out[i] = ' ';
        else if (ch >= 0x7f) out[i] = '?';
    }
}

code_failure code_reason_describe(const sandbox_result *r, double timeout, char *out, size_t cap) {
    if (r->timed_out) {
        snprintf(out, cap, "timed out after %gs", timeout);
        return CODE_FAIL_TIMEOUT;
    }
    if (WIFSIGNALED(r->status)) {
        int sig = WTERMSIG(r->status);
        snprintf(out, cap, "killed by signal %d (SIG%s)", sig, sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
        return CODE_FAIL_SIGNAL;
    }
    int status = WIFEXITED(r->status) ? WEXITSTATUS(r->status) : -1;
    if (status == 0) {
        snprintf(out, cap, "exited 0 before the test finished");
        return CODE_FAIL_EARLY_EXIT;
    }
    char line[CODE_REASON_LEN];
    last_line(r, line, sizeof line);
    if (line[0]) snprintf(out, cap, "%s", line);
    else if (r->output_len >= SANDBOX_OUTPUT_CAP)
        snprintf(out, cap, "exit status %d after more than %d bytes of output", status, SANDBOX_OUTPUT_CAP);
    else snprintf(out, cap, "exit status %d", status);
    return CODE_FAIL_ERROR;
}

void code_reasons_add(code_reasons *t, const sandbox_result *r, double timeout) {
    char text[CODE_REASON_LEN];
    code_failure kind = code_reason_describe(r, timeout, text, sizeof text);
    code_reasons_count(t, kind, text);
}

void code_reasons_count(code_reasons *t, code_failure kind, const char *reason) {
    char text[CODE_REASON_LEN]; /* as kept, so that a long reason matches itself */
    snprintf(text, sizeof text, "%s", reason);
    t->by_kind[kind]++;
    for (size_t i = 0; i < t->n; i++) {
        if (strcmp(t->reasons[i].text, text)) continue;
        t->reasons[i].runs++;
        return;
    }
    if (t->n == CODE_REASONS_MAX) {
        t->other++;
        return;
    }
    memcpy(t->reasons[t->n].text, text, sizeof text);
    t->reasons[t->n++].runs = 1;
}

void code_reasons_to_json(const code_reasons *t, cJSON *obj) {
    cJSON *kinds = cJSON_AddObjectToObject(obj, "failures");
    if (kinds) {
        static const char *const names[] = {"timeout", "signal", "error", "early_exit"};
        for (int k = 0; k <= CODE_FAIL_EARLY_EXIT; k++) cJSON_AddNumberToObject(kinds, names[k], (double)t->by_kind[k]);
    }
    code_reasons_list_to_json(t, obj, "reasons", "runs");
}

void code_reasons_list_to_json(const code_reasons *t, cJSON *obj, const char *key, const char *count) {
    cJSON *list = cJSON_AddArrayToObject(obj, key);
    if (!list) return;
    for (size_t i = 0; i <= t->n; i++) {
        if (i == t->n && !t->other) break;
        cJSON *item = cJSON_CreateObject();
        if (!item) return;
        cJSON_AddStringToObject(item, "reason", i < t->n ? t->reasons[i].text : "(others)");
        cJSON_AddNumberToObject(item, count, (double)(i < t->n ? t->reasons[i].runs : t->other));
        cJSON_AddItemToArray(list, item);
    }
}
