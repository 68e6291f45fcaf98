/* Starting one sandboxed run: the parent prepares everything (directory,
 * pipes, input, argv, environment, limits), clones the child into its new
 * namespaces, writes its user-namespace id maps, and learns from a
 * close-on-exec pipe whether the child reached execve.
 *
 * Between clone and execve the child may only make system calls (the
 * parent can have other threads, whose locks the child inherits held), so
 * everything it needs is laid out beforehand in a child_plan. */
#include "impl.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/clock.h"

#ifndef MOUNT_ATTR_RDONLY /* C libraries older than glibc 2.36 */
struct mount_attr {
    unsigned long long attr_set, attr_clr, propagation, userns_fd;
};
#define MOUNT_ATTR_RDONLY 0x1
#define MOUNT_ATTR_NOSUID 0x2
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif

/* The set-up steps of the child, in order; a failure reports its step. */
enum {
    STEP_SYNC, STEP_SETSID, STEP_PRIVATE, STEP_READONLY, STEP_TMPFS, STEP_CHDIR, STEP_FDS,
    STEP_RLIMIT, STEP_GROUPS, STEP_GID, STEP_UID, STEP_NO_NEW_PRIVS, STEP_PDEATHSIG, STEP_SECCOMP, STEP_INIT, STEP_EXEC,
};
static const char *const step_names[] = {
    [STEP_SYNC] = "waiting for the id maps",
    [STEP_SETSID] = "setsid",
    [STEP_PRIVATE] = "making mounts private",
    [STEP_READONLY] = "making the file systems read-only",
    [STEP_TMPFS] = "mounting the working directory's tmpfs",
    [STEP_CHDIR] = "entering the working directory",
    [STEP_FDS] = "setting up descriptors",
    [STEP_RLIMIT] = "setrlimit",
    [STEP_GROUPS] = "dropping supplementary groups",
    [STEP_GID] = "setresgid",
    [STEP_UID] = "setresuid",
    [STEP_NO_NEW_PRIVS] = "no_new_privs",
    [STEP_PDEATHSIG] = "parent-death signal",
    [STEP_SECCOMP] = "installing the seccomp filter",
    [STEP_INIT] = "starting the program under the namespace's init",
    [STEP_EXEC] = "execve",
};

typedef struct {
    int step, err;
} child_failure;

/* The descriptors of the child, in the order they land on 0..6: the
 * program keeps 0-4; 5 and 6 are close-on-exec (set-up failure, and the
 * program's wait status from the namespace's init). */
enum { FD_STDIN, FD_STDOUT, FD_STDERR, FD_INPUT, FD_REPORT, FD_FAILURE, FD_STATUS, N_CHILD_FDS };
enum { FD_FLOOR = 10 }; /* parent-side copies sit at or above this, so dup2 onto 0..6 never clobbers one */
enum { N_RLIMITS = 6 };

typedef struct {
    unsigned ns;
    const char *dir;
    const char *program;
    char *const *argv;
    char *const *envp;
    int sync_fd;                /* read end; -1 without a user namespace */
    int fds[N_CHILD_FDS];       /* sources for 0..5 (stdout and stderr share one) */
    int rlimit_ids[N_RLIMITS];
    struct rlimit rlimits[N_RLIMITS];
    bool drop_groups, switch_ids;
    uid_t uid;
    gid_t gid;
    pid_t parent;
    struct sock_fprog filter;
    char tmpfs_opts[128];
} child_plan;

static _Noreturn void child_fail(int fail_fd, int step) {
    child_failure f = {step, errno};
    ssize_t w = write(fail_fd, &f, sizeof f);
    (void)w;
    _exit(127);
}

static int close_from(int lowest) {
#ifdef SYS_close_range
    if (syscall(SYS_close_range, (unsigned)lowest, ~0U, 0) == 0) return 0;
#endif
    struct rlimit r;
    long top = getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != RLIM_INFINITY ? (long)r.rlim_cur : 65536;
    if (top > 1 << 20) top = 1 << 20;
    for (long fd = lowest; fd < top; fd++) close((int)fd);
    return 0;
}

/* With a PID namespace, PID 1 is this loop and the program its child, as
 * bubblewrap and tini do: the kernel gives PID 1 no default signal actions
 * (a program that kills or alarms itself would live on) and leaves it the
 * orphans to reap. Returns in the program's process; the init reports the
 * program's wait status on FD_STATUS and exits, which ends the namespace. */
