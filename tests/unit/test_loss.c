/* The GRPO loss family (lib/train/loss.h) against a float64 reference
 * written out here from the formulas (per-token loss matrix, then each
 * aggregation literally), and its gradient against central finite
 * differences of that reference, for every loss kind x token/sequence
 * importance x beta 0/0.04, with clipping active on both sides.
 *
 * Tolerances: the loss and metrics 1e-12 relative (both in double on the
 * same float inputs; only summation order differs). The gradient is float:
 * |dlogp - fd| <= 1e-6 |fd| + 1e-9 (float rounding 6e-8 relative; the
 * finite difference, h = 1e-6, is good to ~1e-9 absolute). Random ratios
 * are kept 1e-3 away from the clip bounds so no difference straddles a kink.
 *
 * Driver mode for tests/ref/loss_ref.py (PyTorch autograd):
 *   test_loss --ref-json IN OUT
 * reads cases {"cases":[{"loss","sequence_level","epsilon_low","epsilon_high",
 * "beta","max_new_tokens","completions":[{"logp","old_logp","ref_logp",
 * "entropy","advantage","masked"}]}]} and writes {"cases":[{"loss",
 * "policy_loss","kl","entropy","clip_low","clip_high","clip_region",
 * "dlogp":[[...]...]}]} (null for a metric that does not apply; masked
 * completions get zeros). A completion may carry a multi-turn record's
 * "completion_mask": its arrays are then per completion token, and only the
 * mask-1 entries reach the loss, picked as grpo-update picks them
 * (completion_mask_select); mask-0 tokens get zeros. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/mapped.h"
#include "io/outstream.h"
#include "io/completion_mask.h"
#include "train/loss.h"
#include "util/strbuf.h"
#include "check.h"

#define MAXC 8  /* completions per test batch */
#define MAXT 12 /* tokens per completion */

typedef struct {
    int n_comp;
    int len[MAXC];
    bool masked[MAXC];
    double adv[MAXC];
    float logp[MAXC][MAXT], old[MAXC][MAXT], ref[MAXC][MAXT], ent[MAXC][MAXT];
    int max_new_tokens;
} batch;

static loss_batch totals(const batch *b) {
    loss_batch t = {0, 0, b->max_new_tokens, -INFINITY};
    for (int i = 0; i < b->n_comp; i++) {
        if (b->masked[i]) continue;
        t.n_completions++;
        t.n_tokens += b->len[i];
    }
    return t;
}

/* loss_completion on plain arrays (no sampler log-probs of its own). */
static void run_one(const loss_opts *c, const loss_batch *t, int n, const float *logp, const float *old,
                    const float *ref, const float *ent, double adv, float *g, loss_stats *s) {
    loss_seq q = {n, logp, old, NULL, ref, ent, adv};
    loss_completion(c, t, &q, g, NULL, s);
}

/* Runs the library over the unmasked completions. */
static loss_stats run_loss(const loss_opts *c, const batch *b, bool with_ref, float dlogp[MAXC][MAXT]) {
    loss_stats s = {0};
    loss_batch t = totals(b);
    memset(dlogp, 0, sizeof(float[MAXC][MAXT]));
    for (int i = 0; i < b->n_comp; i++) {
        if (b->masked[i]) continue;
        run_one(c, &t, b->len[i], b->logp[i], b->old[i], with_ref ? b->ref[i] : NULL, b->ent[i], b->adv[i],
                        dlogp[i], &s);
    }
    return s;
}

/* ---- the reference ---------------------------------------------------------- */

/* The batch loss from logp (double, perturbed by the finite differences). */
static double ref_loss(const loss_opts *c, const batch *b, const double lp[MAXC][MAXT], bool policy_only) {
    double ptl[MAXC][MAXT];
    for (int i = 0; i < b->n_comp; i++) {
        if (b->masked[i]) continue;
        double seq = 0;
        for (int t = 0; t < b->len[i]; t++) seq += lp[i][t] - b->old[i][t];
        seq /= b->len[i] > 0 ? b->len[i] : 1;
        for (int t = 0; t < b->len[i]; t++) {
            double coef = exp(c->sequence_level ? seq : lp[i][t] - b->old[i][t]);
            double l1 = coef * b->adv[i];
            double l2 = fmin(fmax(coef, 1 - c->epsilon_low), 1 + c->epsilon_high) * b->adv[i];
            ptl[i][t] = -fmin(l1, l2);
            if (!policy_only && c->beta != 0) {
                double d = b->ref[i][t] - lp[i][t];
                ptl[i][t] += c->beta * (exp(d) - d - 1);
            }
        }
    }
    double sum = 0, seq_means = 0;
    long n = 0, tokens = 0;
    for (int i = 0; i < b->n_comp; i++) {
        if (b->masked[i]) continue;
        double s = 0;
        for (int t = 0; t < b->len[i]; t++) s += ptl[i][t];
        sum += s;
        seq_means += s / (b->len[i] > 0 ? b->len[i] : 1);
        n++;
        tokens += b->len[i];
    }
    switch (c->kind) {
    case LOSS_GRPO: return seq_means / n;
    case LOSS_BNPO:
    case LOSS_DAPO: return sum / tokens;
    case LOSS_DR_GRPO: return sum / ((double)n * b->max_new_tokens);
    case LOSS_CISPO:
    case LOSS_SAPO: break; /* checked against torch (tests/ref/loss_ref.py) */
    }
    return NAN;
}

