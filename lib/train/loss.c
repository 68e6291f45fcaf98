/* The GRPO loss family: per-token surrogate, KL penalty, batch aggregation
 * and the exact gradient autograd would give (see loss.h). */
#include "loss.h"

#include <math.h>
#include <string.h>

static const char *const kind_names[] = {"grpo", "bnpo", "dr_grpo", "dapo"};

int loss_kind_parse(const char *s, loss_kind *k, gerr *e) {
    for (int i = 0; i < 4; i++) {
        if (!strcmp(s, kind_names[i])) {
            *k = (loss_kind)i;
            return 0;
        }
    }
    return gerr_set(e, EX_USAGE, "--loss: expected grpo, bnpo, dr_grpo or dapo, got '%s'", s);
}

const char *loss_kind_name(loss_kind k) { return (unsigned)k < 4 ? kind_names[k] : NULL; }

int loss_batch_check(const loss_opts *c, const loss_batch *b, gerr *e) {
    if (b->n_completions < 1)
        return gerr_set(e, EX_DATAERR, "loss: the batch has no unmasked completion to train on");
    if (b->n_tokens < 0) return gerr_set(e, EX_DATAERR, "loss: negative token count %ld", b->n_tokens);
    if (c->kind == LOSS_DR_GRPO && b->max_new_tokens < 1)
        return gerr_set(e, EX_DATAERR, "--loss dr_grpo: max new tokens must be at least 1, got %d",
                        b->max_new_tokens);
    return 0;
}

void loss_stats_add(loss_stats *into, const loss_stats *from) {
    into->loss += from->loss;
    into->policy_loss += from->policy_loss;
    into->kl_sum += from->kl_sum;
    into->kl_tokens += from->kl_tokens;
    into->entropy_sum += from->entropy_sum;
    into->entropy_tokens += from->entropy_tokens;
    into->tokens += from->tokens;
    into->clip_units += from->clip_units;
    into->clipped_low += from->clipped_low;
    into->clipped_high += from->clipped_high;
    into->clipped_region += from->clipped_region;
}

/* w_i of loss.h: the aggregation as a per-completion weight. Zero-length
 * completions divide by 1, as TRL's clamp(min=1) does. */
static double completion_weight(const loss_opts *c, const loss_batch *b, int n) {
    double nc = b->n_completions > 0 ? (double)b->n_completions : 1.0;
    switch (c->kind) {
    case LOSS_GRPO: return 1.0 / (nc * (n > 0 ? n : 1));
    case LOSS_BNPO:
    case LOSS_DAPO: return 1.0 / (b->n_tokens > 0 ? (double)b->n_tokens : 1.0);
    case LOSS_DR_GRPO: return 1.0 / (nc * (b->max_new_tokens > 0 ? b->max_new_tokens : 1));
    }
    return 0;
}

/* The clipped surrogate at one ratio: its value and d(value)/d(rho)·rho,
 * i.e. the derivative with respect to the log-ratio. torch.clamp passes the
 * gradient at the bounds and torch.minimum splits it at ties, so the branch
 * is dead only where clipping strictly wins: rho above the range with A > 0,
 * or below it with A < 0. */
typedef struct {
    double value, dlogratio;
    bool low, high;
} surrogate;

static surrogate surrogate_at(const loss_opts *c, double rho, double a) {
    double lo = 1.0 - c->epsilon_low, hi = 1.0 + c->epsilon_high;
    double clipped = rho < lo ? lo : rho > hi ? hi : rho;
    double u = rho * a, w = clipped * a;
    surrogate s;
    s.value = -(u < w ? u : w);
    s.low = rho < lo && a < 0;
    s.high = rho > hi && a > 0;
    s.dlogratio = s.low || s.high ? 0.0 : -a * rho;
    return s;
}

void loss_completion(const loss_opts *c, const loss_batch *b, int n, const float *logp, const float *old_logp,
                     const float *ref_logp, const float *entropy, double advantage, float *dlogp, loss_stats *s) {
    double w = completion_weight(c, b, n);
    bool use_kl = c->beta != 0 && ref_logp;
    surrogate seq = {0};
    if (c->sequence_level) {
        double sum = 0;
        for (int t = 0; t < n; t++) sum += (double)logp[t] - (double)old_logp[t];
        /* d rho_i / d logp_t = rho_i / n, and the completion's n equal token
         * losses weigh w each: the n cancels, leaving w · dlogratio per token */
        seq = surrogate_at(c, exp(sum / (n > 0 ? n : 1)), advantage);
        s->clip_units++;
        s->clipped_low += seq.low;
        s->clipped_high += seq.high;
        s->clipped_region += seq.low || seq.high;
    }
    double loss = 0, policy = 0;
    for (int t = 0; t < n; t++) {
        double lp = logp[t];
        surrogate p = c->sequence_level ? seq : surrogate_at(c, exp(lp - old_logp[t]), advantage);
        if (!c->sequence_level) {
            s->clip_units++;
            s->clipped_low += p.low;
            s->clipped_high += p.high;
            s->clipped_region += p.low || p.high;
        }
        double g = p.dlogratio, tok = p.value;
        if (ref_logp) {
            double d = (double)ref_logp[t] - lp, ed = exp(d);
            double k3 = ed - d - 1.0;
            s->kl_sum += k3;
            s->kl_tokens++;
            if (use_kl) {
                tok += c->beta * k3;
                g += c->beta * (1.0 - ed); /* d k3 / d logp = 1 - exp(ref - logp) */
            }
        }
        if (entropy) {
            s->entropy_sum += entropy[t];
            s->entropy_tokens++;
        }
        policy += p.value;
        loss += tok;
        dlogp[t] = (float)(w * g);
    }
    s->loss += w * loss;
    s->policy_loss += w * policy;
    s->tokens += n;
}

loss_metrics loss_stats_metrics(const loss_stats *s) {
    loss_metrics m;
    m.loss = s->loss;
    m.policy_loss = s->policy_loss;
    m.kl = s->kl_tokens ? s->kl_sum / (double)s->kl_tokens : NAN;
    m.entropy = s->entropy_tokens ? s->entropy_sum / (double)s->entropy_tokens : NAN;
    double u = (double)s->clip_units;
    m.clip_low = s->clip_units ? (double)s->clipped_low / u : NAN;
    m.clip_high = s->clip_units ? (double)s->clipped_high / u : NAN;
    m.clip_region = s->clip_units ? (double)s->clipped_region / u : NAN;
    return m;
}
