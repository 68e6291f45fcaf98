/* libFuzzer target: any bytes as a completion through the rule rewards.
 * Model output is untrusted: extraction, normalisation, the countdown
 * parser, format, length and repetition must never crash, read outside the
 * text or loop for long, and must keep their values in range. An answer
 * always matches itself. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "answer/match.h"
#include "reward/countdown_expr.h"
#include "reward/rules.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* a private heap copy so ASan sees the exact end of the text */
    char *s = malloc(size ? size : 1);
    if (!s) return 0;
    if (size) memcpy(s, data, size);

    strbuf out = {0};
    answer_source src = answer_extract(s, size, &out);
    if ((unsigned)src >= ANSWER_N_SOURCES || !out.data) abort();
    if (!answer_equal(out.data, out.len, out.data, out.len, 0)) abort();
    if (!answer_equal(s, size, s, size, 0)) abort();
    (void)answer_equal(out.data, out.len, "42", 2, 1e-6);

    static const long long NUMBERS[] = {25, 3, 7, 50};
    countdown_result r = countdown_check(s, size, NUMBERS, 4, 204);
    if ((unsigned)r >= COUNTDOWN_N_RESULTS) abort();
    if (countdown_extract(s, size, &out)) {
        r = countdown_check(out.data, out.len, NUMBERS, 4, 204);
        if ((unsigned)r >= COUNTDOWN_N_RESULTS) abort();
    }
    sb_free(&out);

    format_spec f;
    gerr e = {0};
    static const char *const MODES[] = {"strict", "soft", "partial"};
    for (int m = 0; m < 3; m++) {
        if (format_spec_parse(&f, "think,answer", MODES[m], &e)) abort();
        double v = format_score(&f, s, size);
        if (!(v >= 0 && v <= 1)) abort();
    }
    long long cp = length_code_points(s, size);
    if (cp < 0 || (size_t)cp > size) abort();
    for (long long n = 1; n <= 3; n++) {
        double v = repetition_penalty(s, size, n, -1);
        if (!(v >= -1 && v <= 0)) abort();
    }
    free(s);
    return 0;
}
