/* Writes a model as a GGUF v3 file that llama.cpp loads. */
#ifndef GRPO_GGUF_WRITE_H
#define GRPO_GGUF_WRITE_H

#include "../model/model.h"
#include "../util/err.h"
#include "export_dtype.h"

/* Writes m to out_path (atomically: temporary name, fsync, rename) with
 * llama.cpp's architecture keys for m->cfg.arch (llama, qwen2, qwen3), every
 * 2-D weight in dtype (norms and biases F32), Q/K rows permuted back to
 * GGUF's interleaved order, and the tokenizer metadata (tokenizer.ggml.*,
 * tokenizer.chat_template) of source: the GGUF file or Hugging Face
 * directory the model's text side comes from. */
int gguf_export(const char *out_path, const model *m, const char *source, export_dtype dtype, gerr *e);

#endif
