/* Paths a checkpoint records to files it is loaded with: an adapter's base
 * model, a full fine-tune's reference (formats/checkpoint.md, "Paths to other
 * files"). Each is stored twice, in
 * grpo/state.json's "paths": {"NAME": {"relative": R, "absolute": A}}, R
 * relative to the checkpoint directory and A the target's realpath when the
 * checkpoint was written; a checkpoint moved together with its models keeps
 * working through R, one moved alone through A. Reading tries, in order:
 *   1. R from the checkpoint directory (or the stored path, when relative and
 *      no R is recorded: older checkpoints, PEFT adapters);
 *   2. A (or the stored path, when absolute);
 *   3. the stored path, when relative, from the current directory (what
 *      checkpoints written before R and A were named by).
 * The first that exists wins. */
#ifndef GRPO_CKPT_PATHS_H
#define GRPO_CKPT_PATHS_H

#include "../ops/ops.h"
#include "../util/err.h"
#include "../util/strbuf.h"

/* Appends {"relative":R,"absolute":A} for target as seen from the checkpoint
 * directory ckpt, which need not exist yet (its parent must). EX_NOINPUT when
 * target does not exist, EX_CANTCREAT when ckpt's parent does not. */
int ckpt_path_json(const char *ckpt, const char *target, strbuf *out, gerr *e);

/* "relative" and "absolute" of paths.NAME in paths_json (the text of the
 * "paths" object; NULL: none), xmalloc'd, NULL when absent. EX_DATAERR naming
 * where (a file, for the message) when the entry is not an object of strings. */
int ckpt_paths_get(const char *paths_json, const char *name, const char *where, char **rel, char **abs, gerr *e);
/* The same read from CKPT/grpo/state.json; both NULL when there is no such file. */
int ckpt_paths_read(const char *ckpt, const char *name, char **rel, char **abs, gerr *e);

/* The optimizer steps the checkpoint at ckpt has taken (its grpo/state.json
 * "step"); 0 for a model that is not our checkpoint. EX_DATAERR naming the
 * file when the field is not an integer >= 0. */
int ckpt_step_read(const char *ckpt, long long *step, gerr *e);
/* The format of the frozen base the checkpoint at ckpt was trained on (its
 * grpo/state.json "flags.base_weights", grpo-update --base-weights): "f32",
 * "bf16", "q8" or "mxfp4" into *fmt; WEIGHTS_F32 when there is no such file or field.
 * EX_DATAERR naming the file for another value. */
int ckpt_base_weights_read(const char *ckpt, weight_format *fmt, gerr *e);

/* What to resolve: a recorded path of the checkpoint at ckpt. */
typedef struct {
    const char *what;   /* "base model", for the message */
    const char *fields; /* where it is recorded, for the message */
    const char *rel, *abs; /* paths.NAME, either NULL when absent */
    const char *given;  /* the stored path (base_model_name_or_path, flags.ref); may be NULL */
} ckpt_ref;

/* Resolves r in the order above into *out (xmalloc'd, a path that exists,
 * usable from the current directory). EX_NOINPUT when none exists, one line
 * naming the checkpoint, what, the fields and every path tried. */
int ckpt_path_resolve(const char *ckpt, const ckpt_ref *r, char **out, gerr *e);

#endif
