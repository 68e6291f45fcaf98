/* PEFT adapter directories: adapter_model.safetensors (the factors under
 * lora_tensor_list's names) and adapter_config.json (PEFT's LoraConfig),
 * written and read back, and the base model an adapter names
 * (base_model_name_or_path, resolved by lora_adapter_base_path). Putting an
 * adapter on its base is load.h's model_load_adapter. */
#ifndef GRPO_ADAPTER_DIR_H
#define GRPO_ADAPTER_DIR_H

#include <stdbool.h>

#include "../formats/safetensors.h"
#include "../model/lora.h"
#include "../util/err.h"

/* Writes DIR/adapter_model.safetensors (F32, metadata {"format": "pt"},
 * PEFT's tensors sorted by name: lora.h's lora_tensor_list peft, a stacked
 * adapter's put together from its experts' pieces) and
 * DIR/adapter_config.json as PEFT's LoraConfig.save_pretrained writes it
 * (sorted keys, 2-space indent, base_model_name_or_path = l->base; a
 * stacked adapter's gate, up and down as target_parameters
 * ["mlp.experts.gate_up_proj", "mlp.experts.down_proj"], in that order,
 * beside target_modules, which may then be []), each atomically. DIR must
 * exist. */
int lora_save(const lora *l, const char *dir, gerr *e);
/* The same with the factors in dtype (ST_F32, ST_F16 or ST_BF16). */
int lora_save_dtype(const lora *l, const char *dir, st_dtype dtype, gerr *e);

/* Reads an adapter directory written by lora_save or PEFT for a model of
 * shape cfg into l (allocated here; l->base = base_model_name_or_path).
 * EX_NOINPUT when a file is missing; EX_DATAERR naming the file and what is
 * wrong: a missing, extra or mis-shaped tensor; a target module we cannot
 * adapt; a feature we do not support (use_dora, bias other than "none",
 * modules_to_save, layers_to_transform, rank/alpha patterns, fan_in_fan_out,
 * regex target_modules other than "all-linear"); target_parameters other
 * than gpt_oss's stacked experts (an entry is the whole name,
 * "mlp.experts.gate_up_proj", or its last dot-separated parts, as PEFT
 * matches it), or with lora_dropout > 0 (PEFT refuses that); on gpt_oss,
 * gate_proj, up_proj or down_proj in target_modules (no such module there;
 * "all-linear" is q, k, v, o there). On error l holds nothing. */
int lora_load(lora *l, const model_config *cfg, const char *dir, gerr *e);
/* Whether adapter directory dir's config names target_parameters (on
 * gpt_oss: its experts are adapted). Errors as reading the config's. */
int lora_adapter_stacked(const char *dir, bool *stacked, gerr *e);

/* True when path is a directory with adapter_config.json and without full
 * weights (model.safetensors or model.safetensors.index.json). */
bool lora_is_adapter_dir(const char *path);

/* The base model of adapter directory dir: its grpo/state.json's
 * paths.base_model and its adapter_config.json's base_model_name_or_path,
 * resolved in ckpt_paths.h's order (relative to dir, absolute, from the
 * current directory). EX_NOINPUT when none exists (naming every path tried),
 * EX_DATAERR when the key is missing or names dir itself. *path is xmalloc'd,
 * usable from the current directory. */
int lora_adapter_base_path(const char *dir, char **path, gerr *e);

#endif
