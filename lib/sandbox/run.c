/* Running a batch of sandboxed programs, `jobs` at once, from one thread:
 * poll on every run's pipes and exit descriptor, with the nearest deadline
 * as the poll timeout; a run that exits or reaches its deadline is killed
 * (its whole PID namespace, else its process group), reaped, and its
 * directory removed before its slot takes the next input. */
#include "impl.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../util/cleanup.h"
#include "../util/strbuf.h"
#include "../util/clock.h"

enum { POLL_FALLBACK_MS = 10 }; /* exit checks without a pidfd */

/* Keeps the head of what arrives (cap bytes) and drops the rest, so that a
 * program printing without end neither blocks on a full pipe nor grows us. */
static void drain_fd(int *fd, char *keep, size_t *kept, size_t cap) {
    char buf[16384];
    while (*fd >= 0) {
        ssize_t got = read(*fd, buf, sizeof buf);
        if (got > 0) {
            size_t take = *kept < cap ? cap - *kept : 0;
            if (take > (size_t)got) take = (size_t)got;
            memcpy(keep + *kept, buf, take);
            *kept += take;
            continue;
        }
        if (got < 0 && errno == EINTR) continue;
        if (got < 0 && errno == EAGAIN) return;
        close(*fd); /* end of file, or an error that will not clear */
        *fd = -1;
    }
}

/* The report into a caller's buffer: kept whole up to cap bytes, the rest
 * read, dropped and noted. */
static void drain_report(int *fd, strbuf *keep, size_t cap, bool *over) {
    char buf[16384];
    while (*fd >= 0) {
        ssize_t got = read(*fd, buf, sizeof buf);
        if (got > 0) {
            size_t take = keep->len < cap ? cap - keep->len : 0;
            if (take > (size_t)got) take = (size_t)got;
            if (take) sb_append(keep, buf, take);
            if (take < (size_t)got) *over = true;
            continue;
        }
        if (got < 0 && errno == EINTR) continue;
        if (got < 0 && errno == EAGAIN) return;
        close(*fd);
        *fd = -1;
    }
}

/* Where a batch's reports go: res[i].report, or reports[i] when given. */
static void drain(sandbox_proc *p, sandbox_result *r, strbuf *report, size_t cap) {
    drain_fd(&p->out_fd, r->output, &r->output_len, SANDBOX_OUTPUT_CAP);
    r->output[r->output_len] = 0;
    if (report) drain_report(&p->report_fd, report, cap, &r->report_over);
    else drain_fd(&p->report_fd, r->report, &r->report_len, SANDBOX_REPORT_CAP);
}

