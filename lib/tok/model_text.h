/* The text side of a model: its tokenizer, chat template and special ids,
 * from a Hugging Face directory (tokenizer.json, tokenizer_config.json,
 * generation_config.json: our checkpoints are such directories) or from a
 * GGUF file (tokenizer.ggml.* and tokenizer.chat_template). grpo-prep needs
 * only this; grpo-rollout adds the weights. */
#ifndef GRPO_MODEL_TEXT_H
#define GRPO_MODEL_TEXT_H

#include <stdint.h>

#include "../chat/chat.h"
#include "../io/record.h"
#include "tokenizer.h"

enum { MODEL_TEXT_MAX_EOS = 8 };

typedef struct {
    tokenizer *tok;
    char *chat_template; /* Jinja source, NULL when the model has none */
    char *template_source; /* where it came from, for messages */
    int32_t bos_id;      /* -1 when none */
    int32_t eos_ids[MODEL_TEXT_MAX_EOS];
    int n_eos;
    /* generation_config.json's sampling defaults; < 0 when not given */
    double temperature, top_p;
    long long top_k;
} model_text;

/* path: a directory or a .gguf file. Errors name the file and what is wrong. */
int model_text_load(const char *path, model_text *mt, gerr *e);
void model_text_free(model_text *mt);
bool model_text_is_eos(const model_text *mt, int32_t id);

/* The chat template a tool renders with: choice "auto" is the model's own,
 * recognised by its text; "chatml", "llama3" or "raw" force a family (the
 * model's template still supplies its default system message). */
int model_text_template(const model_text *mt, const char *choice, chat_template *out, gerr *e);

/* A prompt record's token ids: its "messages" rendered with t, the
 * assistant's turn opened (raw: the text alone), encoded with special tokens
 * matched in the text and none added. *ids is xmalloc'd. Errors name the
 * record's file, line and field. */
int model_text_prompt_tokens(const model_text *mt, const chat_template *t, const record *rec, int32_t **ids,
                             size_t *n, gerr *e);

#endif
