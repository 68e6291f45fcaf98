/* A tiny TAP producer for C unit tests: one "ok N - name" or "not ok N - name"
 * per CHECK group ("ok N - name # SKIP reason" for one that SKIP marked), and
 * a non-zero exit when anything failed. tests/run-suites adds the counts of
 * every suite into the closing "N passed, N failed" line. */
#ifndef GRPO_CHECK_H
#define GRPO_CHECK_H

#include <math.h>
#include <stdio.h>
#include <string.h>

static int check_test_no, check_failed_tests, check_current_failed, check_current_skipped;
static const char *check_current_name;
static char check_skip_reason[256];

static inline void check_end_test(void) {
    if (!check_current_name) return;
    check_test_no++;
    if (check_current_failed) check_failed_tests++;
    if (check_current_skipped && !check_current_failed)
        printf("ok %d - %s # SKIP %s\n", check_test_no, check_current_name, check_skip_reason);
    else
        printf("%sok %d - %s\n", check_current_failed ? "not " : "", check_test_no, check_current_name);
    fflush(stdout);
    check_current_name = NULL;
}

/* Starts a named test; the previous one is reported. */
#define TEST(name) (check_end_test(), check_current_name = (name), check_current_failed = 0, check_current_skipped = 0)

/* The current test does not apply on this machine (a facility it truly
 * lacks, such as a namespace the kernel refuses): reported as a TAP skip
 * with the reason, unless one of its checks failed. */
#define SKIP(reason)                                                                     \
    (snprintf(check_skip_reason, sizeof check_skip_reason, "%s", (reason)),              \
     check_current_skipped = 1)

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            printf("#   %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);          \
            check_current_failed = 1;                                                    \
        }                                                                                \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                               \
    do {                                                                                 \
        long long check_a = (long long)(a), check_b = (long long)(b);                    \
        if (check_a != check_b) {                                                        \
            printf("#   %s:%d: %s == %s: %lld != %lld\n", __FILE__, __LINE__, #a, #b,    \
                   check_a, check_b);                                                    \
            check_current_failed = 1;                                                    \
        }                                                                                \
    } while (0)

#define CHECK_EQ_STR(a, b)                                                               \
    do {                                                                                 \
        const char *check_a = (a), *check_b = (b);                                       \
        if (!check_a || !check_b || strcmp(check_a, check_b)) {                          \
            printf("#   %s:%d: %s == %s: \"%s\" != \"%s\"\n", __FILE__, __LINE__, #a, #b, \
                   check_a ? check_a : "(null)", check_b ? check_b : "(null)");          \
            check_current_failed = 1;                                                    \
        }                                                                                \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                            \
    do {                                                                                 \
        double check_a = (a), check_b = (b);                                             \
        if (!(fabs(check_a - check_b) <= (tol))) {                                       \
            printf("#   %s:%d: %s ~ %s: %.17g vs %.17g (tol %g)\n", __FILE__, __LINE__,  \
                   #a, #b, check_a, check_b, (double)(tol));                             \
            check_current_failed = 1;                                                    \
        }                                                                                \
    } while (0)

/* Ends the last test, prints the plan, returns the exit status for main. */
static inline int check_done(void) {
    check_end_test();
    printf("1..%d\n", check_test_no);
    return check_failed_tests ? 1 : 0;
}

#endif
