/* How data-parallel work is split between ranks (no MPI here): the batch by
 * whole prompt groups, balanced by tokens, and the trained parameters into
 * ZeRO-1 slices. */
#ifndef GRPO_SHARD_H
#define GRPO_SHARD_H

#include <stddef.h>

/* Groups g = 0 .. n_groups-1 hold cum[g+1] - cum[g] tokens (cum[0] = 0,
 * non-decreasing). Writes first[0 .. size]: rank r takes groups first[r] ..
 * first[r+1]-1, a contiguous run, so the ranks' shares in rank order are the
 * batch in order. A group goes to the rank whose equal share of the tokens
 * holds its middle token; with no tokens at all, groups are dealt by count.
 * A rank may get none (more ranks than groups, or one group larger than a
 * share): it then adds nothing to the gradient, which is still exact. */
void shard_groups(const long long *cum, int n_groups, int size, int *first);

/* Rank r's ZeRO-1 slice of n trained floats: bounds[r] .. bounds[r+1], equal
 * shares rounded to multiples of 16 floats (64-byte boundaries), the last
 * rank taking the rest. bounds has size + 1 entries. */
void shard_slices(size_t n, int size, size_t *bounds);

#endif
