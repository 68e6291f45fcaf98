/* grpo-export: what it adds to the library's checkpoint writers
 * (lib/ckpt/hf_dir.h, lib/ckpt/adapter_dir.h): the choice of format, the
 * GGUF export of a model, and a PEFT adapter on its own. */
#ifndef GRPO_EXPORT_H
#define GRPO_EXPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "../ckpt/export_dtype.h"
#include "../model/model.h"
#include "../util/err.h"
#include "../util/progress.h"

typedef enum { EXPORT_HF, EXPORT_PEFT, EXPORT_GGUF } export_format;

typedef struct {
    const char *model;  /* --model */
    const char *out;    /* --out */
    export_format format;
    export_dtype dtype;
    const char *base_model; /* --base-model: peft's base_model_name_or_path; NULL: the adapter's base */
    bool clamp;             /* --clamp: a weight beyond the dtype's range is written as its largest */
    bool progress;          /* --progress: on stderr even when it is not a terminal */
} export_opts;

/* "hf" | "peft" | "gguf" (EX_USAGE otherwise). */
int export_format_parse(const char *s, export_format *f, gerr *e);
/* The default --dtype of a format: bf16 for hf, f32 for peft, f16 for gguf. */
export_dtype export_default_dtype(export_format f);
/* Loads o->model and writes o->out. hf and gguf: the weights with any LoRA
 * adapter merged. peft: the adapter alone (EX_DATAERR when the model has
 * none) with base_model_name_or_path o->base_model: an existing Hugging Face
 * directory (written as its absolute path; EX_DATAERR when its shapes are
 * not the base's, EX_USAGE when it is a file or has no config.json) or a Hub
 * id (written as given, *note saying so; a path to nothing is EX_NOINPUT);
 * without it, the absolute path of the base the adapter was trained on, and
 * when that is a GGUF file, which PEFT cannot load, *note says how to give
 * PEFT a base it can. hf writes gpt-oss's experts as MXFP4 blocks where
 * lib/ckpt/hf_dir.h's hf_experts_mxfp4 says, and where a dtype other than
 * f32 could have but a layer's values are not MXFP4's, *note says which
 * layer. *note is xmalloc'd, NULL when there is none. q8_0 is EX_USAGE for
 * hf and peft, as is base_model with another format. */
int export_run(const export_opts *o, char **note, gerr *e);
/* Before anything is written, every weight is checked against what its
 * dtype holds finite (export_range.c): f16 |x| <= 65504, bf16 about
 * 3.39e38, q8_0 a block's max |x| / 127 an f16; a weight beyond it is
 * EX_DATAERR naming the model, the tensor and a dtype that holds it, unless
 * o->clamp, which writes the dtype's largest in its place (and *note says
 * how many). A non-finite weight is EX_DATAERR either way. */

/* The largest magnitude dtype d is written with (f32: FLT_MAX). */
float export_dtype_limit(export_dtype d);
/* 0 when every x[0..n) stays finite written as d; EX_DATAERR
 * "MODEL: tensor 'NAME': value I is V, beyond what D holds ..." otherwise. */
int export_range_check(const char *model, const char *tensor, const float *x, size_t n, export_dtype d, gerr *e);
/* Sets each finite x[i] beyond d's range to +-export_dtype_limit(d);
 * returns how many it changed (non-finite values are left). */
size_t export_range_clamp(float *x, size_t n, export_dtype d);
/* The dtype a GGUF export writes a tensor of parameter param (model.h's
 * P_*, -1 for none) and cols columns (0: a vector) in when dtype is asked:
 * vectors and a mixture of experts' router f32 (as llama.cpp's converter
 * keeps them: the router's logits choose the experts), q8_0 rows not of
 * whole blocks f16. */
export_dtype gguf_export_tensor_dtype(export_dtype dtype, int param, int64_t cols);

/* Whether the GGUF export writes the layer's experts of r (an expert
 * matrix of m) as MXFP4 (GGML type 39) whatever dtype says: dtype not f32
 * and every value of them MXFP4's exactly (lib/ckpt/oss_experts.h's
 * experts_mxfp4_exact), as weights loaded from MXFP4 blocks and not trained
 * are; the same values, 4.25 bits a weight. */
bool gguf_export_mxfp4(const model *m, const model_tensor_ref *r, export_dtype dtype);

/* Writes m to out_path (atomically: temporary name, fsync, rename) with
 * llama.cpp's architecture keys for m->cfg.arch (llama, qwen2, qwen3,
 * qwen3moe, gpt-oss: its sliding layers and YaRN as llama.cpp reads them),
 * every 2-D weight in dtype (norms, biases and sinks F32; experts that are
 * MXFP4 exactly as MXFP4, above), Q/K rows permuted back to GGUF's
 * interleaved order, and the tokenizer metadata (tokenizer.ggml.*,
 * tokenizer.chat_template) of source: the GGUF file or Hugging Face
 * directory the model's text side comes from. EX_DATAERR (nothing
 * written) for a model llama.cpp would compute otherwise: a mixture other
 * than qwen3moe's or gpt-oss's, a gpt-oss whose clamp is not 7, whose
 * YaRN's betas are not 32 and 1, with no sliding layer or tied embeddings. */
int gguf_export(const char *out_path, const model *m, const char *source, export_dtype dtype, gerr *e);
/* The same, counting the tensors written in pg (its total set here). */
int gguf_export_progress(const char *out_path, const model *m, const char *source, export_dtype dtype, progress *pg,
                         gerr *e);

#endif
