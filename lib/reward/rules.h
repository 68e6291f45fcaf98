/* The rule rewards other than `answer`: tag layout, length, repetition.
 * Pure functions of strings and numbers, unit-tested without records; the
 * reward_open_* functions of format.c, length.c and repetition.c wrap them. */
#ifndef GRPO_REWARD_RULES_H
#define GRPO_REWARD_RULES_H

#include <stdbool.h>
#include <stddef.h>

#include "../util/err.h"

/* ---- format ----------------------------------------------------------------
 * Tags are matched exactly and case-sensitively as "<name>" and "</name>"
 * (no attributes, no spaces inside the brackets). A tag is well formed when
 * "<name>" occurs exactly once and "</name>" occurs exactly once after it.
 *
 *   strict  1.0 iff every tag is well formed, the pairs come in the listed
 *           order without overlapping (tag i closes before tag i+1 opens),
 *           and only white space stands before the first pair, between
 *           pairs and after the last one; else 0. Bodies may hold anything
 *           (other markup included), and may be empty.
 *   soft    the same without the white-space condition: anything may stand
 *           around and between the pairs; 1.0 or 0.
 *   partial k / ntags, k = the number of well-formed tags, each judged on
 *           its own (order between tags and nesting do not matter).
 *
 * "think,answer" in strict mode accepts "  <think>x</think>\n<answer>4</answer>\n"
 * and rejects "<think>x</think>So: <answer>4</answer>". */
enum { FORMAT_MAX_TAGS = 16, FORMAT_MAX_TAG_LEN = 64 };

typedef enum { FORMAT_STRICT, FORMAT_SOFT, FORMAT_PARTIAL } format_mode;

typedef struct {
    char open[FORMAT_MAX_TAG_LEN + 3];  /* "<name>" */
    char close[FORMAT_MAX_TAG_LEN + 4]; /* "</name>" */
    size_t open_len, close_len;
} format_tag;

typedef struct {
    format_tag tags[FORMAT_MAX_TAGS];
    size_t n;
    format_mode mode;
} format_spec;

/* tags: a comma list of names ([A-Za-z0-9_.:-], trimmed, distinct, at most
 * FORMAT_MAX_TAGS); mode: strict|soft|partial. Errors: EX_USAGE naming the flag. */
int format_spec_parse(format_spec *f, const char *tags, const char *mode, gerr *e);
double format_score(const format_spec *f, const char *s, size_t len);

/* ---- length ----------------------------------------------------------------
 * DAPO's soft overlong penalty, with an optional minimum:
 *   min > 0 and L < min            -> -1
 *   max > 0 and L > max            -> -1
 *   max > 0 and max-buf < L <= max -> ((max - buf) - L) / buf
 *   otherwise                      -> 0
 * max = 0 and min = 0 switch the respective check off. */
double length_penalty(long long len, long long max, long long buffer, long long min);
/* Unicode code points of UTF-8 text (bytes that do not continue a sequence). */
long long length_code_points(const char *s, size_t len);

/* ---- repetition ------------------------------------------------------------
 * open-r1's n-gram repetition penalty: the completion is split into words
 * at ASCII white space and lower-cased (ASCII letters only); over its word
 * n-grams, value = (1 - unique / total) * max_penalty. Fewer than n words
 * (the empty text included) give 0. max_penalty <= 0. */
double repetition_penalty(const char *s, size_t len, long long n, double max_penalty);

#endif
