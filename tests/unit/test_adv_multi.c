/* normalize-then-sum (GDPO) against a float64 reference written out plainly
 * here (long double sums, the leave-one-out mean of the others taken
 * literally), and the adv_multi reader: weights, new rewards met mid-group,
 * repeated keys, unused weights.
 *
 * Tolerance: 1e-12 relative (absolute near 0); the two sides differ only in
 * summation order and the algebraic form of the leave-one-out baseline. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "adv/adv_multi.h"
#include "check.h"
#include "util/rng.h"

#define TOL 1e-12
#define CHECK_REL(a, b) CHECK_NEAR((a), (b), TOL * (1 + fabs(b)))

/* One reward's advantages in its group; returns false when it is flat. */
static bool ref_column(const double *v, const bool *has, size_t n, adv_baseline bl, adv_scale sc, double *a) {
    size_t m = 0;
    long double sum = 0;
    double first = 0;
    bool equal = true;
    for (size_t i = 0; i < n; i++) {
        if (!has[i]) continue;
        if (m == 0) first = v[i];
        else if (v[i] != first) equal = false;
        sum += v[i];
        m++;
    }
    if (m < 2 || equal) return false;
    long double mean = sum / m, ss = 0;
    for (size_t i = 0; i < n; i++)
        if (has[i]) ss += (v[i] - mean) * (v[i] - mean);
    double sd = (double)sqrtl(ss / (m - 1));
    for (size_t i = 0; i < n; i++) {
        if (!has[i]) continue;
        long double base = mean;
        if (bl == ADV_BASELINE_LOO) base = (sum - v[i]) / (m - 1);
        double d = (double)(v[i] - base);
        a[i] = sc == ADV_SCALE_NONE ? d : d / (sd + ADV_STD_EPS);
    }
    return true;
}

static bool rand_bool(rng_stream *r, double p) { return rng_uniform(r) < p; }

