#include "outpath.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "../util/strbuf.h"

enum { MAX_LINKS = 40, NOT_FD_LINK = -2, OTHER_FD_LINK = -1 };

void outpath_target_free(outpath_target *t) {
    free(t->target);
    memset(t, 0, sizeof *t);
    t->own_fd = -1;
}

/* The directory part of path ("." when it has none); caller frees. */
static char *parent_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return xstrdup(".");
    if (slash == path) return xstrdup("/");
    return xstrndup(path, (size_t)(slash - path));
}

/* Whether link (a symlink) is an entry of a /proc/PID/fd directory (which
 * /dev/fd and /dev/stdout lead to): its descriptor N when the PID is ours,
 * OTHER_FD_LINK for another process's, NOT_FD_LINK for an ordinary link. */
static int fd_link_number(const char *link) {
    char *dir = parent_of(link);
    char *real = realpath(dir, NULL);
    free(dir);
    if (!real) return NOT_FD_LINK;
    int result = NOT_FD_LINK;
    long pid, tid;
    int used = 0;
    /* /proc/thread-self/fd is /proc/PID/task/TID/fd */
    bool is_fd_dir = (sscanf(real, "/proc/%ld/fd%n", &pid, &used) == 1 && used > 0 && real[used] == 0) ||
                     (used = 0, sscanf(real, "/proc/%ld/task/%ld/fd%n", &pid, &tid, &used) == 2 && used > 0 &&
                                    real[used] == 0);
    if (is_fd_dir) {
        result = OTHER_FD_LINK;
        const char *base = strrchr(link, '/');
        base = base ? base + 1 : link;
        char *end;
        errno = 0;
        long n = strtol(base, &end, 10);
        if (pid == (long)getpid() && !errno && end != base && !*end && n >= 0 && n <= INT_MAX) result = (int)n;
    }
    free(real);
    return result;
}

int outpath_resolve(const char *path, outpath_target *t, gerr *e) {
    memset(t, 0, sizeof *t);
    t->own_fd = -1;
    char *cur = xstrdup(path);
    for (int hops = 0; hops <= MAX_LINKS; hops++) {
        struct stat st;
        if (lstat(cur, &st) != 0) {
            if (errno == ENOENT) { /* missing: created there (its parent is checked apart) */
                t->target = cur;
                return 0;
            }
            gerr_set(e, EX_CANTCREAT, "%s: cannot create: %s", path, strerror(errno));
            free(cur);
            return EX_CANTCREAT;
        }
        t->exists = true;
        if (S_ISLNK(st.st_mode)) {
            int fd = fd_link_number(cur);
            if (fd != NOT_FD_LINK) { /* a descriptor: no name to rename over */
                t->target = cur;
                t->in_place = true;
                t->own_fd = fd;
                return 0;
            }
            char buf[PATH_MAX];
            ssize_t n = readlink(cur, buf, sizeof buf - 1);
            if (n < 0) {
                gerr_set(e, EX_CANTCREAT, "%s: cannot create: %s", path, strerror(errno));
                free(cur);
                return EX_CANTCREAT;
            }
            buf[n] = 0;
            strbuf next = {0};
            if (buf[0] != '/') { /* relative to the link's own directory */
                char *dir = parent_of(cur);
                sb_printf(&next, "%s/", dir);
                free(dir);
            }
            sb_puts(&next, buf);
            free(cur);
            cur = next.data;
            continue;
        }
        t->target = cur;
        t->is_dir = S_ISDIR(st.st_mode);
        t->in_place = !S_ISREG(st.st_mode) && !t->is_dir;
        t->is_socket = S_ISSOCK(st.st_mode);
        return 0;
    }
    free(cur);
    return gerr_set(e, EX_CANTCREAT, "%s: cannot create: %s", path, strerror(ELOOP));
}

/* What a path names, for outpath_distinct: an existing regular file or
 * directory by inode; a missing one by its final directory's inode and its
 * last name (symlinks followed). skip: stdin/stdout, devices, FIFOs, sockets,
 * and paths that cannot be looked up (outpath_check reports those). */
typedef struct {
    bool skip, exists;
    dev_t dev;
    ino_t ino;
    char *base;
} path_id;

