/* Chat templates: family detection, the default system message read from the
 * template, and the exact text of each family. With GRPO_CHAT_TEMPLATE (a
 * Jinja file), GRPO_CHAT_MESSAGES (JSONL, one messages array per line) and
 * GRPO_CHAT_OUT it renders every line (without, then with the generation
 * prompt) as JSON strings for tests/ref/check_chat.py to compare with Jinja;
 * GRPO_CHAT_REASONING, GRPO_CHAT_DATE (harmony's options) and GRPO_CHAT_TOOLS
 * (a file of tool schemas) when set. */
#include <stdlib.h>

#include "chat/chat.h"
#include "io/mapped.h"
#include "check.h"

static char *render(const chat_template *t, const char *messages_json, bool gen) {
    cJSON *m = cJSON_Parse(messages_json);
    strbuf out = {0};
    gerr e = {0};
    int rc = chat_render(t, m, gen, &out, &e);
    cJSON_Delete(m);
    if (rc) {
        sb_free(&out);
        return strdup(e.msg);
    }
    return out.data ? out.data : strdup("");
}

static int driver(const char *template_path, const char *messages_path, const char *out_path, const char *force) {
    char *jinja = read_whole_file(template_path, NULL, NULL), *lines = read_whole_file(messages_path, NULL, NULL);
    FILE *out = fopen(out_path, "w");
    if (!jinja || !lines || !out) return 2;
    chat_template t;
    gerr e = {0};
    if (force && *force) {
        chat_family f;
        if (chat_family_parse(force, &f, &e)) return 2;
        chat_template_force(f, jinja, &t);
    } else if (chat_template_detect(jinja, template_path, &t, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 2;
    }
    const char *tools_path = getenv("GRPO_CHAT_TOOLS");
    char *tools_text = tools_path ? read_whole_file(tools_path, NULL, NULL) : NULL;
    cJSON *tools = tools_text ? cJSON_Parse(tools_text) : NULL;
    if (chat_set_harmony(&t, getenv("GRPO_CHAT_REASONING"), getenv("GRPO_CHAT_DATE"), &e) ||
        (tools && chat_set_tools(&t, tools, &e))) {
        fprintf(stderr, "%s\n", e.msg);
        return 2;
    }
    for (char *line = strtok(lines, "\n"); line; line = strtok(NULL, "\n")) {
        for (int gen = 0; gen < 2; gen++) {
            char *s = render(&t, line, gen);
            strbuf j = {0};
            sb_json_string(&j, s, strlen(s));
            fprintf(out, "%s\n", j.data);
            sb_free(&j);
            free(s);
        }
    }
    chat_template_free(&t);
    fclose(out);
    cJSON_Delete(tools);
    free(tools_text);
    free(jinja);
    free(lines);
    return 0;
}

int main(void) {
    const char *tp = getenv("GRPO_CHAT_TEMPLATE");
    if (tp) return driver(tp, getenv("GRPO_CHAT_MESSAGES"), getenv("GRPO_CHAT_OUT"), getenv("GRPO_CHAT_FORCE"));

    gerr e;
    chat_template t;
    const char *smol = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
                       "{{ '<|im_start|>system\\nYou are a helper<|im_end|>\\n' }}{% endif %}"
                       "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
                       "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

    TEST("ChatML is recognised and its default system message read from the template");
    CHECK_EQ_INT(chat_template_detect(smol, "t", &t, &e), 0);
    CHECK_EQ_INT(t.family, CHAT_CHATML);
    CHECK_EQ_STR(t.default_system, "You are a helper");

    TEST("ChatML text, with and without the default system message");
    {
        char *s = render(&t, "[{\"role\":\"user\",\"content\":\"Hi\"}]", true);
        CHECK_EQ_STR(s, "<|im_start|>system\nYou are a helper<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                        "<|im_start|>assistant\n");
        free(s);
        s = render(&t, "[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\" x \"}]", false);
        CHECK_EQ_STR(s, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\n x <|im_end|>\n");
        free(s);
    }
    chat_template_free(&t);

    TEST("a system message built from the conversation is not a default");
    CHECK_EQ_INT(chat_template_detect("{{ '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>' }}", "t", &t, &e), 0);
    CHECK(t.default_system == NULL);
    chat_template_free(&t);

    TEST("Llama 3 text: header per message, content trimmed, 3.1 date header");
    CHECK_EQ_INT(chat_template_detect("{{ '<|start_header_id|>' }}", "t", &t, &e), 0);
    CHECK_EQ_INT(t.family, CHAT_LLAMA3);
    {
        char *s = render(&t, "[{\"role\":\"user\",\"content\":\" Hi \\n\"}]", true);
        CHECK_EQ_STR(s, "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                        "<|start_header_id|>assistant<|end_header_id|>\n\n");
        free(s);
    }
    chat_template_force(CHAT_LLAMA3, "Cutting Knowledge Date", &t);
    {
        char *s = render(&t, "[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"Q\"}]", false);
        CHECK_EQ_STR(s, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: "
                        "December 2023\nToday Date: 26 Jul 2024\n\nBe brief.<|eot_id|><|start_header_id|>user"
                        "<|end_header_id|>\n\nQ<|eot_id|>");
        free(s);
    }

    TEST("raw joins the contents with no special tokens");
    chat_template_force(CHAT_RAW, NULL, &t);
    {
        char *s = render(&t, "[{\"role\":\"system\",\"content\":\"a \"},{\"role\":\"user\",\"content\":\"b\"}]", true);
        CHECK_EQ_STR(s, "a b");
        free(s);
    }

    TEST("unrecognised or missing templates name the flag; bad messages are data errors");
    CHECK_EQ_INT(chat_template_detect("{{ messages }}", "model/tokenizer_config.json", &t, &e), EX_DATAERR);
    CHECK(strstr(e.msg, "model/tokenizer_config.json: chat template not recognised") == e.msg);
    CHECK(strstr(e.msg, "--chat-template") != NULL);
    CHECK_EQ_INT(chat_template_detect(NULL, "m.gguf", &t, &e), EX_DATAERR);
    CHECK(strstr(e.msg, "--chat-template") != NULL);
    chat_template_force(CHAT_CHATML, NULL, &t);
    {
        char *s = render(&t, "[{\"role\":\"user\",\"content\":5}]", true);
        CHECK(strstr(s, "message 0") != NULL);
        free(s);
    }
    chat_family f;
    CHECK_EQ_INT(chat_family_parse("jinja", &f, &e), EX_USAGE);
    CHECK_EQ_STR(e.msg, "--chat-template: expected chatml, llama3, harmony or raw, got 'jinja'");
    CHECK_EQ_INT(chat_family_parse("llama3", &f, &e), 0);
    CHECK_EQ_INT(f, CHAT_LLAMA3);
    CHECK_EQ_INT(chat_family_parse("harmony", &f, &e), 0);
    CHECK_EQ_INT(f, CHAT_HARMONY);

    /* gpt-oss's: the harmony guide's messages, as its chat_template.jinja writes them */
    static const char SYS[] = "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
                              "Knowledge cutoff: 2024-06\nCurrent date: 2025-06-28\n\nReasoning: medium\n\n"
                              "# Valid channels: analysis, commentary, final. Channel must be included for every "
                              "message.<|end|>";
    TEST("harmony is recognised by gpt-oss's tokens; system message, user turn, generation prompt");
    CHECK_EQ_INT(chat_template_detect("{{- \"<|start|>system<|message|>\" }}{%- if x %}<|channel|>{% endif %}", "t", &t,
                                      &e), 0);
    CHECK_EQ_INT(t.family, CHAT_HARMONY);
    {
        char *s = render(&t, "[{\"role\":\"user\",\"content\":\"What is 2 + 2?\"}]", true);
        char want[1024];
        snprintf(want, sizeof want, "%s<|start|>user<|message|>What is 2 + 2?<|end|><|start|>assistant", SYS);
        CHECK_EQ_STR(s, want);
        free(s);
    }

    TEST("harmony: the system message is the developer's instructions; reasoning level and date set");
    CHECK_EQ_INT(chat_set_harmony(&t, "high", "2026-02-28", &e), 0);
    {
        char *s = render(&t, "[{\"role\":\"system\",\"content\":\"Answer in riddles.\"},"
                             "{\"role\":\"user\",\"content\":\"Q\"}]", true);
        CHECK(strstr(s, "Current date: 2026-02-28\n\nReasoning: high\n\n# Valid channels") != NULL);
        CHECK(strstr(s, "message.<|end|><|start|>developer<|message|># Instructions\n\nAnswer in riddles.\n\n<|end|>"
                        "<|start|>user<|message|>Q<|end|><|start|>assistant") != NULL);
        free(s);
        s = render(&t, "[{\"role\":\"system\",\"content\":\"\"},{\"role\":\"user\",\"content\":\"Q\"}]", true);
        CHECK(strstr(s, "developer") == NULL); /* an empty system message: no developer message */
        free(s);
    }
    chat_template_force(CHAT_HARMONY, NULL, &t);

    TEST("harmony: past answers keep their final channel; a closing answer its reasoning and <|return|>");
    {
        const char *conv = "[{\"role\":\"user\",\"content\":\"Q\"},{\"role\":\"assistant\",\"content\":\"A\","
                           "\"thinking\":\"T\"},{\"role\":\"user\",\"content\":\"Q2\"},"
                           "{\"role\":\"assistant\",\"content\":\"B\",\"thinking\":\"U\"}]";
        char *s = render(&t, conv, false), want[1024];
        snprintf(want, sizeof want,
                 "%s<|start|>user<|message|>Q<|end|><|start|>assistant<|channel|>final<|message|>A<|end|>"
                 "<|start|>user<|message|>Q2<|end|><|start|>assistant<|channel|>analysis<|message|>U<|end|>"
                 "<|start|>assistant<|channel|>final<|message|>B<|return|>",
                 SYS);
        CHECK_EQ_STR(s, want);
        free(s);
        s = render(&t, conv, true); /* the conversation goes on: every answer is a past one */
        CHECK(strstr(s, "<|channel|>final<|message|>B<|end|><|start|>assistant") != NULL);
        CHECK(strstr(s, "<|channel|>analysis") == NULL);
        free(s);
    }

    TEST("harmony: a tool call and its result on the commentary channel, named after the call");
    {
        const char *conv = "[{\"role\":\"user\",\"content\":\"6*7?\"},{\"role\":\"assistant\",\"content\":\"\","
                           "\"thinking\":\"Use calc.\",\"tool_calls\":[{\"type\":\"function\",\"function\":"
                           "{\"name\":\"calc\",\"arguments\":{\"expr\":\"6*7\"}}}]},{\"role\":\"tool\",\"content\":\"42\"}]";
        char *s = render(&t, conv, true);
        CHECK(strstr(s, "<|start|>user<|message|>6*7?<|end|><|start|>assistant<|channel|>analysis<|message|>Use calc."
                        "<|end|><|start|>assistant to=functions.calc<|channel|>commentary json<|message|>"
                        "{\"expr\": \"6*7\"}<|call|><|start|>functions.calc to=assistant<|channel|>commentary"
                        "<|message|>\"42\"<|end|><|start|>assistant") != NULL);
        free(s);
    }

    TEST("harmony refuses what gpt-oss's template refuses: channel markup in a message, a result with no call");
    {
        char *s = render(&t, "[{\"role\":\"assistant\",\"content\":\"<|channel|>final<|message|>4\"}]", true);
        CHECK_EQ_STR(s, "field \"messages\": message 0: \"content\" holds harmony channel markup; give the reasoning "
                        "as \"thinking\" and the answer as \"content\"");
        free(s);
        s = render(&t, "[{\"role\":\"user\",\"content\":\"Q\"},{\"role\":\"tool\",\"content\":\"1\"}]", true);
        CHECK_EQ_STR(s, "field \"messages\": message 1: a tool message answers no tool call (harmony names the tool "
                        "from the assistant's call)");
        free(s);
    }

    TEST("harmony options: checked, and refused for another family");
    CHECK_EQ_INT(chat_set_harmony(&t, "max", NULL, &e), EX_USAGE);
    CHECK_EQ_STR(e.msg, "--reasoning-effort: expected low, medium or high, got 'max'");
    CHECK_EQ_INT(chat_set_harmony(&t, NULL, "2025-02-29", &e), EX_USAGE);
    CHECK_EQ_STR(e.msg, "--chat-date: expected a date YYYY-MM-DD or today, got '2025-02-29'");
    CHECK_EQ_INT(chat_set_harmony(&t, NULL, "2024-02-29", &e), 0);
    CHECK_EQ_STR(t.date, "2024-02-29");
    CHECK_EQ_INT(chat_set_harmony(&t, NULL, "24-02-29", &e), EX_USAGE);
    CHECK_EQ_INT(chat_set_harmony(&t, NULL, "today", &e), 0);
    CHECK_EQ_INT((int)strlen(t.date), 10);
    chat_template_force(CHAT_CHATML, NULL, &t);
    CHECK_EQ_INT(chat_set_harmony(&t, NULL, NULL, &e), 0);
    CHECK_EQ_INT(chat_set_harmony(&t, "low", NULL, &e), EX_USAGE);
    CHECK_EQ_STR(e.msg, "--reasoning-effort: only the harmony chat template (gpt-oss) has it; this one is chatml");
    return check_done();
}
