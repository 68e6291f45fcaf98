/* Every rank must run the same command on the same batch: the flags as
 * used and the batch's hash are compared across ranks before any work that
 * could be wasted, or any write (dist.h). */
#include <stdlib.h>
#include <string.h>

#include "../util/sha256.h"
#include "dist.h"

int dist_check_same(const dist *d, const char *text, const char *what, int code, gerr *e) {
    if (d->size == 1) return 0;
    unsigned char mine[32];
    sha256(text, strlen(text), mine);
    unsigned char *all = xmalloc((size_t)d->size * sizeof mine);
    int rc = dist_allgather_bytes(d, mine, all, sizeof mine, e);
    for (int r = 1; !rc && r < d->size; r++) {
        if (memcmp(all + (size_t)r * sizeof mine, all, sizeof mine))
            rc = gerr_set(e, code,
                          "%s differs between ranks: rank %d's is not rank 0's (seen from rank %d of %d; every "
                          "rank must run the same command on the same batch); nothing written",
                          what, r, d->rank, d->size);
    }
    free(all);
    return rc;
}
