/* The one error of the format readers (gguf.c, safetensors.c): a malformed
 * file is EX_DATAERR "NAME: what is wrong", NAME the path (or the name
 * given for a buffer). ctx is the reader's cursor, any struct with
 * `const char *name` and `gerr *e` (never NULL). */
#ifndef GRPO_FORMAT_ERR_H
#define GRPO_FORMAT_ERR_H

#include "../util/err.h"

#define FORMAT_BAD(ctx, ...) gerr_at((ctx)->e, EX_DATAERR, (ctx)->name, 0, __VA_ARGS__)

#endif
