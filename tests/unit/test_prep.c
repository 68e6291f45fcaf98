/* grpo-prep's library: answer extraction, the generators' validity over
 * many seeds (checked by an evaluator and a search written here, not by the
 * generators' own arithmetic), messages, pass-through renames, id sets. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "io/record.h"
#include "prep/arith.h"
#include "prep/countdown.h"
#include "answer/extract.h"
#include "prep/generate.h"
#include "util/idset.h"
#include "prep/item.h"
#include "prep/prompt.h"

/* ---- an independent evaluator: integers, + - * / and parentheses --------- */

typedef struct {
    const char *s;
    int bad;     /* syntax error, inexact division, division by zero */
    int numbers; /* operands seen */
    long long operand[16];
} evaluator;

static void skip_spaces(evaluator *ev) {
    while (*ev->s == ' ') ev->s++;
}

static long long eval_sum(evaluator *ev);

static long long eval_atom(evaluator *ev) {
    skip_spaces(ev);
    if (*ev->s == '(') {
        ev->s++;
        long long v = eval_sum(ev);
        skip_spaces(ev);
        if (*ev->s != ')') ev->bad = 1;
        else ev->s++;
        return v;
    }
    if (*ev->s < '0' || *ev->s > '9') {
        ev->bad = 1;
        return 0;
    }
    long long v = 0;
    while (*ev->s >= '0' && *ev->s <= '9') v = v * 10 + (*ev->s++ - '0');
    if (ev->numbers < 16) ev->operand[ev->numbers] = v;
    ev->numbers++;
    return v;
}

static long long eval_product(evaluator *ev) {
    long long v = eval_atom(ev);
    for (;;) {
        skip_spaces(ev);
        char op = *ev->s;
        if (op != '*' && op != '/') return v;
        ev->s++;
        long long b = eval_atom(ev);
        if (op == '*') v *= b;
        else if (b == 0 || v % b) ev->bad = 1;
        else v /= b;
    }
}

static long long eval_sum(evaluator *ev) {
    long long v = eval_product(ev);
    for (;;) {
        skip_spaces(ev);
        char op = *ev->s;
        if (op != '+' && op != '-') return v;
        ev->s++;
        long long b = eval_product(ev);
        v = op == '+' ? v + b : v - b;
    }
}

static long long evaluate(const char *expr, evaluator *ev) {
    memset(ev, 0, sizeof *ev);
    ev->s = expr;
    long long v = eval_sum(ev);
    skip_spaces(ev);
    if (*ev->s) ev->bad = 1;
    return v;
}

static int digits_of(long long v) {
    int d = 1;
    while (v >= 10) v /= 10, d++;
    return d;
}

/* ---- an independent countdown search: every way to combine all numbers -- */

/* Whether combining all n values (each exactly once) with + - * / can give
 * target, intermediate values kept positive integers as the rules promise. */
static int reachable(const long long *v, int n, long long target) {
    if (n == 1) return v[0] == target;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            if (i == j) continue;
            long long rest[4];
            int m = 0;
            for (int k = 0; k < n; k++)
                if (k != i && k != j) rest[m++] = v[k];
            long long a = v[i], b = v[j];
            long long cand[4];
            int c = 0;
            cand[c++] = a + b;
            cand[c++] = a * b;
            if (a > b) cand[c++] = a - b;
            if (a % b == 0) cand[c++] = a / b;
            for (int k = 0; k < c; k++) {
                rest[m] = cand[k];
                if (reachable(rest, m + 1, target)) return 1;
            }
        }
    return 0;
}

/* ---- tests --------------------------------------------------------------- */