static void identify(const char *path, path_id *id) {
    memset(id, 0, sizeof *id);
    struct stat st;
    id->skip = !path || !strcmp(path, "-");
    if (id->skip) return;
    if (stat(path, &st) == 0) {
        id->skip = !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
        id->exists = true, id->dev = st.st_dev, id->ino = st.st_ino;
        return;
    }
    outpath_target t;
    gerr ignored;
    if (outpath_resolve(path, &t, &ignored)) {
        id->skip = true;
        return;
    }
    char *dir = parent_of(t.target);
    const char *slash = strrchr(t.target, '/');
    id->skip = stat(dir, &st) != 0;
    id->dev = st.st_dev, id->ino = st.st_ino;
    id->base = xstrdup(slash ? slash + 1 : t.target);
    free(dir);
    outpath_target_free(&t);
}

static bool same_id(const path_id *a, const path_id *b) {
    if (a->skip || b->skip || a->exists != b->exists || a->dev != b->dev || a->ino != b->ino) return false;
    return a->exists || !strcmp(a->base, b->base);
}

int outpath_distinct(const outpath_use *u, int n, gerr *e) {
    path_id *ids = xcalloc(n > 0 ? (size_t)n : 1, sizeof *ids);
    for (int i = 0; i < n; i++) identify(u[i].path, &ids[i]);
    int rc = 0;
    for (int i = 0; i < n && !rc; i++)
        for (int j = i + 1; j < n && !rc; j++) {
            bool both_read = u[i].role == OUTPATH_READ && u[j].role == OUTPATH_READ;
            bool read_replace = (u[i].role == OUTPATH_READ && u[j].role == OUTPATH_REPLACE) ||
                                (u[j].role == OUTPATH_READ && u[i].role == OUTPATH_REPLACE);
            if (both_read || read_replace || !same_id(&ids[i], &ids[j])) continue;
            bool reads = u[i].role == OUTPATH_READ || u[j].role == OUTPATH_READ;
            rc = gerr_set(e, EX_USAGE, "%s %s and %s %s are the same file: %s", u[i].flag, u[i].path, u[j].flag,
                          u[j].path,
                          reads ? "the output would be written into the input as it is read; give the output "
                                  "another path"
                                : "one output would overwrite the other; give each its own path");
        }
    for (int i = 0; i < n; i++) free(ids[i].base);
    free(ids);
    return rc;
}

int outpath_open_in_place(const outpath_target *t) {
    if (t->own_fd >= 0) return fcntl(t->own_fd, F_DUPFD_CLOEXEC, 0);
    struct stat st; /* another process's descriptor of a regular file: replace its bytes, as > does */
    bool regular = stat(t->target, &st) == 0 && S_ISREG(st.st_mode);
    if (!t->is_socket) return open(t->target, O_WRONLY | O_NOCTTY | O_CLOEXEC | (regular ? O_TRUNC : 0));
    /* a socket cannot be open()ed: connect to it as a stream */
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(t->target) >= sizeof sa.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(sa.sun_path, t->target);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

/* Whether an in-place target can be written, without opening it (a FIFO's
 * open would wait for a reader). */
static bool in_place_writable(const outpath_target *t) {
    if (t->own_fd >= 0) {
        int fl = fcntl(t->own_fd, F_GETFL);
        if (fl < 0) return false;
        if ((fl & O_ACCMODE) == O_RDONLY) {
            errno = EBADF;
            return false;
        }
        return true;
    }
    return access(t->target, W_OK) == 0;
}

/* The directory that will hold a new entry: exists, is a directory, writable. */
static int parent_ok(const char *path, const char *target, gerr *e) {
    char *dir = parent_of(target);
    struct stat st;
    int err = 0;
    if (stat(dir, &st) != 0)
        err = errno;
    else if (!S_ISDIR(st.st_mode))
        err = ENOTDIR;
    else if (access(dir, W_OK | X_OK) != 0)
        err = errno;
    int rc = 0;
    if (err == ENOENT || err == ENOTDIR)
        rc = gerr_set(e, EX_CANTCREAT, "%s: cannot create: directory %s does not exist", path, dir);
    else if (err)
        rc = gerr_set(e, EX_CANTCREAT, "%s: cannot create in %s: %s", path, dir, strerror(err));
    free(dir);
    return rc;
}

int outpath_check(const char *path, outpath_kind kind, gerr *e) {
    if (!path || !strcmp(path, "-")) return 0;
    if (!*path) return gerr_set(e, EX_USAGE, "an output path is empty");
    /* "ckpt/" names the directory ckpt */
    size_t n = strlen(path);
    while (kind == OUTPATH_DIR && n > 1 && path[n - 1] == '/') n--;
    char *given = xstrndup(path, n);
    const char *base = strrchr(given, '/');
    base = base ? base + 1 : given;
    if (kind == OUTPATH_DIR && (!*base || !strcmp(base, ".") || !strcmp(base, ".."))) {
        free(given); /* the temporary and the swap need a name in a parent */
        return gerr_set(e, EX_USAGE, "%s: not usable as a checkpoint directory name", path);
    }
    outpath_target t;
    int rc = outpath_resolve(given, &t, e);
    if (rc) {
        free(given);
        return rc;
    }
    if (kind == OUTPATH_DIR && t.exists && !t.is_dir)
        rc = gerr_set(e, EX_CANTCREAT, "%s: exists and is not a directory", path);
    else if (kind != OUTPATH_DIR && t.is_dir)
        rc = gerr_set(e, EX_CANTCREAT, "%s: cannot create: is a directory", path);
    else if (t.in_place && !in_place_writable(&t))
        rc = gerr_set(e, EX_CANTCREAT, "%s: cannot write: %s", path, strerror(errno));
    else if (kind == OUTPATH_APPEND && t.exists && !t.in_place && access(t.target, W_OK) != 0)
        rc = gerr_set(e, EX_CANTCREAT, "%s: cannot write: %s", path, strerror(errno));
    else if (!t.in_place) /* a checkpoint replaces a symlink itself (ckptdir.h), a file the link's target */
        rc = parent_ok(path, kind == OUTPATH_DIR ? given : t.target, e);
    outpath_target_free(&t);
    free(given);
    return rc;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)st, (void)type, (void)ftw;
    remove(path); /* best effort: what is left shows up in the final check */
    return 0;
}

