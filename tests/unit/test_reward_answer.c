/* The `answer` reward's string work: extraction precedence, every
 * normalisation with answers that must match and answers that must not,
 * and the countdown parser on good, wrong, malformed and hostile input. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "answer/match.h"
#include "reward/countdown_expr.h"

static bool eq_tol(const char *pred, const char *gold, double tol) {
    return answer_equal(pred, strlen(pred), gold, strlen(gold), tol);
}

static bool eq(const char *pred, const char *gold) { return eq_tol(pred, gold, 1e-6); }

typedef struct {
    const char *pred, *gold;
    bool match;
} pair;

/* Runs a table; prints the failing rows. */
static void check_pairs(const pair *t, size_t n) {
    for (size_t i = 0; i < n; i++) {
        bool got = eq(t[i].pred, t[i].gold);
        if (got != t[i].match) {
            printf("#   pred \"%s\" gold \"%s\": expected %s\n", t[i].pred, t[i].gold, t[i].match ? "match" : "no match");
            CHECK(got == t[i].match);
        }
    }
}

static void extract(const char *s, answer_source want_src, const char *want) {
    strbuf out = {0};
    answer_source src = answer_extract(s, strlen(s), &out);
    if (src != want_src || strcmp(out.data ? out.data : "", want)) {
        printf("#   extract \"%s\": got %s \"%s\", want %s \"%s\"\n", s, answer_source_name(src), out.data,
               answer_source_name(want_src), want);
        CHECK(0);
    }
    sb_free(&out);
}

