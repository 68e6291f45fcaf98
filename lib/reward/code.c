/* The code reward: MBPP/HumanEval style. The program in the completion
 * (code_extract.h says which part) is run with each of the record's tests in
 * the sandbox (lib/sandbox); the reward is the fraction of tests that pass.
 *
 * One sandboxed process per test, not one per record: a test that hangs,
 * crashes the interpreter, exhausts memory or leaves state behind costs only
 * itself, and how a run ended comes from the kernel (exit status, deadline)
 * rather than from code inside the interpreter that the program under test
 * could disable. The price is one interpreter start per test, paid in
 * parallel with -j.
 *
 * The program's run decides no verdict (code_check.h): the test is split
 * beforehand, by a run of the harness that holds no completion (the plan),
 * into the values only the program can compute and the rest; the program's
 * run computes those values and reports them as plain data; a second
 * trusted run (the check) compares them with what the test expects. Nothing
 * secret is in the program's reach: it can exit, print, walk the frames or
 * write the report itself, and still pass only with the right values. A
 * test the split cannot carry (an assert inside a function, no assert on
 * what the program computes) is refused: it scores 0, without a run, and
 * --stats counts it. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "code_check.h"
#include "code_extract.h"
#include "code_harness.h"
#include "../io/json_scan.h"
#include "code_reasons.h"
#include "reward.h"
#include "../sandbox/sandbox.h"

/* Not -I: it would also ignore PYTHONHASHSEED, and string hashing would then
 * differ run to run (set order, and tests that print sets), making rewards
 * irreproducible. What -I isolates from is gone anyway: the environment is
 * built from nothing, -s leaves out the user's site-packages (HOME is the
 * empty run directory regardless), and the current directory that -c puts
 * on sys.path is that empty directory. -B: no bytecode written anywhere. */
static const char *const python_args[] = {"-s", "-B", "-c", code_harness_py, NULL};
static const char *const python_env[] = {"PYTHONHASHSEED=0", NULL};

enum {
    CODE_VALUES_CAP = 256 << 10, /* bytes of values one run may report */
    CODE_PLAN_TIMEOUT = 60,      /* seconds at least for the plan of a batch (the dataset's tests alone) */
};

/* Seconds for the check of a batch: what the test computes from the values
 * is quick, but a value can make it hang (a huge range), and then the
 * batch's check is redone pair by pair. */
static double check_timeout(double run_timeout) { return 2 + 4 * run_timeout; }

typedef struct {
    sandbox sb;
    char *tests_field;
    size_t jobs;
    long long records, not_applicable, runs, passed, failed, timeouts, setup_failures, refused, refused_records;
    code_reasons reasons;  /* why the failed runs failed */
    code_reasons refusals; /* why tests were refused */
} code_fn;

/* Appends the record's tests to tests[*n..] as decoded strings. Absent or
 * null: *present = false. */
static int read_tests(const record *r, const char *field, strbuf **tests, size_t *n, size_t *cap, bool *present,
                      gerr *e) {
    const rec_field *f = record_find(r, field);
    *present = f && json_kind_of(f->val) != JSON_NULL;
    if (!*present) return 0;
    if (json_kind_of(f->val) != JSON_ARRAY) return record_field_error(r, field, "an array of strings", e);
    const char *v = f->val;
    size_t len = f->val_len, i = 1, index = 0;
    for (;;) {
        while (i < len && json_is_space(v[i])) i++;
        if (i >= len || v[i] == ']') return 0;
        if (v[i] == ',') {
            i++;
            continue;
        }
        json_scan_error err;
        size_t end = json_scan_value(v, len, i, &err);
        if (!end) return gerr_at(e, EX_DATAERR, r->file, r->line, "field \"%s\": %s", field, err.msg);
        json_kind kind = json_kind_of(v + i);
        if (kind != JSON_STRING)
            return gerr_at(e, EX_DATAERR, r->file, r->line, "field \"%s\": element %zu: expected a string, got %s",
                           field, index, json_kind_name(kind));
        if (*n == *cap) {
            size_t old = *cap;
            *cap = old ? 2 * old : 16;
            *tests = xrealloc(*tests, *cap * sizeof **tests);
            memset(*tests + old, 0, (*cap - old) * sizeof **tests);
        }
        strbuf *t = &(*tests)[(*n)++];
        sb_clear(t);
        while (end > i && json_is_space(v[end - 1])) end--;
        json_decode_string(v + i + 1, end - i - 2, t);
        i = end;
        index++;
    }
}

