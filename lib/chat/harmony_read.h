/* What a harmony (gpt-oss) assistant turn says, read from its token ids.
 *
 * A turn is messages "<|start|>HEADER<|message|>CONTENT<|end|>" (the first
 * one's "<|start|>assistant" is the prompt's generation prompt), the last
 * ended by <|return|> (an answer) or <|call|> (a tool call). The header
 * names the author, the channel after <|channel|> ("analysis", "commentary",
 * "final") and, for a tool call, the recipient "to=functions.NAME".
 *
 * The structure is read from the special tokens' ids only, never from
 * text: a model that writes "<|channel|>final<|message|>" as ordinary
 * tokens inside its reasoning has written reasoning, not an answer. A
 * header's author, channel and recipient are the text of the ordinary
 * tokens between its special ones. A message's content is the text of its
 * ordinary tokens (special tokens left out), as the rollout's `completion`
 * decodes them.
 *
 * The answer is the content of the turn's last assistant message on the
 * final channel; a turn without one has no answer (formats/rollout.md). */
#ifndef GRPO_CHAT_HARMONY_READ_H
#define GRPO_CHAT_HARMONY_READ_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "../tok/tokenizer.h"
#include "../util/err.h"
#include "../util/strbuf.h"

/* The ids of harmony's special tokens. */
typedef struct {
    int32_t start, end, message, channel, constrain, ret, call;
} harmony_tokens;

/* Looks them up in t (added tokens): EX_DATAERR naming `where` and the
 * first one missing when t is not a harmony tokenizer. */
int harmony_tokens_find(const tokenizer *t, const char *where, harmony_tokens *out, gerr *e);

typedef struct {
    strbuf final;    /* the answer: the last final-channel message's content */
    bool has_final;
    strbuf thinking; /* the analysis-channel messages' contents, joined by "\n" */
    cJSON *calls;    /* [{"name", "arguments"}]: each message to functions.NAME whose content is a JSON object */
} harmony_turn;

/* Reads ids[0..n), an assistant turn that follows "<|start|>assistant".
 * text_end cuts the turn's text (ids decoded with the special tokens left
 * out) where a stop string ended it; SIZE_MAX: not cut. out is
 * overwritten (harmony_turn_free it). */
void harmony_read(const tokenizer *t, const harmony_tokens *h, const int32_t *ids, size_t n, size_t text_end,
                  harmony_turn *out);
void harmony_turn_free(harmony_turn *turn);

#endif
