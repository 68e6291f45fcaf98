/* The code reward: MBPP/HumanEval style. The program in the completion
 * (code_extract.h says which part) is run with each of the record's tests in
 * the sandbox (lib/sandbox); the reward is the fraction of tests that pass.
 *
 * One sandboxed process per test, not one per record: a test that hangs,
 * crashes the interpreter, exhausts memory or leaves state behind costs only
 * itself, and every run's verdict comes from the kernel (exit status,
 * deadline) rather than from code inside the interpreter that the program
 * under test could disable (an in-process alarm, a try/except). The price
 * is one interpreter start per test, paid in
 * parallel with -j.
 *
 * A test passes when the interpreter exits 0 after running the program and
 * then the test, and our harness wrote the run's nonce (random, never in the
 * program's input) to the report pipe after the test returned: a program
 * that calls os._exit(0), sys.exit(0) or kills itself before the test, or
 * prints whatever it likes, does not pass. The nonce guards against such
 * exits and stray output, not against code that searches the interpreter's
 * memory for it: the program runs in the harness's process. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "code_extract.h"
#include "../io/json_scan.h"
#include "code_reasons.h"
#include "reward.h"
#include "../sandbox/sandbox.h"

/* Reads fd 3 (nonce, program length, program, test), runs the program then
 * the test in one fresh namespace, and reports the nonce on fd 4. The
 * program runs with __name__ "__solution__", so its `if __name__ ==
 * "__main__":` demo block stays out, as in HumanEval's harness. */
static const char harness[] =
    "import os\n"
    "def _grpo_harness():\n"
    "    parts = []\n"
    "    while True:\n"
    "        b = os.read(3, 1 << 16)\n"
    "        if not b:\n"
    "            break\n"
    "        parts.append(b)\n"
    "    os.close(3)\n"
    "    nonce, size, rest = b''.join(parts).split(b'\\n', 2)\n"
    "    size = int(size)\n"
    "    scope = {'__name__': '__solution__', '__builtins__': __builtins__}\n"
    "    exec(compile(rest[:size], 'solution.py', 'exec'), scope)\n"
    "    exec(compile(rest[size:], 'test.py', 'exec'), scope)\n"
    "    os.write(4, nonce)\n"
    "    os._exit(0)\n"
    "_grpo_harness()\n";

/* Not -I: it would also ignore PYTHONHASHSEED, and string hashing would then
 * differ run to run (set order, and tests that print sets), making rewards
 * irreproducible. What -I isolates from is gone anyway: the environment is
 * built from nothing, -s leaves out the user's site-packages (HOME is the
 * empty run directory regardless), and the current directory that -c puts
 * on sys.path is that empty directory. -B: no bytecode written anywhere. */
static const char *const python_args[] = {"-s", "-B", "-c", harness, NULL};
static const char *const python_env[] = {"PYTHONHASHSEED=0", NULL};

enum { NONCE_BYTES = 16 };

typedef struct {
    sandbox sb;
    char *tests_field;
    size_t jobs;
    long long records, not_applicable, runs, passed, failed, timeouts, setup_failures;
    code_reasons reasons; /* why the failed runs failed */
} code_fn;

/* The record's tests: NULL-free list of decoded strings in tests[0..*n-1]
 * (appended). Absent or null: *present = false. */
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

static int make_nonce(char *hex, gerr *e) {
    unsigned char raw[NONCE_BYTES];
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t k = getrandom(raw + got, sizeof raw - got, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return gerr_set(e, EX_SOFTWARE, "code: getrandom: %s", strerror(errno));
        got += (size_t)k;
    }
    for (size_t i = 0; i < sizeof raw; i++) snprintf(hex + 2 * i, 3, "%02x", raw[i]);
    return 0;
}

/* The harness's input: "NONCE\nLEN\n" + program + test. */
static void make_input(strbuf *in, const char *nonce, const strbuf *code, const strbuf *test) {
    sb_clear(in);
    sb_printf(in, "%s\n%zu\n", nonce, code->len);
    sb_append(in, code->data ? code->data : "", code->len);
    sb_append(in, test->data ? test->data : "", test->len);
}

typedef struct {
    size_t item, first, count; /* runs[first..first+count-1] are this item's tests */
} item_runs;

