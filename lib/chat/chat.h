/* Chat templates rendered natively.
 *
 * Models ship their chat template as Jinja, which C cannot run, so the
 * common families are rendered here and the family is picked by recognising
 * the template's text:
 *   chatml  "<|im_start|>ROLE\nCONTENT<|im_end|>\n" per message (SmolLM2, Qwen2/2.5/3);
 *           the default system message, when the template inserts one before a
 *           conversation that has none, is read from the template itself;
 *   llama3  "<|begin_of_text|>" then "<|start_header_id|>ROLE<|end_header_id|>\n\n"
 *           CONTENT-trimmed "<|eot_id|>" per message (Llama 3.x; 3.1+ templates get
 *           their "Cutting Knowledge Date" system header);
 *   raw     the messages' contents joined by nothing, no special tokens: for
 *           base models and for checking tokenizer parity.
 * add_generation_prompt appends the opening of the assistant's turn. */
#ifndef GRPO_CHAT_H
#define GRPO_CHAT_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "../util/err.h"
#include "../util/strbuf.h"

typedef enum { CHAT_CHATML, CHAT_LLAMA3, CHAT_RAW } chat_family;

typedef struct {
    chat_family family;
    char *default_system; /* chatml: inserted when the first message is not a system one; NULL = none */
    bool llama31_header;  /* llama3: the 3.1+ knowledge-date system header */
} chat_template;

/* "chatml", "llama3", "raw" -> family; anything else is EX_USAGE. */
int chat_family_parse(const char *name, chat_family *out, gerr *e);
const char *chat_family_name(chat_family f);

/* Recognises a model's Jinja template. name_for_errors says where it came
 * from; an unrecognised template is EX_DATAERR telling to use --chat-template. */
int chat_template_detect(const char *jinja, const char *name_for_errors, chat_template *out, gerr *e);
/* A family forced by --chat-template; jinja (may be NULL) still supplies the
 * default system message when it is of that family. */
void chat_template_force(chat_family f, const char *jinja, chat_template *out);
void chat_template_free(chat_template *t);

/* Renders messages (a JSON array of {role, content} with string fields).
 * Errors name the message index: EX_DATAERR. */
int chat_render(const chat_template *t, const cJSON *messages, bool add_generation_prompt, strbuf *out, gerr *e);

#endif
