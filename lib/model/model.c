#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>

#include "lora.h"
#include "../util/bigmem.h"

static const char *const param_names[MODEL_N_PARAMS] = {
    "tok_embd", "attn_norm", "wq", "wk", "wv", "bq", "bk", "bv", "q_norm", "k_norm", "wo",
    "ffn_norm", "w_gate", "w_up", "w_down", "router", "exp_gate", "exp_up", "exp_down", "out_norm", "lm_head",
    "score", "sinks", "bo", "router_b", "exp_gate_b", "exp_up_b", "exp_down_b"};

const char *model_param_name(int i) {
    return i >= 0 && i < MODEL_N_PARAMS ? param_names[i] : "?";
}

static bool dense_ffn_param(int p) { return p == P_W_GATE || p == P_W_UP || p == P_W_DOWN; }
static bool expert_param(int p) {
    return p == P_EXP_GATE || p == P_EXP_UP || p == P_EXP_DOWN || p == P_EXP_GATE_B || p == P_EXP_UP_B ||
           p == P_EXP_DOWN_B;
}
static bool moe_param(int p) { return p == P_ROUTER || p == P_ROUTER_B || expert_param(p); }

bool model_layer_has(const model_config *c, int param, int l) {
    if (dense_ffn_param(param)) return !config_layer_moe(c, l);
    if (moe_param(param)) return config_layer_moe(c, l);
    return true;
}

int model_param_layers(const model_config *c, int param) {
    if (dense_ffn_param(param)) return config_ffn_layers(c, false);
    if (moe_param(param)) return config_ffn_layers(c, true);
    return c->n_layers;
}

static void param_sizes(const model_config *c, size_t s[MODEL_N_PARAMS]) {
    size_t L = (size_t)c->n_layers, d = (size_t)c->dim, hd = (size_t)c->head_dim;
    size_t Ld = (size_t)config_ffn_layers(c, false), Lm = (size_t)config_ffn_layers(c, true);
    size_t E = (size_t)c->n_experts, I = (size_t)c->moe_hidden_dim;
    size_t qd = (size_t)c->n_heads * hd, kvd = (size_t)c->n_kv_heads * hd, h = (size_t)c->hidden_dim;
    size_t V = (size_t)c->vocab_size;
    s[P_TOK_EMBD] = V * d;
    s[P_ATTN_NORM] = L * d;
    s[P_WQ] = L * qd * d;
    s[P_WK] = L * kvd * d;
    s[P_WV] = L * kvd * d;
    s[P_BQ] = c->qkv_bias ? L * qd : 0;
    s[P_BK] = c->qkv_bias ? L * kvd : 0;
    s[P_BV] = c->qkv_bias ? L * kvd : 0;
    s[P_Q_NORM] = c->qk_norm ? L * hd : 0;
    s[P_K_NORM] = c->qk_norm ? L * hd : 0;
    s[P_SINKS] = c->attn_sinks ? L * (size_t)c->n_heads : 0;
    s[P_WO] = L * d * qd;
    s[P_BO] = c->attn_o_bias ? L * d : 0;
    s[P_FFN_NORM] = L * d;
    s[P_W_GATE] = Ld * h * d;
    s[P_W_UP] = Ld * h * d;
    s[P_W_DOWN] = Ld * d * h;
    s[P_ROUTER] = Lm * E * d;
    s[P_EXP_GATE] = Lm * E * I * d;
    s[P_EXP_UP] = Lm * E * I * d;
    s[P_EXP_DOWN] = Lm * E * d * I;
    s[P_ROUTER_B] = c->moe_bias ? Lm * E : 0;
    s[P_EXP_GATE_B] = c->moe_bias ? Lm * E * I : 0;
    s[P_EXP_UP_B] = c->moe_bias ? Lm * E * I : 0;
    s[P_EXP_DOWN_B] = c->moe_bias ? Lm * E * d : 0;
    s[P_OUT_NORM] = d;
    s[P_LM_HEAD] = c->tied_embeddings || c->seq_cls ? 0 : V * d;
    s[P_SCORE] = c->seq_cls ? (size_t)c->num_labels * d : 0;
}

int model_alloc(model *m, gerr *e) {
    if (m->cfg.seq_cls && m->cfg.num_labels <= 0)
        return gerr_set(e, EX_DATAERR, "%s: the number of labels is not known", m->cfg.architecture);
    param_sizes(&m->cfg, m->param_sizes);
    m->n_params = 0;
    for (int i = 0; i < MODEL_N_PARAMS; i++) m->n_params += m->param_sizes[i];
    /* reserved, not committed: a matrix packed in place (pack.c) leaves the
     * rest of its float32 place untouched, so it costs no memory; what the
     * model will hold is checked by model_fits_memory */
    m->params_memory = big_reserve(m->n_params * sizeof(float));
    if (!m->params_memory)
        return gerr_set(e, EX_SOFTWARE, "cannot allocate %zu MiB for the model's parameters",
                        m->n_params * sizeof(float) >> 20);
    float *p = m->params_memory;
    for (int i = 0; i < MODEL_N_PARAMS; i++) {
        m->w.t[i] = m->param_sizes[i] ? p : NULL;
        p += m->param_sizes[i];
    }
    if (m->cfg.tied_embeddings && !m->cfg.seq_cls) m->w.lm_head = m->w.tok_embd;
    model_init_rope(m);
    return 0;
}