/* One batch: its tests, record after record, and where each stands. */
typedef struct {
    size_t item, first, count; /* tests[first..first+count-1] are this item's */
} item_tests;

typedef struct {
    strbuf *tests;
    size_t n_tests, cap_tests;
    item_tests *items;
    size_t n_items;
    code_plan *plans;      /* per test */
    long long *run_of;     /* per test: its run, or -1 when refused */
    size_t *test_of;       /* per run: its test */
    strbuf *inputs, *reports;
    sandbox_result *res;
    code_verdict *verdicts; /* per run */
    size_t n_runs;
} batch;

static void batch_free(batch *b) {
    for (size_t t = 0; t < b->cap_tests; t++) sb_free(&b->tests[t]);
    for (size_t t = 0; b->plans && t < b->n_tests; t++) code_plan_free(&b->plans[t]);
    for (size_t r = 0; r < b->n_runs; r++) {
        sb_free(&b->inputs[r]);
        if (b->reports) sb_free(&b->reports[r]);
    }
    free(b->tests);
    free(b->items);
    free(b->plans);
    free(b->run_of);
    free(b->test_of);
    free(b->inputs);
    free(b->reports);
    free(b->res);
    free(b->verdicts);
}

/* Runs the harness on trusted inputs (no completion in them: a plan or a
 * check), `jobs` at once, with time for a whole batch. A run that did not
 * exit 0 is described in why[i] ("" when it did). */
static int trusted_runs(const code_fn *c, double timeout, const strbuf *input, size_t n, size_t jobs,
                        strbuf *reports, char (*why)[CODE_REASON_LEN], gerr *e) {
    sandbox trusted = c->sb; /* the same sandbox, its own time: read-only use of its parts */
    trusted.lim.timeout = timeout;
    const char **in = xmalloc(n * sizeof *in);
    size_t *in_len = xmalloc(n * sizeof *in_len), cap = 1 << 20;
    for (size_t i = 0; i < n; i++) {
        in[i] = input[i].data;
        in_len[i] = input[i].len;
        if (cap < 8 * input[i].len + (1 << 20)) cap = 8 * input[i].len + (1 << 20); /* \uXXXX escapes */
    }
    sandbox_result *res = xmalloc(n * sizeof *res);
    int rc = sandbox_run_batch_reports(&trusted, in, in_len, n, jobs, res, reports, cap, e);
    for (size_t i = 0; !rc && i < n; i++) {
        why[i][0] = 0;
        if (sandbox_exited_ok(&res[i]) && !res[i].report_over) continue;
        if (res[i].report_over) snprintf(why[i], CODE_REASON_LEN, "reported more than %zu bytes", cap);
        else code_reason_describe(&res[i], trusted.lim.timeout, why[i], CODE_REASON_LEN);
    }
    free(res);
    free(in_len);
    free(in);
    return rc;
}

/* The plan of every test of the batch, from one trusted run. */
static int plan_tests(const code_fn *c, batch *b, gerr *e) {
    strbuf in = {0}, report = {0};
    char why[1][CODE_REASON_LEN];
    sb_puts(&in, "plan\n");
    for (size_t t = 0; t < b->n_tests; t++) code_frame(&in, b->tests[t].data, b->tests[t].len);
    double timeout = c->sb.lim.timeout > CODE_PLAN_TIMEOUT ? c->sb.lim.timeout : CODE_PLAN_TIMEOUT;
    int rc = trusted_runs(c, timeout, &in, 1, 1, &report, why, e);
    if (!rc && why[0][0]) rc = gerr_set(e, EX_SOFTWARE, "code: planning the tests: %s", why[0]);
    b->plans = xcalloc(b->n_tests ? b->n_tests : 1, sizeof *b->plans);
    if (!rc) rc = code_plans_parse(report.data, report.len, b->n_tests, b->plans, e);
    sb_free(&in);
    sb_free(&report);
    return rc;
}

