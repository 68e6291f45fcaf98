/* The GRPO loss family and its gradient with respect to the policy's
 * per-token log-probabilities and entropies (formats/loss.md is the
 * specification).
 *
 * Per completion token t of completion i, with advantage A_i:
 *   rho      = exp(logp_t - old_t)                    token level
 *            = exp(mean_t(logp_t - old_t))            sequence level (GSPO)
 *   policy_t = -min(rho A_i, clip(rho, 1 - eps_low, 1 + eps_high) A_i)
 *              (rho bounded by delta first where A_i < 0: --delta)
 *            = -sg(min(rho, 1 + eps_high)) A_i logp_t         cispo
 *            = -(4 / tau) sigmoid(tau (rho - 1)) A_i          sapo
 *   policy_t is multiplied by the entropy mask, the off-policy mask and the
 *   sampler/trainer importance weight where those are on, then
 *   loss_t   = policy_t + beta k3_t - entropy_coef H_t
 *   k3_t     = exp(ref_t - logp_t) - (ref_t - logp_t) - 1
 *   loss     = sum_i sum_t w_i loss_t
 * The weight w_i carries the aggregation, over the whole batch so the result
 * does not depend on how the caller splits it into micro-batches:
 *   grpo, sapo          w_i = 1 / (N |o_i|)  mean over completions of token means
 *   bnpo, dapo, cispo   w_i = 1 / T          token mean over the batch
 *   dr_grpo             w_i = 1 / (N L)      L = max new tokens
 * N, T: completions and tokens of the batch's unmasked completions (masked
 * ones are left out of everything and get no gradient: the caller skips them).
 * A completion's tokens here are the policy's: of a multi-turn record the
 * caller passes only its completion_mask-1 tokens (environment tokens are
 * context, never loss tokens), so every count above is of those.
 *
 * Arithmetic is in double; inputs and the gradient are float. */
#ifndef GRPO_LOSS_H
#define GRPO_LOSS_H

#include <stdbool.h>

#include "../util/err.h"

typedef enum { LOSS_GRPO, LOSS_BNPO, LOSS_DR_GRPO, LOSS_DAPO, LOSS_CISPO, LOSS_SAPO } loss_kind;
enum { LOSS_N_KINDS = LOSS_SAPO + 1 };

/* Importance-sampling correction between the sampler and the trainer's old
 * policy (--is-correction): off, per token, or one weight per completion. */
typedef enum { IS_OFF, IS_TOKEN, IS_SEQUENCE } is_level;
enum { IS_N_LEVELS = IS_SEQUENCE + 1 };

/* The flags' spellings, in enum order (lib/util/flags.h's kind tables):
 * --loss, --importance-level (token, sequence: sequence_level false, true),
 * --is-correction, and --is-mode (truncate, mask: is_mask false, true). */
extern const char *const loss_kind_names[LOSS_N_KINDS];
extern const char *const loss_level_names[2];
extern const char *const is_level_names[IS_N_LEVELS];
extern const char *const is_mode_names[2];

/* One of loss_kind_names; EX_USAGE naming --loss on anything else. */
int loss_kind_parse(const char *s, loss_kind *k, gerr *e);
/* The flag's spelling; NULL for a value outside the enum. */
const char *loss_kind_name(loss_kind k);

typedef struct {
    loss_kind kind;
    bool sequence_level; /* --importance-level sequence (GSPO) */
    double epsilon_low;  /* clip below at 1 - epsilon_low */
    double epsilon_high; /* clip above at 1 + epsilon_high; cispo's cap on its weight */
    double beta;         /* weight of the k3 KL term; 0 = no reference needed */
    double delta;        /* INTELLECT-2: the ratio bounded by delta where A < 0; 0 = off */
    double tau_pos, tau_neg;      /* sapo's gate temperatures for A > 0 and A <= 0 */
    double entropy_coef;          /* loss_t -= entropy_coef * H_t */
    double top_entropy_quantile;  /* the fraction of tokens kept by entropy (the caller's threshold); 1 = all */
    double off_policy_threshold;  /* DeepSeek-V3.2's sequence mask; < 0 = off */
    is_level is_level;
    bool is_mask;  /* weights above is_cap become 0 (else they are truncated to it) */
    double is_cap;
    /* the router's load-balancing loss of a mixture of experts, added with
     * this coefficient (trainer.h; formats/loss.md); 0 = off */
    double router_aux_coef;
} loss_opts;

/* loss_opts with every extra off (the sapo gate temperatures 1 and 1.05,
 * the IS cap 3, truncating, for when they are turned on): the plain clipped
 * surrogate. */
