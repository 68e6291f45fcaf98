/* Splitting a batch and the trained parameters between ranks (shard.h). */
#include "shard.h"

void shard_groups(const long long *cum, int n_groups, int size, int *first) {
    long long total = n_groups > 0 ? cum[n_groups] : 0;
    int r = 0;
    first[0] = 0;
    for (int g = 0; g < n_groups; g++) {
        /* the rank of the group's middle: floor(size * mid / total), mid =
         * (cum[g] + cum[g+1]) / 2, in integers (2 size cum stays far below
         * 2^63 for any batch with int offsets); by count without tokens */
        long long owner = total > 0 ? (long long)size * (cum[g] + cum[g + 1]) / (2 * total)
                                    : (long long)size * (2LL * g + 1) / (2LL * n_groups);
        if (owner >= size) owner = size - 1;
        while (r < owner) first[++r] = g;
    }
    while (r < size) first[++r] = n_groups;
}

void shard_slices(size_t n, int size, size_t *bounds) {
    bounds[0] = 0;
    for (int r = 1; r < size; r++) {
        /* n r / size without overflow for any n below 2^64 / size */
        size_t at = n / (size_t)size * (size_t)r + n % (size_t)size * (size_t)r / (size_t)size;
        at -= at % 16;
        bounds[r] = at > bounds[r - 1] ? at : bounds[r - 1];
    }
    bounds[size] = n;
}
