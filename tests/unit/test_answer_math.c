/* The answer rules on MATH-style answers: the table of gold/completion
 * pairs with known truth (tests/fixtures/answer/math_pairs.tsv, also scored
 * by math-verify in tests/bats/reward_answer.bats), then the expression
 * parser's own rules, bounds and hostile input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "answer/match.h"
#include "answer/mexpr.h"

#define PAIRS "tests/fixtures/answer/math_pairs.tsv"
/* The floor the table must clear; docs/rewards.md quotes the measured rate. */
#define MIN_AGREEMENT 0.95

static bool scored_equal(const char *completion, const char *gold) {
    strbuf pred = {0};
    answer_source src = answer_extract(completion, strlen(completion), &pred);
    bool eq = src != ANSWER_FROM_NONE && answer_equal(pred.data, pred.len, gold, strlen(gold), 1e-6);
    sb_free(&pred);
    return eq;
}

static bool same(const char *pred, const char *gold) {
    return answer_equal(pred, strlen(pred), gold, strlen(gold), 1e-6);
}

static void test_table(void) {
    TEST("the MATH-style table: agreement with the truth, no hard negative called equal");
    FILE *f = fopen(PAIRS, "r");
    CHECK(f != NULL);
    if (!f) return;
    char line[4096];
    int rows = 0, agree = 0, hard = 0, hard_equal = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        line[strcspn(line, "\n")] = 0;
        char *gold = line, *completion = strchr(gold, '\t');
        char *truth = completion ? strchr(++completion, '\t') : NULL;
        char *kind = truth ? strchr(++truth, '\t') : NULL;
        CHECK(kind != NULL);
        if (!kind) break;
        completion[-1] = truth[-1] = *kind++ = 0;
        bool want = truth[0] == '1', got = scored_equal(completion, gold);
        rows++;
        if (got == want) agree++;
        else printf("#   disagrees: gold \"%s\" completion \"%s\": truth %d\n", gold, completion, want);
        if (!strcmp(kind, "hard")) {
            hard++;
            if (got) hard_equal++;
        }
    }
    CHECK(fclose(f) == 0);
    printf("#   %d rows, %d agree with the truth (%.1f%%), %d hard negatives, %d called equal\n", rows, agree,
           rows ? 100.0 * agree / rows : 0, hard, hard_equal);
    CHECK(rows >= 300 && hard >= 50);
    CHECK(hard_equal == 0);
    CHECK(agree >= MIN_AGREEMENT * rows);
}

static bool parses(const char *s) {
    mexpr *x = malloc(sizeof *x);
    bool ok = x && mexpr_parse(s, strlen(s), x);
    free(x);
    return ok;
}

static bool math_equal(const char *pred, const char *gold, double tol) {
    mexpr *p = malloc(sizeof *p), *g = malloc(sizeof *g);
    bool ok = p && g && mexpr_parse(pred, strlen(pred), p) && mexpr_parse(gold, strlen(gold), g) &&
              mexpr_equal(p, p->root, g, g->root, tol);
    free(p);
    free(g);
    return ok;
}

