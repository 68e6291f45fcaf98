#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>

#include "../ops/ops.h"
#include "../ops/packed.h"
#include "../ops/packed_bf16.h"
#include "../ops/packed_q8.h"

static const char *const param_names[MODEL_N_PARAMS] = {
    "tok_embd", "attn_norm", "wq", "wk", "wv", "bq", "bk", "bv", "q_norm", "k_norm", "wo",
    "ffn_norm", "w_gate", "w_up", "w_down", "out_norm", "lm_head", "score"};

const char *model_param_name(int i) {
    return i >= 0 && i < MODEL_N_PARAMS ? param_names[i] : "?";
}

static void param_sizes(const model_config *c, size_t s[MODEL_N_PARAMS]) {
    size_t L = (size_t)c->n_layers, d = (size_t)c->dim, hd = (size_t)c->head_dim;
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
    s[P_WO] = L * d * qd;
    s[P_FFN_NORM] = L * d;
    s[P_W_GATE] = L * h * d;
    s[P_W_UP] = L * h * d;
    s[P_W_DOWN] = L * d * h;
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
    m->params_memory = calloc(m->n_params, sizeof(float));
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
    return m->w.t[param] + (size_t)layer * (m->param_sizes[param] / (size_t)m->cfg.n_layers);
}

void model_init_rope(model *m) {
    rope_inv_freq(m->inv_freq, &m->cfg);
}

void model_free(model *m) {
    model_dev_free(m);
    free(m->params_memory);
    free(m->head_packed_own);
    memset(m, 0, sizeof *m);
}

enum { N_MATS = 7 }; /* matrices per layer */

/* Why fmt's kernel cannot take an input width of k (NULL: it can). */
static const char *unpackable(weight_format fmt, int k) {
    if (fmt == WEIGHTS_Q8 && (k % Q8W_K_BLOCK || k > Q8W_MAX_K))
        return "8-bit blocks need input widths that are multiples of 32 (at most 65536)";
    if (fmt == WEIGHTS_BF16 && k > BF16W_MAX_K) return "bf16 panels need input widths of at most 65536";
    return NULL;
}

/* W [n, k] packed fits in W's own place: float32 panels need whole panels;
 * bf16 and q8 fit whenever the padding is smaller than what they save. */
static bool fits_in_place(weight_format fmt, int n, int k) {
    if (fmt == WEIGHTS_F32) return n % PACKED_NR == 0;
    return weights_packed_bytes(fmt, n, k) <= (size_t)n * k * sizeof(float);
}

/* W [n, k] rewritten in format fmt in its own place, through tmp. */
static void pack_in_place(weight_format fmt, float *w, float *tmp, int n, int k) {
    memcpy(tmp, w, (size_t)n * k * sizeof *w);
    weights_pack(fmt, w, tmp, n, k);
}

const char *weight_format_name(weight_format fmt) {
    return fmt == WEIGHTS_BF16 ? "bf16" : fmt == WEIGHTS_Q8 ? "q8" : "f32";
}

static const char *kernel_describe(const model *m) {
    if (!m->packed) return "f32 (row-major, OpenBLAS";
    switch (m->packed_as) {
    case WEIGHTS_BF16:
        return !strcmp(bf16w_kernel(), "avx512bf16") ? "bf16 (AVX512-BF16 kernel"
               : !strcmp(bf16w_kernel(), "avx512f") ? "bf16 (emulated on AVX-512F"
               : !strcmp(bf16w_kernel(), "avx2")    ? "bf16 (emulated on AVX2"
                                                    : "bf16 (portable kernel";
    case WEIGHTS_Q8:
        return q8w_kernel_used() == Q8W_VNNI ? "q8 (AVX-512 VNNI kernel"
               : q8w_kernel_used() == Q8W_AVX2 ? "q8 (AVX2 kernel"
                                               : "q8 (portable kernel";
    default: return !strcmp(packed_kernel(), "avx2") ? "f32 (packed AVX2 kernel" : "f32 (packed AVX-512 kernel";
    }
}

const char *model_weights_describe(const model *m, char *buf, size_t size) {
    if (!m->packed || !m->packed_verbatim) {
        snprintf(buf, size, "%s)", kernel_describe(m));
        return buf;
    }
    int total = N_MATS * m->cfg.n_layers + (m->w.lm_head ? 1 : 0);
    snprintf(buf, size, "%s; %d of %d matrices from the file's %s blocks)", kernel_describe(m), m->packed_verbatim,
             total, m->packed_as == WEIGHTS_Q8 ? "Q8_0" : "own");
    return buf;
}

