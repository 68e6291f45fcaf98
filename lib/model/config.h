/* The hyper-parameters of a Llama-family decoder, read here from a Hugging
 * Face config.json (+ generation_config.json); lib/ckpt/gguf_config.h reads
 * them from GGUF metadata.
 *
 * Supported: llama (Llama 2/3.x incl. rope_scaling "llama3", SmolLM/SmolLM2,
 * Mistral without a sliding window), qwen2 (q/k/v bias), qwen3 (per-head
 * q/k RMSNorm, head_dim from the config). Anything else is EX_DATAERR naming
 * what is unsupported.
 *
 * Each family as a causal LM (*ForCausalLM: the LM head) or as a sequence
 * classifier (*ForSequenceClassification, reward models: the same decoder
 * and a `score` head of num_labels rows, no LM head). */
#ifndef GRPO_MODEL_CONFIG_H
#define GRPO_MODEL_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "../util/err.h"

typedef enum { ARCH_LLAMA, ARCH_QWEN2, ARCH_QWEN3 } model_arch;

enum { MODEL_MAX_EOS = 8 };

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
    bool tied_embeddings;
    bool qkv_bias; /* qwen2 */
    bool qk_norm;  /* qwen3 */
    int32_t bos_id; /* -1 when unknown */
    int32_t eos_ids[MODEL_MAX_EOS];
    int n_eos;
    /* sequence classifiers */
    bool seq_cls;
    int num_labels; /* id2label's size, else num_labels; 0 = not said (the loader takes score.weight's rows) */
    int32_t pad_id; /* pad_token_id, -1 when none: the classifier reads the last token that is not pad */
    char architecture[64]; /* as the source names it ("Qwen2ForSequenceClassification", GGUF's "qwen2") */
} model_config;

/* "llama", "qwen2", "qwen3". */
const char *model_arch_name(model_arch a);

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

/* Whether tok is one of the end-of-sequence ids. */
bool config_is_eos(const model_config *c, int32_t tok);

#endif
