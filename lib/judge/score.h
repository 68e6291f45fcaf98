/* Reading the judge's answer: the reply body, and the score in its text.
 *
 * The score is, by default, the first number anywhere in the reply: an
 * optional sign directly before digits (a sign only where it does not join
 * two words, so "GPT-4" is 4 and "3-5" is 3), digits with an optional fraction
 * (or a fraction alone, ".5"), an optional exponent ("1e-3"). The first,
 * because judges are asked for a single number and a reply that goes on
 * ("7. The answer is close to 8") puts the score first. With --judge-regex
 * the number is what the first capture group matched (the whole match when
 * the pattern has no group); that text, white space around it removed,
 * must be one such number. The number is multiplied by --judge-scale. No
 * number, a group that did not take part, or a result that is not finite:
 * no score (the record's value is null). */
#ifndef GRPO_JUDGE_SCORE_H
#define GRPO_JUDGE_SCORE_H

#include <stdbool.h>
#include <stddef.h>

#include "../util/err.h"
#include "../util/strbuf.h"

typedef struct judge_scorer judge_scorer;

/* regex NULL: the first number. A pattern that does not compile: EX_USAGE
 * naming --judge-regex and the offset. */
int judge_scorer_open(judge_scorer **s, const char *regex, double scale, gerr *e);
/* The scaled score of a reply, or NAN when it holds none (the reward
 * function writes that as null). */
double judge_scorer_score(judge_scorer *s, const char *reply, size_t len);
void judge_scorer_free(judge_scorer *s);

/* The first number in text[0..len) (the grammar above); false when none. */
bool judge_first_number(const char *text, size_t len, double *out);
/* text[0..len) with white space around it is exactly one number. */
bool judge_whole_number(const char *text, size_t len, double *out);

/* A chat-completions reply body: content gets choices[0].message.content
 * ("" when it is null or absent, as when a reasoning model spends max_tokens
 * before answering: a reply without a score, not a failure to retry), the
 * token counts usage.prompt_tokens and usage.completion_tokens (-1 when
 * absent). false when the body is not JSON, has no choices[0].message
 * object, or a content that is neither a string nor null: a malformed
 * reply, retried like a failed request. */
bool judge_parse_reply(const char *body, size_t len, strbuf *content, long long *prompt_tokens,
                       long long *completion_tokens);

#endif
