/* The seccomp-bpf filter of sandboxed runs (syscall_filter.c says what it
 * denies and why), compiled once in the parent so that the child only has
 * to install it. */
#ifndef GRPO_SANDBOX_SYSCALL_FILTER_H
#define GRPO_SANDBOX_SYSCALL_FILTER_H

#include <sys/types.h>

#include "../util/err.h"

struct sock_filter;

typedef struct {
    struct sock_filter *insns; /* a classic BPF program for SECCOMP_SET_MODE_FILTER */
    unsigned short len;        /* instructions */
} sandbox_filter;

/* Compiles the filter. `parent` and `parent_group` are the pid and process
 * group that runs may not signal (grpo-reward's own); 0 leaves those rules
 * out, for runs in a PID namespace, where grpo-reward is out of sight and
 * its pid number names one of the run's own processes. EX_SOFTWARE when
 * libseccomp fails. */
int sandbox_filter_build(pid_t parent, pid_t parent_group, sandbox_filter *f, gerr *e);
void sandbox_filter_free(sandbox_filter *f);

#endif
