/* Inside the sandbox: one run's processes as the parent tracks them.
 * spawn.c starts a run, run.c waits for runs and collects
 * their results, sandbox.c picks the isolation level. */
#ifndef GRPO_SANDBOX_IMPL_H
#define GRPO_SANDBOX_IMPL_H

#include <limits.h>

#include "sandbox.h"

typedef struct {
    pid_t pid;       /* the program, or with a PID namespace its init (PID 1); leader of its own process group */
    int pidfd;       /* readable when it exits; -1 on kernels without pidfd_open (then polled) */
    int out_fd;      /* parent ends of the output and report pipes, non-blocking; -1 once closed */
    int report_fd;
    int status_fd;   /* the program's wait status, from the init of its PID namespace */
    double start, deadline; /* monotonic seconds */
    char dir[PATH_MAX];
} sandbox_proc;

/* Starts the program under isolation `ns` with `input` on fd 3. Fails,
 * leaving nothing behind, with EX_UNAVAILABLE when the program itself could
 * not be executed, else EX_TEMPFAIL (the set-up: directory, pipes, clone,
 * namespaces, rlimits, ids); e says which step and why. */
int sandbox_spawn(const sandbox *sb, unsigned ns, const char *input, size_t input_len, sandbox_proc *p, gerr *e);

/* Runs the batch as sandbox_run_batch does, at isolation `ns`, giving each
 * run `attempts` tries to get through its set-up; reports as
 * sandbox_run_batch_reports when `reports` is not NULL. */
int sandbox_batch(const sandbox *sb, unsigned ns, int attempts, const char *const *input, const size_t *input_len,
                  size_t n, size_t jobs, sandbox_result *res, strbuf *reports, size_t report_cap, gerr *e);

#endif
