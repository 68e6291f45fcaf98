/* A rollout record's `routing` field (formats/rollout.md): the experts the
 * sampler routed each position to, in every layer with a mixture of
 * experts, so that grpo-update can train with the sampler's routing
 * (--routing replay, formats/loss.md).
 *
 *   "routing": {"layers": 2, "k": 2, "experts": 8, "ids": "AwUBBgIH..."}
 *
 * ids is the base64 of the ids position by position (prompt then
 * completion, every position the sampler ran the model on: all but the
 * last completion token, which is never fed), within one the layers in
 * order, within one the k experts in the order chosen (most probable
 * first); an id is one byte when experts <= 256, else two (little-endian). */
#ifndef GRPO_ROUTING_FIELD_H
#define GRPO_ROUTING_FIELD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../model/config.h"
#include "../util/err.h"
#include "../util/strbuf.h"
#include "record.h"

typedef struct {
    int layers;  /* layers with a mixture of experts */
    int k;       /* experts per token */
    int experts; /* experts per layer */
} routing_shape;

/* The model's shape (layers 0 for a dense model, which has no routing). */
routing_shape routing_shape_of(const model_config *c);
/* Bytes of one id: 1 when experts <= 256, else 2. */
int routing_id_bytes(routing_shape sh);
/* Ids of one position: layers * k. */
size_t routing_position_ids(routing_shape sh);
/* Bytes of one position's ids. */
size_t routing_position_bytes(routing_shape sh);
/* Writes ids[0..n) (each < experts) into out as routing_id_bytes each. */
void routing_pack(routing_shape sh, const int32_t *ids, size_t n, uint8_t *out);

/* Appends the field's object for n_positions positions of packed ids
 * (routing_pack's bytes, routing_position_bytes per position) to b. */
void routing_field_write(strbuf *b, routing_shape sh, const uint8_t *packed, size_t n_positions);

/* The record's field for a model of shape want and a sequence of
 * n_positions positions (its prompt and completion tokens but the last):
 * *present false when it is absent or null (ids then NULL); else ids
 * [n_positions * layers * k] (xmalloc'd, the caller frees). EX_DATAERR
 * naming FILE:LINE, the field and the member when it is not such an
 * object, its layers, k or experts are not the model's, ids is not base64
 * or not that many ids, or a position's experts in a layer are not k
 * different ids below experts. */
int routing_field_read(const record *r, routing_shape want, size_t n_positions, bool *present, uint16_t **ids,
                       gerr *e);

#endif
