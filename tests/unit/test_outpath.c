/* Output paths: what is written in place and what atomically, the checks
 * made before any work, and the removal of stale temporaries. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "helpers.h"
#include "io/outpath.h"
#include "io/outstream.h"

static char root[] = "/tmp/grpo-test-outpath-XXXXXX";

static const char *at(const char *rel) {
    static char buf[4][600];
    static int next;
    char *b = buf[next++ % 4];
    snprintf(b, sizeof buf[0], "%s/%s", root, rel);
    return b;
}

static int touch(const char *path) {
    FILE *f = fopen(path, "w");
    return f && fputs("x", f) >= 0 && fclose(f) == 0;
}

static int exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

/* A PID that is not alive: a child that has exited and been reaped. */
static pid_t dead_pid(void) {
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    if (pid < 0) return -1;
    waitpid(pid, NULL, 0);
    return pid;
}

int main(void) {
    if (!mkdtemp(root)) {
        printf("# mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    gerr e = {0};
    outpath_target t;

    TEST("resolve: a missing path and a regular file are atomic, a directory is flagged");
    CHECK_EQ_INT(outpath_resolve(at("new.jsonl"), &t, &e), 0);
    CHECK(!t.in_place && !t.exists && !t.is_dir);
    outpath_target_free(&t);
    CHECK(touch(at("file")));
    CHECK_EQ_INT(outpath_resolve(at("file"), &t, &e), 0);
    CHECK(!t.in_place && t.exists && !t.is_dir);
    outpath_target_free(&t);
    CHECK_EQ_INT(outpath_resolve(root, &t, &e), 0);
    CHECK(t.is_dir && !t.in_place);
    outpath_target_free(&t);

    TEST("resolve: a chain of relative symlinks ends at the target in another directory");
    CHECK(mkdir(at("other"), 0755) == 0);
    CHECK(touch(at("other/target")));
    CHECK(symlink("other/target", at("link1")) == 0);
    CHECK(symlink("link1", at("link2")) == 0);
    CHECK_EQ_INT(outpath_resolve(at("link2"), &t, &e), 0);
    CHECK(!t.in_place && t.target && strstr(t.target, "other/target"));
    outpath_target_free(&t);
    CHECK(symlink("loop", at("loop")) == 0);
    CHECK_EQ_INT(outpath_resolve(at("loop"), &t, &e), EX_CANTCREAT);

    TEST("resolve: /dev/null, a FIFO and /dev/stdout are written in place");
    CHECK_EQ_INT(outpath_resolve("/dev/null", &t, &e), 0);
    CHECK(t.in_place && t.own_fd < 0);
    outpath_target_free(&t);
    CHECK(mkfifo(at("fifo"), 0644) == 0);
    CHECK_EQ_INT(outpath_resolve(at("fifo"), &t, &e), 0);
    CHECK(t.in_place);
    outpath_target_free(&t);
    CHECK_EQ_INT(outpath_resolve("/dev/stdout", &t, &e), 0);
    CHECK(t.in_place && t.own_fd == 1);
    outpath_target_free(&t);
    CHECK(symlink("/proc/self/fd/2", at("to-fd2")) == 0);
    CHECK_EQ_INT(outpath_resolve(at("to-fd2"), &t, &e), 0);
    CHECK(t.in_place && t.own_fd == 2);
    outpath_target_free(&t);

    TEST("check: a missing directory is 73 for a file, an appended file and a directory, naming the path");
    const outpath_kind kinds[] = {OUTPATH_FILE, OUTPATH_APPEND, OUTPATH_DIR};
    for (int i = 0; i < 3; i++) {
        e = (gerr){0};
        CHECK_EQ_INT(outpath_check(at("no/such/out"), kinds[i], &e), EX_CANTCREAT);
        CHECK(strstr(e.msg, "no/such/out: cannot create") && !strstr(e.msg, ".tmp-"));
    }
    CHECK(!exists(at("no")));

    TEST("check: a directory where a file goes, a file where a directory goes: 73");
    CHECK_EQ_INT(outpath_check(at("other"), OUTPATH_FILE, &e), EX_CANTCREAT);
    CHECK(strstr(e.msg, "is a directory"));
    CHECK_EQ_INT(outpath_check(at("other"), OUTPATH_APPEND, &e), EX_CANTCREAT);
    CHECK_EQ_INT(outpath_check(at("file"), OUTPATH_DIR, &e), EX_CANTCREAT);
    CHECK(strstr(e.msg, "not a directory"));
    CHECK_EQ_INT(outpath_check(at("fifo"), OUTPATH_DIR, &e), EX_CANTCREAT);
    CHECK_EQ_INT(outpath_check(at("file/x"), OUTPATH_FILE, &e), EX_CANTCREAT);
    CHECK_EQ_INT(outpath_check(".", OUTPATH_DIR, &e), EX_USAGE);
    CHECK_EQ_INT(outpath_check("a/..//", OUTPATH_DIR, &e), EX_USAGE);
    CHECK_EQ_INT(outpath_check("/", OUTPATH_DIR, &e), EX_USAGE);

    TEST("check: what can be written passes, creating nothing");
    CHECK_EQ_INT(outpath_check(NULL, OUTPATH_FILE, &e), 0);
    CHECK_EQ_INT(outpath_check("-", OUTPATH_FILE, &e), 0);
    CHECK_EQ_INT(outpath_check(at("new.jsonl"), OUTPATH_FILE, &e), 0);
    CHECK_EQ_INT(outpath_check(at("ckpt/"), OUTPATH_DIR, &e), 0);
    CHECK_EQ_INT(outpath_check(at("other"), OUTPATH_DIR, &e), 0);
    CHECK_EQ_INT(outpath_check(at("link2"), OUTPATH_FILE, &e), 0);
    CHECK_EQ_INT(outpath_check(at("fifo"), OUTPATH_FILE, &e), 0); /* does not wait for a reader */
    CHECK_EQ_INT(outpath_check("/dev/null", OUTPATH_APPEND, &e), 0);
    CHECK(!exists(at("new.jsonl")) && !exists(at("ckpt")));

    TEST("check: a descriptor open only for reading is refused");
    int rfd = open("/dev/null", O_RDONLY);
    char fdpath[64];
    snprintf(fdpath, sizeof fdpath, "/dev/fd/%d", rfd);
    CHECK(rfd >= 0);
    CHECK_EQ_INT(outpath_check(fdpath, OUTPATH_FILE, &e), EX_CANTCREAT);
    close(rfd);

    TEST("write_file_atomic through a symlink replaces the target, the link stays");
    CHECK_EQ_INT(write_file_atomic(at("link2"), "hello\n", 6, &e), 0);
    struct stat st;
    CHECK(lstat(at("link2"), &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(lstat(at("link1"), &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(stat(at("other/target"), &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 6);

    TEST("write_file_atomic to a FIFO writes into it; to /dev/null leaves it a device");
    int pfd = open(at("fifo"), O_RDONLY | O_NONBLOCK); /* a reader, so the writer's open returns */
    CHECK(pfd >= 0);
    CHECK_EQ_INT(write_file_atomic(at("fifo"), "abc", 3, &e), 0);
    char got[8] = {0};
    CHECK_EQ_INT(read(pfd, got, sizeof got), 3);
    CHECK_EQ_STR(got, "abc");
    close(pfd);
    CHECK(lstat(at("fifo"), &st) == 0 && S_ISFIFO(st.st_mode));
    CHECK_EQ_INT(write_file_atomic("/dev/null", "abc", 3, &e), 0);
    CHECK(lstat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode));

    TEST("a missing directory: outstream says 73 and names the user's path");
    e = (gerr){0};
    CHECK_EQ_INT(write_file_atomic(at("no/such/out"), "x", 1, &e), EX_CANTCREAT);
    CHECK(strstr(e.msg, "no/such/out") && !strstr(e.msg, ".tmp-"));

    TEST("stale temporaries: a dead writer's go, a live one's and ours stay");
    pid_t dead = dead_pid();
    CHECK(dead > 0);
    char name[128];
    snprintf(name, sizeof name, ".out.jsonl.tmp-%ld", (long)dead);
    char dead_file[600];
    snprintf(dead_file, sizeof dead_file, "%s", at(name));
    CHECK(touch(dead_file));
    snprintf(name, sizeof name, ".out.jsonl.tmp-%ld", (long)getppid());
    char live_file[600];
    snprintf(live_file, sizeof live_file, "%s", at(name));
    CHECK(touch(live_file));
    snprintf(name, sizeof name, ".out.jsonl.tmp-%ld", (long)getpid());
    char own_file[600];
    snprintf(own_file, sizeof own_file, "%s", at(name));
    CHECK(touch(own_file));
    snprintf(name, sizeof name, ".out.jsonl.tmp-%ld-x", (long)dead);
    char other_shape[600];
    snprintf(other_shape, sizeof other_shape, "%s", at(name));
    CHECK(touch(other_shape));
    outpath_remove_stale(at("out.jsonl"));
    CHECK(!exists(dead_file));
    CHECK(exists(live_file));
    CHECK(exists(own_file));
    CHECK(exists(other_shape));

    TEST("stale temporaries: one older than the boot goes even when its PID is alive");
    struct timeval old[2] = {{1000, 0}, {1000, 0}};
    CHECK(utimes(live_file, old) == 0);
    outpath_remove_stale(at("out.jsonl"));
    CHECK(!exists(live_file));
    CHECK(exists(own_file));

    TEST("stale temporaries: a dead writer's checkpoint directory goes whole");
    snprintf(name, sizeof name, ".ckpt-1.tmp-%ld", (long)dead);
    char dead_dir[600], inside[700];
    snprintf(dead_dir, sizeof dead_dir, "%s", at(name));
    snprintf(inside, sizeof inside, "%s/grpo", dead_dir);
    CHECK(mkdir(dead_dir, 0755) == 0 && mkdir(inside, 0755) == 0);
    snprintf(inside, sizeof inside, "%s/grpo/state.json", dead_dir);
    CHECK(touch(inside));
    outpath_remove_stale(at("ckpt-1/"));
    CHECK(!exists(dead_dir));

    TEST("stale temporaries: an aside checkpoint stays while NAME is missing, goes once it exists");
    snprintf(name, sizeof name, ".ckpt-1.old-%ld", (long)dead);
    char aside[600];
    snprintf(aside, sizeof aside, "%s", at(name));
    CHECK(mkdir(aside, 0755) == 0);
    outpath_remove_stale(at("ckpt-1"));
    CHECK(exists(aside));
    CHECK(mkdir(at("ckpt-1"), 0755) == 0);
    outpath_remove_stale(at("ckpt-1"));
    CHECK(!exists(aside));

    TEST("opening an output removes its stale temporaries");
    CHECK(touch(dead_file));
    outstream o;
    CHECK_EQ_INT(outstream_open(&o, at("out.jsonl"), 0, &e), 0);
    CHECK(!exists(dead_file));
    CHECK_EQ_INT(outstream_commit(&o, &e), 0);

    unlink(own_file);
    remove_tree(root);
    return check_done();
}
