#include "datasets.h"

#include <string.h>

#include "../answer/extract.h"
#include "prompt.h"

static const char *task_label(prep_task t) {
    switch (t) {
    case TASK_GSM8K: return "gsm8k";
    case TASK_MATH: return "math";
    case TASK_MBPP: return "mbpp";
    default: return "jsonl";
    }
}

/* GSM8K: {"question", "answer": "worked solution ... #### 72"}. */
static int gsm8k(const prep_opts *o, const record *in, prep_item *it, gerr *e) {
    strbuf q = {0}, a = {0};
    int rc = record_get_string(in, "question", true, &q, NULL, e);
    if (!rc) rc = record_get_string(in, "answer", true, &a, NULL, e);
    if (!rc) {
        int found = extract_after_hashes(a.data, a.len, &it->answer);
        if (!found)
            rc = gerr_at(e, EX_DATAERR, in->file, in->line,
                         "field \"answer\": expected a solution ending in \"#### <final answer>\", got no \"####\"");
        else if (!it->answer.len)
            rc = gerr_at(e, EX_DATAERR, in->file, in->line, "field \"answer\": nothing follows the last \"####\"");
        it->has_answer = true;
    }
    if (!rc) prompt_messages(&it->messages, prompt_system(o), q.data, q.len);
    sb_free(&q);
    sb_free(&a);
    return rc;
}

/* Hendrycks MATH: {"problem", "solution": "... \boxed{42} ...", "level", "type"}. */
static int math(const prep_opts *o, const record *in, prep_item *it, gerr *e) {
    strbuf p = {0}, s = {0};
    int rc = record_get_string(in, "problem", true, &p, NULL, e);
    if (!rc) rc = record_get_string(in, "solution", true, &s, NULL, e);
    if (!rc) {
        int found = extract_boxed(s.data, s.len, &it->answer);
        if (found == 0)
            rc = gerr_at(e, EX_DATAERR, in->file, in->line,
                         "field \"solution\": expected a final answer in \\boxed{...}, got no \\boxed");
        else if (found < 0)
            rc = gerr_at(e, EX_DATAERR, in->file, in->line,
                         "field \"solution\": the last \\boxed{ has no matching closing brace");
        else if (!it->answer.len)
            rc = gerr_at(e, EX_DATAERR, in->file, in->line, "field \"solution\": the last \\boxed{} is empty");
        it->has_answer = true;
    }
    if (!rc) prompt_messages(&it->messages, prompt_system(o), p.data, p.len);
    sb_free(&p);
    sb_free(&s);
    return rc;
}

/* An array of strings (MBPP's test_list, test_imports) as a cJSON tree. */
static int string_array(const record *in, const char *key, bool required, cJSON **out, gerr *e) {
    int rc = record_get_json(in, key, required, out, e);
    if (rc || !*out) return rc;
    bool ok = cJSON_IsArray(*out);
    const cJSON *el;
    cJSON_ArrayForEach(el, *out) ok = ok && cJSON_IsString(el);
    if (!ok) {
        cJSON_Delete(*out);
        *out = NULL;
        return record_field_error(in, key, "an array of strings", e);
    }
    return 0;
}

/* MBPP: {"task_id", "text", "code", "test_list", "test_setup_code"}; the
 * sanitized variant's "prompt" and "test_imports" are read too. */
static int mbpp(const prep_opts *o, const record *in, prep_item *it, gerr *e) {
    strbuf text = {0}, setup = {0}, code = {0};
    cJSON *tests = NULL, *imports = NULL;
    const char *text_key = record_has(in, "text") || !record_has(in, "prompt") ? "text" : "prompt";
    int rc = record_get_string(in, text_key, true, &text, NULL, e);
    if (!rc) rc = string_array(in, "test_list", true, &tests, e);
    if (!rc && !cJSON_GetArraySize(tests))
        rc = gerr_at(e, EX_DATAERR, in->file, in->line, "field \"test_list\": expected at least one test, got []");
    if (!rc) rc = string_array(in, "test_imports", false, &imports, e);
    if (!rc) rc = record_get_string(in, "test_setup_code", false, &code, NULL, e);
    if (!rc) {
        /* Each test must run on its own after the model's code, so the set-up
         * (imports first, then test_setup_code) goes in front of every one. */
        const cJSON *el;
        cJSON_ArrayForEach(el, imports) {
            if (!*el->valuestring) continue;
            sb_puts(&setup, el->valuestring);
            sb_putc(&setup, '\n');
        }
        strbuf trimmed = {0};
        extract_append_trimmed(&trimmed, code.data ? code.data : "", code.len);
        if (trimmed.len) {
            sb_append(&setup, trimmed.data, trimmed.len);
            sb_putc(&setup, '\n');
        }
        sb_free(&trimmed);
        strbuf *raw = prep_item_extra(it, "tests");
        strbuf one = {0};
        sb_putc(raw, '[');
        int i = 0;
        cJSON_ArrayForEach(el, tests) {
            sb_clear(&one);
            if (setup.len) sb_append(&one, setup.data, setup.len);
            sb_puts(&one, el->valuestring);
            if (i++) sb_putc(raw, ',');
            sb_json_string(raw, one.data, one.len);
        }
        sb_putc(raw, ']');
        sb_free(&one);
        strbuf user = {0};
        sb_append(&user, text.data, text.len);
        sb_puts(&user, "\n\nYour code should pass this test:\n");
        sb_puts(&user, cJSON_GetArrayItem(tests, 0)->valuestring);
        prompt_messages(&it->messages, prompt_system(o), user.data, user.len);
        sb_free(&user);
    }
    cJSON_Delete(tests);
    cJSON_Delete(imports);
    sb_free(&text);
    sb_free(&setup);
    sb_free(&code);
    return rc;
}

