/* The code reward with a real python3: which part of a completion runs, the
 * fraction of tests passed, the record's tests field, and adversarial
 * programs (endless loop, fork bomb, memory hog, writes outside, secrets in
 * the environment, the network, early exits) each scored 0 while the
 * chunk goes on and nothing is left behind. Every adversarial case has a
 * control beside it that passes, so a 0 means the sandbox stopped it, not
 * that the run never worked. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "code_fixture.h"
#include "proc_scan.h"
#include "reward/code_extract.h"
#include "reward/reward.h"
#include "sandbox/sandbox.h"

static char tmp_root[256];

/* A test that passes when the program runs to its end: the value of
 * __name__ in the program's namespace, reported and checked like any. */
#define RUN "\"assert __name__ == '__solution__'\""
#define RUNS "[" RUN "]"

/* ---- extraction ------------------------------------------------------------ */

static void extract_is(const char *text, const char *want, code_source want_source) {
    strbuf out = {0};
    code_source got = code_extract(text, strlen(text), &out);
    CHECK_EQ_STR(out.data ? out.data : "", want);
    CHECK_EQ_INT(got, want_source);
    sb_free(&out);
}

static void test_extract(void) {
    TEST("extract: the last python (or unlabelled) fenced block");
    extract_is("Here:\n```python\ndef f():\n    return 1\n```\nDone.", "def f():\n    return 1\n", CODE_FROM_FENCE);
    extract_is("```py\na = 1\n```\nbetter:\n```\na = 2\n```\n", "a = 2\n", CODE_FROM_FENCE);
    extract_is("```Python3\nx = 3\n```", "x = 3\n", CODE_FROM_FENCE);
    extract_is("```python\nfirst = 1\n```\n```bash\nls\n```\n", "first = 1\n", CODE_FROM_FENCE);
    extract_is("```python\r\nx = 1\r\n```\r\n", "x = 1\r\n", CODE_FROM_FENCE);

    TEST("extract: a fence in another language hides what it holds");
    extract_is("```markdown\n```python\nno = 1\n```\n", "```markdown\n```python\nno = 1\n```\n", CODE_FROM_WHOLE);
    extract_is("````python\nx = '```'\n```\ny = 2\n````\n", "x = '```'\n```\ny = 2\n", CODE_FROM_FENCE);

    TEST("extract: a block cut off by the length limit runs to the end");
    extract_is("```python\ndef f(x):\n    return x", "def f(x):\n    return x", CODE_FROM_FENCE);

    TEST("extract: an indented fence (in a list) is dedented");
    extract_is("1. Code:\n   ```python\n   def f():\n       return 1\n   ```\n", "def f():\n    return 1\n",
               CODE_FROM_FENCE);

    TEST("extract: inline ```code``` on one line is not a fence");
    extract_is("use ```x = 1``` here", "use ```x = 1``` here", CODE_FROM_WHOLE);

    TEST("extract: else the last <answer> that looks like code, else everything");
    extract_is("<think>hmm</think><answer>\ndef f():\n    return 2\n</answer>", "\ndef f():\n    return 2\n",
               CODE_FROM_ANSWER);
    extract_is("<answer>import math</answer> <answer>from x import y</answer>", "from x import y", CODE_FROM_ANSWER);
    extract_is("<answer>The function returns 2.</answer>", "<answer>The function returns 2.</answer>",
               CODE_FROM_WHOLE);
    extract_is("def f():\n    return 3\n", "def f():\n    return 3\n", CODE_FROM_WHOLE);
    extract_is("", "", CODE_FROM_WHOLE);
}

/* ---- scoring ---------------------------------------------------------------- */

