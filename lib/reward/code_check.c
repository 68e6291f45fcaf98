/* The code reward's value protocol: inputs of the harness and what its
 * trusted modes report (code_check.h). */
#include "code_check.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

void code_frame(strbuf *in, const char *s, size_t len) {
    sb_printf(in, "%zu\n", len);
    sb_append(in, s ? s : "", len);
}

void code_plan_free(code_plan *p) {
    sb_free(&p->reason);
    sb_free(&p->skeleton);
    memset(p, 0, sizeof *p);
}

/* The next line of report[*at..len) (without its newline); false at the end. */
static bool next_line(const char *report, size_t len, size_t *at, const char **line, size_t *line_len) {
    if (*at >= len) return false;
    const char *start = report + *at;
    const char *nl = memchr(start, '\n', len - *at);
    *line = start;
    *line_len = nl ? (size_t)(nl - start) : len - *at;
    *at += *line_len + (nl != NULL);
    return true;
}

static int parse_plan(const char *line, size_t len, size_t index, code_plan *p, gerr *e) {
    memset(p, 0, sizeof *p);
    cJSON *j = cJSON_ParseWithLength(line, len);
    const cJSON *refused = cJSON_GetObjectItemCaseSensitive(j, "refused");
    const cJSON *skeleton = cJSON_GetObjectItemCaseSensitive(j, "skeleton");
    int rc = 0;
    if (cJSON_IsString(refused)) {
        p->refused = true;
        sb_puts(&p->reason, refused->valuestring);
    } else if (cJSON_IsString(skeleton)) {
        sb_puts(&p->skeleton, skeleton->valuestring);
    } else {
        rc = gerr_set(e, EX_SOFTWARE, "code: the plan of test %zu is not {refused} or {skeleton}: %.80s", index, line);
    }
    cJSON_Delete(j);
    return rc;
}

/* Calls each(line, i) for the n lines of the report; EX_SOFTWARE naming
 * `what` when there are fewer or more. */
static int each_line(const char *report, size_t len, size_t n, const char *what, const char *per,
                     int (*each)(const char *line, size_t line_len, size_t i, void *ctx, gerr *e), void *ctx,
                     gerr *e) {
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const char *line;
        size_t line_len;
        if (!next_line(report, len, &at, &line, &line_len))
            return gerr_set(e, EX_SOFTWARE, "code: the %s has %zu lines for %zu %s", what, i, n, per);
        int rc = each(line, line_len, i, ctx, e);
        if (rc) return rc;
    }
    if (at != len) return gerr_set(e, EX_SOFTWARE, "code: the %s has more lines than the %zu %s", what, n, per);
    return 0;
}

static int each_plan(const char *line, size_t len, size_t i, void *plans, gerr *e) {
    return parse_plan(line, len, i, (code_plan *)plans + i, e);
}

int code_plans_parse(const char *report, size_t len, size_t n, code_plan *plans, gerr *e) {
    memset(plans, 0, n * sizeof *plans);
    return each_line(report, len, n, "plan", "tests", each_plan, plans, e);
}

/* "pass", or "early: REASON", "error: REASON", "refused: REASON". */
static bool parse_verdict(const char *line, size_t len, code_verdict *v) {
    memset(v, 0, sizeof *v);
    if (len == 4 && !memcmp(line, "pass", 4)) {
        v->pass = true;
        return true;
    }
    static const struct {
        const char *prefix;
        code_failure kind;
        bool keep_prefix;
    } kinds[] = {{"early: ", CODE_FAIL_EARLY_EXIT, false}, {"error: ", CODE_FAIL_ERROR, false},
                 {"refused: ", CODE_FAIL_ERROR, true}};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        size_t plen = strlen(kinds[k].prefix);
        if (len < plen || memcmp(line, kinds[k].prefix, plen)) continue;
        v->kind = kinds[k].kind;
        size_t skip = kinds[k].keep_prefix ? 0 : plen;
        size_t take = len - skip < sizeof v->reason - 1 ? len - skip : sizeof v->reason - 1;
        memcpy(v->reason, line + skip, take);
        v->reason[take] = 0;
        for (size_t i = 0; i < take; i++) { /* one line of ASCII, as code_reasons keeps its reasons */
            unsigned char ch = (unsigned char)v->reason[i];
            if (ch < 0x20) v->reason[i] = ' ';
            else if (ch >= 0x7f) v->reason[i] = '?';
        }
        return true;
    }
    return false;
}

static int each_verdict(const char *line, size_t len, size_t i, void *verdicts, gerr *e) {
    if (parse_verdict(line, len, (code_verdict *)verdicts + i)) return 0;
    return gerr_set(e, EX_SOFTWARE, "code: the check of run %zu says neither pass nor why not: %.80s", i, line);
}

int code_verdicts_parse(const char *report, size_t len, size_t n, code_verdict *v, gerr *e) {
    return each_line(report, len, n, "check", "runs", each_verdict, v, e);
}