/* Any JSONL: the user message from --prompt-field (a string, or an array of
 * messages used as they are), or the record's own "messages"; the answer
 * from --answer-field. A record's own string "id" and "task" are kept. */
static int jsonl(const prep_opts *o, const record *in, prep_item *it, gerr *e) {
    int present = 0;
    strbuf s = {0};
    int rc = record_get_string(in, "id", false, &s, &present, NULL);
    if (!rc && present == 2) {
        if (!s.len) {
            sb_free(&s);
            return gerr_at(e, EX_DATAERR, in->file, in->line, "field \"id\": expected a non-empty string, got \"\"");
        }
        sb_clear(&it->id);
        sb_append(&it->id, s.data, s.len);
        prep_item_consume(it, "id");
    }
    rc = record_get_string(in, "task", false, &s, &present, NULL);
    if (!rc && present == 2 && s.len) {
        sb_clear(&it->task);
        sb_append(&it->task, s.data, s.len);
        prep_item_consume(it, "task");
    }
    sb_free(&s);

    const char *field = o->prompt_field;
    if (!o->given.prompt_field && record_has(in, "messages")) field = "messages";
    const rec_field *f = record_find(in, field);
    json_kind kind = f ? json_kind_of(f->val) : JSON_NULL;
    if (f && kind == JSON_STRING) {
        strbuf user = {0};
        json_decode_string(f->val + 1, f->val_len - 2, &user);
        prompt_messages(&it->messages, prompt_system(o), user.data ? user.data : "", user.len);
        sb_free(&user);
    } else if (f && kind == JSON_ARRAY) {
        rc = prompt_messages_from_raw(in, field, f->val, f->val_len, prompt_system_explicit(o), prompt_system(o),
                                      &it->messages, e);
        if (rc) return rc;
    } else {
        return record_field_error(in, field, "a string or an array of messages", e);
    }
    if (!strcmp(field, "messages")) prep_item_consume(it, "messages");

    const rec_field *a = record_find(in, o->answer_field);
    kind = a ? json_kind_of(a->val) : JSON_NULL;
    if (kind == JSON_STRING) {
        json_decode_string(a->val + 1, a->val_len - 2, &it->answer);
    } else if (kind == JSON_NUMBER) { /* 42 -> "42": the number's own text */
        sb_append(&it->answer, a->val, a->val_len);
    } else if (kind != JSON_NULL) {
        return record_field_error(in, o->answer_field, "a string or a number", e);
    }
    if (kind == JSON_STRING || kind == JSON_NUMBER) {
        it->has_answer = true;
        if (!strcmp(o->answer_field, "answer")) prep_item_consume(it, "answer");
    }
    it->answer_reserved = strcmp(o->answer_field, "answer") != 0;
    return 0;
}

int prep_dataset_item(const prep_opts *o, const record *in, prep_item *it, gerr *e) {
    prep_item_clear(it);
    const char *label = task_label(o->task);
    sb_puts(&it->task, label);
    sb_printf(&it->id, "%s/%ld", label, in->line);
    switch (o->task) {
    case TASK_GSM8K: return gsm8k(o, in, it, e);
    case TASK_MATH: return math(o, in, it, e);
    case TASK_MBPP: return mbpp(o, in, it, e);
    case TASK_JSONL: return jsonl(o, in, it, e);
    default: return gerr_set(e, EX_SOFTWARE, "task %s is not a dataset task", label);
    }
}