static void test_scores(reward_fn *fn) {
    TEST("correct code scores 1, half right 0.5, a syntax error 0");
    const char *tests = "[\"assert f(1) == 2\", \"assert f(2) == 3\"]";
    CHECK_NEAR(score1(fn, "\"```python\\ndef f(x):\\n    return x + 1\\n```\"", tests), 1.0, 0);
    CHECK_NEAR(score1(fn, "\"```python\\ndef f(x):\\n    return 2\\n```\"", tests), 0.5, 0);
    CHECK_NEAR(score1(fn, "\"```python\\ndef f(x) return x + 1\\n```\"", tests), 0.0, 0);
    CHECK_NEAR(score1(fn, "\"def f(x):\\n    return x + 1\"", "[\"assert f(1) == 2\", \"assert f(1) == 3\", "
                                                            "\"assert f(0) == 1\", \"assert f(9) == 0\"]"),
               0.5, 0);

    TEST("tests run after the program, in one namespace, each on its own");
    CHECK_NEAR(score1(fn, "\"import math\\nstate = []\\ndef add(x):\\n    state.append(x)\\n    return len(state)\"",
                      "[\"assert add(1) == 1 and math.pi > 3\", \"assert add(5) == 1\"]"),
               1.0, 0);

    TEST("the program's __main__ block stays out (HumanEval's convention)");
    CHECK_NEAR(score1(fn, "\"def f():\\n    return 1\\nif __name__ == '__main__':\\n    raise SystemExit(1)\"",
                      "[\"assert f() == 1\"]"),
               1.0, 0);

    TEST("an early exit or a forged report is not a pass");
    const char *pass = RUNS;
    CHECK_NEAR(score1(fn, "\"import os\\nos._exit(0)\"", pass), 0.0, 0);
    CHECK_NEAR(score1(fn, "\"import sys\\nsys.exit(0)\"", pass), 0.0, 0);
    CHECK_NEAR(score1(fn, "\"import os\\nos.write(4, b'0123456789abcdef0123456789abcdef')\\nos._exit(0)\"", pass),
               0.0, 0);
    CHECK_NEAR(score1(fn, "\"import os, signal\\nos.kill(os.getpid(), signal.SIGKILL)\"", pass), 0.0, 0);
    CHECK_NEAR(score1(fn, "\"x = 1\\nimport atexit, os\\natexit.register(lambda: os._exit(0))\"", "[\"assert x == 2\"]"),
               0.0, 0);
    CHECK_NEAR(score1(fn, "\"x = 1\"", pass), 1.0, 0); /* control */

    TEST("string hashing is fixed (PYTHONHASHSEED=0), so set order does not vary");
    FILE *p = popen("PYTHONHASHSEED=0 " PYTHON " -c 'print(hash(\"grpo\"))'", "r");
    char h[64] = "";
    CHECK(p && fgets(h, sizeof h, p));
    if (p) pclose(p);
    h[strcspn(h, "\n")] = 0;
    char t[128];
    snprintf(t, sizeof t, "[\"assert hash('grpo') == %s\"]", h);
    CHECK_NEAR(score1(fn, "\"\"", t), 1.0, 0);
}

