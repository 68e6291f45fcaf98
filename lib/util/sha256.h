/* SHA-256 (FIPS 180-4). Used for ids, splits, shards, RNG keys and the
 * hashes in checkpoint state: everything that must be reproducible by any
 * other program from the record text alone. */
#ifndef GRPO_SHA256_H
#define GRPO_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t h[8];
    uint64_t total; /* bytes hashed so far */
    unsigned char block[64];
    size_t used;
} sha256_ctx;

void sha256_init(sha256_ctx *c);
void sha256_update(sha256_ctx *c, const void *data, size_t len);
void sha256_final(sha256_ctx *c, unsigned char out[32]);
void sha256(const void *data, size_t len, unsigned char out[32]);
/* Lower-case hex of the first n bytes of digest into out (2n+1 chars). */
void sha256_hex(const unsigned char *digest, size_t n, char *out);

#endif
