/* Opening a sandbox: finding the program, and choosing the strongest
 * isolation the kernel grants by trying it. */
#include "impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../util/strbuf.h"

enum { NOBODY = 65534 };

sandbox_limits sandbox_default_limits(void) {
    sandbox_limits l = {
        .timeout = 10,
        .memory_mb = 1024,
        .max_procs = 32,
        .max_fsize = 1 << 20,
        .max_files = 64,
        .tmpfs_mb = 16,
        .tmpfs_files = 1024,
    };
    return l;
}

static bool is_executable_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

static char *absolute(const char *path) {
    if (path[0] == '/') return xstrdup(path);
    char *cwd = getcwd(NULL, 0);
    if (!cwd) return NULL;
    size_t len = strlen(cwd) + strlen(path) + 2;
    char *out = xmalloc(len);
    snprintf(out, len, "%s/%s", cwd, path);
    free(cwd);
    return out;
}

/* A name with a slash is a path; otherwise the first executable on PATH. */
static char *find_program(const char *name) {
    if (strchr(name, '/')) return is_executable_file(name) ? absolute(name) : NULL;
    const char *path = getenv("PATH");
    if (!path || !*path) path = "/usr/bin:/bin";
    for (const char *p = path;;) {
        const char *end = strchr(p, ':');
        size_t dir_len = end ? (size_t)(end - p) : strlen(p);
        size_t len = dir_len + strlen(name) + 3;
        char *cand = xmalloc(len);
        if (dir_len) snprintf(cand, len, "%.*s/%s", (int)dir_len, p, name);
        else snprintf(cand, len, "./%s", name); /* an empty PATH entry is the current directory */
        char *found = is_executable_file(cand) ? absolute(cand) : NULL;
        free(cand);
        if (found) return found;
        if (!end) return NULL;
        p = end + 1;
    }
}

/* The isolation levels, strongest first. Levels without a user namespace
 * need root; a user namespace alone gives an unprivileged caller the rest. */
static const unsigned levels[] = {
    SANDBOX_NS_USER | SANDBOX_NS_PID | SANDBOX_NS_NET | SANDBOX_NS_MOUNT,
    SANDBOX_NS_PID | SANDBOX_NS_NET | SANDBOX_NS_MOUNT,
    SANDBOX_NS_USER | SANDBOX_NS_PID | SANDBOX_NS_NET,
    SANDBOX_NS_PID | SANDBOX_NS_NET,
    SANDBOX_NS_USER | SANDBOX_NS_NET,
    SANDBOX_NS_NET,
    0,
};

static char *describe_missing(unsigned ns, bool as_root) {
    strbuf b = {0};
    sb_puts(&b, "");
    const struct {
        unsigned bit;
        const char *what;
    } parts[] = {
        {SANDBOX_NS_NET, "network isolation"},
        {SANDBOX_NS_MOUNT, "a read-only file system (code can write wherever its user may)"},
        {SANDBOX_NS_PID, "a PID namespace (a process that leaves its process group can outlive its run)"},
        {SANDBOX_NS_USER, "per-run process counting (RLIMIT_NPROC is shared by all runs of its uid)"},
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        if (ns & parts[i].bit) continue;
        if (b.len) sb_puts(&b, ", ");
        sb_puts(&b, parts[i].what);
    }
    /* Runs as the caller's own uid (not root) with the caller's processes
     * in sight: the kernel lets the same uid read their /proc files. */
    if (!as_root && !(ns & SANDBOX_NS_PID)) {
        if (b.len) sb_puts(&b, ", ");
        sb_puts(&b, "a separate identity (runs are your uid and can read your other processes' environment in "
                    "/proc and signal them; grpo-reward itself the seccomp filter protects)");
    }
    return b.data;
}

static void free_strings(char **v) {
    for (size_t i = 0; v[i]; i++) {
        free(v[i]);
        v[i] = NULL;
    }
}

