/* Dataset tasks: one input record of GSM8K, MATH, MBPP or any JSONL mapped
 * to prep's fields (formats/prompt.md lists each mapping). */
#ifndef GRPO_PREP_DATASETS_H
#define GRPO_PREP_DATASETS_H

#include "../io/record.h"
#include "item.h"
#include "prep.h"

/* Fills it from in for o->task. A record that does not fit is EX_DATAERR:
 * FILE:LINE: field "NAME": what is wrong. */
int prep_dataset_item(const prep_opts *o, const record *in, prep_item *it, gerr *e);

#endif
