/* AdamW and SGD steps, the warmup schedules, global-norm clipping (optim.h). */
#include "optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../util/flags.h"

/* Below this many elements a loop is not worth waking the thread pool. */
#define PARALLEL_MIN 65536
/* The norm sums chunks of this many elements, then the chunks in order:
 * the same bits for any thread count. */
#define NORM_CHUNK 32768

const char *const optim_kind_names[] = {"adamw", "sgd"};
const char *const sched_kind_names[] = {"constant", "linear", "cosine"};
const char optim_default_betas[] = "0.9,0.999";

int optim_kind_parse(const char *s, optim_kind *k, gerr *e) {
    int i;
    int rc = flags_choice_parse("--optimizer", optim_kind_names, OPTIM_N_KINDS, s, &i, e);
    if (!rc) *k = (optim_kind)i;
    return rc;
}

int sched_kind_parse(const char *s, sched_kind *k, gerr *e) {
    int i;
    int rc = flags_choice_parse("--lr-schedule", sched_kind_names, SCHED_N_KINDS, s, &i, e);
    if (!rc) *k = (sched_kind)i;
    return rc;
}

const char *optim_kind_name(optim_kind k) { return (unsigned)k < OPTIM_N_KINDS ? optim_kind_names[k] : NULL; }
const char *sched_kind_name(sched_kind k) { return (unsigned)k < SCHED_N_KINDS ? sched_kind_names[k] : NULL; }

/* One number of --betas ending at `end`; false when malformed or out of [0, 1). */
static bool parse_beta(const char *s, char end, const char **next, double *out) {
    char *stop;
    double v = strtod(s, &stop);
    if (stop == s || *stop != end || !(v >= 0 && v < 1)) return false;
    *next = stop + (end ? 1 : 0);
    *out = v;
    return true;
}

int optim_parse_betas(const char *s, double *beta1, double *beta2, gerr *e) {
    const char *p = s;
    double b1, b2;
    if (!parse_beta(p, ',', &p, &b1) || !parse_beta(p, '\0', &p, &b2))
        return gerr_set(e, EX_USAGE, "--betas: expected B1,B2 with both in [0, 1), got '%s'", s);
    *beta1 = b1;
    *beta2 = b2;
    return 0;
}

void optim_opts_default(optim_opts *o) {
    memset(o, 0, sizeof *o);
    o->kind = OPTIM_ADAMW;
    o->lr = 1e-6;
    gerr never = {0};
    optim_parse_betas(optim_default_betas, &o->beta1, &o->beta2, &never);
    o->eps = 1e-8;
    o->schedule = SCHED_CONSTANT;
}

int optim_opts_check(const optim_opts *c, gerr *e) {
    if (!optim_kind_name(c->kind) || !sched_kind_name(c->schedule))
        return gerr_set(e, EX_SOFTWARE, "optimizer: unknown kind %d or schedule %d", (int)c->kind, (int)c->schedule);
    if (!(c->beta1 >= 0 && c->beta1 < 1 && c->beta2 >= 0 && c->beta2 < 1))
        return gerr_set(e, EX_USAGE, "--betas: expected both in [0, 1), got %g,%g", c->beta1, c->beta2);
    int rc;
    if ((rc = flags_range_check("--lr", c->lr, FLAG_RANGE(0, 1e6), e)) ||
        (rc = flags_range_check("--adam-eps", c->eps, FLAG_RANGE_OPEN_LO(0, 1), e)) ||
        (rc = flags_range_check("--weight-decay", c->weight_decay, FLAG_RANGE(0, 1e6), e)) ||
        (rc = flags_range_check("--max-grad-norm", c->max_grad_norm, FLAG_RANGE(0, 1e12), e)) ||
        (rc = flags_range_check("--warmup-steps", (double)c->warmup_steps, FLAG_RANGE(0, 1e12), e)) ||
        (rc = flags_range_check("--total-steps", (double)c->total_steps, FLAG_RANGE(0, 1e12), e)))
        return rc;
    if (c->schedule != SCHED_CONSTANT && c->total_steps < 1)
        return gerr_set(e, EX_USAGE, "--lr-schedule %s needs --total-steps N (N >= 1): the schedule decays to 0 at N",
                        sched_kind_name(c->schedule));
    return 0;
}