/* The check of every run that exited 0 with its values: one trusted run for
 * them all, or, when that one fails (a value that makes the test's own
 * expression hang), one run per pair, so that it fails alone. */
static int check_runs(const code_fn *c, batch *b, gerr *e) {
    size_t n = 0;
    size_t *which = xmalloc((b->n_runs ? b->n_runs : 1) * sizeof *which);
    for (size_t r = 0; r < b->n_runs; r++)
        if (sandbox_exited_ok(&b->res[r]) && !b->res[r].report_over) which[n++] = r;
    strbuf *in = xcalloc(n + 1, sizeof *in), *report = xcalloc(n + 1, sizeof *report);
    char (*why)[CODE_REASON_LEN] = xmalloc((n + 1) * sizeof *why);
    sb_puts(&in[n], "check\n");
    for (size_t k = 0; k < n; k++) {
        const strbuf *test = &b->tests[b->test_of[which[k]]], *values = &b->reports[which[k]];
        code_frame(&in[n], test->data, test->len);
        code_frame(&in[n], values->data, values->len);
        sb_puts(&in[k], "check\n");
        code_frame(&in[k], test->data, test->len);
        code_frame(&in[k], values->data, values->len);
    }
    code_verdict *v = xcalloc(n + 1, sizeof *v);
    double timeout = check_timeout(c->sb.lim.timeout);
    int rc = n ? trusted_runs(c, timeout, &in[n], 1, 1, &report[n], &why[n], e) : 0;
    bool whole = n && !rc && !why[n][0] && !code_verdicts_parse(report[n].data, report[n].len, n, v, e);
    if (n && !rc && !whole) {
        rc = trusted_runs(c, timeout, in, n, c->jobs, report, why, e);
        for (size_t k = 0; !rc && k < n; k++) {
            if (!why[k][0] && !code_verdicts_parse(report[k].data, report[k].len, 1, &v[k], e)) continue;
            v[k] = (code_verdict){.kind = CODE_FAIL_ERROR};
            snprintf(v[k].reason, sizeof v[k].reason, "the check did not finish: %.120s", why[k][0] ? why[k] : e->msg);
        }
    }
    for (size_t k = 0; !rc && k < n; k++) b->verdicts[which[k]] = v[k];
    for (size_t k = 0; k <= n; k++) {
        sb_free(&in[k]);
        sb_free(&report[k]);
    }
    free(v);
    free(why);
    free(report);
    free(in);
    free(which);
    return rc;
}