static void test_extraction(void) {
    TEST("extraction: each form alone");
    extract("<think>2+2</think><answer> 4 </answer>", ANSWER_FROM_TAG, "4");
    extract("so the result is \\boxed{\\frac{1}{2}}.", ANSWER_FROM_BOXED, "\\frac{1}{2}");
    extract("nested \\boxed{\\{1, {2}\\}} ok", ANSWER_FROM_BOXED, "\\{1, {2}\\}");
    extract("She pays 3 + 4 = 7.\n#### 7\n", ANSWER_FROM_HASHES, "7");
    extract("#### 1,234\nthat is all", ANSWER_FROM_HASHES, "1234");
    extract("12 apples and then 3.5 pears", ANSWER_FROM_NUMBER, "3.5");
    extract("it went from 10 to -4 degrees", ANSWER_FROM_NUMBER, "-4");
    extract("pages 3-5", ANSWER_FROM_NUMBER, "5");
    extract("a total of 1,234,567 people", ANSWER_FROM_NUMBER, "1,234,567");
    extract("no digits here", ANSWER_FROM_NONE, "");
    extract("", ANSWER_FROM_NONE, "");

    TEST("extraction: precedence tag > boxed > #### > last number");
    extract("\\boxed{5} then <answer>7</answer> and 9", ANSWER_FROM_TAG, "7");
    extract("<answer>7</answer>\n#### 9", ANSWER_FROM_TAG, "7");
    extract("#### 4 and later \\boxed{3} and 8", ANSWER_FROM_BOXED, "3");
    extract("#### 4\nbut also 8", ANSWER_FROM_HASHES, "4");
    /* the last pair wins, and a \boxed inside the tag is taken */
    extract("<answer>1</answer> no, <answer>2</answer>", ANSWER_FROM_TAG, "2");
    extract("<answer>the answer is \\boxed{12}</answer>", ANSWER_FROM_TAG, "12");
    /* an unclosed last tag: the last closed pair counts */
    extract("<answer>1</answer> then <answer>2", ANSWER_FROM_TAG, "1");
    /* no closed pair at all: fall back */
    extract("<answer>2 and 5", ANSWER_FROM_NUMBER, "5");
    /* an empty pair is an (empty) answer, not a fallback */
    extract("<answer></answer> 5", ANSWER_FROM_TAG, "");
    /* an unclosed \boxed{ is skipped */
    extract("\\boxed{3 and then 4", ANSWER_FROM_NUMBER, "4");

    TEST("extraction: a fraction, power or \\frac at the end is one answer");
    extract("Out of 6, 5 are good, so the probability is 5/6.", ANSWER_FROM_NUMBER, "5/6");
    extract("so the slope is -3 / 4", ANSWER_FROM_NUMBER, "-3 / 4");
    extract("There are 2^10 subsets.", ANSWER_FROM_NUMBER, "2^10");
    extract("the answer is $\\frac{1}{2}$.", ANSWER_FROM_NUMBER, "\\frac{1}{2}");
    extract("it is $-\\dfrac{3}{4}$", ANSWER_FROM_NUMBER, "-\\dfrac{3}{4}");
    extract("the side is $2\\sqrt{3}$", ANSWER_FROM_NUMBER, "2\\sqrt{3}");
    extract("\\frac{1}{2} of 10 is 5", ANSWER_FROM_NUMBER, "5");
    extract("12/5 = 2.4", ANSWER_FROM_NUMBER, "2.4");
    extract("x/2 gives 3", ANSWER_FROM_NUMBER, "3");

    TEST("extraction: a number in scientific notation is one number");
    extract("the answer is 1e5", ANSWER_FROM_NUMBER, "1e5");
    extract("so k = 1.5e-3.", ANSWER_FROM_NUMBER, "1.5e-3");
    extract("about 2E+10 stars", ANSWER_FROM_NUMBER, "2E+10");
    extract("Avogadro: 6.02 \xc3\x97 10^23 per mole", ANSWER_FROM_NUMBER, "6.02 \xc3\x97 10^23");
    extract("it is $6.02 \\times 10^{23}$", ANSWER_FROM_NUMBER, "6.02 \\times 10^{23}");
    extract("n = 3 \\cdot 10^{-4}", ANSWER_FROM_NUMBER, "3 \\cdot 10^{-4}");
    extract("or 5*10^3", ANSWER_FROM_NUMBER, "5*10^3");
    extract("or 6.02x10^23", ANSWER_FROM_NUMBER, "6.02x10^23");
    /* an e that starts no exponent stays prose */
    extract("the answer is 5e", ANSWER_FROM_NUMBER, "5");
    extract("the answer is 5e.", ANSWER_FROM_NUMBER, "5");
    extract("we need 3 eggs", ANSWER_FROM_NUMBER, "3");
    extract("it is 2e-", ANSWER_FROM_NUMBER, "2");
    extract("10each and 4", ANSWER_FROM_NUMBER, "4");
    extract("the answer is 7 e5", ANSWER_FROM_NUMBER, "5");
    /* an exponent glued to letters, and a number inside a word, are no exponent form */
    extract("hash a3f1e52", ANSWER_FROM_NUMBER, "52");
    extract("2e3x", ANSWER_FROM_NUMBER, "3");
    /* a power of ten alone is still a power */
    extract("There are 10^6 of them", ANSWER_FROM_NUMBER, "10^6");
    /* read as the number written */
    CHECK(eq("1e5", "100000"));
    CHECK(!eq("1e5", "5"));
    CHECK(eq("1.5e-3", "0.0015"));
    CHECK(eq("2E+10", "20000000000"));
    CHECK(eq("6.02 \xc3\x97 10^23", "6.02e23"));
    CHECK(eq("6.02x10^23", "6.02e23"));
    CHECK(eq("6.02 X 10^{23}", "6.02e23"));
    CHECK(!eq("6.02x10^23", "6.02"));
    extract("it fell to -2.5e-4 m", ANSWER_FROM_NUMBER, "-2.5e-4");
    /* an x that is no multiplication sign stays a variable */
    CHECK(!eq("2x + 10^3", "2000"));
    CHECK(!eq("5x", "5"));
    CHECK(!eq("3 x", "3"));
    CHECK(eq("x = 4", "4"));
}

