/* The countdown check: does the completion's equation use exactly the given
 * numbers, each once, and reach the target?
 *
 * The expression comes from the last <answer>...</answer>, else the last
 * \boxed{...}, else the last line that looks like arithmetic (only digits,
 * + - * / ( ) = and white space, with a digit and an operator; one trailing
 * '.' allowed). countdown_extract finds it.
 *
 * Grammar (ASCII only; white space anywhere between tokens):
 *   line   := expr [ '=' int ]           the tail must equal the target
 *   expr   := term (('+' | '-') term)*
 *   term   := factor (('*' | '/') factor)*
 *   factor := int | '(' expr ')'
 *   int    := ['-'] D+                   at most COUNTDOWN_EXPR_MAX_DIGITS digits
 * A '-' glued to the digits of a factor makes a negative literal, which has
 * to be one of the given numbers like any other; there is no unary minus on
 * a parenthesis and no unary '+', so signs cannot be conjured.
 * Every literal is one use of a number: the literals, as a multiset, must
 * equal `numbers`. Arithmetic is exact on 64-bit rationals: intermediate
 * fractions are allowed ((1 / 3) * 6 is 2) as long as the whole equals the
 * target exactly; division by zero and any overflow fail. Nothing is ever
 * handed to an interpreter. Limits: COUNTDOWN_EXPR_MAX_LEN bytes,
 * COUNTDOWN_EXPR_MAX_DEPTH nested parentheses. */
#ifndef GRPO_REWARD_COUNTDOWN_EXPR_H
#define GRPO_REWARD_COUNTDOWN_EXPR_H

#include <stdbool.h>
#include <stddef.h>

#include "../util/strbuf.h"

enum {
    COUNTDOWN_EXPR_MAX_LEN = 1024,
    COUNTDOWN_EXPR_MAX_DEPTH = 32,
    COUNTDOWN_EXPR_MAX_DIGITS = 16,
    COUNTDOWN_EXPR_MAX_NUMBERS = 64,
};
/* The largest |number| or |target| a record may give. */
#define COUNTDOWN_EXPR_MAX_ABS 1000000000000000LL

typedef enum {
    COUNTDOWN_OK,          /* right numbers, exact target */
    COUNTDOWN_EMPTY,       /* nothing to parse */
    COUNTDOWN_TOO_LONG,    /* over COUNTDOWN_EXPR_MAX_LEN bytes */
    COUNTDOWN_SYNTAX,      /* not the grammar above */
    COUNTDOWN_TOO_DEEP,    /* parentheses nested too deep */
    COUNTDOWN_BIG_NUMBER,  /* a literal over COUNTDOWN_EXPR_MAX_DIGITS digits */
    COUNTDOWN_OVERFLOW,    /* an intermediate left 64-bit range */
    COUNTDOWN_DIV_ZERO,    /* division by zero */
    COUNTDOWN_NUMBERS,     /* not exactly the given numbers, each once */
    COUNTDOWN_WRONG_VALUE, /* well formed, wrong result (or an "= N" tail that is not the target) */
    COUNTDOWN_N_RESULTS
} countdown_result;

const char *countdown_result_name(countdown_result r);

/* Checks one expression text against numbers[0..n-1] and target. */
countdown_result countdown_check(const char *expr, size_t len, const long long *numbers, size_t n,
                                 long long target);

/* The expression of a completion, per the rules above, into out (replaced);
 * false when none is found. */
bool countdown_extract(const char *s, size_t len, strbuf *out);

#endif