/* xorshift64*: a fixed-seed stream */
static double next_unit(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (double)((*s * 0x2545F4914F6CDD1Dull) >> 11) * 0x1.0p-53;
}

/* True when no ratio the loss sees lies within 1e-3 of a clip bound. */
static bool away_from_kinks(const loss_opts *c, const batch *b) {
    double lo = 1 - c->epsilon_low, hi = 1 + c->epsilon_high;
    for (int i = 0; i < b->n_comp; i++) {
        double seq = 0;
        for (int t = 0; t < b->len[i]; t++) {
            double r = exp((double)b->logp[i][t] - b->old[i][t]);
            if (fabs(r - lo) < 1e-3 || fabs(r - hi) < 1e-3) return false;
            seq += (double)b->logp[i][t] - b->old[i][t];
        }
        double r = exp(seq / (b->len[i] > 0 ? b->len[i] : 1));
        if (fabs(r - lo) < 1e-3 || fabs(r - hi) < 1e-3) return false;
    }
    return true;
}

static void random_batch(uint64_t *seed, batch *b) {
    b->n_comp = 3 + (int)(next_unit(seed) * 5); /* 3..7 */
    b->max_new_tokens = MAXT;
    for (int i = 0; i < b->n_comp; i++) {
        b->len[i] = 1 + (int)(next_unit(seed) * MAXT);
        b->masked[i] = i == 1; /* one truncated completion left out */
        b->adv[i] = (next_unit(seed) - 0.5) * 3;
        /* sequence-level ratios drift less than token ones: a shared offset
         * moves some completions outside the clip range too */
        double shift = (next_unit(seed) - 0.5) * 0.8;
        for (int t = 0; t < b->len[i]; t++) {
            b->logp[i][t] = (float)(-0.05 - next_unit(seed) * 3);
            b->old[i][t] = (float)(b->logp[i][t] - shift - (next_unit(seed) - 0.5) * 0.8);
            b->ref[i][t] = (float)(b->logp[i][t] + (next_unit(seed) - 0.5) * 0.6);
            b->ent[i][t] = (float)(next_unit(seed) * 2);
        }
    }
}

static const loss_kind kinds[] = {LOSS_GRPO, LOSS_BNPO, LOSS_DR_GRPO, LOSS_DAPO};

static void check_against_reference(uint64_t *seed, const loss_opts *c, long *clipped_low, long *clipped_high) {
    batch b;
    do random_batch(seed, &b);
    while (!away_from_kinks(c, &b));
    float g[MAXC][MAXT];
    loss_stats s = run_loss(c, &b, c->beta != 0, g);
    double lp[MAXC][MAXT];
    for (int i = 0; i < b.n_comp; i++)
        for (int t = 0; t < b.len[i]; t++) lp[i][t] = b.logp[i][t];
    double want = ref_loss(c, &b, lp, false);
    CHECK_NEAR(s.loss, want, 1e-12 * (1 + fabs(want)));
    double want_policy = ref_loss(c, &b, lp, true);
    CHECK_NEAR(s.policy_loss, want_policy, 1e-12 * (1 + fabs(want_policy)));
    const double h = 1e-6;
    for (int i = 0; i < b.n_comp; i++) {
        for (int t = 0; t < b.len[i]; t++) {
            if (b.masked[i]) {
                CHECK(g[i][t] == 0);
                continue;
            }
            double keep = lp[i][t];
            lp[i][t] = keep + h;
            double up = ref_loss(c, &b, lp, false);
            lp[i][t] = keep - h;
            double down = ref_loss(c, &b, lp, false);
            lp[i][t] = keep;
            double fd = (up - down) / (2 * h);
            CHECK_NEAR(g[i][t], fd, 1e-6 * fabs(fd) + 1e-9);
        }
    }
    *clipped_low += s.clipped_low;
    *clipped_high += s.clipped_high;
}

/* ---- driver mode ---------------------------------------------------------------- */

static int driver_fail(const char *msg) {
    fprintf(stderr, "test_loss: %s\n", msg);
    return 1;
}

static bool read_floats(const cJSON *arr, float *out, int n) {
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) != n) return false;
    int i = 0;
    for (const cJSON *v = arr->child; v; v = v->next) {
        if (!cJSON_IsNumber(v)) return false;
        out[i++] = (float)v->valuedouble;
    }
    return true;
}

/* A completion's "completion_mask" into mask[0..n) (1s when absent);
 * false when present and not n 0s and 1s. */
static bool read_mask(const cJSON *cp, uint8_t *mask, int n, bool *present) {
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(cp, "completion_mask");
    *present = cJSON_IsArray(arr);
    memset(mask, 1, (size_t)n);
    if (!*present) return true;
    if (cJSON_GetArraySize(arr) != n) return false;
    int i = 0;
    for (const cJSON *v = arr->child; v; v = v->next, i++) {
        if (!cJSON_IsNumber(v) || (v->valueint != 0 && v->valueint != 1)) return false;
        mask[i] = (uint8_t)v->valueint;
    }
    return true;
}

