/* The arith generator: integer arithmetic with exact answers, as plain
 * expressions ("What is 37 + 48 × 3?", usual precedence) and as short word
 * problems (a running count changed step by step). Candidate i of a seed is
 * drawn from the random stream (seed, "arith", i) alone, so it is the same
 * problem whatever --split, --shard or --n select. */
#ifndef GRPO_PREP_ARITH_H
#define GRPO_PREP_ARITH_H

#include <stdbool.h>
#include <stdint.h>

#include "../util/err.h"
#include "../util/strbuf.h"

enum { ARITH_MAX_DIGITS = 9, ARITH_MIN_TERMS = 2, ARITH_MAX_TERMS = 6 };

typedef struct {
    int digits;               /* most digits per operand, 1..ARITH_MAX_DIGITS */
    bool op[4];               /* allowed: + - * / */
    int min_terms, max_terms; /* operands per problem */
    double word_fraction;     /* share of word problems, 0..1 */
} arith_opts;

typedef struct {
    strbuf question; /* the user message */
    strbuf expr;     /* canonical ASCII expression: "37 + 48 * 3", "(12 + 5) * 3" */
    long long answer;
    int terms;
    bool word;
} arith_problem;

/* --ops: a non-empty set of the characters + - * / (each at most once). */
int arith_parse_ops(arith_opts *o, const char *ops, gerr *e);
/* --terms: "N" or "A..B", within ARITH_MIN_TERMS..ARITH_MAX_TERMS. */
int arith_parse_terms(arith_opts *o, const char *spec, gerr *e);

/* Draws candidate `index`. False when the candidate is rejected (negative
 * answer, an overflow, no exact divisor): the caller moves on to index+1. */
bool arith_draw(const arith_opts *o, uint64_t seed, uint64_t index, arith_problem *p);
void arith_problem_free(arith_problem *p);

#endif
