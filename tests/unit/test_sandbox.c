/* The process jail, driven with /bin/sh scripts (fast to start): what a run
 * sees (descriptors, environment, ids, limits, directory), what it cannot do
 * (write outside its directory, outlive its deadline, leave processes
 * behind), and that a batch's results do not depend on -j. Checks that need
 * a namespace the level lacks (the kernel refused it, or the level avoids it)
 * are TAP skips with the reason, never faked. Opening must work: without
 * namespaces the sandbox falls back, so a failure to open is a failure. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "proc_scan.h"
#include "sandbox_run.h"
#include "sandbox/sandbox.h"
#include "util/strbuf.h"

static char marker[64]; /* in every run's argv ($0), to find its processes */
static char tmp_root[256];

static int open_sh(sandbox *sb, double timeout, unsigned avoid_ns) {
    const char *args[] = {"-c", "eval \"$(cat <&3)\"", marker, NULL};
    sandbox_limits lim = sandbox_default_limits();
    lim.timeout = timeout;
    lim.avoid_ns = avoid_ns;
    gerr e = {0};
    int rc = sandbox_open(sb, "/bin/sh", args, NULL, &lim, "exit 0", &e);
    if (rc) printf("#   sandbox_open: %s\n", e.msg);
    CHECK_EQ_INT(rc, 0);
    return rc;
}

static sandbox_result run1(const sandbox *sb, const char *script) { return sandbox_run_one(sb, script); }

static int uid_baseline; /* processes of the runs' uid before any run */

/* Without a user namespace, all runs share their uid's process limit, and
 * killed processes stay zombies until the system's init reaps them: wait
 * for that, as a later run would have to (set-up retries cover it there). */
static void settle(const sandbox *sb) {
    if (sb->ns & SANDBOX_NS_USER) return;
    for (int i = 0; i < 60 && proc_count(NULL, sb->uid) > uid_baseline; i++) usleep(50 * 1000);
}

/* Without a PID namespace, killed processes vanish a moment after the kill. */
static int processes_left(const char *what) {
    int n = proc_count(what, 0);
    for (int i = 0; i < 40 && n > 0; i++) {
        usleep(50 * 1000);
        n = proc_count(what, 0);
    }
    return n;
}

static void test_basics(const sandbox *sb) {
    TEST("a run: exit status, report channel, output head, stdin empty");
    sandbox_result r = run1(sb, "echo hello; printf 'to-the-parent' >&4; read x || printf ':eof' >&4; exit 3");
    CHECK(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 3);
    CHECK_EQ_STR(r.report, "to-the-parent:eof");
    CHECK_EQ_STR(r.output, "hello\n");
    CHECK(!r.timed_out);
    CHECK(!sandbox_exited_ok(&r));
    r = run1(sb, "exit 0");
    CHECK(sandbox_exited_ok(&r));

    TEST("a run's output is kept up to its cap, and the run is not held up by more");
    r = run1(sb, "i=0; while [ $i -lt 2000 ]; do echo 0123456789; i=$((i+1)); done; printf done >&4");
    CHECK(sandbox_exited_ok(&r));
    CHECK_EQ_INT(r.output_len, SANDBOX_OUTPUT_CAP);
    CHECK_EQ_STR(r.report, "done");

    TEST("descriptors: only 0-4 are open in the program");
    r = run1(sb, "ls /proc/self/fd >&4 2>/dev/null || ls /dev/fd >&4");
    /* ls itself holds one more for the directory it lists */
    CHECK(!strncmp(r.report, "0\n1\n2\n3\n4\n", 10));
    CHECK(strlen(r.report) <= 12);
}

static void test_environment(const sandbox *sb) {
    TEST("the environment is built from nothing: a secret of the parent is not there");
    setenv("GRPO_TEST_SECRET", "hunter2-sandbox", 1);
    sandbox_result r = run1(sb, "env | sort | tr '\\n' ' ' >&4");
    CHECK(strstr(r.report, "hunter2") == NULL);
    CHECK(strstr(r.report, "GRPO_TEST_SECRET") == NULL);
    CHECK(strstr(r.report, "PATH=/usr/bin:/bin ") != NULL);
    CHECK(strstr(r.report, "LANG=C.UTF-8 ") != NULL);
    printf("#   environment: %s\n", r.report);
    unsetenv("GRPO_TEST_SECRET");

    TEST("HOME and TMPDIR are the run's own directory, its cwd, removed afterwards");
    int before = dir_count(tmp_root, "grpo-sandbox-");
    r = run1(sb, "[ \"$HOME\" = \"$(pwd)\" ] && [ \"$TMPDIR\" = \"$HOME\" ] && echo hi > f && cat f >&4 && pwd >&4");
    CHECK(sandbox_exited_ok(&r));
    CHECK(!strncmp(r.report, "hi\n", 3));
    char *dir = r.report + 3;
    dir[strcspn(dir, "\n")] = 0;
    CHECK(!strncmp(dir, tmp_root, strlen(tmp_root)));
    CHECK(strstr(dir, "/grpo-sandbox-") != NULL);
    CHECK(!path_exists(dir));
    CHECK_EQ_INT(dir_count(tmp_root, "grpo-sandbox-"), before);
}

