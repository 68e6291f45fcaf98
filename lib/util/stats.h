/* Running mean and standard deviation (Welford), one value at a time and
 * stable for values far from zero (1e9 + small noise loses nothing the way
 * sum-of-squares does). Equal values give exactly their value and a std of
 * exactly 0. Start from `welford w = {0};`. */
#ifndef GRPO_STATS_H
#define GRPO_STATS_H

typedef struct {
    long long n;
    double mean, m2; /* m2: sum of squared differences from the mean */
} welford;

void welford_push(welford *w, double x);
/* NaN when empty. */
double welford_mean(const welford *w);
/* Unbiased (n - 1) standard deviation; NaN below two values. */
double welford_std(const welford *w);
/* Population (n) standard deviation; NaN when empty. */
double welford_std_pop(const welford *w);

#endif
