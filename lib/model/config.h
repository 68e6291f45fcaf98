/* The hyper-parameters of a Llama-family decoder, read here from a Hugging
 * Face config.json (+ generation_config.json); lib/ckpt/gguf_config.h reads
 * them from GGUF metadata.
 *
 * Supported: llama (Llama 2/3.x incl. rope_scaling "llama3", SmolLM/SmolLM2,
 * Mistral without a sliding window), qwen2 (q/k/v bias), qwen3 (per-head
 * q/k RMSNorm, head_dim from the config), qwen3_moe (qwen3's attention and a
 * mixture of experts in the layers its config makes sparse), gpt_oss (sinks,
 * biases, sliding layers, YaRN; every layer a mixture with biases and the
 * clamped SwiGLU). Anything else,
 * an expert setting this reader does not know included, is EX_DATAERR
 * naming what is unsupported.
 *
 * Each family as a causal LM (*ForCausalLM: the LM head) or as a sequence
 * classifier (*ForSequenceClassification, reward models: the same decoder
 * and a `score` head of num_labels rows, no LM head). */
#ifndef GRPO_MODEL_CONFIG_H
#define GRPO_MODEL_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "../util/err.h"

typedef enum { ARCH_LLAMA, ARCH_QWEN2, ARCH_QWEN3, ARCH_QWEN3_MOE, ARCH_GPT_OSS } model_arch;

/* MODEL_MAX_DENSE_LAYERS: the layers mlp_only_layers can name (bits of moe_dense). */
enum { MODEL_MAX_EOS = 8, MODEL_MAX_DENSE_LAYERS = 1024 };

typedef struct {
    model_arch arch;
    int dim;        /* hidden_size */
    int hidden_dim; /* intermediate_size (SwiGLU width) */
    int n_layers;
    int n_heads;
    int n_kv_heads;
    int head_dim;   /* dim / n_heads, except where the config says (qwen3) */
    int vocab_size;
    int max_seq_len; /* max_position_embeddings / context_length */
    double rope_theta;
    float norm_eps;
    /* rope_scaling {rope_type: "llama3"}; HF's _compute_llama3_parameters */
    bool rope_llama3;
    double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int rope_original_max_pos;
    /* rope_scaling {rope_type: "yarn"} (rope_factor, rope_original_max_pos
     * too); HF's _compute_yarn_parameters: frequencies between beta_fast and
     * beta_slow rotations over the original context ramp from kept to
     * divided by factor (the ramp's ends floored and ceiled when truncate),
     * and cos, sin scaled by the attention factor (its default
     * 0.1 ln(factor) + 1), so every score by its square: rope_score_scale. */
    bool rope_yarn, rope_truncate;
    double rope_beta_fast, rope_beta_slow, rope_attn_factor;
    /* Sliding-window attention (layer_types "sliding_attention"): the layers
     * whose bit is set attend to their last sliding_window positions only. */
    int sliding_window;
    uint64_t swa_layers[MODEL_MAX_DENSE_LAYERS / 64];
    bool attn_sinks;  /* gpt_oss: a learned sink logit per head (ops.h's attn_shape) */
    bool attn_o_bias; /* gpt_oss: a bias on o_proj (qkv_bias on q, k, v beside it) */
    bool tied_embeddings;
    bool qkv_bias; /* qwen2 */
    bool qk_norm;  /* qwen3, qwen3_moe */
    /* Mixture of experts (qwen3_moe; the block is lib/model/layer.h's). n_experts 0: every
     * FFN is dense. A layer's FFN is the mixture when config_layer_moe says so; the
     * others are dense FFNs of hidden_dim. Defaults and ranges: config.c's moe_keys. */
    int n_experts;      /* num_experts */
    int n_experts_used; /* num_experts_per_tok: the top k a token is routed to */
    int moe_hidden_dim; /* moe_intermediate_size: each expert's SwiGLU width */
    bool moe_norm_topk; /* norm_topk_prob: the k routing weights divided by their sum */
    int moe_step;       /* decoder_sparse_step: layers l with (l + 1) % step == 0 are sparse */
    uint64_t moe_dense[MODEL_MAX_DENSE_LAYERS / 64]; /* mlp_only_layers, as bits: dense anyway */
    /* gpt_oss's experts: biases on the router and on every expert projection,
     * and the clamped SwiGLU (ops.h) with swiglu_limit (0: the plain one) */
    bool moe_bias;
    float swiglu_limit, swiglu_alpha; /* alpha: GptOssExperts' 1.702, not in config.json */
    int32_t bos_id; /* -1 when unknown */
    int32_t eos_ids[MODEL_MAX_EOS];
    int n_eos;
    /* sequence classifiers */
    bool seq_cls;
    int num_labels; /* id2label's size, else num_labels; 0 = not said (the loader takes score.weight's rows) */
    int32_t pad_id; /* pad_token_id, -1 when none: the classifier reads the last token that is not pad */
    char architecture[64]; /* as the source names it ("Qwen2ForSequenceClassification", GGUF's "qwen2") */
} model_config;

/* "llama", "qwen2", "qwen3", "qwen3_moe", "gpt_oss" (HF's model_type). */
const char *model_arch_name(model_arch a);
/* llama.cpp's general.architecture: the same but "qwen3moe", "gpt-oss". */
const char *model_arch_gguf(model_arch a);

/* Parses config.json text (name is used in messages) into c. Defaults for
 * absent optional keys are the transformers classes' defaults. */
int config_parse_hf(model_config *c, const char *json, const char *name, gerr *e);
/* Reads DIR/config.json and, when present, DIR/generation_config.json (its
 * eos_token_id, an int or a list, replaces config.json's). */
int config_load_hf(model_config *c, const char *dir, gerr *e);
/* What a reader starts from: zeroed, bos_id and pad_id -1 (unknown). */
void config_defaults(model_config *c);
/* Checks the sizes are positive and consistent (EX_DATAERR naming src). */
int config_check(const model_config *c, const char *src, gerr *e);

/* inv_freq[head_dim/2]: 1/theta^(2i/head_dim), computed in double and rounded
 * to float (HF's float32 inv_freq), then llama3 scaling as HF's
 * _compute_llama3_parameters when c asks for it. */
void rope_inv_freq(float *inv_freq, const model_config *c);

/* The factor every attention score is multiplied by besides 1/sqrt(head_dim):
 * YaRN's attention factor squared, else 1. */
double rope_score_scale(const model_config *c);
/* Layer l's window (0: it attends to every position). */
int config_layer_window(const model_config *c, int l);

/* Whether layer l's FFN is the mixture of experts (transformers'
 * Qwen3MoeDecoderLayer: not in mlp_only_layers and (l + 1) % step == 0). */
bool config_layer_moe(const model_config *c, int l);
/* How many layers have a mixture of experts (moe true) or a dense FFN (false),
 * and the index of layer l among the layers of its kind: where its FFN
 * tensors sit in the parameter buffer. */
int config_ffn_layers(const model_config *c, bool moe);
int config_ffn_slot(const model_config *c, int l);

/* Whether tok is one of the end-of-sequence ids. */
bool config_is_eos(const model_config *c, int32_t tok);

#endif
