/* The seccomp-bpf filter every sandboxed run gets: default allow, and
 * EPERM for the system calls test code never needs that widen the kernel's
 * attack surface or reach outside the run (formats/rewards.md lists them
 * with the reasons).
 *
 * Why a deny list and not an allow list: the program is an interpreter
 * running arbitrary test code, whose set of system calls changes with every
 * C library and Python release; an allow list would turn an upgrade into
 * false zero rewards. What is denied is what no test needs.
 *
 * Why EPERM rather than killing: a denied call is what an unprivileged
 * process already meets for most of these, programs that probe for a feature
 * fall back cleanly, and the reward is decided by the tests either way. The
 * one kill is for system calls of another ABI (i386's int 0x80, x32), which
 * have no use here but to slip past a filter written for x86-64 numbers.
 *
 * libseccomp allocates, so the filter is compiled here, in the parent, once
 * per sandbox; the child between clone and execve only hands the compiled
 * program to the kernel with one system call. */
#include "syscall_filter.h"

#include <errno.h>
#include <linux/filter.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

/* Denied outright, with EPERM. */
static const char *const denied[] = {
    /* other processes' memory and descriptors: reading the parent's secrets, or changing it */
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "pidfd_getfd", "kcmp",
    /* namespaces and mounts: a nested user namespace hands back every capability inside it */
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen",
    "fsconfig", "fsmount", "fspick", "mount_setattr",
    /* kernel keyrings are shared by the uid across runs */
    "keyctl", "add_key", "request_key",
    /* large kernel interfaces behind many privilege escalations */
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    /* the machine itself: kernels, modules, clocks, swap, the kernel log, raw I/O, file handles */
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot", "swapon", "swapoff",
    "acct", "settimeofday", "clock_settime", "sethostname", "setdomainname", "syslog", "iopl", "ioperm",
    "quotactl", "quotactl_fd", "vhangup", "uselib", "lookup_dcookie", "name_to_handle_at", "open_by_handle_at",
    "fanotify_init",
};

/* clone flags that make a namespace. */
static const unsigned long namespace_flags[] = {
    CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWTIME,
};

static int add(scmp_filter_ctx ctx, uint32_t action, const char *name, unsigned n_args,
               const struct scmp_arg_cmp *args, gerr *e) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) return gerr_set(e, EX_SOFTWARE, "sandbox: seccomp: unknown system call %s", name);
    if (nr < 0) return 0; /* not a system call of this architecture: nothing to deny */
    int rc = seccomp_rule_add_array(ctx, action, nr, n_args, args);
    if (rc) return gerr_set(e, EX_SOFTWARE, "sandbox: seccomp: rule for %s: %s", name, strerror(-rc));
    return 0;
}

