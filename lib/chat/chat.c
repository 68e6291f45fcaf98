#include "chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int chat_family_parse(const char *name, chat_family *out, gerr *e) {
    if (!strcmp(name, "chatml")) *out = CHAT_CHATML;
    else if (!strcmp(name, "llama3")) *out = CHAT_LLAMA3;
    else if (!strcmp(name, "harmony")) *out = CHAT_HARMONY;
    else if (!strcmp(name, "raw")) *out = CHAT_RAW;
    else return gerr_set(e, EX_USAGE, "--chat-template: expected chatml, llama3, harmony or raw, got '%s'", name);
    return 0;
}

const char *chat_family_name(chat_family f) {
    static const char *const names[] = {"chatml", "llama3", "harmony", "raw"};
    return names[f];
}

/* The constant system message a ChatML template inserts when the conversation
 * has none: the text of a literal "<|im_start|>system\n...<|im_end|>" that
 * lies inside one Jinja string (no quote in it). The newline may be a real one
 * or the two characters \n of a Jinja escape. */
static char *find_default_system(const char *jinja) {
    static const char opener[] = "<|im_start|>system";
    for (const char *p = strstr(jinja, opener); p; p = strstr(p + 1, opener)) {
        const char *q = p + strlen(opener);
        if (*q == '\n') q++;
        else if (q[0] == '\\' && q[1] == 'n') q += 2;
        else continue;
        const char *end = strstr(q, "<|im_end|>");
        if (!end || end == q) continue;
        size_t n = (size_t)(end - q);
        if (memchr(q, '\'', n) || memchr(q, '"', n) || memchr(q, '{', n)) continue;
        strbuf b = {0};
        for (size_t i = 0; i < n; i++) { /* undo Jinja's string escapes */
            if (q[i] == '\\' && i + 1 < n) {
                char c = q[++i];
                sb_putc(&b, c == 'n' ? '\n' : c == 't' ? '\t' : c);
            } else {
                sb_putc(&b, q[i]);
            }
        }
        return b.data;
    }
    return NULL;
}

void chat_template_force(chat_family f, const char *jinja, chat_template *out) {
    memset(out, 0, sizeof *out);
    out->family = f;
    snprintf(out->reasoning, sizeof out->reasoning, "%s", CHAT_HARMONY_REASONING);
    snprintf(out->date, sizeof out->date, "%s", CHAT_HARMONY_DATE);
    if (!jinja) return;
    if (f == CHAT_CHATML && strstr(jinja, "<|im_start|>")) out->default_system = find_default_system(jinja);
    if (f == CHAT_LLAMA3) out->llama31_header = strstr(jinja, "Cutting Knowledge Date") != NULL;
    if (f == CHAT_CHATML) out->chatml_tool_response = strstr(jinja, "<tool_response>") != NULL;
}

int chat_template_detect(const char *jinja, const char *name_for_errors, chat_template *out, gerr *e) {
    memset(out, 0, sizeof *out);
    if (!jinja || !*jinja)
        return gerr_set(e, EX_DATAERR,
                        "%s: the model has no chat template; choose one with --chat-template chatml|llama3|harmony|raw",
                        name_for_errors);
    if (strstr(jinja, "<|im_start|>")) {
        chat_template_force(CHAT_CHATML, jinja, out);
    } else if (strstr(jinja, "<|start_header_id|>")) {
        chat_template_force(CHAT_LLAMA3, jinja, out);
    } else if (strstr(jinja, "<|channel|>") && strstr(jinja, "<|start|>")) {
        chat_template_force(CHAT_HARMONY, jinja, out);
    } else {
        return gerr_set(e, EX_DATAERR,
                        "%s: chat template not recognised (neither ChatML, Llama 3 nor harmony); choose one with "
                        "--chat-template chatml|llama3|harmony|raw",
                        name_for_errors);
    }
    return 0;
}

/* "YYYY-MM-DD" naming a day of the Gregorian calendar. */
static bool is_date(const char *s) {
    int y, m, d, n = 0;
    if (strlen(s) != 10 || sscanf(s, "%4d-%2d-%2d%n", &y, &m, &d, &n) != 3 || n != 10) return false;
    for (int i = 0; i < 10; i++)
        if ((i == 4 || i == 7) != (s[i] == '-') || (i != 4 && i != 7 && (s[i] < '0' || s[i] > '9'))) return false;
    static const int days[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m >= 1 && m <= 12 && d >= 1 && d <= days[m - 1] && !(m == 2 && d == 29 && !leap);
}

int chat_set_harmony(chat_template *t, const char *reasoning, const char *date, gerr *e) {
    const char *flag = reasoning ? "--reasoning-effort" : "--chat-date";
    if ((reasoning || date) && t->family != CHAT_HARMONY)
        return gerr_set(e, EX_USAGE, "%s: only the harmony chat template (gpt-oss) has it; this one is %s", flag,
                        chat_family_name(t->family));
    if (reasoning) {
        if (strcmp(reasoning, "low") && strcmp(reasoning, "medium") && strcmp(reasoning, "high"))
            return gerr_set(e, EX_USAGE, "--reasoning-effort: expected low, medium or high, got '%s'", reasoning);
        snprintf(t->reasoning, sizeof t->reasoning, "%s", reasoning);
    }
    if (date && !strcmp(date, "today")) {
        time_t now = time(NULL);
        struct tm tm;
        if (now == (time_t)-1 || !localtime_r(&now, &tm) || !strftime(t->date, sizeof t->date, "%Y-%m-%d", &tm))
            return gerr_set(e, EX_OSERR, "--chat-date today: cannot read the clock");
    } else if (date) {
        if (!is_date(date))
            return gerr_set(e, EX_USAGE, "--chat-date: expected a date YYYY-MM-DD or today, got '%s'", date);
        snprintf(t->date, sizeof t->date, "%s", date);
    }
    return 0;
}

void chat_template_free(chat_template *t) {
    free(t->default_system);
    t->default_system = NULL;
}

/* Python's str.strip() as Jinja's |trim does it, for ASCII white space. */
void chat_append_trimmed(strbuf *out, const char *s) {
    size_t n = strlen(s);
    while (n && strchr(" \t\n\r\f\v", s[n - 1])) n--;
    while (n && strchr(" \t\n\r\f\v", *s)) s++, n--;
    sb_append(out, s, n);
}

int chat_message_at(const cJSON *messages, int i, const char **role, const char **content, gerr *e) {
    const cJSON *m = cJSON_GetArrayItem(messages, i);
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role");
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
    if (!cJSON_IsObject(m) || !cJSON_IsString(r) || !cJSON_IsString(c))
        return gerr_set(e, EX_DATAERR, "field \"messages\": message %d: expected {\"role\": string, \"content\": string}", i);
    *role = r->valuestring;
    *content = c->valuestring;
    return 0;
}

static bool role_at_is(const cJSON *messages, int i, const char *role) {
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(messages, i), "role");
    return cJSON_IsString(r) && !strcmp(r->valuestring, role);
}

