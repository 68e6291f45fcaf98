/* The math of grpo-advantage against a float64 reference written out
 * plainly here (explicit leave-one-out sums, long double sums of squares),
 * plus the id set and the --stats object.
 *
 * Tolerance: 1e-12 relative (1e-12 absolute near 0). The library and the
 * reference differ only in summation order and in the algebraic form of
 * the leave-one-out baseline, which moves results by a few ulps. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "util/idset.h"
#include "adv/adv_stats.h"
#include "adv/advantage.h"
#include "check.h"

#define TOL 1e-12
#define CHECK_REL(a, b) CHECK_NEAR((a), (b), TOL * (1 + fabs(b)))

/* ---- the reference ---------------------------------------------------------- */

static double ref_mean(const double *r, const bool *valid, size_t n, size_t skip) {
    long double sum = 0;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (!valid[i] || i == skip) continue;
        sum += r[i];
        m++;
    }
    return (double)(sum / m);
}

static double ref_std(const double *r, const bool *valid, size_t n) {
    double mean = ref_mean(r, valid, n, SIZE_MAX);
    long double ss = 0;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (!valid[i]) continue;
        ss += (long double)(r[i] - mean) * (r[i] - mean);
        m++;
    }
    return sqrt((double)(ss / (m - 1)));
}

/* Non-flat groups only (the flat rule is checked on its own). */
static double ref_advantage(const double *r, const bool *valid, size_t n, size_t i, adv_scale scale,
                            adv_baseline baseline, double batch_std) {
    double b = baseline == ADV_BASELINE_MEAN ? ref_mean(r, valid, n, SIZE_MAX) : ref_mean(r, valid, n, i);
    double d = r[i] - b;
    if (scale == ADV_SCALE_GROUP) return d / (ref_std(r, valid, n) + 1e-4);
    if (scale == ADV_SCALE_BATCH) return d / (batch_std + 1e-4);
    return d;
}

/* xorshift64*: a fixed-seed stream for random groups */
static double next_unit(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (double)((*s * 0x2545F4914F6CDD1Dull) >> 11) * 0x1.0p-53;
}

static const adv_scale scales[] = {ADV_SCALE_GROUP, ADV_SCALE_BATCH, ADV_SCALE_NONE};
static const adv_baseline baselines[] = {ADV_BASELINE_MEAN, ADV_BASELINE_LOO};