/* The batch's tests and plans, then one run input per test not refused. */
static int prepare(code_fn *c, const reward_item *items, size_t n, batch *b, double *out, gerr *e) {
    b->items = xcalloc(n ? n : 1, sizeof *b->items);
    for (size_t i = 0; i < n; i++) {
        out[i] = REWARD_NULL;
        bool present;
        size_t first = b->n_tests;
        int rc = read_tests(items[i].rec, c->tests_field, &b->tests, &b->n_tests, &b->cap_tests, &present, e);
        if (rc) return rc;
        if (!present || b->n_tests == first) {
            c->not_applicable++;
            continue;
        }
        c->records++;
        b->items[b->n_items++] = (item_tests){i, first, b->n_tests - first};
    }
    if (!b->n_tests) return 0;
    int rc = plan_tests(c, b, e);
    if (rc) return rc;
    b->run_of = xmalloc(b->n_tests * sizeof *b->run_of);
    b->test_of = xmalloc(b->n_tests * sizeof *b->test_of);
    b->inputs = xcalloc(b->n_tests, sizeof *b->inputs);
    strbuf code = {0};
    for (size_t k = 0; k < b->n_items; k++) {
        const item_tests *it = &b->items[k];
        code_extract(items[it->item].completion, items[it->item].completion_len, &code);
        bool refused = false;
        for (size_t t = it->first; t < it->first + it->count; t++) {
            b->run_of[t] = -1;
            if (b->plans[t].refused) {
                c->refused++;
                code_reasons_count(&c->refusals, CODE_FAIL_ERROR, b->plans[t].reason.data);
                refused = true;
                continue;
            }
            strbuf *in = &b->inputs[b->n_runs];
            sb_puts(in, "run\n");
            code_frame(in, code.data, code.len);
            code_frame(in, b->plans[t].skeleton.data, b->plans[t].skeleton.len);
            b->test_of[b->n_runs] = t;
            b->run_of[t] = (long long)b->n_runs++;
        }
        c->refused_records += refused;
    }
    sb_free(&code);
    return 0;
}

/* Names the record whose run could not be set up. */
static void name_setup_failure(const batch *b, const reward_item *items, int rc, gerr *e) {
    for (size_t r = 0; r < b->n_runs; r++) {
        if (b->res[r].setup_failures < SANDBOX_SETUP_ATTEMPTS) continue;
        size_t t = b->test_of[r], k = 0;
        while (k + 1 < b->n_items && b->items[k + 1].first <= t) k++;
        const record *rec = items[b->items[k].item].rec;
        char why[sizeof e->msg];
        snprintf(why, sizeof why, "%s", e->msg);
        gerr_at(e, rc, rec->file, rec->line, "code: test %zu: %s", t - b->items[k].first, why);
        return;
    }
}

/* Whether run r passed; counts it either way. */
static bool tally_run(code_fn *c, const batch *b, size_t r) {
    const sandbox_result *res = &b->res[r];
    const code_verdict *v = &b->verdicts[r];
    c->runs++;
    if (res->timed_out) c->timeouts++;
    if (sandbox_exited_ok(res) && !res->report_over && v->pass) {
        c->passed++;
        return true;
    }
    c->failed++;
    if (!sandbox_exited_ok(res)) {
        code_reasons_add(&c->reasons, res, c->sb.lim.timeout);
    } else if (res->report_over) {
        char text[CODE_REASON_LEN];
        snprintf(text, sizeof text, "reported more than %d bytes of values", CODE_VALUES_CAP);
        code_reasons_count(&c->reasons, CODE_FAIL_ERROR, text);
    } else {
        code_reasons_count(&c->reasons, v->kind, v->reason);
    }
    return false;
}

static int code_score(void *self, const reward_item *items, size_t n, double *out, gerr *e) {
    code_fn *c = self;
    batch b = {0};
    int rc = prepare(c, items, n, &b, out, e);
    if (!rc && b.n_runs) {
        const char **in = xmalloc(b.n_runs * sizeof *in);
        size_t *in_len = xmalloc(b.n_runs * sizeof *in_len);
        for (size_t r = 0; r < b.n_runs; r++) {
            in[r] = b.inputs[r].data;
            in_len[r] = b.inputs[r].len;
        }
        b.res = xmalloc(b.n_runs * sizeof *b.res);
        b.reports = xcalloc(b.n_runs, sizeof *b.reports);
        b.verdicts = xcalloc(b.n_runs, sizeof *b.verdicts);
        rc = sandbox_run_batch_reports(&c->sb, in, in_len, b.n_runs, c->jobs, b.res, b.reports, CODE_VALUES_CAP, e);
        for (size_t r = 0; r < b.n_runs; r++) c->setup_failures += b.res[r].setup_failures;
        if (rc) name_setup_failure(&b, items, rc, e);
        if (!rc) rc = check_runs(c, &b, e);
        free(in_len);
        free(in);
    }
    for (size_t k = 0; !rc && k < b.n_items; k++) {
        const item_tests *it = &b.items[k];
        size_t passed = 0;
        for (size_t t = it->first; t < it->first + it->count; t++)
            if (b.run_of[t] >= 0) passed += tally_run(c, &b, (size_t)b.run_of[t]);
        out[it->item] = (double)passed / (double)it->count;
    }
    batch_free(&b);
    return rc;
}