int main(void) {
    TEST("normalize-then-sum matches the plain reference on random groups");
    {
        rng_stream r;
        rng_init(&r, 20260105, "adv_multi", 9, 0);
        int checked = 0;
        for (int trial = 0; trial < 3000; trial++) {
            size_t n = 2 + (size_t)(rng_uniform(&r) * 9), f = 1 + (size_t)(rng_uniform(&r) * 4);
            double val[10 * 5], w[5], S[10], col[10], col_a[10], ref_S[10], a[10];
            bool has[10 * 5], valid[10], col_valid[10], ref_valid[10];
            for (size_t k = 0; k < f; k++) w[k] = rng_uniform(&r) * 4 - 2;
            bool flat_col = rand_bool(&r, 0.2);
            for (size_t i = 0; i < n; i++)
                for (size_t k = 0; k < f; k++) {
                    has[i * f + k] = rand_bool(&r, 0.85);
                    double x = rand_bool(&r, 0.5) ? (double)(rng_uniform(&r) < 0.5) : rng_uniform(&r) * 3 - 1;
                    val[i * f + k] = flat_col && k == 0 ? 0.1 : x;
                }
            adv_baseline bl = rand_bool(&r, 0.5) ? ADV_BASELINE_LOO : ADV_BASELINE_MEAN;
            adv_scale sc = rand_bool(&r, 0.5) ? ADV_SCALE_NONE : ADV_SCALE_GROUP;
            bool flat = adv_normalize_then_sum(val, has, n, f, w, bl, sc, col, col_a, col_valid, S, valid);

            bool ref_flat = true;
            for (size_t i = 0; i < n; i++) {
                ref_S[i] = 0;
                ref_valid[i] = false;
            }
            for (size_t k = 0; k < f; k++) {
                double v[10];
                bool h[10];
                for (size_t i = 0; i < n; i++) {
                    v[i] = val[i * f + k];
                    h[i] = has[i * f + k];
                    ref_valid[i] = ref_valid[i] || h[i];
                }
                if (!ref_column(v, h, n, bl, sc, a)) continue;
                ref_flat = false;
                for (size_t i = 0; i < n; i++)
                    if (h[i]) ref_S[i] += w[k] * a[i];
            }
            CHECK(flat == ref_flat);
            for (size_t i = 0; i < n; i++) {
                CHECK(valid[i] == ref_valid[i]);
                if (!valid[i]) continue;
                if (flat) CHECK(S[i] == 0 && !signbit(S[i])); /* exactly 0, never -0 */
                else CHECK_REL(S[i], ref_S[i]);
                checked++;
            }
        }
        CHECK(checked > 10000);
    }

    TEST("--weights: NAME[:W] list, the last ':' splits, W defaults to 1; errors are usage errors");
    {
        adv_multi m;
        adv_multi_init(&m);
        gerr e = {0};
        CHECK(adv_multi_set_weights(&m, "answer,format:0.2,judge:v2:-1.5", &e) == 0);
        CHECK(m.n_obj == 3);
        CHECK(!strcmp(m.obj[0].name, "answer") && m.obj[0].weight == 1);
        CHECK(!strcmp(m.obj[1].name, "format") && m.obj[1].weight == 0.2);
        CHECK(!strcmp(m.obj[2].name, "judge:v2") && m.obj[2].weight == -1.5);
        adv_multi_free(&m);
        const char *bad[] = {"", "a:", ":1", "a:x", "a:1e999", "a:nan", "a,b,a", "a,,b"};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            adv_multi_init(&m);
            CHECK_EQ_INT(adv_multi_set_weights(&m, bad[i], &e), EX_USAGE);
            adv_multi_free(&m);
        }
        adv_multi_mode mode;
        CHECK(adv_parse_multi("normalize-then-sum", &mode, &e) == 0 && mode == ADV_NORMALIZE_THEN_SUM);
        CHECK(adv_parse_multi("sum-then-normalize", &mode, &e) == 0 && mode == ADV_SUM_THEN_NORMALIZE);
        CHECK_EQ_INT(adv_parse_multi("gdpo", &mode, &e), EX_USAGE);
    }

    TEST("records: a reward first met mid-group is absent from the rows before it; weights apply");
    {
        const char *lines[] = {
            "{\"id\":\"a\",\"rewards\":{\"x\":1}}",
            "{\"id\":\"a\",\"rewards\":{\"x\":0,\"y\":null}}",
            "{\"id\":\"a\",\"rewards\":{\"y\":2,\"x\":1}}",
            "{\"id\":\"a\",\"rewards\":{\"y\":4}}",
        };
        adv_multi m;
        adv_multi_init(&m);
        gerr e = {0};
        CHECK(adv_multi_set_weights(&m, "y:0.5,x:2", &e) == 0);
        adv_multi_begin(&m, 4);
        record rec;
        record_init(&rec);
        for (size_t i = 0; i < 4; i++) {
            CHECK(record_parse(&rec, lines[i], strlen(lines[i]), "t.jsonl", (long)i + 1, &e) == 0);
            CHECK(adv_multi_load(&m, i, &rec, &e) == 0);
        }
        double S[4];
        bool valid[4];
        CHECK(!adv_multi_sums(&m, ADV_BASELINE_MEAN, ADV_SCALE_NONE, S, valid));
        /* x: 1, 0, 1 (mean 2/3); y: -, null, 2, 4 (mean 3) */
        CHECK(valid[0] && valid[1] && valid[2] && valid[3]);
        CHECK_REL(S[0], 2 * (1 - 2.0 / 3));
        CHECK_REL(S[1], 2 * (0 - 2.0 / 3));
        CHECK_REL(S[2], 2 * (1 - 2.0 / 3) + 0.5 * (2 - 3));
        CHECK_REL(S[3], 0.5 * (4 - 3));
        CHECK(adv_multi_check_unused(&m, "t.jsonl", &e) == 0);

        /* a repeated key is an error naming the line */
        const char *twice = "{\"id\":\"a\",\"rewards\":{\"x\":1,\"x\":null}}";
        adv_multi_begin(&m, 1);
        CHECK(record_parse(&rec, twice, strlen(twice), "t.jsonl", 9, &e) == 0);
        CHECK_EQ_INT(adv_multi_load(&m, 0, &rec, &e), EX_DATAERR);
        CHECK(strstr(e.msg, "t.jsonl:9") && strstr(e.msg, "appears twice"));
        /* a name --weights does not give */
        const char *other = "{\"id\":\"a\",\"rewards\":{\"z\":1}}";
        adv_multi_begin(&m, 1);
        CHECK(record_parse(&rec, other, strlen(other), "t.jsonl", 10, &e) == 0);
        CHECK_EQ_INT(adv_multi_load(&m, 0, &rec, &e), EX_DATAERR);
        CHECK(strstr(e.msg, "\"z\" has no weight"));
        record_free(&rec);
        adv_multi_free(&m);

        adv_multi_init(&m);
        CHECK(adv_multi_set_weights(&m, "never", &e) == 0);
        CHECK_EQ_INT(adv_multi_check_unused(&m, "t.jsonl", &e), EX_DATAERR);
        adv_multi_free(&m);
    }

    TEST("a flat group: every reward flat (or one value each) gives exactly 0");
    {
        double val[] = {1, 0.1, 5, 1, 0.1, 7, 1, 0.1, 9};
        bool has[] = {true, true, true, true, true, false, true, true, false};
        double w[] = {1, -2, 3}, S[3], col[3], col_a[3];
        bool valid[3], col_valid[3];
        CHECK(adv_normalize_then_sum(val, has, 3, 3, w, ADV_BASELINE_MEAN, ADV_SCALE_GROUP, col, col_a, col_valid,
                                     S, valid));
        CHECK(S[0] == 0 && S[1] == 0 && S[2] == 0 && !signbit(S[1]));
    }
    check_end_test();
    return check_failed_tests != 0;
}
