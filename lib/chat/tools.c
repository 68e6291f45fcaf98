/* Tool schemas in the prompt, tool calls parsed from the assistant's text
 * and the continuation of a conversation after an assistant turn, for
 * grpo-rollout --env / --tools (see chat.h). */
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "../io/json_scan.h"

static void indent_to(strbuf *out, int indent, int depth) {
    sb_putc(out, '\n');
    for (int i = 0; i < indent * depth; i++) sb_putc(out, ' ');
}

static void dumps(const cJSON *v, int indent, int depth, strbuf *out) {
    if (cJSON_IsString(v)) {
        sb_json_string(out, v->valuestring, strlen(v->valuestring));
    } else if (cJSON_IsNumber(v)) {
        sb_json_number(out, v->valuedouble);
    } else if (cJSON_IsBool(v)) {
        sb_puts(out, cJSON_IsTrue(v) ? "true" : "false");
    } else if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
        bool obj = cJSON_IsObject(v);
        sb_putc(out, obj ? '{' : '[');
        const cJSON *c;
        bool first = true;
        cJSON_ArrayForEach(c, v) {
            if (!first) sb_putc(out, ',');
            if (indent >= 0) indent_to(out, indent, depth + 1);
            else if (!first) sb_putc(out, ' ');
            first = false;
            if (obj) {
                sb_json_string(out, c->string, strlen(c->string));
                sb_puts(out, ": ");
            }
            dumps(c, indent, depth + 1, out);
        }
        if (!first && indent >= 0) indent_to(out, indent, depth);
        sb_putc(out, obj ? '}' : ']');
    } else {
        sb_puts(out, "null");
    }
}

void chat_json_dumps(const cJSON *v, int indent, strbuf *out) { dumps(v, indent, 0, out); }

int chat_set_tools(chat_template *t, const cJSON *tools, gerr *e) {
    if (!cJSON_IsArray(tools)) return gerr_set(e, EX_DATAERR, "expected a JSON array of tool schemas");
    int i = 0;
    const cJSON *tool;
    cJSON_ArrayForEach(tool, tools) {
        if (!cJSON_IsObject(tool)) return gerr_set(e, EX_DATAERR, "element %d: expected an object", i);
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tool, "function");
        const cJSON *description = cJSON_GetObjectItemCaseSensitive(fn ? fn : tool, "description");
        if (t->family == CHAT_HARMONY && !cJSON_IsString(description))
            return gerr_set(e, EX_DATAERR, "element %d: gpt-oss's template needs a \"description\" string", i);
        i++;
    }
    t->tools = tools;
    if (t->family == CHAT_CHATML) t->chatml_tool_response = true;
    return 0;
}

