/* libFuzzer target: any bytes as a judge's HTTP reply body, then as the
 * reply's text. The body parser must take or refuse it without crashing;
 * the score grammar must agree with itself: a text that is exactly one
 * number gives that number as its first number, the default scorer's score
 * is that first number (or NaN when there is none), and a scaled regex
 * scorer never returns an infinity from finite text. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "fuzz_util.h"
#include "judge/score.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *body = fuzz_copy(data, size);
    strbuf content = {0};
    long long prompt_tokens = -2, completion_tokens = -2;
    if (judge_parse_reply(body, size, &content, &prompt_tokens, &completion_tokens)) {
        if (prompt_tokens < -1 || completion_tokens < -1) abort();
        if (content.len && !content.data) abort();
    }
    sb_free(&content);

    double first = NAN, whole = NAN;
    bool has_first = judge_first_number(body, size, &first);
    if (has_first && isnan(first)) abort();
    if (judge_whole_number(body, size, &whole)) {
        if (!has_first || !(whole == first || (isnan(whole) && isnan(first)))) abort();
    }

    judge_scorer *plain = NULL, *scaled = NULL;
    gerr e = {0};
    if (judge_scorer_open(&plain, NULL, 1.0, &e)) abort();
    if (judge_scorer_open(&scaled, "Score:\\s*([0-9]+(\\.[0-9]+)?)", 0.1, &e)) abort();
    double s = judge_scorer_score(plain, body, size);
    if (has_first ? !(s == first) : !isnan(s)) {
        fprintf(stderr, "fuzz: scorer %g, first number %g (has %d)\n", s, first, has_first);
        abort();
    }
    double t = judge_scorer_score(scaled, body, size);
    if (isinf(t)) abort();
    judge_scorer_free(plain);
    judge_scorer_free(scaled);
    free(body);
    return 0;
}
