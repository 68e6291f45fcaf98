/* lib/chat/tools.c: tool calls parsed from an assistant's text per family,
 * JSON written as Python's json.dumps writes it (what HF templates' tojson
 * gives), the tools blocks and continuations. The whole-conversation
 * equality with transformers is checked by tests/bats/rollout_env.bats. */
#include <stdlib.h>

#include "chat/chat.h"
#include "check.h"

static char *calls_of(chat_family f, const char *text) {
    cJSON *calls = chat_parse_tool_calls(f, text, strlen(text));
    char *s = cJSON_PrintUnformatted(calls);
    cJSON_Delete(calls);
    return s;
}

static char *dumps(const char *json, int indent) {
    cJSON *v = cJSON_Parse(json);
    strbuf out = {0};
    chat_json_dumps(v, indent, &out);
    cJSON_Delete(v);
    return out.data;
}

static char *continuation_after(const chat_template *t, const char *messages, bool closed, const char *calls_json) {
    cJSON *m = cJSON_Parse(messages), *calls = calls_json ? cJSON_Parse(calls_json) : NULL;
    strbuf out = {0};
    gerr e = {0};
    int rc = chat_render_continuation(t, m, closed, calls, &out, &e);
    cJSON_Delete(m);
    cJSON_Delete(calls);
    if (rc) {
        sb_free(&out);
        return strdup(e.msg);
    }
    return out.data;
}

static char *continuation(const chat_template *t, const char *messages, bool closed) {
    return continuation_after(t, messages, closed, NULL);
}

