/* Where a file of a model's source is: the export (hf_dir.h) and its text
 * files take config.json, the tokenizer files and generation_config.json
 * from the directory a model came from, or, when that directory is an
 * adapter's (adapter_dir.h) and lacks the file, from its base model's. */
#ifndef GRPO_HF_SOURCE_H
#define GRPO_HF_SOURCE_H

#include "../util/err.h"

/* The path of file inside source, or inside the base model of the adapter
 * in source when source lacks it; *path is NULL (0 returned) when neither
 * has it. Caller frees *path. */
int hf_source_file(const char *source, const char *file, char **path, gerr *e);

#endif
