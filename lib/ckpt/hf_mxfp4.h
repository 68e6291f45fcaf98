/* gpt-oss's MXFP4 experts in a Hugging Face directory, as transformers'
 * integrations/mxfp4.py reads them. Per layer, for W = gate_up_proj and
 * down_proj (model.layers.L.mlp.experts.W):
 *   W_blocks uint8 [E, N, K/32, 16]: 32 E2M1 codes per block, byte j holding
 *     value 2j in its low nibble and 2j + 1 in its high one;
 *   W_scales uint8 [E, N, K/32]: each block's E8M0 exponent e;
 * a value is FP4_VALUES[code] * 2^(e - 127) (convert_moe_packed_tensors,
 * which then transposes [E, N, K] into the bf16 layout's [E, K, N]). N is
 * W's output dimension (gate_up_proj: 2 x intermediate_size, gate the even
 * rows and up the odd ones, as the bf16 layout's columns; down_proj:
 * hidden_size), K its input (hidden_size; intermediate_size), so one
 * expert's rows are our [out, in] matrix as they are. packed_mxfp4.h has
 * the values and the packed layout. */
#ifndef GRPO_HF_MXFP4_H
#define GRPO_HF_MXFP4_H

#include <stdbool.h>

#include "../formats/safetensors.h"
#include "../model/model.h"
#include "../util/err.h"

/* A layer's W_blocks and W_scales and the files they are in (their names
 * for messages). */
typedef struct {
    const char *blocks_file, *scales_file;
    const st_tensor *blocks, *scales;
} hf_mxfp4_pair;

/* Expert r->expert's matrix r->param (P_EXP_GATE, P_EXP_UP or P_EXP_DOWN of a
 * model of config c; r->hf names W) from its layer's pair t: into r->dst as
 * float32, exactly (code 8 as -0, as transformers reads it), or with `packed` in MXFP4's packed layout straight from
 * the blocks (ops.h's weights_pack_blocks: mx4w_pack_hf's bytes).
 * EX_DATAERR naming the file and tensor: a dtype other than U8, a shape
 * other than the above, an input width that is not a multiple of 32, the
 * NaN scale 255 or a value beyond float32 (a scale byte of 253 or more with
 * a large code). */
int hf_mxfp4_expert(const model_config *c, const model_tensor_ref *r, const hf_mxfp4_pair *t, bool packed, gerr *e);

#endif