static void test_identity_and_limits(const sandbox *sb) {
    TEST("no capabilities, no new privileges; root runs as nobody");
    sandbox_result r = run1(sb, "grep -E '^(CapEff|CapPrm|NoNewPrivs)' /proc/self/status | tr -d '\\t' | tr '\\n' ' ' >&4; id -u >&4");
    CHECK(strstr(r.report, "CapPrm:0000000000000000") != NULL);
    CHECK(strstr(r.report, "CapEff:0000000000000000") != NULL);
    CHECK(strstr(r.report, "NoNewPrivs:1") != NULL);
    char want_uid[32];
    snprintf(want_uid, sizeof want_uid, " %u\n", geteuid() == 0 ? 65534u : (unsigned)geteuid());
    CHECK(strstr(r.report, want_uid) != NULL);
    printf("#   %s", r.report);

    TEST("rlimits: open files, processes, file size, core files");
    r = run1(sb, "grep -E '^Max (address space|cpu time|processes|file size|open files|core)' /proc/self/limits"
                 " | awk '{printf \"%s \", $(NF-2)}' >&4");
    /* in the order of /proc/self/limits: cpu (1s deadline + 1), file size, core, processes, open files, AS */
    CHECK_EQ_STR(r.report, "2 1048576 0 32 64 1073741824 ");
    r = run1(sb, "head -c 2000000 /dev/zero > big; s=$?; printf '%s' $(wc -c < big) >&4; exit $s");
    CHECK(!sandbox_exited_ok(&r));
    CHECK_EQ_STR(r.report, "1048576");
}

static void test_containment(const sandbox *sb, double timeout) {
    char script[512];
    TEST("an endless loop is killed at the deadline");
    double t0 = now_seconds();
    sandbox_result r = run1(sb, "while :; do :; done");
    double took = now_seconds() - t0;
    CHECK(r.timed_out);
    CHECK(!sandbox_exited_ok(&r));
    CHECK(took >= timeout && took < timeout + 1.5);
    printf("#   deadline %.1fs, the run took %.2fs\n", timeout, took);

    TEST("a fork bomb is contained and leaves no process behind");
    t0 = now_seconds();
    r = run1(sb, "b() { b | b & }; b; sleep 5");
    took = now_seconds() - t0;
    CHECK(r.timed_out);
    CHECK(took < timeout + 1.5);
    CHECK_EQ_INT(processes_left(marker), 0);
    settle(sb);

    TEST("processes left running in the run's group die with it");
    r = run1(sb, "sleep 1000 & sleep 1001 & exit 0");
    CHECK(sandbox_exited_ok(&r));
    CHECK_EQ_INT(processes_left(marker), 0);

    TEST("a process that leaves the process group dies with the run (PID namespace)");
    if (sb->ns & SANDBOX_NS_PID) {
        snprintf(script, sizeof script, "setsid /bin/sh -c 'sleep 1000' %s-escaped & sleep 0.2; exit 0", marker);
        r = run1(sb, script);
        CHECK(sandbox_exited_ok(&r));
        CHECK_EQ_INT(processes_left(marker), 0);
    } else {
        SKIP("no PID namespace at this isolation level");
    }
}

