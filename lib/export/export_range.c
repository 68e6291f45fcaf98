/* What each export dtype holds: the bound a weight must stay under to be
 * written finite, the check before anything is written, and --clamp. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export.h"

/* f16: 65520 and above round to infinity (65504 is the largest finite).
 * bf16: 0x1.ffp127 and above round to infinity (0x1.fep127 the largest).
 * q8_0: a block's scale is max|x| / 127 written as f16. q4_k: a
 * super-block's d and dmin are a sub-block's scale and min over 63 as f16,
 * and its min is at most max|x|. */
#define F16_MAX 65504.0f
#define F16_ROUNDS_TO_INF 65520.0f
#define BF16_MAX 0x1.fep127f
#define BF16_ROUNDS_TO_INF 0x1.ffp127f

static bool fits(float x, export_dtype d) {
    float a = fabsf(x);
    switch (d) {
    case EXPORT_F32: return isfinite(x);
    case EXPORT_F16: return a < F16_ROUNDS_TO_INF;
    case EXPORT_BF16: return a < BF16_ROUNDS_TO_INF;
    case EXPORT_Q8_0: return a / 127.0f < F16_ROUNDS_TO_INF;
    case EXPORT_Q4_K: return a / 63.0f < F16_ROUNDS_TO_INF;
    }
    return false;
}

float export_dtype_limit(export_dtype d) {
    switch (d) {
    case EXPORT_F32: return 0x1.fffffep127f;
    case EXPORT_F16: return F16_MAX;
    case EXPORT_BF16: return BF16_MAX;
    case EXPORT_Q8_0: return F16_MAX * 127.0f;
    case EXPORT_Q4_K: return F16_MAX * 63.0f;
    }
    return 0;
}

/* The first index of x[0..n) that d cannot hold finite, n when none. */
static size_t first_misfit(const float *x, size_t n, export_dtype d) {
    /* one pass of branch-free maxima; the index is looked for only on failure */
    float amax = 0;
    bool nan = false;
    for (size_t i = 0; i < n; i++) {
        amax = fmaxf(amax, fabsf(x[i]));
        nan |= x[i] != x[i];
    }
    if (!nan && fits(amax, d)) return n;
    for (size_t i = 0; i < n; i++)
        if (!fits(x[i], d)) return i;
    return n;
}

int export_range_check(const char *model, const char *tensor, const float *x, size_t n, export_dtype d, gerr *e) {
    size_t i = first_misfit(x, n, d);
    if (i == n) return 0;
    if (!isfinite(x[i]))
        return gerr_set(e, EX_DATAERR, "%s: tensor '%s': value %zu is %g (non-finite weights cannot be exported)",
                        model, tensor, i, x[i]);
    export_dtype holds = fits(x[i], EXPORT_BF16) && d != EXPORT_BF16 ? EXPORT_BF16 : EXPORT_F32;
    return gerr_set(e, EX_DATAERR,
                    "%s: tensor '%s': value %zu is %g, beyond what %s holds (|x| <= %g); --dtype %s holds it, or "
                    "--clamp writes +-%g in its place",
                    model, tensor, i, x[i], export_dtype_name(d), export_dtype_limit(d), export_dtype_name(holds),
                    export_dtype_limit(d));
}

size_t export_range_clamp(float *x, size_t n, export_dtype d) {
    if (first_misfit(x, n, d) == n) return 0;
    float lim = export_dtype_limit(d);
    size_t changed = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i]) && !fits(x[i], d)) {
            x[i] = copysignf(lim, x[i]);
            changed++;
        }
    return changed;
}
