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
#include "../cuda/cuda.h"
#include "../dataparallel/dist.h"
#include "../dataparallel/shard.h"
#include "../ops/blas.h"
#include "../runner/device.h"
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
    o->compute = "f32";
}

/* Consecutive sequences packed up to micro_batch tokens (at least one);
 * by_group: none past the end of s0's prompt group, so that a group is cut
 * into the same micro-batches whatever share of the batch it is in. */
static int next_micro(const update_batch *b, int s0, long long budget, bool by_group, train_batch *tb, int *mstart) {
    int ns = 0, end = b->n;
    if (by_group && b->n_groups > 0) { /* the first group start past s0 (binary search) */
        int lo = 1, hi = b->n_groups;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (b->group_start[mid] <= s0) lo = mid + 1;
            else hi = mid;
        }
        end = b->group_start[lo];
    }
    while (s0 + ns < end) {
        int len = b->start[s0 + ns + 1] - b->start[s0 + ns];
        if (ns > 0 && (long long)(b->start[s0 + ns] - b->start[s0]) + len > budget) break;
        ns++;
    }
    for (int s = 0; s <= ns; s++) mstart[s] = b->start[s0 + s] - b->start[s0];
    *tb = (train_batch){ns, mstart, b->n_prompt + s0, b->tokens + b->start[s0], b->key + s0, b->target + b->start[s0]};
    return ns;
}

/* The biggest micro-batch, to size the trainer: rows, rows computed (with
 * share, a group's prompt once: train_batch_rows) and targets. */
typedef struct {
    int rows, computed, targets;
} micro_size;

static micro_size micro_sizes(const update_batch *b, long long budget, bool by_group, bool share) {
    int mstart[b->n + 1];
    train_batch tb;
    micro_size z = {1, 1, 1};
    for (int s0 = 0; s0 < b->n;) {
        int ns = next_micro(b, s0, budget, by_group, &tb, mstart);
        int r = mstart[ns], c = train_batch_rows(&tb, share), t = b->tgt_start[s0 + ns] - b->tgt_start[s0];
        z.rows = r > z.rows ? r : z.rows, z.targets = t > z.targets ? t : z.targets;
        z.computed = c > z.computed ? c : z.computed;
        s0 += ns;
    }
    return z;
}

/* logp (and entropy, when not NULL) of every target of the batch, forward
 * only: the reference, the old policy, or the entropies of the policy. */
