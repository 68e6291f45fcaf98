/* The small shared helpers: the clock, Welford's mean and std, the JSON
 * number writers, growable arrays and idset as a map to group numbers. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "util/clock.h"
#include "util/idset.h"
#include "util/stats.h"
#include "util/strbuf.h"
#include "util/vec.h"

/* float64 two-pass reference: unbiased when sample, else population. */
static void two_pass(const double *v, size_t n, bool sample, double *mean, double *std) {
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += v[i];
    *mean = sum / (double)n;
    double ss = 0;
    for (size_t i = 0; i < n; i++) ss += (v[i] - *mean) * (v[i] - *mean);
    *std = sqrt(ss / (double)(sample ? n - 1 : n));
}

static double unit_rand(unsigned long long *x) {
    *x = *x * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*x >> 11) * 0x1.0p-53;
}

/* rel: the relative error allowed on the std; Welford's grows with
 * |mean| / std (each update rounds at the mean's scale). */
static void welford_is_two_pass(const double *v, size_t n, double rel) {
    welford w = {0};
    for (size_t i = 0; i < n; i++) welford_push(&w, v[i]);
    double mean, sd, sd_pop;
    two_pass(v, n, true, &mean, &sd);
    two_pass(v, n, false, &mean, &sd_pop);
    CHECK_EQ_INT(w.n, n);
    CHECK_NEAR(welford_mean(&w), mean, 1e-12 * fmax(1, fabs(mean)));
    CHECK_NEAR(welford_std(&w), sd, rel * sd);
    CHECK_NEAR(welford_std_pop(&w), sd_pop, rel * sd_pop);
}

static const char *num(double v) {
    static char out[64]; /* one call per CHECK_EQ_STR */
    strbuf b = {0};
    sb_json_number(&b, v);
    snprintf(out, sizeof out, "%s", b.data);
    sb_free(&b);
    return out;
}

static const char *pyf(double v, bool as_float) {
    static char out[64];
    strbuf b = {0};
    sb_json_pyfloat(&b, v, as_float);
    snprintf(out, sizeof out, "%s", b.data);
    sb_free(&b);
    return out;
}

