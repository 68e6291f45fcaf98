#include "weights.h"

#include <stdlib.h>
#include <string.h>

#include "../ops/packed_bf16.h"
#include "../util/flags.h"

const char *const weights_names[] = {"auto", "f32", "bf16", "q8", "q4k", "mxfp4"};

const char *weights_default(void) {
    const char *v = getenv("GRPO_WEIGHTS");
    return v && *v ? v : "auto";
}

/* bf16 where the CPU multiplies bf16 natively (AVX512-BF16): it halves the
 * bytes every decode step reads and doubles the matmul rate; elsewhere the
 * bf16 kernels only emulate it, so float32. q8 is never chosen by itself:
 * its log-probs move further from the float32 trainer's (docs/weights.md). */
weight_format weights_auto(void) { return bf16w_native() ? WEIGHTS_BF16 : WEIGHTS_F32; }

weight_format weights_computed_as(const model *m, weight_choice w) { return m->packed_frozen ? WEIGHTS_F32 : w.fmt; }

kv_format weights_kv_format(weight_format fmt) {
    return fmt != WEIGHTS_F32 && fmt != WEIGHTS_MXFP4 && attn_bf16_simd_supported() ? KV_BF16 : KV_F32;
}

int kv_cache_select(const char *flag, const char *s, bool on_device, weight_format w, kv_format *fmt, gerr *e) {
    if (!strcmp(s, "auto")) *fmt = on_device ? KV_BF16 : weights_kv_format(w);
    else if (!strcmp(s, "f32")) *fmt = KV_F32;
    else if (!strcmp(s, "bf16")) *fmt = KV_BF16;
    else return gerr_set(e, EX_USAGE, "%s %s: expected auto, f32 or bf16", flag, s);
    return 0;
}

/* The choices, each what it asks of the packing (model.h's weight_choice):
 * auto keeps a file's MXFP4 experts and packs the rest as weights_auto(),
 * and runs a LoRA checkpoint on its packed frozen base; mxfp4 keeps them
 * and packs the rest as f32, and refuses a model without them; the others
 * pack every matrix in their format (bf16, q8 or q4k on a checkpoint's
 * frozen base of that format: that base, lib/ckpt/load.h). */
int weights_select(const char *flag, const char *s, weight_choice *w, gerr *e) {
    int i;
    int rc = flags_choice_parse(flag, weights_names, WEIGHTS_N_NAMES, s, &i, e);
    if (rc) return rc;
    static const weight_format fmts[WEIGHTS_N_NAMES] = {WEIGHTS_F32, WEIGHTS_F32, WEIGHTS_BF16, WEIGHTS_Q8,
                                                       WEIGHTS_Q4K, WEIGHTS_MXFP4};
    *w = (weight_choice){.fmt = i == 0 ? weights_auto() : fmts[i],
                         .keep_mxfp4 = i == 0 || fmts[i] == WEIGHTS_MXFP4,
                         .frozen_base = i == 0};
    return 0;
}
