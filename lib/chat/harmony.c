/* harmony, gpt-oss's chat format, rendered as gpt-oss's own chat template
 * (chat_template.jinja of openai/gpt-oss-20b and -120b) renders it; the
 * format itself is OpenAI's harmony guide (github.com/openai/harmony,
 * docs/format.md). tests/ref/check_chat.py compares this with that
 * template run by Jinja. formats/env.md has the table of what is written.
 *
 * A message is <|start|>HEADER<|message|>CONTENT<|end|>. The conversation
 * opens with a system message (identity, knowledge cutoff, date, reasoning
 * level, the valid channels), then a developer message holding the
 * conversation's own system message ("# Instructions") and the tools; the
 * assistant's messages carry a channel: "analysis" (its reasoning),
 * "commentary" (tool calls), "final" (the answer). Past assistant messages
 * keep their final message only, as the template drops their reasoning;
 * the last one, in a conversation that does not go on, keeps its
 * "thinking" as an analysis message and ends with <|return|>. */
#include <string.h>

#include "chat.h"

static const char IDENTITY[] = "You are ChatGPT, a large language model trained by OpenAI.";
static const char CUTOFF[] = "2024-06";

static bool has_tools(const chat_template *t) { return t->tools && cJSON_GetArraySize(t->tools) > 0; }

/* Jinja's truthiness of a JSON value: null, false, 0, "", [] and {} are false. */
static bool truthy(const cJSON *v) {
    if (!v || cJSON_IsNull(v) || cJSON_IsFalse(v)) return false;
    if (cJSON_IsNumber(v)) return v->valuedouble != 0;
    if (cJSON_IsString(v)) return v->valuestring[0] != 0;
    if (cJSON_IsArray(v) || cJSON_IsObject(v)) return v->child != NULL;
    return true;
}

static const cJSON *get(const cJSON *obj, const char *key) { return cJSON_GetObjectItemCaseSensitive(obj, key); }

static bool type_is(const cJSON *spec, const char *type) {
    const cJSON *t = get(spec, "type");
    return cJSON_IsString(t) && !strcmp(t->valuestring, type);
}

/* A value as Jinja's string conversion writes it (Python's str()). */
static void put_str(const cJSON *v, strbuf *out) {
    if (cJSON_IsString(v)) sb_puts(out, v->valuestring);
    else if (cJSON_IsBool(v)) sb_puts(out, cJSON_IsTrue(v) ? "True" : "False");
    else if (!v || cJSON_IsNull(v)) sb_puts(out, "None");
    else chat_json_dumps(v, -1, out);
}

static void put_list(const cJSON *arr, const char *sep, strbuf *out) {
    const cJSON *v;
    bool first = true;
    cJSON_ArrayForEach(v, arr) {
        if (!first) sb_puts(out, sep);
        first = false;
        put_str(v, out);
    }
}

static bool listed(const cJSON *arr, const char *name) {
    const cJSON *v;
    cJSON_ArrayForEach(v, arr) if (cJSON_IsString(v) && !strcmp(v->valuestring, name)) return true;
    return false;
}

/* The template's render_typescript_type: a JSON schema as a TypeScript-like
 * type, with its white space (a nested object's members after "\n" and 16
 * spaces, the union of a oneOf split by " | \n"). */
static void ts_type(const cJSON *spec, strbuf *out) {
    const cJSON *type = get(spec, "type");
    if (type_is(spec, "array")) {
        const cJSON *items = get(spec, "items");
        if (!truthy(items)) {
            sb_puts(out, "any[]");
        } else if (type_is(items, "string")) {
            sb_puts(out, "string[]");
        } else if (type_is(items, "number") || type_is(items, "integer")) {
            sb_puts(out, "number[]");
        } else if (type_is(items, "boolean")) {
            sb_puts(out, "boolean[]");
        } else {
            strbuf inner = {0};
            ts_type(items, &inner);
            const char *s = inner.data ? inner.data : "";
            sb_puts(out, !strcmp(s, "object | object") || strlen(s) > 50 ? "any" : s);
            sb_puts(out, "[]");
            sb_free(&inner);
        }
        if (truthy(get(spec, "nullable"))) sb_puts(out, " | null");
    } else if (cJSON_IsArray(type) && type->child) {
        put_list(type, " | ", out);
    } else if (truthy(get(spec, "oneOf"))) {
        /* the template's has_object_variants is set inside a for loop, which
         * Jinja scopes: it stays false, and every oneOf is written out */
        const cJSON *variant;
        cJSON_ArrayForEach(variant, get(spec, "oneOf")) {
            ts_type(variant, out);
            const cJSON *d = get(variant, "description");
            if (truthy(d)) {
                sb_puts(out, "// ");
                put_str(d, out);
            }
            if (get(variant, "default")) {
                sb_puts(out, "                    // default: ");
                chat_json_dumps(get(variant, "default"), -1, out);
            }
            if (variant->next) sb_puts(out, " | \n");
        }
    } else if (type_is(spec, "string")) {
        if (truthy(get(spec, "enum"))) {
            sb_putc(out, '"');
            put_list(get(spec, "enum"), "\" | \"", out);
            sb_putc(out, '"');
        } else {
            sb_puts(out, "string");
            if (truthy(get(spec, "nullable"))) sb_puts(out, " | null");
        }
    } else if (type_is(spec, "number") || type_is(spec, "integer")) {
        sb_puts(out, "number");
    } else if (type_is(spec, "boolean")) {
        sb_puts(out, "boolean");
    } else if (type_is(spec, "object")) {
        const cJSON *props = get(spec, "properties"), *required = get(spec, "required"), *p;
        if (!truthy(props)) {
            sb_puts(out, "object");
            return;
        }
        sb_puts(out, "{\n");
        cJSON_ArrayForEach(p, props) {
            sb_puts(out, p->string);
            if (!listed(required, p->string)) sb_putc(out, '?');
            sb_puts(out, ": \n                ");
            ts_type(p, out);
            if (p->next) sb_puts(out, ", ");
        }
        sb_putc(out, '}');
    } else {
        sb_puts(out, "any");
    }
}