static void start_under_init(int fail_fd) {
    long kid = syscall(SYS_clone, SIGCHLD, 0L, 0L, 0L, 0L);
    if (kid < 0) child_fail(fail_fd, STEP_INIT);
    if (kid == 0) {
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0)) child_fail(fail_fd, STEP_PDEATHSIG);
        return;
    }
    for (int fd = 0; fd <= FD_FAILURE; fd++) close(fd); /* the program's ends alone decide EOF */
    for (;;) {
        int status;
        pid_t w = waitpid(-1, &status, 0);
        if (w == (pid_t)kid) {
            ssize_t wr = write(FD_STATUS, &status, sizeof status);
            _exit(wr == (ssize_t)sizeof status ? 0 : 127);
        }
        if (w < 0 && errno != EINTR) _exit(127);
    }
}

static _Noreturn void child_main(child_plan *c) {
    int fail_fd = c->fds[FD_FAILURE];
    if (c->sync_fd >= 0) {
        char go;
        if (read(c->sync_fd, &go, 1) != 1) {
            errno = EPIPE;
            child_fail(fail_fd, STEP_SYNC);
        }
    }
    if (setsid() < 0) child_fail(fail_fd, STEP_SETSID);
    if (c->ns & SANDBOX_NS_MOUNT) {
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) child_fail(fail_fd, STEP_PRIVATE);
#ifdef SYS_mount_setattr
        struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID};
        if (syscall(SYS_mount_setattr, AT_FDCWD, "/", AT_RECURSIVE, &ro, sizeof ro))
            child_fail(fail_fd, STEP_READONLY);
#else
        errno = ENOSYS;
        child_fail(fail_fd, STEP_READONLY);
#endif
        /* A fresh tmpfs, mounted after the read-only pass so it alone is
         * writable, bounds what a run can store, and vanishes with it. */
        if (mount("tmpfs", c->dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, c->tmpfs_opts))
            child_fail(fail_fd, STEP_TMPFS);
        /* This namespace's own /proc hides the host's processes; kernels
         * refuse it under a partly masked /proc (containers), which costs
         * nothing essential, so a failure is not one. */
        if (c->ns & SANDBOX_NS_PID) (void)mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
    }
    if (chdir(c->dir)) child_fail(fail_fd, STEP_CHDIR);

    for (int t = 0; t < N_CHILD_FDS; t++)
        if (dup2(c->fds[t], t) < 0) child_fail(fail_fd, STEP_FDS);
    fail_fd = FD_FAILURE;
    if (fcntl(fail_fd, F_SETFD, FD_CLOEXEC) < 0 || fcntl(FD_STATUS, F_SETFD, FD_CLOEXEC) < 0)
        child_fail(fail_fd, STEP_FDS);
    close_from(N_CHILD_FDS);

    /* Ignored signals and the signal mask survive execve: start clean. */
    for (int sig = 1; sig < NSIG; sig++) signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);

    for (int i = 0; i < N_RLIMITS; i++)
        if (setrlimit(c->rlimit_ids[i], &c->rlimits[i])) child_fail(fail_fd, STEP_RLIMIT);

    /* Raw system calls: the C library's wrappers would signal the parent's
     * other threads, which it believes the child still has, and wait. */
    if (c->drop_groups && syscall(SYS_setgroups, 0, NULL)) child_fail(fail_fd, STEP_GROUPS);
    if (c->switch_ids) {
        if (syscall(SYS_setresgid, c->gid, c->gid, c->gid)) child_fail(fail_fd, STEP_GID);
        if (syscall(SYS_setresuid, c->uid, c->uid, c->uid)) child_fail(fail_fd, STEP_UID);
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) child_fail(fail_fd, STEP_NO_NEW_PRIVS);
    /* After the id switch, which clears it. A run never outlives grpo-reward. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0)) child_fail(fail_fd, STEP_PDEATHSIG);
    /* Outside a PID namespace the parent may already be gone (inside one
     * getppid is 0 whatever happens, and SIGKILL to PID 1 still ends all). */
    if (!(c->ns & SANDBOX_NS_PID) && getppid() != c->parent) _exit(127);
    /* Last, after no_new_privs (without which an unprivileged process may
     * not install one): from here on the init and the program live under it. */
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &c->filter)) child_fail(fail_fd, STEP_SECCOMP);
    if (c->ns & SANDBOX_NS_PID) start_under_init(fail_fd);

    execve(c->program, c->argv, c->envp);
    child_fail(fail_fd, STEP_EXEC);
}

