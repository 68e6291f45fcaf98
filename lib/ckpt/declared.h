/* The sizes a model's config declares, checked against the weights a file
 * holds before the model's buffer is allocated: a config.json with
 * num_hidden_layers 1e9, or one flipped byte in a GGUF's block_count, is a
 * data error naming the file and its size fields, not a failed allocation
 * that names nothing. */
#ifndef GRPO_DECLARED_H
#define GRPO_DECLARED_H

#include <stdbool.h>

#include "../formats/gguf.h"
#include "../formats/safetensors.h"
#include "../model/config.h"
#include "../util/err.h"

/* The weights c declares: every tensor the model allocates (computed in
 * double, so no size overflows). */
double model_declared_values(const model_config *c);

/* 0 when c declares at most twice held values (held: the element count of
 * every tensor of the weight files; each declared tensor is one of them, of
 * the same size, so a few missing tensors stay below twice and the loader
 * names the first one missing). EX_DATAERR beyond: "CFG_FILE: the sizes it declares (FIELD V,
 * ...) need N weights, and the tensors of WEIGHTS hold M: a size field is
 * wrong", with config.json's field names, or GGUF's (ARCH.block_count, ...)
 * when gguf. */
int model_check_declared(const model_config *c, double held, const char *cfg_file, bool gguf, const char *weights,
                         gerr *e);

/* model_check_declared for an HF directory dir (its config.json) whose
 * weights are the n safetensors files. */
int model_check_declared_st(const model_config *c, const st_file *files, int n, const char *dir, gerr *e);
/* model_check_declared for a GGUF file, config and weights in one. */
int model_check_declared_gguf(const model_config *c, const gguf_file *f, gerr *e);

#endif