static void code_stats(void *self, cJSON *root) {
    const code_fn *c = self;
    cJSON *obj = cJSON_AddObjectToObject(root, "code");
    if (!obj) return;
    cJSON_AddNumberToObject(obj, "records", (double)c->records);
    cJSON_AddNumberToObject(obj, "not_applicable", (double)c->not_applicable);
    cJSON_AddNumberToObject(obj, "runs", (double)c->runs);
    cJSON_AddNumberToObject(obj, "passed", (double)c->passed);
    cJSON_AddNumberToObject(obj, "failed", (double)c->failed);
    cJSON_AddNumberToObject(obj, "timeouts", (double)c->timeouts);
    cJSON_AddNumberToObject(obj, "setup_failures", (double)c->setup_failures);
    cJSON_AddNumberToObject(obj, "refused", (double)c->refused);
    cJSON_AddNumberToObject(obj, "refused_records", (double)c->refused_records);
    code_reasons_to_json(&c->reasons, obj);
    code_reasons_list_to_json(&c->refusals, obj, "refusals", "tests");
    cJSON_AddStringToObject(obj, "isolation_missing", c->sb.missing ? c->sb.missing : "");
}

static void code_close(void *self) {
    code_fn *c = self;
    sandbox_close(&c->sb);
    free(c->tests_field);
    free(c);
}

int reward_open_code(reward_fn *fn, const reward_opts *p, gerr *e) {
    if (!p->code_python || !*p->code_python)
        return gerr_set(e, EX_USAGE, "--code-python: expected an interpreter, got nothing");
    if (!p->code_tests_field || !*p->code_tests_field)
        return gerr_set(e, EX_USAGE, "--code-tests-field: expected a field name, got nothing");
    if (!(p->code_timeout > 0 && p->code_timeout <= 86400))
        return gerr_set(e, EX_USAGE, "--code-timeout: expected seconds in (0, 86400], got %g", p->code_timeout);
    if (p->code_memory_mb < 16 || p->code_memory_mb > (1LL << 30))
        return gerr_set(e, EX_USAGE, "--code-memory: expected at least 16 MB, got %lld", p->code_memory_mb);
    if (p->jobs < 1 || p->jobs > 1024)
        return gerr_set(e, EX_USAGE, "--jobs: expected 1 to 1024 sandboxes at once, got %lld", p->jobs);

    code_fn *c = xcalloc(1, sizeof *c);
    sandbox_limits lim = sandbox_default_limits();
    lim.timeout = p->code_timeout;
    lim.memory_mb = p->code_memory_mb;
    if (p->code_no_namespaces) lim.avoid_ns = SANDBOX_NS_USER | SANDBOX_NS_PID | SANDBOX_NS_NET | SANDBOX_NS_MOUNT;
    /* A run that works: the plan of one test (which also needs what the
     * check does: ast and json). */
    static const char probe[] = "plan\n15\nassert f() == 1";
    gerr se = {0};
    int rc = sandbox_open(&c->sb, p->code_python, python_args, python_env, &lim, probe, &se);
    if (rc) {
        free(c);
        if (rc == EX_UNAVAILABLE) return gerr_set(e, rc, "code: %s (the interpreter is --code-python)", se.msg);
        return gerr_set(e, rc, "code: %s", se.msg);
    }
    c->tests_field = xstrdup(p->code_tests_field);
    c->jobs = (size_t)p->jobs;
    fn->self = c;
    fn->score = code_score;
    fn->stats = code_stats;
    fn->close = code_close;
    return 0;
}