static void test_tests_field(reward_fn *fn) {
    TEST("no tests, null tests or an empty list: the function does not apply");
    const char *lines[] = {
        "{\"completion\":\"x = 1\"}",
        "{\"completion\":\"x = 1\",\"tests\":null}",
        "{\"completion\":\"x = 1\",\"tests\":[]}",
        "{\"tests\":" RUNS "}", /* no completion: the empty program runs */
    };
    double out[4];
    gerr e;
    CHECK_EQ_INT(score(fn, lines, 4, out, &e), 0);
    CHECK(reward_is_null(out[0]) && reward_is_null(out[1]) && reward_is_null(out[2]));
    CHECK_NEAR(out[3], 1.0, 0);

    TEST("tests of the wrong type name the file, line and field");
    const char *bad[] = {"{\"completion\":\"\",\"tests\":[\"pass\"]}", "{\"completion\":\"\",\"tests\":\"assert 1\"}"};
    CHECK_EQ_INT(score(fn, bad, 2, out, &e), EX_DATAERR);
    CHECK_EQ_STR(e.msg, "in.jsonl:2: field \"tests\": expected an array of strings, got string");
    const char *bad_el[] = {"{\"completion\":\"\",\"tests\":[\"pass\", 3]}"};
    CHECK_EQ_INT(score(fn, bad_el, 1, out, &e), EX_DATAERR);
    CHECK_EQ_STR(e.msg, "in.jsonl:1: field \"tests\": element 1: expected a string, got number");

    TEST("the tests field is a parameter; escapes in tests are decoded");
    reward_opts p = params(5, 1);
    p.code_tests_field = "checks";
    reward_fn other;
    if (open_fn(&other, &p)) return;
    const char *l[] = {"{\"completion\":\"s = 'a\\\\tb'\",\"checks\":[\"assert s == 'a\\\\tb' and len(s) == 3\", "
                       "\"assert s + '\\u00e9' == 'a\\\\tb\\\\xe9'\"],\"tests\":[\"assert s == 1\"]}"};
    CHECK_EQ_INT(score(&other, l, 1, out, &e), 0);
    CHECK_NEAR(out[0], 1.0, 0);
    other.close(other.self);
}

