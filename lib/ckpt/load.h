/* Loading a model: the one place that picks the format of a path (a Hugging
 * Face directory, a .gguf file, a PEFT adapter directory) and puts an
 * adapter on top of its base. The dependency goes one way: this calls
 * lib/formats (GGUF, safetensors), lib/model (config, model_alloc) and
 * adapter_dir.h; lib/model never calls back here. */
#ifndef GRPO_LOAD_H
#define GRPO_LOAD_H

#include <stdbool.h>

#include "../model/lora.h"
#include "../model/model.h"
#include "../util/err.h"

/* Loads a causal LM: an HF directory (config.json, model.safetensors or a
 * sharded model.safetensors.index.json, generation_config.json), a PEFT
 * adapter directory (its base, adapter_dir.h's lora_adapter_base_path, with
 * the adapter merged in) or a .gguf file.
 * Errors: EX_NOINPUT missing, EX_DATAERR malformed or unsupported (naming the
 * architecture, dtype, quant type or tensor; a sequence classifier is one),
 * EX_IOERR unreadable. On error m holds nothing to free. */
int model_load(model *m, const char *path, gerr *e);
/* Loads a sequence classifier (a reward model): an HF directory of a
 * *ForSequenceClassification, with score.weight and no lm_head. Anything
 * else (a causal LM, a GGUF file, an adapter) is EX_DATAERR naming its
 * architecture. */
int model_load_classifier(model *m, const char *path, gerr *e);

/* model_load (model_load_classifier when classifier) of a model only to
 * run on the CPU, packed for inference as w asks (model.h's weight_choice;
 * the plan's refusal, EX_DATAERR for a shape the format cannot hold,
 * EX_USAGE for mxfp4 on a model without MXFP4 experts, names path): the
 * packing plan (model.h's pack_plan) is made once the config and the
 * tensors' names are known and followed by the loader, then by model_pack.
 * A matrix the plan packs in its own place, stored in its format's own
 * blocks (ops.h's weights_takes_blocks: a GGUF's Q8_0 for q8, a Hugging
 * Face gpt-oss's MXFP4 experts kept MXFP4), goes straight into its packed
 * place, never widened to float32 (the rest of its float32 place is never
 * written, so pages the allocator left unbacked stay so): for Q8_0 the same
 * bytes as packing the dequantized matrix for blocks the Q8_0 quantizer
 * wrote (llama.cpp's, gguf-py's, grpo-export's), the file's exact values
 * for any blocks; m->packed_verbatim counts them. An adapter checkpoint
 * trained on a packed frozen base (its grpo/state.json flags.base_weights
 * bf16, q8, q4k or mxfp4), asked for with w.frozen_base (--weights auto) or
 * w.fmt that format, is loaded as grpo-update loads it: the base packed as
 * it is read by the frozen plan (model_pack_frozen's: its products on
 * float32 activations, the embeddings and LM head packed with it) and the
 * adapter unmerged in m->adapter, which model_forward applies
 * (docs/weights.md); otherwise the adapter is merged (model_load). */
int model_load_for_inference(model *m, const char *path, bool classifier, weight_choice w, gerr *e);

/* path an adapter directory: loads its base model into *base (unmerged) and
 * the adapter into *l (l->base the base's path as found, usable from the
 * current directory), *has_adapter = true. Otherwise model_load(base, path),
 * *l zeroed and *has_adapter = false. On error nothing is held. */
int model_load_adapter(const char *path, model *base, lora *l, bool *has_adapter, gerr *e);
/* The same for a LoRA run that keeps a gpt-oss's MXFP4 experts as its
 * frozen base (grpo-update --base-weights mxfp4 or auto): experts stored as
 * MXFP4 blocks (m->experts_mxfp4) written packed from them, never widened
 * to float32, and the base made frozen (model.h's weight_choice frozen:
 * base->packed_frozen, those experts' products on the blocks both ways);
 * any other model loads as model_load_adapter loads it, unpacked. */
int model_load_adapter_mxfp4(const char *path, model *base, lora *l, bool *has_adapter, gerr *e);
/* model_load_adapter with the base packed in fmt (bf16, q8 or q4k) as a
 * LoRA run's frozen base (model_pack_frozen's plan: the layer matrices, the
 * embeddings and the LM head), each packed as it is read, so the load
 * never holds the base in float32; the values are model_pack_frozen's on
 * the float32 load, but for q4k a GGUF's Q4_K matrices, which are the
 * file's blocks as they are (never widened and quantized again). */
int model_load_adapter_frozen(const char *path, weight_format fmt, model *base, lora *l, bool *has_adapter, gerr *e);

/* ---- internal to load.c: one format each, into a zeroed m ------------------------
 * w not NULL: *plan is made for *w (model_plan_packing) as soon as the
 * config and the tensors' names are known, and followed: the matrices it
 * packs in their own place that the file holds in blocks their format
 * takes as they are are written packed, marked verbatim in it (the caller
 * frees it: pack_plan_free). On error *plan holds nothing. */
int model_load_hf(model *m, const char *dir, const weight_choice *w, pack_plan *plan, gerr *e);
int model_load_gguf(model *m, const char *path, const weight_choice *w, pack_plan *plan, gerr *e);
/* The format a model file holds its layer matrices in, as grpo-update
 * --base-weights auto takes it for a LoRA base: MXFP4 when its experts are
 * MXFP4 blocks (gpt-oss), else the first layer's query projection's: Q8_0
 * q8, bf16 bf16, Q4_K q4k (a frozen q4k base takes a Q4_K file's blocks as
 * they are), anything else f32. model_file_format takes any
 * source (an adapter checkpoint: the base it was trained on,
 * flags.base_weights). Errors as opening the file's. */
int model_hf_format(const char *dir, weight_format *fmt, gerr *e);
int model_gguf_format(const char *path, weight_format *fmt, gerr *e);
int model_file_format(const char *path, weight_format *fmt, gerr *e);

#endif