static void test_hashes(void) {
    strbuf out = {0};
    TEST("#### answer: after the last ####, trimmed, commas removed");
    CHECK_EQ_INT(extract_after_hashes("x\n#### 72", 9, &out), 1);
    CHECK_EQ_STR(out.data, "72");
    const char *s = "a #### b\nsteps\n####  1,234,567 \n";
    CHECK_EQ_INT(extract_after_hashes(s, strlen(s), &out), 1);
    CHECK_EQ_STR(out.data, "1234567");
    s = "#### -3.5";
    CHECK_EQ_INT(extract_after_hashes(s, strlen(s), &out), 1);
    CHECK_EQ_STR(out.data, "-3.5");
    TEST("#### answer: missing or empty");
    s = "no marker # ## ###";
    CHECK_EQ_INT(extract_after_hashes(s, strlen(s), &out), 0);
    s = "steps ####   ";
    CHECK_EQ_INT(extract_after_hashes(s, strlen(s), &out), 1);
    CHECK_EQ_STR(out.data, "");
    sb_free(&out);
}

static void expect_boxed(const char *s, int rc, const char *want) {
    strbuf out = {0};
    int got = extract_boxed(s, strlen(s), &out);
    CHECK_EQ_INT(got, rc);
    if (rc == 1 && got == 1) CHECK_EQ_STR(out.data, want);
    if (got == 1 && rc == 1 && strcmp(out.data, want)) printf("#   input: %s\n", s);
    sb_free(&out);
}

static void test_boxed(void) {
    TEST("\\boxed{}: nested braces, the last one, \\fbox");
    expect_boxed("so $\\boxed{\\frac{1}{2}}$.", 1, "\\frac{1}{2}");
    expect_boxed("\\boxed{1} then \\boxed{ 2^{3^{4}} }", 1, "2^{3^{4}}");
    expect_boxed("\\boxed{5} and finally \\fbox{x+{y}}", 1, "x+{y}");
    expect_boxed("\\boxed {12}", 1, "12");
    expect_boxed("a \\boxed{\\text{(A)}}", 1, "\\text{(A)}");
    TEST("\\boxed{}: escaped braces do not nest");
    expect_boxed("$\\boxed{\\{1, 2\\}}$", 1, "\\{1, 2\\}");
    expect_boxed("\\boxed{\\}}", 1, "\\}");
    expect_boxed("\\boxed{a\\\\}", 1, "a\\\\");
    TEST("\\boxed 5: the bare-token form");
    expect_boxed("is $\\boxed 5$.", 1, "5");
    expect_boxed("\\boxed{3} or \\boxed 8", 1, "8");
    TEST("\\boxed{}: absent, unbalanced, other commands");
    expect_boxed("no box here", 0, NULL);
    expect_boxed("\\boxedsymbol{3}", 0, NULL);
    expect_boxed("\\boxed{\\frac{1}{2}", -1, NULL);
    expect_boxed("\\boxed{5\\}", -1, NULL);
}

/* The text just past the first whole number v in s (" 12." matches 12, not
 * 123 or 512), or NULL. */
static const char *find_number(const char *s, long long v) {
    char num[32];
    int n = snprintf(num, sizeof num, "%lld", v);
    for (const char *at = strstr(s, num); at; at = strstr(at + 1, num)) {
        bool starts = at == s || at[-1] < '0' || at[-1] > '9';
        bool ends = at[n] < '0' || at[n] > '9';
        if (starts && ends) return at + n;
    }
    return NULL;
}

