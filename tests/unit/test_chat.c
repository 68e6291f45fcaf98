/* Chat templates: family detection, the default system message read from the
 * template, and the exact text of each family. With GRPO_CHAT_TEMPLATE (a
 * Jinja file), GRPO_CHAT_MESSAGES (JSONL, one messages array per line) and
 * GRPO_CHAT_OUT it renders every line (without, then with the generation
 * prompt) as JSON strings for tests/ref/check_chat.py to compare with Jinja. */
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
    CHECK_EQ_INT(chat_family_parse("llama3", &f, &e), 0);
    CHECK_EQ_INT(f, CHAT_LLAMA3);
    return check_done();
}
