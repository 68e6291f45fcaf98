/* Stable hashes of record ids, reproducible by anyone:
 *   d = SHA-256(id as UTF-8 bytes)
 *   split fraction = (big-endian u64 of d[0..7]) / 2^64      (grpo-prep --split)
 *   shard value    =  big-endian u64 of d[8..15]              (--shard i/n: value mod n == i)
 * Using different bytes keeps the split and the shards independent. */
#ifndef GRPO_IDHASH_H
#define GRPO_IDHASH_H

#include <stddef.h>
#include <stdint.h>

double idhash_fraction(const char *id, size_t len);
uint64_t idhash_shard(const char *id, size_t len);

#endif
