/* A model loaded for inference, with what running it needs: its tokenizer
 * and chat-template text, a KV cache of fixed slots, the scratch of one
 * forward call and that call's rows, each grown as the work asks. Rollout
 * and the reward model (`--fn rm`) both run their model through one. */
#ifndef GRPO_RUNNER_H
#define GRPO_RUNNER_H

#include <stdbool.h>
#include <stddef.h>

#include "../model/model.h"
#include "../tok/model_text.h"
#include "../util/err.h"

typedef struct {
    model m;
    model_text mt;
    kv_cache cache;
    model_scratch scratch;
    model_rows rows;
    bool cache_ready, scratch_ready;
    /* The KV cache's element format, read by the first runner_reserve:
     * KV_F32 after runner_open; KV_BF16 halves the bytes decode attention
     * reads (ops.h), on the CPU and on a device alike. */
    kv_format kv_fmt;
} model_runner;

/* Loads path: a causal LM (model_load; its tokenizer first, so a tokenizer
 * problem is reported before the weights are read), or with classifier a
 * sequence classifier (model_load_classifier, then its tokenizer). Packs the
 * weights for inference. EX_DATAERR when the tokenizer has more tokens than
 * the model has embeddings. On error r holds nothing. */
int runner_open(model_runner *r, const char *path, bool classifier, gerr *e);
/* The same with the model on backend be (NULL: the CPU, loaded packed as w
 * asks by load.h's model_load_for_inference, a GGUF's Q8_0 blocks straight
 * into q8's, a gpt-oss's MXFP4 experts kept MXFP4, a LoRA checkpoint on its
 * packed frozen base with the adapter unmerged, whose scratch then holds
 * the adapter's u and whose cache is float32 by default; runner_open packs
 * float32): on a device the weights are copied there in its own format
 * instead (of w only its MXFP4 rule: experts kept MXFP4 go there as their
 * blocks; a LoRA checkpoint merged), and the cache and scratch
 * runner_reserve makes live there too. */
int runner_open_on(model_runner *r, const char *path, bool classifier, const backend *be, weight_choice w,
                   gerr *e);
/* Room for n_seqs cache slots of max_len positions (capped at the model's
 * context) and forward calls of up to `rows` rows. The first call sizes
 * exactly; later growth keeps what the cache holds and adds a quarter of
 * headroom, so that growing stays rare. n_seqs is fixed by the first call. */
int runner_reserve(model_runner *r, int n_seqs, int max_len, size_t rows, gerr *e);
void runner_close(model_runner *r);

#endif
