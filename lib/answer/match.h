/* Final answers in completions, the rules of the `answer` reward and its
 * countdown check (lib/reward): pulling the final answer out of a
 * completion, normalising it, and comparing it with the reference answer.
 * Pure functions of strings, unit-tested without records.
 *
 * Extraction (answer_extract), first form present wins, wherever it stands:
 *   1. the content of the last <answer>...</answer> pair (the last
 *      "</answer>" and the last "<answer>" before it; tags are lower case
 *      and exact). A \boxed{...} inside it is taken instead of the whole
 *      content. An empty pair extracts "" (scored wrong, no fallback).
 *   2. the content of the last \boxed{...} / \fbox{...} (nested braces,
 *      extract.h's extract_boxed); an unclosed one is skipped.
 *   3. the first line after the last "####" (extract.h's extract_after_hashes).
 *   4. the last number: -?D+(,DDD)*(.D+)? where '-' counts only when no
 *      letter or digit stands before it, with the exponent that follows it
 *      ("1e5", "1.5e-3", "2E+10", "6.02 \times 10^{23}", "6.02x10^23", the
 *      U+00D7 sign, "\cdot", "*"); an e-form glued to a letter on either
 *      side ("a3f1e52", "2e3x") is no exponent, nor an e without digits
 *      ("5e."). Then widened to the fraction, power, \frac or \sqrt it ends.
 *
 * Normalisation (answer_normalize), the same for the completion's answer
 * and the reference:
 *   - LaTeX: $ and \( \) \[ \] dropped; \text \textbf \textit \textrm
 *     \mathrm \mathbf \mathit \mbox \boxed \fbox {X} -> X; \left \right
 *     \displaystyle dropped; \dfrac \tfrac -> \frac; ^\circ ^{\circ} \circ
 *     \degree and the degree sign dropped; \% -> %; \$ and the spacing
 *     commands \, \! \; \: "\ " dropped; {,} -> ','; ~ and no-break spaces
 *     -> space; U+2212 minus -> '-'.
 *   - Then the text is a number when it is, as a whole (surrounding white
 *     space and one trailing '.' aside):
 *       [name =] [sign] [currency] VALUE [%|percent] [UNIT]
 *     sign: '+' or '-' (either side of the currency sign $ EUR GBP JPY INR);
 *     VALUE: D+ or D{1,3}(,DDD)+ (thousands separators must group by three:
 *     "1,234" is 1234, "1,23" is no number), an optional .D+, or .D+ alone;
 *     then an exponent (e/E[+-]D+, or "\times 10^{k}", "\cdot 10^k", "*10^k";
 *     an x between a digit and "10^" is read as \times),
 *     or a fraction "/ DENOM" (D+ or D+.D+);
 *     or \frac{A}{B} / \frac AB with A, B signed decimals (a zero
 *     denominator is no number).
 *     The percent sign and the word "percent" are dropped: "50%" is 50.
 *     UNIT: trailing words of ASCII letters (with '.', '/', '^D' inside,
 *     "sq. ft.", "km/h", "cm^2"); glued to the number it needs two letters
 *     ("10kg", but "5x" and "3i" stay text); "i" and "pi" are never units;
 *     a leading hundred/thousand/million/billion/trillion multiplies.
 *     name: a leading identifier and '=' ("x = 5").
 *   - Otherwise it is text, folded: ASCII case, all white space and one
 *     trailing '.' removed, one pair of braces around the whole dropped.
 *
 * Comparison (answer_equal): two numbers are equal when their exact values
 * are, or, where a side is written with digits after its point (a possible
 * rounding), within min(tol * max(1, |b|), half a unit in that side's last
 * digit) (number.h; b the reference). Otherwise they are equal
 * when their folded text is, so "(1, 2)" equals "(1,2)", or when both are
 * math expressions (mexpr.h; a number above counts as its value) equal by
 * mexpr_equal: "2\sqrt3" equals "\sqrt{12}", "\{3,2,1\}" equals "\{1,2,3\}",
 * "1+x^2" equals "x^2+1", and "5" never equals "5x". */
#ifndef GRPO_ANSWER_MATCH_H
#define GRPO_ANSWER_MATCH_H

#include <stdbool.h>
#include <stddef.h>

#include "../util/strbuf.h"
#include "mexpr.h"
#include "number.h"

typedef enum {
    ANSWER_FROM_NONE,   /* nothing found: no tag, box, #### or number */
    ANSWER_FROM_TAG,    /* <answer>...</answer> */
    ANSWER_FROM_BOXED,  /* \boxed{...} */
    ANSWER_FROM_HASHES, /* #### ... */
    ANSWER_FROM_NUMBER, /* the last number */
    ANSWER_N_SOURCES
} answer_source;

const char *answer_source_name(answer_source s);

/* Extracts the final answer of a completion into out (replaced). */
answer_source answer_extract(const char *s, size_t len, strbuf *out);

/* The content of the last <answer>...</answer> (trimmed) into out; false
 * when there is no closed pair. Shared with the countdown check. */
bool answer_tag_content(const char *s, size_t len, strbuf *out);

typedef struct {
    bool is_number;
    double value;       /* when is_number */
    answer_number num;  /* the same, exactly as written (number.h) */
    strbuf text;  /* the folded text (always filled) */
    strbuf clean; /* scratch: the text after the LaTeX clean-up */
    strbuf raw;     /* the text as given: parsed as an expression only when a comparison needs it */
    bool math_done; /* the parse below was tried */
    bool has_math;  /* math holds the answer as an expression (mexpr.h) */
    mexpr *math;    /* allocated on first use */
} answer_norm;

void answer_norm_free(answer_norm *n);
void answer_normalize(const char *s, size_t len, answer_norm *out);
/* Not const: the expressions are parsed on the first comparison that needs them. */
bool answer_norm_equal(answer_norm *pred, answer_norm *gold, double tol);

/* Normalises both and compares: the whole check on two strings. */
bool answer_equal(const char *pred, size_t pred_len, const char *gold, size_t gold_len, double tol);

/* The LaTeX and Unicode clean-up alone (appended to out). */
void answer_clean(const char *s, size_t len, strbuf *out);
/* The number a cleaned text stands for, as described above. */
bool answer_parse_number(const char *s, size_t len, double *out);

#endif