static void check_arith(const arith_opts *o, uint64_t seed, int draws, int *valid, int *words) {
    arith_problem p = {0}, q = {0};
    for (int i = 0; i < draws; i++) {
        if (!arith_draw(o, seed, (uint64_t)i, &p)) continue;
        (*valid)++;
        if (p.word) (*words)++;
        evaluator ev;
        long long v = evaluate(p.expr.data, &ev);
        CHECK(!ev.bad);
        CHECK_EQ_INT(v, p.answer);
        CHECK(p.answer >= 0);
        CHECK_EQ_INT(ev.numbers, p.terms);
        CHECK(p.terms >= o->min_terms && p.terms <= o->max_terms);
        for (int k = 0; k < ev.numbers && k < 16; k++) {
            CHECK(ev.operand[k] >= 1);
            CHECK(digits_of(ev.operand[k]) <= o->digits);
        }
        for (const char *c = p.expr.data; *c; c++) {
            const char *at = strchr("+-*/", *c);
            if (at) CHECK(o->op[at - "+-*/"]);
        }
        if (!p.word) { /* the question is the expression with × and ÷ */
            strbuf want = {0};
            sb_puts(&want, "What is ");
            for (const char *c = p.expr.data; *c; c++) {
                if (*c == '*') sb_puts(&want, "\xC3\x97");
                else if (*c == '/') sb_puts(&want, "\xC3\xB7");
                else sb_putc(&want, *c);
            }
            sb_putc(&want, '?');
            CHECK_EQ_STR(p.question.data, want.data);
            sb_free(&want);
        } else { /* every operand is in the story, in order */
            const char *at = p.question.data;
            for (int k = 0; k < ev.numbers && k < 16 && at; k++) {
                at = find_number(at, ev.operand[k]);
                CHECK(at != NULL);
                if (!at) printf("#   %lld not in order in: %s\n", ev.operand[k], p.question.data);
            }
        }
        /* same seed and index, same problem */
        CHECK(arith_draw(o, seed, (uint64_t)i, &q));
        CHECK_EQ_STR(q.expr.data, p.expr.data);
        CHECK_EQ_STR(q.question.data, p.question.data);
    }
    arith_problem_free(&p);
    arith_problem_free(&q);
}

static void test_arith(void) {
    gerr e = {0};
    TEST("arith: defaults, many seeds: answers exact, operands within --digits");
    arith_opts o = {.digits = 2, .word_fraction = 0.25};
    CHECK_EQ_INT(arith_parse_ops(&o, "+-*", &e), 0);
    CHECK_EQ_INT(arith_parse_terms(&o, "2..3", &e), 0);
    int valid = 0, words = 0;
    for (uint64_t seed = 0; seed < 20; seed++) check_arith(&o, seed, 200, &valid, &words);
    CHECK(valid > 2500);                        /* most candidates are usable */
    CHECK(words > valid / 8 && words < valid / 2); /* about a quarter are word problems */

    TEST("arith: every operation, division exact, up to 6 terms and 4 digits");
    arith_opts all = {.digits = 4, .word_fraction = 0.5};
    CHECK_EQ_INT(arith_parse_ops(&all, "/*-+", &e), 0);
    CHECK_EQ_INT(arith_parse_terms(&all, "2..6", &e), 0);
    valid = words = 0;
    for (uint64_t seed = 0; seed < 10; seed++) check_arith(&all, seed, 300, &valid, &words);
    CHECK(valid > 1000);

    TEST("arith: division only, one digit");
    arith_opts div = {.digits = 1, .word_fraction = 0};
    CHECK_EQ_INT(arith_parse_ops(&div, "/", &e), 0);
    CHECK_EQ_INT(arith_parse_terms(&div, "2", &e), 0);
    valid = words = 0;
    check_arith(&div, 7, 500, &valid, &words);
    CHECK(valid > 100);
    CHECK_EQ_INT(words, 0);

    TEST("arith: 9 digits and 6 factors never overflow silently");
    arith_opts big = {.digits = 9, .word_fraction = 0.5};
    CHECK_EQ_INT(arith_parse_ops(&big, "*/", &e), 0);
    CHECK_EQ_INT(arith_parse_terms(&big, "6", &e), 0);
    valid = words = 0;
    check_arith(&big, 1, 300, &valid, &words);
    CHECK(valid > 10);

    TEST("arith: seeds give different problems");
    arith_problem a = {0}, b = {0};
    int same = 0;
    for (int i = 0; i < 50; i++)
        if (arith_draw(&o, 1, (uint64_t)i, &a) && arith_draw(&o, 2, (uint64_t)i, &b) && !strcmp(a.expr.data, b.expr.data))
            same++;
    CHECK(same < 5);
    arith_problem_free(&a);
    arith_problem_free(&b);

    TEST("arith: --ops and --terms are checked");
    CHECK_EQ_INT(arith_parse_ops(&o, "", &e), EX_USAGE);
    CHECK_EQ_INT(arith_parse_ops(&o, "+x", &e), EX_USAGE);
    CHECK(strstr(e.msg, "'x'") != NULL);
    CHECK_EQ_INT(arith_parse_ops(&o, "++", &e), EX_USAGE);
    CHECK_EQ_INT(arith_parse_terms(&o, "1", &e), EX_USAGE);
    CHECK_EQ_INT(arith_parse_terms(&o, "3..2", &e), EX_USAGE);
    CHECK_EQ_INT(arith_parse_terms(&o, "2..7", &e), EX_USAGE);
    CHECK_EQ_INT(arith_parse_terms(&o, "2..", &e), EX_USAGE);
    CHECK_EQ_INT(arith_parse_terms(&o, "4", &e), 0);
    CHECK(o.min_terms == 4 && o.max_terms == 4);
    CHECK_EQ_INT(arith_parse_terms(&o, "3..5", &e), 0);
    CHECK(o.min_terms == 3 && o.max_terms == 5);
}