int chat_render_messages(const chat_template *t, const cJSON *messages, int from, strbuf *out, gerr *e) {
    if (t->family == CHAT_HARMONY) {
        const char *last_call = NULL;
        return chat_render_harmony_messages(t, messages, from, &last_call, out, e);
    }
    const char *role, *content;
    int n = cJSON_GetArraySize(messages);
    for (int i = from; i < n; i++) {
        if (chat_message_at(messages, i, &role, &content, e)) return e->code;
        bool tool = !strcmp(role, "tool");
        switch (t->family) {
        case CHAT_HARMONY: break; /* above */
        case CHAT_RAW: sb_puts(out, content); break;
        case CHAT_CHATML:
            if (tool && (t->chatml_tool_response || t->tools)) { /* consecutive results share one user turn */
                if (i == 0 || !role_at_is(messages, i - 1, "tool")) sb_puts(out, "<|im_start|>user");
                sb_puts(out, "\n<tool_response>\n");
                sb_puts(out, content);
                sb_puts(out, "\n</tool_response>");
                if (i == n - 1 || !role_at_is(messages, i + 1, "tool")) sb_puts(out, "<|im_end|>\n");
                break;
            }
            sb_printf(out, "<|im_start|>%s\n", role);
            sb_puts(out, content);
            sb_puts(out, "<|im_end|>\n");
            break;
        case CHAT_LLAMA3:
            if ((tool || !strcmp(role, "ipython")) && t->llama31_header) { /* 3.1: the result as a JSON string */
                sb_puts(out, "<|start_header_id|>ipython<|end_header_id|>\n\n");
                sb_json_string(out, content, strlen(content));
                sb_puts(out, "<|eot_id|>");
                break;
            }
            sb_printf(out, "<|start_header_id|>%s<|end_header_id|>\n\n", role);
            chat_append_trimmed(out, content);
            sb_puts(out, "<|eot_id|>");
            break;
        }
    }
    return 0;
}

int chat_render(const chat_template *t, const cJSON *messages, bool add_generation_prompt, strbuf *out, gerr *e) {
    if (!cJSON_IsArray(messages)) return gerr_set(e, EX_DATAERR, "field \"messages\": expected an array");
    if (t->family == CHAT_HARMONY) return chat_render_harmony(t, messages, add_generation_prompt, out, e);
    int n = cJSON_GetArraySize(messages);
    const char *role = NULL, *content = NULL;
    if (n > 0 && chat_message_at(messages, 0, &role, &content, e)) return e->code;
    bool first_is_system = n > 0 && !strcmp(role, "system");
    int from = 0;
    switch (t->family) {
    case CHAT_RAW:
    case CHAT_HARMONY: break;
    case CHAT_CHATML:
        if (t->tools) {
            chat_render_chatml_tools(t, first_is_system ? content : t->default_system, out);
            from = first_is_system;
        } else if (n > 0 && t->default_system && !first_is_system) {
            sb_puts(out, "<|im_start|>system\n");
            sb_puts(out, t->default_system);
            sb_puts(out, "<|im_end|>\n");
        }
        break;
    case CHAT_LLAMA3:
        sb_puts(out, "<|begin_of_text|>");
        if (t->llama31_header) { /* 3.1+ always opens with a system turn carrying the date header */
            sb_puts(out, "<|start_header_id|>system<|end_header_id|>\n\n");
            if (t->tools) sb_puts(out, "Environment: ipython\n");
            sb_puts(out, "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n");
            if (first_is_system) chat_append_trimmed(out, content);
            sb_puts(out, "<|eot_id|>");
            from = first_is_system;
        }
        if (t->tools) { /* the tools go in with the first message after the system one */
            if (from == 0 && first_is_system && chat_render_messages(t, messages, 0, out, e)) return e->code;
            if (from == 0 && first_is_system) from = 1;
            if (from < n && chat_message_at(messages, from, &role, &content, e)) return e->code;
            chat_render_llama3_tools(t, from < n ? content : "", out);
            from++;
        }
        break;
    }
    if (from < n && chat_render_messages(t, messages, from, out, e)) return e->code;
    if (add_generation_prompt) {
        if (t->family == CHAT_CHATML) sb_puts(out, "<|im_start|>assistant\n");
        if (t->family == CHAT_LLAMA3) sb_puts(out, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    }
    return 0;
}