/* Spreads the n_model values at the front of v back to the mask-1
 * positions of [0, n), zeros at the mask-0 ones (in place, from the end). */
static void spread(float *v, const uint8_t *mask, int n, int n_model) {
    for (int t = n - 1, k = n_model - 1; t >= 0; t--) v[t] = mask[t] ? v[k--] : 0.0f;
}

static void put_metric(strbuf *o, const char *name, double v) {
    sb_printf(o, "\"%s\":", name);
    sb_json_number(o, v); /* NaN prints null */
    sb_putc(o, ',');
}

/* A number field of a case, or dflt when it is absent or null. */
static double num(const cJSON *o, const char *key, double dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

static void put_array(strbuf *o, const char *name, const strbuf *rows) {
    sb_printf(o, "\"%s\":", name);
    sb_append(o, rows->data, rows->len);
}

static void put_row(strbuf *rows, const float *x, int n) {
    sb_puts(rows, rows->len > 1 ? ",[" : "[");
    for (int k = 0; k < n; k++) {
        if (k) sb_putc(rows, ',');
        sb_json_float(rows, x[k]);
    }
    sb_putc(rows, ']');
}

/* The batch totals of a case, and the entropy threshold over the entropies
 * of its unmasked completions. */
static int case_totals(const loss_opts *c, const cJSON *comps, loss_batch *t) {
    float *all = NULL;
    size_t n_all = 0;
    for (const cJSON *cp = comps->child; cp; cp = cp->next) {
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cp, "masked"))) continue;
        int n = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(cp, "logp"));
        uint8_t *mask = xmalloc((size_t)n + 1);
        bool has_mask;
        if (!read_mask(cp, mask, n, &has_mask)) {
            free(all), free(mask);
            return driver_fail("bad completion_mask");
        }
        int n_model = completion_mask_count(has_mask ? mask : NULL, n);
        t->n_completions++;
        t->n_tokens += n_model;
        const cJSON *entj = cJSON_GetObjectItemCaseSensitive(cp, "entropy");
        if (!cJSON_IsArray(entj)) {
            free(mask);
            continue;
        }
        all = xrealloc(all, sizeof *all * (n_all + (size_t)n + 1));
        if (!read_floats(entj, all + n_all, n)) {
            free(all), free(mask);
            return driver_fail("bad entropy array");
        }
        completion_mask_select(all + n_all, has_mask ? mask : NULL, n);
        free(mask);
        n_all += (size_t)n_model;
    }
    t->entropy_threshold = loss_entropy_threshold(all, (long)n_all, c->top_entropy_quantile);
    free(all);
    return 0;
}

