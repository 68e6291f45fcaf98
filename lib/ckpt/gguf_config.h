/* The model config of a GGUF file: the one place that reads a model's
 * hyper-parameters from GGUF metadata (lib/model/config.h's model_config,
 * which knows nothing of the format). */
#ifndef GRPO_GGUF_CONFIG_H
#define GRPO_GGUF_CONFIG_H

#include "../formats/gguf.h"
#include "../model/config.h"
#include "../util/err.h"

/* Reads the GGUF metadata of an opened file. Tied embeddings when
 * output.weight is absent. */
int config_load_gguf(model_config *c, const gguf_file *f, gerr *e);

#endif