static int add_rules(scmp_filter_ctx ctx, pid_t parent, pid_t parent_group, gerr *e) {
    const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
    int rc = 0;
    for (size_t i = 0; !rc && i < sizeof denied / sizeof denied[0]; i++) rc = add(ctx, eperm, denied[i], 0, NULL, e);

    /* clone3 passes its flags in memory a filter cannot read: ENOSYS makes
     * the C library fall back to clone, whose flags it can. */
    if (!rc) rc = add(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL, e);
    for (size_t i = 0; !rc && i < sizeof namespace_flags / sizeof namespace_flags[0]; i++) {
        struct scmp_arg_cmp has_flag = SCMP_A0(SCMP_CMP_MASKED_EQ, namespace_flags[i], namespace_flags[i]);
        rc = add(ctx, eperm, "clone", 1, &has_flag, e);
    }

    /* Sockets: only AF_UNIX (local pairs, which Python's multiprocessing
     * uses); with or without a network namespace, nothing reaches a network. */
    struct scmp_arg_cmp not_unix = SCMP_A0(SCMP_CMP_NE, AF_UNIX, 0);
    if (!rc) rc = add(ctx, eperm, "socket", 1, &not_unix, e);
    if (!rc) rc = add(ctx, eperm, "socketpair", 1, &not_unix, e);
    /* AF_UNIX sockets reach no further than their pair: a pathname socket of
     * a host process is visible through the read-only file system, and
     * permissions do not stop a connect as the caller's own uid. So no
     * connect, no sendto with an address, and no sendmsg or sendmmsg, whose
     * address lies in memory a filter cannot read. Socket pairs (Python's
     * multiprocessing pipes, asyncio) need none of them. */
    const struct scmp_arg_cmp with_address = SCMP_A4(SCMP_CMP_NE, 0, 0);
    if (!rc) rc = add(ctx, eperm, "connect", 0, NULL, e);
    if (!rc) rc = add(ctx, eperm, "sendto", 1, &with_address, e);
    if (!rc) rc = add(ctx, eperm, "sendmsg", 0, NULL, e);
    if (!rc) rc = add(ctx, eperm, "sendmmsg", 0, NULL, e);

    /* Signals and limits of other processes: never every process of the uid
     * (kill -1), never grpo-reward or its process group, and rlimits only of
     * the caller itself. Without a PID namespace and as the caller's own uid,
     * the rest of that uid's processes stay reachable (sandbox.c says so). */
    /* A pid is an int: the kernel reads the low 32 bits of the register,
     * so the comparison must ignore the high ones a caller may set. */
    const struct scmp_arg_cmp to_all = SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, (uint32_t)-1);
    const struct scmp_arg_cmp to_parent = SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, (uint32_t)parent);
    const struct scmp_arg_cmp to_group = SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, (uint32_t)-parent_group);
    const struct scmp_arg_cmp other_process = SCMP_A0(SCMP_CMP_NE, 0, 0);
    if (!rc) rc = add(ctx, eperm, "kill", 1, &to_all, e);
    if (!rc) rc = add(ctx, eperm, "prlimit64", 1, &other_process, e);
    if (parent <= 0) return rc;
    if (!rc) rc = add(ctx, eperm, "kill", 1, &to_parent, e);
    if (!rc && parent_group > 0) rc = add(ctx, eperm, "kill", 1, &to_group, e);
    if (!rc) rc = add(ctx, eperm, "tkill", 1, &to_parent, e);
    if (!rc) rc = add(ctx, eperm, "tgkill", 1, &to_parent, e);
    if (!rc) rc = add(ctx, eperm, "pidfd_open", 1, &to_parent, e);
    return rc;
}

/* The compiled program, read back from libseccomp's export. */
static int export_program(scmp_filter_ctx ctx, sandbox_filter *f, gerr *e) {
    int fd = memfd_create("grpo-sandbox-seccomp", MFD_CLOEXEC);
    if (fd < 0) return gerr_set(e, EX_SOFTWARE, "sandbox: seccomp: memfd_create: %s", strerror(errno));
    int rc = seccomp_export_bpf(ctx, fd);
    struct stat st;
    if (rc) rc = gerr_set(e, EX_SOFTWARE, "sandbox: seccomp: exporting the filter: %s", strerror(-rc));
    else if (fstat(fd, &st)) rc = gerr_set(e, EX_SOFTWARE, "sandbox: seccomp: fstat: %s", strerror(errno));
    else if (st.st_size <= 0 || st.st_size % (off_t)sizeof(struct sock_filter) ||
             st.st_size / (off_t)sizeof(struct sock_filter) > BPF_MAXINSNS)
        rc = gerr_set(e, EX_SOFTWARE, "sandbox: seccomp: the filter is %lld bytes", (long long)st.st_size);
    if (!rc) {
        size_t bytes = (size_t)st.st_size;
        f->insns = xmalloc(bytes);
        if (pread(fd, f->insns, bytes, 0) != (ssize_t)bytes) {
            rc = gerr_set(e, EX_SOFTWARE, "sandbox: seccomp: reading the filter back: %s", strerror(errno));
            free(f->insns);
            f->insns = NULL;
        } else {
            f->len = (unsigned short)(bytes / sizeof(struct sock_filter));
        }
    }
    close(fd);
    return rc;
}

int sandbox_filter_build(pid_t parent, pid_t parent_group, sandbox_filter *f, gerr *e) {
    memset(f, 0, sizeof *f);
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx) return gerr_set(e, EX_SOFTWARE, "sandbox: seccomp: seccomp_init failed");
    int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (rc) rc = gerr_set(e, EX_SOFTWARE, "sandbox: seccomp: bad-architecture action: %s", strerror(-rc));
    if (!rc) rc = add_rules(ctx, parent, parent_group, e);
    if (!rc) rc = export_program(ctx, f, e);
    seccomp_release(ctx);
    return rc;
}

void sandbox_filter_free(sandbox_filter *f) {
    free(f->insns);
    memset(f, 0, sizeof *f);
}
