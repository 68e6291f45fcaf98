/* grpo-update's run: load the policy (and its state when it is one of our
 * checkpoints), read the batch, compute reference (and optionally old)
 * log-probs once, then --iterations optimizer steps, each a pass over the
 * batch in micro-batches with gradients accumulated, and write the next
 * checkpoint whole (update_ckpt.c). */
#include "update.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sysexits.h>

#include "../ckpt/load.h"
#include "../ops/blas.h"
#include "../model/lora.h"
#include "../model/model.h"
#include "../util/clock.h"
#include "../util/strbuf.h"
#include "state.h"
#include "trainer.h"
#include "update_internal.h"

void update_opts_default(update_opts *o) {
    memset(o, 0, sizeof *o);
    optim_opts_default(&o->optim);
    o->optim.max_grad_norm = 1.0;
    o->optimizer = "adamw", o->lr_schedule = "constant", o->betas = "0.9,0.999";
    o->loss = "grpo", o->importance_level = "token";
    o->beta = 0.04, o->epsilon = 0.2, o->epsilon_high = -1;
    o->sapo_tau_pos = 1.0, o->sapo_tau_neg = 1.05, o->top_entropy_quantile = 1, o->off_policy_mask_threshold = -1;
    o->is_correction = "none", o->is_mode = "mask", o->is_cap = 3.0;
    o->iterations = 1;
    o->temperature = -1;
    o->micro_batch = 2048;
    o->lora_targets = "q,k,v,o,gate,up,down";
    o->device = "cpu";
}

/* Consecutive sequences packed up to micro_batch tokens (at least one). */
static int next_micro(const update_batch *b, int s0, long long budget, train_batch *tb, int *mstart) {
    int ns = 0;
    while (s0 + ns < b->n) {
        int len = b->start[s0 + ns + 1] - b->start[s0 + ns];
        if (ns > 0 && (long long)(b->start[s0 + ns] - b->start[s0]) + len > budget) break;
        ns++;
    }
    for (int s = 0; s <= ns; s++) mstart[s] = b->start[s0 + s] - b->start[s0];
    *tb = (train_batch){ns, mstart, b->n_prompt + s0, b->tokens + b->start[s0], b->key + s0, b->target + b->start[s0]};
    return ns;
}

/* The biggest micro-batch: rows and targets, to size the trainer. */
static void micro_sizes(const update_batch *b, long long budget, int *rows, int *targets) {
    int mstart[b->n + 1];
    train_batch tb;
    *rows = 1, *targets = 1;
    for (int s0 = 0; s0 < b->n;) {
        int ns = next_micro(b, s0, budget, &tb, mstart);
        int r = mstart[ns], t = b->tgt_start[s0 + ns] - b->tgt_start[s0];
        *rows = r > *rows ? r : *rows, *targets = t > *targets ? t : *targets;
        s0 += ns;
    }
}

/* logp (and entropy, when not NULL) of every target of the batch, forward
 * only: the reference, the old policy, or the entropies of the policy. */
static void logp_pass(trainer *t, const update_batch *b, long long budget, float temp, bool lora_off, float *out,
                      float *entropy) {
    int mstart[b->n + 1];
    train_batch tb;
    for (int s0 = 0; s0 < b->n;) {
        int ns = next_micro(b, s0, budget, &tb, mstart);
        int o0 = b->tgt_start[s0];
        trainer_forward(t, &tb, temp, false, lora_off, out + o0, entropy ? entropy + o0 : NULL);
        s0 += ns;
    }
}