static void test_countdown(void) {
    TEST("countdown: many seeds: 3-4 numbers in 1..99, target in 1..999 and reachable");
    countdown_problem p = {0};
    int valid = 0, four = 0;
    for (uint64_t seed = 0; seed < 10; seed++)
        for (uint64_t i = 0; i < 200; i++) {
            if (!countdown_draw(seed, i, &p)) continue;
            valid++;
            CHECK(p.n == 3 || p.n == 4);
            if (p.n == 4) four++;
            for (int k = 0; k < p.n; k++) CHECK(p.numbers[k] >= 1 && p.numbers[k] <= 99);
            CHECK(p.target >= 1 && p.target <= 999);
            CHECK(reachable(p.numbers, p.n, p.target));
            /* the generating equation uses each number once and gives the target */
            evaluator ev;
            CHECK_EQ_INT(evaluate(p.solution.data, &ev), p.target);
            CHECK(!ev.bad);
            CHECK_EQ_INT(ev.numbers, p.n);
            long long used[4];
            memcpy(used, ev.operand, sizeof used);
            for (int k = 0; k < p.n; k++) {
                int found = 0;
                for (int m = 0; m < p.n && !found; m++)
                    if (used[m] == p.numbers[k]) used[m] = -1, found = 1;
                CHECK(found);
            }
            char list[64];
            snprintf(list, sizeof list, "[%lld, %lld, %lld", p.numbers[0], p.numbers[1], p.numbers[2]);
            CHECK(strstr(p.question.data, list) != NULL);
        }
    CHECK(valid > 1000);
    CHECK(four > valid / 4 && four < 3 * valid / 4);
    countdown_problem_free(&p);
}

static void test_ids(void) {
    TEST("generated ids: TASK/ + 16 hex digits of SHA-256 of the problem");
    strbuf id = {0};
    prep_generated_id(&id, "arith", "18 - 8", 6);
    CHECK_EQ_STR(id.data, "arith/53f898c558cd73cc");
    prep_generated_id(&id, "countdown", "3,7,25,50;62", 12);
    CHECK_EQ_STR(id.data, "countdown/727f6b6c3761abe6");
    sb_free(&id);

    TEST("id set: duplicates report the first line, growth keeps every id");
    idset s;
    idset_init(&s);
    char buf[32];
    for (int i = 0; i < 5000; i++) {
        int n = snprintf(buf, sizeof buf, "gsm8k/%d", i);
        CHECK_EQ_INT(idset_add(&s, buf, (size_t)n, i + 1), 0);
    }
    CHECK_EQ_INT(idset_add(&s, "gsm8k/42", 8, 9999), 43);
    CHECK_EQ_INT(idset_add(&s, "gsm8k/4", 7, 9999), 5);
    CHECK_EQ_INT(idset_add(&s, "gsm8k/42x", 9, 9999), 0);
    CHECK_EQ_INT(s.n, 5001);
    idset_free(&s);
}

