/* The `cmd` reward: an external program, started once, that reads records
 * as JSONL on its stdin and answers one JSON line per record on its stdout:
 *
 *   {"reward": x}                   one value, written as rewards.cmd
 *   {"rewards": {"a": x, "b": y}}   several, each written under its own name
 *
 * x is a finite number or null. Records are written while answers are read
 * (poll on both pipes), so a program that answers line by line never
 * deadlocks against a full pipe. The program's stderr is ours. It runs in a
 * process group of its own: when the run fails, times out or is interrupted,
 * the whole group is killed, so nothing the program started (sh -c's
 * children, a pipeline) is left running or holding our stderr open. */
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

#include "../env/child.h"
#include "../util/cleanup.h"
#include "../util/clock.h"
#include "reward.h"

typedef struct {
    const char *cmd;
    double timeout;
    child_proc proc;    /* the program (lib/env/child.h), its pipes and process group */
    strbuf pending;     /* bytes of the program's output not yet taken as answers */
    strbuf out;         /* records waiting to be written */
    long long answers;
} cmd_fn;

/* The command as messages show it: at most 60 bytes. */
static int cmd_name_len(const cmd_fn *c) {
    size_t n = strlen(c->cmd);
    return (int)(n > 60 ? 60 : n);
}

static int exit_error(cmd_fn *c, const reward_item *it, gerr *e) {
    char how[64];
    child_reap(&c->proc, how, sizeof how);
    if (it)
        return gerr_at(e, EX_SOFTWARE, it->rec->file, it->rec->line,
                       "cmd '%.*s' %s before answering this record (%lld answers given)", cmd_name_len(c), c->cmd,
                       how, c->answers);
    return gerr_set(e, EX_SOFTWARE, "cmd '%.*s' %s", cmd_name_len(c), c->cmd, how);
}

/* One answer line into out. */
static int parse_answer(cmd_fn *c, const reward_item *it, const char *line, size_t len, reward_entries *out,
                        gerr *e) {
    const char *why = reward_cmd_answer_parse(line, len, out);
    if (!why) return 0;
    return gerr_at(e, EX_DATAERR, it->rec->file, it->rec->line, "cmd '%.*s': answer %lld: expected %s, got: %.*s",
                   cmd_name_len(c), c->cmd, c->answers + 1, why, (int)(len > 80 ? 80 : len), line);
}

/* Moves the complete lines of c->pending into answers, up to `want`. */
static int take_answers(cmd_fn *c, const reward_item *items, size_t want, size_t *got, reward_entries *out,
                        gerr *e) {
    if (!c->pending.len) return 0;
    size_t start = 0;
    while (*got < want) {
        char *nl = memchr(c->pending.data + start, '\n', c->pending.len - start);
        if (!nl) break;
        size_t len = (size_t)(nl - (c->pending.data + start));
        if (parse_answer(c, &items[*got], c->pending.data + start, len, &out[*got], e)) return -1;
        c->answers++;
        (*got)++;
        start += len + 1;
    }
    memmove(c->pending.data, c->pending.data + start, c->pending.len - start);
    c->pending.len -= start;
    c->pending.data[c->pending.len] = 0;
    return 0;
}

static int cmd_score(void *self, const reward_item *items, size_t n, reward_entries *out, gerr *e) {
    cmd_fn *c = self;
    if (c->proc.pid < 0) return gerr_set(e, EX_SOFTWARE, "cmd '%.*s' is not running", cmd_name_len(c), c->cmd);
    sb_clear(&c->out);
    for (size_t i = 0; i < n; i++) {
        record_serialize(items[i].rec, &c->out);
        sb_putc(&c->out, '\n');
    }
    size_t written = 0, got = 0;
    double last_progress = now_seconds();
    while (got < n) {
        if (take_answers(c, items, n, &got, out, e)) return -1;
        if (got == n) break;
        struct pollfd pf[2] = {{.fd = c->proc.from_fd, .events = POLLIN}, {.fd = -1}};
        if (c->proc.to_fd >= 0 && written < c->out.len) pf[1] = (struct pollfd){.fd = c->proc.to_fd, .events = POLLOUT};
        double left = c->timeout - (now_seconds() - last_progress);
        if (left <= 0)
            return gerr_at(e, EX_SOFTWARE, items[got].rec->file, items[got].rec->line,
                           "cmd '%.*s' gave no answer for this record within %g s (--cmd-timeout; a program must "
                           "flush each answer line: python3 -u, jq --unbuffered)",
                           cmd_name_len(c),
                           c->cmd, c->timeout);
        int ready = poll(pf, 2, (int)(left * 1000) + 1);
        if (ready < 0) {
            if (errno == EINTR) continue;
            return gerr_set(e, EX_OSERR, "poll: %s", strerror(errno));
        }
        if (pf[1].revents) {
            if (child_write_some(&c->proc, c->out.data, c->out.len, &written, e)) return -1;
            last_progress = now_seconds();
            if (written == c->out.len && items[n - 1].last_of_input && c->proc.to_fd >= 0) {
                /* end of input now: a program that buffers its output flushes at exit */
                close(c->proc.to_fd);
                c->proc.to_fd = -1;
            }
        }
        if (pf[0].revents) {
            sb_reserve(&c->pending, 65536);
            ssize_t r = read(c->proc.from_fd, c->pending.data + c->pending.len, 65536);
            if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            if (r < 0) return gerr_set(e, EX_IOERR, "cmd '%.*s': reading answers: %s", cmd_name_len(c), c->cmd,
                                       strerror(errno));
            if (r == 0) return exit_error(c, &items[got], e);
            c->pending.len += (size_t)r;
            c->pending.data[c->pending.len] = 0;
            last_progress = now_seconds();
        }
    }
    return 0;
}

