#include "rng.h"

#include <string.h>

#include "sha256.h"

void philox4x32_10(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]) {
    const uint32_t m0 = 0xD2511F53, m1 = 0xCD9E8D57, w0 = 0x9E3779B9, w1 = 0xBB67AE85;
    uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)m0 * c0, p1 = (uint64_t)m1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n1 = (uint32_t)p1;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        uint32_t n3 = (uint32_t)p0;
        c0 = n0, c1 = n1, c2 = n2, c3 = n3;
        k0 += w0, k1 += w1;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

void rng_init(rng_stream *r, uint64_t seed, const char *id, size_t id_len, uint64_t index) {
    sha256_ctx c;
    unsigned char le[8], d[32];
    sha256_init(&c);
    sha256_update(&c, "grpo-rng", 9); /* includes the NUL separator */
    for (int i = 0; i < 8; i++) le[i] = (unsigned char)(seed >> (8 * i));
    sha256_update(&c, le, 8);
    for (int i = 0; i < 8; i++) le[i] = (unsigned char)(index >> (8 * i));
    sha256_update(&c, le, 8);
    sha256_update(&c, id, id_len);
    sha256_final(&c, d);
    r->key[0] = (uint32_t)d[0] | (uint32_t)d[1] << 8 | (uint32_t)d[2] << 16 | (uint32_t)d[3] << 24;
    r->key[1] = (uint32_t)d[4] | (uint32_t)d[5] << 8 | (uint32_t)d[6] << 16 | (uint32_t)d[7] << 24;
    r->block = 0;
    r->used = 4;
}

uint32_t rng_u32(rng_stream *r) {
    if (r->used == 4) {
        uint32_t ctr[4] = {(uint32_t)r->block, (uint32_t)(r->block >> 32), 0, 0};
        philox4x32_10(ctr, r->key, r->buf);
        r->block++;
        r->used = 0;
    }
    return r->buf[r->used++];
}

uint64_t rng_u64(rng_stream *r) {
    uint64_t hi = rng_u32(r);
    return hi << 32 | rng_u32(r);
}

double rng_uniform(rng_stream *r) { return (double)(rng_u64(r) >> 11) * 0x1.0p-53; }

uint64_t rng_below(rng_stream *r, uint64_t n) {
    /* Reject the top sliver so every residue is equally likely. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    for (;;) {
        uint64_t v = rng_u64(r);
        if (v < limit) return v % n;
    }
}
