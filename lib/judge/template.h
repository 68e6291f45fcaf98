/* The judge's prompt template: a text file with placeholders filled from
 * each record; the rendered text is the user message sent to the judge.
 *
 *   {prompt}      the last message with role "user" in the record's
 *                 `messages` (its content, decoded); a record without
 *                 `messages` uses its top-level `prompt` field instead
 *   {completion}  the record's decoded `completion` (of a multi-turn record:
 *                 the last assistant message)
 *   {turns}       the conversation appended after the prompt, as JSON: a
 *                 multi-turn record's `turns` as the record wrote it; a
 *                 single-turn record's completion as the one assistant
 *                 message [{"role":"assistant","content":...}]
 *   {NAME}        the top-level field NAME: a string is inserted decoded,
 *                 any other value (number, array, object, true, null) as
 *                 its JSON text exactly as the record wrote it; `{answer}`
 *                 is one of these
 *   {{ and }}     a literal { and }
 *
 * NAME is letters, digits, '_' and '-'. Any other '{' or a lone '}' is an
 * error in the template (TEMPLATE:LINE), found when it is loaded, so a JSON
 * example in a template is written with doubled braces. A record that lacks
 * a field the template uses is an error naming the record (FILE:LINE) and
 * the field. */
#ifndef GRPO_JUDGE_TEMPLATE_H
#define GRPO_JUDGE_TEMPLATE_H

#include <stddef.h>
#include <stdint.h>

#include "../io/record.h"
#include "../util/err.h"
#include "../util/strbuf.h"

typedef struct judge_template judge_template;

/* Reads and parses the file: EX_NOINPUT when it cannot be read, EX_DATAERR
 * (TEMPLATE:LINE: ...) on a bad placeholder. */
int judge_template_load(judge_template **t, const char *path, gerr *e);
/* The same from text in memory; `name` is the file name errors give. */
int judge_template_parse(judge_template **t, const char *text, size_t len, const char *name, gerr *e);
/* SHA-256 of the template's bytes, part of every cache key. */
const uint8_t *judge_template_sha256(const judge_template *t);
/* Replaces out with the template filled from the record; completion is the
 * record's decoded `completion` (completion_len bytes), NULL when the record
 * has no string `completion`. EX_DATAERR names the record and the missing or
 * unusable field. */
int judge_template_render(const judge_template *t, const record *r, const char *completion, size_t completion_len,
                          strbuf *out, gerr *e);
void judge_template_free(judge_template *t);

#endif