static void test_values(void) {
    TEST("exact rationals, irrationals within the tolerance");
    CHECK(math_equal("\\frac{1}{3}", "2/6", 0));
    CHECK(!math_equal("0.3333333333", "\\frac{1}{3}", 1e-6)); /* both rational: exact, whatever the tolerance */
    CHECK(math_equal("0.7071067811865476", "\\frac{\\sqrt{2}}{2}", 1e-6));
    CHECK(!math_equal("0.7071", "\\frac{\\sqrt{2}}{2}", 1e-6));
    CHECK(math_equal("0.7071", "\\frac{\\sqrt{2}}{2}", 1e-4));
    CHECK(math_equal("\\sqrt{12}", "2\\sqrt3", 0)); /* at least 1e-9 for irrationals computed two ways */
    CHECK(math_equal("\\sqrt[3]{-8}", "-2", 0));
    CHECK(math_equal("(2^{31})^2", "2^{62}", 0));
    CHECK(!math_equal("10^{400}", "10^{401}", 1e-6)); /* too large for a double is no infinity */
    CHECK(math_equal("-\\infty", "-inf", 0));
    CHECK(!math_equal("\\infty", "-\\infty", 0));

    TEST("a number against an expression: exact when both are rational");
    CHECK(!same("1000001", "10^6"));
    CHECK(same("1000000", "10^6"));
    CHECK(!same("1000001", "x = 10^6"));
    CHECK(!same("114858170488", "2^{10} \\cdot 112166181")); /* 114858169344 */
    CHECK(same("3.1415927", "\\pi")); /* a decimal against an irrational: the tolerance */

    TEST("variables: the same names on both sides, fixed-seed points");
    CHECK(math_equal("\\frac{x^2-1}{x-1}", "x+1", 1e-6));
    CHECK(!math_equal("x+y", "x+z", 1e-6));
    CHECK(!math_equal("x", "x+y-y", 1e-6)); /* the names differ, whatever the values */
    CHECK(!math_equal("x+0y", "x", 1e-6));
    CHECK(math_equal("\\theta_1 + 2", "2+\\theta_{1}", 1e-6));
    CHECK(!math_equal("x_1", "x_2", 1e-6));
    CHECK(math_equal("\\sqrt{x^2}", "x", 1e-6)); /* the points are positive: [0.5, 3.5) */

    TEST("what is no expression falls back to the text rules");
    static const char *const NOT_EXPR[] = {"x \\le 3", "\\pm 2", "3 < x", "a | b", "\\frac{1}", "(1, 2", "1, 2)",
                                           "\\begin{pmatrix} 1 & 2 \\\\ 3 \\end{pmatrix}", "x = 1 = 2", "", "$ $",
                                           "\\unknown{3}", "\\text{", "2^", "((((", "1 2 3 apples 4"};
    for (size_t i = 0; i < sizeof NOT_EXPR / sizeof NOT_EXPR[0]; i++)
        if (parses(NOT_EXPR[i])) {
            printf("#   parsed: \"%s\"\n", NOT_EXPR[i]);
            CHECK(0);
        }
    CHECK(same("x \\le 3", "x\\le3")); /* the folded text still matches */
}

static void test_bounds(void) {
    TEST("bounds: depth, length, nodes, variables; hostile input ends fast");
    char *s = malloc(200001);
    CHECK(s != NULL);
    if (!s) return;
    clock_t t0 = clock();
    memset(s, '(', 200000);
    s[200000] = 0;
    CHECK(!parses(s));
    memset(s, '-', 1000);
    strcpy(s + 1000, "1");
    CHECK(!parses(s)); /* 1000 nested signs: deeper than MEXPR_MAX_DEPTH */
    memset(s, 0, 200001);
    for (int i = 0; i < 20; i++) strcat(s, "\\frac{");
    strcat(s, "1");
    for (int i = 0; i < 20; i++) strcat(s, "}{2}");
    CHECK(parses(s)); /* 20 levels is within the bound */
    memset(s, 0, 200001);
    for (int i = 0; i < 50; i++) strcat(s, "\\sqrt{");
    strcat(s, "2");
    for (int i = 0; i < 50; i++) strcat(s, "}");
    CHECK(!parses(s));
    memset(s, 0, 200001);
    for (int i = 0; i < 400; i++) strcat(s, "1+");
    strcat(s, "1");
    CHECK(!parses(s)); /* 801 tokens: more than MEXPR_MAX_TOKENS */
    CHECK(parses("a+b+c+d+f+g+h+j"));
    CHECK(!parses("a+b+c+d+f+g+h+j+k")); /* nine variables */
    memset(s, '1', 3000);
    s[3000] = 0;
    CHECK(!parses(s)); /* longer than MEXPR_MAX_INPUT */
    CHECK(parses("123456789012345678901234567890")); /* digits beyond 64 bits: a double, not exact */
    /* not exact, so compared in doubles within 1e-9, as documented */
    CHECK(math_equal("123456789012345678901234567891", "123456789012345678901234567890", 0));
    /* NUL bytes inside a command's braces: no table lookup reads past a name (found by fuzz_answer_math) */
    static const char WITH_NUL[] = "\\begin{pmatrix\0\0}1\\end{pm\0x}";
    mexpr *x = malloc(sizeof *x);
    CHECK(x != NULL);
    if (x) CHECK(!mexpr_parse(WITH_NUL, sizeof WITH_NUL - 1, x));
    free(x);
    double seconds = (double)(clock() - t0) / CLOCKS_PER_SEC;
    printf("#   hostile inputs: %.3f s\n", seconds);
    CHECK(seconds < 2);
    free(s);
}

int main(void) {
    test_table();
    test_values();
    test_bounds();
    check_end_test();
    printf("1..%d\n", check_test_no);
    return check_failed_tests ? 1 : 0;
}
