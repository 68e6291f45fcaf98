#include "mapped.h"

#include "../util/strbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

const char *file_kind(unsigned mode) {
    switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFSOCK: return "a socket";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFLNK: return "a symlink";
    }
    return "an unknown kind of file";
}

int map_file(const char *path, void **map, size_t *len, gerr *e) {
    *map = NULL;
    *len = 0;
    /* O_NONBLOCK: a FIFO is refused below instead of waiting for a writer */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        int code = errno == ENOENT || errno == EACCES || errno == ENOTDIR ? EX_NOINPUT : EX_IOERR;
        return gerr_set(e, code, "%s: cannot open: %s", path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int saved = errno;
        close(fd);
        return gerr_set(e, EX_IOERR, "%s: fstat: %s", path, strerror(saved));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return gerr_set(e, EX_NOINPUT, "%s: not a regular file (%s)", path, file_kind(st.st_mode));
    }
    size_t n = (size_t)st.st_size;
    if (n == 0) {
        close(fd);
        return 0;
    }
    void *p = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
    int saved = errno;
    close(fd); /* the mapping stays valid */
    if (p == MAP_FAILED) return gerr_set(e, EX_IOERR, "%s: mmap: %s", path, strerror(saved));
    *map = p;
    *len = n;
    return 0;
}

void map_release(void *map, size_t len) {
    if (map) munmap(map, len);
}

char *read_whole_file(const char *path, size_t *len, gerr *e) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        int code = errno == ENOENT || errno == ENOTDIR ? EX_NOINPUT : EX_IOERR;
        gerr_set(e, code, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    strbuf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) sb_append(&b, chunk, n);
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        sb_free(&b);
        gerr_set(e, EX_IOERR, "%s: read error", path);
        return NULL;
    }
    if (!b.data) sb_reserve(&b, 0); /* an empty file is "" */
    if (len) *len = b.len;
    return b.data;
}

int regular_file_probe(const char *path, bool *present, gerr *e) {
    *present = false;
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT || errno == ENOTDIR) return 0; /* ENOTDIR: a file where a directory would be */
        return gerr_set(e, EX_NOINPUT, "%s: cannot look up: %s", path, strerror(errno));
    }
    if (S_ISLNK(st.st_mode) && stat(path, &st) != 0)
        return gerr_set(e, EX_NOINPUT, "%s: cannot follow the symlink: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return gerr_set(e, EX_NOINPUT, "%s: not a regular file (%s)", path, file_kind(st.st_mode));
    *present = true;
    return 0;
}

char *read_regular_file(const char *path, size_t *len, gerr *e) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        int code = errno == ENOENT || errno == ENOTDIR ? EX_NOINPUT : EX_IOERR;
        gerr_set(e, code, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        gerr_set(e, EX_IOERR, "%s: fstat: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        gerr_set(e, EX_NOINPUT, "%s: not a regular file (%s)", path, file_kind(st.st_mode));
        close(fd);
        return NULL;
    }
    strbuf b = {0};
    char chunk[65536];
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int saved = errno;
            close(fd);
            sb_free(&b);
            gerr_set(e, EX_IOERR, "%s: read error: %s", path, strerror(saved));
            return NULL;
        }
        if (n == 0) break;
        sb_append(&b, chunk, (size_t)n);
    }
    close(fd);
    if (!b.data) sb_reserve(&b, 0);
    if (len) *len = b.len;
    return b.data;
}

void map_drop(const void *p, size_t n) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)p + page - 1) / page * page, hi = ((uintptr_t)p + n) / page * page;
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_DONTNEED); /* advice: failing, the pages only stay */
}

int read_optional_file(const char *path, char **text, size_t *len, gerr *e) {
    *text = NULL;
    if (len) *len = 0;
    bool present;
    int rc = regular_file_probe(path, &present, e);
    if (rc || !present) return rc;
    *text = read_regular_file(path, len, e);
    return *text ? 0 : e->code;
}
