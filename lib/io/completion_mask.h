/* A multi-turn rollout record's completion_mask (formats/rollout.md): one 0
 * or 1 per completion token, 1 where the policy sampled the token, 0 where
 * the environment inserted it. grpo-update trains on the 1s only; the 0s
 * are context. A record without the field (or with null) is single-turn:
 * every completion token is the policy's. */
#ifndef GRPO_COMPLETION_MASK_H
#define GRPO_COMPLETION_MASK_H

#include <stddef.h>
#include <stdint.h>

#include "record.h"
#include "../util/err.h"

/* *mask: n_completion flags (xmalloc'd, caller frees), or NULL when the
 * record has no mask. EX_DATAERR naming FILE:LINE and the field for an
 * array of another length or an entry other than 0 or 1. */
int completion_mask_read(const record *r, size_t n_completion, uint8_t **mask, gerr *e);

/* The record's logprobs into out[0 .. n_completion): a finite number <= 0
 * wherever mask is 1 (or everywhere without a mask); at mask-0 positions
 * null or any number, stored as 0 (never read). EX_DATAERR naming the
 * field and the entry otherwise. */
int completion_mask_logprobs(const record *r, const uint8_t *mask, int n_completion, float *out, gerr *e);

/* Keeps v[t] where mask[t] is 1, in order, at the front of v; returns how
 * many. mask NULL keeps all n. */
int completion_mask_select(float *v, const uint8_t *mask, int n);

/* The number of 1s (n without a mask). */
int completion_mask_count(const uint8_t *mask, int n);

#endif