float *model_layer_tensor(const model *m, int param, int layer) {
    const model_config *c = &m->cfg;
    size_t per = m->param_sizes[param] / (size_t)model_param_layers(c, param);
    int slot = dense_ffn_param(param) || moe_param(param) ? config_ffn_slot(c, layer) : layer;
    return m->w.t[param] + (size_t)slot * per;
}

void model_init_rope(model *m) {
    rope_inv_freq(m->inv_freq, &m->cfg);
}

void model_free(model *m) {
    if (m->adapter) lora_free(m->adapter);
    free(m->adapter);
    model_dev_free(m);
    big_unreserve(m->params_memory, m->n_params * sizeof(float));
    free(m->head_packed_own);
    memset(m, 0, sizeof *m);
}

/* HF and GGUF names of each parameter; per-layer ones take the layer number. */
static const struct {
    const char *hf, *gguf;
} tensor_names[MODEL_N_PARAMS] = {
    [P_TOK_EMBD] = {"model.embed_tokens.weight", "token_embd.weight"},
    [P_ATTN_NORM] = {"model.layers.%d.input_layernorm.weight", "blk.%d.attn_norm.weight"},
    [P_WQ] = {"model.layers.%d.self_attn.q_proj.weight", "blk.%d.attn_q.weight"},
    [P_WK] = {"model.layers.%d.self_attn.k_proj.weight", "blk.%d.attn_k.weight"},
    [P_WV] = {"model.layers.%d.self_attn.v_proj.weight", "blk.%d.attn_v.weight"},
    [P_BQ] = {"model.layers.%d.self_attn.q_proj.bias", "blk.%d.attn_q.bias"},
    [P_BK] = {"model.layers.%d.self_attn.k_proj.bias", "blk.%d.attn_k.bias"},
    [P_BV] = {"model.layers.%d.self_attn.v_proj.bias", "blk.%d.attn_v.bias"},
    [P_Q_NORM] = {"model.layers.%d.self_attn.q_norm.weight", "blk.%d.attn_q_norm.weight"},
    [P_K_NORM] = {"model.layers.%d.self_attn.k_norm.weight", "blk.%d.attn_k_norm.weight"},
    [P_SINKS] = {"model.layers.%d.self_attn.sinks", "blk.%d.attn_sinks.weight"},
    [P_WO] = {"model.layers.%d.self_attn.o_proj.weight", "blk.%d.attn_output.weight"},
    [P_BO] = {"model.layers.%d.self_attn.o_proj.bias", "blk.%d.attn_output.bias"},
    [P_FFN_NORM] = {"model.layers.%d.post_attention_layernorm.weight", "blk.%d.ffn_norm.weight"},
    [P_W_GATE] = {"model.layers.%d.mlp.gate_proj.weight", "blk.%d.ffn_gate.weight"},
    [P_W_UP] = {"model.layers.%d.mlp.up_proj.weight", "blk.%d.ffn_up.weight"},
    [P_W_DOWN] = {"model.layers.%d.mlp.down_proj.weight", "blk.%d.ffn_down.weight"},
    [P_ROUTER] = {"model.layers.%d.mlp.gate.weight", "blk.%d.ffn_gate_inp.weight"},
    [P_EXP_GATE] = {"model.layers.%d.mlp.experts.%d.gate_proj.weight", "blk.%d.ffn_gate_exps.weight"},
    [P_EXP_UP] = {"model.layers.%d.mlp.experts.%d.up_proj.weight", "blk.%d.ffn_up_exps.weight"},
    [P_EXP_DOWN] = {"model.layers.%d.mlp.experts.%d.down_proj.weight", "blk.%d.ffn_down_exps.weight"},
    [P_ROUTER_B] = {"model.layers.%d.mlp.gate.bias", "blk.%d.ffn_gate_inp.bias"},
    [P_EXP_GATE_B] = {"model.layers.%d.mlp.experts.%d.gate_proj.bias", "blk.%d.ffn_gate_exps.bias"},
    [P_EXP_UP_B] = {"model.layers.%d.mlp.experts.%d.up_proj.bias", "blk.%d.ffn_up_exps.bias"},
    [P_EXP_DOWN_B] = {"model.layers.%d.mlp.experts.%d.down_proj.bias", "blk.%d.ffn_down_exps.bias"},
    [P_OUT_NORM] = {"model.norm.weight", "output_norm.weight"},
    [P_LM_HEAD] = {"lm_head.weight", "output.weight"},
    [P_SCORE] = {"score.weight", "cls.output.weight"},
};

