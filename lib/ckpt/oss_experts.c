/* gpt-oss's experts as its files hold them (oss_experts.h). */
#include "oss_experts.h"

#include "../formats/gguf_quant.h"
#include "../ops/packed_mxfp4.h"

oss_layout oss_expert_layout(const model_config *c, const model_tensor_ref *r) {
    bool fused = r->param != P_EXP_DOWN && r->param != P_EXP_DOWN_B;
    bool odd = r->param == P_EXP_UP || r->param == P_EXP_UP_B;
    int64_t I = c->moe_hidden_dim, d = c->dim;
    return (oss_layout){.experts = c->n_experts, .in = r->cols ? (fused ? d : I) : 0, .out = fused ? 2 * I : d,
                        .first = odd, .step = fused ? 2 : 1};
}

bool experts_mxfp4_exact(const model *m, const model_tensor_ref *r) {
    if (r->expert < 0 || !r->cols || r->cols % MX4W_K_BLOCK) return false;
    size_t per = (size_t)r->rows * (size_t)r->cols;
    const float *x = r->dst - (size_t)r->expert * per; /* the layer's first expert: all of them follow */
    unsigned char block[MX4W_GGUF_BYTES];
    for (size_t i = 0; i < per * (size_t)m->cfg.n_experts; i += MX4W_K_BLOCK)
        if (!gguf_mxfp4_exact(x + i, block, MX4W_K_BLOCK)) return false;
    return true;
}