static void test_containment(double timeout) {
    reward_opts p = params(timeout, 1);
    reward_fn fn;
    TEST("open with a short timeout");
    if (open_fn(&fn, &p)) return;
    char marker[64], buf[2048];
    snprintf(marker, sizeof marker, "grpo-code-marker-%d", (int)getpid());

    TEST("an endless loop scores 0 at the deadline, and the chunk goes on");
    const char *lines[] = {
        "{\"completion\":\"while True:\\n    pass\",\"tests\":[" RUN ", " RUN "]}",
        "{\"completion\":\"def f():\\n    return 7\",\"tests\":[\"assert f() == 7\"]}",
    };
    double out[2];
    gerr e;
    double t0 = now_seconds();
    CHECK_EQ_INT(score(&fn, lines, 2, out, &e), 0);
    double took = now_seconds() - t0;
    CHECK_NEAR(out[0], 0.0, 0);
    CHECK_NEAR(out[1], 1.0, 0);
    CHECK(took < 2 * timeout + 2.0); /* two runs of the loop, one after the other (-j 1) */
    printf("#   two looping runs with a %.1fs deadline and one more run: %.2fs\n", timeout, took);

    TEST("a fork bomb scores 0 and leaves no process behind");
    t0 = now_seconds();
    CHECK_NEAR(score1(&fn, "\"import os\\nwhile True:\\n    try:\\n        os.fork()\\n    except OSError:\\n        pass\"",
                      RUNS),
               0.0, 0);
    CHECK(now_seconds() - t0 < timeout + 1.5);
    CHECK_EQ_INT(proc_count("_grpo_harness", 0), 0);

    TEST("a process that leaves its session scores nothing and does not outlive the run");
    snprintf(buf, sizeof buf,
             "\"import subprocess\\nsubprocess.Popen(['/bin/sh', '-c', 'sleep 1000', '%s'], start_new_session=True)\"",
             marker);
    CHECK_NEAR(score1(&fn, buf, RUNS), 1.0, 0); /* the test itself passes... */
    CHECK_EQ_INT(proc_count(marker, 0), 0);           /* ...and its stray process is gone */

    TEST("a memory hog scores 0; a modest allocation works");
    t0 = now_seconds();
    CHECK_NEAR(score1(&fn, "\"x = bytearray(10 * 1024 ** 3)\"", RUNS), 0.0, 0);
    /* address space taken without touching it: the limit, not the clock, stops it */
    CHECK_NEAR(score1(&fn, "\"import mmap\\nmaps = []\\nwhile True:\\n    maps.append(mmap.mmap(-1, 100 * 1024 ** 2))\"",
                      RUNS),
               0.0, 0);
    CHECK(now_seconds() - t0 < 2 * timeout + 1.5);
    CHECK_NEAR(score1(&fn, "\"x = bytearray(200 * 1024 ** 2)\"", "[\"assert len(x) == 200 * 1024 ** 2\"]"), 1.0, 0);

    TEST("writes outside the run's directory fail and leave nothing; inside works");
    char outside[300], own_dir[300], own_file[400];
    snprintf(outside, sizeof outside, "/tmp/grpo-code-escape-%d", (int)getpid());
    snprintf(own_dir, sizeof own_dir, "%s/open-dir", tmp_root);
    snprintf(own_file, sizeof own_file, "%s/escaped", own_dir);
    CHECK(mkdir(own_dir, 0777) == 0);
    chmod(own_dir, 0777);
    snprintf(buf, sizeof buf, "[\"assert open('%s', 'w').write('x') == 1\", \"assert open('%s', 'w').write('x') == 1\"]",
             outside, own_file);
    CHECK_NEAR(score1(&fn, "\"\"", buf), 0.0, 0);
    CHECK(!path_exists(outside));
    CHECK(!path_exists(own_file));
    CHECK_NEAR(score1(&fn, "\"open('here.txt', 'w').write('x')\"", "[\"assert open('here.txt').read() == 'x'\"]"), 1.0,
               0);
    rmdir(own_dir);

    TEST("a secret in grpo-reward's environment is not in the program's");
    setenv("GRPO_CODE_SECRET", "hunter2-code", 1);
    CHECK_NEAR(score1(&fn, "\"import os\"", "[\"assert os.environ.get('GRPO_CODE_SECRET') == 'hunter2-code'\", "
                                            "\"assert 'hunter2' in open('/proc/1/environ').read()\"]"),
               0.0, 0);
    CHECK_NEAR(score1(&fn, "\"import os\"", "[\"assert len({os.environ['HOME'], os.getcwd(), os.environ['TMPDIR']}) == 1\"]"),
               1.0, 0);
    unsetenv("GRPO_CODE_SECRET");

    TEST("no network: a connection to a socket listening on 127.0.0.1 fails");
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof addr;
    CHECK(ls >= 0 && bind(ls, (struct sockaddr *)&addr, sizeof addr) == 0 && listen(ls, 4) == 0 &&
          getsockname(ls, (struct sockaddr *)&addr, &alen) == 0);
    snprintf(buf, sizeof buf, "[\"assert socket.create_connection(('127.0.0.1', %d), timeout=0.5).close() is None\"]",
             ntohs(addr.sin_port));
    CHECK_NEAR(score1(&fn, "\"import socket\"", buf), 0.0, 0);
    CHECK(accept(ls, NULL, NULL) < 0 && errno == EAGAIN); /* nothing ever connected */
    /* the seccomp filter refuses the AF_INET socket itself; AF_UNIX stays (the control) */
    CHECK_NEAR(score1(&fn, "\"import socket\"", "[\"assert socket.socket(socket.AF_UNIX).close() is None\"]"), 1.0, 0);
    close(ls);

    TEST("stats count runs, passes, failures and timeouts");
    cJSON *root = cJSON_CreateObject();
    fn.stats(fn.self, root);
    cJSON *o = cJSON_GetObjectItem(root, "code");
    double runs = cJSON_GetObjectItem(o, "runs")->valuedouble, passed = cJSON_GetObjectItem(o, "passed")->valuedouble;
    double failed = cJSON_GetObjectItem(o, "failed")->valuedouble;
    CHECK_EQ_INT(runs, 16);
    CHECK_EQ_INT(passed, 6);
    CHECK_EQ_INT(failed, 10);
    CHECK_EQ_INT(cJSON_GetObjectItem(o, "timeouts")->valuedouble, 3);
    CHECK_EQ_INT(cJSON_GetObjectItem(o, "setup_failures")->valuedouble, 0);
    CHECK_EQ_INT(cJSON_GetObjectItem(o, "records")->valuedouble, 13);
    cJSON_Delete(root);
    fn.close(fn.self);
}

