/* Removing a run's directory with everything its program left in it.
 *
 * The program chose the tree: it can be deeper than we have descriptors,
 * hold directories without permissions, symbolic links to anywhere, or
 * (without a PID namespace, where a process can outlive the run) change
 * while we remove it. So the walk keeps one descriptor, goes up through
 * "..", checks that ".." is the directory it came from (by device and
 * inode), never follows a link, and stops at the first entry it cannot
 * remove rather than loop. */
#include "sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    dev_t dev;
    ino_t ino;
} dir_id;

enum { SCAN_EMPTY, SCAN_DESCEND, SCAN_STUCK };

/* Removes what it can in the directory *fd; on meeting a non-empty
 * subdirectory, makes it searchable, opens it into *fd and says so. */
static int scan(int *fd) {
    int scan_fd = dup(*fd);
    if (scan_fd < 0) return SCAN_STUCK;
    DIR *d = fdopendir(scan_fd);
    if (!d) {
        close(scan_fd);
        return SCAN_STUCK;
    }
    int result = SCAN_EMPTY;
    struct dirent *ent;
    while (result == SCAN_EMPTY && (ent = readdir(d))) {
        const char *name = ent->d_name;
        if (!strcmp(name, ".") || !strcmp(name, "..")) continue;
        if (unlinkat(*fd, name, 0) == 0 || errno == ENOENT) continue;
        if (errno != EISDIR && errno != EPERM) {
            result = SCAN_STUCK;
            break;
        }
        if (unlinkat(*fd, name, AT_REMOVEDIR) == 0 || errno == ENOENT) continue;
        if (errno != ENOTEMPTY && errno != EEXIST && errno != EACCES && errno != EPERM) {
            result = SCAN_STUCK;
            break;
        }
        (void)fchmodat(*fd, name, S_IRWXU, 0); /* its owner (the run) may have locked it */
        int sub = openat(*fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0) {
            result = SCAN_STUCK;
            break;
        }
        close(*fd);
        *fd = sub;
        result = SCAN_DESCEND;
    }
    closedir(d);
    return result;
}

int sandbox_remove_tree(const char *path) {
    if (!path || !*path) return 0;
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return 0;
        if (errno == ENOTDIR || errno == ELOOP) return unlink(path);
        if (errno == EACCES && chmod(path, S_IRWXU) == 0)
            fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) return -1;
    }
    dir_id *stack = NULL; /* identities of the directories above the current one */
    size_t depth = 0, cap = 0;
    int rc = 0, root_passes = 0;
    for (;;) {
        struct stat st;
        if (fstat(fd, &st)) {
            rc = -1;
            break;
        }
        int s = scan(&fd);
        if (s == SCAN_STUCK) {
            rc = -1;
            break;
        }
        if (s == SCAN_DESCEND) {
            if (depth == cap) {
                cap = cap ? 2 * cap : 64;
                stack = xrealloc(stack, cap * sizeof *stack);
            }
            stack[depth++] = (dir_id){st.st_dev, st.st_ino};
            continue;
        }
        if (depth == 0) {
            if (rmdir(path) == 0 || errno == ENOENT) break;
            /* readdir may skip entries removed under it: look again, a few times */
            if (errno != ENOTEMPTY || ++root_passes > 100) {
                rc = -1;
                break;
            }
            continue;
        }
        int up = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct stat ust;
        depth--;
        if (up < 0 || fstat(up, &ust) || ust.st_dev != stack[depth].dev || ust.st_ino != stack[depth].ino) {
            if (up >= 0) close(up); /* moved out from under us: leave it rather than walk elsewhere */
            rc = -1;
            break;
        }
        close(fd);
        fd = up;
    }
    close(fd);
    free(stack);
    return rc;
}
