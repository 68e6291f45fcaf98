/* RMSNorm, forward and backward. */
#include "ops.h"

#include <math.h>

void rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int n, int d, float eps) {
#pragma omp parallel for schedule(static) if (n > 1)
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * d;
        float *o = out + (size_t)r * d;
        double ss = 0; /* double: the mean of squares should not depend on d's size */
        for (int i = 0; i < d; i++) ss += (double)xr[i] * xr[i];
        float s = (float)(1.0 / sqrt(ss / d + (double)eps));
        if (rstd) rstd[r] = s;
        /* HF rounds x * rstd to the activation dtype before scaling by w. */
        for (int i = 0; i < d; i++) o[i] = w[i] * (xr[i] * s);
    }
}

void rmsnorm_backward(float *dx, float *dw, const float *dy, const float *x, const float *w, const float *rstd,
                      int n, int d) {
    if (dw) {
        /* columns split across threads, so no two threads add to one dw[i] */
#pragma omp parallel for schedule(static) if ((size_t)n * d > 65536)
        for (int i = 0; i < d; i++) {
            double acc = 0;
            for (int r = 0; r < n; r++) acc += (double)dy[(size_t)r * d + i] * x[(size_t)r * d + i] * rstd[r];
            dw[i] += (float)acc;
        }
    }
#pragma omp parallel for schedule(static) if (n > 1)
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * d, *dyr = dy + (size_t)r * d;
        float *dxr = dx + (size_t)r * d;
        double dot = 0;
        for (int i = 0; i < d; i++) dot += (double)w[i] * dyr[i] * xr[i];
        float s = rstd[r], c = (float)((double)s * s * s * dot / d);
        for (int i = 0; i < d; i++) dxr[i] = s * w[i] * dyr[i] - c * xr[i];
    }
}
