/* Optimizer, schedules and clipping (lib/train/optim.h): schedules against
 * their closed forms, AdamW and SGD against a float64 reference of the
 * update rule, the global norm against a plain double sum, and results that
 * do not change with the thread count.
 *
 * Tolerances: schedules 1e-15 (the same double formula); AdamW 1e-6
 * relative to the float64 rule (ours runs in float32 as torch does); norms
 * 1e-12 relative (double sums in another order).
 *
 * Driver mode for tests/ref/optim_ref.py (torch.optim.AdamW, transformers'
 * schedule formulas, clip_grad_norm_):
 *   test_optim --ref-json IN OUT
 * IN: {"steps":[{"optimizer","lr":[per step],"betas":[b1,b2],"eps",
 *      "weight_decay","decay","param":[...],"grads":[[...] per step]}],
 *      "schedules":[{"name","warmup","total","lr","at":[steps]}],
 *      "clips":[{"max_norm","grads":[[...] per tensor]}]}
 * OUT: {"steps":[{"param","exp_avg","exp_avg_sq"}],"schedules":[[lr...]],
 *       "clips":[{"norm","grads":[[...]]}]} */
#include <cjson/cJSON.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>

#include "io/mapped.h"
#include "io/outstream.h"
#include "train/optim.h"
#include "util/strbuf.h"
#include "check.h"

#define CHECK_REL(a, b, tol) CHECK_NEAR((a), (b), (tol) * (1e-30 + fabs(b)))

static double next_unit(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (double)((*s * 0x2545F4914F6CDD1Dull) >> 11) * 0x1.0p-53;
}

/* ---- driver mode ------------------------------------------------------------------ */

static int fail(const char *msg) {
    fprintf(stderr, "test_optim: %s\n", msg);
    return 1;
}

/* A JSON array of numbers as floats (caller frees); NULL when not one. */
static float *floats(const cJSON *a, size_t *n) {
    if (!cJSON_IsArray(a)) return NULL;
    *n = (size_t)cJSON_GetArraySize(a);
    float *v = xmalloc((*n ? *n : 1) * sizeof *v);
    size_t i = 0;
    for (const cJSON *x = a->child; x; x = x->next) v[i++] = (float)cJSON_GetNumberValue(x);
    return v;
}

static void put_floats(strbuf *o, const float *v, size_t n) {
    sb_putc(o, '[');
    for (size_t i = 0; i < n; i++) {
        if (i) sb_putc(o, ',');
        sb_json_float(o, v[i]);
    }
    sb_putc(o, ']');
}

static double num(const cJSON *o, const char *key) { return cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, key)); }
static const cJSON *item(const cJSON *o, const char *key) { return cJSON_GetObjectItemCaseSensitive(o, key); }

static int driver_step(const cJSON *cs, strbuf *o) {
    gerr e = {0};
    optim_opts c;
    optim_opts_default(&c);
    const cJSON *name = item(cs, "optimizer");
    if (!cJSON_IsString(name) || optim_kind_parse(name->valuestring, &c.kind, &e)) return fail("bad optimizer");
    const cJSON *betas = item(cs, "betas");
    c.beta1 = cJSON_GetNumberValue(cJSON_GetArrayItem(betas, 0));
    c.beta2 = cJSON_GetNumberValue(cJSON_GetArrayItem(betas, 1));
    c.eps = num(cs, "eps");
    c.weight_decay = num(cs, "weight_decay");
    bool decay = cJSON_IsTrue(item(cs, "decay"));
    size_t n, ng;
    float *p = floats(item(cs, "param"), &n);
    const cJSON *grads = item(cs, "grads"), *lrs = item(cs, "lr");
    if (!p || !cJSON_IsArray(grads) || cJSON_GetArraySize(grads) != cJSON_GetArraySize(lrs)) {
        free(p);
        return fail("bad step case");
    }
    float *m = xcalloc(n ? n : 1, sizeof *m), *v = xcalloc(n ? n : 1, sizeof *v);
    int rc = 0;
    long t = 1;
    for (const cJSON *g = grads->child, *lr = lrs->child; g && !rc; g = g->next, lr = lr->next, t++) {
        float *gv = floats(g, &ng);
        if (!gv || ng != n) rc = fail("gradient of the wrong size");
        else optim_step(backend_cpu(), &c, t, cJSON_GetNumberValue(lr), p, gv, m, v, n, decay);
        free(gv);
    }
    sb_puts(o, "{\"param\":");
    put_floats(o, p, n);
    sb_puts(o, ",\"exp_avg\":");
    put_floats(o, m, n);
    sb_puts(o, ",\"exp_avg_sq\":");
    put_floats(o, v, n);
    sb_putc(o, '}');
    free(p);
    free(m);
    free(v);
    return rc;
}

