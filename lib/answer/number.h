/* The numbers of final answers, exactly as written (norm.c reads them):
 * an integer, a decimal or an exponent form is an exact terminating
 * decimal, a fraction an exact rational (when its terms fit 64 bits), and
 * a decimal written with digits after its point may also be a rounding of
 * the other side. The comparison (answer_number_equal):
 *   - equal when the exact values are, whatever their size
 *     (114858170488 is not 114858169488; 1,000,000 is 1e6; 0.1 is 1/10);
 *   - else, when either side is written with digits after its point, equal
 *     when |a - b| <= min(tol * max(1, |b|), half a unit in the last
 *     written digit of the least precise such side): 0.3333333 is 1/3,
 *     0.333 is not (by default), and 1000000.5 is not 1000000, nor 3.0000001
 *     3, since neither is a rounding of the other;
 *   - integers and fractions alone compare exactly whatever tol. */
#ifndef GRPO_ANSWER_NUMBER_H
#define GRPO_ANSWER_NUMBER_H

#include <stdbool.h>
#include <stddef.h>

#include "mexpr.h"

enum { ANSWER_NUMBER_DIGITS = 400 }; /* mantissa characters kept; longer is no number */

/* sign * digits * 10^exp; digits without leading or trailing zeros ("" for 0). */
typedef struct {
    int sign;
    char digits[ANSWER_NUMBER_DIGITS + 1];
    long long exp;
} answer_decimal;

typedef struct {
    double value;
    bool fraction;       /* a/b or \frac: rat holds the value when has_rat */
    answer_decimal dec;  /* the value when !fraction */
    bool has_rat;        /* rat holds the exact value (terms within 64 bits) */
    mexpr_rat rat;
    bool rounded;        /* written with digits after a point: may be a rounding */
    double half_ulp;     /* half a unit in the last written digit, when rounded */
} answer_number;

/* A decimal from the text take_decimal and take_exponent build ("1234.50",
 * "2.5e-3"; no sign, no separators), times 10^scale10. The count of digits
 * written after its point in *frac_digits, and the power of ten of its last
 * written digit in *place ("0.50": 2 and -2). False when the text is no
 * such number. */
bool answer_decimal_parse(const char *text, int sign, int scale10, answer_decimal *out, int *frac_digits,
                          long long *place);

/* The number written as the decimal d (answer_decimal_parse's frac_digits
 * and place; its value v). */
void answer_number_from_decimal(const answer_decimal *d, int frac_digits, long long place, double v,
                                answer_number *out);

/* The fraction num/den of two numbers (den's value non-zero). */
void answer_number_divide(const answer_number *num, const answer_number *den, answer_number *out);

/* The exact rational value of a number, when its terms fit 64 bits. */
bool answer_number_rational(const answer_number *n, mexpr_rat *out);

/* The comparison above; b is the reference. */
bool answer_number_equal(const answer_number *a, const answer_number *b, double tol);

#endif