/* ---- the parent's side ---------------------------------------------------- */

static void close_fd(int *fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

/* Moves fd to FD_FLOOR or above, close-on-exec. */
static int lift_fd(int fd) {
    if (fd < 0 || fd >= FD_FLOOR) return fd;
    int high = fcntl(fd, F_DUPFD_CLOEXEC, FD_FLOOR);
    close(fd);
    return high;
}

static int write_file(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t len = strlen(text);
    ssize_t w = write(fd, text, len);
    int saved = errno;
    close(fd);
    errno = saved;
    return w == (ssize_t)len ? 0 : -1;
}

/* The user namespace's maps: the run's ids map to themselves, so files it
 * makes belong to the same uid inside and out. An unprivileged parent may
 * only map its own ids, and must give up setgroups to map its gid. */
static int write_id_maps(const sandbox *sb, pid_t pid, gerr *e) {
    char path[64], line[64];
    snprintf(path, sizeof path, "/proc/%d/uid_map", (int)pid);
    snprintf(line, sizeof line, "%u %u 1\n", (unsigned)sb->uid, (unsigned)sb->uid);
    if (write_file(path, line)) return gerr_set(e, EX_TEMPFAIL, "sandbox: writing %s: %s", path, strerror(errno));
    if (!sb->as_root) {
        snprintf(path, sizeof path, "/proc/%d/setgroups", (int)pid);
        if (write_file(path, "deny\n"))
            return gerr_set(e, EX_TEMPFAIL, "sandbox: writing %s: %s", path, strerror(errno));
    }
    snprintf(path, sizeof path, "/proc/%d/gid_map", (int)pid);
    snprintf(line, sizeof line, "%u %u 1\n", (unsigned)sb->gid, (unsigned)sb->gid);
    if (write_file(path, line)) return gerr_set(e, EX_TEMPFAIL, "sandbox: writing %s: %s", path, strerror(errno));
    return 0;
}

static int make_input_fd(const char *input, size_t len) {
    int fd = memfd_create("grpo-sandbox-input", MFD_CLOEXEC);
    if (fd < 0) return -1;
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, input + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            int saved = errno;
            close(fd);
            errno = saved;
            return -1;
        }
        done += (size_t)w;
    }
    if (lseek(fd, 0, SEEK_SET) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void fill_rlimits(const sandbox *sb, child_plan *c) {
    const sandbox_limits *l = &sb->lim;
    rlim_t cpu = (rlim_t)l->timeout + 1; /* whole seconds past the wall deadline: the deadline acts first */
    int ids[N_RLIMITS] = {RLIMIT_AS, RLIMIT_CPU, RLIMIT_NPROC, RLIMIT_FSIZE, RLIMIT_NOFILE, RLIMIT_CORE};
    rlim_t soft[N_RLIMITS] = {(rlim_t)l->memory_mb << 20, cpu, (rlim_t)l->max_procs, (rlim_t)l->max_fsize,
                              (rlim_t)l->max_files, 0};
    for (int i = 0; i < N_RLIMITS; i++) {
        c->rlimit_ids[i] = ids[i];
        c->rlimits[i].rlim_cur = soft[i];
        /* The hard CPU limit a second later turns SIGXCPU into SIGKILL for
         * a program that catches it. */
        c->rlimits[i].rlim_max = ids[i] == RLIMIT_CPU ? cpu + 1 : soft[i];
    }
}

int sandbox_spawn(const sandbox *sb, unsigned ns, const char *input, size_t input_len, sandbox_proc *p, gerr *e) {
    memset(p, 0, sizeof *p);
    p->pid = -1;
    p->pidfd = p->out_fd = p->report_fd = p->status_fd = -1;
    int rc = 0;
    int out[2] = {-1, -1}, report[2] = {-1, -1}, fail[2] = {-1, -1}, sync[2] = {-1, -1}, status[2] = {-1, -1};
    int devnull = -1, in_fd = -1;

    if (snprintf(p->dir, sizeof p->dir, "%s/grpo-sandbox-XXXXXX", sb->tmp_root) >= (int)sizeof p->dir)
        return gerr_set(e, EX_TEMPFAIL, "sandbox: temporary directory path too long under %s", sb->tmp_root);
    if (!mkdtemp(p->dir)) {
        rc = gerr_set(e, EX_TEMPFAIL, "sandbox: making a directory under %s: %s", sb->tmp_root, strerror(errno));
        p->dir[0] = 0;
        return rc;
    }
    cleanup_register(p->dir, true);
    /* Without a tmpfs over it, the run writes into the directory itself. */
    if (!(ns & SANDBOX_NS_MOUNT) && sb->as_root && chown(p->dir, sb->uid, sb->gid)) {
        rc = gerr_set(e, EX_TEMPFAIL, "sandbox: chown %s: %s", p->dir, strerror(errno));
        goto fail;
    }

    bool userns = ns & SANDBOX_NS_USER;
    if (pipe2(out, O_CLOEXEC) || pipe2(report, O_CLOEXEC) || pipe2(fail, O_CLOEXEC) || pipe2(status, O_CLOEXEC) ||
        (userns && pipe2(sync, O_CLOEXEC)) || (devnull = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0 ||
        (in_fd = make_input_fd(input, input_len)) < 0) {
        rc = gerr_set(e, EX_TEMPFAIL, "sandbox: pipes and input: %s", strerror(errno));
        goto fail;
    }
    devnull = lift_fd(devnull);
    out[1] = lift_fd(out[1]);
    in_fd = lift_fd(in_fd);
    report[1] = lift_fd(report[1]);
    fail[1] = lift_fd(fail[1]);
    status[1] = lift_fd(status[1]);
    sync[0] = lift_fd(sync[0]);
    if (devnull < 0 || out[1] < 0 || in_fd < 0 || report[1] < 0 || fail[1] < 0 || status[1] < 0 ||
        (userns && sync[0] < 0)) {
        rc = gerr_set(e, EX_TEMPFAIL, "sandbox: descriptors: %s", strerror(errno));
        goto fail;
    }

    char home[PATH_MAX + 8], tmpdir[PATH_MAX + 8];
    snprintf(home, sizeof home, "HOME=%s", p->dir);
    snprintf(tmpdir, sizeof tmpdir, "TMPDIR=%s", p->dir);
    char *envp[4 + SANDBOX_MAX_ENV + 1];
    size_t n_env = 0;
    envp[n_env++] = "PATH=/usr/bin:/bin";
    envp[n_env++] = "LANG=C.UTF-8";
    envp[n_env++] = home;
    envp[n_env++] = tmpdir;
    for (size_t i = 0; sb->extra_env[i]; i++) envp[n_env++] = sb->extra_env[i];
    envp[n_env] = NULL;

    child_plan c;
    memset(&c, 0, sizeof c);
    c.ns = ns;
    c.dir = p->dir;
    c.program = sb->program;
    c.argv = sb->argv;
    c.envp = envp;
    c.sync_fd = userns ? sync[0] : -1;
    c.fds[FD_STDIN] = devnull;
    c.fds[FD_STDOUT] = c.fds[FD_STDERR] = out[1];
    c.fds[FD_INPUT] = in_fd;
    c.fds[FD_REPORT] = report[1];
    c.fds[FD_FAILURE] = fail[1];
    c.fds[FD_STATUS] = status[1];
    fill_rlimits(sb, &c);
    /* Root drops to nobody; an unprivileged caller keeps its ids. With a
     * user namespace whose setgroups was denied, the groups must stay. */
    c.switch_ids = sb->as_root;
    c.drop_groups = sb->as_root;
    c.uid = sb->uid;
    c.gid = sb->gid;
    c.parent = getpid();
    const sandbox_filter *filter = ns & SANDBOX_NS_PID ? &sb->filter_pidns : &sb->filter;
    c.filter = (struct sock_fprog){.len = filter->len, .filter = filter->insns};
    snprintf(c.tmpfs_opts, sizeof c.tmpfs_opts, "size=%lldk,nr_inodes=%lld,mode=700,uid=%u,gid=%u",
             sb->lim.tmpfs_mb * 1024, sb->lim.tmpfs_files, (unsigned)sb->uid, (unsigned)sb->gid);

    unsigned long flags = SIGCHLD;
    if (ns & SANDBOX_NS_USER) flags |= CLONE_NEWUSER;
    if (ns & SANDBOX_NS_PID) flags |= CLONE_NEWPID;
    if (ns & SANDBOX_NS_NET) flags |= CLONE_NEWNET;
    if (ns & SANDBOX_NS_MOUNT) flags |= CLONE_NEWNS;
    if (ns) flags |= CLONE_NEWIPC | CLONE_NEWUTS;
    /* clone as a fork (no new stack): the only way to put the child itself
     * in a new PID namespace, so that it is that namespace's PID 1. */
    long pid = syscall(SYS_clone, flags, 0L, 0L, 0L, 0L);
    if (pid == 0) child_main(&c);
    if (pid < 0) {
        rc = gerr_set(e, EX_TEMPFAIL, "sandbox: clone: %s", strerror(errno));
        goto fail;
    }
    p->pid = (pid_t)pid;
    close_fd(&devnull);
    close_fd(&out[1]);
    close_fd(&in_fd);
    close_fd(&report[1]);
    close_fd(&fail[1]);
    close_fd(&status[1]);
    close_fd(&sync[0]);
    if (userns) {
        rc = write_id_maps(sb, p->pid, e);
        if (!rc && write(sync[1], "x", 1) != 1)
            rc = gerr_set(e, EX_TEMPFAIL, "sandbox: starting the child: %s", strerror(errno));
        close_fd(&sync[1]);
        if (rc) goto fail;
    }

    /* EOF: the child reached execve (the pipe is close-on-exec). */
    child_failure f;
    ssize_t got;
    do got = read(fail[0], &f, sizeof f);
    while (got < 0 && errno == EINTR);
    close_fd(&fail[0]);
    if (got == (ssize_t)sizeof f) {
        int step = f.step >= 0 && f.step <= STEP_EXEC ? f.step : STEP_EXEC;
        /* EAGAIN at execve is the uid's process limit, which clears as runs end. */
        if (step == STEP_SECCOMP) /* no weaker isolation level does without it */
            rc = gerr_set(e, EX_UNAVAILABLE, "sandbox: the kernel refused the seccomp filter: %s", strerror(f.err));
        else if (step == STEP_EXEC)
            rc = gerr_set(e, f.err == EAGAIN ? EX_TEMPFAIL : EX_UNAVAILABLE,
                          "cannot execute %s in the sandbox (as uid %u): %s", sb->program, (unsigned)sb->uid,
                          strerror(f.err));
        else
            rc = gerr_set(e, EX_TEMPFAIL, "sandbox: %s: %s", step_names[step], strerror(f.err));
        goto fail;
    }
    if (got != 0) {
        rc = gerr_set(e, EX_TEMPFAIL, "sandbox: reading the child's set-up status: %s",
                      got < 0 ? strerror(errno) : "short read");
        goto fail;
    }

    p->start = now_seconds();
    p->deadline = p->start + sb->lim.timeout;
#ifdef SYS_pidfd_open
    p->pidfd = (int)syscall(SYS_pidfd_open, p->pid, 0);
    if (p->pidfd >= 0) fcntl(p->pidfd, F_SETFD, FD_CLOEXEC);
#endif
    p->out_fd = out[0];
    p->report_fd = report[0];
    p->status_fd = status[0];
    out[0] = report[0] = status[0] = -1;
    if (fcntl(p->out_fd, F_SETFL, O_NONBLOCK) < 0 || fcntl(p->report_fd, F_SETFL, O_NONBLOCK) < 0 ||
        fcntl(p->status_fd, F_SETFL, O_NONBLOCK) < 0) {
        rc = gerr_set(e, EX_TEMPFAIL, "sandbox: non-blocking pipes: %s", strerror(errno));
        goto fail;
    }
    return 0;

fail:
    if (p->pid > 0) {
        kill(p->pid, SIGKILL);
        kill(-p->pid, SIGKILL);
        while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR) {}
        p->pid = -1;
    }
    close_fd(&p->pidfd);
    close_fd(&p->out_fd);
    close_fd(&p->report_fd);
    close_fd(&p->status_fd);
    int *fds[] = {&out[0],  &out[1],  &report[0], &report[1], &fail[0], &fail[1],
                  &sync[0], &sync[1], &status[0], &status[1], &devnull, &in_fd};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) close_fd(fds[i]);
    sandbox_remove_tree(p->dir);
    cleanup_unregister(p->dir);
    p->dir[0] = 0;
    return rc;
}
