/* The GRPO loss family: per-token surrogate, masks, importance correction,
 * KL and entropy terms, batch aggregation and the exact gradient autograd
 * would give (see loss.h). */
#include "loss.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../util/flags.h"

const char *const loss_kind_names[] = {"grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo"};
const char *const loss_level_names[] = {"token", "sequence"};
const char *const is_level_names[] = {"none", "token", "sequence"};
const char *const is_mode_names[] = {"truncate", "mask"};

int loss_kind_parse(const char *s, loss_kind *k, gerr *e) {
    int i;
    int rc = flags_choice_parse("--loss", loss_kind_names, LOSS_N_KINDS, s, &i, e);
    if (!rc) *k = (loss_kind)i;
    return rc;
}

const char *loss_kind_name(loss_kind k) { return (unsigned)k < LOSS_N_KINDS ? loss_kind_names[k] : NULL; }

loss_opts loss_opts_plain(loss_kind kind, bool sequence_level, double epsilon_low, double epsilon_high, double beta) {
    return (loss_opts){.kind = kind,
                       .sequence_level = sequence_level,
                       .epsilon_low = epsilon_low,
                       .epsilon_high = epsilon_high,
                       .beta = beta,
                       .tau_pos = 1.0,
                       .tau_neg = 1.05,
                       .top_entropy_quantile = 1,
                       .off_policy_threshold = -1,
                       .is_cap = 3.0};
}

loss_opts loss_opts_default(void) {
    loss_opts c = loss_opts_plain(LOSS_GRPO, false, 0.2, 0.2, 0.04);
    c.is_mask = true; /* once --is-correction is on, weights above the cap are masked */
    return c;
}

int loss_opts_check(const loss_opts *c, gerr *e) {
    if (!loss_kind_name(c->kind)) return gerr_set(e, EX_SOFTWARE, "loss: unknown kind %d", (int)c->kind);
    int rc;
    if ((rc = flags_range_check("--epsilon", c->epsilon_low, FLAG_RANGE_OPEN_HI(0, 1), e)) ||
        (rc = flags_range_check("--epsilon-high", c->epsilon_high, FLAG_RANGE(0, 100), e)) ||
        (rc = flags_range_check("--beta", c->beta, FLAG_RANGE(0, 1e6), e)) ||
        (rc = flags_range_check("--delta", c->delta, FLAG_RANGE(0, 1e6), e)) ||
        (rc = flags_range_check("--entropy-coef", c->entropy_coef, FLAG_RANGE(0, 1e6), e)) ||
        (rc = flags_range_check("--top-entropy-quantile", c->top_entropy_quantile, FLAG_RANGE(0, 1), e)) ||
        (rc = flags_range_check("--off-policy-mask-threshold", c->off_policy_threshold, FLAG_RANGE(-1, 1e6), e)) ||
        (rc = flags_range_check("--is-cap", c->is_cap, FLAG_RANGE(1, 1e6), e)) ||
        (rc = flags_range_check("--router-aux-coef", c->router_aux_coef, FLAG_RANGE(0, 1e6), e)))
        return rc;
    if (!(c->tau_pos > 0 && c->tau_neg > 0 && c->tau_pos <= 1e6 && c->tau_neg <= 1e6))
        return gerr_set(e, EX_USAGE, "--sapo-tau-pos/--sapo-tau-neg: expected numbers > 0 (at most 1e6), got %g and %g",
                        c->tau_pos, c->tau_neg);
    bool clipped = c->kind != LOSS_CISPO && c->kind != LOSS_SAPO;
    if (c->delta != 0 && !clipped)
        return gerr_set(e, EX_USAGE, "--delta: only for the clipped losses, not --loss %s", loss_kind_name(c->kind));
    if (c->delta != 0 && !(c->delta > 1 + c->epsilon_high))
        return gerr_set(e, EX_USAGE, "--delta: expected a number > 1 + --epsilon-high (%g), got %g", 1 + c->epsilon_high,
                        c->delta);
    return 0;
}

