#include "prompt.h"

#include <stdio.h>
#include <string.h>

/* Short and literal: the embedded demo model has 135M parameters, and the
 * reward functions look for exactly these tags. */
static const char THINK_ANSWER[] =
    "Think step by step inside <think> </think> tags, then give only the final answer inside "
    "<answer> </answer> tags, in this form: <think> your reasoning </think><answer> your answer </answer>";
static const char ANSWER_ONLY[] =
    "Give only the final answer inside <answer> </answer> tags, in this form: <answer> your answer </answer>";

const char *prompt_format_instruction(prep_format f) {
    switch (f) {
    case FORMAT_THINK_ANSWER: return THINK_ANSWER;
    case FORMAT_ANSWER: return ANSWER_ONLY;
    case FORMAT_PLAIN: return NULL;
    }
    return NULL;
}

const char *prompt_system(const prep_opts *o) {
    if (o->given.system) return o->system && *o->system ? o->system : NULL;
    return prompt_format_instruction(o->format);
}

bool prompt_system_explicit(const prep_opts *o) {
    return o->given.system || (o->given.format && o->format != FORMAT_PLAIN);
}

static void put_message(strbuf *out, const char *role, const char *content, size_t len) {
    sb_puts(out, "{\"role\":");
    sb_json_string(out, role, strlen(role));
    sb_puts(out, ",\"content\":");
    sb_json_string(out, content, len);
    sb_putc(out, '}');
}

void prompt_messages(strbuf *out, const char *sys, const char *user, size_t user_len) {
    sb_putc(out, '[');
    if (sys) {
        put_message(out, "system", sys, strlen(sys));
        sb_putc(out, ',');
    }
    put_message(out, "user", user, user_len);
    sb_putc(out, ']');
}

static size_t skip_ws(const char *s, size_t len, size_t i) {
    while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
    return i;
}

static int bad_messages(const record *r, const char *field, gerr *e, const char *what, size_t index) {
    if (index)
        return gerr_at(e, EX_DATAERR, r->file, r->line, "field \"%s\": message %zu: %s", field, index, what);
    return gerr_at(e, EX_DATAERR, r->file, r->line, "field \"%s\": %s", field, what);
}

int prompt_messages_from_raw(const record *r, const char *field, const char *raw, size_t len, bool set_system,
                             const char *sys, strbuf *out, gerr *e) {
    const char *expected = "expected an array of {\"role\": string, \"content\": string} objects";
    if (json_kind_of(raw) != JSON_ARRAY) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s, got %s", expected, json_kind_name(json_kind_of(raw)));
        return bad_messages(r, field, e, msg, 0);
    }
    /* The value passed the record scanner: its elements can be sliced with
     * the scanner again and read as one-line records, without a tree. */
    record msg;
    record_init(&msg);
    strbuf role = {0};
    size_t start = out->len;
    size_t i = skip_ws(raw, len, 1), index = 0;
    bool first_out = true;
    int rc = 0;
    sb_putc(out, '[');
    if (set_system && sys) {
        put_message(out, "system", sys, strlen(sys));
        first_out = false;
    }
    while (i < len && raw[i] != ']') {
        json_scan_error se = {0};
        size_t end = json_scan_value(raw, len, i, &se);
        index++;
        gerr inner = {0};
        if (!end || json_kind_of(raw + i) != JSON_OBJECT ||
            record_parse(&msg, raw + i, end - i, r->file, r->line, &inner)) {
            rc = bad_messages(r, field, e, "expected an object with \"role\" and \"content\"", index);
            break;
        }
        int present = 0;
        if (record_get_string(&msg, "role", false, &role, &present, &inner) || present != 2) {
            rc = bad_messages(r, field, e, "expected \"role\" to be a string", index);
            break;
        }
        const rec_field *content = record_find(&msg, "content");
        if (!content || json_kind_of(content->val) != JSON_STRING) {
            rc = bad_messages(r, field, e, "expected \"content\" to be a string", index);
            break;
        }
        bool drop = set_system && index == 1 && !strcmp(role.data, "system");
        if (!drop) { /* a record's own messages keep their bytes */
            if (!first_out) sb_putc(out, ',');
            sb_append(out, raw + i, end - i);
            first_out = false;
        }
        i = skip_ws(raw, len, end);
        if (i < len && raw[i] == ',') i = skip_ws(raw, len, i + 1);
    }
    if (!rc && index == 0) rc = bad_messages(r, field, e, "expected at least one message, got an empty array", 0);
    if (!rc && first_out) rc = bad_messages(r, field, e, "no message is left once the system message is removed", 0);
    sb_putc(out, ']');
    if (!rc && !set_system) { /* untouched: the array exactly as written */
        out->len = start;
        sb_append(out, raw, len);
    }
    if (rc) {
        out->len = start;
        if (out->data) out->data[start] = 0;
    }
    record_free(&msg);
    sb_free(&role);
    return rc;
}