static void test_normalisation(void) {
    TEST("numbers: plain, trailing zeros, leading +, sign");
    static const pair plain[] = {
        {"42", "42", true},      {"42.0", "42", true},    {"42.000", "42.00", true}, {"+42", "42", true},
        {"0.50", ".5", true},    {"5.", "5", true},       {"-3", "-3", true},         {" 7 ", "7", true},
        {"12", "1.2", false},    {"-3", "3", false},      {"3", "-3", false},         {"+5", "-5", false},
        {"5.00", "500", false},  {"42", "420", false},    {"0.5", "5", false},        {"0", "-0", true},
    };
    check_pairs(plain, sizeof plain / sizeof plain[0]);

    TEST("numbers: thousands separators");
    static const pair sep[] = {
        {"1,234", "1234", true},       {"1,234,567", "1234567", true}, {"1,234.50", "1234.5", true},
        {"1{,}234", "1234", true},     {"1\\,234", "1234", true},      {"1,234", "1.234", false},
        {"1,23", "123", false},        {"12,34", "1234", false},       {"1234,567", "1234567", false},
        {"1,2345", "12345", false},
    };
    check_pairs(sep, sizeof sep / sizeof sep[0]);

    TEST("numbers: currency and percent");
    static const pair cur[] = {
        {"$18", "18", true},        {"\\$18", "18", true},     {"$1,250", "1250", true}, {"-$5", "-5", true},
        {"$-5", "-5", true},        {"\xe2\x82\xac" "12", "12", true}, {"12\xe2\x82\xac", "12", true},
        {"\xc2\xa3" "3.50", "3.5", true}, {"100%", "100", true}, {"50\\%", "50", true},  {"50 percent", "50", true},
        {"100%", "1000", false},    {"50%", "0.5", false},     {"$18", "81", false},     {"$5", "55", false},
    };
    check_pairs(cur, sizeof cur / sizeof cur[0]);

    TEST("numbers: unit words");
    static const pair unit[] = {
        {"18 dollars", "18", true},     {"5 cm", "5", true},         {"12 apples", "12", true},
        {"10kg", "10", true},           {"3 sq. ft.", "3", true},    {"60 km/h", "60", true},
        {"4 cm^2", "4", true},          {"5\\text{ cm}", "5", true}, {"2 million", "2000000", true},
        {"3 thousand dollars", "3000", true}, {"18", "18 dollars", true},
        {"5 apples", "50", false},      {"2 million", "2", false},   {"3i", "3", false},
        {"2 pi", "2", false},           {"5x", "5", false},          {"5 and 6", "5", false},
        {"5 cm", "6", false},
    };
    check_pairs(unit, sizeof unit / sizeof unit[0]);

    TEST("numbers: a/b and \\frac, \\dfrac, \\tfrac");
    static const pair frac[] = {
        {"1/2", "0.5", true},          {"\\frac{1}{2}", "1/2", true},  {"\\dfrac{3}{4}", "0.75", true},
        {"\\tfrac{3}{4}", "3/4", true},  {"\\frac12", "0.5", true},     {"-\\frac{1}{2}", "-0.5", true},
        {"\\frac{-1}{2}", "-1/2", true}, {"6/4", "3/2", true},          {"1 / 3", "0.3333333", true},
        {"1/2", "2/1", false},         {"\\frac{1}{2}", "\\frac{2}{1}", false}, {"1/2", "12", false},
        {"1/3", "0.333", false},       {"-1/2", "1/2", false},        {"1/0", "1/0", true}, /* text on both sides */
        {"1/0", "0", false},
    };
    check_pairs(frac, sizeof frac / sizeof frac[0]);

    TEST("numbers: LaTeX wrappers");
    static const pair tex[] = {
        {"$42$", "42", true},            {"\\(42\\)", "42", true},       {"\\[42\\]", "42", true},
        {"\\text{42}", "42", true},      {"\\mathrm{42}", "42", true},   {"\\boxed{42}", "42", true},
        {"\\left( 3 \\right)", "(3)", true}, {"90^\\circ", "90", true},    {"90^{\\circ}", "90", true},
        {"90\xc2\xb0", "90", true},      {"\\textbf{\\text{7}}", "7", true}, {"\xe2\x88\x92" "4", "-4", true},
        {"$42$", "24", false},           {"\\text{42}", "4.2", false},   {"90^\\circ", "9", false},
    };
    check_pairs(tex, sizeof tex / sizeof tex[0]);

    TEST("numbers: scientific notation");
    static const pair sci[] = {
        {"1e3", "1000", true},            {"1.5E+3", "1500", true},          {"2.5e-2", "0.025", true},
        {"1.5 \\times 10^{3}", "1500", true}, {"1.5\\cdot10^3", "1500", true}, {"3*10^2", "300", true},
        {"1.5\xc3\x97" "10^3", "1500", true}, {"1e3", "13", false},           {"1e3", "1e4", false},
        {"1.5 \\times 10^{3}", "15000", false}, {"1e400", "1e400", true}, /* not finite: compared as text */
        {"1e400", "1e401", false},
    };
    check_pairs(sci, sizeof sci / sizeof sci[0]);

    TEST("numbers: name = value");
    static const pair misc[] = {
        {"x = 5", "5", true}, {"x=5", "x = 5", true}, {"y = 5", "6", false}, {"1000002", "1000000", false},
    };
    check_pairs(misc, sizeof misc / sizeof misc[0]);

    TEST("numbers: integers and exact rationals compare exactly, whatever their size");
    static const pair exact[] = {
        {"1000001", "1000000", false},
        {"114858170488", "114858169488", false}, /* grpo-prep --task arith --digits 6 */
        {"12345678901234567891", "12345678901234567890", false},
        {"12,345,678,901,234,567,890", "12345678901234567890", true},
        {"1000000.5", "1000000", false},
        {"3.0000001", "3", false},
        {"3.001", "3", false},
        {"10000001/10", "1000000.1", true},
        {"10000001/10", "1000000", false},
        {"2.5 million", "2500000", true},
        {"1.5e3", "1500", true},
        {"1e-400", "0", false},
        {"0.1", "1/10", true},
        {"-0.0", "0", true},
    };
    check_pairs(exact, sizeof exact / sizeof exact[0]);

    TEST("numbers: a decimal may be a rounding, within --answer-tol and half its last digit");
    static const pair rounded[] = {
        {"0.3333333", "1/3", true},  {"1/3", "0.333333", true},   {"2/3", "0.6666667", true},
        {"0.333", "1/3", false},     {"0.5", "0.54", false},      {"0.54", "0.5", false},
        {"0.3333334", "1/3", false}, /* beyond half its last digit */
    };
    check_pairs(rounded, sizeof rounded / sizeof rounded[0]);
    CHECK(eq_tol("3.14", "3.14159", 0.01));
    CHECK(eq_tol("3.14159", "3.14", 0.01));
    CHECK(!eq_tol("3.13", "3.14159", 0.01)); /* within 1%, not a rounding of it */
    CHECK(!eq_tol("101", "100", 0.05));     /* integers: exact, whatever the tolerance */

    TEST("text answers: case, white space and wrappers folded");
    static const pair text[] = {
        {"(1, 2)", "(1,2)", true},            {"\\text{(B)}", "(B)", true},     {"Yes", "yes", true},
        {"\\left( 1, 2 \\right)", "(1,2)", true}, {"\\dfrac{\\pi}{2}", "\\frac{\\pi}{2}", true},
        {"\\sqrt{2}.", "\\sqrt{2}", true},    {"{x+1}", "x+1", true},          {"B", "(B)", true},
        {"(1,2)", "(2,1)", false},            {"no", "yes", false},            {"", "5", false},
        {"x+1", "x-1", false},           {"B", "(C)", false},
    };
    check_pairs(text, sizeof text / sizeof text[0]);

    TEST("answer_parse_number on the cleaned text");
    double v = 0;
    CHECK(answer_parse_number("-1,234.5 dollars", 16, &v));
    CHECK_NEAR(v, -1234.5, 0);
    CHECK(!answer_parse_number("1,2,3", 5, &v));
    CHECK(!answer_parse_number("", 0, &v));
    CHECK(!answer_parse_number("abc", 3, &v));
    CHECK(!answer_parse_number("5 6", 3, &v));
    /* a mantissa longer than the parser keeps is no number */
    char big[600];
    memset(big, '9', sizeof big);
    CHECK(!answer_parse_number(big, sizeof big, &v));
}

