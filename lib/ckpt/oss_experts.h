/* gpt-oss's experts as its files hold them, one place for the loaders and
 * the writers: where an expert's matrix or bias lies in its layer's stacked
 * Hugging Face tensor (load_hf.c reads the bf16 layout, hf_mxfp4.c the
 * MXFP4 one, hf_dir.c writes both), and whether a layer's experts hold
 * values MXFP4 represents exactly (what both exports keep MXFP4). */
#ifndef GRPO_OSS_EXPERTS_H
#define GRPO_OSS_EXPERTS_H

#include <stdbool.h>
#include <stdint.h>

#include "../model/model.h"

/* The stacked tensor r->hf of gpt-oss's expert tensor r (P_EXP_GATE, _UP,
 * _DOWN or their biases). Per expert it holds, in its bf16 layout, W [in,
 * out] (y = x W) or a bias [out]; MXFP4's _blocks and _scales hold W's
 * transpose [out, in / 32 blocks]. Our row i (of [out, in] or the bias) is
 * output index first + step * i: gate_up_proj's (and its bias's) gate the
 * even ones, up the odd; down_proj's all in order. */
typedef struct {
    int64_t experts, in, out; /* in: 0 for a bias */
    int64_t first, step;
} oss_layout;

oss_layout oss_expert_layout(const model_config *c, const model_tensor_ref *r);

/* Whether every value of the experts of r's layer that r's parameter names
 * (r an expert matrix of m, any mixture's; false when r->cols is not a
 * multiple of 32) is one MXFP4 holds exactly (gguf_quant.h's
 * gguf_mxfp4_exact), as weights loaded from MXFP4 blocks and not trained
 * since are. */
bool experts_mxfp4_exact(const model *m, const model_tensor_ref *r);

#endif
