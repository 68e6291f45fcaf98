/* System instructions and the `messages` array of a prompt record. */
#ifndef GRPO_PREP_PROMPT_H
#define GRPO_PREP_PROMPT_H

#include <stdbool.h>
#include <stddef.h>

#include "../io/record.h"
#include "../util/strbuf.h"
#include "prep.h"

/* The system instruction of a --format: NULL for plain. */
const char *prompt_format_instruction(prep_format f);

/* The system message prep writes: --system when given ("" = none), else the
 * format's instruction. NULL = no system message. */
const char *prompt_system(const prep_opts *o);

/* Whether --system, or a --format other than plain, was given: only then
 * does prep touch the system message of records that bring their own
 * messages (--task jsonl). */
bool prompt_system_explicit(const prep_opts *o);

/* Appends [{"role":"system","content":SYS},{"role":"user","content":USER}]
 * as compact JSON; no system message when sys is NULL. */
void prompt_messages(strbuf *out, const char *sys, const char *user, size_t user_len);

/* A record's own messages (raw JSON of field `field`): checks they are a
 * non-empty array of objects with string "role" and "content", and appends
 * them to out. The bytes are copied as they are unless set_system: then a
 * leading system message is replaced by sys (removed when sys is NULL), or
 * sys is put in front; the other messages keep their bytes. EX_DATAERR
 * naming the file, line and field. */
int prompt_messages_from_raw(const record *r, const char *field, const char *raw, size_t len, bool set_system,
                             const char *sys, strbuf *out, gerr *e);

#endif
