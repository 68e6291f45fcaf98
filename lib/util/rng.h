/* Counter-based random numbers: Philox4x32-10 (Salmon et al., SC'11).
 *
 * A stream is keyed by (seed, record id, index), never by batch position or
 * thread, so a record gets the same numbers however the work is split:
 *   key  = first 8 bytes of SHA-256("grpo-rng" 0x00 || le64(seed) || le64(index) || id),
 *          read little-endian as two u32 words (key[0] = bytes 0..3)
 *   draw n (0, 1, 2, ...) = word n%4 of Philox4x32-10(counter = {n/4 low, n/4 high, 0, 0}, key)
 * The same function runs on a GPU, so both paths can draw the same numbers. */
#ifndef GRPO_RNG_H
#define GRPO_RNG_H

#include <stddef.h>
#include <stdint.h>

void philox4x32_10(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]);

typedef struct {
    uint32_t key[2];
    uint64_t block; /* next counter block */
    uint32_t buf[4];
    int used; /* words of buf consumed; 4 = empty */
} rng_stream;

void rng_init(rng_stream *r, uint64_t seed, const char *id, size_t id_len, uint64_t index);
uint32_t rng_u32(rng_stream *r);
uint64_t rng_u64(rng_stream *r);
/* Uniform in [0, 1) with 53 random bits. */
double rng_uniform(rng_stream *r);
/* Uniform integer in [0, n), unbiased (n > 0). */
uint64_t rng_below(rng_stream *r, uint64_t n);

#endif
