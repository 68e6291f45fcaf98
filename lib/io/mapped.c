#include "mapped.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int map_file(const char *path, void **map, size_t *len, gerr *e) {
    *map = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
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
        return gerr_set(e, EX_NOINPUT, "%s: not a regular file", path);
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