void chat_render_chatml_tools(const chat_template *t, const char *system, strbuf *out) {
    sb_puts(out, "<|im_start|>system\n");
    if (system) {
        sb_puts(out, system);
        sb_puts(out, "\n\n");
    }
    sb_puts(out, "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                 "You are provided with function signatures within <tools></tools> XML tags:\n<tools>");
    const cJSON *tool;
    cJSON_ArrayForEach(tool, t->tools) {
        sb_putc(out, '\n');
        chat_json_dumps(tool, -1, out);
    }
    sb_puts(out, "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
                 "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
                 "<args-json-object>}\n</tool_call><|im_end|>\n");
}

void chat_render_llama3_tools(const chat_template *t, const char *first_user, strbuf *out) {
    sb_puts(out, "<|start_header_id|>user<|end_header_id|>\n\n"
                 "Given the following functions, please respond with a JSON for a function call with its proper "
                 "arguments that best answers the given prompt.\n\nRespond in the format {\"name\": function name, "
                 "\"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n");
    const cJSON *tool;
    cJSON_ArrayForEach(tool, t->tools) {
        chat_json_dumps(tool, 4, out);
        sb_puts(out, "\n\n");
    }
    chat_append_trimmed(out, first_user);
    sb_puts(out, "<|eot_id|>");
}

int chat_render_continuation(const chat_template *t, const cJSON *messages, bool closed, const cJSON *calls,
                             strbuf *out, gerr *e) {
    if (!cJSON_IsArray(messages)) return gerr_set(e, EX_DATAERR, "\"messages\": expected an array");
    if (t->family == CHAT_HARMONY) { /* <|return|> and <|call|> close a turn; past one, the message is closed */
        if (!closed) sb_puts(out, "<|end|>");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(calls, cJSON_GetArraySize(calls) - 1),
                                                              "name");
        const char *last_call = cJSON_IsString(name) ? name->valuestring : NULL;
        if (chat_render_harmony_messages(t, messages, 0, &last_call, out, e)) return e->code;
        sb_puts(out, "<|start|>assistant");
        return 0;
    }
    switch (t->family) {
    case CHAT_RAW:
    case CHAT_HARMONY: break;
    case CHAT_CHATML: sb_puts(out, closed ? "\n" : "<|im_end|>\n"); break;
    case CHAT_LLAMA3:
        if (!closed) sb_puts(out, "<|eot_id|>");
        break;
    }
    if (chat_render_messages(t, messages, 0, out, e)) return e->code;
    if (t->family == CHAT_CHATML) sb_puts(out, "<|im_start|>assistant\n");
    if (t->family == CHAT_LLAMA3) sb_puts(out, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    return 0;
}

/* Appends {"name", "arguments"} to calls when obj is a call: a string
 * "name" and an object (or a string holding one) under one of the keys. */
static void add_call(cJSON *calls, const cJSON *obj, const char *key, const char *alt_key) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(obj, "name");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!args && alt_key) args = cJSON_GetObjectItemCaseSensitive(obj, alt_key);
    if (!cJSON_IsObject(obj) || !cJSON_IsString(name)) return;
    cJSON *parsed = NULL;
    if (cJSON_IsString(args)) args = parsed = cJSON_Parse(args->valuestring);
    if (args && !cJSON_IsObject(args)) {
        cJSON_Delete(parsed);
        return;
    }
    cJSON *call = cJSON_CreateObject();
    cJSON_AddStringToObject(call, "name", name->valuestring);
    cJSON_AddItemToObject(call, "arguments", args ? cJSON_Duplicate(args, true) : cJSON_CreateObject());
    cJSON_AddItemToArray(calls, call);
    cJSON_Delete(parsed);
}

static const char *skip_space(const char *p, const char *end) {
    while (p < end && json_is_space(*p)) p++;
    return p;
}

cJSON *chat_parse_tool_calls(chat_family f, const char *text, size_t len) {
    cJSON *calls = cJSON_CreateArray();
    const char *end = text + len;
    if (f == CHAT_HARMONY) return calls;
    if (f == CHAT_LLAMA3) { /* the whole message: JSON objects, one after another */
        const char *p = skip_space(text, end);
        static const char tag[] = "<|python_tag|>";
        if ((size_t)(end - p) >= sizeof tag - 1 && !memcmp(p, tag, sizeof tag - 1)) p += sizeof tag - 1;
        while ((p = skip_space(p, end)) < end && *p == '{') {
            const char *after = NULL;
            cJSON *obj = cJSON_ParseWithLengthOpts(p, (size_t)(end - p), &after, false);
            if (!obj) break;
            add_call(calls, obj, "parameters", "arguments");
            cJSON_Delete(obj);
            p = skip_space(after, end);
            if (p < end && *p == ';') p++;
        }
        return calls;
    }
    static const char open[] = "<tool_call>", close[] = "</tool_call>";
    for (const char *p = text; (p = memmem(p, (size_t)(end - p), open, sizeof open - 1));) {
        p += sizeof open - 1;
        const char *stop = memmem(p, (size_t)(end - p), close, sizeof close - 1);
        if (!stop) stop = end;
        cJSON *obj = cJSON_ParseWithLength(p, (size_t)(stop - p));
        if (obj) add_call(calls, obj, "arguments", NULL);
        cJSON_Delete(obj);
        p = stop;
    }
    return calls;
}