static int driver_schedule(const cJSON *cs, strbuf *o) {
    gerr e = {0};
    optim_opts c;
    optim_opts_default(&c);
    const cJSON *name = item(cs, "name");
    if (!cJSON_IsString(name) || sched_kind_parse(name->valuestring, &c.schedule, &e)) return fail("bad schedule");
    c.warmup_steps = (long)num(cs, "warmup");
    c.total_steps = (long)num(cs, "total");
    c.lr = num(cs, "lr");
    if (optim_opts_check(&c, &e)) return fail(e.msg);
    sb_putc(o, '[');
    const cJSON *at = item(cs, "at");
    for (const cJSON *s = at ? at->child : NULL; s; s = s->next) {
        if (s != at->child) sb_putc(o, ',');
        sb_json_number(o, optim_lr_at(&c, (long)s->valuedouble));
    }
    sb_putc(o, ']');
    return 0;
}

static int driver_clip(const cJSON *cs, strbuf *o) {
    const cJSON *grads = item(cs, "grads");
    int n = cJSON_GetArraySize(grads);
    float **g = xcalloc((size_t)n + 1, sizeof *g);
    size_t *sizes = xcalloc((size_t)n + 1, sizeof *sizes);
    int i = 0, rc = 0;
    for (const cJSON *x = grads ? grads->child : NULL; x; x = x->next, i++)
        if (!(g[i] = floats(x, &sizes[i]))) rc = fail("bad clip gradients");
    if (!rc) {
        double norm = grad_global_norm((const float *const *)g, sizes, n);
        grad_scale(g, sizes, n, grad_clip_scale(norm, num(cs, "max_norm")));
        sb_puts(o, "{\"norm\":");
        sb_json_number(o, norm);
        sb_puts(o, ",\"grads\":[");
        for (i = 0; i < n; i++) {
            if (i) sb_putc(o, ',');
            put_floats(o, g[i], sizes[i]);
        }
        sb_puts(o, "]}");
    }
    for (i = 0; i < n; i++) free(g[i]);
    free(g);
    free(sizes);
    return rc;
}

/* Runs fn over every element of the array `key`, as a JSON array in o. */
static int driver_list(const cJSON *root, const char *key, int (*fn)(const cJSON *, strbuf *), strbuf *o) {
    const cJSON *list = item(root, key);
    sb_printf(o, "\"%s\":[", key);
    int rc = 0;
    for (const cJSON *x = list ? list->child : NULL; x && !rc; x = x->next) {
        if (x != list->child) sb_putc(o, ',');
        rc = fn(x, o);
    }
    sb_putc(o, ']');
    return rc;
}

static int driver(const char *in, const char *out) {
    gerr e = {0};
    char *text = read_whole_file(in, NULL, &e);
    if (!text) return fail(e.msg);
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return fail("input is not a JSON object");
    }
    strbuf o = {0};
    sb_putc(&o, '{');
    int rc = driver_list(root, "steps", driver_step, &o);
    sb_putc(&o, ',');
    if (!rc) rc = driver_list(root, "schedules", driver_schedule, &o);
    sb_putc(&o, ',');
    if (!rc) rc = driver_list(root, "clips", driver_clip, &o);
    sb_puts(&o, "}\n");
    if (!rc && write_file_atomic(out, o.data, o.len, &e)) rc = fail(e.msg);
    sb_free(&o);
    cJSON_Delete(root);
    return rc;
}

/* ---- references ----------------------------------------------------------------------- */

