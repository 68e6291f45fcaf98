/* Final answers pulled out of worked solutions: GSM8K's "#### 72" and the
 * last \boxed{...} of a MATH solution. grpo-prep takes reference answers
 * from datasets with them, and the answer rules (match.h) use them on
 * completions. Pure string functions, unit-tested. */
#ifndef GRPO_ANSWER_EXTRACT_H
#define GRPO_ANSWER_EXTRACT_H

#include <stddef.h>

#include "../util/strbuf.h"

/* The text after the last "####", spaces trimmed, commas removed
 * ("#### 1,234" -> "1234"). Returns 1 when found (out may be empty if
 * nothing follows), 0 when s has no "####". out is replaced. */
int extract_after_hashes(const char *s, size_t len, strbuf *out);

/* The content of the last \boxed{...} or \fbox{...} in s, nested braces
 * balanced, backslash escapes (\{ \} \\) not counted, spaces trimmed. Also
 * "\boxed 5" (a space, then the answer up to the next space or '$').
 * Returns 1 found, 0 none, -1 a \boxed{ whose braces never close. */
int extract_boxed(const char *s, size_t len, strbuf *out);

/* The index just past the '}' closing the group whose '{' is at s[i]
 * (backslash escapes skipped), or 0 when it never closes. */
size_t extract_group_end(const char *s, size_t len, size_t i);

/* Appends s without leading and trailing white space. */
void extract_append_trimmed(strbuf *out, const char *s, size_t len);

#endif
