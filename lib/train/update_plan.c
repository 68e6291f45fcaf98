/* grpo-update's options resolved into its plan (update_plan.h). */
#include "update_plan.h"

#include <string.h>
#include <sysexits.h>

#include "../model/lora.h"
#include "../runner/device.h"
#include "../util/flags.h"

const char *const update_compute_names[] = {"f32", "bf16", "auto"};
const char *const update_base_weights_names[] = {"f32", "bf16", "q8", "q4k", "mxfp4", "auto"};
const char *const update_is_names[] = {"auto", "none", "token", "sequence"};
const char *const update_old_logp_names[] = {"auto", "records", "recompute"};
const char *const update_routing_names[] = {"auto", "replay", "recompute"};

void update_opts_default(update_opts *o) {
    memset(o, 0, sizeof *o);
    update_run_opts *r = &o->run;
    r->iterations = 1;
    r->temperature = -1;
    r->micro_batch = 2048;
    r->device = "cpu";
    r->compute = update_compute_names[0];
    r->base_weights = update_base_weights_names[UPDATE_BASE_N - 1];
    optim_opts_default(&o->optim);
    o->optim.max_grad_norm = 1.0; /* clipped, as TRL's default */
    o->betas = optim_default_betas;
    o->loss = loss_opts_default();
    o->loss.epsilon_high = -1; /* --epsilon's */
    o->choice.optimizer = optim_kind_names[o->optim.kind];
    o->choice.lr_schedule = sched_kind_names[o->optim.schedule];
    o->choice.loss = loss_kind_names[o->loss.kind];
    o->choice.importance_level = loss_level_names[o->loss.sequence_level];
    o->choice.is_correction = update_is_names[0];
    o->choice.old_logp = update_old_logp_names[OLD_LOGP_AUTO];
    o->choice.routing = update_routing_names[ROUTING_AUTO];
    o->choice.is_mode = is_mode_names[o->loss.is_mask];
    o->lora_targets = "q,k,v,o,gate,up,down";
}

/* The ranges of the run's own numbers (the loss's and the optimizer's are
 * loss_opts_check's and optim_opts_check's). */
static int check_run(const update_run_opts *r, gerr *e) {
    if (!r->model) return gerr_set(e, EX_USAGE, "--model is required (see %s --help)", tool_name());
    if (!r->out) return gerr_set(e, EX_USAGE, "--out is required (see %s --help)", tool_name());
    const struct {
        const char *flag;
        double v;
        flag_range range;
    } num[] = {
        {"--iterations", (double)r->iterations, FLAG_RANGE(1, 1e6)},
        {"--temperature", r->temperature, FLAG_RANGE(-1, 100)},
        {"--max-new-tokens", (double)r->max_new_tokens, FLAG_RANGE(0, 1 << 24)},
        {"--micro-batch", (double)r->micro_batch, FLAG_RANGE(1, 1 << 30)},
        {"--lora-r", (double)r->lora_r, FLAG_RANGE(0, 65536)},
        {"--lora-alpha", r->lora_alpha, FLAG_RANGE(0, 1e9)},
        {"--lora-dropout", r->lora_dropout, FLAG_RANGE(0, 0.99)},
        {"--seed", (double)r->seed, FLAG_RANGE(0, 1e18)},
        {"--threads", (double)r->threads, FLAG_RANGE(0, 4096)},
        {"--zero", (double)r->zero, FLAG_RANGE(0, 1)},
    };
    for (size_t i = 0; i < sizeof num / sizeof *num; i++) {
        int rc = flags_range_check(num[i].flag, num[i].v, num[i].range, e);
        if (rc) return rc;
    }
    int i, rc;
    if ((rc = flags_choice_parse("--compute", update_compute_names, 3, r->compute, &i, e)) ||
        (rc = flags_choice_parse("--base-weights", update_base_weights_names, UPDATE_BASE_N, r->base_weights, &i, e)) ||
        (rc = flags_choice_parse("--device", device_names, DEVICE_N_NAMES, r->device, &i, e)))
        return rc;
    if (r->group_sums && !strcmp(r->device, "cuda"))
        return gerr_set(e, EX_USAGE, "--group-sums: the float64 gradient sums are kept on the host; not with --device cuda");
    return 0;
}

