/* What grpo-update writes: the next checkpoint (formats/checkpoint.md),
 * built in a temporary directory and swapped in whole, and the metrics lines
 * (formats/metrics.md), appended just before the swap: both or neither. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sysexits.h>
#include <unistd.h>

#include "../ckpt/adapter_dir.h"
#include "../ckpt/ckpt_paths.h"
#include "../ckpt/hf_dir.h"
#include "../io/ckptdir.h"
#include "../io/outpath.h"
#include "../util/finite.h"
#include "../util/strbuf.h"
#include "state.h"
#include "update_internal.h"

static void key(strbuf *b, const char *k) {
    if (b->len > 1) sb_putc(b, ',');
    sb_json_string(b, k, strlen(k));
    sb_putc(b, ':');
}
static void kv_num(strbuf *b, const char *k, double v) {
    key(b, k);
    sb_json_number(b, v); /* undefined values (NaN) as null */
}
static void kv_str(strbuf *b, const char *k, const char *v) {
    key(b, k);
    if (v)
        sb_json_string(b, v, strlen(v));
    else
        sb_puts(b, "null");
}
static void kv_bool(strbuf *b, const char *k, bool v) {
    key(b, k);
    sb_puts(b, v ? "true" : "false");
}

void update_flags_json(strbuf *b, const policy *p, const update_plan *plan, int ranks) {
    const update_run_opts *o = &plan->run;
    const optim_opts *opt = &plan->optim;
    const loss_opts *l = &plan->loss;
    sb_putc(b, '{');
    kv_str(b, "optimizer", optim_kind_name(opt->kind));
    kv_num(b, "lr", opt->lr);
    kv_str(b, "betas", plan->betas);
    kv_num(b, "adam_eps", opt->eps);
    kv_num(b, "weight_decay", opt->weight_decay);
    kv_str(b, "lr_schedule", sched_kind_name(opt->schedule));
    kv_num(b, "warmup_steps", (double)opt->warmup_steps);
    kv_num(b, "total_steps", (double)opt->total_steps);
    kv_num(b, "max_grad_norm", opt->max_grad_norm);
    kv_str(b, "loss", loss_kind_name(l->kind));
    kv_str(b, "importance_level", loss_level_names[l->sequence_level]);
    kv_num(b, "epsilon", l->epsilon_low);
    kv_num(b, "epsilon_high", l->epsilon_high);
    kv_num(b, "beta", l->beta);
    kv_num(b, "delta", l->delta);
    kv_num(b, "sapo_tau_pos", l->tau_pos);
    kv_num(b, "sapo_tau_neg", l->tau_neg);
    kv_num(b, "entropy_coef", l->entropy_coef);
    kv_num(b, "top_entropy_quantile", l->top_entropy_quantile);
    kv_num(b, "off_policy_mask_threshold", l->off_policy_threshold);
    kv_str(b, "is_correction", is_level_names[l->is_level]);
    kv_str(b, "is_mode", is_mode_names[l->is_mask]);
    kv_num(b, "is_cap", l->is_cap);
    kv_num(b, "router_aux_coef", l->router_aux_coef);
    kv_num(b, "iterations", (double)o->iterations);
    kv_bool(b, "recompute_old", plan->old_logp == OLD_LOGP_RECOMPUTE);
    kv_str(b, "routing", update_routing_names[plan->routing]);
    kv_bool(b, "mask_truncated", o->mask_truncated);
    kv_num(b, "temperature", o->temperature);
    kv_num(b, "max_new_tokens", (double)o->max_new_tokens);
    kv_num(b, "micro_batch", (double)o->micro_batch);
    kv_bool(b, "group_sums", o->group_sums);
    kv_bool(b, "recompute", o->recompute);
    kv_str(b, "compute", p->compute);
    kv_str(b, "base_weights", p->base_weights);
    kv_num(b, "lora_r", p->has_lora ? p->l.r : 0);
    if (p->has_lora) {
        kv_num(b, "lora_alpha", p->l.alpha);
        kv_num(b, "lora_dropout", p->l.dropout);
        strbuf t = {0};
        for (int i = 0; i < LORA_N_TARGETS; i++)
            if (p->l.targets & (1u << i)) sb_printf(&t, "%s%s", t.len ? "," : "", lora_target_module(i));
        kv_str(b, "lora_targets", t.data);
        sb_free(&t);
        kv_bool(b, "rslora", p->l.rslora);
    }
    kv_num(b, "seed", (double)p->seed);
    kv_num(b, "zero", (double)o->zero);
    kv_num(b, "ranks", ranks); /* provenance only: the optimizer state is whole, any N resumes */
    /* absolute, so that it names the same file from any directory */
    char abs[PATH_MAX];
    kv_str(b, "ref", p->ref_path && realpath(p->ref_path, abs) ? abs : p->ref_path);
    sb_putc(b, '}');
}

