#include "idhash.h"

#include "sha256.h"

static uint64_t be64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | p[i];
    return v;
}

double idhash_fraction(const char *id, size_t len) {
    unsigned char d[32];
    sha256(id, len, d);
    return (double)(be64(d) >> 11) * 0x1.0p-53;
}

uint64_t idhash_shard(const char *id, size_t len) {
    unsigned char d[32];
    sha256(id, len, d);
    return be64(d + 8);
}