/* The loss: its kind and levels from their names, epsilon_high resolved;
 * where pi_old comes from. */
static int resolve_loss(const update_opts *o, update_plan *p, gerr *e) {
    loss_opts *l = &p->loss;
    int seq, is, mask, old, rc;
    if ((rc = loss_kind_parse(o->choice.loss, &l->kind, e)) ||
        (rc = flags_choice_parse("--importance-level", loss_level_names, 2, o->choice.importance_level, &seq, e)) ||
        (rc = flags_choice_parse("--is-correction", update_is_names, 1 + IS_N_LEVELS, o->choice.is_correction, &is, e)) ||
        (rc = flags_choice_parse("--is-mode", is_mode_names, 2, o->choice.is_mode, &mask, e)) ||
        (rc = flags_choice_parse("--old-logp", update_old_logp_names, 3, o->choice.old_logp, &old, e)))
        return rc;
    p->is_auto = is == 0;
    l->sequence_level = seq == 1, l->is_level = p->is_auto ? IS_OFF : (is_level)(is - 1), l->is_mask = mask == 1;
    p->old_logp = (old_logp_source)old;
    if (p->old_logp == OLD_LOGP_RECORDS && l->is_level != IS_OFF)
        return gerr_set(e, EX_USAGE, "--old-logp records with --is-correction %s: the correction weighs the records' "
                        "log-probs against pi_old recomputed by the trainer", o->choice.is_correction);
    if (l->epsilon_high < 0) l->epsilon_high = l->epsilon_low;
    return loss_opts_check(l, e);
}

void update_plan_for_batch(update_plan *p, long n_off, long n_raw) {
    /* the weight needs pi_old recomputed: none where --old-logp records was given */
    if (p->is_auto) p->loss.is_level = n_off > 0 && n_raw == 0 && p->old_logp != OLD_LOGP_RECORDS ? IS_TOKEN : IS_OFF;
    if (p->old_logp == OLD_LOGP_AUTO)
        p->old_logp = n_off > 0 || p->loss.is_level != IS_OFF ? OLD_LOGP_RECOMPUTE : OLD_LOGP_RECORDS;
}

void update_plan_routing(update_plan *p, bool all_routed) {
    /* the measured choice (bench/README.md, "Routing replay"): the sampler's
     * routing brings the trainer's log-probs closest to the sampler's */
    if (p->routing == ROUTING_AUTO) p->routing = all_routed ? ROUTING_REPLAY : ROUTING_RECOMPUTE;
}

int update_plan_resolve(const update_opts *o, update_plan *p, gerr *e) {
    memset(p, 0, sizeof *p);
    p->run = o->run, p->optim = o->optim, p->betas = o->betas, p->loss = o->loss;
    int rc;
    if ((rc = check_run(&p->run, e)) || (rc = optim_kind_parse(o->choice.optimizer, &p->optim.kind, e)) ||
        (rc = sched_kind_parse(o->choice.lr_schedule, &p->optim.schedule, e)) ||
        (rc = optim_parse_betas(o->betas, &p->optim.beta1, &p->optim.beta2, e)) ||
        (rc = optim_opts_check(&p->optim, e)) || (rc = resolve_loss(o, p, e)))
        return rc;
    if (p->run.lora_r > 0 && (rc = lora_parse_targets(o->lora_targets, &p->lora_targets, e))) return rc;
    int routing;
    if ((rc = flags_choice_parse("--routing", update_routing_names, 3, o->choice.routing, &routing, e))) return rc;
    p->routing = (routing_mode)routing;
    return 0;
}