/* After the last record: the program sees end of input and must exit 0
 * without further answers. */
static int cmd_finish(void *self, gerr *e) {
    cmd_fn *c = self;
    if (c->proc.to_fd >= 0) close(c->proc.to_fd);
    c->proc.to_fd = -1;
    double deadline = now_seconds() + c->timeout;
    for (;;) {
        struct pollfd pf = {.fd = c->proc.from_fd, .events = POLLIN};
        double left = deadline - now_seconds();
        if (left <= 0)
            return gerr_set(e, EX_SOFTWARE, "cmd '%.*s' did not exit within %g s of the end of its input",
                            cmd_name_len(c), c->cmd, c->timeout);
        int ready = poll(&pf, 1, (int)(left * 1000) + 1);
        if (ready < 0 && errno != EINTR) return gerr_set(e, EX_OSERR, "poll: %s", strerror(errno));
        if (ready <= 0) continue;
        char buf[4096];
        ssize_t r = read(c->proc.from_fd, buf, sizeof buf);
        if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (r < 0) return gerr_set(e, EX_IOERR, "cmd '%.*s': %s", cmd_name_len(c), c->cmd, strerror(errno));
        if (r == 0) break;
        sb_append(&c->pending, buf, (size_t)r);
    }
    for (size_t i = 0; i < c->pending.len; i++)
        if (c->pending.data[i] != '\n' && c->pending.data[i] != ' ' && c->pending.data[i] != '\r')
            return gerr_set(e, EX_SOFTWARE, "cmd '%.*s' gave more answers than there were records (%lld)",
                            cmd_name_len(c), c->cmd, c->answers);
    int status;
    pid_t got;
    do got = waitpid(c->proc.pid, &status, 0);
    while (got < 0 && errno == EINTR);
    c->proc.pid = -1;
    if (got < 0) return gerr_set(e, EX_OSERR, "waitpid: %s", strerror(errno));
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        /* what it left running in the background is its own business */
        cleanup_unregister_group(c->proc.pgid);
        c->proc.pgid = 0;
        return 0;
    }
    if (WIFSIGNALED(status))
        return gerr_set(e, EX_SOFTWARE, "cmd '%.*s' was killed by signal %d", cmd_name_len(c), c->cmd,
                        WTERMSIG(status));
    return gerr_set(e, EX_SOFTWARE, "cmd '%.*s' exited with status %d", cmd_name_len(c), c->cmd,
                    WEXITSTATUS(status));
}

static void cmd_stats(void *self, cJSON *obj) {
    cmd_fn *c = self;
    cJSON *o = cJSON_AddObjectToObject(obj, "cmd");
    if (o) cJSON_AddNumberToObject(o, "answers", (double)c->answers);
}

static void cmd_close(void *self) {
    cmd_fn *c = self;
    if (!c) return;
    /* stopped early (an error, a timeout): the whole group is stopped */
    child_close(&c->proc);
    sb_free(&c->pending);
    sb_free(&c->out);
    free(c);
}

int reward_open_cmd(reward_fn *fn, const reward_opts *p, gerr *e) {
    if (!p->cmd || !*p->cmd) return gerr_set(e, EX_USAGE, "--fn cmd needs --cmd 'PROGRAM'");
    cmd_fn *c = xcalloc(1, sizeof *c);
    c->cmd = p->cmd;
    c->timeout = p->cmd_timeout > 0 ? p->cmd_timeout : 60;
    int rc = child_start(&c->proc, p->cmd, e);
    if (rc) {
        free(c);
        return rc;
    }
    fn->self = c;
    fn->score_named = cmd_score;
    fn->finish = cmd_finish;
    fn->stats = cmd_stats;
    fn->close = cmd_close;
    return 0;
}