static int parse(record *r, const char *line, gerr *e) { return record_parse(r, line, strlen(line), "in.jsonl", 3, e); }

static void test_messages(void) {
    strbuf out = {0};
    gerr e = {0};
    record r;
    record_init(&r);
    TEST("messages: system then user, JSON-escaped");
    prompt_messages(&out, "S", "a \"q\"\n", 6);
    CHECK_EQ_STR(out.data, "[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\"a \\\"q\\\"\\n\"}]");
    sb_clear(&out);
    prompt_messages(&out, NULL, "q", 1);
    CHECK_EQ_STR(out.data, "[{\"role\":\"user\",\"content\":\"q\"}]");

    TEST("messages from a record: kept byte for byte unless a system message is asked for");
    CHECK_EQ_INT(parse(&r, "{\"messages\":[ {\"role\":\"system\",\"content\":\"x\"} , {\"role\":\"user\",\"content\":\"\\u00e9\",\"n\":1e400}]}", &e), 0);
    const rec_field *f = record_find(&r, "messages");
    sb_clear(&out);
    CHECK_EQ_INT(prompt_messages_from_raw(&r, "messages", f->val, f->val_len, false, "S", &out, &e), 0);
    CHECK(out.len == f->val_len && !memcmp(out.data, f->val, f->val_len));
    sb_clear(&out);
    CHECK_EQ_INT(prompt_messages_from_raw(&r, "messages", f->val, f->val_len, true, "S", &out, &e), 0);
    CHECK_EQ_STR(out.data, "[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\"\\u00e9\",\"n\":1e400}]");
    sb_clear(&out);
    CHECK_EQ_INT(prompt_messages_from_raw(&r, "messages", f->val, f->val_len, true, NULL, &out, &e), 0);
    CHECK_EQ_STR(out.data, "[{\"role\":\"user\",\"content\":\"\\u00e9\",\"n\":1e400}]");
    CHECK_EQ_INT(parse(&r, "{\"m\":[{\"role\":\"user\",\"content\":\"q\"}]}", &e), 0);
    f = record_find(&r, "m");
    sb_clear(&out);
    CHECK_EQ_INT(prompt_messages_from_raw(&r, "m", f->val, f->val_len, true, "S", &out, &e), 0);
    CHECK_EQ_STR(out.data, "[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\"q\"}]");

    TEST("messages from a record: malformed ones name file, line, field and message");
    const char *bad[][2] = {
        {"{\"m\":[]}", "in.jsonl:3: field \"m\": expected at least one message"},
        {"{\"m\":{}}", "in.jsonl:3: field \"m\": expected an array of {\"role\": string, \"content\": string} objects, got object"},
        {"{\"m\":[1]}", "in.jsonl:3: field \"m\": message 1: expected an object"},
        {"{\"m\":[{\"role\":\"user\",\"content\":\"a\"},{\"content\":\"b\"}]}", "in.jsonl:3: field \"m\": message 2: expected \"role\""},
        {"{\"m\":[{\"role\":\"user\",\"content\":[1]}]}", "in.jsonl:3: field \"m\": message 1: expected \"content\" to be a string"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK_EQ_INT(parse(&r, bad[i][0], &e), 0);
        f = record_find(&r, "m");
        sb_clear(&out);
        CHECK_EQ_INT(prompt_messages_from_raw(&r, "m", f->val, f->val_len, false, NULL, &out, &e), EX_DATAERR);
        if (strncmp(e.msg, bad[i][1], strlen(bad[i][1]))) printf("#   got: %s\n", e.msg);
        CHECK(!strncmp(e.msg, bad[i][1], strlen(bad[i][1])));
        CHECK_EQ_INT(out.len, 0);
    }
    CHECK_EQ_INT(parse(&r, "{\"m\":[{\"role\":\"system\",\"content\":\"a\"}]}", &e), 0);
    f = record_find(&r, "m");
    CHECK_EQ_INT(prompt_messages_from_raw(&r, "m", f->val, f->val_len, true, NULL, &out, &e), EX_DATAERR);
    record_free(&r);
    sb_free(&out);
}

static void test_item(void) {
    prep_item it;
    record in, out;
    strbuf line = {0};
    gerr e = {0};
    prep_item_init(&it);
    record_init(&in);
    record_init(&out);
    TEST("record: prep's fields first, the input's after, a replaced answer kept as solution");
    sb_puts(&it.id, "gsm8k/3");
    sb_puts(&it.task, "gsm8k");
    prompt_messages(&it.messages, NULL, "q", 1);
    sb_puts(&it.answer, "7");
    it.has_answer = true;
    CHECK_EQ_INT(parse(&in, "{\"question\":\"q\",\"answer\":\"so #### 7\",\"x\":1e400,\"big\":123456789012345678901234567890}", &e), 0);
    CHECK_EQ_INT(prep_item_to_record(&it, &in, &out, &e), 0);
    record_serialize(&out, &line);
    CHECK_EQ_STR(line.data, "{\"id\":\"gsm8k/3\",\"task\":\"gsm8k\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],"
                            "\"answer\":\"7\",\"question\":\"q\",\"solution\":\"so #### 7\",\"x\":1e400,"
                            "\"big\":123456789012345678901234567890}");

    TEST("record: other collisions go to source_NAME; consumed fields are dropped");
    CHECK_EQ_INT(parse(&in, "{\"id\":5,\"solution\":\"s\",\"answer\":\"a\",\"ta\\u0073k\":\"t\",\"messages\":[]}", &e), 0);
    prep_item_consume(&it, "messages");
    CHECK_EQ_INT(prep_item_to_record(&it, &in, &out, &e), 0);
    sb_clear(&line);
    record_serialize(&out, &line);
    CHECK_EQ_STR(line.data, "{\"id\":\"gsm8k/3\",\"task\":\"gsm8k\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],"
                            "\"answer\":\"7\",\"source_id\":5,\"solution\":\"s\",\"source_answer\":\"a\","
                            "\"source_task\":\"t\"}");

    TEST("record: a rename whose name is taken too is an error");
    CHECK_EQ_INT(parse(&in, "{\"id\":5,\"source_id\":6}", &e), 0);
    CHECK_EQ_INT(prep_item_to_record(&it, &in, &out, &e), EX_DATAERR);
    CHECK(strstr(e.msg, "in.jsonl:3: field \"id\"") == e.msg);

    TEST("record: extras follow the answer; generated records have nothing after");
    prep_item_clear(&it);
    sb_puts(&it.id, "countdown/x");
    sb_puts(&it.task, "countdown");
    sb_puts(&it.messages, "[]");
    sb_puts(prep_item_extra(&it, "numbers"), "[1,2,3]");
    sb_puts(prep_item_extra(&it, "target"), "6");
    CHECK_EQ_INT(prep_item_to_record(&it, NULL, &out, &e), 0);
    sb_clear(&line);
    record_serialize(&out, &line);
    CHECK_EQ_STR(line.data, "{\"id\":\"countdown/x\",\"task\":\"countdown\",\"messages\":[],\"numbers\":[1,2,3],\"target\":6}");
    prep_item_free(&it);
    record_free(&in);
    record_free(&out);
    sb_free(&line);
}

int main(void) {
    test_hashes();
    test_boxed();
    test_arith();
    test_countdown();
    test_ids();
    test_messages();
    test_item();
    return check_done();
}
