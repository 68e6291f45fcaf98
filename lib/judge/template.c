#include "template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>

#include "../io/mapped.h"
#include "../util/sha256.h"

typedef enum { PART_TEXT, PART_PROMPT, PART_COMPLETION, PART_TURNS, PART_FIELD } part_kind;

typedef struct {
    part_kind kind;
    char *text; /* PART_TEXT: the literal text (braces undoubled); PART_FIELD: the name */
    size_t len;
    long line; /* where it appears in the template, for messages */
} part;

struct judge_template {
    char *name; /* the file, for messages */
    part *parts;
    size_t n, cap;
    uint8_t sha[32];
};

static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

static void push(judge_template *t, part_kind kind, const char *text, size_t len, long line) {
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 8;
        t->parts = xrealloc(t->parts, t->cap * sizeof *t->parts);
    }
    t->parts[t->n++] = (part){kind, text ? xstrndup(text, len) : NULL, len, line};
}

/* Literal text accumulates in `lit` until a placeholder or the end. */
static void flush_text(judge_template *t, strbuf *lit, long line) {
    if (lit->len) push(t, PART_TEXT, lit->data, lit->len, line);
    sb_clear(lit);
}

int judge_template_parse(judge_template **out, const char *text, size_t len, const char *name, gerr *e) {
    judge_template *t = xcalloc(1, sizeof *t);
    t->name = xstrdup(name);
    sha256(text, len, t->sha);
    strbuf lit = {0};
    long line = 1, lit_line = 1;
    int rc = 0;
    for (size_t i = 0; i < len && !rc; i++) {
        char c = text[i];
        if (c == '}') {
            if (i + 1 < len && text[i + 1] == '}') {
                sb_putc(&lit, '}');
                i++;
                continue;
            }
            rc = gerr_at(e, EX_DATAERR, name, line, "judge template: a lone '}' (write }} for a literal brace)");
            break;
        }
        if (c != '{') {
            if (!lit.len) lit_line = line;
            sb_putc(&lit, c);
            if (c == '\n') line++;
            continue;
        }
        if (i + 1 < len && text[i + 1] == '{') {
            if (!lit.len) lit_line = line;
            sb_putc(&lit, '{');
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < len && is_name_char(text[j])) j++;
        if (j == i + 1 || j >= len || text[j] != '}') {
            rc = gerr_at(e, EX_DATAERR, name, line,
                         "judge template: '{' must start {NAME} (NAME of letters, digits, _ or -) "
                         "or be doubled as {{ for a literal brace");
            break;
        }
        flush_text(t, &lit, lit_line);
        const char *nm = text + i + 1;
        size_t nl = j - i - 1;
        if (nl == 6 && !memcmp(nm, "prompt", 6)) push(t, PART_PROMPT, NULL, 0, line);
        else if (nl == 10 && !memcmp(nm, "completion", 10)) push(t, PART_COMPLETION, NULL, 0, line);
        else if (nl == 5 && !memcmp(nm, "turns", 5)) push(t, PART_TURNS, NULL, 0, line);
        else push(t, PART_FIELD, nm, nl, line);
        i = j;
    }
    if (!rc) flush_text(t, &lit, lit_line);
    sb_free(&lit);
    if (rc) {
        judge_template_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

int judge_template_load(judge_template **t, const char *path, gerr *e) {
    size_t len;
    char *text = read_whole_file(path, &len, e);
    if (!text) {
        char why[sizeof e->msg];
        snprintf(why, sizeof why, "%s", e->msg);
        return gerr_set(e, e->code, "--judge-template: %s", why);
    }
    int rc = judge_template_parse(t, text, len, path, e);
    free(text);
    return rc;
}

const uint8_t *judge_template_sha256(const judge_template *t) { return t->sha; }

void judge_template_free(judge_template *t) {
    if (!t) return;
    for (size_t i = 0; i < t->n; i++) free(t->parts[i].text);
    free(t->parts);
    free(t->name);
    free(t);
}

/* A raw JSON value as the template inserts it: strings decoded, the rest verbatim. */
static void put_value(strbuf *out, const rec_field *f) {
    if (json_kind_of(f->val) == JSON_STRING) json_decode_string(f->val + 1, f->val_len - 2, out);
    else sb_append(out, f->val, f->val_len);
}

static int missing_field(const judge_template *t, const part *p, const record *r, const char *field, gerr *e) {
    return gerr_at(e, EX_DATAERR, r->file, r->line,
                   "field \"%s\": the judge template (%s:%ld) uses it, the record has none", field, t->name,
                   p->line);
}

/* {prompt}: the content of the last user message. */
static int put_prompt(const judge_template *t, const part *p, const record *r, strbuf *out, gerr *e) {
    if (!record_has(r, "messages")) {
        const rec_field *f = record_find(r, "prompt");
        if (!f) return missing_field(t, p, r, "messages", e);
        put_value(out, f);
        return 0;
    }
    cJSON *msgs = NULL;
    int rc = record_get_messages(r, &msgs, e);
    if (rc) return rc;
    const cJSON *user = NULL, *m;
    cJSON_ArrayForEach(m, msgs) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (cJSON_IsString(role) && !strcmp(role->valuestring, "user")) user = m;
    }
    const cJSON *content = user ? cJSON_GetObjectItemCaseSensitive(user, "content") : NULL;
    if (!user)
        rc = gerr_at(e, EX_DATAERR, r->file, r->line,
                     "field \"messages\": expected a message with role \"user\" for {prompt}, got none");
    else if (!cJSON_IsString(content))
        rc = gerr_at(e, EX_DATAERR, r->file, r->line,
                     "field \"messages\": expected the last user message's content to be a string");
    else
        sb_puts(out, content->valuestring);
    cJSON_Delete(msgs);
    return rc;
}

/* {turns}: a multi-turn record's `turns` as its JSON text; a single-turn
 * record's completion as the one assistant message it appended, so that one
 * template serves both kinds. */
static int put_turns(const judge_template *t, const part *p, const record *r, const char *completion,
                     size_t completion_len, strbuf *out, gerr *e) {
    const rec_field *f = record_find(r, "turns");
    if (f && json_kind_of(f->val) != JSON_NULL) {
        if (json_kind_of(f->val) != JSON_ARRAY) return record_field_error(r, "turns", "an array of messages", e);
        sb_append(out, f->val, f->val_len);
        return 0;
    }
    if (!completion) {
        if (record_has(r, "completion")) return record_field_error(r, "completion", "a string", e);
        return missing_field(t, p, r, "turns", e);
    }
    sb_puts(out, "[{\"role\":\"assistant\",\"content\":");
    sb_json_string(out, completion, completion_len);
    sb_puts(out, "}]");
    return 0;
}

int judge_template_render(const judge_template *t, const record *r, const char *completion, size_t completion_len,
                          strbuf *out, gerr *e) {
    sb_clear(out);
    for (size_t i = 0; i < t->n; i++) {
        const part *p = &t->parts[i];
        int rc = 0;
        switch (p->kind) {
        case PART_TEXT: sb_append(out, p->text, p->len); break;
        case PART_PROMPT: rc = put_prompt(t, p, r, out, e); break;
        case PART_COMPLETION:
            if (!completion) {
                if (record_has(r, "completion")) return record_field_error(r, "completion", "a string", e);
                return missing_field(t, p, r, "completion", e);
            }
            sb_append(out, completion, completion_len);
            break;
        case PART_TURNS: rc = put_turns(t, p, r, completion, completion_len, out, e); break;
        case PART_FIELD: {
            const rec_field *f = record_find(r, p->text);
            if (!f) return missing_field(t, p, r, p->text, e);
            put_value(out, f);
            break;
        }
        }
        if (rc) return rc;
    }
    return 0;
}
