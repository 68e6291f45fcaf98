/* A process jail for running untrusted programs (the code reward's python).
 *
 * Each run gets, where the kernel allows:
 *   - new user, PID, network, mount, IPC and UTS namespaces: no network (only
 *     a loopback that is down), every file system read-only except a fresh
 *     size-limited tmpfs that is the run's working directory, and the
 *     program as PID 1 of its own PID namespace, so killing it (or its
 *     ordinary exit) takes every process it started with it, including ones
 *     that left its process group with setsid;
 *   - an unprivileged identity: as root, uid/gid 65534 (nobody) with no
 *     supplementary groups; otherwise the caller's own ids. Either way no
 *     capabilities, and no_new_privs so set-uid programs grant nothing;
 *   - a seccomp-bpf filter (syscall_filter.c): no ptrace, no namespaces or
 *     mounts, no sockets but AF_UNIX and no connect (a host process's
 *     Unix socket is out of reach), no io_uring, bpf, keyrings or module
 *     loading, no signals to grpo-reward (out of sight anyway in a PID
 *     namespace), at every isolation level;
 *   - rlimits: address space, CPU seconds, processes (counted per run: the
 *     run's user namespace has its own process counter), file size, open
 *     files, no core files;
 *   - a scrubbed environment (PATH, LANG, HOME, TMPDIR and what the caller
 *     adds), stdin /dev/null, every other descriptor closed;
 *   - a wall-clock deadline, after which the whole run is killed.
 * The working directory is made with mkdtemp under $TMPDIR (else /tmp) and
 * removed, with whatever is in it, when the run ends.
 *
 * Why a user namespace even as root, and why uid 65534: RLIMIT_NPROC is not
 * enforced for root, and for any other uid it counts every process of that
 * uid on the machine, so runs as a shared "nobody" would eat one another's
 * limit (a fork bomb in one run would make the next fail to start). The
 * kernel counts processes per (user namespace, uid) and checks each level
 * against its own limit, so in a fresh user namespace per run the limit
 * bounds that run alone. The namespace maps only the run's uid and gid, so
 * its files belong to nobody outside too, and nothing maps to root: the
 * program's execve leaves it no capabilities (checked by the tests). Root's
 * mapping is written by the parent, which has CAP_SETUID outside; an
 * unprivileged parent may only map its own ids, and must deny setgroups.
 *
 * Where the kernel refuses the namespaces (containers with seccomp filters,
 * user namespaces switched off), sandbox_open falls back to fewer of them and
 * says once on stderr which protections are missing (see
 * SANDBOX_DEGRADED_HELP). The weakest level still has its own session and
 * process group (killed as a whole), the unprivileged uid when run as root,
 * the rlimits, the scrubbed environment and the seccomp filter; a kernel
 * that refuses the filter is an error (EX_UNAVAILABLE), never a fallback.
 *
 * The program sees four descriptors: 0 = /dev/null, 1 and 2 = one pipe the
 * parent keeps the head of (SANDBOX_OUTPUT_CAP bytes), 3 = its input (a
 * read-only memory file with the bytes the caller gave), 4 = a report pipe
 * (SANDBOX_REPORT_CAP bytes kept) for a result channel the program's own
 * output cannot be mistaken for. */
#ifndef GRPO_SANDBOX_H
#define GRPO_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "../util/err.h"
#include "../util/strbuf.h"
#include "syscall_filter.h"

enum {
    SANDBOX_OUTPUT_CAP = 4096, /* bytes of stdout+stderr kept; the rest is read and dropped */
    SANDBOX_REPORT_CAP = 256,  /* bytes of fd 4 kept */
    SANDBOX_MAX_ARGS = 16,
    SANDBOX_MAX_ENV = 8,
    SANDBOX_SETUP_ATTEMPTS = 5, /* tries per run to get through its set-up */
};

/* The isolation in use (bits). */
enum {
    SANDBOX_NS_USER = 1,  /* own user namespace: per-run process count, no capabilities anywhere else */
    SANDBOX_NS_PID = 2,   /* own PID namespace: nothing outlives the run */
    SANDBOX_NS_NET = 4,   /* own network namespace: no network */
    SANDBOX_NS_MOUNT = 8, /* own mount namespace: read-only file systems, tmpfs working directory */
};

/* The sentence grpo-reward's --help carries about the fallback. */
#define SANDBOX_DEGRADED_HELP                                                                        \
    "Each code run gets a seccomp filter (no ptrace, namespaces, mounts, io_uring, bpf, keyrings, "  \
    "module loading, sockets but AF_UNIX pairs, or connect: EPERM) and new user, PID, network and mount "         \
    "namespaces (no network, a read-only file system outside its own temporary directory, every "  \
    "process it starts killed with it); where the kernel refuses the namespaces, grpo-reward says " \
    "once on stderr which of these protections are missing and runs the code without them, still " \
    "under the filter, as an unprivileged user with rlimits, a scrubbed environment and its "       \
    "process group killed at the deadline."