bool outpath_fsync(int fd) {
    if (fsync(fd) == 0) return true;
    return errno == EINVAL || errno == ESPIPE || errno == EROFS || errno == ENOTSUP;
}

bool outpath_remove_tree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT;
    if (!S_ISDIR(st.st_mode)) return unlink(path) == 0;
    nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return lstat(path, &st) != 0 && errno == ENOENT;
}

/* The current boot's time (btime of /proc/stat), 0 when unknown. */
static time_t boot_time(void) {
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return 0;
    char line[256];
    long long bt = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "btime %lld", &bt) == 1) break;
    fclose(f);
    return (time_t)bt;
}

/* The PID of "<prefix><digits>", or 0 when name is not of that shape. */
static pid_t suffix_pid(const char *name, const char *prefix) {
    size_t n = strlen(prefix);
    if (strncmp(name, prefix, n) || !name[n]) return 0;
    char *end;
    errno = 0;
    long pid = strtol(name + n, &end, 10);
    if (errno || *end || name[n] < '0' || name[n] > '9' || pid <= 0 || pid > INT_MAX) return 0;
    return (pid_t)pid;
}

void outpath_remove_stale(const char *target) {
    size_t n = strlen(target);
    while (n > 1 && target[n - 1] == '/') n--;
    char *path = xstrndup(target, n);
    char *dir = parent_of(path);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    strbuf tmp_prefix = {0}, old_prefix = {0}, victim = {0};
    sb_printf(&tmp_prefix, ".%s.tmp-", base);
    sb_printf(&old_prefix, ".%s.old-", base);
    struct stat st;
    bool name_exists = lstat(path, &st) == 0;
    time_t booted = boot_time();
    DIR *d = opendir(dir);
    struct dirent *ent;
    while (d && (ent = readdir(d))) {
        pid_t pid = suffix_pid(ent->d_name, tmp_prefix.data);
        /* an aside checkpoint is the only whole copy while NAME is missing */
        if (!pid && name_exists) pid = suffix_pid(ent->d_name, old_prefix.data);
        if (!pid || pid == getpid()) continue;
        sb_clear(&victim);
        sb_printf(&victim, "%s/%s", dir, ent->d_name);
        if (lstat(victim.data, &st) != 0) continue;
        bool gone = kill(pid, 0) != 0 && errno == ESRCH;
        bool before_boot = booted > 0 && st.st_mtime < booted;
        if (gone || before_boot) outpath_remove_tree(victim.data);
    }
    if (d) closedir(d);
    sb_free(&tmp_prefix);
    sb_free(&old_prefix);
    sb_free(&victim);
    free(dir);
    free(path);
}
