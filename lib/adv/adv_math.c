/* The arithmetic of group-relative advantages, free of I/O so that unit
 * tests can hold it against a float64 reference. */
#include <math.h>

#include "advantage.h"

adv_group_stats adv_group_stats_of(const double *r, const bool *valid, size_t n) {
    adv_group_stats s = {0};
    double sum = 0, first = 0;
    bool all_equal = true;
    for (size_t i = 0; i < n; i++) {
        if (!valid[i]) continue;
        if (s.n_valid == 0) first = r[i];
        else if (r[i] != first) all_equal = false;
        sum += r[i];
        s.n_valid++;
    }
    if (s.n_valid == 0) {
        s.flat = true;
        return s;
    }
    s.mean = sum / (double)s.n_valid;
    /* Equal rewards must give exactly 0 and std 0: the computed mean of equal
     * values is not always that value (3 x 0.1 sums to 0.30000000000000004). */
    s.flat = s.n_valid < 2 || all_equal;
    if (s.flat) return s;
    double ss = 0;
    for (size_t i = 0; i < n; i++) {
        if (!valid[i]) continue;
        double d = r[i] - s.mean;
        ss += d * d;
    }
    s.std = sqrt(ss / (double)(s.n_valid - 1));
    return s;
}

adv_group_stats adv_group_advantages(const double *r, const bool *valid, size_t n, adv_scale scale,
                                     adv_baseline baseline, double batch_std, double *a) {
    adv_group_stats s = adv_group_stats_of(r, valid, n);
    double m = (double)s.n_valid;
    /* r_i - mean(others) = m/(m-1) * (r_i - mean): the same value without
     * the cancellation of subtracting r_i from the group's sum. */
    double loo_factor = s.n_valid > 1 ? m / (m - 1) : 1;
    double denom = scale == ADV_SCALE_GROUP ? s.std + ADV_STD_EPS
                 : scale == ADV_SCALE_BATCH ? batch_std + ADV_STD_EPS
                                            : 1;
    for (size_t i = 0; i < n; i++) {
        if (!valid[i]) continue;
        if (s.flat) {
            a[i] = 0;
            continue;
        }
        double d = r[i] - s.mean;
        if (baseline == ADV_BASELINE_LOO) d *= loo_factor;
        a[i] = scale == ADV_SCALE_NONE ? d : d / denom;
    }
    return s;
}

double adv_std(const double *v, size_t n) {
    if (n < 2) return 0;
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += v[i];
    double mean = sum / (double)n, ss = 0;
    for (size_t i = 0; i < n; i++) ss += (v[i] - mean) * (v[i] - mean);
    return sqrt(ss / (double)(n - 1));
}
