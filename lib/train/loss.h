/* The GRPO loss family and its gradient with respect to the policy's
 * per-token log-probabilities (formats/loss.md is the specification).
 *
 * Per completion token t of completion i, with advantage A_i:
 *   rho      = exp(logp_t - old_t)                    token level
 *            = exp(mean_t(logp_t - old_t))            sequence level (GSPO)
 *   policy_t = -min(rho A_i, clip(rho, 1 - eps_low, 1 + eps_high) A_i)
 *   k3_t     = exp(ref_t - logp_t) - (ref_t - logp_t) - 1
 *   loss     = sum_i sum_t w_i (policy_t + beta k3_t)
 * The weight w_i carries the aggregation, over the whole batch so the result
 * does not depend on how the caller splits it into micro-batches:
 *   grpo          w_i = 1 / (N |o_i|)      mean over completions of token means
 *   bnpo, dapo    w_i = 1 / T              token mean over the batch
 *   dr_grpo       w_i = 1 / (N L)          L = max new tokens
 * N, T: completions and tokens of the batch's unmasked completions (masked
 * ones are left out of everything and get no gradient: the caller skips them).
 *
 * Arithmetic is in double; inputs and the gradient are float. */
#ifndef GRPO_LOSS_H
#define GRPO_LOSS_H

#include <stdbool.h>

#include "../util/err.h"

typedef enum { LOSS_GRPO, LOSS_BNPO, LOSS_DR_GRPO, LOSS_DAPO } loss_kind;

/* "grpo|bnpo|dr_grpo|dapo"; EX_USAGE naming --loss on anything else. */
int loss_kind_parse(const char *s, loss_kind *k, gerr *e);
/* The flag's spelling; NULL for a value outside the enum. */
const char *loss_kind_name(loss_kind k);

typedef struct {
    loss_kind kind;
    bool sequence_level; /* --importance-level sequence (GSPO) */
    double epsilon_low;  /* clip below at 1 - epsilon_low */
    double epsilon_high; /* clip above at 1 + epsilon_high */
    double beta;         /* weight of the k3 KL term; 0 = no reference needed */
} loss_opts;

/* Totals over the batch's unmasked completions. */
typedef struct {
    long n_completions;
    long n_tokens;
    int max_new_tokens; /* the rollout's limit; used by dr_grpo */
} loss_batch;

/* EX_DATAERR when the totals cannot be divided by: no completions, negative
 * counts, or max_new_tokens < 1 with dr_grpo. */
int loss_batch_check(const loss_opts *c, const loss_batch *b, gerr *e);

/* Sums over the completions seen, for the metrics. Zero-initialise; merge
 * per-thread copies with loss_stats_add. */
typedef struct {
    double loss;        /* sum of w_i (policy_t + beta k3_t): the batch loss once all are in */
    double policy_loss; /* the same without the KL term */
    double kl_sum;      /* plain sum of k3_t over tokens with a reference */
    long kl_tokens;
    double entropy_sum; /* plain sum of the given per-token entropies */
    long entropy_tokens;
    long tokens;
    /* Clip counts, TRL's: low = rho < 1 - eps_low and A < 0, high = rho >
     * 1 + eps_high and A > 0, region = either. Counted per token at token
     * level and per completion at sequence level (TRL's masked_batch_mean
     * takes the plain mean of its one column there); clip_units is the
     * matching denominator. */
    long clip_units, clipped_low, clipped_high, clipped_region;
} loss_stats;

void loss_stats_add(loss_stats *into, const loss_stats *from);

/* One unmasked completion of n tokens (n may be 0: it adds nothing). logp:
 * the current policy; old_logp: the rollout's sampling log-probs; ref_logp:
 * the reference's, needed when beta > 0 and optional otherwise (it then
 * feeds only the kl metric); entropy: per token, may be NULL; advantage: A_i.
 * Writes dlogp[t] = d(batch loss)/d(logp[t]) and adds this completion's
 * share to s. Gradients of micro-batches simply add up. */
void loss_completion(const loss_opts *c, const loss_batch *b, int n, const float *logp, const float *old_logp,
                     const float *ref_logp, const float *entropy, double advantage, float *dlogp, loss_stats *s);

/* Metric values (formats/metrics.md). NaN marks one that does not apply
 * (write null): kl without reference log-probs, entropy without entropies,
 * the clip ratios and means of an empty batch. */
typedef struct {
    double loss, policy_loss;
    double kl;      /* mean k3 over tokens */
    double entropy; /* mean over tokens */
    double clip_low, clip_high, clip_region;
} loss_metrics;

loss_metrics loss_stats_metrics(const loss_stats *s);

#endif