/* state.json's "paths": each file the checkpoint is loaded with, relative
 * to it and absolute (lib/ckpt/ckpt_paths.h); one that is gone is left out.
 * Not "parent", which nothing reads: the same run made in another directory
 * keeps the same bytes where its models are the same files. */
static int paths_json(strbuf *b, const policy *p, const char *out, gerr *e) {
    const char *names[] = {"base_model", "ref"};
    const char *targets[] = {p->has_lora ? p->l.base : NULL, p->ref_path};
    sb_putc(b, '{');
    for (int i = 0; i < 2; i++) {
        if (!targets[i] || access(targets[i], F_OK)) continue;
        key(b, names[i]);
        int rc = ckpt_path_json(out, targets[i], b, e);
        if (rc) return rc;
    }
    sb_putc(b, '}');
    return 0;
}

/* A step that left a weight or a moment non-finite writes nothing
 * (formats/checkpoint.md): checked before the directory is begun. */
static int check_finite(const policy *p, gerr *e) {
    size_t n = p->has_lora ? lora_tensor_list(&p->l, NULL) : model_tensor_list(&p->m, NULL);
    lora_tensor_ref *lr = p->has_lora ? xcalloc(n ? n : 1, sizeof *lr) : NULL;
    model_tensor_ref *mr = p->has_lora ? NULL : xcalloc(n ? n : 1, sizeof *mr);
    if (lr) lora_tensor_list(&p->l, lr);
    else model_tensor_list(&p->m, mr);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        const float *x = lr ? lr[i].data : mr[i].dst;
        int64_t rows = lr ? lr[i].rows : mr[i].rows, cols = lr ? lr[i].cols : mr[i].cols;
        size_t numel = (size_t)rows * (size_t)(cols ? cols : 1), at = f32_first_nonfinite(x, numel);
        if (at < numel)
            rc = gerr_set(e, EX_DATAERR, "step %lld: tensor '%s': value %zu is %s (the step gave non-finite weights; "
                          "nothing written)", p->step, lr ? lr[i].name : mr[i].hf, at,
                          isnan(x[at]) ? "NaN" : x[at] > 0 ? "+inf" : "-inf");
    }
    free(lr), free(mr);
    if (rc || !p->exp_avg) return rc;
    optim_tensor *t;
    n = policy_optim_tensors(p, &t);
    char where[40];
    snprintf(where, sizeof where, "step %lld", p->step);
    rc = optim_state_check(t, n, where, "the step gave it; nothing written", e);
    for (size_t i = 0; i < n; i++) free((char *)t[i].name);
    free(t);
    return rc;
}

/* The checkpoint of p, whose moments are whole here. */
static int write_ckpt(const policy *p, const update_plan *plan, int ranks, const update_batch *b,
                      const metrics_line *lines, gerr *e) {
    const update_run_opts *o = &plan->run;
    const optim_opts *c = &plan->optim;
    ckptdir cd = {0};
    int rc = check_finite(p, e);
    if (!rc) rc = ckptdir_begin(&cd, o->out, e);
    if (rc) return rc;
    char *path = NULL;
#define PATH(rel) (free(path), path = ckptdir_path(&cd, rel, e))
    if (!PATH("config.json") || (rc = hf_write_config(path, &p->m, o->model, "float32", false, e))) goto fail;
    if ((rc = hf_write_text_files(cd.tmp_dir, o->model, e))) goto fail;
    if (p->has_lora) {
        lora l = p->l; /* the base named absolutely: PEFT reads it from any directory */
        char abs[PATH_MAX];
        if (l.base && realpath(l.base, abs)) l.base = abs;
        if ((rc = lora_save(&l, cd.tmp_dir, e))) goto fail;
    } else if (!PATH("model.safetensors") || (rc = hf_write_weights(path, &p->m, EXPORT_F32, e))) {
        goto fail;
    }
    optim_tensor *t;
    size_t n = policy_optim_tensors(p, &t);
    if (PATH("grpo/optimizer.safetensors")) rc = optim_state_write(path, c->kind, t, n, e);
    for (size_t i = 0; i < n; i++) free((char *)t[i].name);
    free(t);
    if (!path || rc) goto fail;

    strbuf flags = {0}, paths = {0};
    update_flags_json(&flags, p, plan, ranks);
    if ((rc = paths_json(&paths, p, o->out, e))) {
        sb_free(&flags), sb_free(&paths);
        goto fail;
    }
    train_state s = {0};
    s.step = p->step, s.schedule = c->schedule, s.schedule_step = p->step;
    s.warmup_steps = c->warmup_steps, s.total_steps = c->total_steps;
    s.seed = p->seed, s.next_index = p->next_index;
    s.flags_json = flags.data;
    memcpy(s.batch_sha256, b->sha256, 65);
    s.parent = (char *)o->model;
    s.paths_json = paths.data;
    s.version = GRPO_VERSION;
    if (PATH("grpo/state.json")) rc = state_write(&s, path, e);
    sb_free(&flags), sb_free(&paths);
    if (!path || rc) goto fail;
    free(path), path = NULL;
    /* the metrics lines first, fsync'd, then the checkpoint swapped in; the
     * lines cut off again when the swap fails: both or neither */
    metrics_pending mp = {.fd = -1};
    if (o->metrics && (rc = metrics_append(o->metrics, lines, o->iterations, b, &mp, e))) goto fail;
    if ((rc = ckptdir_commit(&cd, e))) metrics_retract(&mp);
    else metrics_close(&mp);
    return rc;
fail:
    if (!rc) rc = e->code ? e->code : EX_SOFTWARE;
    free(path);
    ckptdir_fail(&cd, e);
    return rc;
#undef PATH
}

