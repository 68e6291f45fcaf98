/* libFuzzer target: any bytes through the math expression parser and its
 * comparison (lib/answer/mexpr*). The first NUL-free half is the prediction,
 * the rest the gold answer. Nothing may crash, read outside the text or run
 * long; an expression always equals itself (it has no variables that make
 * every point undefined, or it is compared by its text in answer_equal). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "answer/match.h"
#include "answer/mexpr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = malloc(size ? size : 1);
    mexpr *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    if (!s || !a || !b) abort();
    if (size) memcpy(s, data, size);
    size_t half = size / 2;

    if (mexpr_parse(s, size, a)) {
        if (a->root < 0 || a->root >= a->n_nodes || a->n_nodes > MEXPR_MAX_NODES || a->n_vars > MEXPR_MAX_VARS) abort();
        (void)mexpr_equal(a, a->root, a, a->root, 1e-6);
        mexpr_rat q;
        if (mexpr_eval_rational(a, a->root, &q) && q.den <= 0) abort();
    }
    if (mexpr_parse(s, half, a) && mexpr_parse(s + half, size - half, b)) {
        bool ab = mexpr_equal(a, a->root, b, b->root, 1e-6);
        (void)ab;
    }
    if (!answer_equal(s, size, s, size, 1e-6)) abort();
    (void)answer_equal(s, half, s + half, size - half, 1e-6);
    free(a);
    free(b);
    free(s);
    return 0;
}