/* One case: runs the loss and appends its result object to o. */
static int driver_case(const cJSON *cs, strbuf *o) {
    gerr e = {0};
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(cs, "loss");
    loss_kind k;
    if (!cJSON_IsString(kind) || loss_kind_parse(kind->valuestring, &k, &e)) return driver_fail("bad loss");
    loss_opts c = loss_opts_plain(k, cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cs, "sequence_level")),
                                  num(cs, "epsilon_low", 0.2), num(cs, "epsilon_high", 0.2), num(cs, "beta", 0));
    c.delta = num(cs, "delta", 0);
    c.tau_pos = num(cs, "tau_pos", c.tau_pos);
    c.tau_neg = num(cs, "tau_neg", c.tau_neg);
    c.entropy_coef = num(cs, "entropy_coef", 0);
    c.top_entropy_quantile = num(cs, "top_entropy_quantile", 1);
    c.off_policy_threshold = num(cs, "off_policy_threshold", -1);
    const cJSON *isl = cJSON_GetObjectItemCaseSensitive(cs, "is_level");
    c.is_level = !cJSON_IsString(isl) ? IS_OFF : !strcmp(isl->valuestring, "token") ? IS_TOKEN : IS_SEQUENCE;
    c.is_mask = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cs, "is_mask"));
    c.is_cap = num(cs, "is_cap", c.is_cap);
    const cJSON *comps = cJSON_GetObjectItemCaseSensitive(cs, "completions");
    if (!cJSON_IsArray(comps)) return driver_fail("no completions");
    loss_batch t = {0, 0, (int)num(cs, "max_new_tokens", 0), -INFINITY};
    if (case_totals(&c, comps, &t)) return 1;
    if (loss_batch_check(&c, &t, &e)) return driver_fail(e.msg);
    loss_stats s = {0};
    strbuf grads = {0}, dents = {0};
    sb_putc(&grads, '['), sb_putc(&dents, '[');
    int rc = 0;
    for (const cJSON *cp = comps->child; cp && !rc; cp = cp->next) {
        const cJSON *lp = cJSON_GetObjectItemCaseSensitive(cp, "logp");
        int n = cJSON_GetArraySize(lp);
        float *buf = xcalloc((size_t)7 * (n ? n : 1), sizeof *buf);
        float *logp = buf, *old = buf + n, *ref = buf + 2 * n, *ent = buf + 3 * n, *g = buf + 4 * n;
        float *smp = buf + 5 * n, *ge = buf + 6 * n;
        const cJSON *refj = cJSON_GetObjectItemCaseSensitive(cp, "ref_logp");
        const cJSON *entj = cJSON_GetObjectItemCaseSensitive(cp, "entropy");
        const cJSON *smpj = cJSON_GetObjectItemCaseSensitive(cp, "sampler_logp");
        bool has_ref = cJSON_IsArray(refj), has_ent = cJSON_IsArray(entj), has_smp = cJSON_IsArray(smpj), has_mask;
        uint8_t *mask_buf = xmalloc((size_t)n + 1);
        if (!read_floats(lp, logp, n) || !read_floats(cJSON_GetObjectItemCaseSensitive(cp, "old_logp"), old, n) ||
            (has_ref && !read_floats(refj, ref, n)) || (has_ent && !read_floats(entj, ent, n)) ||
            (has_smp && !read_floats(smpj, smp, n)) || !read_mask(cp, mask_buf, n, &has_mask)) {
            rc = driver_fail("bad completion arrays");
        } else if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cp, "masked"))) {
            const uint8_t *mask = has_mask ? mask_buf : NULL;
            int n_model = completion_mask_select(logp, mask, n);
            completion_mask_select(old, mask, n), completion_mask_select(ref, mask, n);
            completion_mask_select(ent, mask, n), completion_mask_select(smp, mask, n);
            loss_seq q = {n_model, logp, old, has_smp ? smp : NULL, has_ref ? ref : NULL, has_ent ? ent : NULL,
                          num(cp, "advantage", 0)};
            loss_completion(&c, &t, &q, g, ge, &s);
            spread(g, mask_buf, n, n_model), spread(ge, mask_buf, n, n_model);
        }
        free(mask_buf);
        put_row(&grads, g, n);
        put_row(&dents, ge, n);
        free(buf);
    }
    sb_putc(&grads, ']'), sb_putc(&dents, ']');
    if (!rc) {
        loss_metrics m = loss_stats_metrics(&c, &s);
        sb_putc(o, '{');
        put_metric(o, "loss", m.loss);
        put_metric(o, "policy_loss", m.policy_loss);
        put_metric(o, "kl", m.kl);
        put_metric(o, "entropy", m.entropy);
        put_metric(o, "clip_low", m.clip_low);
        put_metric(o, "clip_high", m.clip_high);
        put_metric(o, "clip_region", m.clip_region);
        put_metric(o, "clip_cispo", m.clip_cispo);
        put_metric(o, "clip_delta", m.clip_delta);
        put_metric(o, "entropy_masked", m.entropy_masked);
        put_metric(o, "off_policy_masked", m.off_policy_masked);
        put_metric(o, "is_diff_mean", m.is_diff_mean);
        put_metric(o, "is_diff_max", m.is_diff_max);
        put_metric(o, "is_w_min", m.is_w_min);
        put_metric(o, "is_w_mean", m.is_w_mean);
        put_metric(o, "is_w_max", m.is_w_max);
        put_array(o, "dlogp", &grads);
        sb_putc(o, ',');
        put_array(o, "dentropy", &dents);
        sb_putc(o, '}');
    }
    sb_free(&grads), sb_free(&dents);
    return rc;
}

static int driver(const char *in, const char *out) {
    gerr e = {0};
    char *text = read_whole_file(in, NULL, &e);
    if (!text) return driver_fail(e.msg);
    cJSON *root = cJSON_Parse(text);
    free(text);
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(root, "cases");
    if (!cJSON_IsArray(cases)) {
        cJSON_Delete(root);
        return driver_fail("input: expected {\"cases\": [...]}");
    }
    strbuf o = {0};
    sb_puts(&o, "{\"cases\":[");
    int rc = 0;
    for (const cJSON *cs = cases->child; cs && !rc; cs = cs->next) {
        if (cs != cases->child) sb_putc(&o, ',');
        rc = driver_case(cs, &o);
    }
    sb_puts(&o, "]}\n");
    if (!rc && write_file_atomic(out, o.data, o.len, &e)) rc = driver_fail(e.msg);
    sb_free(&o);
    cJSON_Delete(root);
    return rc;
}

