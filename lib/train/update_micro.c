/* grpo-update's micro-batches: how the batch is cut, the biggest cut (to
 * size the trainer), and the forward-only passes over all of them (the
 * reference, the old policy, the entropies). */
#include <string.h>
#include <sysexits.h>

#include "../ckpt/load.h"
#include "update_internal.h"

int micro_next(const update_batch *b, int s0, long long budget, bool by_group, train_batch *tb, int *mstart) {
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
    const uint16_t *routing = b->routing ? b->routing + (size_t)b->start[s0] * (size_t)b->routing_width : NULL;
    *tb = (train_batch){ns,     mstart,  b->n_prompt + s0, b->tokens + b->start[s0], b->key + s0, b->target + b->start[s0],
                        routing, b->routing_width};
    return ns;
}

micro_size micro_sizes(const update_batch *b, long long budget, bool by_group, bool share) {
    int mstart[b->n + 1];
    train_batch tb;
    micro_size z = {1, 1, 1};
    for (int s0 = 0; s0 < b->n;) {
        int ns = micro_next(b, s0, budget, by_group, &tb, mstart);
        int r = mstart[ns], c = train_batch_rows(&tb, share), t = b->tgt_start[s0 + ns] - b->tgt_start[s0];
        z.rows = r > z.rows ? r : z.rows, z.targets = t > z.targets ? t : z.targets;
        z.computed = c > z.computed ? c : z.computed;
        s0 += ns;
    }
    return z;
}

void logp_pass(trainer *t, const update_batch *b, long long budget, bool by_group, float temp, bool lora_off,
               float *out, float *entropy) {
    int mstart[b->n + 1];
    train_batch tb;
    for (int s0 = 0; s0 < b->n;) {
        int ns = micro_next(b, s0, budget, by_group, &tb, mstart);
        int o0 = b->tgt_start[s0];
        trainer_forward(t, &tb, temp, false, lora_off, out + o0, entropy ? entropy + o0 : NULL);
        s0 += ns;
    }
}

int reference_pass(trainer *t, const policy *pol, const update_plan *plan, const update_batch *b, float temp,
                   float *ref_logp, gerr *e) {
    const update_run_opts *o = &plan->run;
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