static bool has_exited(const sandbox_proc *p) {
    siginfo_t si;
    memset(&si, 0, sizeof si);
    /* WNOWAIT: leave the zombie, so its pid (and process group id) cannot
     * be reused before the group is killed in finish(). */
    if (waitid(P_PID, (id_t)p->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0) return errno == ECHILD;
    return si.si_pid == p->pid;
}

/* Ends a run: kills whatever is left of it, reaps it, collects the last
 * output and removes its directory. */
static void finish(sandbox_proc *p, sandbox_result *r, strbuf *report, size_t cap, bool at_deadline) {
    if (at_deadline) kill(p->pid, SIGKILL); /* with a PID namespace, this ends every process in it */
    kill(-p->pid, SIGKILL);                  /* the rest of its process group */
    int status = 0;
    pid_t got;
    do got = waitpid(p->pid, &status, 0);
    while (got < 0 && errno == EINTR);
    r->status = got == p->pid ? status : (SIGKILL & 0x7f); /* lost (SIGCHLD ignored): counts as killed */
    /* Under an init, the program's own status, when the init lived to send it. */
    int program_status;
    if (read(p->status_fd, &program_status, sizeof program_status) == (ssize_t)sizeof program_status)
        r->status = program_status;
    close(p->status_fd);
    r->seconds = now_seconds() - p->start;
    r->timed_out = at_deadline || (WIFSIGNALED(r->status) && WTERMSIG(r->status) == SIGXCPU);
    /* Every writer is gone with a PID namespace; without one, a process
     * that left the group may still hold the pipes, so read only what is there. */
    drain(p, r, report, cap);
    if (p->out_fd >= 0) close(p->out_fd);
    if (p->report_fd >= 0) close(p->report_fd);
    if (p->pidfd >= 0) close(p->pidfd);
    p->out_fd = p->report_fd = p->pidfd = p->status_fd = -1;
    sandbox_remove_tree(p->dir);
    cleanup_unregister(p->dir);
    p->pid = -1;
}

typedef struct {
    sandbox_proc proc;
    size_t task;
    bool busy;
} slot;

static int start_task(const sandbox *sb, unsigned ns, int attempts, const char *const *input,
                      const size_t *input_len, size_t task, slot *s, sandbox_result *r, gerr *e) {
    int rc = 0;
    for (int attempt = 0; attempt < attempts; attempt++) {
        if (attempt) {
            /* Transient shortages (processes, memory) clear as other runs
             * end: 0.1, 0.2, 0.4, 0.8 s. */
            long ms = 100L << (attempt - 1);
            struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
            nanosleep(&pause, NULL);
        }
        rc = sandbox_spawn(sb, ns, input[task], input_len[task], &s->proc, e);
        if (!rc) {
            s->task = task;
            s->busy = true;
            return 0;
        }
        r->setup_failures++;
    }
    return rc;
}

int sandbox_batch(const sandbox *sb, unsigned ns, int attempts, const char *const *input, const size_t *input_len,
                  size_t n, size_t jobs, sandbox_result *res, strbuf *reports, size_t report_cap, gerr *e) {
    memset(res, 0, n * sizeof *res);
    for (size_t i = 0; reports && i < n; i++) sb_clear(&reports[i]);
    if (!n) return 0;
    if (jobs < 1) jobs = 1;
    if (jobs > n) jobs = n;
    slot *slots = xcalloc(jobs, sizeof *slots);
    struct pollfd *pfd = xcalloc(3 * jobs, sizeof *pfd);
    size_t next = 0, done = 0;
    int rc = 0;

    while (done < n) {
        for (size_t s = 0; s < jobs && next < n; s++) {
            if (slots[s].busy) continue;
            rc = start_task(sb, ns, attempts, input, input_len, next, &slots[s], &res[next], e);
            if (rc) goto out;
            next++;
        }

        double now = now_seconds(), wait_s = INFINITY;
        size_t n_pfd = 0;
        bool polling_exit = false;
        for (size_t s = 0; s < jobs; s++) {
            sandbox_proc *p = &slots[s].proc;
            if (!slots[s].busy) continue;
            int fds[3] = {p->pidfd, p->out_fd, p->report_fd};
            for (int k = 0; k < 3; k++) {
                if (fds[k] < 0) continue;
                pfd[n_pfd++] = (struct pollfd){.fd = fds[k], .events = POLLIN};
            }
            if (p->pidfd < 0) polling_exit = true;
            if (p->deadline - now < wait_s) wait_s = p->deadline - now;
        }
        int timeout_ms = wait_s <= 0 ? 0 : wait_s > 3600 ? 3600 * 1000 : (int)ceil(wait_s * 1000);
        if (polling_exit && timeout_ms > POLL_FALLBACK_MS) timeout_ms = POLL_FALLBACK_MS;
        if (poll(pfd, n_pfd, timeout_ms) < 0 && errno != EINTR) {
            rc = gerr_set(e, EX_SOFTWARE, "sandbox: poll: %s", strerror(errno));
            goto out;
        }

        now = now_seconds();
        for (size_t s = 0; s < jobs; s++) {
            if (!slots[s].busy) continue;
            sandbox_proc *p = &slots[s].proc;
            size_t task = slots[s].task;
            sandbox_result *r = &res[task];
            strbuf *report = reports ? &reports[task] : NULL;
            drain(p, r, report, report_cap);
            bool exited = has_exited(p);
            if (exited || now >= p->deadline) {
                finish(p, r, report, report_cap, !exited);
                slots[s].busy = false;
                done++;
            }
        }
    }

out:
    for (size_t s = 0; s < jobs; s++)
        if (slots[s].busy)
            finish(&slots[s].proc, &res[slots[s].task], reports ? &reports[slots[s].task] : NULL, report_cap, true);
    free(pfd);
    free(slots);
    return rc;
}

int sandbox_run_batch(const sandbox *sb, const char *const *input, const size_t *input_len, size_t n, size_t jobs,
                      sandbox_result *res, gerr *e) {
    return sandbox_batch(sb, sb->ns, SANDBOX_SETUP_ATTEMPTS, input, input_len, n, jobs, res, NULL, 0, e);
}

int sandbox_run_batch_reports(const sandbox *sb, const char *const *input, const size_t *input_len, size_t n,
                              size_t jobs, sandbox_result *res, strbuf *reports, size_t report_cap, gerr *e) {
    return sandbox_batch(sb, sb->ns, SANDBOX_SETUP_ATTEMPTS, input, input_len, n, jobs, res, reports, report_cap, e);
}

bool sandbox_exited_ok(const sandbox_result *r) {
    return !r->timed_out && WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0;
}