/* The AdamW rule in double, step t (1-based). */
static void ref_adamw(const optim_opts *c, long t, double lr, double *p, const double *g, double *m, double *v,
                      size_t n, bool decay) {
    for (size_t i = 0; i < n; i++) {
        if (decay) p[i] *= 1 - lr * c->weight_decay;
        m[i] = c->beta1 * m[i] + (1 - c->beta1) * g[i];
        v[i] = c->beta2 * v[i] + (1 - c->beta2) * g[i] * g[i];
        double step_size = lr / (1 - pow(c->beta1, (double)t));
        double denom = sqrt(v[i]) / sqrt(1 - pow(c->beta2, (double)t)) + c->eps;
        p[i] -= step_size * m[i] / denom;
    }
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--ref-json")) return driver(argv[2], argv[3]);

    TEST("names parse and print; --betas");
    {
        gerr e = {0};
        optim_kind k;
        sched_kind s;
        CHECK(optim_kind_parse("sgd", &k, &e) == 0 && k == OPTIM_SGD);
        CHECK(optim_kind_parse("adamw", &k, &e) == 0 && k == OPTIM_ADAMW);
        CHECK_EQ_INT(optim_kind_parse("adam", &k, &e), EX_USAGE);
        CHECK(strstr(e.msg, "--optimizer") != NULL);
        CHECK(sched_kind_parse("cosine", &s, &e) == 0 && s == SCHED_COSINE);
        CHECK_EQ_INT(sched_kind_parse("step", &s, &e), EX_USAGE);
        CHECK(strstr(e.msg, "--lr-schedule") != NULL);
        CHECK_EQ_STR(optim_kind_name(OPTIM_ADAMW), "adamw");
        CHECK_EQ_STR(sched_kind_name(SCHED_LINEAR), "linear");
        CHECK(sched_kind_name((sched_kind)7) == NULL);
        double b1, b2;
        CHECK(optim_parse_betas("0.8,0.95", &b1, &b2, &e) == 0 && b1 == 0.8 && b2 == 0.95);
        const char *bad[] = {"0.9", "0.9,", "0.9,1", "a,b", "0.9,0.99,0.1", "-0.1,0.9", "0.9;0.99", ""};
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) CHECK_EQ_INT(optim_parse_betas(bad[i], &b1, &b2, &e), EX_USAGE);
        CHECK(strstr(e.msg, "--betas") != NULL);
    }

    TEST("config checks: schedules that decay need --total-steps; --adam-eps above 0");
    {
        gerr e = {0};
        optim_opts c;
        optim_opts_default(&c);
        CHECK_EQ_INT(optim_opts_check(&c, &e), 0);
        c.schedule = SCHED_LINEAR;
        CHECK_EQ_INT(optim_opts_check(&c, &e), EX_USAGE);
        CHECK(strstr(e.msg, "--total-steps") != NULL);
        c.total_steps = 10;
        CHECK_EQ_INT(optim_opts_check(&c, &e), 0);
        c.lr = -1;
        CHECK_EQ_INT(optim_opts_check(&c, &e), EX_USAGE);
        optim_opts_default(&c);
        c.beta2 = 1;
        CHECK_EQ_INT(optim_opts_check(&c, &e), EX_USAGE);
        optim_opts_default(&c);
        c.warmup_steps = -1;
        CHECK_EQ_INT(optim_opts_check(&c, &e), EX_USAGE);
        optim_opts_default(&c);
        c.max_grad_norm = NAN;
        CHECK_EQ_INT(optim_opts_check(&c, &e), EX_USAGE);
        optim_opts_default(&c);
        c.eps = 0; /* AdamW's sqrt(v) + eps with v = 0 where a weight has no gradient: 0/0 */
        CHECK_EQ_INT(optim_opts_check(&c, &e), EX_USAGE);
        CHECK(strstr(e.msg, "--adam-eps: 0 is out of range (0, 1]") != NULL);
        c.eps = 1e-30;
        CHECK_EQ_INT(optim_opts_check(&c, &e), 0);
    }

    TEST("schedules against their closed forms");
    {
        optim_opts c;
        optim_opts_default(&c);
        c.lr = 2e-5;
        c.warmup_steps = 4;
        c.total_steps = 20;
        for (long s = 0; s < 30; s++) {
            double warm = s < 4 ? s / 4.0 : -1;
            c.schedule = SCHED_CONSTANT;
            CHECK_NEAR(optim_lr_multiplier(&c, s), warm >= 0 ? warm : 1.0, 1e-15);
            c.schedule = SCHED_LINEAR;
            CHECK_NEAR(optim_lr_multiplier(&c, s), warm >= 0 ? warm : fmax(0, (20.0 - s) / 16), 1e-15);
            c.schedule = SCHED_COSINE;
            double cosv = s >= 20 ? 0 : 0.5 * (1 + cos(M_PI * (s - 4) / 16.0));
            CHECK_NEAR(optim_lr_multiplier(&c, s), warm >= 0 ? warm : cosv, 1e-15);
            CHECK_NEAR(optim_lr_at(&c, s), 2e-5 * optim_lr_multiplier(&c, s), 1e-20);
        }
        c.schedule = SCHED_COSINE;
        CHECK_NEAR(optim_lr_multiplier(&c, 12), 0.5, 1e-15); /* half way down */
        CHECK(optim_lr_multiplier(&c, 0) == 0);              /* first warmup step: lr 0, as transformers */
        CHECK(optim_lr_multiplier(&c, 4) == 1);
        CHECK(optim_lr_multiplier(&c, 35) == 0); /* held at 0 past the end */
        c.warmup_steps = 0;
        c.schedule = SCHED_LINEAR;
        CHECK(optim_lr_multiplier(&c, 0) == 1);
        CHECK_NEAR(optim_lr_multiplier(&c, 5), 0.75, 1e-15);
        c.schedule = SCHED_CONSTANT;
        c.total_steps = 0;
        CHECK(optim_lr_multiplier(&c, 1000000) == 1);
    }

    TEST("AdamW: three steps against the float64 rule, with and without decay");
    {
        enum { N = 257 };
        uint64_t seed = 42;
        optim_opts c;
        optim_opts_default(&c);
        c.lr = 1e-3;
        c.weight_decay = 0.1;
        c.eps = 1e-8;
        for (int decay = 0; decay < 2; decay++) {
            float p[N], m[N] = {0}, v[N] = {0}, g[N];
            double pd[N], md[N] = {0}, vd[N] = {0}, gd[N];
            for (int i = 0; i < N; i++) pd[i] = p[i] = (float)(next_unit(&seed) * 2 - 1);
            for (long t = 1; t <= 3; t++) {
                double lr = c.lr * (1 + 0.5 * t); /* a different lr each step */
                for (int i = 0; i < N; i++) gd[i] = g[i] = (float)((next_unit(&seed) - 0.5) * 0.02);
                optim_step(backend_cpu(), &c, t, lr, p, g, m, v, N, decay);
                ref_adamw(&c, t, lr, pd, gd, md, vd, N, decay);
            }
            for (int i = 0; i < N; i++) {
                /* 1e-6 relative to the size of the terms summed (|p| <= 1,
                 * (1-b1)|g| <= 1e-3, (1-b2)g^2 <= 1e-7): moments that cancel
                 * to near 0 keep the absolute error of their terms */
                CHECK_NEAR(p[i], pd[i], 1e-6 * fabs(pd[i]) + 1e-9);
                CHECK_NEAR(m[i], md[i], 1e-6 * 1e-3);
                CHECK_NEAR(v[i], vd[i], 1e-6 * 1e-7);
            }
        }
        /* first step from zero moments moves each weight by lr * g / (|g| + eps) */
        float p[2] = {0.5f, -0.25f}, m[2] = {0}, v[2] = {0}, g[2] = {0.01f, -0.3f};
        c.weight_decay = 0;
        optim_step(backend_cpu(), &c, 1, 1e-3, p, g, m, v, 2, true);
        CHECK_NEAR(p[0], 0.5 - 1e-3 * 0.01 / (0.01 + 1e-8), 1e-7);
        CHECK_NEAR(p[1], -0.25 + 1e-3, 1e-7);
    }

    TEST("SGD: p -= lr g with decoupled decay; moments untouched");
    {
        optim_opts c;
        optim_opts_default(&c);
        c.kind = OPTIM_SGD;
        c.weight_decay = 0.5;
        float p[3] = {1, -2, 0.5f}, g[3] = {0.25f, 1, -4};
        optim_step(backend_cpu(), &c, 7, 0.1, p, g, NULL, NULL, 3, true);
        CHECK_NEAR(p[0], 1 * 0.95 - 0.025, 1e-7);
        CHECK_NEAR(p[1], -2 * 0.95 - 0.1, 1e-7);
        CHECK_NEAR(p[2], 0.5 * 0.95 + 0.4, 1e-7);
        float q[1] = {1}, h[1] = {1};
        optim_step(backend_cpu(), &c, 1, 0.1, q, h, NULL, NULL, 1, false); /* not a decayed tensor */
        CHECK_NEAR(q[0], 0.9, 1e-7);
    }

    TEST("global norm: double sum over tensors, chunked; clipping as clip_grad_norm_");
    {
        enum { A = 100003, B = 7, C = 40000 };
        uint64_t seed = 5;
        float *a = xmalloc(A * sizeof *a), b[B], *cc = xmalloc(C * sizeof *cc);
        double sum = 0;
        for (int i = 0; i < A; i++) a[i] = (float)(next_unit(&seed) - 0.5);
        for (int i = 0; i < B; i++) b[i] = (float)(next_unit(&seed) * 10);
        for (int i = 0; i < C; i++) cc[i] = (float)(next_unit(&seed) - 0.5) * 1e-3f;
        for (int i = 0; i < A; i++) sum += (double)a[i] * a[i];
        for (int i = 0; i < B; i++) sum += (double)b[i] * b[i];
        for (int i = 0; i < C; i++) sum += (double)cc[i] * cc[i];
        float *gs[3] = {a, b, cc};
        size_t sizes[3] = {A, B, C};
        double norm = grad_global_norm((const float *const *)gs, sizes, 3);
        CHECK_REL(norm, sqrt(sum), 1e-12);
        /* the same bits on one thread */
        int threads = omp_get_max_threads();
        omp_set_num_threads(1);
        double one = grad_global_norm((const float *const *)gs, sizes, 3);
        omp_set_num_threads(threads > 1 ? threads : 3);
        double many = grad_global_norm((const float *const *)gs, sizes, 3);
        omp_set_num_threads(threads);
        CHECK(one == norm && many == norm);
        CHECK(grad_global_norm(NULL, NULL, 0) == 0);

        CHECK(grad_clip_scale(norm, 0) == 1);          /* off */
        CHECK(grad_clip_scale(norm, norm * 2) == 1);   /* under the limit */
        double s = grad_clip_scale(norm, 1.0);
        CHECK_REL(s, 1.0 / (norm + 1e-6), 1e-15);
        CHECK(grad_clip_scale(INFINITY, 1.0) == 0);
        float keep = b[3];
        grad_scale(gs, sizes, 3, s);
        CHECK(b[3] == keep * (float)s);
        double after = grad_global_norm((const float *const *)gs, sizes, 3);
        CHECK_NEAR(after, 1.0, 1e-5);
        free(a);
        free(cc);
    }

    TEST("AdamW on many threads gives the same bits as on one");
    {
        enum { N = 200000 };
        uint64_t seed = 11;
        float *p1 = xmalloc(N * sizeof *p1), *p2 = xmalloc(N * sizeof *p2), *g = xmalloc(N * sizeof *g);
        float *m1 = xcalloc(N, sizeof *m1), *v1 = xcalloc(N, sizeof *v1);
        float *m2 = xcalloc(N, sizeof *m2), *v2 = xcalloc(N, sizeof *v2);
        for (int i = 0; i < N; i++) {
            p1[i] = p2[i] = (float)(next_unit(&seed) - 0.5);
            g[i] = (float)(next_unit(&seed) - 0.5);
        }
        optim_opts c;
        optim_opts_default(&c);
        c.weight_decay = 0.01;
        int threads = omp_get_max_threads();
        omp_set_num_threads(1);
        optim_step(backend_cpu(), &c, 2, 1e-4, p1, g, m1, v1, N, true);
        omp_set_num_threads(threads > 1 ? threads : 3);
        optim_step(backend_cpu(), &c, 2, 1e-4, p2, g, m2, v2, N, true);
        omp_set_num_threads(threads);
        CHECK(!memcmp(p1, p2, N * sizeof *p1) && !memcmp(m1, m2, N * sizeof *m1) && !memcmp(v1, v2, N * sizeof *v1));
        free(p1);
        free(p2);
        free(g);
        free(m1);
        free(v1);
        free(m2);
        free(v2);
    }

    return check_done();
}
