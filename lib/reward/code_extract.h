/* Which part of a completion is the program the code reward runs.
 *
 * The rule, first match wins:
 *  1. The last fenced block (a line of three or more backticks; the block
 *     ends at a line of at least as many backticks and nothing else, or at
 *     the end of the completion when the model was cut off) whose language
 *     is python, py, python3, py3 (any case) or not given. Blocks in other
 *     languages are skipped, and a fence inside one does not open a block.
 *     When the opening fence is indented (inside a list item), that much
 *     leading white space is taken off each line of the block.
 *  2. The content of the last <answer>...</answer>, when some line of it
 *     starts (after indentation) with def, class, import, from, async def,
 *     return or a decorator: it looks like code.
 *  3. The whole completion. */
#ifndef GRPO_CODE_EXTRACT_H
#define GRPO_CODE_EXTRACT_H

#include <stddef.h>

#include "../util/strbuf.h"

typedef enum { CODE_FROM_FENCE, CODE_FROM_ANSWER, CODE_FROM_WHOLE } code_source;

/* Appends the program to out (cleared first) and says where it came from. */
code_source code_extract(const char *text, size_t len, strbuf *out);

#endif