int main(void) {
    TEST("known values: rewards 1,2,3,4");
    {
        const double r[] = {1, 2, 3, 4};
        const bool v[] = {true, true, true, true};
        double a[4];
        adv_group_stats s = adv_group_advantages(r, v, 4, ADV_SCALE_GROUP, ADV_BASELINE_MEAN, 0, a);
        CHECK_EQ_INT(s.n_valid, 4);
        CHECK(!s.flat);
        CHECK_REL(s.mean, 2.5);
        CHECK_REL(s.std, 1.2909944487358056); /* sqrt(5/3) */
        CHECK_REL(a[0], -1.5 / (1.2909944487358056 + 1e-4));
        CHECK_REL(a[3], 1.5 / (1.2909944487358056 + 1e-4));
        adv_group_advantages(r, v, 4, ADV_SCALE_NONE, ADV_BASELINE_LOO, 0, a);
        CHECK_REL(a[0], 1 - 3.0);      /* 1 - mean(2,3,4) */
        CHECK_REL(a[2], 3 - 7.0 / 3);  /* 3 - mean(1,2,4) */
        adv_group_advantages(r, v, 4, ADV_SCALE_BATCH, ADV_BASELINE_MEAN, 2.0, a);
        CHECK_REL(a[1], -0.5 / 2.0001);
    }

    TEST("random groups, every scale x baseline, against the float64 reference");
    {
        uint64_t seed = 0x9E3779B97F4A7C15ull;
        int checked = 0;
        for (int g = 0; g < 500; g++) {
            size_t n = 2 + (size_t)(next_unit(&seed) * 7); /* 2..8 */
            double r[8], a[8];
            bool v[8];
            size_t n_valid = 0;
            for (size_t i = 0; i < n; i++) {
                r[i] = (next_unit(&seed) - 0.3) * 5;
                v[i] = next_unit(&seed) > 0.15;
                n_valid += v[i];
            }
            if (n_valid < 2) continue;
            double batch_std = 0.2 + next_unit(&seed);
            for (int si = 0; si < 3; si++)
                for (int bi = 0; bi < 2; bi++) {
                    for (size_t i = 0; i < n; i++) a[i] = -999;
                    adv_group_advantages(r, v, n, scales[si], baselines[bi], batch_std, a);
                    for (size_t i = 0; i < n; i++) {
                        if (!v[i]) {
                            CHECK(a[i] == -999); /* null rewards: left alone */
                            continue;
                        }
                        CHECK_REL(a[i], ref_advantage(r, v, n, i, scales[si], baselines[bi], batch_std));
                        checked++;
                    }
                }
        }
        CHECK(checked > 10000);
    }

    TEST("group statistics skip null rewards");
    {
        const double r[] = {0.25, 1e300, 0.75, -2};
        const bool v[] = {true, false, true, true};
        adv_group_stats s = adv_group_stats_of(r, v, 4);
        CHECK_EQ_INT(s.n_valid, 3);
        CHECK_REL(s.mean, ref_mean(r, v, 4, SIZE_MAX));
        CHECK_REL(s.std, ref_std(r, v, 4));
    }

    TEST("flat groups get exactly 0 in every mode");
    {
        const double r[] = {0.1, 0.1, 0.1, 7};
        const bool v[] = {true, true, true, false};
        double a[4] = {1, 1, 1, 1};
        /* the point of the rule: the computed mean of three 0.1 is not 0.1 */
        CHECK((0.1 + 0.1 + 0.1) / 3 != 0.1);
        for (int si = 0; si < 3; si++)
            for (int bi = 0; bi < 2; bi++) {
                adv_group_stats s = adv_group_advantages(r, v, 4, scales[si], baselines[bi], 0.5, a);
                CHECK(s.flat);
                CHECK(s.std == 0);
                CHECK(a[0] == 0 && a[1] == 0 && a[2] == 0 && !signbit(a[0]));
                CHECK(a[3] == 1); /* the null one untouched */
            }
    }

    TEST("one valid reward, or none, is flat");
    {
        const double r[] = {3, 4};
        const bool one[] = {false, true}, none[] = {false, false};
        double a[2] = {5, 5};
        adv_group_stats s = adv_group_advantages(r, one, 2, ADV_SCALE_GROUP, ADV_BASELINE_LOO, 0, a);
        CHECK(s.flat);
        CHECK_EQ_INT(s.n_valid, 1);
        CHECK(a[0] == 5 && a[1] == 0);
        s = adv_group_advantages(r, none, 2, ADV_SCALE_GROUP, ADV_BASELINE_MEAN, 0, a);
        CHECK(s.flat);
        CHECK_EQ_INT(s.n_valid, 0);
        CHECK(s.mean == 0 && s.std == 0);
    }

    TEST("nearly equal rewards are not flat");
    {
        const double r[] = {0.3, 0.1 + 0.2};
        const bool v[] = {true, true};
        double a[2];
        adv_group_stats s = adv_group_advantages(r, v, 2, ADV_SCALE_NONE, ADV_BASELINE_MEAN, 0, a);
        CHECK(!s.flat);
        CHECK(a[0] <= 0 && a[1] >= 0 && a[1] - a[0] > 0);
    }

    TEST("adv_std: two-pass unbiased, 0 below two values");
    {
        double v[1000];
        bool all[1000];
        uint64_t seed = 42;
        for (int i = 0; i < 1000; i++) {
            v[i] = 1e6 + next_unit(&seed); /* a large offset tests the two-pass form */
            all[i] = true;
        }
        CHECK_REL(adv_std(v, 1000), ref_std(v, all, 1000));
        CHECK(adv_std(v, 1) == 0);
        CHECK(adv_std(v, 0) == 0);
    }

    TEST("Welford moments agree with the two-pass std");
    {
        welford m = {0};
        CHECK(isnan(welford_std(&m)));
        double v[200];
        bool all[200];
        uint64_t seed = 7;
        for (int i = 0; i < 200; i++) {
            v[i] = next_unit(&seed) * 3 - 1;
            all[i] = true;
            welford_push(&m, v[i]);
            if (i == 0) CHECK(isnan(welford_std(&m)));
        }
        CHECK_REL(m.mean, ref_mean(v, all, 200, SIZE_MAX));
        CHECK_REL(welford_std(&m), ref_std(v, all, 200));
    }

    TEST("flag values parse; others are usage errors");
    {
        adv_scale s;
        adv_baseline b;
        gerr e = {0};
        CHECK(adv_parse_scale("batch", &s, &e) == 0 && s == ADV_SCALE_BATCH);
        CHECK(adv_parse_scale("none", &s, &e) == 0 && s == ADV_SCALE_NONE);
        CHECK(adv_parse_scale("group", &s, &e) == 0 && s == ADV_SCALE_GROUP);
        CHECK(adv_parse_baseline("loo", &b, &e) == 0 && b == ADV_BASELINE_LOO);
        CHECK(adv_parse_baseline("mean", &b, &e) == 0 && b == ADV_BASELINE_MEAN);
        CHECK_EQ_INT(adv_parse_scale("std", &s, &e), EX_USAGE);
        CHECK_EQ_INT(adv_parse_baseline("median", &b, &e), EX_USAGE);
        adv_opts o;
        adv_opts_default(&o);
        CHECK(o.scale == ADV_SCALE_GROUP && o.baseline == ADV_BASELINE_MEAN && o.shard.count == 1);
        CHECK(!o.drop_flat && !o.allow_partial && !o.stats);
    }

    TEST("id set: finds what was added, with its line, across growth");
    {
        idset s;
        idset_init(&s);
        CHECK(idset_find(&s, "a", 1) == 0);
        char id[32];
        for (int i = 1; i <= 5000; i++) {
            int len = snprintf(id, sizeof id, "prompt-%d", i);
            idset_add(&s, id, (size_t)len, i * 10);
        }
        int found = 0;
        for (int i = 1; i <= 5000; i++) {
            int len = snprintf(id, sizeof id, "prompt-%d", i);
            found += idset_find(&s, id, (size_t)len) == i * 10;
        }
        CHECK_EQ_INT(found, 5000);
        CHECK(idset_find(&s, "prompt-0", 8) == 0);
        CHECK(idset_find(&s, "prompt-1", 7) == 0); /* a prefix is another id */
        CHECK(idset_find(&s, "", 0) == 0);
        CHECK(idset_add(&s, "", 0, 3) == 0);
        CHECK(idset_find(&s, "", 0) == 3);
        CHECK(idset_add(&s, "", 0, 7) == 3); /* the first line is kept */
        CHECK(idset_find(&s, "", 0) == 3);
        idset_free(&s);
    }

    TEST("stats: rewards per function, sorted, nulls left out");
    {
        const char *lines[] = {
            "{\"id\":\"x\",\"rewards\":{\"zeta\":1,\"acc\":0.5}}",
            "{\"id\":\"x\",\"rewards\":{\"acc\":null,\"zeta\":3}}",
            "{\"id\":\"x\",\"rewards\":null}",
            "{\"id\":\"x\"}",
            "{\"id\":\"x\",\"rewards\":{\"acc\":1.5,\"f\\\"q\":2}}",
        };
        adv_stats st;
        adv_stats_init(&st);
        record r;
        record_init(&r);
        gerr e = {0};
        for (int i = 0; i < 5; i++) {
            CHECK(record_parse(&r, lines[i], strlen(lines[i]), "s.jsonl", i + 1, &e) == 0);
            CHECK(adv_stats_read_rewards(&st, &r, &e) == 0);
        }
        st.records = 5;
        st.groups = 1;
        st.records_written = 5;
        st.group_std_sum = 0.5;
        welford_push(&st.reward, 1);
        welford_push(&st.reward, 2);
        strbuf out = {0};
        adv_stats_to_json(&st, &out);
        CHECK_EQ_STR(out.data,
                     "{\"records\":5,\"groups\":1,\"groups_flat\":0,\"groups_dropped\":0,\"null_rewards\":0,"
                     "\"records_written\":5,\"reward_mean\":1.5,\"reward_std\":0.5,"
                     "\"reward_std_batch\":0.7071067811865476,\"frac_reward_zero_std\":0,"
                     "\"rewards/acc/mean\":1,\"rewards/acc/std\":0.7071067811865476,"
                     "\"rewards/f\\\"q/mean\":2,\"rewards/f\\\"q/std\":null,"
                     "\"rewards/zeta/mean\":2,\"rewards/zeta/std\":1.4142135623730951}\n");
        sb_free(&out);
        record_free(&r);
        adv_stats_free(&st);
    }

    TEST("stats: a bad rewards field names file, line and key");
    {
        const char *bad[] = {"{\"rewards\":[1]}", "{\"rewards\":{\"f\":\"1\"}}", "{\"rewards\":{\"f\":1e400}}",
                             "{\"rewards\":{\"f\":true}}"};
        const char *want[] = {"s.jsonl:9: field \"rewards\": expected an object",
                              "s.jsonl:9: field \"rewards\": key \"f\": expected a number or null, got string",
                              "s.jsonl:9: field \"rewards\": key \"f\": expected a finite number",
                              "s.jsonl:9: field \"rewards\": key \"f\": expected a number or null, got true"};
        record r;
        record_init(&r);
        for (int i = 0; i < 4; i++) {
            gerr e = {0};
            CHECK(record_parse(&r, bad[i], strlen(bad[i]), "s.jsonl", 9, &e) == 0);
            CHECK_EQ_INT(adv_stats_read_rewards(NULL, &r, &e), EX_DATAERR);
            if (strncmp(e.msg, want[i], strlen(want[i]))) printf("#   got: %s\n", e.msg);
            CHECK(!strncmp(e.msg, want[i], strlen(want[i])));
        }
        record_free(&r);
    }

    TEST("stats of nothing are null, not 0");
    {
        adv_stats st;
        adv_stats_init(&st);
        strbuf out = {0};
        adv_stats_to_json(&st, &out);
        CHECK_EQ_STR(out.data, "{\"records\":0,\"groups\":0,\"groups_flat\":0,\"groups_dropped\":0,"
                               "\"null_rewards\":0,\"records_written\":0,\"reward_mean\":null,"
                               "\"reward_std\":null,\"reward_std_batch\":null,\"frac_reward_zero_std\":null}\n");
        sb_free(&out);
        adv_stats_free(&st);
    }
    return check_done();
}
