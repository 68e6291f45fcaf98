/* Exact numbers of final answers and their comparison (rules in number.h). */
#include "number.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

bool answer_decimal_parse(const char *text, int sign, int scale10, answer_decimal *out, int *frac_digits,
                          long long *place) {
    memset(out, 0, sizeof *out);
    size_t n = 0, i = 0;
    int frac = 0;
    bool point = false;
    for (; text[i] && text[i] != 'e' && text[i] != 'E'; i++) {
        char c = text[i];
        if (c == '.' && !point) {
            point = true;
            continue;
        }
        if (c < '0' || c > '9' || n >= ANSWER_NUMBER_DIGITS) return false;
        if (n == 0 && c == '0') { /* a leading zero: only the place counts */
            if (point) frac++;
            continue;
        }
        out->digits[n++] = c;
        if (point) frac++;
    }
    long long exp = 0;
    if (text[i]) {
        char *end;
        exp = strtoll(text + i + 1, &end, 10);
        if (*end || end == text + i + 1) return false;
        if (exp > LLONG_MAX / 4 || exp < LLONG_MIN / 4) return false;
    }
    out->digits[n] = 0;
    *frac_digits = frac;
    *place = exp - frac + scale10;
    out->exp = *place;
    while (n > 0 && out->digits[n - 1] == '0') { /* trailing zeros: the same value */
        out->digits[--n] = 0;
        out->exp++;
    }
    out->sign = n ? sign : 0;
    if (!n) out->exp = 0;
    return true;
}

/* An integer of at most 18 digits times 10^exp as a rational, when it fits. */
static bool decimal_rational(const answer_decimal *d, mexpr_rat *out) {
    size_t n = strlen(d->digits);
    if (n > 18 || d->exp > 18 || d->exp < -18) return false;
    long long m = n ? strtoll(d->digits, NULL, 10) : 0, p = 1;
    for (long long k = 0; k < (d->exp < 0 ? -d->exp : d->exp); k++) p *= 10;
    if (d->exp >= 0) {
        if (__builtin_mul_overflow(m, p, &m)) return false;
        p = 1;
    }
    return mexpr_rat_make(d->sign < 0 ? -m : m, p, out);
}

void answer_number_from_decimal(const answer_decimal *d, int frac_digits, long long place, double v,
                                answer_number *out) {
    memset(out, 0, sizeof *out);
    out->value = v;
    out->dec = *d;
    out->has_rat = decimal_rational(d, &out->rat);
    out->rounded = frac_digits > 0;
    out->half_ulp = out->rounded ? 0.5 * pow(10, (double)place) : 0;
}

void answer_number_divide(const answer_number *num, const answer_number *den, answer_number *out) {
    memset(out, 0, sizeof *out);
    out->value = num->value / den->value;
    out->fraction = true;
    long long n, d;
    out->has_rat = num->has_rat && den->has_rat && !__builtin_mul_overflow(num->rat.num, den->rat.den, &n) &&
                   !__builtin_mul_overflow(num->rat.den, den->rat.num, &d) && mexpr_rat_make(n, d, &out->rat);
    out->rounded = num->rounded || den->rounded;
    if (out->rounded) /* how far either written rounding can move the quotient */
        out->half_ulp = (num->half_ulp + fabs(out->value) * den->half_ulp) / fabs(den->value);
}

bool answer_number_rational(const answer_number *n, mexpr_rat *out) {
    if (!n->has_rat) return false;
    *out = n->rat;
    return true;
}

static bool decimal_same(const answer_decimal *a, const answer_decimal *b) {
    return a->sign == b->sign && a->exp == b->exp && !strcmp(a->digits, b->digits);
}

bool answer_number_equal(const answer_number *a, const answer_number *b, double tol) {
    bool exact;
    if (!a->fraction && !b->fraction) exact = decimal_same(&a->dec, &b->dec);
    else if (a->has_rat && b->has_rat) exact = a->rat.num == b->rat.num && a->rat.den == b->rat.den;
    else exact = a->value == b->value;
    if (exact) return true;
    if (!a->rounded && !b->rounded) return false;
    double ulp = 0; /* the least precise rounded side's */
    if (a->rounded && a->half_ulp > ulp) ulp = a->half_ulp;
    if (b->rounded && b->half_ulp > ulp) ulp = b->half_ulp;
    double scale = fabs(b->value) > 1 ? fabs(b->value) : 1, bound = tol * scale;
    if (ulp < bound) bound = ulp;
    return fabs(a->value - b->value) <= bound;
}
