/* A tiny TAP producer for C unit tests: one "ok N - name" or "not ok N - name"
 * per CHECK group ("ok N - name # SKIP reason" for one that SKIP marked), and
 * a non-zero exit when anything failed. tests/run-suites adds the counts of
 * every suite into the closing "N passed, N failed" line. */
#ifndef GRPO_CHECK_H
#define GRPO_CHECK_H

#include <math.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* CHECK_ABORTS's halves. check_fork: a child whose stderr goes into fd[0],
 * without a core file, with the default actions for SIGSEGV and SIGBUS
 * (AddressSanitizer would report a SEGV and exit 1); -1 when it cannot. */
static inline pid_t check_fork(int fd[2]) {
    fflush(stdout); /* the child must not repeat buffered TAP */
    fflush(stderr);
    if (pipe(fd)) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit no_core = {0, 0};
        (void)setrlimit(RLIMIT_CORE, &no_core);
        signal(SIGSEGV, SIG_DFL);
        signal(SIGBUS, SIG_DFL);
        close(fd[0]);
        if (dup2(fd[1], 2) < 0) _exit(1);
        close(fd[1]);
        return 0;
    }
    close(fd[1]);
    if (pid < 0) close(fd[0]);
    return pid;
}

/* check_killed: the child pid (from check_fork) died of signal sig or alt,
 * and its stderr, read from fd, holds want. */
static inline void check_killed(pid_t pid, int fd, int sig, int alt, const char *want, const char *what,
                                const char *file, int line) {
    if (pid < 0) {
        printf("#   %s:%d: %s: cannot start a child\n", file, line, what);
        check_current_failed = 1;
        return;
    }
    char err[4096], rest[256];
    size_t n = 0;
    ssize_t r;
    while ((r = read(fd, err + n, sizeof err - 1 - n)) > 0) n += (size_t)r;
    err[n] = 0;
    while (read(fd, rest, sizeof rest) > 0) continue; /* the child must not block on a full pipe */
    close(fd);
    int st = 0;
    bool died = waitpid(pid, &st, 0) == pid && WIFSIGNALED(st) && (WTERMSIG(st) == sig || WTERMSIG(st) == alt);
    if (!died || !strstr(err, want)) {
        printf("#   %s:%d: %s: expected death by %s saying \"%s\", got status %d, stderr: %s\n", file, line, what,
               strsignal(sig), want, st, err);
        check_current_failed = 1;
    }
}

/* stmt, run in a child, kills it with sig or alt and says want on stderr ("" for anything). */
#define CHECK_KILLED_BY(stmt, sig, alt, want)                                            \
    do {                                                                                 \
        int check_fd[2];                                                                 \
        pid_t check_pid = check_fork(check_fd);                                          \
        if (check_pid == 0) {                                                            \
            stmt;                                                                        \
            _exit(0);                                                                    \
        }                                                                                \
        check_killed(check_pid, check_fd[0], (sig), (alt), (want), #stmt, __FILE__, __LINE__); \
    } while (0)

/* stmt aborts (an assertion guarding a caller's contract) saying want. */
#define CHECK_ABORTS(stmt, want) CHECK_KILLED_BY(stmt, SIGABRT, SIGABRT, want)

/* stmt faults: it touched memory the process may not. */
#define CHECK_FAULTS(stmt) CHECK_KILLED_BY(stmt, SIGSEGV, SIGBUS, "")

/* Ends the last test, prints the plan, returns the exit status for main. */
static inline int check_done(void) {
    check_end_test();
    printf("1..%d\n", check_test_no);
    return check_failed_tests ? 1 : 0;
}

#endif