/* (param, rows, cols) of each layer's matrices. */
static void layer_mats(const model_config *c, int mats[N_MATS][3]) {
    int d = c->dim, qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim, hid = c->hidden_dim;
    const int all[N_MATS][3] = {{P_WQ, qd, d}, {P_WK, kvd, d}, {P_WV, kvd, d}, {P_WO, d, qd},
                                {P_W_GATE, hid, d}, {P_W_UP, hid, d}, {P_W_DOWN, d, hid}};
    memcpy(mats, all, sizeof all);
}

/* What model_pack_for_inference does with fmt: packs every matrix, packs
 * nothing (f32 without its kernel or whole panels: OpenBLAS runs the
 * row-major weights), or refuses (EX_DATAERR in e). */
typedef enum { PACK_ALL, PACK_NOTHING, PACK_REFUSED } pack_plan;

static pack_plan plan_packing(const model *m, weight_format fmt, gerr *e) {
    if (fmt == WEIGHTS_F32 && !packed_supported()) return PACK_NOTHING;
    int mats[N_MATS][3];
    layer_mats(&m->cfg, mats);
    for (int i = 0; i < N_MATS; i++) {
        const char *why = unpackable(fmt, mats[i][2]);
        if (!why && !fits_in_place(fmt, mats[i][1], mats[i][2])) {
            if (fmt == WEIGHTS_F32) return PACK_NOTHING;
            why = "a matrix too narrow to pack in its own place";
        }
        if (why) {
            gerr_set(e, EX_DATAERR, "%s weights: %s (%s is %d x %d)", weight_format_name(fmt), why,
                     model_param_name(mats[i][0]), mats[i][1], mats[i][2]);
            return PACK_REFUSED;
        }
    }
    return PACK_ALL;
}

/* The LM head is packed in its own place (not a copy): untied, and it fits. */
static bool head_in_place(const model *m, weight_format fmt) {
    return m->w.lm_head && m->w.lm_head != m->w.tok_embd && fits_in_place(fmt, m->cfg.vocab_size, m->cfg.dim);
}

bool model_packs_in_place(const model *m, weight_format fmt, const model_tensor_ref *r) {
    bool layer_mat = r->param == P_WQ || r->param == P_WK || r->param == P_WV || r->param == P_WO ||
                     r->param == P_W_GATE || r->param == P_W_UP || r->param == P_W_DOWN;
    bool own_place = layer_mat || (r->param == P_LM_HEAD && head_in_place(m, fmt));
    return own_place && !m->packed && plan_packing(m, fmt, NULL) == PACK_ALL;
}

int model_pack_for_inference(model *m, weight_format fmt, gerr *e) {
    return model_pack_for_inference_except(m, fmt, NULL, e);
}

/* done[i] of model_tensor_list's tensors as a flag per (param, layer):
 * skip[param * n_layers + layer], the global tensors at layer 0. */
static bool *done_by_param(const model *m, const bool *done) {
    int L = m->cfg.n_layers;
    bool *skip = calloc((size_t)MODEL_N_PARAMS * L, sizeof *skip);
    size_t n = model_tensor_list(m, NULL);
    model_tensor_ref *refs = calloc(n, sizeof *refs);
    if (!skip || !refs) {
        free(skip), free(refs);
        return NULL;
    }
    model_tensor_list(m, refs);
    for (size_t i = 0; i < n; i++)
        if (done && done[i]) skip[(size_t)refs[i].param * L + (refs[i].layer < 0 ? 0 : refs[i].layer)] = true;
    free(refs);
    return skip;
}

