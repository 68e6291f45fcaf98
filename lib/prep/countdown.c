#include "countdown.h"

#include <stdio.h>
#include <string.h>

#include "../util/rng.h"

bool countdown_draw(uint64_t seed, uint64_t index, countdown_problem *p) {
    rng_stream r;
    rng_init(&r, seed, "countdown", 9, index);
    sb_clear(&p->solution);
    sb_clear(&p->question);
    int n = COUNTDOWN_MIN_NUMBERS + (int)rng_below(&r, COUNTDOWN_MAX_NUMBERS - COUNTDOWN_MIN_NUMBERS + 1);
    p->n = n;
    long long val[COUNTDOWN_MAX_NUMBERS];
    strbuf text[COUNTDOWN_MAX_NUMBERS];
    memset(text, 0, sizeof text);
    for (int i = 0; i < n; i++) {
        p->numbers[i] = 1 + (long long)rng_below(&r, COUNTDOWN_MAX_NUMBER);
        val[i] = p->numbers[i];
        sb_printf(&text[i], "%lld", val[i]);
    }
    /* Combine two random pool entries until one is left. Values stay below
     * 99^4, far from overflow. */
    for (int left = n; left > 1; left--) {
        int i = (int)rng_below(&r, (uint64_t)left);
        int j = (int)rng_below(&r, (uint64_t)left - 1);
        if (j >= i) j++;
        if (val[i] < val[j]) { /* i holds the larger: a - b and a / b stay positive integers */
            int t = i;
            i = j, j = t;
        }
        long long a = val[i], b = val[j];
        char ops[4];
        int n_ops = 0;
        ops[n_ops++] = '+';
        ops[n_ops++] = '*';
        if (a != b) ops[n_ops++] = '-';
        if (a % b == 0) ops[n_ops++] = '/';
        char op = ops[rng_below(&r, (uint64_t)n_ops)];
        long long v = op == '+' ? a + b : op == '*' ? a * b : op == '-' ? a - b : a / b;
        strbuf joined = {0};
        sb_printf(&joined, "(%s %c %s)", text[i].data, op, text[j].data);
        /* the result takes the lower slot, the last slot moves into the other */
        int lo = i < j ? i : j, hi = i < j ? j : i;
        sb_free(&text[lo]);
        text[lo] = joined;
        val[lo] = v;
        sb_free(&text[hi]);
        text[hi] = text[left - 1];
        val[hi] = val[left - 1];
        memset(&text[left - 1], 0, sizeof text[left - 1]); /* moved, or freed when hi was last */
    }
    p->target = val[0];
    /* drop the outermost parentheses */
    sb_append(&p->solution, text[0].data + 1, text[0].len - 2);
    sb_free(&text[0]);
    if (p->target < 1 || p->target > COUNTDOWN_MAX_TARGET) return false;
    sb_puts(&p->question, "Using the numbers [");
    for (int i = 0; i < n; i++) sb_printf(&p->question, "%s%lld", i ? ", " : "", p->numbers[i]);
    sb_printf(&p->question,
              "], create an equation that equals %lld. You can use +, -, * and / and parentheses, and "
              "must use each number exactly once. Give the equation only, for example (1 + 2) * 3.",
              p->target);
    return true;
}

void countdown_problem_free(countdown_problem *p) {
    sb_free(&p->solution);
    sb_free(&p->question);
}
