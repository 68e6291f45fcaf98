#include "child.h"
#include "../io/json_scan.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/clock.h"

int child_name_len(const child_proc *c) {
    size_t n = strlen(c->cmd);
    return (int)(n > 60 ? 60 : n);
}

int child_start(child_proc *c, const char *cmd, gerr *e) {
    memset(c, 0, sizeof *c);
    c->cmd = cmd;
    c->pid = -1;
    c->to_fd = c->from_fd = -1;
    int to[2], from[2];
    if (pipe2(to, O_CLOEXEC)) return gerr_set(e, EX_OSERR, "pipe: %s", strerror(errno));
    if (pipe2(from, O_CLOEXEC)) {
        close(to[0]), close(to[1]);
        return gerr_set(e, EX_OSERR, "pipe: %s", strerror(errno));
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(to[0]), close(to[1]), close(from[0]), close(from[1]);
        return gerr_set(e, EX_OSERR, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        if (setpgid(0, 0) < 0 || dup2(to[0], 0) < 0 || dup2(from[1], 1) < 0) _exit(126);
        closefrom(3);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    close(to[0]);
    close(from[1]);
    /* setpgid from this side too, so the group exists before any kill of it;
     * EACCES: the child has already exec'd, after making the group itself */
    const char *failed = NULL;
    if (setpgid(pid, pid) < 0 && errno != EACCES) failed = "setpgid";
    else if (!cleanup_register_group(pid)) failed = "registering its process group", errno = ENOSPC;
    else if (fcntl(to[1], F_SETFL, O_NONBLOCK)) failed = "fcntl";
    if (failed) {
        int err = errno;
        close(to[1]), close(from[0]);
        kill(-pid, SIGKILL);
        cleanup_unregister_group(pid);
        waitpid(pid, NULL, 0);
        return gerr_set(e, EX_OSERR, "'%.*s': %s: %s", child_name_len(c), cmd, failed, strerror(err));
    }
    c->pid = c->pgid = pid;
    c->to_fd = to[1];
    c->from_fd = from[0];
    return 0;
}

void child_queue(child_proc *c, const char *data, size_t len) {
    if (c->out_done == c->out.len) { /* everything sent: start the buffer over */
        sb_clear(&c->out);
        c->out_done = 0;
    }
    sb_append(&c->out, data, len);
}

int child_write_some(child_proc *c, const char *data, size_t len, size_t *done, gerr *e) {
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    if (sigprocmask(SIG_BLOCK, &pipe_set, &old)) return gerr_set(e, EX_OSERR, "sigprocmask: %s", strerror(errno));
    ssize_t n = write(c->to_fd, data + *done, len - *done);
    int err = errno;
    if (n < 0 && err == EPIPE) { /* drop the SIGPIPE the write raised */
        const struct timespec zero = {0, 0};
        while (sigtimedwait(&pipe_set, NULL, &zero) > 0) {
        }
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (n >= 0) {
        *done += (size_t)n;
        return 0;
    }
    if (err == EAGAIN || err == EINTR) return 0;
    if (err == EPIPE) {
        close(c->to_fd);
        c->to_fd = -1;
        return 0;
    }
    return gerr_set(e, EX_IOERR, "'%.*s': writing to it: %s", child_name_len(c), c->cmd, strerror(err));
}

int child_pump(child_proc *c, int wait_ms, gerr *e) {
    struct pollfd pf[2] = {{.fd = c->eof ? -1 : c->from_fd, .events = POLLIN}, {.fd = -1}};
    if (c->to_fd >= 0 && c->out_done < c->out.len) pf[1] = (struct pollfd){.fd = c->to_fd, .events = POLLOUT};
    if (pf[0].fd < 0 && pf[1].fd < 0) return 0;
    int ready = poll(pf, 2, wait_ms);
    if (ready < 0) return errno == EINTR ? 0 : gerr_set(e, EX_OSERR, "poll: %s", strerror(errno));
    if (pf[1].revents && child_write_some(c, c->out.data, c->out.len, &c->out_done, e)) return e->code;
    if (pf[0].revents) {
        sb_reserve(&c->in, 65536);
        ssize_t r = read(c->from_fd, c->in.data + c->in.len, 65536);
        if (r < 0 && errno != EINTR && errno != EAGAIN)
            return gerr_set(e, EX_IOERR, "'%.*s': reading from it: %s", child_name_len(c), c->cmd, strerror(errno));
        if (r == 0) c->eof = true;
        if (r > 0) {
            c->in.len += (size_t)r;
            c->in.data[c->in.len] = 0;
        }
    }
    return 0;
}

int child_take_line(child_proc *c, strbuf *line) {
    char *end = c->in.len ? memchr(c->in.data, '\n', c->in.len) : NULL;
    if (!end) return 0;
    size_t n = (size_t)(end - c->in.data);
    sb_clear(line);
    sb_append(line, c->in.data, n);
    memmove(c->in.data, end + 1, c->in.len - n - 1);
    c->in.len -= n + 1;
    c->in.data[c->in.len] = 0;
    return 1;
}

int child_reap(child_proc *c, char *how, size_t how_size) {
    int status = 0;
    pid_t got;
    do got = waitpid(c->pid, &status, 0);
    while (got < 0 && errno == EINTR);
    c->pid = -1;
    if (got < 0) {
        snprintf(how, how_size, "ended");
        return -1;
    }
    if (WIFSIGNALED(status)) {
        snprintf(how, how_size, "was killed by signal %d", WTERMSIG(status));
        return -1;
    }
    snprintf(how, how_size, "exited with status %d", WEXITSTATUS(status));
    return WEXITSTATUS(status);
}

int child_finish(child_proc *c, double timeout, gerr *e) {
    if (c->to_fd >= 0) close(c->to_fd);
    c->to_fd = -1;
    double deadline = now_seconds() + timeout;
    while (!c->eof) {
        double left = deadline - now_seconds();
        if (left <= 0)
            return gerr_set(e, EX_TEMPFAIL, "'%.*s' did not exit within %g s of the end of its input", child_name_len(c),
                            c->cmd, timeout);
        if (child_pump(c, (int)(left * 1000) + 1, e)) return e->code;
    }
    for (size_t i = 0; i < c->in.len; i++)
        if (!json_is_space(c->in.data[i]))
            return gerr_set(e, EX_DATAERR, "'%.*s' wrote more after its last answer: %.*s", child_name_len(c), c->cmd,
                            (int)(c->in.len - i > 60 ? 60 : c->in.len - i), c->in.data + i);
    char how[64];
    if (child_reap(c, how, sizeof how) != 0) return gerr_set(e, EX_DATAERR, "'%.*s' %s", child_name_len(c), c->cmd, how);
    /* what it left running in the background is its own business */
    cleanup_unregister_group(c->pgid);
    c->pgid = 0;
    return 0;
}

void child_close(child_proc *c) {
    if (c->to_fd >= 0) close(c->to_fd);
    if (c->from_fd >= 0) close(c->from_fd);
    c->to_fd = c->from_fd = -1;
    if (c->pgid > 0) kill(-c->pgid, SIGTERM);
    for (int i = 0; c->pid > 0 && i < 100; i++) {
        if (waitpid(c->pid, NULL, WNOHANG) != 0) c->pid = -1;
        else nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
    if (c->pgid > 0) {
        kill(-c->pgid, SIGKILL);
        cleanup_unregister_group(c->pgid);
        c->pgid = 0;
    }
    if (c->pid > 0) waitpid(c->pid, NULL, 0);
    c->pid = -1;
    sb_free(&c->out);
    sb_free(&c->in);
}
