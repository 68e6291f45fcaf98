/* grpo-update's run: load the policy (and its state when it is one of our
 * checkpoints), read the batch, compute reference (and optionally old)
 * log-probs once, then --iterations optimizer steps, each a pass over the
 * batch in micro-batches with gradients accumulated, and write the next
 * checkpoint whole (policy_save, update_out.c).
 *
 * One rank's run (update_ranks) is four phases over one state, rank_run:
 * set-up (device, policy, batch, share, trainer), the pre-passes
 * (reference, old log-probs, the entropy gate), the optimizer steps, and
 * finish (save, metrics, summary). Whichever phase fails, one cleanup
 * frees what was made. */
#include "update.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>

#include "../cuda/cuda.h"
#include "../dataparallel/dist.h"
#include "../dataparallel/shard.h"
#include "../ops/blas.h"
#include "../runner/device.h"
#include "../model/lora.h"
#include "../model/model.h"
#include "../util/clock.h"
#include "../util/progress.h"
#include "../util/strbuf.h"
#include "state.h"
#include "trainer.h"
#include "update_internal.h"

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


static const char *input_name(const update_run_opts *o) { return o->in && strcmp(o->in, "-") ? o->in : "<stdin>"; }

/* One rank's run: what the set-up makes, the pre-passes fill and the steps
 * read. Zeroed at the start, so that run_free frees whatever was made. */
typedef struct {
    update_plan *plan; /* the run's copy: its auto choices resolved for the batch */
    dist *d;
    double t_start;
    const backend *dev;      /* where it trains; NULL: the CPU */
    policy pol;
    const backend *be;       /* the matrix products' backend (--compute) */
    update_batch all, share; /* the whole batch; this rank's share of it under MPI */
    const update_batch *b;   /* what this rank trains on: &all, or &share */
    float temp;              /* log-probs under logits / temp */
    loss_batch lb;           /* the whole batch's normalisers */
    trainer t;
    int n_t;                 /* targets of b */
    /* one float per target of b */
    float *logp, *ent, *dlogp, *dent;
    float *ref_logp;         /* NULL without a KL term */
    float *old_own;          /* pi_old recomputed by the policy; NULL: the records' (b->old_logp) */
    float *gate;             /* the entropies the threshold is taken over; NULL: no entropy gate */
    bool single_pass;        /* the gate's entropies are the training forward's own */
    metrics_line *lines;     /* [iterations] */
    progress pg;             /* the phase shown (rank 0, on a terminal or with --progress) */
    bool pg_open;
    char pg_label[64];
} rank_run;

/* ---- progress ---------------------------------------------------------------------- */

/* Ends the phase shown, if any: its line drawn in full. */
static void phase_end(rank_run *r) {
    if (r->pg_open) progress_finish(&r->pg);
    r->pg_open = false;
}

/* A new phase on stderr: "grpo-update WHAT", counting unit up to total
 * (unit NULL: its time alone). Rank 0's only. */
