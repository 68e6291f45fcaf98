/* The optimizer's elementwise update (the constants come from optim.c). */
#include "ops.h"

#include <math.h>

/* Below this many elements a loop stays on one thread. */
enum { PARALLEL_MIN = 65536 };

void adamw_update(const adamw_consts *k, float *param, const float *grad, float *m, float *v, size_t n) {
    const adamw_consts c = *k;
#pragma omp parallel for schedule(static) if (n >= PARALLEL_MIN)
    for (size_t i = 0; i < n; i++) {
        float p = param[i] * c.keep, g = grad[i];
        float mi = m[i] * c.beta1 + c.one_minus_beta1 * g;
        float vi = v[i] * c.beta2 + c.one_minus_beta2 * g * g;
        float denom = sqrtf(vi) / c.bias2_sqrt + c.eps;
        m[i] = mi;
        v[i] = vi;
        param[i] = p + c.neg_step * mi / denom;
    }
}

void sgd_update(float keep, float neg_lr, float *param, const float *grad, size_t n) {
#pragma omp parallel for schedule(static) if (n >= PARALLEL_MIN)
    for (size_t i = 0; i < n; i++) param[i] = param[i] * keep + neg_lr * grad[i];
}