static countdown_result cd(const char *expr, const long long *nums, size_t n, long long target) {
    return countdown_check(expr, strlen(expr), nums, n, target);
}

static void test_countdown(void) {
    static const long long N[] = {25, 3, 7, 50};
    TEST("countdown: correct equations");
    CHECK_EQ_INT(cd("(25 - 3) * 7 + 50", N, 4, 204), COUNTDOWN_OK);
    CHECK_EQ_INT(cd("50 + 7 * (25 - 3)", N, 4, 204), COUNTDOWN_OK);
    CHECK_EQ_INT(cd("(25-3)*7+50", N, 4, 204), COUNTDOWN_OK);
    CHECK_EQ_INT(cd("  ((25 - 3) * 7) + 50 = 204 ", N, 4, 204), COUNTDOWN_OK);
    CHECK_EQ_INT(cd("(25 - 3)\n* 7 + 50", N, 4, 204), COUNTDOWN_OK);

    TEST("countdown: wrong value, and a tail that is not the target");
    CHECK_EQ_INT(cd("(25 - 3) * 7 - 50", N, 4, 204), COUNTDOWN_WRONG_VALUE);
    CHECK_EQ_INT(cd("25 - 3 * 7 + 50", N, 4, 204), COUNTDOWN_WRONG_VALUE); /* precedence */
    CHECK_EQ_INT(cd("(25 - 3) * 7 + 50 = 205", N, 4, 204), COUNTDOWN_WRONG_VALUE);
    CHECK_EQ_INT(cd("(25 - 3) * 7 + 50 = 204 = 204", N, 4, 204), COUNTDOWN_SYNTAX);

    TEST("countdown: numbers used exactly once each");
    CHECK_EQ_INT(cd("(25 - 3) * 7 + 25", N, 4, 179), COUNTDOWN_NUMBERS); /* 25 reused, 50 missing */
    CHECK_EQ_INT(cd("(25 - 3) * 7", N, 4, 154), COUNTDOWN_NUMBERS);      /* 50 missing */
    CHECK_EQ_INT(cd("(25 - 3) * 7 + 50 + 1 - 1", N, 4, 204), COUNTDOWN_NUMBERS); /* extras */
    CHECK_EQ_INT(cd("(25 - 3) * 7 + 50 + 0", N, 4, 204), COUNTDOWN_NUMBERS);
    CHECK_EQ_INT(cd("(25 - 3) * 7 + 5 * 10", N, 4, 204), COUNTDOWN_NUMBERS);
    static const long long DUP[] = {5, 5, 2};
    CHECK_EQ_INT(cd("5 * 5 - 2", DUP, 3, 23), COUNTDOWN_OK); /* a multiset: 5 twice is allowed twice */
    CHECK_EQ_INT(cd("5 * 2 - 2", DUP, 3, 8), COUNTDOWN_NUMBERS);

    TEST("countdown: division by zero, exact rationals");
    static const long long Z[] = {4, 2, 2, 3};
    CHECK_EQ_INT(cd("3 / (2 - 2) + 4", Z, 4, 7), COUNTDOWN_DIV_ZERO);
    /* non-integer intermediates are allowed when the result is exact */
    static const long long F[] = {1, 3, 6};
    CHECK_EQ_INT(cd("(1 / 3) * 6", F, 3, 2), COUNTDOWN_OK);
    CHECK_EQ_INT(cd("6 / 3 / 1", F, 3, 2), COUNTDOWN_OK);
    CHECK_EQ_INT(cd("6 / (1 / 3)", F, 3, 18), COUNTDOWN_OK);
    /* no rounding: 7/2 is not 3 */
    static const long long H[] = {7, 2};
    CHECK_EQ_INT(cd("7 / 2", H, 2, 3), COUNTDOWN_WRONG_VALUE);
    CHECK_EQ_INT(cd("7 / 2", H, 2, 4), COUNTDOWN_WRONG_VALUE);

    TEST("countdown: signs cannot be conjured");
    static const long long S[] = {3, 5};
    CHECK_EQ_INT(cd("5 - 3", S, 2, 2), COUNTDOWN_OK);
    CHECK_EQ_INT(cd("-3 + 5", S, 2, 2), COUNTDOWN_NUMBERS); /* -3 is not given */
    CHECK_EQ_INT(cd("-(3 - 5)", S, 2, 2), COUNTDOWN_SYNTAX);
    CHECK_EQ_INT(cd("+5 - 3", S, 2, 2), COUNTDOWN_SYNTAX);
    CHECK_EQ_INT(cd("5 - - 3", S, 2, 8), COUNTDOWN_SYNTAX);
    CHECK_EQ_INT(cd("5 ** 3", S, 2, 125), COUNTDOWN_SYNTAX);
    CHECK_EQ_INT(cd("5 ^ 3", S, 2, 125), COUNTDOWN_SYNTAX);
    static const long long NEG[] = {-3, 5};
    CHECK_EQ_INT(cd("5 - -3", NEG, 2, 8), COUNTDOWN_OK); /* a given negative number */

    TEST("countdown: malformed and adversarial input");
    CHECK_EQ_INT(cd("", N, 4, 1), COUNTDOWN_EMPTY);
    CHECK_EQ_INT(cd("   \n ", N, 4, 1), COUNTDOWN_EMPTY);
    CHECK_EQ_INT(cd("(25 - 3 * 7 + 50", N, 4, 1), COUNTDOWN_SYNTAX);
    CHECK_EQ_INT(cd("25 - 3) * 7 + 50", N, 4, 1), COUNTDOWN_SYNTAX);
    CHECK_EQ_INT(cd("25 3 7 50", N, 4, 1), COUNTDOWN_SYNTAX);
    CHECK_EQ_INT(cd("25.0 + 3 + 7 + 50", N, 4, 85), COUNTDOWN_SYNTAX);
    CHECK_EQ_INT(cd("25 + 3 + 7 + 50;", N, 4, 85), COUNTDOWN_SYNTAX);
    CHECK_EQ_INT(cd("25 \xc3\x97 3 + 7 + 50", N, 4, 132), COUNTDOWN_SYNTAX);      /* unicode times */
    CHECK_EQ_INT(cd("\xef\xbc\x92\xef\xbc\x95 + 3 + 7 + 50", N, 4, 85), COUNTDOWN_SYNTAX); /* fullwidth 25 */
    CHECK_EQ_INT(cd("__import__('os')", N, 4, 1), COUNTDOWN_SYNTAX);
    char garbage[256];
    for (int i = 0; i < 256; i++) garbage[i] = (char)(i * 37 + 11);
    CHECK(countdown_check(garbage, sizeof garbage, N, 4, 85) != COUNTDOWN_OK);
    /* a NUL byte inside the text ends nothing early */
    CHECK_EQ_INT(countdown_check("25 + 3 + 7 + 50\0+1", 18, N, 4, 85), COUNTDOWN_SYNTAX);

    TEST("countdown: deep nesting, huge numbers, overflow");
    /* 10000 parentheses: over the length limit */
    size_t deep_len = 10000 + 2 + 10000;
    char *deep = malloc(deep_len + 1);
    memset(deep, '(', 10000);
    memcpy(deep + 10000, "25", 2);
    memset(deep + 10002, ')', 10000);
    deep[deep_len] = 0;
    static const long long ONE[] = {25};
    CHECK_EQ_INT(countdown_check(deep, deep_len, ONE, 1, 25), COUNTDOWN_TOO_LONG);
    /* 100 parentheses fit the length but not the depth */
    CHECK_EQ_INT(countdown_check(deep + 10000 - 100, 202, ONE, 1, 25), COUNTDOWN_TOO_DEEP);
    /* the depth limit itself is fine */
    char ok_deep[2 * COUNTDOWN_EXPR_MAX_DEPTH + 3];
    memset(ok_deep, '(', COUNTDOWN_EXPR_MAX_DEPTH);
    memcpy(ok_deep + COUNTDOWN_EXPR_MAX_DEPTH, "25", 2);
    memset(ok_deep + COUNTDOWN_EXPR_MAX_DEPTH + 2, ')', COUNTDOWN_EXPR_MAX_DEPTH);
    CHECK_EQ_INT(countdown_check(ok_deep, 2 * COUNTDOWN_EXPR_MAX_DEPTH + 2, ONE, 1, 25), COUNTDOWN_OK);
    free(deep);
    /* a 31-digit literal (10^30) */
    CHECK_EQ_INT(cd("1000000000000000000000000000000 - 25", ONE, 1, 0), COUNTDOWN_BIG_NUMBER);
    CHECK_EQ_INT(cd("25 = 1000000000000000000000000000000", ONE, 1, 25), COUNTDOWN_BIG_NUMBER);
    /* products past 64 bits fail instead of wrapping */
    static const long long BIG[] = {999999999999999LL, 999999999999999LL, 999999999999999LL};
    CHECK_EQ_INT(cd("999999999999999 * 999999999999999 * 999999999999999", BIG, 3, 1), COUNTDOWN_OVERFLOW);
    CHECK_EQ_INT(cd("999999999999999 / 999999999999999 / 999999999999999", BIG, 3, 1), COUNTDOWN_WRONG_VALUE);
    static const long long BIG2[] = {999999999999999LL, 999999999999999LL};
    CHECK_EQ_INT(cd("999999999999999 * 999999999999999", BIG2, 2, 1), COUNTDOWN_OVERFLOW);
    CHECK_EQ_INT(cd("999999999999999 - 999999999999999", BIG2, 2, 0), COUNTDOWN_OK);

    TEST("countdown: finding the expression in a completion");
    strbuf out = {0};
    const char *c1 = "<think>try 25-3=22, 22*7=154</think>\n<answer>(25 - 3) * 7 + 50</answer>";
    CHECK(countdown_extract(c1, strlen(c1), &out));
    CHECK_EQ_STR(out.data, "(25 - 3) * 7 + 50");
    const char *c2 = "Let me think.\n25 - 3 = 22\nSo the equation is:\n(25 - 3) * 7 + 50 = 204.\nDone!";
    CHECK(countdown_extract(c2, strlen(c2), &out));
    CHECK_EQ_STR(out.data, "(25 - 3) * 7 + 50 = 204");
    CHECK_EQ_INT(cd(out.data, N, 4, 204), COUNTDOWN_OK);
    const char *c3 = "the answer is \\boxed{50 + 7 * (25 - 3)}";
    CHECK(countdown_extract(c3, strlen(c3), &out));
    CHECK_EQ_STR(out.data, "50 + 7 * (25 - 3)");
    const char *c4 = "I cannot find one. Sorry about 2 of them.";
    CHECK(!countdown_extract(c4, strlen(c4), &out));
    CHECK(!countdown_extract("", 0, &out));
    sb_free(&out);
}

int main(void) {
    test_extraction();
    test_normalisation();
    test_countdown();
    return check_done();
}