void chat_render_harmony_tools(const chat_template *t, strbuf *out) {
    sb_puts(out, "## functions\n\nnamespace functions {\n\n");
    const cJSON *tool;
    cJSON_ArrayForEach(tool, t->tools) {
        const cJSON *fn = get(tool, "function");
        if (!fn) fn = tool;
        const cJSON *params = get(fn, "parameters"), *props = get(params, "properties");
        sb_puts(out, "// ");
        put_str(get(fn, "description"), out);
        sb_puts(out, "\ntype ");
        put_str(get(fn, "name"), out);
        sb_puts(out, " = ");
        if (!truthy(params) || !truthy(props)) {
            sb_puts(out, "() => any;\n\n");
            continue;
        }
        sb_puts(out, "(_: {\n");
        const cJSON *p;
        cJSON_ArrayForEach(p, props) {
            const cJSON *d = get(p, "description"), *dflt = get(p, "default");
            if (truthy(d)) {
                sb_puts(out, "// ");
                put_str(d, out);
                sb_putc(out, '\n');
            }
            sb_puts(out, p->string);
            if (!listed(get(params, "required"), p->string)) sb_putc(out, '?');
            sb_puts(out, ": ");
            ts_type(p, out);
            if (dflt) {
                bool quoted = !truthy(get(p, "enum")) && !truthy(get(p, "oneOf"));
                sb_puts(out, truthy(get(p, "oneOf")) && !truthy(get(p, "enum")) ? "// default: " : ", // default: ");
                if (quoted) chat_json_dumps(dflt, -1, out);
                else put_str(dflt, out);
            }
            sb_puts(out, ",\n");
        }
        sb_puts(out, "}) => any;\n\n");
    }
    sb_puts(out, "} // namespace functions");
}

static void render_head(const chat_template *t, const char *instructions, strbuf *out) {
    sb_printf(out, "<|start|>system<|message|>%s\nKnowledge cutoff: %s\nCurrent date: %s\n\nReasoning: %s\n\n",
              IDENTITY, CUTOFF, t->date, t->reasoning);
    sb_puts(out, "# Valid channels: analysis, commentary, final. Channel must be included for every message.");
    if (has_tools(t)) sb_puts(out, "\nCalls to these tools must go to the commentary channel: 'functions'.");
    sb_puts(out, "<|end|>");
    bool dev = instructions && *instructions;
    if (!dev && !has_tools(t)) return;
    sb_puts(out, "<|start|>developer<|message|>");
    if (dev) {
        sb_puts(out, "# Instructions\n\n");
        sb_puts(out, instructions);
        sb_puts(out, "\n\n");
    }
    if (has_tools(t)) {
        sb_puts(out, "# Tools\n\n");
        chat_render_harmony_tools(t, out);
    }
    sb_puts(out, "<|end|>");
}

static void analysis(const char *text, strbuf *out) {
    sb_puts(out, "<|start|>assistant<|channel|>analysis<|message|>");
    sb_puts(out, text);
    sb_puts(out, "<|end|>");
}

/* The template refuses channel markup inside a message's text: the
 * reasoning goes in "thinking", the answer in "content". */
static int check_markup(const char *s, int i, const char *field, gerr *e) {
    if (strstr(s, "<|channel|>analysis<|message|>") || strstr(s, "<|channel|>final<|message|>"))
        return gerr_set(e, EX_DATAERR,
                        "field \"messages\": message %d: \"%s\" holds harmony channel markup; give the reasoning as "
                        "\"thinking\" and the answer as \"content\"",
                        i, field);
    return 0;
}

/* An assistant message that calls a tool (its first call, as the template
 * does): its reasoning unless a later assistant message answers, then the
 * call on the commentary channel. */
