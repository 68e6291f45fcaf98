#include "bigmem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>

enum { HUGE_PAGE = 2 << 20 };

void *big_calloc(size_t n, size_t size) {
    if (size && n > SIZE_MAX / size) return NULL;
    size_t bytes = n * size;
    if (bytes < HUGE_PAGE) return calloc(n ? n : 1, size ? size : 1);
    if (bytes > SIZE_MAX - HUGE_PAGE) return NULL;
    size_t rounded = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    void *p = aligned_alloc(HUGE_PAGE, rounded);
    if (!p) return NULL;
#ifdef MADV_HUGEPAGE
    /* advice only: where it fails (no THP, an old kernel) the pages stay
     * 4 KiB and the zeros below still make each fault a single write */
    (void)madvise(p, rounded, MADV_HUGEPAGE);
#endif
    memset(p, 0, rounded);
    return p;
}

void *big_reserve(size_t n) {
    void *p = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void big_will_fill(void *p, size_t n) {
#ifdef MADV_HUGEPAGE
    uintptr_t lo = ((uintptr_t)p + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE, hi = ((uintptr_t)p + n) / HUGE_PAGE * HUGE_PAGE;
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
    (void)p, (void)n;
#endif
}

void big_unreserve(void *p, size_t n) {
    if (p) (void)munmap(p, n ? n : 1); /* fails only for a range not mapped: nothing to give back */
}

bool big_fits(size_t n) {
    struct sysinfo si;
    if (sysinfo(&si) != 0) return true; /* unknown: the pages themselves will tell */
    unsigned long long have = ((unsigned long long)si.totalram + si.totalswap) * si.mem_unit;
    return n <= have;
}
