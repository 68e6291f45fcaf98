/* A program started through `sh -c` with a pipe on its stdin and one on its
 * stdout (its stderr is ours), in a process group of its own registered
 * with lib/util/cleanup, so a failed or interrupted run kills it and
 * whatever it started. Writes never block (what the pipe does not take
 * waits in a buffer), so a program that answers line by line cannot
 * deadlock against a full pipe; SIGPIPE is held back while writing, so a
 * program that closed its stdin is reported, not our death. */
#ifndef GRPO_ENV_CHILD_H
#define GRPO_ENV_CHILD_H

#include <stdbool.h>
#include <sys/types.h>

#include "../util/err.h"
#include "../util/strbuf.h"

typedef struct {
    const char *cmd;
    pid_t pid;          /* -1 once reaped */
    pid_t pgid;         /* 0 once unregistered */
    int to_fd, from_fd; /* -1 once closed */
    strbuf out;         /* bytes queued for its stdin */
    size_t out_done;    /* of them written */
    strbuf in;          /* bytes read from its stdout, not yet taken as lines */
    bool eof;           /* its stdout ended */
} child_proc;

/* The command as messages show it: at most 60 bytes (use with %.*s). */
int child_name_len(const child_proc *c);
int child_start(child_proc *c, const char *cmd, gerr *e);
/* Writes what the pipe takes now of data[*done, len), advancing *done. A
 * program that stopped reading closes our end (to_fd -1), no error. */
int child_write_some(child_proc *c, const char *data, size_t len, size_t *done, gerr *e);
/* Queues bytes for the program's stdin (sent by child_pump). */
void child_queue(child_proc *c, const char *data, size_t len);
/* Waits at most wait_ms (0: only what is ready now) for the pipes, writes
 * what the program takes and reads what it wrote. A program that stopped
 * reading is not an error here (its answers or its exit tell the rest). */
int child_pump(child_proc *c, int wait_ms, gerr *e);
/* Moves the next complete line read (without its newline) into *line
 * (replacing what it held): 1, or 0 when no line is complete. */
int child_take_line(child_proc *c, strbuf *line);
/* After eof: waits for the program and says how it ended ("exited with
 * status 3", "was killed by signal 9"); returns its exit status, or -1. */
int child_reap(child_proc *c, char *how, size_t how_size);
/* Closes its stdin, then waits up to timeout seconds for it to exit:
 * 0 when it exited 0 having written nothing more, else an error. */
int child_finish(child_proc *c, double timeout, gerr *e);
/* Stops it if still running (SIGTERM to the group, a second's grace, then
 * SIGKILL) and frees everything. */
void child_close(child_proc *c);

#endif