/* gpt_oss's GGUF name where it differs: llama.cpp's gpt-oss calls the
 * norm before the experts attn_post_norm (LLM_TENSOR_ATTN_POST_NORM). */
static const char *const oss_gguf_names[MODEL_N_PARAMS] = {
    [P_FFN_NORM] = "blk.%d.post_attention_norm.weight",
};

/* gpt_oss's Hugging Face names where they differ: the router, and each
 * layer's experts stacked in one tensor per kind (lib/ckpt/load_hf.c reads
 * an expert's slice of them: gate_up_proj [E, dim, 2I], gate and up
 * columns interleaved, down_proj [E, I, dim]). */
static const char *const oss_names[MODEL_N_PARAMS] = {
    [P_ROUTER] = "model.layers.%d.mlp.router.weight",
    [P_ROUTER_B] = "model.layers.%d.mlp.router.bias",
    [P_EXP_GATE] = "model.layers.%d.mlp.experts.gate_up_proj",
    [P_EXP_UP] = "model.layers.%d.mlp.experts.gate_up_proj",
    [P_EXP_DOWN] = "model.layers.%d.mlp.experts.down_proj",
    [P_EXP_GATE_B] = "model.layers.%d.mlp.experts.gate_up_proj_bias",
    [P_EXP_UP_B] = "model.layers.%d.mlp.experts.gate_up_proj_bias",
    [P_EXP_DOWN_B] = "model.layers.%d.mlp.experts.down_proj_bias",
};

size_t model_tensor_list(const model *m, model_tensor_ref *out) {
    const model_config *c = &m->cfg;
    int64_t d = c->dim, hd = c->head_dim, qd = (int64_t)c->n_heads * hd;
    int64_t kvd = (int64_t)c->n_kv_heads * hd, h = c->hidden_dim, V = c->vocab_size, I = c->moe_hidden_dim;
    const int64_t shape[MODEL_N_PARAMS][2] = {
        [P_TOK_EMBD] = {V, d}, [P_ATTN_NORM] = {d, 0}, [P_WQ] = {qd, d}, [P_WK] = {kvd, d},
        [P_WV] = {kvd, d}, [P_BQ] = {qd, 0}, [P_BK] = {kvd, 0}, [P_BV] = {kvd, 0},
        [P_Q_NORM] = {hd, 0}, [P_K_NORM] = {hd, 0}, [P_SINKS] = {c->n_heads, 0}, [P_WO] = {d, qd}, [P_BO] = {d, 0}, [P_FFN_NORM] = {d, 0},
        [P_W_GATE] = {h, d}, [P_W_UP] = {h, d}, [P_W_DOWN] = {d, h}, [P_ROUTER] = {c->n_experts, d},
        [P_EXP_GATE] = {I, d}, [P_EXP_UP] = {I, d}, [P_EXP_DOWN] = {d, I}, [P_ROUTER_B] = {c->n_experts, 0},
        [P_EXP_GATE_B] = {I, 0}, [P_EXP_UP_B] = {I, 0}, [P_EXP_DOWN_B] = {d, 0}, [P_OUT_NORM] = {d, 0},
        [P_LM_HEAD] = {V, d}, [P_SCORE] = {c->num_labels, d}};
    size_t n = 0;
    for (int p = 0; p < MODEL_N_PARAMS; p++) {
        if (!m->param_sizes[p]) continue;
        bool global = p == P_TOK_EMBD || p == P_OUT_NORM || p == P_LM_HEAD || p == P_SCORE;
        int n_layers = global ? 1 : c->n_layers, n_exp = expert_param(p) ? c->n_experts : 1;
        size_t per_exp = (size_t)(shape[p][0] * (shape[p][1] ? shape[p][1] : 1));
        for (int l = 0; l < n_layers; l++) {
            if (!global && !model_layer_has(c, p, l)) continue;
            float *at = global ? m->w.t[p] : model_layer_tensor(m, p, l);
            for (int x = 0; x < n_exp; x++, n++) {
                if (!out) continue;
                model_tensor_ref *r = &out[n];
                if (expert_param(p)) snprintf(r->name, sizeof r->name, tensor_names[p].hf, l, x);
                else snprintf(r->name, sizeof r->name, tensor_names[p].hf, l);
                bool oss = c->arch == ARCH_GPT_OSS;
                if (oss && oss_names[p]) snprintf(r->hf, sizeof r->hf, oss_names[p], l);
                else memcpy(r->hf, r->name, sizeof r->hf);
                snprintf(r->gguf, sizeof r->gguf, oss && oss_gguf_names[p] ? oss_gguf_names[p] : tensor_names[p].gguf, l);
                r->param = p;
                r->layer = global ? -1 : l;
                r->expert = expert_param(p) ? x : -1;
                r->rows = shape[p][0];
                r->cols = shape[p][1];
                r->dst = at + (size_t)x * per_exp;
                r->perm_heads = p == P_WQ || p == P_BQ ? c->n_heads : p == P_WK || p == P_BK ? c->n_kv_heads : 0;
            }
        }
    }
    return n;
}