/* ---- the unit tests ---------------------------------------------------------------- */

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--ref-json")) return driver(argv[2], argv[3]);

    TEST("loss kinds parse and print");
    {
        gerr e = {0};
        loss_kind k;
        for (int i = 0; i < 4; i++) {
            CHECK(loss_kind_parse(loss_kind_name(kinds[i]), &k, &e) == 0);
            CHECK(k == kinds[i]);
        }
        CHECK_EQ_INT(loss_kind_parse("ppo", &k, &e), EX_USAGE);
        CHECK(strstr(e.msg, "--loss") && strstr(e.msg, "'ppo'"));
        CHECK(loss_kind_name((loss_kind)9) == NULL);
    }

    TEST("loss_opts_check: each range decided once (epsilon in [0, 1), delta 0 or > 1 + epsilon_high, ...)");
    {
        gerr e = {0};
        loss_opts c = loss_opts_default();
        CHECK_EQ_INT(loss_opts_check(&c, &e), 0);
        c.epsilon_low = 0.99;
        CHECK_EQ_INT(loss_opts_check(&c, &e), 0);
        c.epsilon_low = 1; /* the lower clip bound 1 - eps would be 0: rho > 0 never reaches it */
        CHECK_EQ_INT(loss_opts_check(&c, &e), EX_USAGE);
        CHECK(strstr(e.msg, "--epsilon: 1 is out of range [0, 1)") != NULL);
        c = loss_opts_default();
        c.delta = 1.2; /* not above 1 + epsilon_high */
        CHECK_EQ_INT(loss_opts_check(&c, &e), EX_USAGE);
        CHECK(strstr(e.msg, "--delta: expected a number > 1 + --epsilon-high") != NULL);
        c.delta = 1.5;
        CHECK_EQ_INT(loss_opts_check(&c, &e), 0);
        c.kind = LOSS_CISPO;
        CHECK_EQ_INT(loss_opts_check(&c, &e), EX_USAGE);
        c = loss_opts_default();
        c.tau_neg = 0;
        CHECK_EQ_INT(loss_opts_check(&c, &e), EX_USAGE);
        CHECK(strstr(e.msg, "--sapo-tau-pos/--sapo-tau-neg: expected numbers > 0") != NULL);
        c = loss_opts_default();
        c.is_cap = 0.5;
        CHECK_EQ_INT(loss_opts_check(&c, &e), EX_USAGE);
        CHECK(strstr(e.msg, "--is-cap") != NULL);
    }

    TEST("batch totals are checked");
    {
        gerr e = {0};
        loss_opts c = loss_opts_plain(LOSS_DR_GRPO, false, 0.2, 0.2, 0);
        loss_batch ok = {2, 10, 16, -INFINITY}, none = {0, 0, 16, -INFINITY}, no_len = {2, 10, 0, -INFINITY};
        CHECK_EQ_INT(loss_batch_check(&c, &ok, &e), 0);
        CHECK_EQ_INT(loss_batch_check(&c, &none, &e), EX_DATAERR);
        CHECK_EQ_INT(loss_batch_check(&c, &no_len, &e), EX_DATAERR);
        CHECK(strstr(e.msg, "dr_grpo") != NULL);
        c.kind = LOSS_GRPO;
        CHECK_EQ_INT(loss_batch_check(&c, &no_len, &e), 0); /* only dr_grpo divides by it */
    }

    TEST("known values: one completion, clipped high, unclipped, clipped low");
    {
        loss_opts c = loss_opts_plain(LOSS_GRPO, false, 0.2, 0.28, 0);
        loss_batch t = {1, 3, 8, -INFINITY};
        /* ratios e^0.5 (above 1.28), e^0.1 (inside), e^-0.5 (below 0.8) */
        const float logp[] = {-1.0f, -1.0f, -1.0f}, old[] = {-1.5f, -1.1f, -0.5f};
        float g[3];
        loss_stats s = {0};
        run_one(&c, &t, 3, logp, old, NULL, NULL, 1.0, g, &s);
        double r1 = exp((double)-1.0f - (double)-1.1f), r2 = exp(-0.5);
        /* A > 0: min picks the clipped 1.28 for the first, rho for the other two */
        double want = -(1.28 + r1 + r2) / 3;
        CHECK_NEAR(s.loss, want, 1e-12);
        CHECK(g[0] == 0);
        CHECK_NEAR(g[1], -r1 / 3, 1e-7);
        CHECK_NEAR(g[2], -r2 / 3, 1e-7); /* below the range with A > 0: not clipped */
        CHECK_EQ_INT(s.clipped_high, 1);
        CHECK_EQ_INT(s.clipped_low, 0);
        loss_stats n = {0};
        run_one(&c, &t, 3, logp, old, NULL, NULL, -2.0, g, &n);
        /* A < 0: -min(-2 rho, -2 clip) = 2 max(rho, clip) */
        CHECK_NEAR(n.loss, 2 * (exp(0.5) + r1 + 0.8) / 3, 1e-12);
        CHECK_NEAR(g[0], 2 * exp(0.5) / 3, 1e-6);
        CHECK(g[2] == 0);
        CHECK_EQ_INT(n.clipped_low, 1);
        CHECK_EQ_INT(n.clipped_region, 1);
        loss_metrics m = loss_stats_metrics(&c, &n);
        CHECK_NEAR(m.clip_low, 1.0 / 3, 1e-15);
        CHECK(isnan(m.kl) && isnan(m.entropy));
    }

    TEST("every kind x token/sequence x beta 0/0.04 against the reference and finite differences");
    {
        uint64_t seed = 0x853c49e6748fea9bull;
        long low = 0, high = 0;
        for (int ki = 0; ki < 4; ki++)
            for (int seq = 0; seq < 2; seq++)
                for (int bi = 0; bi < 2; bi++)
                    for (int rep = 0; rep < 25; rep++) {
                        loss_opts c = loss_opts_plain(kinds[ki], seq == 1, 0.2, 0.28, bi ? 0.04 : 0);
                        check_against_reference(&seed, &c, &low, &high);
                    }
        CHECK(low > 50 && high > 50); /* both clip branches were exercised */
    }

    TEST("bnpo and dapo agree; grpo weighs completions, not tokens");
    {
        uint64_t seed = 7;
        batch b;
        random_batch(&seed, &b);
        float g1[MAXC][MAXT], g2[MAXC][MAXT], g3[MAXC][MAXT];
        loss_opts c = loss_opts_plain(LOSS_BNPO, false, 0.2, 0.2, 0.04);
        loss_stats s1 = run_loss(&c, &b, true, g1);
        c.kind = LOSS_DAPO;
        loss_stats s2 = run_loss(&c, &b, true, g2);
        CHECK(s1.loss == s2.loss);
        CHECK(!memcmp(g1, g2, sizeof g1));
        c.kind = LOSS_GRPO;
        run_loss(&c, &b, true, g3);
        /* grpo's token weight is 1/(N n_i), bnpo's 1/T: ratio T / (N n_i) */
        loss_batch t = totals(&b);
        CHECK_NEAR(g3[0][0] / g1[0][0], (double)t.n_tokens / (t.n_completions * b.len[0]), 1e-5);
    }

    TEST("sequence level: one ratio per completion, clipping counted per completion");
    {
        loss_opts c = loss_opts_plain(LOSS_GRPO, true, 0.2, 0.2, 0);
        loss_batch t = {2, 5, 8, -INFINITY};
        const float logp[] = {-1.0f, -2.0f, -0.5f}, old[] = {-1.0f, -2.5f, -0.25f}; /* mean log-ratio 1/12 */
        float g[3];
        loss_stats s = {0};
        run_one(&c, &t, 3, logp, old, NULL, NULL, 0.5, g, &s);
        double mean = ((double)-1.0f - -1.0f + (double)-2.0f - -2.5f + (double)-0.5f - -0.25f) / 3;
        double rho = exp(mean);
        CHECK_NEAR(s.loss, -0.5 * rho / 2, 1e-12); /* grpo: / N = 2 */
        for (int k = 0; k < 3; k++) CHECK_NEAR(g[k], -0.5 * rho / 2 / 3, 1e-8);
        const float far[] = {-3.0f, -3.0f}, near[] = {-2.0f, -2.5f}; /* mean log-ratio -0.75: rho < 0.8 */
        float g2[2];
        run_one(&c, &t, 2, far, near, NULL, NULL, -1.0, g2, &s);
        CHECK(g2[0] == 0 && g2[1] == 0);
        CHECK_EQ_INT(s.clip_units, 2); /* completions, not tokens */
        CHECK_EQ_INT(s.clipped_low, 1);
        CHECK_EQ_INT(s.tokens, 5);
    }

    TEST("KL term: k3 value, gradient, and the metric mean");
    {
        loss_opts c = loss_opts_plain(LOSS_BNPO, false, 0.2, 0.2, 0.1);
        loss_batch t = {1, 2, 8, -INFINITY};
        const float logp[] = {-1.0f, -2.0f}, ref[] = {-1.5f, -1.0f}, ent[] = {0.5f, 1.5f};
        float g[2];
        loss_stats s = {0};
        /* advantage 0: only the KL term remains */
        run_one(&c, &t, 2, logp, logp, ref, ent, 0.0, g, &s);
        double k0 = exp(-0.5) + 0.5 - 1, k1 = exp(1.0) - 1 - 1;
        CHECK_NEAR(s.loss, 0.1 * (k0 + k1) / 2, 1e-15);
        CHECK_NEAR(s.policy_loss, 0, 0);
        CHECK_NEAR(g[0], 0.1 * (1 - exp(-0.5)) / 2, 1e-8);
        CHECK_NEAR(g[1], 0.1 * (1 - exp(1.0)) / 2, 1e-8);
        loss_metrics m = loss_stats_metrics(&c, &s);
        CHECK_NEAR(m.kl, (k0 + k1) / 2, 1e-15);
        CHECK_NEAR(m.entropy, 1.0, 1e-15);
        /* beta 0 with a reference: kl is still measured, not optimized */
        c.beta = 0;
        loss_stats z = {0};
        run_one(&c, &t, 2, logp, logp, ref, NULL, 0.0, g, &z);
        CHECK(z.loss == 0 && g[0] == 0 && g[1] == 0);
        CHECK_NEAR(loss_stats_metrics(&c, &z).kl, (k0 + k1) / 2, 1e-15);
    }

    TEST("stats of split batches add up to the whole; empty completions are harmless");
    {
        uint64_t seed = 99;
        batch b;
        random_batch(&seed, &b);
        loss_opts c = loss_opts_plain(LOSS_DR_GRPO, false, 0.2, 0.28, 0.04);
        float g[MAXC][MAXT], g2[MAXT];
        loss_stats whole = run_loss(&c, &b, true, g);
        loss_batch t = totals(&b);
        loss_stats a = {0}, bsum = {0};
        for (int i = 0; i < b.n_comp; i++) {
            if (b.masked[i]) continue;
            run_one(&c, &t, b.len[i], b.logp[i], b.old[i], b.ref[i], b.ent[i], b.adv[i], g2,
                            i < 3 ? &a : &bsum);
            CHECK(!memcmp(g2, g[i], (size_t)b.len[i] * sizeof *g2));
        }
        loss_stats_add(&a, &bsum);
        CHECK_NEAR(a.loss, whole.loss, 1e-15);
        CHECK_EQ_INT(a.tokens, whole.tokens);
        CHECK_EQ_INT(a.clipped_region, whole.clipped_region);
        loss_stats before = a;
        run_one(&c, &t, 0, NULL, NULL, NULL, NULL, 1.0, NULL, &a);
        CHECK(a.loss == before.loss && a.tokens == before.tokens && a.clip_units == before.clip_units);
        loss_stats empty = {0};
        loss_metrics m = loss_stats_metrics(&c, &empty);
        CHECK(m.loss == 0 && isnan(m.clip_region) && isnan(m.kl));
    }

    TEST("entropy threshold: torch.quantile's interpolation at 1 - q, -inf when off");
    {
        const float h[] = {4.0f, 1.0f, 3.0f, 2.0f};
        CHECK(loss_entropy_threshold(h, 4, 0.5) == 2.5);  /* rank 1.5 of 1,2,3,4 */
        CHECK(loss_entropy_threshold(h, 4, 0.0) == 4.0);  /* the maximum */
        CHECK(loss_entropy_threshold(h, 4, 2.0 / 3) == 2.0); /* rank 1 exactly */
        CHECK(isinf(loss_entropy_threshold(h, 4, 1.0)) && loss_entropy_threshold(h, 4, 1.0) < 0);
        CHECK(isinf(loss_entropy_threshold(h, 0, 0.5)));
        CHECK(h[0] == 4.0f); /* the input is not sorted in place */
    }

    TEST("entropy mask: tokens below the threshold leave the policy term only; at it they stay");
    {
        loss_opts c = loss_opts_plain(LOSS_BNPO, false, 0.2, 0.2, 0.1);
        c.top_entropy_quantile = 0.5;
        loss_batch t = {1, 3, 8, 2.0};
        const float logp[] = {-1.0f, -1.0f, -1.0f}, ref[] = {-1.5f, -1.5f, -1.5f}, ent[] = {1.0f, 2.0f, 3.0f};
        float g[3], ge[3];
        loss_stats s = {0};
        loss_seq q = {3, logp, logp, NULL, ref, ent, 1.0};
        loss_completion(&c, &t, &q, g, ge, &s);
        double kl_g = 0.1 * (1 - exp(-0.5)) / 3;
        CHECK_NEAR(g[0], kl_g, 1e-8);           /* masked: the KL term alone */
        CHECK_NEAR(g[1], kl_g - 1.0 / 3, 1e-7); /* H == threshold: kept */
        CHECK_EQ_INT(s.entropy_masked, 1);
        CHECK_NEAR(loss_stats_metrics(&c, &s).entropy_masked, 1.0 / 3, 1e-15);
        CHECK(ge[0] == 0 && ge[2] == 0); /* no entropy coefficient */
    }

    TEST("entropy bonus: -C H per token in the loss, d/dH = -C w");
    {
        loss_opts c = loss_opts_plain(LOSS_GRPO, false, 0.2, 0.2, 0);
        c.entropy_coef = 0.1;
        loss_batch t = {2, 4, 8, -INFINITY};
        const float logp[] = {-1.0f, -2.0f}, ent[] = {0.5f, 1.5f};
        float g[2], ge[2];
        loss_stats s = {0};
        loss_seq q = {2, logp, logp, NULL, NULL, ent, 0.0};
        loss_completion(&c, &t, &q, g, ge, &s);
        CHECK_NEAR(s.loss, -0.1 * (0.5 + 1.5) / (2 * 2), 1e-15);
        CHECK(s.policy_loss == 0 && g[0] == 0 && g[1] == 0);
        CHECK_NEAR(ge[0], -0.1 / 4, 1e-9);
        CHECK_NEAR(ge[1], -0.1 / 4, 1e-9);
    }

    TEST("cispo: the weight capped at 1 + eps_high keeps its gradient; sapo's gate; delta kills A < 0 above it");
    {
        loss_batch t = {1, 2, 8, -INFINITY};
        const float logp[] = {-1.0f, -1.0f}, old[] = {-1.5f, -1.05f}; /* ratios e^0.5 (capped), e^0.05 */
        float g[2];
        loss_stats s = {0};
        loss_opts c = loss_opts_plain(LOSS_CISPO, false, 0.2, 0.28, 0);
        loss_seq q = {2, logp, old, NULL, NULL, NULL, 2.0};
        loss_completion(&c, &t, &q, g, NULL, &s);
        double r1 = exp((double)-1.0f - (double)-1.05f);
        CHECK_NEAR(g[0], -1.28 * 2 / 2, 1e-7); /* PPO's clip would give 0 here */
        CHECK_NEAR(g[1], -r1 * 2 / 2, 1e-7);
        CHECK_NEAR(s.loss, -(1.28 + r1) * 2 * -1.0 / 2, 1e-12);
        CHECK_EQ_INT(s.clipped_cispo, 1);
        loss_metrics m = loss_stats_metrics(&c, &s);
        CHECK(m.clip_cispo == 0.5 && isnan(m.clip_region) && isnan(m.clip_delta));

        c = loss_opts_plain(LOSS_SAPO, false, 0.2, 0.2, 0);
        c.tau_neg = 2.0;
        loss_stats z = {0};
        loss_seq on = {2, logp, logp, NULL, NULL, NULL, -1.0}; /* rho = 1, A < 0: tau_neg */
        loss_completion(&c, &t, &on, g, NULL, &z);
        CHECK_NEAR(z.loss, (4.0 / 2.0) * 0.5, 1e-15); /* -(4/tau) sigmoid(0) A */
        CHECK_NEAR(g[0], 1.0 / 2, 1e-8);              /* GRPO's on-policy gradient, -A w */

        c = loss_opts_plain(LOSS_GRPO, false, 0.2, 0.2, 0);
        c.delta = 1.5;
        const float far[] = {-1.0f, -1.0f}, low[] = {-2.0f, -1.3f}; /* ratios e (> delta), e^0.3 (in (1.2, 1.5]) */
        loss_stats d = {0};
        loss_seq qd = {2, far, low, NULL, NULL, NULL, -1.0};
        loss_completion(&c, &t, &qd, g, NULL, &d);
        double r = exp((double)-1.0f - (double)-1.3f);
        CHECK(g[0] == 0);
        CHECK_NEAR(g[1], r / 2, 1e-7);
        CHECK_NEAR(d.loss, (1.5 + r) / 2, 1e-12); /* |A| max(min(rho, delta), clip) */
        CHECK_EQ_INT(d.clipped_delta, 1);
        CHECK_EQ_INT(d.clipped_low, 0);
    }

    TEST("off-policy mask: A < 0 and mean(sampler - logp) > X only; equal to X is kept");
    {
        loss_opts c = loss_opts_plain(LOSS_GRPO, false, 0.2, 0.2, 0);
        c.off_policy_threshold = 0.25;
        loss_batch t = {1, 2, 8, -INFINITY};
        const float logp[] = {-1.0f, -2.0f}, at[] = {-0.75f, -1.75f}, above[] = {-0.5f, -1.75f};
        float g[2];
        loss_stats s = {0};
        loss_seq q = {2, logp, logp, at, NULL, NULL, -1.0};
        loss_completion(&c, &t, &q, g, NULL, &s);
        CHECK(s.off_policy_masked == 0 && g[0] != 0);
        q.sampler_logp = above;
        loss_completion(&c, &t, &q, g, NULL, &s);
        CHECK(s.off_policy_masked == 1 && g[0] == 0 && g[1] == 0);
        q.advantage = 1.0;
        loss_completion(&c, &t, &q, g, NULL, &s);
        CHECK(s.off_policy_masked == 1 && g[0] != 0);
        CHECK_NEAR(loss_stats_metrics(&c, &s).off_policy_masked, 1.0 / 3, 1e-15);
    }

    TEST("IS correction: exp(old - sampler) per token or summed per completion, truncated or masked");
    {
        loss_opts c = loss_opts_plain(LOSS_BNPO, false, 0.2, 0.2, 0);
        c.is_level = IS_TOKEN, c.is_cap = 2.0;
        loss_batch t = {1, 2, 8, -INFINITY};
        const float logp[] = {-1.0f, -1.0f}, smp[] = {-2.0f, -1.5f}; /* weights e (over the cap), e^0.5 */
        float g[2];
        loss_stats s = {0};
        loss_seq q = {2, logp, logp, smp, NULL, NULL, 1.0};
        loss_completion(&c, &t, &q, g, NULL, &s);
        CHECK_NEAR(g[0], -2.0 / 2, 1e-7);
        CHECK_NEAR(g[1], -exp(0.5) / 2, 1e-7);
        loss_metrics m = loss_stats_metrics(&c, &s);
        CHECK(m.is_w_max == 2.0);
        CHECK_NEAR(m.is_w_min, exp(0.5), 1e-15);
        CHECK_NEAR(m.is_diff_mean, 0.75, 1e-15);
        CHECK(m.is_diff_max == 1.0);
        c.is_mask = true;
        loss_stats k = {0};
        loss_completion(&c, &t, &q, g, NULL, &k);
        CHECK(g[0] == 0 && loss_stats_metrics(&c, &k).is_w_min == 0);
        c.is_level = IS_SEQUENCE, c.is_cap = 5.0; /* e^1.5 < 5 */
        loss_stats sq = {0};
        loss_completion(&c, &t, &q, g, NULL, &sq);
        CHECK_NEAR(g[0], -exp(1.5) / 2, 1e-6);
        CHECK_EQ_INT(sq.is_units, 1);
        loss_stats_add(&k, &sq); /* min/max merge across calls */
        CHECK(k.is_w_min == 0);
        CHECK_NEAR(k.is_w_max, exp(1.5), 1e-12);
    }

    return check_done();
}