int loss_batch_check(const loss_opts *c, const loss_batch *b, gerr *e) {
    if (b->n_completions < 1)
        return gerr_set(e, EX_DATAERR, "loss: the batch has no unmasked completion to train on");
    if (b->n_tokens < 0) return gerr_set(e, EX_DATAERR, "loss: negative token count %ld", b->n_tokens);
    if (c->kind == LOSS_DR_GRPO && b->max_new_tokens < 1)
        return gerr_set(e, EX_DATAERR, "--loss dr_grpo: max new tokens must be at least 1, got %d",
                        b->max_new_tokens);
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double loss_entropy_threshold(const float *h, long n, double q) {
    if (q >= 1 || n <= 0) return -INFINITY;
    double *v = xmalloc(sizeof *v * (size_t)n);
    for (long i = 0; i < n; i++) v[i] = h[i];
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    /* torch.quantile: rank (1 - q)(n - 1), then torch.lerp between its two
     * neighbours, which computes from the nearer end */
    double rank = (1.0 - q) * (double)(n - 1), below = floor(rank);
    long lo = (long)below, hi = lo + 1 < n ? lo + 1 : lo;
    double wgt = rank - below, a = v[lo], b = v[hi];
    double t = wgt < 0.5 ? a + wgt * (b - a) : b - (b - a) * (1.0 - wgt);
    free(v);
    return t;
}

void loss_stats_add(loss_stats *into, const loss_stats *from) {
    if (from->is_units) {
        into->is_w_min = into->is_units && into->is_w_min < from->is_w_min ? into->is_w_min : from->is_w_min;
        into->is_w_max = into->is_units && into->is_w_max > from->is_w_max ? into->is_w_max : from->is_w_max;
    }
    into->is_diff_max = into->is_diff_max > from->is_diff_max ? into->is_diff_max : from->is_diff_max;
    into->loss += from->loss;
    into->policy_loss += from->policy_loss;
    into->kl_sum += from->kl_sum;
    into->kl_tokens += from->kl_tokens;
    into->entropy_sum += from->entropy_sum;
    into->entropy_tokens += from->entropy_tokens;
    into->tokens += from->tokens;
    into->completions += from->completions;
    into->clip_units += from->clip_units;
    into->clipped_low += from->clipped_low;
    into->clipped_high += from->clipped_high;
    into->clipped_region += from->clipped_region;
    into->clipped_cispo += from->clipped_cispo;
    into->clipped_delta += from->clipped_delta;
    into->entropy_masked += from->entropy_masked;
    into->off_policy_masked += from->off_policy_masked;
    into->is_diff_sum += from->is_diff_sum;
    into->is_tokens += from->is_tokens;
    into->is_w_sum += from->is_w_sum;
    into->is_units += from->is_units;
}

/* w_i of loss.h: the aggregation as a per-completion weight. Zero-length
 * completions divide by 1, as TRL's clamp(min=1) does. */
static double completion_weight(const loss_opts *c, const loss_batch *b, int n) {
    double nc = b->n_completions > 0 ? (double)b->n_completions : 1.0;
    switch (c->kind) {
    case LOSS_GRPO:
    case LOSS_SAPO: return 1.0 / (nc * (n > 0 ? n : 1));
    case LOSS_BNPO:
    case LOSS_DAPO:
    case LOSS_CISPO: return 1.0 / (b->n_tokens > 0 ? (double)b->n_tokens : 1.0);
    case LOSS_DR_GRPO: return 1.0 / (nc * (b->max_new_tokens > 0 ? b->max_new_tokens : 1));
    }
    return 0;
}

/* The policy term at one ratio: its value, d(value)/d(log-ratio), and the
 * clip events. cispo's value is -w A logp, whose gradient does not go
 * through rho: dlogp is its gradient with respect to logp itself. */
typedef struct {
    double value, dlogratio, dlogp;
    bool low, high, cispo, delta;
} surrogate;

/* torch.clamp passes the gradient at the bounds and torch.minimum splits it
 * at ties, so a branch is dead only where clipping strictly wins: rho above
 * the range with A > 0, below it with A < 0, or above delta with A < 0
 * (delta > 1 + eps_high is checked by the caller). */
static surrogate surrogate_at(const loss_opts *c, double rho, double a, double logp) {
    double lo = 1.0 - c->epsilon_low, hi = 1.0 + c->epsilon_high;
    surrogate s = {0};
    s.high = rho > hi && a > 0;
    if (c->kind == LOSS_CISPO) {
        double weight = rho < hi ? rho : hi; /* no lower bound, as MiniMax-M1 and TRL */
        s.value = -weight * a * logp;
        s.dlogp = -weight * a;
        s.cispo = s.high;
        s.high = false;
        return s;
    }
    if (c->kind == LOSS_SAPO) {
        double tau = a > 0 ? c->tau_pos : c->tau_neg, sg = 1.0 / (1.0 + exp(-tau * (rho - 1.0)));
        s.value = -4.0 / tau * sg * a;
        s.dlogratio = -4.0 * sg * (1.0 - sg) * a * rho; /* d sigmoid(u)/du = sg (1 - sg) */
        s.high = false;
        return s;
    }
    s.delta = c->delta > 0 && rho > c->delta && a < 0;
    double bounded = c->delta > 0 && rho > c->delta ? c->delta : rho;
    double clipped = rho < lo ? lo : rho > hi ? hi : rho;
    double u = bounded * a, w = clipped * a;
    s.value = -(u < w ? u : w);
    s.low = rho < lo && a < 0;
    s.dlogratio = s.low || s.high || s.delta ? 0.0 : -a * rho;
    return s;
}

static void count_clips(loss_stats *s, const surrogate *p) {
    s->clip_units++;
    s->clipped_low += p->low;
    s->clipped_high += p->high;
    s->clipped_region += p->low || p->high;
    s->clipped_cispo += p->cispo;
    s->clipped_delta += p->delta;
}

/* The sampler/trainer weight of one unit (a token, or a whole completion
 * from its summed log-difference), truncated or masked at the cap. */
static double is_weight(const loss_opts *c, double log_diff) {
    double w = exp(log_diff);
    return w > c->is_cap ? (c->is_mask ? 0.0 : c->is_cap) : w;
}

static void count_is_weight(loss_stats *s, double w) {
    s->is_w_min = s->is_units && s->is_w_min < w ? s->is_w_min : w;
    s->is_w_max = s->is_units && s->is_w_max > w ? s->is_w_max : w;
    s->is_w_sum += w;
    s->is_units++;
}

/* k_t of loss.h for token t: the completion's factor k0 (off-policy mask,
 * sequence IS weight) times the token's IS weight and entropy mask. */
static double token_factor(const loss_opts *c, const loss_batch *b, const loss_seq *q, const float *sampler, int t,
                           double k0, double *is_w) {
    double k = k0;
    if (c->is_level == IS_TOKEN) k *= *is_w = is_weight(c, (double)q->old_logp[t] - (double)sampler[t]);
    if (q->entropy && q->entropy[t] < b->entropy_threshold) k = 0;
    return k;
}

void loss_completion(const loss_opts *c, const loss_batch *b, const loss_seq *q, float *dlogp, float *dentropy,
                     loss_stats *s) {
    int n = q->n;
    const float *sampler = q->sampler_logp ? q->sampler_logp : q->old_logp;
    double w = completion_weight(c, b, n), a = q->advantage;
    bool use_kl = c->beta != 0 && q->ref_logp;
    s->completions++;
    /* DeepSeek-V3.2 / TRL: a completion with A < 0 whose mean log(sampler /
     * current) exceeds the threshold leaves the policy term */
    double keep = 1.0;
    if (c->off_policy_threshold >= 0 && a < 0 && n > 0) {
        double kl = 0;
        for (int t = 0; t < n; t++) kl += (double)sampler[t] - (double)q->logp[t];
        if (kl / n > c->off_policy_threshold) keep = 0.0, s->off_policy_masked++;
    }
    double seq_is = 1.0, seq_diff = 0;
    if (c->is_level != IS_OFF) {
        for (int t = 0; t < n; t++) {
            double d = (double)q->old_logp[t] - (double)sampler[t];
            seq_diff += d;
            s->is_diff_sum += fabs(d);
            s->is_diff_max = s->is_diff_max > fabs(d) ? s->is_diff_max : fabs(d);
        }
        s->is_tokens += n;
        if (c->is_level == IS_SEQUENCE) count_is_weight(s, seq_is = is_weight(c, seq_diff));
    }
    /* at sequence level rho_i depends on every token: d/dlogp_t of
     * sum_t' k_t' f(rho_i) is f'(rho_i) rho_i (sum_t' k_t') / n, a share
     * every token gets (cispo's weight carries no gradient: none there) */
    surrogate seq = {0};
    double share = 0, is_w = 1;
    if (c->sequence_level) {
        double sum = 0, k_sum = 0;
        for (int t = 0; t < n; t++) {
            sum += (double)q->logp[t] - (double)q->old_logp[t];
            k_sum += token_factor(c, b, q, sampler, t, keep * seq_is, &is_w);
        }
        seq = surrogate_at(c, exp(sum / (n > 0 ? n : 1)), a, 0);
        count_clips(s, &seq);
        if (c->kind != LOSS_CISPO && n > 0) share = seq.dlogratio * k_sum / n;
    }
    double loss = 0, policy = 0;
    for (int t = 0; t < n; t++) {
        double lp = q->logp[t], k = token_factor(c, b, q, sampler, t, keep * seq_is, &is_w);
        if (c->is_level == IS_TOKEN) count_is_weight(s, is_w);
        if (q->entropy && q->entropy[t] < b->entropy_threshold) s->entropy_masked++;
        surrogate p;
        if (c->sequence_level) {
            p = seq;
            if (c->kind == LOSS_CISPO) p.value = seq.dlogp * lp; /* the weight is per completion, logp per token */
        } else {
            p = surrogate_at(c, exp(lp - q->old_logp[t]), a, lp);
            count_clips(s, &p);
        }
        double tok = k * p.value, g = k * (p.dlogp + (c->sequence_level ? 0 : p.dlogratio)) + share;
        policy += tok;
        if (q->ref_logp) {
            double d = (double)q->ref_logp[t] - lp, ed = exp(d);
            double k3 = ed - d - 1.0;
            s->kl_sum += k3;
            s->kl_tokens++;
            if (use_kl) {
                tok += c->beta * k3;
                g += c->beta * (1.0 - ed); /* d k3 / d logp = 1 - exp(ref - logp) */
            }
        }
        if (q->entropy) {
            s->entropy_sum += q->entropy[t];
            s->entropy_tokens++;
            tok -= c->entropy_coef * q->entropy[t];
        }
        if (dentropy) dentropy[t] = (float)(-w * c->entropy_coef);
        loss += tok;
        dlogp[t] = (float)(w * g);
    }
    s->loss += w * loss;
    s->policy_loss += w * policy;
    s->tokens += n;
}

loss_metrics loss_stats_metrics(const loss_opts *c, const loss_stats *s) {
    loss_metrics m;
    m.loss = s->loss;
    m.policy_loss = s->policy_loss;
    m.kl = s->kl_tokens ? s->kl_sum / (double)s->kl_tokens : NAN;
    m.entropy = s->entropy_tokens ? s->entropy_sum / (double)s->entropy_tokens : NAN;
    double u = (double)s->clip_units;
    bool ppo = c->kind != LOSS_CISPO && c->kind != LOSS_SAPO && s->clip_units;
    m.clip_low = ppo ? (double)s->clipped_low / u : NAN;
    m.clip_high = ppo ? (double)s->clipped_high / u : NAN;
    m.clip_region = ppo ? (double)s->clipped_region / u : NAN;
    m.clip_delta = ppo && c->delta > 0 ? (double)s->clipped_delta / u : NAN;
    m.clip_cispo = c->kind == LOSS_CISPO && s->clip_units ? (double)s->clipped_cispo / u : NAN;
    m.entropy_masked = isfinite(c->top_entropy_quantile) && c->top_entropy_quantile < 1 && s->tokens
                           ? (double)s->entropy_masked / (double)s->tokens
                           : NAN;
    m.off_policy_masked =
        c->off_policy_threshold >= 0 && s->completions ? (double)s->off_policy_masked / (double)s->completions : NAN;
    bool is = c->is_level != IS_OFF;
    m.is_diff_mean = is && s->is_tokens ? s->is_diff_sum / (double)s->is_tokens : NAN;
    m.is_diff_max = is && s->is_tokens ? s->is_diff_max : NAN;
    m.is_w_min = is && s->is_units ? s->is_w_min : NAN;
    m.is_w_mean = is && s->is_units ? s->is_w_sum / (double)s->is_units : NAN;
    m.is_w_max = is && s->is_units ? s->is_w_max : NAN;
    return m;
}
