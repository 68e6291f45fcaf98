/* --weights auto|f32|bf16|q8: how a tool packs its model's matrices for
 * inference (lib/model/model.h, model_pack_for_inference). */
#ifndef GRPO_RUNNER_WEIGHTS_H
#define GRPO_RUNNER_WEIGHTS_H

#include "../ops/ops.h"
#include "../util/err.h"

/* The default of a --weights flag: $GRPO_WEIGHTS when set and not empty
 * (the test suites set f32, so that checks held to float64 references see
 * the float32 weights), else "auto". */
const char *weights_default(void);
/* *fmt for the value s of flag (named in messages): f32, bf16, q8, or auto,
 * which is the documented choice for this CPU (weights_auto). Another
 * value: EX_USAGE. */
int weights_select(const char *flag, const char *s, weight_format *fmt, gerr *e);
/* What auto means on this CPU. */
weight_format weights_auto(void);

#endif
