/* The countdown generator: 3 or 4 numbers from 1..99 and a target from
 * 1..999 that an equation using every number exactly once with + - * / and
 * parentheses reaches. The target is made by combining the numbers in a
 * random order with random operations, keeping every intermediate value a
 * positive integer (subtraction takes the smaller from the larger, division
 * only where exact), so a solution always exists. Candidate i of a seed comes
 * from the random stream (seed, "countdown", i) alone. */
#ifndef GRPO_PREP_COUNTDOWN_H
#define GRPO_PREP_COUNTDOWN_H

#include <stdbool.h>
#include <stdint.h>

#include "../util/strbuf.h"

enum {
    COUNTDOWN_MIN_NUMBERS = 3,
    COUNTDOWN_MAX_NUMBERS = 4,
    COUNTDOWN_MAX_NUMBER = 99,
    COUNTDOWN_MAX_TARGET = 999,
};

typedef struct {
    int n;
    long long numbers[COUNTDOWN_MAX_NUMBERS]; /* in the order shown to the model */
    long long target;
    strbuf solution; /* the expression that made the target, e.g. "(25 - 3) * 7 + 50" */
    strbuf question; /* the user message */
} countdown_problem;

/* Draws candidate `index`; false when its target falls outside 1..999 and
 * the caller should move on to index+1. */
bool countdown_draw(uint64_t seed, uint64_t index, countdown_problem *p);
void countdown_problem_free(countdown_problem *p);

#endif
