/* A rollout record's `sampler` field (formats/rollout.md): how its tokens
 * and log-probabilities were computed, so that grpo-update can tell whether
 * the records' log-probs are its own arithmetic's.
 *
 *   {"engine":"grpo","device":"cpu","weights":"bf16","kv_cache":"bf16"}
 *   {"engine":"grpo","device":"cpu","weights":"q8","base":"frozen","kv_cache":"f32"}
 *   {"engine":"vllm","model":"Qwen/Qwen3-8B","logprobs":"processed"}
 *
 * Our engine with float32 weights (or mxfp4: MXFP4 experts, whose values
 * are exact in float32 and whose products are float32, the rest float32)
 * and a float32 KV cache on the CPU computes what the float32 trainer
 * computes, up to summation order (~1e-6 in a log-probability): it is
 * `exact`. So is our engine on the CPU with a float32 cache running a LoRA
 * checkpoint on its packed frozen base ("base":"frozen", "weights" that
 * base's format) when the trainer's frozen base has that format (the
 * trainer's own products, lib/ckpt/load.h). Either only against a trainer
 * with float32 products (not --compute bf16), and float32 weights only
 * against a trainer on a float32 base. Anything else (bf16 or q8 weights,
 * a bf16 cache, another frozen base, a device, a server) is not,
 * and grpo-update's defaults treat such records' log-probs as the
 * sampler's rather than the old policy's (formats/loss.md). A record
 * without the field is taken as exact. */
#ifndef GRPO_SAMPLER_FIELD_H
#define GRPO_SAMPLER_FIELD_H

#include <stdbool.h>

#include "../util/err.h"
#include "../util/strbuf.h"
#include "record.h"

/* Our engine's field: device "cpu" or "cuda", weights "f32", "bf16", "q8"
 * or "mxfp4", with frozen "base":"frozen" (the weights a checkpoint's
 * packed frozen base, the adapter unmerged), kv_cache "f32" or "bf16",
 * appended to b as one JSON object. */
void sampler_field_ours(strbuf *b, const char *device, const char *weights, bool frozen, const char *kv_cache);

/* What grpo-update reads of the field. */
typedef enum {
    SAMPLER_ABSENT, /* no field (or null): taken as exact */
    SAMPLER_EXACT,  /* our engine, CPU, float32 weights (or the trainer's frozen base) and cache */
    SAMPLER_OTHER,  /* anything else whose log-probs are of the distribution sampled */
    SAMPLER_RAW,    /* a server whose log-probs are before temperature and truncation ("logprobs": "raw") */
} sampler_kind;

/* The record's sampler, against a trainer whose frozen base is in format
 * trainer_base ("f32", "bf16", "q8" or "mxfp4": grpo-update --base-weights;
 * f32 and mxfp4 hold the same float32 values, so either's records are the
 * other's too) and
 * whose products are trainer_compute's ("f32" or "bf16": --compute; exact
 * needs "f32").
 * EX_DATAERR naming FILE:LINE and the field when it is not an object whose
 * "engine" is a non-empty string, when our engine's device, weights or
 * kv_cache is missing or not one of its names or its base is present and
 * not "frozen", or when another engine's "logprobs" is present and not
 * "processed" or "raw". */
int sampler_field_read(const record *r, const char *trainer_base, const char *trainer_compute, sampler_kind *kind,
                       gerr *e);

#endif
