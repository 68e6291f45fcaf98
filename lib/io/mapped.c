#include "mapped.h"

#include "../util/strbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
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