static int code_score(void *self, const reward_item *items, size_t n, double *out, gerr *e) {
    code_fn *c = self;
    strbuf *tests = NULL, code = {0};
    size_t n_tests = 0, cap_tests = 0;
    strbuf *inputs = NULL;
    size_t n_runs = 0, cap_runs = 0;
    char (*nonces)[2 * NONCE_BYTES + 1] = NULL;
    item_runs *per_item = xcalloc(n ? n : 1, sizeof *per_item);
    size_t n_per_item = 0;
    int rc = 0;

    for (size_t i = 0; i < n; i++) {
        out[i] = REWARD_NULL;
        bool present;
        n_tests = 0;
        rc = read_tests(items[i].rec, c->tests_field, &tests, &n_tests, &cap_tests, &present, e);
        if (rc) goto done;
        if (!present || n_tests == 0) {
            c->not_applicable++;
            continue;
        }
        c->records++;
        code_extract(items[i].completion, items[i].completion_len, &code);
        per_item[n_per_item++] = (item_runs){i, n_runs, n_tests};
        for (size_t t = 0; t < n_tests; t++) {
            if (n_runs == cap_runs) {
                size_t old = cap_runs;
                cap_runs = old ? 2 * old : 64;
                inputs = xrealloc(inputs, cap_runs * sizeof *inputs);
                memset(inputs + old, 0, (cap_runs - old) * sizeof *inputs);
                nonces = xrealloc(nonces, cap_runs * sizeof *nonces);
            }
            rc = make_nonce(nonces[n_runs], e);
            if (rc) goto done;
            make_input(&inputs[n_runs], nonces[n_runs], &code, &tests[t]);
            n_runs++;
        }
    }

    if (n_runs) {
        const char **in = xmalloc(n_runs * sizeof *in);
        size_t *in_len = xmalloc(n_runs * sizeof *in_len);
        for (size_t r = 0; r < n_runs; r++) {
            in[r] = inputs[r].data;
            in_len[r] = inputs[r].len;
        }
        sandbox_result *res = xmalloc(n_runs * sizeof *res);
        rc = sandbox_run_batch(&c->sb, in, in_len, n_runs, c->jobs, res, e);
        for (size_t r = 0; r < n_runs; r++) c->setup_failures += res[r].setup_failures;
        if (rc) {
            /* Name the record whose run could not be set up. */
            for (size_t k = 0; k < n_per_item; k++) {
                const item_runs *ir = &per_item[k];
                for (size_t r = ir->first; r < ir->first + ir->count; r++) {
                    if (res[r].setup_failures < SANDBOX_SETUP_ATTEMPTS) continue;
                    const record *rec = items[ir->item].rec;
                    char why[sizeof e->msg];
                    snprintf(why, sizeof why, "%s", e->msg);
                    gerr_at(e, rc, rec->file, rec->line, "code: test %zu: %s", r - ir->first, why);
                    k = n_per_item;
                    break;
                }
            }
        } else {
            for (size_t k = 0; k < n_per_item; k++) {
                const item_runs *ir = &per_item[k];
                size_t passed = 0;
                for (size_t r = ir->first; r < ir->first + ir->count; r++) {
                    bool ok = sandbox_exited_ok(&res[r]) && res[r].report_len == 2 * NONCE_BYTES &&
                              !memcmp(res[r].report, nonces[r], 2 * NONCE_BYTES);
                    c->runs++;
                    passed += ok;
                    if (ok) {
                        c->passed++;
                    } else {
                        c->failed++;
                        code_reasons_add(&c->reasons, &res[r], c->sb.lim.timeout);
                    }
                    if (res[r].timed_out) c->timeouts++;
                }
                out[ir->item] = (double)passed / (double)ir->count;
            }
        }
        free(res);
        free(in_len);
        free(in);
    }

done:
    for (size_t t = 0; t < cap_tests; t++) sb_free(&tests[t]);
    free(tests);
    for (size_t r = 0; r < cap_runs; r++) sb_free(&inputs[r]);
    free(inputs);
    free(nonces);
    free(per_item);
    sb_free(&code);
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
    code_reasons_to_json(&c->reasons, obj);
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
    /* A run that works: the program is empty, the test is `pass`. */
    static const char probe[] = "probe\n0\npass\n";
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
