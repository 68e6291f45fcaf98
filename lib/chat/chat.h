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
 *   harmony gpt-oss's format (harmony.c): a system message with the model's
 *           identity, dates and reasoning level, the conversation's system
 *           message as a developer message, "<|start|>ROLE<|message|>CONTENT<|end|>"
 *           per message, assistant messages on the final channel;
 *   raw     the messages' contents joined by nothing, no special tokens: for
 *           base models and for checking tokenizer parity.
 * add_generation_prompt appends the opening of the assistant's turn.
 *
 * Tools (tools.c; grpo-rollout --tools) are rendered as each family's own
 * template does: chatml as Qwen2.5's "# Tools" system block with
 * <tool_call> JSON calls and tool results in <tool_response> (in a user
 * turn); llama3 as Llama 3.1's JSON function calls offered in the first
 * user message and results in an "ipython" turn. */
#ifndef GRPO_CHAT_H
#define GRPO_CHAT_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "../util/err.h"
#include "../util/strbuf.h"

typedef enum { CHAT_CHATML, CHAT_LLAMA3, CHAT_HARMONY, CHAT_RAW } chat_family;

/* harmony's "Current date:" unless chat_set_harmony sets one: a fixed date
 * (the harmony guide's), so that the same flags render the same tokens on
 * any day; gpt-oss's own template writes the day it runs. */
#define CHAT_HARMONY_DATE "2025-06-28"
#define CHAT_HARMONY_REASONING "medium" /* the template's default */

typedef struct {
    chat_family family;
    char *default_system; /* chatml: inserted when the first message is not a system one; NULL = none */
    bool llama31_header;  /* llama3: the 3.1+ knowledge-date system header */
    /* chatml: tool results go in a user turn inside <tool_response> (the
     * template has them, or tools are given); else as a "tool" turn */
    bool chatml_tool_response;
    const cJSON *tools; /* OpenAI-format function schemas (not owned); NULL = none */
    /* harmony: the system message's "Reasoning:" level and "Current date:" */
    char reasoning[8]; /* low|medium|high */
    char date[16];     /* YYYY-MM-DD */
} chat_template;

/* The choices of the tools' --chat-template flags, and of harmony's --reasoning-effort. */
#define CHAT_TEMPLATE_CHOICES "auto|chatml|llama3|harmony|raw"
#define CHAT_REASONING_CHOICES "low|medium|high"

/* "chatml", "llama3", "harmony", "raw" -> family; anything else is EX_USAGE. */
int chat_family_parse(const char *name, chat_family *out, gerr *e);
const char *chat_family_name(chat_family f);

/* Recognises a model's Jinja template (harmony: gpt-oss's, by its
 * <|channel|> tokens). name_for_errors says where it came from; an
 * unrecognised template is EX_DATAERR telling to use --chat-template. */
int chat_template_detect(const char *jinja, const char *name_for_errors, chat_template *out, gerr *e);
/* A family forced by --chat-template; jinja (may be NULL) still supplies the
 * default system message when it is of that family. */
void chat_template_force(chat_family f, const char *jinja, chat_template *out);
void chat_template_free(chat_template *t);
/* harmony's --reasoning-effort (low|medium|high) and --chat-date
 * (YYYY-MM-DD, or "today": the local date, as gpt-oss's template writes it);
 * NULL leaves the default. Either given for another family, or malformed, is
 * EX_USAGE naming the flag. */
int chat_set_harmony(chat_template *t, const char *reasoning, const char *date, gerr *e);

/* Renders messages (a JSON array of {role, content} with string fields).
 * Errors name the message index: EX_DATAERR. */
int chat_render(const chat_template *t, const cJSON *messages, bool add_generation_prompt, strbuf *out, gerr *e);

/* Messages from index `from` on, each as the family renders it (no
 * generation prompt, no default system message). */
int chat_render_messages(const chat_template *t, const cJSON *messages, int from, strbuf *out, gerr *e);
/* Message i's role and content (EX_DATAERR naming i when not strings). */
int chat_message_at(const cJSON *messages, int i, const char **role, const char **content, gerr *e);
/* s without leading and trailing ASCII white space (Jinja's |trim). */
void chat_append_trimmed(strbuf *out, const char *s);

/* ---- multi-turn (tools.c) -------------------------------------------------- */

/* Gives t the tool schemas (a JSON array of objects; not copied): EX_DATAERR
 * naming the element otherwise. */
int chat_set_tools(chat_template *t, const cJSON *tools, gerr *e);
/* The text that follows an assistant turn when messages (user or tool) come
 * after it, up to the opening of the next assistant turn: the assistant
 * turn's end marker when closed is false (it ended without its end-of-turn
 * token), the messages as the family renders them, the generation prompt.
 * calls are the tool calls the turn made (chat_parse_tool_calls' array;
 * NULL = none): harmony names a tool result after the last of them, and a
 * tool message answering no call is EX_DATAERR there. Rendering the whole
 * conversation at once gives the same text (harmony: see harmony.c). */
int chat_render_continuation(const chat_template *t, const cJSON *messages, bool closed, const cJSON *calls,
                             strbuf *out, gerr *e);
/* The tool calls in an assistant message's text, as a JSON array of
 * {"name": string, "arguments": object} (empty when none): chatml (and
 * raw) <tool_call>JSON</tool_call> blocks with "name" and "arguments";
 * llama3 a message that is JSON objects with "name" and "parameters" (or
 * "arguments"). Malformed calls are left out: what the model wrote is not
 * an error. Never NULL. harmony's calls are in its tokens, not its text
 * (harmony_read.h): empty here. */
cJSON *chat_parse_tool_calls(chat_family f, const char *text, size_t len);
/* v as Python's json.dumps(v, ensure_ascii=False, indent=indent) writes it
 * (indent < 0: none), which is what HF templates' tojson gives. */
void chat_json_dumps(const cJSON *v, int indent, strbuf *out);
/* Renders the tools block of the chatml family's system turn. */
void chat_render_chatml_tools(const chat_template *t, const char *system, strbuf *out);
/* Renders llama3's first user turn offering the tools, with content first_user. */
void chat_render_llama3_tools(const chat_template *t, const char *first_user, strbuf *out);

/* ---- harmony (harmony.c) ----------------------------------------------------- */

/* The whole conversation as gpt-oss's template renders it. */
int chat_render_harmony(const chat_template *t, const cJSON *messages, bool add_generation_prompt, strbuf *out,
                        gerr *e);
/* Messages [from, n) as harmony renders them in a conversation that goes on
 * (assistant messages closed with <|end|>); *last_call is the name of the
 * tool a tool message answers (updated by assistant messages that call one). */
int chat_render_harmony_messages(const chat_template *t, const cJSON *messages, int from, const char **last_call,
                                 strbuf *out, gerr *e);
/* The "functions" namespace of the developer message (t->tools). */
void chat_render_harmony_tools(const chat_template *t, strbuf *out);

#endif