int policy_save(const policy *p, const update_plan *plan, const dist *d, const update_batch *b,
                const metrics_line *lines, gerr *e) {
    int rc = 0;
    if (!p->bounds) {
        if (d->rank == 0) rc = write_ckpt(p, plan, d->size, b, lines, e);
        return dist_agree(d, rc, e);
    }
    /* ZeRO-1: rank 0 gathers the moments' slices for the file (whole on disk,
     * so any number of ranks resumes it) and holds them only while writing */
    policy whole = *p;
    whole.lo = 0, whole.hi = p->n_trained, whole.bounds = NULL;
    whole.exp_avg = whole.exp_avg_sq = NULL;
    if (p->exp_avg) {
        size_t *counts = xmalloc(sizeof *counts * (size_t)d->size);
        for (int r = 0; r < d->size; r++) counts[r] = p->bounds[r + 1] - p->bounds[r];
        if (d->rank == 0) {
            whole.exp_avg = malloc(sizeof(float) * (p->n_trained ? p->n_trained : 1));
            whole.exp_avg_sq = malloc(sizeof(float) * (p->n_trained ? p->n_trained : 1));
            if (!whole.exp_avg || !whole.exp_avg_sq)
                rc = gerr_set(e, EX_SOFTWARE, "out of memory gathering the optimizer state (%zu MiB)",
                              p->n_trained * 8 >> 20);
        }
        if (!(rc = dist_agree(d, rc, e)))
            rc = dist_gather_floats(d, p->exp_avg, whole.exp_avg, counts, e);
        if (!rc) rc = dist_gather_floats(d, p->exp_avg_sq, whole.exp_avg_sq, counts, e);
        free(counts);
    }
    if (!rc && d->rank == 0) rc = write_ckpt(&whole, plan, d->size, b, lines, e);
    free(whole.exp_avg), free(whole.exp_avg_sq);
    return dist_agree(d, rc, e);
}

