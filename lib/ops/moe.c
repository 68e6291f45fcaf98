/* The mixture-of-experts ops (ops.h): a token's experts and routing weights
 * from its router logits, the weighted sum of the experts' outputs, and the
 * backward of both. The experts themselves are matrix products over the
 * rows routed to each (lib/model/layer.c). */
#include "ops.h"

#include <math.h>
#include <string.h>

/* Row r's routing from its probabilities p: the k largest (or the k experts
 * of replay, when given), their weights renormalised when norm. */
static void route_row(const float *p, int32_t *s, float *wr, const int32_t *replay, int n_experts, int k, bool norm) {
    double sum = 0;
    for (int j = 0; j < k; j++) {
        int best = -1;
        if (replay) {
            best = replay[j];
        } else { /* the k largest, one pass each: k and E are small, and the first of equals wins */
            for (int x = 0; x < n_experts; x++) {
                bool taken = false;
                for (int i = 0; i < j && !taken; i++) taken = s[i] == x;
                if (!taken && (best < 0 || p[x] > p[best])) best = x;
            }
        }
        s[j] = best;
        wr[j] = p[best];
        sum += p[best];
    }
    if (norm)
        for (int j = 0; j < k; j++) wr[j] = (float)(wr[j] / sum);
}

/* moe_route_forward and moe_route_replay_forward (replay NULL: none). */
static void route(float *probs, int32_t *sel, float *w, const float *logits, const int32_t *replay, int n,
                  int n_experts, int k, bool norm) {
#pragma omp parallel for schedule(static) if (n > 16)
    for (int r = 0; r < n; r++) {
        float *p = probs + (size_t)r * n_experts;
        const int32_t *rep = replay && replay[(size_t)r * k] >= 0 ? replay + (size_t)r * k : NULL;
        memmove(p, logits + (size_t)r * n_experts, (size_t)n_experts * sizeof *p);
        softmax_row(p, n_experts);
        route_row(p, sel + (size_t)r * k, w + (size_t)r * k, rep, n_experts, k, norm);
    }
}

void moe_route_forward(float *probs, int32_t *sel, float *w, const float *logits, int n, int n_experts, int k,
                       bool norm) {
    route(probs, sel, w, logits, NULL, n, n_experts, k, norm);
}

void moe_route_replay_forward(float *probs, int32_t *sel, float *w, const float *logits, const int32_t *replay, int n,
                              int n_experts, int k, bool norm) {
    route(probs, sel, w, logits, replay, n, n_experts, k, norm);
}

void moe_route_backward(float *dlogits, const float *dw, const float *probs, const int32_t *sel, const float *w, int n,
                        int n_experts, int k, bool norm) {
#pragma omp parallel for schedule(static) if (n > 16)
    for (int r = 0; r < n; r++) {
        const float *p = probs + (size_t)r * n_experts, *dwr = dw + (size_t)r * k, *wr = w + (size_t)r * k;
        const int32_t *s = sel + (size_t)r * k;
        float *dz = dlogits + (size_t)r * n_experts;
        /* ds_j = d(loss)/d(probs[sel_j]); with norm, w_j = s_j / S gives
         * ds_j = (dw_j - sum_i dw_i w_i) / S */
        double dot = 0, S = 0, mean = 0;
        for (int j = 0; j < k; j++) dot += (double)dwr[j] * wr[j], S += p[s[j]];
#define DS(j) (norm ? (dwr[j] - dot) / S : (double)dwr[j])
        /* softmax: dz_x = p_x (dp_x - sum_y p_y dp_y), dp nonzero at the selected only */
        for (int j = 0; j < k; j++) mean += p[s[j]] * DS(j);
        for (int x = 0; x < n_experts; x++) dz[x] = (float)(-p[x] * mean);
        for (int j = 0; j < k; j++) dz[s[j]] = (float)(p[s[j]] * (DS(j) - mean));
#undef DS
    }
}

double moe_balance_backward(float *dlogits, const float *probs, const int32_t *sel, const float *mult, int n,
                            int n_experts, int k, double scale) {
    int E = n_experts;
    double T = 0, f[E], P[E];
    for (int x = 0; x < E; x++) f[x] = P[x] = 0;
    for (int r = 0; r < n; r++) { /* in row order: the same sums for any thread count */
        double m = mult ? mult[r] : 1;
        T += m;
        for (int j = 0; j < k; j++) f[sel[(size_t)r * k + j]] += m;
        for (int x = 0; x < E; x++) P[x] += m * probs[(size_t)r * E + x];
    }
    if (T <= 0) return 0;
    double balance = 0;
    for (int x = 0; x < E; x++) f[x] /= T, balance += f[x] * P[x] / T;
    balance *= E;
    if (scale == 0) return balance;
#pragma omp parallel for schedule(static) if (n > 16)
    for (int r = 0; r < n; r++) {
        const float *p = probs + (size_t)r * E;
        float *dz = dlogits + (size_t)r * E;
        double g = scale * E * (mult ? mult[r] : 1), dot = 0;
        for (int x = 0; x < E; x++) dot += p[x] * f[x];
        /* softmax: dz_y += p_y (g f_y - sum_x p_x g f_x) */
        for (int x = 0; x < E; x++) dz[x] += (float)(g * p[x] * (f[x] - dot));
    }
    return balance;
}

void moe_combine_forward(float *out, const float *ye, const float *w, const int32_t *slot, int n, int k, int d) {
#pragma omp parallel for schedule(static) if ((size_t)n * d > 4096)
    for (int r = 0; r < n; r++) {
        float *o = out + (size_t)r * d;
        for (int c = 0; c < d; c++) o[c] = 0;
        for (int j = 0; j < k; j++) {
            const float *y = ye + (size_t)slot[(size_t)r * k + j] * d;
            float wj = w[(size_t)r * k + j];
#pragma omp simd
            for (int c = 0; c < d; c++) o[c] += wj * y[c];
        }
    }
}

void moe_combine_backward(float *dye, float *dw, const float *dout, const float *ye, const float *w,
                          const int32_t *slot, int n, int k, int d) {
#pragma omp parallel for schedule(static) if ((size_t)n * d > 4096)
    for (int r = 0; r < n; r++) {
        const float *g = dout + (size_t)r * d;
        for (int j = 0; j < k; j++) {
            size_t a = (size_t)r * k + j, at = (size_t)slot[a] * d;
            float wj = w[a];
            double dot = 0;
            for (int c = 0; c < d; c++) {
                dye[at + c] = wj * g[c];
                dot += (double)g[c] * ye[at + c];
            }
            if (dw) dw[a] = (float)dot;
        }
    }
}

void moe_group(int32_t *row_of, int32_t *slot_of, int *offsets, const int32_t *sel, int n, int k, int n_experts) {
    memset(offsets, 0, (size_t)(n_experts + 1) * sizeof *offsets);
    size_t nk = (size_t)n * k;
    for (size_t a = 0; a < nk; a++) offsets[sel[a] + 1]++;
    for (int x = 0; x < n_experts; x++) offsets[x + 1] += offsets[x];
    /* slots filled in assignment order: each expert's rows stay in row order */
    for (size_t a = 0; a < nk; a++) {
        int32_t at = offsets[sel[a]]++;
        slot_of[a] = at;
        row_of[at] = (int32_t)(a / (size_t)k);
    }
    for (int x = n_experts; x > 0; x--) offsets[x] = offsets[x - 1];
    offsets[0] = 0;
}
