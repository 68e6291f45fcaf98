/* Writing a Hugging Face checkpoint directory: config.json, the text files
 * (tokenizer.json, tokenizer_config.json, generation_config.json) and
 * model.safetensors, each written atomically (temporary name, fsync,
 * rename), and the whole directory built with lib/io/ckptdir.h.
 * grpo-update (its checkpoints) and grpo-export (--format hf) write through
 * these.
 *
 * source is where the model came from: a Hugging Face directory, one of our
 * checkpoints, or a .gguf file. A directory that lacks a file but holds an
 * adapter (adapter_config.json) takes the file from its base model
 * (lora_adapter_base_path). */
#ifndef GRPO_HF_DIR_H
#define GRPO_HF_DIR_H

#include <stdbool.h>

#include "../formats/gguf.h"
#include "../model/model.h"
#include "../util/err.h"
#include "../util/progress.h"
#include "../util/strbuf.h"
#include "export_dtype.h"

/* "float32", "float16", "bfloat16"; NULL for q8_0 (no torch dtype). */
const char *hf_torch_dtype(export_dtype d);

/* config.json at out_path. From a directory: its config.json byte for byte
 * except the value of "torch_dtype" (and of transformers v5's "dtype"),
 * which becomes torch_dtype (the key is added, in sorted position, when
 * absent), and "quantization_config": kept with mxfp4 (the experts written
 * as MXFP4 blocks; the one gpt-oss ships, {"modules_to_not_convert":
 * [...], "quant_method": "mxfp4"}, added in sorted position when absent),
 * else removed. From a GGUF: generated from m->cfg as transformers writes
 * it for LlamaForCausalLM / Qwen2ForCausalLM / Qwen3ForCausalLM (sorted
 * keys, 2-space indent); config_load_hf reads it back to the same
 * model_config. A GGUF's RoPE factors (rope_freqs.weight) that match no
 * llama3 rope_scaling are EX_DATAERR. */
int hf_write_config(const char *out_path, const model *m, const char *source, const char *torch_dtype, bool mxfp4,
                    gerr *e);

/* tokenizer.json, tokenizer_config.json and generation_config.json into dir
 * (an existing directory), and chat_template.jinja where the source has one.
 * From a directory: each copied byte for byte when present (a missing
 * tokenizer file is skipped; generation_config.json is
 * made from config.json's bos/eos/pad ids when absent). From a GGUF: built
 * from its tokenizer.ggml.* metadata and tokenizer.chat_template (BPE vocab
 * and merges, control tokens as special added tokens, user-defined ones as
 * plain added tokens, the pre-tokenizer of tokenizer.ggml.pre, ByteLevel
 * decoder), so `tokenizers` and tok_load_json give the GGUF's ids. */
int hf_write_text_files(const char *dir, const char *source, gerr *e);

/* Whether an export in dtype writes m's experts as MXFP4 blocks (gpt-oss's
 * own _blocks and _scales): m a gpt-oss, dtype not f32, and every value of
 * every layer's experts' matrices MXFP4's (oss_experts.h's
 * experts_mxfp4_exact: loaded from MXFP4 blocks and not trained since).
 * *layer: the first layer whose experts are not, else -1. */
bool hf_experts_mxfp4(const model *m, export_dtype dtype, int *layer);

/* model.safetensors at out_path: every tensor under its HF name and shape
 * (model_tensor_list; lm_head.weight left out when tied), in F32, F16 or
 * BF16 (q8_0: EX_USAGE), and with mxfp4 (hf_experts_mxfp4 true) gpt-oss's
 * experts' matrices as MXFP4 blocks, U8 (their values exactly, each block
 * with the smallest scale that holds them, a zero as code 0); in the order
 * the safetensors package writes (the float tensors by name, then the
 * U8), metadata {"format": "pt"}. */
int hf_write_weights(const char *out_path, const model *m, export_dtype dtype, gerr *e);
/* The same, mxfp4 as above, counting the tensors written in pg (its total set here). */
int hf_write_weights_progress(const char *out_path, const model *m, export_dtype dtype, bool mxfp4, progress *pg,
                              gerr *e);

/* The whole directory (config.json with the dtype's torch_dtype, the text
 * files, model.safetensors; mxfp4 as above) built under a temporary name
 * and swapped into out_dir (lib/io/ckptdir.h): on any failure out_dir is
 * left as it was. */
int hf_export_dir(const char *out_dir, const model *m, const char *source, export_dtype dtype, bool mxfp4,
                  progress *pg, gerr *e);

/* ---- internal to hf_*.c ---------------------------------------------------------- */

/* tokenizer.json for the tokenizer.ggml.* metadata of f, into out. */
int hf_gguf_tokenizer_json(const gguf_file *f, strbuf *out, gerr *e);

#endif