loss_opts loss_opts_plain(loss_kind kind, bool sequence_level, double epsilon_low, double epsilon_high, double beta);
/* grpo-update's defaults (formats/loss.md): loss_opts_plain of grpo at
 * token level, epsilon 0.2 both ways and beta 0.04, IS weights above the
 * cap masked. */
loss_opts loss_opts_default(void);
/* Each number within its range, EX_USAGE naming the flag otherwise: the one
 * place the ranges are decided. epsilon_low in [0, 1) keeps the lower clip
 * bound 1 - epsilon_low a positive ratio (at or below 0 it could never bind,
 * rho being exp(...) > 0); delta is 0 or above 1 + epsilon_high (at or
 * below, the bound would change the A > 0 branch too), and only for the
 * clipped losses. */
int loss_opts_check(const loss_opts *c, gerr *e);

/* Totals over the batch's unmasked completions. */
typedef struct {
    long n_completions;
    long n_tokens;
    int max_new_tokens;       /* the rollout's limit; used by dr_grpo */
    double entropy_threshold; /* tokens with H_t below it leave the policy term; -INFINITY = none do */
} loss_batch;

/* EX_DATAERR when the totals cannot be divided by: no completions, negative
 * counts, or max_new_tokens < 1 with dr_grpo. */
int loss_batch_check(const loss_opts *c, const loss_batch *b, gerr *e);

/* The --top-entropy-quantile threshold over the n entropies of the batch's
 * loss tokens: their (1 - q)-quantile, interpolated linearly between order
 * statistics as torch.quantile does; -INFINITY when q >= 1 or n == 0 (every
 * token stays). Sorts a copy; h is not changed. */
double loss_entropy_threshold(const float *h, long n, double q);

/* Sums over the completions seen, for the metrics. Zero-initialise; merge
 * per-thread copies with loss_stats_add. */
typedef struct {
    double loss;        /* sum of w_i loss_t: the batch loss once all are in */
    double policy_loss; /* the same without the KL and entropy terms */
    double kl_sum;      /* plain sum of k3_t over tokens with a reference */
    long kl_tokens;
    double entropy_sum; /* plain sum of the given per-token entropies */
    long entropy_tokens;
    long tokens, completions;
    /* Clip counts, TRL's: low = rho < 1 - eps_low and A < 0, high = rho >
     * 1 + eps_high and A > 0, region = either; cispo = its weight capped
     * with A > 0; delta = rho > delta with A < 0. Counted per token at token
     * level and per completion at sequence level (TRL's masked_batch_mean
     * takes the plain mean of its one column there); clip_units is the
     * matching denominator. */
    long clip_units, clipped_low, clipped_high, clipped_region, clipped_cispo, clipped_delta;
    long entropy_masked;   /* tokens left out of the policy term by the entropy threshold */
    long off_policy_masked; /* completions left out by --off-policy-mask-threshold */
    /* --is-correction: |old - sampler| per token, and the weights as applied */
    double is_diff_sum, is_diff_max;
    long is_tokens;
    double is_w_sum, is_w_min, is_w_max;
    long is_units;
} loss_stats;

void loss_stats_add(loss_stats *into, const loss_stats *from);

/* One unmasked completion of n tokens (n may be 0: it adds nothing). */
typedef struct {
    int n;
    const float *logp;         /* the current policy */
    const float *old_logp;     /* pi_old: the rollout's log-probs, or the trainer's own (--recompute-old) */
    const float *sampler_logp; /* the rollout's own: the off-policy mask and the IS correction; NULL = old_logp */
    const float *ref_logp;     /* needed when beta > 0; otherwise optional, feeds only the kl metric */
    const float *entropy;      /* per token; needed for the entropy threshold and coefficient, else optional */
    double advantage;
} loss_seq;

/* Writes dlogp[t] = d(batch loss)/d(logp[t]) and, when dentropy is not NULL,
 * dentropy[t] = d(batch loss)/d(H_t), and adds this completion's share to s.
 * Gradients of micro-batches simply add up. */
void loss_completion(const loss_opts *c, const loss_batch *b, const loss_seq *q, float *dlogp, float *dentropy,
                     loss_stats *s);

/* Metric values (formats/metrics.md). NaN marks one that does not apply
 * (write null): kl without reference log-probs, entropy without entropies,
 * the clip ratios and means of an empty batch or of a loss without them. */
typedef struct {
    double loss, policy_loss;
    double kl;      /* mean k3 over tokens */
    double entropy; /* mean over tokens */
    double clip_low, clip_high, clip_region, clip_cispo, clip_delta;
    double entropy_masked, off_policy_masked; /* fractions of tokens, of completions */
    double is_diff_mean, is_diff_max, is_w_min, is_w_mean, is_w_max;
} loss_metrics;

loss_metrics loss_stats_metrics(const loss_opts *c, const loss_stats *s);

#endif