int main(void) {
    char *s;
    TEST("chatml: every <tool_call> block with name and arguments; malformed ones are left out");
    s = calls_of(CHAT_CHATML, "Let me compute.\n<tool_call>\n{\"name\": \"calc\", \"arguments\": {\"expr\": \"6*7\"}}\n"
                              "</tool_call>\n<tool_call>{\"name\": \"search\", \"arguments\": \"{\\\"q\\\": 1}\"}"
                              "</tool_call><tool_call>{not json}</tool_call><tool_call>{\"arguments\": {}}</tool_call>");
    CHECK_EQ_STR(s, "[{\"name\":\"calc\",\"arguments\":{\"expr\":\"6*7\"}},{\"name\":\"search\",\"arguments\":{\"q\":1}}]");
    free(s);
    s = calls_of(CHAT_CHATML, "no calls here {\"name\": \"calc\"}");
    CHECK_EQ_STR(s, "[]");
    free(s);
    s = calls_of(CHAT_CHATML, "<tool_call>{\"name\": \"calc\"}"); /* cut off by --max-new-tokens after the JSON */
    CHECK_EQ_STR(s, "[{\"name\":\"calc\",\"arguments\":{}}]");
    free(s);

    TEST("llama3: a message of JSON objects with name and parameters (or arguments), after <|python_tag|>");
    s = calls_of(CHAT_LLAMA3, "  {\"name\": \"calc\", \"parameters\": {\"expr\": \"1+1\"}}; {\"name\": \"b\", "
                              "\"arguments\": {\"x\": [1, 2]}}\n");
    CHECK_EQ_STR(s, "[{\"name\":\"calc\",\"arguments\":{\"expr\":\"1+1\"}},{\"name\":\"b\",\"arguments\":{\"x\":[1,2]}}]");
    free(s);
    s = calls_of(CHAT_LLAMA3, "<|python_tag|>{\"name\": \"calc\", \"parameters\": {}}");
    CHECK_EQ_STR(s, "[{\"name\":\"calc\",\"arguments\":{}}]");
    free(s);
    s = calls_of(CHAT_LLAMA3, "The answer is {\"name\": \"calc\"}"); /* prose first: not a call */
    CHECK_EQ_STR(s, "[]");
    free(s);
    s = calls_of(CHAT_LLAMA3, "{\"name\": 3, \"parameters\": {}}");
    CHECK_EQ_STR(s, "[]");
    free(s);

    TEST("json.dumps: separators, key order, non-ASCII kept, escapes, indent 4");
    /* expected strings are what Python 3's json.dumps(v, ensure_ascii=False[, indent=4]) prints */
    s = dumps("{\"b\": [1, 2.5, true, null], \"a\": {\"q\\\"\": \"caf\\u00e9\\n\"}, \"e\": [], \"o\": {}}", -1);
    CHECK_EQ_STR(s, "{\"b\": [1, 2.5, true, null], \"a\": {\"q\\\"\": \"caf\xc3\xa9\\n\"}, \"e\": [], \"o\": {}}");
    free(s);
    s = dumps("{\"a\": [1, {\"b\": \"x\"}], \"e\": []}", 4);
    CHECK_EQ_STR(s, "{\n    \"a\": [\n        1,\n        {\n            \"b\": \"x\"\n        }\n    ],\n    \"e\": []\n}");
    free(s);

    TEST("chatml continuation: closes the turn when its end token was not sampled; tool results in one user turn");
    chat_template t = {.family = CHAT_CHATML, .chatml_tool_response = true};
    const char *msgs = "[{\"role\": \"tool\", \"content\": \"42\"}, {\"role\": \"tool\", \"content\": \"7\"}, "
                       "{\"role\": \"user\", \"content\": \"ok?\"}]";
    s = continuation(&t, msgs, true);
    CHECK_EQ_STR(s, "\n<|im_start|>user\n<tool_response>\n42\n</tool_response>\n<tool_response>\n7\n</tool_response>"
                    "<|im_end|>\n<|im_start|>user\nok?<|im_end|>\n<|im_start|>assistant\n");
    free(s);
    t.chatml_tool_response = false; /* a template without tool responses: a plain "tool" turn */
    s = continuation(&t, "[{\"role\": \"tool\", \"content\": \"42\"}]", false);
    CHECK_EQ_STR(s, "<|im_end|>\n<|im_start|>tool\n42<|im_end|>\n<|im_start|>assistant\n");
    free(s);

    TEST("llama3 continuation: 3.1 puts tool results in an ipython turn as a JSON string; user content trimmed");
    chat_template l = {.family = CHAT_LLAMA3, .llama31_header = true};
    s = continuation(&l, "[{\"role\": \"tool\", \"content\": \"x \\\"y\\\"\"}, {\"role\": \"user\", \"content\": \" hi \"}]",
                     false);
    CHECK_EQ_STR(s, "<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n\"x \\\"y\\\"\"<|eot_id|>"
                    "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|><|start_header_id|>assistant"
                    "<|end_header_id|>\n\n");
    free(s);
    chat_template raw = {.family = CHAT_RAW};
    s = continuation(&raw, "[{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"tool\", \"content\": \"b\"}]", true);
    CHECK_EQ_STR(s, "ab");
    free(s);
    s = continuation(&l, "[{\"role\": \"user\"}]", true);
    CHECK_EQ_STR(s, "field \"messages\": message 0: expected {\"role\": string, \"content\": string}");
    free(s);

    TEST("harmony continuation: <|end|> when no <|return|> or <|call|> closed the turn; results named after the call");
    chat_template h;
    chat_template_force(CHAT_HARMONY, NULL, &h);
    s = continuation_after(&h, "[{\"role\": \"tool\", \"content\": \"42\"}]", true,
                           "[{\"name\": \"calc\", \"arguments\": {\"expr\": \"6*7\"}}]");
    CHECK_EQ_STR(s, "<|start|>functions.calc to=assistant<|channel|>commentary<|message|>\"42\"<|end|><|start|>assistant");
    free(s);
    s = continuation(&h, "[{\"role\": \"user\", \"content\": \" higher \"}]", false);
    CHECK_EQ_STR(s, "<|end|><|start|>user<|message|> higher <|end|><|start|>assistant");
    free(s);
    s = continuation(&h, "[{\"role\": \"tool\", \"content\": \"42\"}]", true); /* the turn called nothing */
    CHECK_EQ_STR(s, "field \"messages\": message 0: a tool message answers no tool call (harmony names the tool from "
                    "the assistant's call)");
    free(s);
    s = calls_of(CHAT_HARMONY, "<tool_call>{\"name\": \"calc\", \"arguments\": {}}</tool_call>");
    CHECK_EQ_STR(s, "[]"); /* harmony's calls are in its tokens (harmony_read.h), never in text */
    free(s);

    TEST("tools in the prompt: Qwen2.5's system block (default system kept), Llama 3.1's first user turn");
    cJSON *tools = cJSON_Parse("[{\"type\": \"function\", \"function\": {\"name\": \"calc\"}}]");
    gerr e = {0};
    chat_template q = {.family = CHAT_CHATML, .default_system = "Sys."};
    CHECK_EQ_INT(chat_set_tools(&q, tools, &e), 0);
    cJSON *conv = cJSON_Parse("[{\"role\": \"user\", \"content\": \"hi\"}]");
    strbuf out = {0};
    CHECK_EQ_INT(chat_render(&q, conv, true, &out, &e), 0);
    CHECK_EQ_STR(out.data, "<|im_start|>system\nSys.\n\n# Tools\n\nYou may call one or more functions to assist with "
                           "the user query.\n\nYou are provided with function signatures within <tools></tools> XML "
                           "tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"calc\"}}\n</tools>\n\n"
                           "For each function call, return a json object with function name and arguments within "
                           "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
                           "\"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nhi"
                           "<|im_end|>\n<|im_start|>assistant\n");
    sb_clear(&out);
    CHECK_EQ_INT(chat_set_tools(&l, tools, &e), 0);
    CHECK_EQ_INT(chat_render(&l, conv, true, &out, &e), 0);
    CHECK(strstr(out.data, "<|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge"));
    CHECK(strstr(out.data, "value}.Do not use variables.\n\n{\n    \"type\": \"function\",\n    \"function\": {\n"
                           "        \"name\": \"calc\"\n    }\n}\n\nhi<|eot_id|><|start_header_id|>assistant"));
    sb_free(&out);
    TEST("harmony's tools: the functions namespace in the developer message, the system message's call line");
    CHECK_EQ_INT(chat_set_tools(&h, tools, &e), EX_DATAERR); /* gpt-oss's template needs a description */
    CHECK_EQ_STR(e.msg, "element 0: gpt-oss's template needs a \"description\" string");
    cJSON *described = cJSON_Parse("[{\"type\": \"function\", \"function\": {\"name\": \"calc\", \"description\": "
                                   "\"Evaluates.\", \"parameters\": {\"type\": \"object\", \"properties\": {\"expr\": "
                                   "{\"type\": \"string\", \"description\": \"the expression\"}, \"digits\": {\"type\": "
                                   "\"integer\", \"default\": 2}}, \"required\": [\"expr\"]}}}]");
    CHECK_EQ_INT(chat_set_tools(&h, described, &e), 0);
    CHECK_EQ_INT(chat_render(&h, conv, true, &out, &e), 0);
    CHECK(strstr(out.data, "every message.\nCalls to these tools must go to the commentary channel: 'functions'.<|end|>"
                           "<|start|>developer<|message|># Tools\n\n## functions\n\nnamespace functions {\n\n"
                           "// Evaluates.\ntype calc = (_: {\n// the expression\nexpr: string,\ndigits?: number, // "
                           "default: 2,\n}) => any;\n\n} // namespace functions<|end|><|start|>user<|message|>hi<|end|>"
                           "<|start|>assistant"));
    sb_free(&out);
    cJSON_Delete(described);
    cJSON *not_array = cJSON_Parse("{\"name\": \"calc\"}");
    CHECK_EQ_INT(chat_set_tools(&q, not_array, &e), EX_DATAERR);
    cJSON_Delete(not_array);
    cJSON_Delete(conv);
    cJSON_Delete(tools);

    return check_done();
}