static int render_call(const cJSON *messages, int i, const char *content, const char *thinking, const char **last_call,
                       strbuf *out, gerr *e) {
    const cJSON *m = cJSON_GetArrayItem(messages, i);
    const cJSON *call = cJSON_GetArrayItem(get(m, "tool_calls"), 0);
    if (get(call, "function")) call = get(call, "function");
    const cJSON *name = get(call, "name"), *args = get(call, "arguments"), *ctype = get(call, "content_type");
    if (!cJSON_IsString(name) || !args)
        return gerr_set(e, EX_DATAERR,
                        "field \"messages\": message %d: \"tool_calls\": expected [{\"name\": string, \"arguments\": "
                        "...}] (or each under \"function\")",
                        i);
    if (*content && *thinking)
        return gerr_set(e, EX_DATAERR,
                        "field \"messages\": message %d: a message with tool calls has \"content\" and \"thinking\"; "
                        "harmony keeps one reasoning message",
                        i);
    bool answered = false; /* an assistant message without calls follows */
    for (const cJSON *next = m->next; next; next = next->next) {
        const cJSON *role = get(next, "role");
        if (cJSON_IsString(role) && !strcmp(role->valuestring, "assistant") && !get(next, "tool_calls"))
            answered = true;
    }
    if (!answered && (*content || *thinking)) analysis(*content ? content : thinking, out);
    sb_printf(out, "<|start|>assistant to=functions.%s<|channel|>commentary %s<|message|>", name->valuestring,
              cJSON_IsString(ctype) ? ctype->valuestring : "json");
    chat_json_dumps(args, -1, out);
    sb_puts(out, "<|call|>");
    *last_call = name->valuestring;
    return 0;
}

/* Messages [from, n); gen: a conversation that goes on, so the last
 * assistant message is a past one too. */
static int render_messages(const cJSON *messages, int from, bool gen, const char **last_call, strbuf *out, gerr *e) {
    int n = cJSON_GetArraySize(messages);
    for (int i = from; i < n; i++) {
        const char *role, *content;
        if (chat_message_at(messages, i, &role, &content, e)) return e->code;
        const cJSON *m = cJSON_GetArrayItem(messages, i);
        if (!strcmp(role, "user")) {
            sb_puts(out, "<|start|>user<|message|>");
            sb_puts(out, content);
            sb_puts(out, "<|end|>");
        } else if (!strcmp(role, "tool")) {
            if (!*last_call)
                return gerr_set(e, EX_DATAERR,
                                "field \"messages\": message %d: a tool message answers no tool call (harmony names "
                                "the tool from the assistant's call)",
                                i);
            sb_printf(out, "<|start|>functions.%s to=assistant<|channel|>commentary<|message|>", *last_call);
            sb_json_string(out, content, strlen(content));
            sb_puts(out, "<|end|>");
        } else if (!strcmp(role, "assistant")) {
            const cJSON *th = get(m, "thinking");
            if (th && !cJSON_IsString(th))
                return gerr_set(e, EX_DATAERR, "field \"messages\": message %d: \"thinking\": expected a string", i);
            const char *thinking = th ? th->valuestring : "";
            if (check_markup(content, i, "content", e) || check_markup(thinking, i, "thinking", e)) return e->code;
            if (get(m, "tool_calls")) {
                if (render_call(messages, i, content, thinking, last_call, out, e)) return e->code;
                continue;
            }
            bool closing = i == n - 1 && !gen; /* the conversation ends with this answer */
            if (closing && th) analysis(thinking, out);
            sb_puts(out, "<|start|>assistant<|channel|>final<|message|>");
            sb_puts(out, content);
            sb_puts(out, closing ? "<|return|>" : "<|end|>");
            if (!closing) *last_call = NULL;
        }
        /* any other role (a system message after the first) the template leaves out */
    }
    return 0;
}

int chat_render_harmony_messages(const chat_template *t, const cJSON *messages, int from, const char **last_call,
                                 strbuf *out, gerr *e) {
    (void)t; /* every harmony conversation is rendered alike but its head */
    return render_messages(messages, from, true, last_call, out, e);
}

int chat_render_harmony(const chat_template *t, const cJSON *messages, bool add_generation_prompt, strbuf *out,
                        gerr *e) {
    int n = cJSON_GetArraySize(messages), from = 0;
    const char *role, *content = NULL;
    if (n > 0) {
        if (chat_message_at(messages, 0, &role, &content, e)) return e->code;
        if (!strcmp(role, "system") || !strcmp(role, "developer")) from = 1;
    }
    render_head(t, from ? content : NULL, out);
    const char *last_call = NULL;
    if (render_messages(messages, from, add_generation_prompt, &last_call, out, e)) return e->code;
    if (add_generation_prompt) sb_puts(out, "<|start|>assistant");
    return 0;
}
