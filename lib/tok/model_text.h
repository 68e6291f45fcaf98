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
    bool gpt_oss; /* config.json's model_type gpt_oss (GGUF: general.architecture gpt-oss) */
    /* generation_config.json's sampling defaults; < 0 when not given */
    double temperature, top_p;
    long long top_k;
} model_text;

/* path: a directory or a .gguf file. A directory's chat template is
 * tokenizer_config.json's, else chat_template.jinja's. Errors name the file
 * and what is wrong. */
int model_text_load(const char *path, model_text *mt, gerr *e);
void model_text_free(model_text *mt);
bool model_text_is_eos(const model_text *mt, int32_t id);
/* id ends a completion too (ignored when MODEL_TEXT_MAX_EOS are kept). */
void model_text_add_eos(model_text *mt, int64_t id);

/* What a tool's flags choose: --chat-template (auto|chatml|llama3|harmony|raw)
 * and harmony's --reasoning-effort and --chat-date (NULL: not given). */
typedef struct {
    const char *family;
    const char *reasoning, *date;
} chat_choice;

/* The chat template a tool renders with: family "auto" is the model's own,
 * recognised by its text (a gpt-oss without one: harmony); another name
 * forces a family (the model's template still supplies its default system
 * message). The harmony options given for another family are EX_USAGE;
 * harmony with a tokenizer that lacks its special tokens is EX_DATAERR. */
int model_text_template(const model_text *mt, const chat_choice *c, chat_template *out, gerr *e);
/* Whether that choice renders, and so reads completions, in harmony. */
bool model_text_is_harmony(const model_text *mt, const char *family);

/* A prompt record's token ids: its "messages" rendered with t, the
 * assistant's turn opened (raw: the text alone), encoded with special tokens
 * matched in the text and none added. *ids is xmalloc'd. Errors name the
 * record's file, line and field. */
int model_text_prompt_tokens(const model_text *mt, const chat_template *t, const record *rec, int32_t **ids,
                             size_t *n, gerr *e);

#endif