static void logp_pass(trainer *t, const update_batch *b, long long budget, bool by_group, float temp, bool lora_off,
                      float *out, float *entropy) {
    int mstart[b->n + 1];
    train_batch tb;
    for (int s0 = 0; s0 < b->n;) {
        int ns = next_micro(b, s0, budget, by_group, &tb, mstart);
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
    if (strcmp(o->compute, "f32") && strcmp(o->compute, "bf16") && strcmp(o->compute, "auto"))
        return gerr_set(e, EX_USAGE, "--compute: expected f32, bf16 or auto, got '%s'", o->compute);
    if (o->group_sums && !strcmp(o->device, "cuda"))
        return gerr_set(e, EX_USAGE, "--group-sums: the float64 gradient sums are kept on the host; not with --device cuda");
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

/* The loss sums of every rank merged in rank order: the metrics of the
 * whole batch, the same on every rank. */
static int merge_stats(const dist *d, loss_stats *st, gerr *e) {
    if (d->size == 1) return 0;
    loss_stats *all = xmalloc(sizeof *all * (size_t)d->size);
    int rc = dist_allgather_bytes(d, st, all, sizeof *st, e);
    if (!rc) {
        memset(st, 0, sizeof *st);
        for (int r = 0; r < d->size; r++) loss_stats_add(st, &all[r]);
    }
    free(all);
    return rc;
}

/* This rank's share of the batch, by whole prompt groups balanced by tokens
 * (lib/dataparallel/shard.h). */
static void take_share(const dist *d, const update_batch *all, update_batch *mine) {
    long long *cum = xmalloc(sizeof *cum * (size_t)(all->n_groups + 1));
    for (int g = 0; g <= all->n_groups; g++) cum[g] = all->start[all->group_start[g]];
    int *first = xmalloc(sizeof *first * (size_t)(d->size + 1));
    shard_groups(cum, all->n_groups, d->size, first);
    update_batch_share(all, all->group_start[first[d->rank]], all->group_start[first[d->rank + 1]], mine);
    free(cum), free(first);
}

/* The step's entropy threshold from every rank's entropies, in batch order. */
static int global_threshold(const dist *d, const float *gate, int n_mine, long n_all, double q, double *threshold,
                            gerr *e) {
    if (d->size == 1) {
        *threshold = loss_entropy_threshold(gate, n_mine, q);
        return 0;
    }
    size_t *counts = xmalloc(sizeof *counts * (size_t)d->size);
    float *all = xmalloc(sizeof *all * (size_t)(n_all ? n_all : 1));
    size_t mine = (size_t)n_mine;
    int rc = dist_allgather_bytes(d, &mine, counts, sizeof mine, e);
    if (!rc) rc = dist_allgatherv_floats(d, gate, all, counts, e);
    if (!rc) *threshold = loss_entropy_threshold(all, n_all, q);
    free(counts), free(all);
    return rc;
}

/* The reference log-probs of b's targets: the base under the adapter, or a
 * second model (or the policy itself at step 0). */
static int reference_pass(trainer *t, const policy *pol, const update_opts *o, const update_batch *b, float temp,
                          float *ref_logp, gerr *e) {
    if (pol->has_lora) {
        logp_pass(t, b, o->micro_batch, o->group_sums, temp, true, ref_logp, NULL);
        return trainer_check(t, e);
    }
    if (!strcmp(pol->ref_path, o->model)) {
        /* step 0 of a run: the reference is the policy as loaded, no second copy needed */
        logp_pass(t, b, o->micro_batch, o->group_sums, temp, false, ref_logp, NULL);
        return trainer_check(t, e);
    }
    micro_size z = micro_sizes(b, o->micro_batch, o->group_sums, true); /* a forward only: prompts shared */
    model ref_m;
    trainer ref_t = {0};
    int rc = model_load(&ref_m, pol->ref_path, e);
    if (rc) return rc;
    if (ref_m.cfg.vocab_size != pol->m.cfg.vocab_size || ref_m.n_params != pol->m.n_params)
        rc = gerr_set(e, EX_DATAERR, "--ref %s: not the same architecture and shape as the policy", pol->ref_path);
    else if (pol->dev)
        rc = model_to_backend(&ref_m, pol->dev, e); /* beside the policy, for this pass only */
    if (!rc && !(rc = trainer_init(&ref_t, &ref_m, NULL, TRAINER_INFER, false, z.rows, z.computed,
                                 b->max_len > 0 ? b->max_len : 1, z.targets, e))) {
        ref_t.be = t->be; /* the policy's --compute */
        logp_pass(&ref_t, b, o->micro_batch, o->group_sums, temp, false, ref_logp, NULL);
        rc = trainer_check(&ref_t, e);
    }
    trainer_free(&ref_t);
    model_free(&ref_m);
    return rc;
}

static const char *input_name(const update_opts *o) { return o->in && strcmp(o->in, "-") ? o->in : "<stdin>"; }

/* One rank's part of the update (the only one without MPI). Every rank
 * reads the whole batch; the loss's normalisers (completions, tokens, the
 * longest completion) come from it, so they are the global ones (their
 * hash agreed across ranks), and each rank trains on its share. After each
 * step that can fail on one rank alone the ranks agree (dist_agree), so an
 * error leaves every rank at once and nothing is written. */
static int update_ranks(const update_opts *o, dist *d, gerr *e) {
    double t_start = now_seconds();
    update_config cfg = {0};
    int rc = dist_agree(d, check_opts(o, &cfg, e), e);
    if (rc) return rc;
    if (o->threads > 0) blas_set_threads((int)o->threads);
    else if (dist_default_threads(d) > 0) blas_set_threads(dist_default_threads(d));
    blas_setup_threads();
    /* the device: under MPI each rank its local rank's GPU, the gradients
     * summed there over NCCL (lib/dataparallel/nccl.c) */
    const backend *dev = o->backend;
    /* --group-sums: auto is the CPU (cuda was refused above; a caller's
     * device, trainer_keep_sums refuses) */
    const char *device = o->group_sums ? "cpu" : o->device;
    if (!dev && strcmp(device, "cpu") && (rc = dist_agree(d, dist_device_open(d, e), e))) return rc;
    if (!dev && (rc = dist_agree(d, device_select("--device", device, &dev, e), e))) return rc;
    if (d->size > 1) {
        double on = dev != NULL;
        if ((rc = dist_sum_doubles(d, &on, 1, e))) goto out_device;
        if (on != 0 && on != d->size)
            rc = gerr_set(e, EX_UNAVAILABLE, "--device %s: %g of %d ranks found a GPU; give every rank one, or --device cpu",
                          o->device, on, d->size);
        else if (dev && o->backend)
            rc = gerr_set(e, EX_USAGE, "a device of the caller's (%s) under MPI: only CUDA's sums over NCCL", dev->name);
        else if (dev)
            rc = dist_nccl_start(d, e);
        if ((rc = dist_agree(d, rc, e))) goto out_device;
    }

    /* the policy: weights, adapter, and state when it is our checkpoint */
    policy pol;
    int loaded = policy_load(&pol, o, &cfg, d, dev != NULL, e); /* frees what it loaded when it fails */
    if (!loaded && dev) loaded = policy_to_device(&pol, dev, e);
    if ((rc = dist_agree(d, loaded, e))) {
        policy_free(&pol); /* a policy that failed to load is zeroed */
        goto out_device;
    }
    const model *m = &pol.m;
    const backend *be;
    if ((rc = dist_agree(d, trainer_compute_backend(pol.compute, m, backend_cpu_bf16(), &be, e), e))) goto out_policy;
    strbuf flags = {0};
    update_flags_json(&flags, &pol, o, &cfg, d->size);
    sb_printf(&flags, "\n%s\n%s\n%s", o->model, o->out, o->metrics ? o->metrics : "");
    rc = dist_check_same(d, flags.data, "the command line (flags, --model, --out or --metrics)", EX_USAGE, e);
    sb_free(&flags);
    if (rc) goto out_policy;

    update_batch all, share, *bp = &all;
    int read = update_batch_read(&all, o->in, m->cfg.vocab_size, o->mask_truncated, e); /* frees all when it fails */
    if ((rc = dist_agree(d, read, e))) {
        if (!read) update_batch_free(&all);
        goto out_policy;
    }
    strbuf what = {0};
    sb_printf(&what, "%s: the batch (its sha256)", input_name(o));
    rc = dist_check_same(d, all.sha256, what.data, EX_DATAERR, e);
    sb_free(&what);
    if (rc) goto out_all;
    float temp = 1.0f;
    if (o->temperature >= 0) {
        double want = o->temperature == 0 ? 1 : o->temperature;
        if (all.temperature_seen && all.temperature != want) {
            rc = gerr_set(e, EX_DATAERR, "%s: the batch was sampled at temperature %g, --temperature is %g",
                          input_name(o), all.temperature, o->temperature);
            goto out_all;
        }
        temp = (float)want;
    } else if (all.temperature_seen) {
        temp = (float)all.temperature;
    }
    loss_batch lb = {all.n, all.tgt_start[all.n],
                     (int)(o->max_new_tokens > 0 ? o->max_new_tokens : all.max_completion), -INFINITY};
    if (lb.max_new_tokens < 1) lb.max_new_tokens = 1;
    if (all.n == 0 || lb.n_tokens == 0) {
        rc = gerr_set(e, EX_DATAERR, "%s: no record to train on (%ld records, %ld without advantage, %ld masked)",
                      input_name(o), all.n_records, all.n_no_advantage, all.n_masked);
        goto out_all;
    }
    if (d->size > 1) {
        take_share(d, &all, &share);
        bp = &share;
        if (d->rank == 0 && d->size > all.n_groups)
            warn("%d ranks, %d prompt groups: %d ranks have no share and only add to the sums", d->size, all.n_groups,
                 d->size - all.n_groups);
    }
    const update_batch *b = bp;

    /* the training pass shares prompts unless LoRA dropout draws a mask per record */
    micro_size z = micro_sizes(b, o->micro_batch, o->group_sums, !(pol.has_lora && pol.l.dropout > 0));
    trainer t = {0};
    rc = dist_agree(d,
                    trainer_init(&t, m, policy_lora(&pol), pol.has_lora ? TRAINER_LORA : TRAINER_FULL,
                                 o->recompute, z.rows, z.computed, b->max_len > 0 ? b->max_len : 1, z.targets, e),
                    e);
    if (rc) {
        trainer_free(&t); /* another rank's failure: this one's trainer was made (freeing a zeroed one is safe) */
        goto out_share;
    }
    t.dropout_seed = (uint64_t)pol.seed;
    t.be = be;

    int n_t = b->tgt_start[b->n];
    size_t n_alloc = (size_t)n_t + 1; /* a rank without a share has no target */
    float *logp = xmalloc(sizeof(float) * n_alloc), *ent = xmalloc(sizeof(float) * n_alloc);
    float *dlogp = xmalloc(sizeof(float) * n_alloc), *ref_logp = NULL, *old = b->old_logp;
    float *dent = xmalloc(sizeof(float) * n_alloc), *gate = NULL;
    if (o->group_sums && (rc = dist_agree(d, trainer_keep_sums(&t, e), e))) goto out_train;
    if (cfg.loss.beta > 0) {
        ref_logp = xmalloc(sizeof(float) * n_alloc);
        rc = dist_agree(d, reference_pass(&t, &pol, o, b, temp, ref_logp, e), e);
        if (rc) goto out_train;
    }
    /* the IS correction weighs the sampler against the trainer's own pi_old */
    if (o->recompute_old || cfg.loss.is_level != IS_OFF) {
        old = xmalloc(sizeof(float) * n_alloc);
        logp_pass(&t, b, o->micro_batch, o->group_sums, temp, false, old, NULL);
        if ((rc = dist_agree(d, trainer_check(&t, e), e))) goto out_train;
    }
    bool gated = cfg.loss.top_entropy_quantile < 1, single_pass = false;
    if (gated) {
        gate = xmalloc(sizeof(float) * n_alloc);
        /* the threshold needs the whole batch's entropies before the first
         * backward: with every rank's share in one micro-batch and no
         * dropout, the training forward's (the same bits as a forward of
         * their own); else a forward pass of their own first */
        int mstart[b->n + 1];
        train_batch tb;
        double split = b->n > 0 && next_micro(b, 0, o->micro_batch, o->group_sums, &tb, mstart) == b->n ? 0 : 1;
        if ((rc = dist_sum_doubles(d, &split, 1, e))) goto out_train;
        single_pass = split == 0 && !(pol.has_lora && pol.l.dropout > 0);
    }

    metrics_line *lines = xcalloc((size_t)o->iterations, sizeof *lines);
    for (long long it = 0; it < o->iterations; it++) {
        double t0 = now_seconds();
        trainer_zero_grad(&t);
        t.dropout_pass = (uint64_t)(pol.next_index + it);
        loss_stats st = {0};
        int mstart[b->n + 1];
        train_batch tb;
        /* the entropy threshold is the whole batch's: its entropies first, at
         * the same weights (a forward without dropout; logp is overwritten below) */
        if (gated && !single_pass) {
            logp_pass(&t, b, o->micro_batch, o->group_sums, temp, false, logp, gate);
            if ((rc = dist_agree(d, trainer_check(&t, e), e))) goto out_lines;
            if ((rc = global_threshold(d, gate, n_t, lb.n_tokens, cfg.loss.top_entropy_quantile,
                                       &lb.entropy_threshold, e)))
                goto out_lines;
        }
        for (int s0 = 0; s0 < b->n;) {
            int ns = next_micro(b, s0, o->micro_batch, o->group_sums, &tb, mstart);
            int o0 = b->tgt_start[s0];
            trainer_forward(&t, &tb, temp, true, false, logp + o0, ent + o0);
            if ((rc = trainer_check(&t, e))) break; /* agreed below: ranks' micro-batch counts differ */
            if (single_pass) { /* every rank is here once, its whole share forwarded */
                memcpy(gate, ent, sizeof(float) * (size_t)n_t);
                if ((rc = global_threshold(d, gate, n_t, lb.n_tokens, cfg.loss.top_entropy_quantile,
                                           &lb.entropy_threshold, e)))
                    break;
            }
            for (int s = s0; s < s0 + ns; s++) {
                int off = b->tgt_start[s];
                loss_seq q = {b->tgt_start[s + 1] - off, logp + off, old + off, b->old_logp + off,
                              ref_logp ? ref_logp + off : NULL, (gated ? gate : ent) + off, b->advantage[s]};
                loss_completion(&cfg.loss, &lb, &q, dlogp + off, dent + off, &st);
            }
            trainer_backward(&t, &tb, temp, dlogp + o0, cfg.loss.entropy_coef != 0 ? dent + o0 : NULL, ent + o0);
            if (t.grad_sum) trainer_fold_grad(&t);
            s0 += ns;
        }
        if ((rc = dist_agree(d, rc, e))) goto out_lines;
        metrics_line *ml = &lines[it];
        if ((rc = merge_stats(d, &st, e)) || (rc = policy_step(&pol, &t, &cfg, d, &ml->grad_norm, &ml->lr, e)))
            goto out_lines;
        ml->step = pol.step;
        ml->loss = loss_stats_metrics(&cfg.loss, &st);
        ml->seconds = now_seconds() - t0 + (it == 0 ? t0 - t_start : 0);
    }
    pol.next_index += o->iterations;
    if ((rc = dist_agree(d, policy_download(&pol, e), e))) goto out_lines;
    if ((rc = policy_save(&pol, o, &cfg, d, all.sha256, e))) goto out_lines;
    if (o->metrics && d->rank == 0)
        for (long long it = 0; it < o->iterations && !rc; it++) rc = metrics_append(o->metrics, &lines[it], &all, e);
    if ((rc = dist_agree(d, rc, e))) goto out_lines;
    if (d->rank == 0) {
        fprintf(stderr, "%s: step %lld: %d completions (%ld skipped without advantage, %ld masked), %ld completion tokens "
                "trained on, %ld tokens with the prompts (metrics \"tokens\"), loss %.6g, %.1f s",
                tool_name(), pol.step, all.n, all.n_no_advantage, all.n_masked, lb.n_tokens, all.total_tokens,
                lines[o->iterations - 1].loss.loss, now_seconds() - t_start);
        if (d->size > 1) fprintf(stderr, " (%d ranks%s)", d->size, pol.bounds ? ", ZeRO-1" : "");
        if (dev && !o->backend) {
            char where[256];
            device_describe(dev, where, sizeof where);
            fprintf(stderr, " on %s, peak %.1f MiB allocated", where, (double)cuda_peak_bytes() / (1 << 20));
        }
        fputc('\n', stderr);
    }
out_lines:
    free(lines);
out_train:
    if (old != b->old_logp) free(old);
    free(logp), free(ent), free(dlogp), free(dent), free(gate), free(ref_logp);
    trainer_free(&t);
out_share:
    if (bp == &share) update_batch_free(&share);
out_all:
    update_batch_free(&all);
out_policy:
    policy_free(&pol);
out_device:
    if (dev && !o->backend) device_release(dev);
    return rc;
}

int update_run(const update_opts *o, gerr *e) {
    dist d;
    int rc = dist_start(&d, e);
    if (rc) {
        dist_end(&d);
        return rc;
    }
    rc = update_ranks(o, &d, e);
    if (rc && d.mpi) {
        /* mpirun ends the job at the first rank that exits non-zero, which
         * would cut off the others' messages: every rank reports, waits
         * for the others to have reported, then leaves */
        warn("%s", e->msg);
        gerr ignored = {0};
        dist_agree(&d, rc, &ignored);
        dist_end(&d);
        exit(rc);
    }
    dist_end(&d);
    return rc;
}