int sandbox_open(sandbox *sb, const char *program, const char *const *args, const char *const *extra_env,
                 const sandbox_limits *lim, const char *probe_input, gerr *e) {
    memset(sb, 0, sizeof *sb);
    if (!(lim->timeout > 0 && lim->timeout < 1e6) || lim->memory_mb < 1 || lim->max_procs < 1 ||
        lim->max_fsize < 0 || lim->max_files < 8 || lim->tmpfs_mb < 1 || lim->tmpfs_files < 16)
        return gerr_set(e, EX_USAGE, "sandbox: limits out of range");
    sb->lim = *lim;
    sb->program = find_program(program);
    if (!sb->program)
        return gerr_set(e, EX_UNAVAILABLE, "%s: %s", program,
                        strchr(program, '/') ? "not an executable file" : "not found on PATH");
    size_t n_args = 0;
    sb->argv[n_args++] = xstrdup(sb->program);
    for (size_t i = 0; args && args[i]; i++) {
        if (n_args >= SANDBOX_MAX_ARGS) {
            sandbox_close(sb);
            return gerr_set(e, EX_SOFTWARE, "sandbox: more than %d arguments", SANDBOX_MAX_ARGS);
        }
        sb->argv[n_args++] = xstrdup(args[i]);
    }
    for (size_t i = 0; extra_env && extra_env[i]; i++) {
        if (i >= SANDBOX_MAX_ENV) {
            sandbox_close(sb);
            return gerr_set(e, EX_SOFTWARE, "sandbox: more than %d environment variables", SANDBOX_MAX_ENV);
        }
        sb->extra_env[i] = xstrdup(extra_env[i]);
    }
    sb->as_root = geteuid() == 0;
    sb->uid = sb->as_root ? NOBODY : geteuid();
    sb->gid = sb->as_root ? NOBODY : getegid();
    int frc = sandbox_filter_build(getpid(), getpgrp(), &sb->filter, e);
    if (!frc) frc = sandbox_filter_build(0, 0, &sb->filter_pidns, e);
    if (frc) {
        sandbox_close(sb);
        return frc;
    }
    const char *tmp = getenv("TMPDIR");
    sb->tmp_root = xstrdup(tmp && tmp[0] == '/' ? tmp : "/tmp");

    const char *input[1] = {probe_input};
    size_t input_len[1] = {strlen(probe_input)};
    gerr first = {0};
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
        unsigned ns = levels[i];
        if ((ns && !(ns & SANDBOX_NS_USER) && !sb->as_root) || (ns & lim->avoid_ns)) continue;
        sandbox_result res;
        gerr le = {0};
        int rc = sandbox_batch(sb, ns, 1, input, input_len, 1, 1, &res, NULL, 0, &le);
        if (rc == EX_UNAVAILABLE || (rc && ns == 0)) { /* not the isolation's fault: no weaker level helps */
            sandbox_close(sb);
            return gerr_set(e, rc, "%s", le.msg);
        }
        if (rc) {
            if (!first.code) first = le;
            continue;
        }
        if (!sandbox_exited_ok(&res)) {
            char how[64];
            if (res.timed_out) snprintf(how, sizeof how, "did not finish within %gs", lim->timeout);
            else if (WIFSIGNALED(res.status)) snprintf(how, sizeof how, "was killed by signal %d", WTERMSIG(res.status));
            else snprintf(how, sizeof how, "exited with status %d", WEXITSTATUS(res.status));
            char *nl = strchr(res.output, '\n');
            int head = nl ? (int)(nl - res.output) : (int)res.output_len;
            rc = gerr_set(e, EX_UNAVAILABLE, "%s does not work in the sandbox (as uid %u): it %s%s%.*s", sb->program,
                          (unsigned)sb->uid, how, head ? ": " : "", head > 200 ? 200 : head, res.output);
            sandbox_close(sb);
            return rc;
        }
        sb->ns = ns;
        sb->missing = describe_missing(ns, sb->as_root);
        if (first.code) {
            const char *why = strncmp(first.msg, "sandbox: ", 9) ? first.msg : first.msg + 9;
            warn("sandbox: the kernel refused part of the isolation (%s); runs of %s go on without %s", why,
                 sb->program, sb->missing);
        } else if (sb->missing[0]) { /* the caller avoided namespaces: as visible as a refusal */
            warn("sandbox: isolation limited on request; runs of %s go on without %s", sb->program, sb->missing);
        }
        return 0;
    }
    sandbox_close(sb);
    return gerr_set(e, EX_SOFTWARE, "sandbox: no isolation level could be set up");
}

void sandbox_close(sandbox *sb) {
    free(sb->program);
    free_strings(sb->argv);
    free_strings(sb->extra_env);
    free(sb->tmp_root);
    free(sb->missing);
    sandbox_filter_free(&sb->filter);
    sandbox_filter_free(&sb->filter_pidns);
    memset(sb, 0, sizeof *sb);
}