static void phase(rank_run *r, const char *unit, int64_t total, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void phase(rank_run *r, const char *unit, int64_t total, const char *fmt, ...) {
    phase_end(r);
    if (r->d->rank != 0) return; /* r->pg stays zeroed: updates draw nothing */
    int at = snprintf(r->pg_label, sizeof r->pg_label, "%s ", tool_name());
    va_list ap;
    va_start(ap, fmt);
    if (at > 0 && (size_t)at < sizeof r->pg_label) vsnprintf(r->pg_label + at, sizeof r->pg_label - (size_t)at, fmt, ap);
    va_end(ap);
    bool force = r->plan->run.progress;
    if (unit) progress_start(&r->pg, r->pg_label, unit, total, force);
    else progress_phase(&r->pg, r->pg_label, force);
    r->pg_open = true;
}

/* Tokens (prompt + completion) of sequences s0 .. s1-1 of b. */
static int64_t batch_tokens(const update_batch *b, int s0, int s1) { return (int64_t)b->start[s1] - b->start[s0]; }

/* ---- set-up ------------------------------------------------------------------------ */

/* The threads, and the device: under MPI each rank its local rank's GPU,
 * the gradients summed there over NCCL (lib/dataparallel/nccl.c). */
static int setup_device(rank_run *r, gerr *e) {
    const update_run_opts *o = &r->plan->run;
    dist *d = r->d;
    if (o->threads > 0) blas_set_threads((int)o->threads);
    else if (dist_default_threads(d) > 0) blas_set_threads(dist_default_threads(d));
    blas_setup_threads();
    r->dev = o->backend;
    /* --group-sums: auto is the CPU (cuda was refused by
     * update_plan_resolve; a caller's device, trainer_keep_sums refuses) */
    const char *device = o->group_sums ? "cpu" : o->device;
    int rc;
    if (!r->dev && strcmp(device, "cpu") && (rc = dist_agree(d, dist_device_open(d, e), e))) return rc;
    if (!r->dev && (rc = dist_agree(d, device_select("--device", device, &r->dev, e), e))) return rc;
    if (d->size == 1) return 0;
    double on = r->dev != NULL;
    if ((rc = dist_sum_doubles(d, &on, 1, e))) return rc;
    if (on != 0 && on != d->size)
        rc = gerr_set(e, EX_UNAVAILABLE, "--device %s: %g of %d ranks found a GPU; give every rank one, or --device cpu",
                      o->device, on, d->size);
    else if (r->dev && o->backend)
        rc = gerr_set(e, EX_USAGE, "a device of the caller's (%s) under MPI: only CUDA's sums over NCCL", r->dev->name);
    else if (r->dev)
        rc = dist_nccl_start(d, e);
    return dist_agree(d, rc, e);
}

/* The policy: weights, adapter, and state when it is our checkpoint; on the
 * device when there is one. The ranks then compare their command lines. */
static int setup_policy(rank_run *r, gerr *e) {
    const update_run_opts *o = &r->plan->run;
    dist *d = r->d;
    double coef = r->plan->loss.router_aux_coef;
    int rc = 0;
    if (coef > 0 && r->dev && !r->dev->moe_balance_backward) /* before the model is loaded */
        rc = gerr_set(e, EX_USAGE, "--router-aux-coef %g: the router's load-balancing loss runs on the CPU only "
                                   "(--device cpu, or --router-aux-coef 0 on --device %s)",
                      coef, r->dev->name);
    if ((rc = dist_agree(d, rc, e))) return rc;
    rc = policy_load(&r->pol, r->plan, d, r->dev != NULL, e);
    if (!rc && r->dev) rc = policy_to_device(&r->pol, r->dev, e);
    if ((rc = dist_agree(d, rc, e))) return rc;
    rc = trainer_compute_backend(r->pol.compute, &r->pol.m, backend_cpu_bf16(), &r->be, e);
    if ((rc = dist_agree(d, rc, e))) return rc;
    strbuf flags = {0};
    update_flags_json(&flags, &r->pol, r->plan, d->size);
    sb_printf(&flags, "\n%s\n%s\n%s", o->model, o->out, o->metrics ? o->metrics : "");
    rc = dist_check_same(d, flags.data, "the command line (flags, --model, --out or --metrics)", EX_USAGE, e);
    sb_free(&flags);
    return rc;
}

/* The batch, the same on every rank (its hash compared), its temperature
 * and normalisers, and this rank's share of it. */
static int setup_batch(rank_run *r, gerr *e) {
    const update_run_opts *o = &r->plan->run;
    dist *d = r->d;
    update_batch *all = &r->all;
    /* a mixture of experts' routing: read unless recomputed, required when replayed */
    routing_shape shape = routing_shape_of(&r->pol.m.cfg);
    batch_routing rt = {r->plan->routing == ROUTING_RECOMPUTE ? (routing_shape){0} : shape,
                        r->plan->routing == ROUTING_REPLAY};
    int rc = 0;
    if (rt.required && !shape.layers)
        rc = gerr_set(e, EX_USAGE, "--routing replay: %s has no mixture of experts", o->model);
    if (!rc)
        rc = update_batch_read(all, o->in, r->pol.m.cfg.vocab_size, o->mask_truncated, &rt, r->pol.base_weights,
                               r->pol.compute, e);
    if ((rc = dist_agree(d, rc, e))) return rc;
    update_plan_routing(r->plan, all->routing != NULL);
    if (r->plan->routing == ROUTING_RECOMPUTE) {
        free(all->routing);
        all->routing = NULL;
    }
    strbuf what = {0};
    sb_printf(&what, "%s: the batch (its sha256)", input_name(o));
    rc = dist_check_same(d, all->sha256, what.data, EX_DATAERR, e);
    sb_free(&what);
    if (rc) return rc;
    /* records from another checkpoint than the one trained (an older one, in an
     * off-policy run) are off-policy as records from other arithmetic are */
    all->staleness_mean = all->staleness_max = NAN;
    long off_policy = all->n_inexact;
    if (all->n_policy_step) {
        all->staleness_mean = (double)r->pol.step - all->sum_policy_step / (double)all->n_policy_step;
        all->staleness_max = (double)(r->pol.step - all->min_policy_step);
        off_policy += all->min_policy_step != r->pol.step || all->max_policy_step != r->pol.step;
    }
    update_plan_for_batch(r->plan, off_policy, all->n_raw);
    r->temp = 1.0f;
    if (o->temperature >= 0) {
        double want = o->temperature == 0 ? 1 : o->temperature;
        if (all->temperature_seen && all->temperature != want)
            return gerr_set(e, EX_DATAERR, "%s: the batch was sampled at temperature %g, --temperature is %g",
                            input_name(o), all->temperature, o->temperature);
        r->temp = (float)want;
    } else if (all->temperature_seen) {
        r->temp = (float)all->temperature;
    }
    r->lb = (loss_batch){all->n, all->tgt_start[all->n],
                         (int)(o->max_new_tokens > 0 ? o->max_new_tokens : all->max_completion), -INFINITY};
    if (r->lb.max_new_tokens < 1) r->lb.max_new_tokens = 1;
    if (all->n == 0 || r->lb.n_tokens == 0)
        return gerr_set(e, EX_DATAERR, "%s: no record to train on (%ld records, %ld without advantage, %ld masked)",
                        input_name(o), all->n_records, all->n_no_advantage, all->n_masked);
    r->b = all;
    if (d->size > 1) {
        take_share(d, all, &r->share);
        r->b = &r->share;
        if (d->rank == 0 && d->size > all->n_groups)
            warn("%d ranks, %d prompt groups: %d ranks have no share and only add to the sums", d->size, all->n_groups,
                 d->size - all->n_groups);
    }
    return 0;
}

/* The trainer, sized for the biggest micro-batch, and the per-target
 * buffers the steps fill. */
static int setup_trainer(rank_run *r, gerr *e) {
    const update_run_opts *o = &r->plan->run;
    const update_batch *b = r->b;
    policy *pol = &r->pol;
    /* the training pass shares prompts unless LoRA dropout draws a mask per record */
    micro_size z = micro_sizes(b, o->micro_batch, o->group_sums, !(pol->has_lora && pol->l.dropout > 0));
    int rc = trainer_init(&r->t, &pol->m, policy_lora(pol), pol->has_lora ? TRAINER_LORA : TRAINER_FULL, o->recompute,
                          z.rows, z.computed, b->max_len > 0 ? b->max_len : 1, z.targets, e);
    if ((rc = dist_agree(r->d, rc, e))) return rc;
    r->t.dropout_seed = (uint64_t)pol->seed;
    r->t.be = r->be;
    double coef = r->plan->loss.router_aux_coef, tokens = (double)batch_tokens(b, 0, b->n);
    if (coef > 0 && pol->m.cfg.n_experts <= 0)
        rc = gerr_set(e, EX_USAGE, "--router-aux-coef %g: %s has no router (not a mixture of experts)", coef,
                      o->model);
    if (!rc && coef > 0) rc = dist_sum_doubles(r->d, &tokens, 1, e);
    if ((rc = dist_agree(r->d, rc, e))) return rc;
    r->t.balance_coef = coef, r->t.balance_tokens = tokens;
    r->n_t = b->tgt_start[b->n];
    size_t n_alloc = (size_t)r->n_t + 1; /* a rank without a share has no target */
    r->logp = xmalloc(sizeof(float) * n_alloc), r->ent = xmalloc(sizeof(float) * n_alloc);
    r->dlogp = xmalloc(sizeof(float) * n_alloc), r->dent = xmalloc(sizeof(float) * n_alloc);
    if (o->group_sums) return dist_agree(r->d, trainer_keep_sums(&r->t, e), e);
    return 0;
}

static int setup(rank_run *r, gerr *e) {
    phase(r, NULL, 0, "loading %s", r->plan->run.model);
    int rc = setup_device(r, e);
    if (!rc) rc = setup_policy(r, e);
    if (!rc) rc = setup_batch(r, e);
    if (!rc) rc = setup_trainer(r, e);
    return rc;
}

/* ---- the pre-passes ---------------------------------------------------------------- */

/* What stays fixed over the steps: the reference's log-probs (with a KL
 * term), pi_old recomputed (--recompute-old, and the IS correction, which
 * weighs the sampler against the trainer's own pi_old), and whether the
 * entropy gate can take its entropies from the training forward. */
static int prepasses(rank_run *r, gerr *e) {
    const update_run_opts *o = &r->plan->run;
    const update_batch *b = r->b;
    dist *d = r->d;
    size_t n_alloc = (size_t)r->n_t + 1;
    int rc;
    if (r->plan->loss.beta > 0) {
        phase(r, "tokens", batch_tokens(b, 0, b->n), "reference log-probs");
        r->ref_logp = xmalloc(sizeof(float) * n_alloc);
        rc = reference_pass(&r->t, &r->pol, r->plan, b, r->temp, r->ref_logp, e);
        if ((rc = dist_agree(d, rc, e))) return rc;
        progress_update(&r->pg, batch_tokens(b, 0, b->n));
    }
    if (r->plan->old_logp == OLD_LOGP_RECOMPUTE) {
        phase(r, "tokens", batch_tokens(b, 0, b->n), "old log-probs");
        r->old_own = xmalloc(sizeof(float) * n_alloc);
        logp_pass(&r->t, b, o->micro_batch, o->group_sums, r->temp, false, r->old_own, NULL);
        if ((rc = dist_agree(d, trainer_check(&r->t, e), e))) return rc;
        progress_update(&r->pg, batch_tokens(b, 0, b->n));
    }
    if (r->plan->loss.top_entropy_quantile < 1) {
        r->gate = xmalloc(sizeof(float) * n_alloc);
        /* the threshold needs the whole batch's entropies before the first
         * backward: with every rank's share in one micro-batch and no
         * dropout, the training forward's (the same bits as a forward of
         * their own); else a forward pass of their own first */
        int mstart[b->n + 1];
        train_batch tb;
        double split = b->n > 0 && micro_next(b, 0, o->micro_batch, o->group_sums, &tb, mstart) == b->n ? 0 : 1;
        if ((rc = dist_sum_doubles(d, &split, 1, e))) return rc;
        r->single_pass = split == 0 && !(r->pol.has_lora && r->pol.l.dropout > 0);
    }
    return 0;
}

/* ---- the optimizer steps ----------------------------------------------------------- */

/* The loss's gradients for sequences s0 .. s0+ns-1 of the micro-batch just
 * forwarded, their sums added to st. */
static void micro_loss(rank_run *r, int s0, int ns, loss_stats *st) {
    const update_batch *b = r->b;
    const float *old = r->old_own ? r->old_own : b->old_logp;
    for (int s = s0; s < s0 + ns; s++) {
        int off = b->tgt_start[s];
        loss_seq q = {b->tgt_start[s + 1] - off, r->logp + off, old + off, b->old_logp + off,
                      r->ref_logp ? r->ref_logp + off : NULL, (r->gate ? r->gate : r->ent) + off, b->advantage[s]};
        loss_completion(&r->plan->loss, &r->lb, &q, r->dlogp + off, r->dent + off, st);
    }
}

/* Optimizer step it: forward and backward of every micro-batch with the
 * gradients accumulated, then one step over their sum (policy_step). */
static int train_step(rank_run *r, long long it, gerr *e) {
    const update_run_opts *o = &r->plan->run;
    const update_batch *b = r->b;
    const loss_opts *lc = &r->plan->loss;
    dist *d = r->d;
    trainer *t = &r->t;
    double t0 = now_seconds();
    phase(r, "tokens", batch_tokens(b, 0, b->n), "step %lld (iteration %lld/%lld)", r->pol.step + 1, it + 1,
          o->iterations);
    trainer_zero_grad(t);
    t->dropout_pass = (uint64_t)(r->pol.next_index + it);
    int rc;
    /* the entropy threshold is the whole batch's: its entropies first, at
     * the same weights (a forward without dropout; logp is overwritten below) */
    if (r->gate && !r->single_pass) {
        logp_pass(t, b, o->micro_batch, o->group_sums, r->temp, false, r->logp, r->gate);
        if ((rc = dist_agree(d, trainer_check(t, e), e))) return rc;
        rc = global_threshold(d, r->gate, r->n_t, r->lb.n_tokens, lc->top_entropy_quantile, &r->lb.entropy_threshold, e);
        if (rc) return rc;
    }
    loss_stats st = {0};
    t->balance_sum = 0;
    int mstart[b->n + 1];
    train_batch tb;
    rc = 0;
    for (int s0 = 0; s0 < b->n;) {
        int ns = micro_next(b, s0, o->micro_batch, o->group_sums, &tb, mstart);
        int o0 = b->tgt_start[s0];
        trainer_forward(t, &tb, r->temp, true, false, r->logp + o0, r->ent + o0);
        if ((rc = trainer_check(t, e))) break; /* agreed below: ranks' micro-batch counts differ */
        if (r->single_pass) { /* every rank is here once, its whole share forwarded */
            memcpy(r->gate, r->ent, sizeof(float) * (size_t)r->n_t);
            rc = global_threshold(d, r->gate, r->n_t, r->lb.n_tokens, lc->top_entropy_quantile,
                                  &r->lb.entropy_threshold, e);
            if (rc) break;
        }
        micro_loss(r, s0, ns, &st);
        trainer_backward(t, &tb, r->temp, r->dlogp + o0, lc->entropy_coef != 0 ? r->dent + o0 : NULL, r->ent + o0);
        if (t->grad_sum) trainer_fold_grad(t);
        s0 += ns;
        progress_update(&r->pg, batch_tokens(b, 0, s0));
    }
    if ((rc = dist_agree(d, rc, e))) return rc;
    metrics_line *ml = &r->lines[it];
    if ((rc = merge_stats(d, &st, e)) || (rc = policy_step(&r->pol, t, &r->plan->optim, d, &ml->grad_norm, &ml->lr, e)))
        return rc;
    ml->step = r->pol.step;
    ml->loss = loss_stats_metrics(lc, &st);
    ml->balance = NAN;
    if (lc->router_aux_coef > 0) {
        if ((rc = dist_sum_doubles(d, &t->balance_sum, 1, e))) return rc;
        ml->balance = t->balance_sum;
    }
    ml->seconds = now_seconds() - t0 + (it == 0 ? t0 - r->t_start : 0);
    return 0;
}

static int train_steps(rank_run *r, gerr *e) {
    r->lines = xcalloc((size_t)r->plan->run.iterations, sizeof *r->lines);
    int rc = 0;
    for (long long it = 0; it < r->plan->run.iterations && !rc; it++) rc = train_step(r, it, e);
    return rc;
}

/* ---- finish ------------------------------------------------------------------------ */

static void print_summary(const rank_run *r) {
    const update_batch *all = &r->all;
    fprintf(stderr, "%s: step %lld: %d completions (%ld skipped without advantage, %ld masked), %ld completion tokens "
            "trained on, %ld tokens with the prompts (metrics \"tokens\"), loss %.6g, %.1f s",
            tool_name(), r->pol.step, all->n, all->n_no_advantage, all->n_masked, r->lb.n_tokens, all->total_tokens,
            r->lines[r->plan->run.iterations - 1].loss.loss, now_seconds() - r->t_start);
    if (r->plan->old_logp == OLD_LOGP_RECOMPUTE)
    {
        fprintf(stderr, "; pi_old recomputed, sampler correction %s (%ld of %ld records not sampled with the "
                "trainer's arithmetic", is_level_names[r->plan->loss.is_level], all->n_inexact, all->n_records);
        if (all->staleness_max != 0 && !isnan(all->staleness_max))
            fprintf(stderr, "; records of a checkpoint up to %g steps %s", fabs(all->staleness_max),
                    all->staleness_max > 0 ? "older" : "newer");
        fputc(')', stderr);
    }
    if (r->d->size > 1) fprintf(stderr, " (%d ranks%s)", r->d->size, r->pol.bounds ? ", ZeRO-1" : "");
    if (r->dev && !r->plan->run.backend) {
        char where[256];
        device_describe(r->dev, where, sizeof where);
        fprintf(stderr, " on %s, peak %.1f MiB allocated", where, (double)cuda_peak_bytes() / (1 << 20));
    }
    fputc('\n', stderr);
}

/* The next checkpoint with its metrics lines (rank 0), and the summary line. */
static int finish(rank_run *r, gerr *e) {
    const update_run_opts *o = &r->plan->run;
    dist *d = r->d;
    r->pol.next_index += o->iterations;
    phase(r, NULL, 0, "saving %s", o->out);
    int rc = dist_agree(d, policy_download(&r->pol, e), e);
    if (!rc) rc = policy_save(&r->pol, r->plan, d, &r->all, r->lines, e);
    if (rc) return rc;
    phase_end(r);
    if (d->rank == 0) print_summary(r);
    return 0;
}

static void run_free(rank_run *r) {
    free(r->lines);
    free(r->logp), free(r->ent), free(r->dlogp), free(r->dent), free(r->ref_logp), free(r->old_own), free(r->gate);
    trainer_free(&r->t);
    update_batch_free(&r->share);
    update_batch_free(&r->all);
    policy_free(&r->pol);
    if (r->dev && !r->plan->run.backend) device_release(r->dev);
}

/* One rank's part of the update (the only one without MPI). Every rank
 * reads the whole batch; the loss's normalisers (completions, tokens, the
 * longest completion) come from it, so they are the global ones (their
 * hash agreed across ranks), and each rank trains on its share. After each
 * step that can fail on one rank alone the ranks agree (dist_agree), so an
 * error leaves every rank at once and nothing is written. */
static int update_ranks(const update_plan *plan, dist *d, gerr *e) {
    update_plan p = *plan;
    rank_run r = {.plan = &p, .d = d, .t_start = now_seconds()};
    int rc = setup(&r, e);
    if (!rc) rc = prepasses(&r, e);
    if (!rc) rc = train_steps(&r, e);
    if (!rc) rc = finish(&r, e);
    phase_end(&r); /* an error's line on a line of its own */
    run_free(&r);
    return rc;
}

int update_run(const update_plan *plan, gerr *e) {
    dist d;
    int rc = dist_start(&d, e);
    if (rc) {
        dist_end(&d);
        return rc;
    }
    rc = update_ranks(plan, &d, e);
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