static void test_file_system(const sandbox *sb) {
    char script[1024], outside[300], own_dir[300], own_file[400];
    TEST("writes outside the run's directory fail and leave nothing");
    snprintf(outside, sizeof outside, "/tmp/grpo-sandbox-escape-%d", (int)getpid());
    snprintf(own_dir, sizeof own_dir, "%s/open-dir", tmp_root);
    snprintf(own_file, sizeof own_file, "%s/escaped", own_dir);
    unlink(outside);
    CHECK(mkdir(own_dir, 0777) == 0 || errno == EEXIST);
    chmod(own_dir, 0777); /* writable by anyone: only the read-only mount protects it */
    if (sb->ns & SANDBOX_NS_MOUNT) {
        snprintf(script, sizeof script, "echo x > %s; a=$?; echo x > %s; b=$?; printf '%%s %%s' $a $b >&4", outside,
                 own_file);
        sandbox_result r = run1(sb, script);
        int a = -1, b = -1;
        CHECK_EQ_INT(sscanf(r.report, "%d %d", &a, &b), 2);
        CHECK(a > 0 && b > 0); /* both redirections failed */
        CHECK(!path_exists(outside));
        CHECK(!path_exists(own_file));
    } else {
        SKIP("no mount namespace at this isolation level");
    }
    unlink(own_file);
    rmdir(own_dir);

    TEST("as root, runs cannot write where only root may, at any isolation level");
    if (sb->as_root) {
        snprintf(own_dir, sizeof own_dir, "%s/root-only", tmp_root);
        snprintf(own_file, sizeof own_file, "%s/escaped", own_dir);
        CHECK(mkdir(own_dir, 0755) == 0);
        snprintf(script, sizeof script, "echo x > %s", own_file);
        sandbox_result r = run1(sb, script);
        CHECK(!sandbox_exited_ok(&r));
        CHECK(!path_exists(own_file));
        unlink(own_file);
        rmdir(own_dir);
    } else {
        SKIP("not running as root");
    }

    TEST("the run's directory is a small tmpfs (mount namespace)");
    if (sb->ns & SANDBOX_NS_MOUNT) {
        sandbox_result r = run1(sb, "i=0; while [ $i -lt 40 ]; do head -c 1000000 /dev/zero > f$i || exit 9; "
                                    "i=$((i+1)); done; exit 0");
        CHECK(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 9);
    } else {
        SKIP("no mount namespace at this isolation level");
    }
}

static void test_batch(const sandbox *sb) {
    TEST("a batch fills results in input order whatever -j");
    const char *scripts[] = {"sleep 0.3; exit 1", "exit 2", "sleep 0.1; printf a >&4; exit 3", "exit 4",
                             "sleep 0.2; exit 5", "printf b >&4; exit 6", "while :; do :; done"};
    enum { N = sizeof scripts / sizeof scripts[0] };
    size_t len[N];
    for (size_t i = 0; i < N; i++) len[i] = strlen(scripts[i]);
    sandbox_result one[N], three[N];
    gerr e = {0};
    CHECK_EQ_INT(sandbox_run_batch(sb, scripts, len, N, 1, one, &e), 0);
    CHECK_EQ_INT(sandbox_run_batch(sb, scripts, len, N, 3, three, &e), 0);
    for (size_t i = 0; i + 1 < N; i++) {
        CHECK(WIFEXITED(one[i].status) && WEXITSTATUS(one[i].status) == (int)i + 1);
        CHECK_EQ_INT(one[i].status, three[i].status);
        CHECK_EQ_INT(one[i].report_len, three[i].report_len);
    }
    CHECK(one[N - 1].timed_out && three[N - 1].timed_out);
    CHECK(one[2].report_len == 1 && one[2].report[0] == 'a');
}

static void make_tree(const char *root) {
    char p[4096];
    CHECK(mkdir(root, 0755) == 0);
    snprintf(p, sizeof p, "%s", root);
    for (int depth = 0; depth < 300; depth++) { /* deeper than a path may be long */
        size_t len = strlen(p);
        if (len > 3000) {
            CHECK(chdir(p) == 0);
            snprintf(p, sizeof p, ".");
            len = 1;
        }
        snprintf(p + len, sizeof p - len, "/d%03d", depth);
        CHECK(mkdir(p, 0755) == 0);
    }
}