/* One metrics line (formats/metrics.md), newline included. */
static void metrics_line_json(strbuf *l, const metrics_line *ml, const update_batch *b) {
    sb_putc(l, '{');
    kv_num(l, "step", (double)ml->step);
    kv_num(l, "loss", ml->loss.loss);
    kv_num(l, "policy_loss", ml->loss.policy_loss);
    kv_num(l, "kl", ml->loss.kl);
    kv_num(l, "entropy", ml->loss.entropy);
    kv_num(l, "clip_ratio/low_mean", ml->loss.clip_low);
    kv_num(l, "clip_ratio/high_mean", ml->loss.clip_high);
    kv_num(l, "clip_ratio/region_mean", ml->loss.clip_region);
    kv_num(l, "clip_ratio/delta_mean", ml->loss.clip_delta);
    kv_num(l, "cispo_clip_ratio", ml->loss.clip_cispo);
    kv_num(l, "entropy_mask/masked_ratio", ml->loss.entropy_masked);
    kv_num(l, "off_policy_mask/masked_ratio", ml->loss.off_policy_masked);
    kv_num(l, "sampling/sampling_logp_difference/mean", ml->loss.is_diff_mean);
    kv_num(l, "sampling/sampling_logp_difference/max", ml->loss.is_diff_max);
    kv_num(l, "sampling/importance_sampling_ratio/min", ml->loss.is_w_min);
    kv_num(l, "sampling/importance_sampling_ratio/mean", ml->loss.is_w_mean);
    kv_num(l, "sampling/importance_sampling_ratio/max", ml->loss.is_w_max);
    kv_num(l, "policy_staleness/mean", b->staleness_mean);
    kv_num(l, "policy_staleness/max", b->staleness_max);
    kv_num(l, "moe/balance_loss", ml->balance);
    kv_num(l, "grad_norm", ml->grad_norm);
    kv_num(l, "learning_rate", ml->lr);
    kv_num(l, "completions/mean_length", b->mean_length);
    kv_num(l, "completions/clipped_ratio", b->clipped_ratio);
    kv_num(l, "reward", b->has_reward ? b->reward : NAN);
    kv_num(l, "reward_std", b->has_reward ? b->reward_std : NAN);
    kv_num(l, "frac_reward_zero_std", b->has_reward ? b->frac_reward_zero_std : NAN);
    kv_num(l, "tokens", (double)b->total_tokens);
    kv_num(l, "tokens_per_second", ml->seconds > 0 ? b->total_tokens / ml->seconds : NAN);
    kv_num(l, "seconds", ml->seconds);
    sb_puts(l, "}\n");
}

/* Cuts the lines appended (len bytes ending at end) off a regular file
 * again, when nothing was appended after them. */
static bool metrics_cut(int fd, off_t end, off_t len) {
    struct stat st;
    if (len <= 0 || fstat(fd, &st) || !S_ISREG(st.st_mode)) return true; /* a device keeps what it got */
    return st.st_size == end && end >= len && !ftruncate(fd, end - len) && outpath_fsync(fd);
}

int metrics_append(const char *path, const metrics_line *ml, long long n, const update_batch *b,
                   metrics_pending *mp, gerr *e) {
    mp->fd = -1;
    strbuf all = {0};
    for (long long i = 0; i < n; i++) {
        strbuf l = {0};
        metrics_line_json(&l, &ml[i], b);
        sb_append(&all, l.data, l.len);
        sb_free(&l);
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        bool cannot_create = errno == ENOENT || errno == ENOTDIR || errno == EACCES || errno == EISDIR;
        int rc = gerr_set(e, cannot_create ? EX_CANTCREAT : EX_IOERR, "%s: cannot create: %s", path, strerror(errno));
        sb_free(&all);
        return rc;
    }
    /* one write of whole lines: concurrent appenders never interleave; a
     * short one (a full disk) is tried once more for the cause */
    off_t len = 0;
    ssize_t w = write(fd, all.data, all.len);
    if (w > 0) len = w;
    if (w >= 0 && w < (ssize_t)all.len) {
        ssize_t more = write(fd, all.data + w, all.len - (size_t)w);
        if (more > 0) len += more;
        if (more >= 0 && more < (ssize_t)(all.len - (size_t)w)) errno = ENOSPC;
        w = more == (ssize_t)(all.len - (size_t)w) ? (ssize_t)all.len : -1;
    }
    off_t end = lseek(fd, 0, SEEK_CUR);
    int rc = 0;
    if (w < 0) rc = gerr_set(e, EX_IOERR, "%s: write failed: %s", path, strerror(errno));
    else if (!outpath_fsync(fd)) rc = gerr_set(e, EX_IOERR, "%s: fsync failed: %s", path, strerror(errno));
    sb_free(&all);
    if (rc) {
        /* the file keeps whole lines only: the part written is cut off */
        if (!metrics_cut(fd, end, len)) {
            size_t at = strlen(e->msg);
            snprintf(e->msg + at, sizeof e->msg - at, " (a part of a line is left at its end)");
        }
        close(fd);
        return rc;
    }
    mp->fd = fd, mp->end = end, mp->len = len;
    return 0;
}

void metrics_retract(metrics_pending *mp) {
    if (mp->fd < 0) return;
    (void)metrics_cut(mp->fd, mp->end, mp->len); /* the checkpoint's own error is the one reported */
    close(mp->fd);
    mp->fd = -1;
}

void metrics_close(metrics_pending *mp) {
    /* the lines are fsync'd: close has nothing left to lose */
    if (mp->fd >= 0) close(mp->fd);
    mp->fd = -1;
}