int model_pack_for_inference_except(model *m, weight_format fmt, const bool *done, gerr *e) {
    const model_config *c = &m->cfg;
    if (m->packed) return 0;
    pack_plan plan = plan_packing(m, fmt, e);
    if (plan != PACK_ALL) return plan == PACK_REFUSED ? EX_DATAERR : 0;
    int L = c->n_layers, d = c->dim, mats[N_MATS][3];
    layer_mats(c, mats);
    bool *skip = done_by_param(m, done);
    if (!skip) return gerr_set(e, EX_SOFTWARE, "out of memory packing the weights");
    bool in_place = head_in_place(m, fmt), head_copy = m->w.lm_head && !in_place;
    bool head_done = in_place && skip[(size_t)P_LM_HEAD * L];
    size_t biggest = in_place && !head_done ? (size_t)c->vocab_size * d : 0;
    int verbatim = head_done;
    for (int l = 0; l < L; l++)
        for (int i = 0; i < N_MATS; i++) {
            size_t n = (size_t)mats[i][1] * mats[i][2];
            if (skip[(size_t)mats[i][0] * L + l]) verbatim++;
            else biggest = n > biggest ? n : biggest;
        }
    float *tmp = biggest ? malloc(sizeof(float) * biggest) : NULL;
    void *head = head_copy ? malloc(weights_packed_bytes(fmt, c->vocab_size, d)) : NULL;
    if ((biggest && !tmp) || (head_copy && !head)) {
        free(tmp), free(head), free(skip);
        return gerr_set(e, EX_SOFTWARE, "out of memory packing the weights");
    }
    for (int l = 0; l < L; l++)
        for (int i = 0; i < N_MATS; i++)
            if (!skip[(size_t)mats[i][0] * L + l])
                pack_in_place(fmt, m->w.t[mats[i][0]] + (size_t)l * mats[i][1] * mats[i][2], tmp, mats[i][1],
                              mats[i][2]);
    if (in_place) {
        if (!head_done) pack_in_place(fmt, m->w.lm_head, tmp, c->vocab_size, d);
        m->head_packed = m->w.lm_head;
    } else if (head_copy) {
        weights_pack(fmt, head, m->w.lm_head, c->vocab_size, d);
        m->head_packed = m->head_packed_own = head;
    }
    free(tmp), free(skip);
    m->packed = true;
    m->packed_as = fmt;
    m->packed_verbatim = verbatim;
    return 0;
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
    [P_WO] = {"model.layers.%d.self_attn.o_proj.weight", "blk.%d.attn_output.weight"},
    [P_FFN_NORM] = {"model.layers.%d.post_attention_layernorm.weight", "blk.%d.ffn_norm.weight"},
    [P_W_GATE] = {"model.layers.%d.mlp.gate_proj.weight", "blk.%d.ffn_gate.weight"},
    [P_W_UP] = {"model.layers.%d.mlp.up_proj.weight", "blk.%d.ffn_up.weight"},
    [P_W_DOWN] = {"model.layers.%d.mlp.down_proj.weight", "blk.%d.ffn_down.weight"},
    [P_OUT_NORM] = {"model.norm.weight", "output_norm.weight"},
    [P_LM_HEAD] = {"lm_head.weight", "output.weight"},
    [P_SCORE] = {"score.weight", "cls.output.weight"},
};

size_t model_tensor_list(const model *m, model_tensor_ref *out) {
    const model_config *c = &m->cfg;
    int64_t d = c->dim, hd = c->head_dim, qd = (int64_t)c->n_heads * hd;
    int64_t kvd = (int64_t)c->n_kv_heads * hd, h = c->hidden_dim, V = c->vocab_size;
    const int64_t shape[MODEL_N_PARAMS][2] = {
        [P_TOK_EMBD] = {V, d}, [P_ATTN_NORM] = {d, 0}, [P_WQ] = {qd, d}, [P_WK] = {kvd, d},
        [P_WV] = {kvd, d}, [P_BQ] = {qd, 0}, [P_BK] = {kvd, 0}, [P_BV] = {kvd, 0},
        [P_Q_NORM] = {hd, 0}, [P_K_NORM] = {hd, 0}, [P_WO] = {d, qd}, [P_FFN_NORM] = {d, 0},
        [P_W_GATE] = {h, d}, [P_W_UP] = {h, d}, [P_W_DOWN] = {d, h}, [P_OUT_NORM] = {d, 0},
        [P_LM_HEAD] = {V, d}, [P_SCORE] = {c->num_labels, d}};
    size_t n = 0;
    for (int p = 0; p < MODEL_N_PARAMS; p++) {
        if (!m->param_sizes[p]) continue;
        bool global = p == P_TOK_EMBD || p == P_OUT_NORM || p == P_LM_HEAD || p == P_SCORE;
        int n_layers = global ? 1 : c->n_layers;
        size_t per = m->param_sizes[p] / (size_t)n_layers;
        for (int l = 0; l < n_layers; l++, n++) {
            if (!out) continue;
            model_tensor_ref *r = &out[n];
            snprintf(r->hf, sizeof r->hf, tensor_names[p].hf, l);
            snprintf(r->gguf, sizeof r->gguf, tensor_names[p].gguf, l);
            r->param = p;
            r->layer = global ? -1 : l;
            r->rows = shape[p][0];
            r->cols = shape[p][1];
            r->dst = m->w.t[p] + (size_t)l * per;
            r->perm_heads = p == P_WQ || p == P_BQ ? c->n_heads : p == P_WK || p == P_BK ? c->n_kv_heads : 0;
        }
    }
    return n;
}