typedef struct {
    double timeout;        /* wall seconds per run (> 0) */
    long long memory_mb;   /* RLIMIT_AS in MiB (> 0) */
    long long max_procs;   /* RLIMIT_NPROC: processes and threads of one run */
    long long max_fsize;   /* RLIMIT_FSIZE in bytes */
    long long max_files;   /* RLIMIT_NOFILE (>= 8) */
    long long tmpfs_mb;    /* size of the working directory's tmpfs (mount namespace) */
    long long tmpfs_files; /* inodes of that tmpfs */
    unsigned avoid_ns;     /* SANDBOX_NS_* never to use (the tests exercise the fallbacks with it) */
} sandbox_limits;

sandbox_limits sandbox_default_limits(void);

typedef struct {
    char *program;                       /* absolute path */
    char *argv[SANDBOX_MAX_ARGS + 1];    /* argv[0] = program, NULL-terminated, owned */
    char *extra_env[SANDBOX_MAX_ENV + 1]; /* "NAME=VALUE" added to the scrubbed environment, owned */
    sandbox_limits lim;
    unsigned ns;        /* SANDBOX_NS_* in use, chosen by sandbox_open */
    bool as_root;       /* the caller is root: runs switch to uid/gid 65534 */
    uid_t uid, gid;     /* the ids runs have (as the kernel outside sees them) */
    char *tmp_root;     /* where run directories are made */
    char *missing;      /* what the fallback lacks, for messages ("" = nothing) */
    sandbox_filter filter;       /* the seccomp filter of runs without a PID namespace */
    sandbox_filter filter_pidns; /* with one: without the rules on grpo-reward's pid, which means
                                    another process in there */
} sandbox;

/* Finds `program` (a path, or a name looked up on PATH, resolved to an
 * absolute path here so that the runs' PATH need not find it), stores the
 * arguments and extra environment (both NULL-terminated, copied), then picks
 * the strongest isolation the kernel allows by starting `probe_input` runs:
 * a level whose set-up fails is dropped for the next weaker one, and a
 * missing protection is reported once with warn(). The probe run at the
 * chosen level must exit 0 within the timeout, else the program does not
 * work inside the sandbox. Errors: EX_UNAVAILABLE (program not found, or
 * not working in the sandbox), EX_USAGE (bad limits). */
int sandbox_open(sandbox *sb, const char *program, const char *const *args, const char *const *extra_env,
                 const sandbox_limits *lim, const char *probe_input, gerr *e);
void sandbox_close(sandbox *sb);

/* One run's outcome. */
typedef struct {
    int status;            /* wait status of the program (PID 1 of the run) */
    bool timed_out;        /* killed at the wall deadline, or by RLIMIT_CPU */
    int setup_failures;    /* attempts whose set-up failed before the program started (retried) */
    double seconds;        /* wall time of the run */
    char report[SANDBOX_REPORT_CAP];
    size_t report_len;
    bool report_over;      /* sandbox_run_batch_reports: more than its cap came (and was dropped) */
    char output[SANDBOX_OUTPUT_CAP + 1]; /* head of stdout+stderr, NUL-terminated */
    size_t output_len;
} sandbox_result;

/* Runs the program once per input (input[i] of input_len[i] bytes on fd 3),
 * at most `jobs` at once, each with its own directory and deadline, and
 * fills res[0..n-1] in input order: the results do not depend on `jobs`.
 * A run whose set-up fails (fork, mount, exec refused) is tried again, up to
 * SANDBOX_SETUP_ATTEMPTS times over 1.5 s; after that everything still
 * running is killed and reaped and the call fails with EX_TEMPFAIL (or
 * EX_UNAVAILABLE when the program cannot be executed at all). */
int sandbox_run_batch(const sandbox *sb, const char *const *input, const size_t *input_len, size_t n, size_t jobs,
                      sandbox_result *res, gerr *e);

/* The same, with what each run writes to fd 4 kept whole in reports[i]
 * (cleared first) up to report_cap bytes, for results larger than
 * SANDBOX_REPORT_CAP: more is read and dropped, and res[i].report_over set;
 * res[i].report stays empty. */
int sandbox_run_batch_reports(const sandbox *sb, const char *const *input, const size_t *input_len, size_t n,
                              size_t jobs, sandbox_result *res, strbuf *reports, size_t report_cap, gerr *e);

/* Passed: exited 0 within its limits. */
bool sandbox_exited_ok(const sandbox_result *r);

/* Removes a directory tree without following symbolic links, with a
 * constant number of descriptors whatever its depth; directories whose
 * owner took away their permissions are given them back first. */
int sandbox_remove_tree(const char *path);

#endif
