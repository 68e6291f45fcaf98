/* lib/dataparallel/shard.c: the batch split by prompt groups balanced by tokens, and
 * ZeRO-1's parameter slices. */
#include <stdlib.h>

#include "check.h"
#include "dataparallel/shard.h"

/* Every rank's groups in order cover 0 .. n_groups-1 exactly once. */
static int covers(const int *first, int size, int n_groups) {
    if (first[0] != 0 || first[size] != n_groups) return 0;
    for (int r = 0; r < size; r++)
        if (first[r + 1] < first[r]) return 0;
    return 1;
}

static void test_groups(void) {
    TEST("shard_groups: contiguous, complete, balanced by tokens");
    {
        /* 8 groups of 10 tokens over 1 .. 9 ranks */
        long long cum[9];
        for (int g = 0; g <= 8; g++) cum[g] = 10LL * g;
        for (int size = 1; size <= 9; size++) {
            int first[10];
            shard_groups(cum, 8, size, first);
            CHECK(covers(first, size, 8));
            for (int r = 0; r < size && size <= 8; r++) { /* 8 / size groups each, give or take one */
                int n = first[r + 1] - first[r];
                CHECK(n >= 8 / size && n <= (8 + size - 1) / size);
            }
        }
        int first[4];
        shard_groups(cum, 8, 1, first);
        CHECK_EQ_INT(first[1], 8);
        shard_groups(cum, 8, 2, first);
        CHECK_EQ_INT(first[1], 4);
    }
    TEST("shard_groups: one long group is a share of its own; by count without tokens");
    {
        /* groups of 100, 10, 10, 10, 10 tokens: two ranks split 100 | 40 */
        long long cum[] = {0, 100, 110, 120, 130, 140};
        int first[3];
        shard_groups(cum, 5, 2, first);
        CHECK(covers(first, 2, 5));
        CHECK_EQ_INT(first[1], 1);
        /* more ranks than groups: some ranks get none */
        int many[8];
        shard_groups(cum, 5, 7, many);
        CHECK(covers(many, 7, 5));
        int idle = 0;
        for (int r = 0; r < 7; r++) idle += many[r + 1] == many[r];
        CHECK(idle >= 2);
        long long zero[] = {0, 0, 0, 0, 0};
        shard_groups(zero, 4, 2, first);
        CHECK_EQ_INT(first[1], 2);
        CHECK_EQ_INT(first[2], 4);
        shard_groups(zero, 0, 2, first); /* an empty batch */
        CHECK(first[0] == 0 && first[1] == 0 && first[2] == 0);
    }
}

static void test_slices(void) {
    TEST("shard_slices: 64-byte boundaries, complete, within 16 floats of equal");
    {
        size_t sizes[] = {0, 5, 16, 1000, 1000003, (size_t)1 << 33};
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            for (int size = 1; size <= 7; size++) {
                size_t b[8];
                size_t n = sizes[k];
                shard_slices(n, size, b);
                CHECK(b[0] == 0 && b[size] == n);
                for (int r = 0; r < size; r++) {
                    CHECK(b[r + 1] >= b[r]);
                    if (r > 0 && r < size) CHECK(b[r] % 16 == 0);
                    size_t share = b[r + 1] - b[r], equal = n / (size_t)size;
                    if (n >= 64 * (size_t)size) CHECK(share + 16 >= equal && share <= equal + 32);
                }
            }
        }
    }
}

int main(void) {
    test_groups();
    test_slices();
    return check_done();
}