static void test_jobs(void) {
    TEST("-j: the same rewards whatever the number of sandboxes at once");
    const char *lines[] = {
        "{\"completion\":\"import time\\ntime.sleep(0.3)\\ndef f(): return 1\",\"tests\":[\"assert f() == 1\", \"assert f() == 2\"]}",
        "{\"completion\":\"def f(): return 2\",\"tests\":[\"assert f() == 2\"]}",
        "{\"completion\":\"while 1: pass\",\"tests\":" RUNS "}",
        "{\"completion\":\"x = 1\"}",
        "{\"completion\":\"def f(): return 3\",\"tests\":[\"assert f() == 3\", \"assert f() == 3\", \"assert 0\"]}",
        "{\"completion\":\"import os\\nos._exit(0)\",\"tests\":" RUNS "}",
    };
    enum { N = sizeof lines / sizeof lines[0] };
    double want[N] = {0.5, 1, 0, NAN, 2.0 / 3, 0};
    double got[2][N];
    long long jobs[2] = {1, 4};
    for (int k = 0; k < 2; k++) {
        reward_opts p = params(1.0, jobs[k]);
        reward_fn fn;
        if (open_fn(&fn, &p)) return;
        gerr e;
        CHECK_EQ_INT(score(&fn, lines, N, got[k], &e), 0);
        fn.close(fn.self);
    }
    for (size_t i = 0; i < N; i++) {
        CHECK(!memcmp(&got[0][i], &got[1][i], sizeof(double)));
        if (isnan(want[i])) CHECK(reward_is_null(got[0][i]));
        else CHECK_NEAR(got[0][i], want[i], 1e-15);
    }
}

static void test_open_errors(void) {
    TEST("open: a missing interpreter and bad limits");
    reward_opts p = params(1, 1);
    reward_fn fn;
    gerr e = {0};
    p.code_python = "grpo-no-such-python";
    CHECK_EQ_INT(reward_open_code(&fn, &p, &e), EX_UNAVAILABLE);
    CHECK(strstr(e.msg, "code: grpo-no-such-python: not found on PATH") == e.msg);
    p = params(0, 1);
    CHECK_EQ_INT(reward_open_code(&fn, &p, &e), EX_USAGE);
    CHECK(strstr(e.msg, "--code-timeout") != NULL);
    p = params(1, 0);
    CHECK_EQ_INT(reward_open_code(&fn, &p, &e), EX_USAGE);
    p = params(1, 1);
    p.code_memory_mb = 0;
    CHECK_EQ_INT(reward_open_code(&fn, &p, &e), EX_USAGE);
    p = params(1, 1);
    p.code_python = "/bin/false";
    CHECK_EQ_INT(reward_open_code(&fn, &p, &e), EX_UNAVAILABLE);
    CHECK(strstr(e.msg, "does not work in the sandbox") != NULL);
}

int main(void) {
    snprintf(tmp_root, sizeof tmp_root, "/tmp/grpo-test-code-%d", (int)getpid());
    if (mkdir(tmp_root, 0755)) {
        perror(tmp_root);
        return 1;
    }
    setenv("TMPDIR", tmp_root, 1);
    test_extract();
    reward_opts p = params(10, 2);
    reward_fn fn;
    TEST("open the code reward with " PYTHON);
    if (open_fn(&fn, &p)) return check_done();
    test_scores(&fn);
    test_tests_field(&fn);
    fn.close(fn.self);
    test_containment(1.0);
    test_jobs();
    test_open_errors();
    TEST("no run directory is left");
    CHECK_EQ_INT(dir_count(tmp_root, "grpo-sandbox-"), 0);
    CHECK_EQ_INT(sandbox_remove_tree(tmp_root), 0);
    return check_done();
}
