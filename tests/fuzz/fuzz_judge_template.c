/* libFuzzer target: a judge template and a record, split at the first NUL
 * byte of the input. The template parser must take or refuse any text (a
 * refusal: one line, EX_DATAERR, naming the template); a template that
 * parses renders any record that parses, or refuses it naming the record. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_util.h"
#include "io/record.h"
#include "judge/template.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text, *line;
    size_t text_len, line_len;
    fuzz_split(data, size, &text, &text_len, &line, &line_len);
    judge_template *t = NULL;
    gerr e = {0};
    if (judge_template_parse(&t, text, text_len, "judge.txt", &e) == 0) {
        if (!judge_template_sha256(t)) abort();
        record r;
        record_init(&r);
        if (record_parse(&r, line, line_len, "scored.jsonl", 1, &e) == 0) {
            strbuf completion = {0}, out = {0};
            int present = 0;
            const char *c = NULL;
            if (record_get_string(&r, "completion", false, &completion, &present, &e) == 0 && present == 2)
                c = completion.data ? completion.data : "";
            e = (gerr){0};
            if (judge_template_render(t, &r, c, c ? completion.len : 0, &out, &e) == 0) {
                if (out.len && !out.data) abort();
            } else {
                fuzz_check_error(&e, "scored.jsonl:1: ", EX_DATAERR, EX_DATAERR);
            }
            sb_free(&completion);
            sb_free(&out);
        }
        record_free(&r);
        judge_template_free(t);
    } else {
        fuzz_check_error(&e, "judge.txt", EX_DATAERR, EX_DATAERR);
    }
    free(text);
    free(line);
    return 0;
}
