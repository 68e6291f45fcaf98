/* The code reward's value protocol with a real python3: a test passes only
 * when the values the program computes make its asserts true, compared
 * outside the program's process. Checked: the forms of assert that are
 * carried (==, !=, is, in, truthiness, math.isclose, abs(a - b) < tol,
 * set(...), round, an expected value in a variable), Python's equality on
 * plain data (1 == 1.0, a list is not a tuple, a Counter is a dict), the
 * values that are refused (an object equal to everything, an int subclass
 * that is), an expected value out of the program's sight, forged reports,
 * the tests that are refused and how --stats counts them, and a value that
 * makes the check hang failing alone. */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "code_fixture.h"
#include "sandbox/sandbox.h"

static char tmp_root[256];

/* A completion and one test as JSON string contents (escaped for JSON). */
static double one(reward_fn *fn, const char *program, const char *test) {
    strbuf c = {0}, t = {0};
    sb_json_string(&c, program, strlen(program));
    sb_putc(&t, '[');
    sb_json_string(&t, test, strlen(test));
    sb_putc(&t, ']');
    double v = score1(fn, c.data, t.data);
    sb_free(&c);
    sb_free(&t);
    return v;
}

static void test_forms(reward_fn *fn) {
    TEST("== compares the reported value outside, with Python's equality on plain data");
    CHECK_NEAR(one(fn, "def add(a, b):\n    return a + b", "assert add(2, 3) == 5"), 1.0, 0);
    CHECK_NEAR(one(fn, "def add(a, b):\n    return a * b", "assert add(2, 3) == 5"), 0.0, 0);
    CHECK_NEAR(one(fn, "def f():\n    return 5.0", "assert f() == 5"), 1.0, 0);
    CHECK_NEAR(one(fn, "def f():\n    return [1, 2]", "assert f() == (1, 2)"), 0.0, 0);
    CHECK_NEAR(one(fn, "def f():\n    return 2 ** 100 + 1", "assert f() == 2 ** 100 + 1"), 1.0, 0);
    CHECK_NEAR(one(fn, "def f():\n    return -2 ** 100", "assert f() == -2 ** 100 + 1"), 0.0, 0);
    CHECK_NEAR(one(fn, "def f():\n    return {'a': [1, (2, None)], 3: {4.5}}", "assert f() == {3: {4.5}, 'a': [1, (2, None)]}"),
               1.0, 0);
    CHECK_NEAR(one(fn, "def f():\n    return b'\\x00\\xff', frozenset({1})", "assert f() == (b'\\x00\\xff', frozenset({1}))"),
               1.0, 0);
    CHECK_NEAR(one(fn, "def f():\n    return float('nan')", "assert f() == float('nan')"), 0.0, 0);

    TEST("a namedtuple is its tuple, a Counter or OrderedDict its dict");
    CHECK_NEAR(one(fn, "import collections\nP = collections.namedtuple('P', 'x y')\ndef f():\n    return P(1, 2)",
                   "assert f() == (1, 2)"),
               1.0, 0);
    CHECK_NEAR(one(fn, "import collections\ndef f(s):\n    return collections.Counter(s)", "assert f('aab') == {'a': 2, 'b': 1}"),
               1.0, 0);

    TEST("other forms: !=, is, in, truthiness, not, and, math.isclose, abs(a - b) < tol, round, set(), type()");
    const char *prog = "def f(x=0):\n    return [0.5000001, None, [1, 2], 3, [], x * 2][x] if x < 6 else (y for y in (5, 4))";
    const struct {
        const char *test;
        double want;
    } cases[] = {
        {"assert f(0) != 0.5", 1},
        {"assert f(1) is None", 1},
        {"assert 2 in f(2)", 1},
        {"assert 7 in f(2)", 0},
        {"assert f(3)", 1},
        {"assert f(4)", 0},
        {"assert not f(4) and f(3) == 3", 1},
        {"import math\nassert math.isclose(f(0), 0.5, rel_tol=1e-6)", 1},
        {"import math\nassert math.isclose(f(0), 0.5, rel_tol=1e-9)", 0},
        {"assert abs(f(0) - 0.5) < 1e-6", 1},
        {"assert round(f(0), 3) == 0.5", 1},
        {"assert set(f(6)) == set((4, 5))", 1}, /* set() of a generator: computed in the run */
        {"assert sorted(f(6)) == [4, 5]", 1},
        {"assert len(f(2)) == 2", 1},
        {"assert type(f(2)) == list and isinstance(f(3), int)", 1},
        {"assert type(f(2)) == tuple", 0},
        {"expected = [1, 2]\nassert f(2) == expected", 1},
        {"x = [3, 1, 2]\nassert f(2) + x == [1, 2] + x", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double got = one(fn, prog, cases[i].test);
        if (got != cases[i].want) printf("#   %s: %g, want %g\n", cases[i].test, got, cases[i].want);
        CHECK_NEAR(got, cases[i].want, 0);
    }

    TEST("statements of the test run in the program's run, in order (a class under test)");
    CHECK_NEAR(one(fn, "class Stack:\n    def __init__(self):\n        self.items = []\n"
                       "    def push(self, x):\n        self.items.append(x)\n    def pop(self):\n        return self.items.pop()",
                   "s = Stack()\ns.push(1)\ns.push(2)\nassert s.pop() == 2\nassert s.pop() == 1"),
               1.0, 0);
}

static void test_hacks(reward_fn *fn) {
    TEST("an object equal to everything is not plain data: 0");
    CHECK_NEAR(one(fn, "class A:\n    def __eq__(self, o):\n        return True\n    __hash__ = object.__hash__\n"
                       "def add(a, b):\n    return A()",
                   "assert add(2, 3) == 5"),
               0.0, 0);
    CHECK_NEAR(one(fn, "class I(int):\n    def __eq__(self, o):\n        return True\n    __hash__ = int.__hash__\n"
                       "def add(a, b):\n    return I(0)",
                   "assert add(2, 3) == 5"),
               0.0, 0);
    CHECK_NEAR(one(fn, "class D(dict):\n    def __eq__(self, o):\n        return True\ndef f():\n    return D()",
                   "assert f() == {'a': 1}"),
               0.0, 0); /* a dict subclass counts as what it holds */

    TEST("the expected value is not in the program's run");
    CHECK_NEAR(one(fn, "import sys\ndef add(a, b):\n    f = sys._getframe(1)\n"
                       "    while f and 'expected' not in f.f_globals:\n        f = f.f_back\n"
                       "    return f.f_globals['expected'] if f else None",
                   "expected = 5\nassert add(2, 3) == expected"),
               0.0, 0);
    CHECK_NEAR(one(fn, "import os\ndef add(a, b):\n    return os.pread(3, 100, 0)", "assert add(2, 3) == 5"), 0.0, 0);

    TEST("a report the program writes is data: verdicts, garbage and extra lines fail");
    CHECK_NEAR(one(fn, "import os\nos.write(4, b'true\\n')\nos._exit(0)", "assert add(2, 3) == 5"), 0.0, 0);
    CHECK_NEAR(one(fn, "import os\nos.write(4, b'pass\\n')\nos._exit(0)", "assert add(2, 3) == 5"), 0.0, 0);
    CHECK_NEAR(one(fn, "import os\nos.write(4, b'{\"set\": [[1]]}\\n')\nos._exit(0)", "assert add(2, 3) == 5"), 0.0, 0);
    CHECK_NEAR(one(fn, "import os\nos.write(4, b'5\\n')\ndef add(a, b):\n    return 5", "assert add(2, 3) == 5"), 0.0, 0);
    CHECK_NEAR(one(fn, "import os\nos.write(4, b'[' * 100000 + b'\\n')\nos._exit(0)", "assert add(2, 3) == 5"), 0.0, 0);
    CHECK_NEAR(one(fn, "import os\ndef add(a, b):\n    return 'x' * (1 << 20)", "assert len(add(2, 3)) > 0"), 1.0, 0);
    CHECK_NEAR(one(fn, "import os\ndef add(a, b):\n    return 'x' * (1 << 20)", "assert add(2, 3) != ''"), 0.0, 0);
}

static void test_refused(void) {
    TEST("tests the protocol cannot carry score 0 without a run, and --stats counts them");
    reward_opts p = params(10, 2);
    reward_fn fn;
    if (open_fn(&fn, &p)) return;
    const char *lines[] = {
        "{\"completion\":\"def f(x):\\n    return x + 1\",\"tests\":[\"assert f(1) == 2\", \"pass\", \"f(1)\", "
        "\"def check(c):\\n    assert c(1) == 2\\ncheck(f)\", \"assert False\", \"assert all(f(x) > 0 for x in range(3))\", "
        "\"assert f(\", \"assert f(2) == 3\", \"def expected(x):\\n    return x + 1\\nassert f(3) == expected(3)\", "
        "\"assert f(1) != f(2)\"]}",
        "{\"completion\":\"def f(x):\\n    return x + 1\",\"tests\":[\"assert f(1) == 2\"]}",
    };
    double out[2];
    gerr e;
    CHECK_EQ_INT(score(&fn, lines, 2, out, &e), 0);
    CHECK_NEAR(out[0], 2.0 / 10, 1e-15);
    CHECK_NEAR(out[1], 1.0, 0);
    cJSON *root = cJSON_CreateObject();
    fn.stats(fn.self, root);
    char *json = cJSON_PrintUnformatted(cJSON_GetObjectItem(root, "code"));
    printf("#   %s\n", json);
    CHECK(strstr(json, "\"runs\":3,\"passed\":3,\"failed\":0,") != NULL);
    CHECK(strstr(json, "\"refused\":8,\"refused_records\":1,") != NULL);
    CHECK(strstr(json, "{\"reason\":\"no top-level assert\",\"tests\":2}") != NULL);
    CHECK(strstr(json, "{\"reason\":\"an assert inside a block (only top-level asserts are checked)\",\"tests\":1}"));
    CHECK(strstr(json, "{\"reason\":\"no assert reads anything the program computes\",\"tests\":1}"));
    CHECK(strstr(json, "{\"reason\":\"a comparison inside what the program computes\",\"tests\":1}"));
    CHECK(strstr(json, "{\"reason\":\"no side of a comparison is outside what the program computes\",\"tests\":2}"));
    CHECK(strstr(json, "{\"reason\":\"the test does not parse (SyntaxError: '(' was never closed)\",\"tests\":1}"));
    free(json);
    cJSON_Delete(root);
    fn.close(fn.self);
}

static void test_check_hangs(void) {
    TEST("a value that makes the test's own expression hang fails alone; the others are checked");
    reward_opts p = params(0.25, 2);
    reward_fn fn;
    if (open_fn(&fn, &p)) return;
    const char *lines[] = {
        "{\"completion\":\"def f():\\n    return 10 ** 15\",\"tests\":[\"assert sum(range(0, f())) == 0\"]}",
        "{\"completion\":\"def f():\\n    return 3\",\"tests\":[\"assert sum(range(0, f())) == 3\"]}",
    };
    double out[2];
    gerr e;
    CHECK_EQ_INT(score(&fn, lines, 2, out, &e), 0);
    CHECK_NEAR(out[0], 0.0, 0);
    CHECK_NEAR(out[1], 1.0, 0);
    cJSON *root = cJSON_CreateObject();
    fn.stats(fn.self, root);
    char *json = cJSON_PrintUnformatted(cJSON_GetObjectItem(root, "code"));
    printf("#   %s\n", json);
    CHECK(strstr(json, "{\"reason\":\"the check did not finish: timed out after 3s\",\"runs\":1}") != NULL);
    free(json);
    cJSON_Delete(root);
    fn.close(fn.self);
}

int main(void) {
    snprintf(tmp_root, sizeof tmp_root, "/tmp/grpo-test-code-values-%d", (int)getpid());
    if (mkdir(tmp_root, 0755)) {
        perror(tmp_root);
        return 1;
    }
    setenv("TMPDIR", tmp_root, 1);
    reward_opts p = params(10, 2);
    reward_fn fn;
    TEST("open the code reward with " PYTHON);
    if (open_fn(&fn, &p)) return check_done();
    test_forms(&fn);
    test_hacks(&fn);
    fn.close(fn.self);
    test_refused();
    test_check_hangs();
    CHECK_EQ_INT(sandbox_remove_tree(tmp_root), 0);
    return check_done();
}