double optim_lr_multiplier(const optim_opts *c, long step) {
    long warmup = c->warmup_steps, total = c->total_steps;
    if (step < warmup) return (double)step / (double)(warmup > 1 ? warmup : 1);
    double span = (double)(total - warmup > 1 ? total - warmup : 1);
    switch (c->schedule) {
    case SCHED_CONSTANT: return 1.0;
    case SCHED_LINEAR: {
        double f = (double)(total - step) / span;
        return f > 0 ? f : 0.0;
    }
    case SCHED_COSINE: {
        if (step >= total) return 0.0;
        double f = 0.5 * (1.0 + cos(M_PI * ((double)(step - warmup) / span)));
        return f > 0 ? f : 0.0;
    }
    }
    return 0.0;
}

double optim_lr_at(const optim_opts *c, long step) { return c->lr * optim_lr_multiplier(c, step); }

void optim_step(const backend *be, const optim_opts *c, long t, double lr, float *param, const float *grad,
                float *m, float *v, size_t n, bool decay) {
    /* decoupled weight decay: p *= 1 - lr wd; the constants are computed in
     * double and rounded once, as torch does when it applies Python floats
     * to float tensors */
    const float keep = decay && c->weight_decay != 0 ? (float)(1.0 - lr * c->weight_decay) : 1.0f;
    if (c->kind == OPTIM_SGD) {
        be->sgd_update(keep, (float)-lr, param, grad, n);
        return;
    }
    const adamw_consts k = {
        .keep = keep,
        .beta1 = (float)c->beta1,
        .one_minus_beta1 = (float)(1.0 - c->beta1),
        .beta2 = (float)c->beta2,
        .one_minus_beta2 = (float)(1.0 - c->beta2),
        .neg_step = (float)-(lr / (1.0 - pow(c->beta1, (double)t))),
        .bias2_sqrt = (float)sqrt(1.0 - pow(c->beta2, (double)t)),
        .eps = (float)c->eps,
    };
    be->adamw_update(&k, param, grad, m, v, n);
}

double grad_global_norm(const float *const *grads, const size_t *sizes, int n) {
    return sqrt(grad_sum_squares(grads, sizes, n));
}

double grad_sum_squares(const float *const *grads, const size_t *sizes, int n) {
    size_t n_chunks = 0;
    for (int i = 0; i < n; i++) n_chunks += (sizes[i] + NORM_CHUNK - 1) / NORM_CHUNK;
    if (n_chunks == 0) return 0.0;
    /* chunk k covers [off[k], off[k] + NORM_CHUNK) of tensor of[k] */
    int *of = xmalloc(n_chunks * sizeof *of);
    size_t *off = xmalloc(n_chunks * sizeof *off);
    double *part = xmalloc(n_chunks * sizeof *part);
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        for (size_t o = 0; o < sizes[i]; o += NORM_CHUNK) {
            of[k] = i;
            off[k] = o;
            k++;
        }
    }
#pragma omp parallel for schedule(static) if (n_chunks > 1)
    for (size_t j = 0; j < n_chunks; j++) {
        const float *g = grads[of[j]];
        size_t end = off[j] + NORM_CHUNK < sizes[of[j]] ? off[j] + NORM_CHUNK : sizes[of[j]];
        double s = 0;
        for (size_t i = off[j]; i < end; i++) s += (double)g[i] * g[i];
        part[j] = s;
    }
    double total = 0;
    for (size_t j = 0; j < n_chunks; j++) total += part[j];
    free(of);
    free(off);
    free(part);
    return total;
}

double grad_clip_scale(double norm, double max_norm) {
    if (!(max_norm > 0)) return 1.0;
    double s = max_norm / (norm + 1e-6);
    return s < 1.0 ? s : 1.0;
}

void grad_scale(float *const *grads, const size_t *sizes, int n, double scale) {
    if (scale == 1.0) return;
    /* torch multiplies the float gradients by the factor as a float */
    const float f = (float)scale;
    for (int i = 0; i < n; i++) {
        float *g = grads[i];
        size_t len = sizes[i];
#pragma omp parallel for schedule(static) if (len >= PARALLEL_MIN)
        for (size_t j = 0; j < len; j++) g[j] *= f;
    }
}
