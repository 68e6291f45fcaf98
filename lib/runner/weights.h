/* --weights auto|f32|bf16|q8|q4k|mxfp4: how a tool packs its model's matrices
 * for inference (lib/model/model.h's weight_choice and pack_plan). */
#ifndef GRPO_RUNNER_WEIGHTS_H
#define GRPO_RUNNER_WEIGHTS_H

#include "../model/model.h"
#include "../ops/ops.h"
#include "../util/err.h"

/* The choices of a --weights flag, in this order (flags.h's kind tables). */
enum { WEIGHTS_N_NAMES = 6 };
extern const char *const weights_names[WEIGHTS_N_NAMES];

/* The default of a --weights flag: $GRPO_WEIGHTS when set and not empty
 * (the test suites set f32, so that checks held to float64 references see
 * the float32 weights), else "auto". */
const char *weights_default(void);
/* *w for the value s of flag (named in messages): f32, bf16, q8 or q4k (every
 * matrix in that format), mxfp4 (the experts a file stores as MXFP4 blocks
 * kept so, every other matrix f32; a model without them is refused when
 * loaded), or auto: MXFP4 experts kept, a LoRA checkpoint on its packed
 * frozen base (docs/weights.md), the rest in the documented choice for this
 * CPU (weights_auto). Another value: EX_USAGE (flags.h's
 * flags_choice_parse). */
int weights_select(const char *flag, const char *s, weight_choice *w, gerr *e);
/* What auto means on this CPU. */
weight_format weights_auto(void);
/* The format whose arithmetic model m, loaded on the CPU as w asks,
 * computes in (weights_kv_format's argument): w.fmt, but f32 for a LoRA
 * checkpoint run on its packed frozen base (model.h's packed_frozen), whose
 * products take float32 activations as the trainer's do. */
weight_format weights_computed_as(const model *m, weight_choice w);
/* The KV cache that goes with weights in format fmt on the CPU: bf16 with
 * bf16 or q8 weights where AVX-512 reads it (measured 1.12-1.76x faster at
 * decode batch 64, bench/README.md), whose runs already accept bf16-sized
 * differences; float32 with float32 weights (and mxfp4's, the MXFP4 experts'
 * values exactly, the rest float32), which stay the exact reference,
 * and without AVX-512, where the portable bf16 attention is slow. */
kv_format weights_kv_format(weight_format fmt);
/* --kv-cache auto|f32|bf16: *fmt for the value s of flag. auto is
 * weights_kv_format(w) on the CPU and bf16 on a device (on_device), whose
 * weights are bf16 already: half the memory, and rollout 1.33-1.37x faster
 * on an H100 (bench/README.md). Another value: EX_USAGE. */
int kv_cache_select(const char *flag, const char *s, bool on_device, weight_format w, kv_format *fmt, gerr *e);

#endif
