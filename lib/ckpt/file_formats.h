/* The formats a model file holds its matrices in (model.h's file_as and
 * experts_mxfp4), as the loaders find them tensor by tensor: what a plan
 * may hold as the file holds it (an mxfp4 frozen base, model.h). */
#ifndef GRPO_FILE_FORMATS_H
#define GRPO_FILE_FORMATS_H

#include "../model/model.h"

/* The format the file holds matrix r in (of the layer's tensor, for an
 * expert's): WEIGHTS_BF16, WEIGHTS_Q8 or WEIGHTS_MXFP4 where that format
 * holds its values exactly, else WEIGHTS_F32; src is the loader's file. */
typedef weight_format (*tensor_format_fn)(const model_tensor_ref *r, const void *src);

/* m->file_as from of over every matrix of m (allocated: model_alloc), a
 * parameter's WEIGHTS_F32 where its layers' differ, a tied head's the
 * embeddings'; m->experts_mxfp4 when every expert matrix is MXFP4. */
void model_note_file_formats(model *m, tensor_format_fn of, const void *src);

#endif