static void test_remove_tree(void) {
    TEST("remove_tree: deep, locked and linked trees go, what links point at stays");
    char root[300], outside[300], p[400], start[4096];
    CHECK(getcwd(start, sizeof start) != NULL);
    snprintf(root, sizeof root, "%s/tree", tmp_root);
    snprintf(outside, sizeof outside, "%s/keep-me", tmp_root);
    FILE *f = fopen(outside, "w");
    CHECK(f != NULL);
    if (f) fclose(f);
    make_tree(root);
    CHECK(chdir(start) == 0);
    snprintf(p, sizeof p, "%s/locked", root);
    CHECK(mkdir(p, 0755) == 0);
    snprintf(p, sizeof p, "%s/locked/file", root);
    f = fopen(p, "w");
    if (f) fclose(f);
    snprintf(p, sizeof p, "%s/locked", root);
    CHECK(chmod(p, 0) == 0);
    snprintf(p, sizeof p, "%s/link-out", root);
    CHECK(symlink(tmp_root, p) == 0);
    snprintf(p, sizeof p, "%s/link-file", root);
    CHECK(symlink(outside, p) == 0);
    CHECK_EQ_INT(sandbox_remove_tree(root), 0);
    CHECK(!path_exists(root));
    CHECK(path_exists(outside));
    unlink(outside);
    CHECK_EQ_INT(sandbox_remove_tree(root), 0); /* already gone: fine */
}

static void test_open_errors(void) {
    TEST("sandbox_open: a program that is not there, or does not work inside");
    sandbox sb;
    gerr e = {0};
    sandbox_limits lim = sandbox_default_limits();
    CHECK_EQ_INT(sandbox_open(&sb, "grpo-no-such-program", NULL, NULL, &lim, "", &e), EX_UNAVAILABLE);
    CHECK(strstr(e.msg, "grpo-no-such-program: not found on PATH") != NULL);
    CHECK_EQ_INT(sandbox_open(&sb, "/bin/false", NULL, NULL, &lim, "", &e), EX_UNAVAILABLE);
    CHECK(strstr(e.msg, "/bin/false does not work in the sandbox") != NULL);
    CHECK(strstr(e.msg, "exited with status 1") != NULL);
    lim.timeout = 0;
    CHECK_EQ_INT(sandbox_open(&sb, "/bin/true", NULL, NULL, &lim, "", &e), EX_USAGE);

    TEST("sandbox_open: a name is looked up on PATH and made absolute");
    lim = sandbox_default_limits();
    const char *args[] = {"-c", "exit 0", NULL};
    CHECK_EQ_INT(sandbox_open(&sb, "sh", args, NULL, &lim, "", &e), 0);
    CHECK(sb.program && sb.program[0] == '/');
    CHECK(sb.argv[0] && !strcmp(sb.argv[0], sb.program) && !strcmp(sb.argv[2], "exit 0") && !sb.argv[3]);
    sandbox_close(&sb);
}

int main(void) {
    snprintf(marker, sizeof marker, "grpo-sandbox-test-%d", (int)getpid());
    snprintf(tmp_root, sizeof tmp_root, "/tmp/grpo-test-sandbox-%d", (int)getpid());
    if (mkdir(tmp_root, 0755)) {
        perror(tmp_root);
        return 1;
    }
    setenv("TMPDIR", tmp_root, 1);
    double timeout = 1.0;
    /* Everything the kernel grants, then the weakest level (what a
     * container without namespaces gets): the same runs must hold there
     * too, apart from the checks that need a namespace. */
    const unsigned avoid[] = {0, SANDBOX_NS_USER | SANDBOX_NS_PID | SANDBOX_NS_NET | SANDBOX_NS_MOUNT};
    for (size_t level = 0; level < sizeof avoid / sizeof avoid[0]; level++) {
        sandbox sb;
        TEST(level ? "sandbox_open with /bin/sh, no namespaces" : "sandbox_open with /bin/sh");
        if (open_sh(&sb, timeout, avoid[level])) return check_done();
        printf("# isolation: %s%s%s%s; missing: %s\n", sb.ns & SANDBOX_NS_USER ? "user " : "",
               sb.ns & SANDBOX_NS_PID ? "pid " : "", sb.ns & SANDBOX_NS_NET ? "net " : "",
               sb.ns & SANDBOX_NS_MOUNT ? "mount" : "", sb.missing[0] ? sb.missing : "nothing");
        if (level) CHECK_EQ_INT(sb.ns, 0);
        uid_baseline = proc_count(NULL, sb.uid);
        test_basics(&sb);
        test_environment(&sb);
        test_identity_and_limits(&sb);
        test_containment(&sb, timeout);
        test_file_system(&sb);
        test_batch(&sb);
        sandbox_close(&sb);
    }
    test_remove_tree();
    test_open_errors();
    TEST("no run directory is left");
    CHECK_EQ_INT(dir_count(tmp_root, "grpo-sandbox-"), 0);
    CHECK_EQ_INT(sandbox_remove_tree(tmp_root), 0);
    return check_done();
}