/* The flags of the newer losses and masks (formats/loss.md). */
static int check_loss_extras(const update_opts *o, loss_opts *l, gerr *e) {
    bool ppo = l->kind != LOSS_CISPO && l->kind != LOSS_SAPO;
    if (o->delta != 0 && !ppo) return gerr_set(e, EX_USAGE, "--delta: only for the clipped losses, not --loss %s", o->loss);
    /* at or below 1 + eps_high the bound would change the A > 0 branch too */
    if (o->delta != 0 && !(o->delta > 1 + l->epsilon_high && isfinite(o->delta)))
        return gerr_set(e, EX_USAGE, "--delta: expected a number > 1 + --epsilon-high (%g), got %g", 1 + l->epsilon_high,
                        o->delta);
    l->delta = o->delta;
    if (!(o->sapo_tau_pos > 0 && o->sapo_tau_neg > 0 && isfinite(o->sapo_tau_pos) && isfinite(o->sapo_tau_neg)))
        return gerr_set(e, EX_USAGE, "--sapo-tau-pos/--sapo-tau-neg: expected numbers > 0, got %g and %g",
                        o->sapo_tau_pos, o->sapo_tau_neg);
    l->tau_pos = o->sapo_tau_pos, l->tau_neg = o->sapo_tau_neg;
    if (!(o->entropy_coef >= 0 && isfinite(o->entropy_coef)))
        return gerr_set(e, EX_USAGE, "--entropy-coef: expected a number >= 0, got %g", o->entropy_coef);
    l->entropy_coef = o->entropy_coef;
    if (!(o->top_entropy_quantile >= 0 && o->top_entropy_quantile <= 1))
        return gerr_set(e, EX_USAGE, "--top-entropy-quantile: expected a number in [0, 1], got %g", o->top_entropy_quantile);
    l->top_entropy_quantile = o->top_entropy_quantile;
    if (!isfinite(o->off_policy_mask_threshold))
        return gerr_set(e, EX_USAGE, "--off-policy-mask-threshold: expected a number, got %g", o->off_policy_mask_threshold);
    l->off_policy_threshold = o->off_policy_mask_threshold;
    if (!strcmp(o->is_correction, "none")) l->is_level = IS_OFF;
    else if (!strcmp(o->is_correction, "token")) l->is_level = IS_TOKEN;
    else if (!strcmp(o->is_correction, "sequence")) l->is_level = IS_SEQUENCE;
    else return gerr_set(e, EX_USAGE, "--is-correction: expected none, token or sequence, got '%s'", o->is_correction);
    if (strcmp(o->is_mode, "truncate") && strcmp(o->is_mode, "mask"))
        return gerr_set(e, EX_USAGE, "--is-mode: expected truncate or mask, got '%s'", o->is_mode);
    l->is_mask = !strcmp(o->is_mode, "mask");
    if (!(o->is_cap >= 1 && isfinite(o->is_cap))) return gerr_set(e, EX_USAGE, "--is-cap: expected a number >= 1, got %g", o->is_cap);
    l->is_cap = o->is_cap;
    return 0;
}

static int check_opts(const update_opts *o, update_config *c, gerr *e) {
    if (!o->model) return gerr_set(e, EX_USAGE, "--model is required");
    if (!o->out) return gerr_set(e, EX_USAGE, "--out is required");
    if (strcmp(o->device, "cpu")) return gerr_set(e, EX_USAGE, "--device %s: this build has the CPU path only", o->device);
    c->optim = o->optim;
    if (optim_kind_parse(o->optimizer, &c->optim.kind, e) || sched_kind_parse(o->lr_schedule, &c->optim.schedule, e) ||
        optim_parse_betas(o->betas, &c->optim.beta1, &c->optim.beta2, e) || optim_opts_check(&c->optim, e) ||
        loss_kind_parse(o->loss, &c->loss.kind, e))
        return e->code;
    if (strcmp(o->importance_level, "token") && strcmp(o->importance_level, "sequence"))
        return gerr_set(e, EX_USAGE, "--importance-level: expected token or sequence, got '%s'", o->importance_level);
    c->loss.sequence_level = !strcmp(o->importance_level, "sequence");
    if (!(o->epsilon >= 0 && o->epsilon < 1)) return gerr_set(e, EX_USAGE, "--epsilon: expected a number in [0, 1), got %g", o->epsilon);
    c->loss.epsilon_low = o->epsilon;
    c->loss.epsilon_high = o->epsilon_high < 0 ? o->epsilon : o->epsilon_high;
    if (!(o->beta >= 0 && isfinite(o->beta))) return gerr_set(e, EX_USAGE, "--beta: expected a number >= 0, got %g", o->beta);
    c->loss.beta = o->beta;
    if (check_loss_extras(o, &c->loss, e)) return e->code;
    if (o->lora_r > 0 && lora_parse_targets(o->lora_targets, &c->lora_targets, e)) return e->code;
    return 0;
}