int main(void) {
    TEST("now_seconds is monotonic and moves; wall_seconds is unix time; CPU clocks count");
    {
        double t0 = now_seconds(), prev = t0, cpu0 = cpu_seconds(), th0 = thread_cpu_seconds();
        bool back = false;
        volatile double sink = 0;
        for (int i = 0; i < 200000; i++) {
            double t = now_seconds();
            back = back || t < prev;
            prev = t;
            sink += sqrt((double)i);
        }
        CHECK(!back);
        CHECK(t0 > 0 && prev > t0);
        CHECK(wall_seconds() > 1.6e9); /* after 2020 */
        CHECK(cpu_seconds() > cpu0);
        CHECK(thread_cpu_seconds() > th0);
        (void)sink;
    }

    TEST("Welford: empty and one value");
    {
        welford w = {0};
        CHECK(isnan(welford_mean(&w)) && isnan(welford_std(&w)) && isnan(welford_std_pop(&w)));
        welford_push(&w, 2.5);
        CHECK(welford_mean(&w) == 2.5);
        CHECK(isnan(welford_std(&w)));
        CHECK(welford_std_pop(&w) == 0);
    }

    TEST("Welford: equal values give exactly their value and std 0 (3 x 0.1)");
    {
        welford w = {0};
        for (int i = 0; i < 3; i++) welford_push(&w, 0.1);
        CHECK(welford_mean(&w) == 0.1);
        CHECK(welford_std(&w) == 0);
    }

    TEST("Welford matches a float64 two-pass mean and std (small, uniform, large offset)");
    {
        double small[] = {1, 2, 3, 4};
        welford_is_two_pass(small, 4, 1e-15);
        double u[1000], off[1000];
        unsigned long long seed = 11;
        for (int i = 0; i < 1000; i++) {
            u[i] = unit_rand(&seed) * 4 - 1;
            off[i] = 1e9 + unit_rand(&seed); /* sum of squares would lose every digit here */
        }
        welford_is_two_pass(u, 1000, 1e-13);
        welford_is_two_pass(off, 1000, 1e-6); /* |mean| / std = 3e9 */
        double mean, sd, sum = 0, sum_sq = 0;
        two_pass(off, 1000, true, &mean, &sd);
        CHECK(sd > 0.2 && sd < 0.4); /* the reference itself sees the spread of U(0,1) */
        for (int i = 0; i < 1000; i++) sum += off[i], sum_sq += off[i] * off[i];
        double naive = (sum_sq - sum * sum / 1000) / 999; /* what Welford replaced in grpo-update */
        CHECK(!(fabs(naive - sd * sd) < 0.5 * sd * sd));
    }

    TEST("sb_json_number: 0, -0, integers, shortest round trip, non-finite as null");
    {
        CHECK_EQ_STR(num(0), "0");
        CHECK_EQ_STR(num(-0.0), "0");
        CHECK_EQ_STR(num(1), "1");
        CHECK_EQ_STR(num(-42), "-42");
        CHECK_EQ_STR(num(100), "100");
        CHECK_EQ_STR(num(1e16), "10000000000000000");
        CHECK_EQ_STR(num(1e17), "1e+17");
        CHECK_EQ_STR(num(0.1), "0.1");
        CHECK_EQ_STR(num(1.0 / 3), "0.3333333333333333");
        CHECK_EQ_STR(num(0.1 + 0.2), "0.30000000000000004");
        CHECK_EQ_STR(num(1e-300), "1e-300");
        CHECK_EQ_STR(num(-2.5e-7), "-2.5e-07");
        CHECK_EQ_STR(num(5e-324), "5e-324"); /* subnormal: fewer digits */
        CHECK(strtod(num(DBL_MAX), NULL) == DBL_MAX);
        CHECK_EQ_STR(num(NAN), "null");
        CHECK_EQ_STR(num(INFINITY), "null");
        CHECK_EQ_STR(num(-INFINITY), "null");
    }

    TEST("sb_json_pyfloat writes what Python's json.dumps writes for a float");
    {
        CHECK_EQ_STR(pyf(0, false), "0.0");
        CHECK_EQ_STR(pyf(-0.0, false), "-0.0");
        CHECK_EQ_STR(pyf(1, false), "1.0");
        CHECK_EQ_STR(pyf(100000, false), "100000.0");
        CHECK_EQ_STR(pyf(1e16, false), "1e+16");
        CHECK_EQ_STR(pyf(0.05, false), "0.05");
        CHECK_EQ_STR(pyf(0.0001, false), "0.0001");
        CHECK_EQ_STR(pyf(1e-5, false), "1e-05");
        CHECK_EQ_STR(pyf(1e-300, false), "1e-300");
        CHECK_EQ_STR(pyf(1.0 / 3, false), "0.3333333333333333");
        CHECK_EQ_STR(pyf((double)1e-6f, true), "1e-06"); /* a float's shortest digits */
        CHECK_EQ_STR(pyf(NAN, false), "null");
    }

    TEST("vec_reserve grows to what is asked, keeps the contents, and leaves a big enough array alone");
    {
        int *v = NULL;
        size_t cap = 0, n = 0;
        for (int i = 0; i < 1000; i++) {
            v = vec_reserve(v, &cap, n + 1, sizeof *v);
            v[n++] = i;
        }
        CHECK(cap >= 1000 && cap < 2048);
        bool same = true;
        for (int i = 0; i < 1000; i++) same = same && v[i] == i;
        CHECK(same);
        int *before = v;
        v = vec_reserve(v, &cap, 10, sizeof *v);
        CHECK(v == before);
        free(v);
    }

    TEST("idset_index numbers ids in order of first appearance");
    {
        idset s;
        idset_init(&s);
        CHECK_EQ_INT(idset_index(&s, "a", 1), 0);
        CHECK_EQ_INT(idset_index(&s, "b", 1), 1);
        CHECK_EQ_INT(idset_index(&s, "a", 1), 0);
        CHECK_EQ_INT(idset_index(&s, "", 0), 2);
        char id[32];
        bool ok = true;
        for (int i = 0; i < 5000; i++) { /* past several rehashes */
            int len = snprintf(id, sizeof id, "p%d", i);
            ok = ok && idset_index(&s, id, (size_t)len) == (size_t)i + 3;
        }
        for (int i = 0; i < 5000; i += 7) {
            int len = snprintf(id, sizeof id, "p%d", i);
            ok = ok && idset_index(&s, id, (size_t)len) == (size_t)i + 3;
        }
        CHECK(ok);
        CHECK_EQ_INT(idset_index(&s, "b", 1), 1);
        idset_free(&s);
    }
    return check_done();
}