int update_run(const update_opts *o, gerr *e) {
    double t_start = now_seconds();
    update_config cfg = {0};
    if (check_opts(o, &cfg, e)) return e->code;
    if (o->threads > 0) blas_set_threads((int)o->threads);
    blas_setup_threads();

    /* the policy: weights, adapter, and state when it is our checkpoint */
    policy pol;
    if (policy_load(&pol, o, &cfg, e)) return e->code;
    const model *m = &pol.m;

    update_batch b;
    int rc = update_batch_read(&b, o->in, m->cfg.vocab_size, o->mask_truncated, e);
    if (rc) goto out_policy;
    float temp = 1.0f;
    if (o->temperature >= 0) {
        double want = o->temperature == 0 ? 1 : o->temperature;
        if (b.temperature_seen && b.temperature != want) {
            rc = gerr_set(e, EX_DATAERR, "%s: the batch was sampled at temperature %g, --temperature is %g",
                          o->in && strcmp(o->in, "-") ? o->in : "<stdin>", b.temperature, o->temperature);
            goto out_batch;
        }
        temp = (float)want;
    } else if (b.temperature_seen) {
        temp = (float)b.temperature;
    }
    loss_batch lb = {b.n, b.tgt_start[b.n], (int)(o->max_new_tokens > 0 ? o->max_new_tokens : b.max_completion),
                     -INFINITY};
    if (lb.max_new_tokens < 1) lb.max_new_tokens = 1;
    if (b.n == 0 || lb.n_tokens == 0) {
        rc = gerr_set(e, EX_DATAERR, "%s: no record to train on (%ld records, %ld without advantage, %ld masked)",
                      o->in && strcmp(o->in, "-") ? o->in : "<stdin>", b.n_records, b.n_no_advantage, b.n_masked);
        goto out_batch;
    }

    int max_rows, max_targets;
    micro_sizes(&b, o->micro_batch, &max_rows, &max_targets);
    trainer t = {0}, ref_t = {0};
    rc = trainer_init(&t, m, pol.has_lora ? &pol.l : NULL, pol.has_lora ? TRAINER_LORA : TRAINER_FULL, o->recompute,
                      max_rows, b.max_len, max_targets, e);
    if (rc) goto out_batch;
    t.dropout_seed = (uint64_t)pol.seed;

    int n_t = b.tgt_start[b.n];
    float *logp = xmalloc(sizeof(float) * (size_t)n_t), *ent = xmalloc(sizeof(float) * (size_t)n_t);
    float *dlogp = xmalloc(sizeof(float) * (size_t)n_t), *ref_logp = NULL, *old = b.old_logp;
    float *dent = xmalloc(sizeof(float) * (size_t)n_t), *gate = NULL;
    /* the reference: the base under the adapter, or a second model */
    if (cfg.loss.beta > 0) {
        ref_logp = xmalloc(sizeof(float) * (size_t)n_t);
        if (pol.has_lora) {
            logp_pass(&t, &b, o->micro_batch, temp, true, ref_logp, NULL);
        } else if (!strcmp(pol.ref_path, o->model)) {
            /* step 0 of a run: the reference is the policy as loaded, no second copy needed */
            logp_pass(&t, &b, o->micro_batch, temp, false, ref_logp, NULL);
        } else {
            model ref_m;
            if ((rc = model_load(&ref_m, pol.ref_path, e))) goto out_train;
            if (ref_m.cfg.vocab_size != m->cfg.vocab_size || ref_m.n_params != m->n_params) {
                model_free(&ref_m);
                rc = gerr_set(e, EX_DATAERR, "--ref %s: not the same architecture and shape as the policy", pol.ref_path);
                goto out_train;
            }
            if ((rc = trainer_init(&ref_t, &ref_m, NULL, TRAINER_INFER, false, max_rows, b.max_len, max_targets, e))) {
                model_free(&ref_m);
                goto out_train;
            }
            logp_pass(&ref_t, &b, o->micro_batch, temp, false, ref_logp, NULL);
            trainer_free(&ref_t);
            model_free(&ref_m);
        }
    }
    /* the IS correction weighs the sampler against the trainer's own pi_old */
    if (o->recompute_old || cfg.loss.is_level != IS_OFF) {
        old = xmalloc(sizeof(float) * (size_t)n_t);
        logp_pass(&t, &b, o->micro_batch, temp, false, old, NULL);
    }
    bool gated = cfg.loss.top_entropy_quantile < 1;
    if (gated) gate = xmalloc(sizeof(float) * (size_t)n_t);

    metrics_line *lines = xcalloc((size_t)o->iterations, sizeof *lines);
    for (long long it = 0; it < o->iterations; it++) {
        double t0 = now_seconds();
        trainer_zero_grad(&t);
        t.dropout_pass = (uint64_t)(pol.next_index + it);
        loss_stats st = {0};
        int mstart[b.n + 1];
        train_batch tb;
        /* the entropy threshold is the whole batch's: its entropies first, at
         * the same weights (a forward without dropout; logp is overwritten below) */
        if (gated) {
            logp_pass(&t, &b, o->micro_batch, temp, false, logp, gate);
            lb.entropy_threshold = loss_entropy_threshold(gate, n_t, cfg.loss.top_entropy_quantile);
        }
        for (int s0 = 0; s0 < b.n;) {
            int ns = next_micro(&b, s0, o->micro_batch, &tb, mstart);
            int o0 = b.tgt_start[s0];
            trainer_forward(&t, &tb, temp, true, false, logp + o0, ent + o0);
            for (int s = s0; s < s0 + ns; s++) {
                int off = b.tgt_start[s];
                loss_seq q = {b.tgt_start[s + 1] - off, logp + off, old + off, b.old_logp + off,
                              ref_logp ? ref_logp + off : NULL, (gated ? gate : ent) + off, b.advantage[s]};
                loss_completion(&cfg.loss, &lb, &q, dlogp + off, dent + off, &st);
            }
            trainer_backward(&t, &tb, temp, dlogp + o0, cfg.loss.entropy_coef != 0 ? dent + o0 : NULL, ent + o0);
            s0 += ns;
        }
        metrics_line *ml = &lines[it];
        if ((rc = policy_step(&pol, &t, &cfg, &ml->grad_norm, &ml->lr, e))) goto out_lines;
        ml->step = pol.step;
        ml->loss = loss_stats_metrics(&cfg.loss, &st);
        ml->seconds = now_seconds() - t0 + (it == 0 ? t0 - t_start : 0);
    }
    pol.next_index += o->iterations;
    if ((rc = policy_save(&pol, o, &cfg, b.sha256, e))) goto out_lines;
    if (o->metrics)
        for (long long it = 0; it < o->iterations && !rc; it++) rc = metrics_append(o->metrics, &lines[it], &b, e);
    if (!rc)
        fprintf(stderr, "%s: step %lld: %d completions (%ld skipped without advantage, %ld masked), %d completion tokens "
                "trained on, %ld tokens with the prompts (metrics \"tokens\"), loss %.6g, %.1f s\n",
                tool_name(), pol.step, b.n, b.n_no_advantage, b.n_masked, n_t, b.total_tokens, lines[o->iterations - 1].loss.loss,
                now_seconds() - t_start);
out_lines:
    free(lines);
out_train:
    if (old != b.old_logp) free(old);
    free(logp), free(ent), free(dlogp), free(dent), free(gate), free(ref_logp);
    trainer_free(&t);
out_batch:
    update_batch_free(&b);
out_policy:
    policy_free(&pol);
    return rc;
}
