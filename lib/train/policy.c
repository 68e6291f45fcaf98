/* The policy grpo-update trains: loading it with its state, and the
 * optimizer step over whatever is trained (every weight, or the adapter). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sysexits.h>

#include "../ckpt/adapter_dir.h"
#include "../ckpt/ckpt_paths.h"
#include "../ckpt/load.h"
#include "../dataparallel/shard.h"
#include "../io/mapped.h"
#include "../ops/backend.h"
#include "../util/bigmem.h"
#include "../util/strbuf.h"
#include "state.h"
#include "update_internal.h"

/* Both exist and are the same file or directory (however spelled). */
static bool same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return a && b && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* One optimizer-state tensor: its name and shape, and its moments at
 * offset off of the flat state (the trained parameters' offset), of which
 * this rank holds lo .. hi-1. */
static void describe(optim_tensor *t, const policy *p, const char *name, int64_t rows, int64_t cols, size_t off) {
    t->name = xstrdup(name);
    t->ndim = cols ? 2 : 1, t->shape[0] = rows, t->shape[1] = cols;
    size_t numel = (size_t)rows * (size_t)(cols ? cols : 1), end = off + numel;
    size_t a = off > p->lo ? off : p->lo, b = end < p->hi ? end : p->hi;
    t->partial = p->lo != 0 || p->hi != p->n_trained;
    if (b <= a) { /* none of it is this rank's */
        t->first = t->count = 0;
        t->m = p->exp_avg, t->v = p->exp_avg_sq;
        return;
    }
    t->first = (int64_t)(a - off), t->count = (int64_t)(b - a);
    t->m = p->exp_avg ? p->exp_avg + (a - p->lo) : NULL;
    t->v = p->exp_avg_sq ? p->exp_avg_sq + (a - p->lo) : NULL;
}

size_t policy_optim_tensors(const policy *p, optim_tensor **out) {
    size_t n = p->has_lora ? lora_tensor_list(&p->l, NULL) : model_tensor_list(&p->m, NULL);
    optim_tensor *t = xcalloc(n ? n : 1, sizeof *t);
    if (p->has_lora) {
        lora_tensor_ref *refs = xcalloc(n ? n : 1, sizeof *refs);
        lora_tensor_list(&p->l, refs);
        for (size_t i = 0; i < n; i++)
            describe(&t[i], p, refs[i].name, refs[i].rows, refs[i].cols, (size_t)(refs[i].data - p->l.memory));
        free(refs);
    } else {
        model_tensor_ref *refs = xcalloc(n ? n : 1, sizeof *refs);
        model_tensor_list(&p->m, refs);
        for (size_t i = 0; i < n; i++)
            describe(&t[i], p, refs[i].name, refs[i].rows, refs[i].cols, (size_t)(refs[i].dst - p->m.params_memory));
        free(refs);
    }
    *out = t;
    return n;
}

static void free_tensors(optim_tensor *t, size_t n) {
    for (size_t i = 0; i < n; i++) free((char *)t[i].name);
    free(t);
}

/* The reference state.json names (flags.ref, paths.ref), resolved as
 * lib/ckpt/ckpt_paths.h says; NULL when it names none. Not found is an error
 * only when the KL term needs it: without, it is carried on as stored. */
static int state_ref(const train_state *s, const char *ckpt, const char *state_path, bool needed, char **ref,
                     gerr *e) {
    cJSON *f = cJSON_Parse(s->flags_json);
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(f, "ref");
    char *given = cJSON_IsString(r) ? xstrdup(r->valuestring) : NULL;
    cJSON_Delete(f);
    if (!given) return 0;
    char *rel, *abs;
    int rc = ckpt_paths_get(s->paths_json, "ref", state_path, &rel, &abs, e);
    if (!rc) {
        ckpt_ref cr = {"reference model", "grpo/state.json flags.ref, paths.ref", rel, abs, given};
        gerr local = {0};
        rc = ckpt_path_resolve(ckpt, &cr, ref, needed ? e : &local);
        if (rc && !needed) rc = 0, *ref = xstrdup(given);
    }
    free(rel), free(abs), free(given);
    return rc;
}

/* A choice a checkpoint was trained with, flags.<key> of its state ("f32"
 * before the flag existed): --compute, --base-weights. Given (not auto) and
 * different, it is refused as a conflicting --lora-r is: a run keeps its
 * numerics; left out or auto, it is continued. */
static int state_choice(const train_state *s, const char *key, const char *const *names, int n_names,
                        const char *given, const char *model, const char *state_path, const char **out, gerr *e) {
    cJSON *f = cJSON_Parse(s->flags_json);
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(f, key);
    const char *was = !c ? names[0] : NULL;
    for (int i = 0; c && cJSON_IsString(c) && i < n_names; i++)
        if (strcmp(names[i], "auto") && !strcmp(c->valuestring, names[i])) was = names[i];
    cJSON_Delete(f);
    if (!was) {
        strbuf want = {0};
        for (int i = 0; i < n_names; i++)
            if (strcmp(names[i], "auto")) sb_printf(&want, "%s\"%s\"", want.len ? " or " : "", names[i]);
        gerr_set(e, EX_DATAERR, "%s: field \"flags.%s\": expected %s", state_path, key, want.data);
        sb_free(&want);
        return e->code;
    }
    if (given && strcmp(given, "auto") && strcmp(given, was)) {
        char flag[32];
        snprintf(flag, sizeof flag, "--%s", key);
        for (char *q = flag; *q; q++)
            if (*q == '_') *q = '-';
        return gerr_set(e, EX_USAGE, "%s %s: %s was trained with %s %s; leave %s out to continue it", flag, given,
                        model, flag, was, flag);
    }
    *out = was;
    return 0;
}

/* The adapter: continued as --model has it (a conflicting --lora-r or
 * --lora-targets refused), or a fresh one with --lora-r (initialised once
 * the seed is known: *fresh). */
static int load_adapter(policy *p, const update_plan *plan, bool *fresh, gerr *e) {
    const update_run_opts *o = &plan->run;
    /* on a mixture of experts the default is q,k,v,o: gate, up and down on
     * experts only when asked for (an adapter per expert: E times the FFN's) */
    unsigned targets = plan->lora_targets, ffn = 1u << LORA_GATE | 1u << LORA_UP | 1u << LORA_DOWN;
    if (!o->lora_targets_given && p->m.cfg.n_experts > 0) targets &= ~ffn;
    *fresh = false;
    if (p->has_lora) {
        if (o->lora_given && (o->lora_r != p->l.r || targets != p->l.targets))
            return gerr_set(e, EX_USAGE,
                            "--lora-r/--lora-targets: %s already has an adapter (r=%d); leave them out to continue it",
                            o->model, p->l.r);
        const char *why = o->lora_dropout > 0 ? lora_dropout_refused(&p->m.cfg, p->l.targets) : NULL;
        if (why) return gerr_set(e, EX_USAGE, "--lora-dropout %g: %s", o->lora_dropout, why);
        p->l.dropout = o->lora_dropout; /* dropout is a training choice */
        return 0;
    }
    if (o->lora_r == 0) return 0;
    double alpha = o->lora_alpha > 0 ? o->lora_alpha : 2.0 * (double)o->lora_r;
    int rc = lora_alloc(&p->l, &p->m.cfg, (int)o->lora_r, alpha, o->rslora, o->lora_dropout, targets, o->model, e);
    if (rc) return rc;
    p->has_lora = *fresh = true;
    return 0;
}

/* The seed, the numerics (--compute) and, when --model is our checkpoint
 * (*resumed), the step, RNG position and reference its grpo/state.json
 * holds. */
static int load_state(policy *p, const update_plan *plan, bool device, bool *resumed, gerr *e) {
    const update_run_opts *o = &plan->run;
    p->seed = o->seed;
    /* auto, and on a device --compute left out: bf16 on a device and where
     * this CPU has AVX-512 BF16 (a run started so keeps it, as
     * state_compute says; ranks that resolve it differently disagree on
     * the flags and stop with 64) */
    bool bf16 = !strcmp(o->compute, "bf16") || (!strcmp(o->compute, "auto") && (device || backend_cpu_bf16())) ||
                (device && !o->compute_given);
    p->compute = bf16 ? "bf16" : "f32";
    /* auto: the format the base loaded in (base_load_format: the file's) */
    p->base_weights = strcmp(o->base_weights, "auto") ? o->base_weights : weight_format_name(p->base_fmt);
    strbuf sp = {0};
    sb_printf(&sp, "%s/grpo/state.json", o->model);
    /* state.json there: the run resumes, and anything but a regular file is an error */
    int rc = regular_file_probe(sp.data, resumed, e);
    if (rc) {
        sb_free(&sp);
        return rc;
    }
    if (*resumed) {
        train_state s;
        if ((rc = state_read(&s, sp.data, e))) {
            sb_free(&sp);
            return rc;
        }
        p->step = s.step, p->next_index = s.next_index;
        if (!o->seed_given) p->seed = s.seed;
        rc = state_choice(&s, "compute", update_compute_names, 3, o->compute_given ? o->compute : NULL, o->model,
                          sp.data, &p->compute, e);
        if (!rc)
            rc = state_choice(&s, "base_weights", update_base_weights_names, UPDATE_BASE_N,
                              o->base_weights_given ? o->base_weights : NULL, o->model, sp.data, &p->base_weights, e);
        if (!rc && device && !strcmp(p->compute, "f32"))
            rc = gerr_set(e, EX_USAGE, "--device: %s was trained with --compute f32, and a device computes bf16 products; continue it with --device cpu",
                          o->model);
        if (!rc && !o->ref && !p->has_lora) rc = state_ref(&s, o->model, sp.data, plan->loss.beta > 0, &p->ref_path, e);
        state_free(&s);
    }
    sb_free(&sp);
    if (!rc && device && !strcmp(p->compute, "f32"))
        rc = gerr_set(e, EX_USAGE, "--compute f32 on a device: its products are bf16 with float32 sums (--compute bf16 or auto)");
    return rc;
}

/* The KL reference: --ref, else the one the state names, else --model
 * itself (step 0); none with LoRA (the base, adapter off). */
static int pick_ref(policy *p, const update_run_opts *o, const loss_opts *c, gerr *e) {
    if (p->has_lora) {
        free(p->ref_path);
        p->ref_path = NULL;
        if (o->ref) return gerr_set(e, EX_USAGE, "--ref: with LoRA the reference is the base model with the adapter off");
        return 0;
    }
    if (o->ref) {
        free(p->ref_path);
        p->ref_path = xstrdup(o->ref);
    } else if (!p->ref_path) {
        p->ref_path = xstrdup(o->model);
    }
    /* an update in place would silently move the KL anchor to each new step */
    if (c->beta > 0 && same_file(p->ref_path, o->out))
        return gerr_set(e, EX_USAGE,
                        "--out %s is the KL reference of --beta %g: the update would replace it; write the checkpoint "
                        "elsewhere, or give --ref a copy of the initial model",
                        o->out, c->beta);
    return 0;
}

/* What is trained, this rank's slice of it, and the AdamW moments of the
 * slice: zero, or with read_moments true those --model's
 * grpo/optimizer.safetensors holds (required: 66 when missing). */
static int load_moments(policy *p, const update_run_opts *o, optim_kind kind, const dist *d, bool read_moments,
                        gerr *e) {
    p->params = p->has_lora ? p->l.memory : p->m.params_memory;
    p->n_trained = p->has_lora ? p->l.n_params : p->m.n_params;
    p->lo = 0, p->hi = p->n_trained;
    if (o->zero && d->size > 1) {
        p->bounds = xmalloc(sizeof *p->bounds * (size_t)(d->size + 1));
        shard_slices(p->n_trained, d->size, p->bounds);
        p->lo = p->bounds[d->rank], p->hi = p->bounds[d->rank + 1];
    }
    if (kind == OPTIM_ADAMW) {
        size_t n = p->hi - p->lo;
        p->exp_avg = big_calloc(n ? n : 1, sizeof(float));
        p->exp_avg_sq = big_calloc(n ? n : 1, sizeof(float));
        if (!p->exp_avg || !p->exp_avg_sq)
            return gerr_set(e, EX_SOFTWARE, "out of memory for the optimizer state (%zu MiB)", n * 8 >> 20);
    }
    int rc = 0;
    strbuf op = {0};
    sb_printf(&op, "%s/grpo/optimizer.safetensors", o->model);
    if (read_moments) { /* a resumed run's optimizer state is required (66 when missing) */
        optim_tensor *t;
        size_t n = policy_optim_tensors(p, &t);
        rc = optim_state_read(op.data, kind, t, n, e);
        free_tensors(t, n);
    }
    sb_free(&op);
    return rc;
}

/* The format a --base-weights name other than auto names
 * (update_base_weights_names' order); auto is f32. */
static weight_format named_format(const char *name) {
    static const weight_format named[UPDATE_BASE_N - 1] = {WEIGHTS_F32, WEIGHTS_BF16, WEIGHTS_Q8, WEIGHTS_Q4K,
                                                           WEIGHTS_MXFP4};
    for (int i = 0; i < UPDATE_BASE_N - 1; i++)
        if (!strcmp(name, update_base_weights_names[i])) return named[i];
    return WEIGHTS_F32;
}

/* The format the frozen base loads in (o->base_weights, or for auto the
 * file's: model_file_format): f32 but for a LoRA run (on the CPU or a
 * device alike); for a run that resumes, the one its checkpoint trained on
 * (a different one given is load_state's refusal). */
static int base_load_format(const update_run_opts *o, weight_format *fmt, gerr *e) {
    *fmt = WEIGHTS_F32;
    if (!(o->lora_r > 0 || lora_is_adapter_dir(o->model))) return 0;
    strbuf sp = {0};
    sb_printf(&sp, "%s/grpo/state.json", o->model);
    bool resumed = false;
    int rc = regular_file_probe(sp.data, &resumed, e);
    sb_free(&sp);
    if (rc) return rc;
    if (resumed) return ckpt_base_weights_read(o->model, fmt, e);
    if (!strcmp(o->base_weights, "auto")) return model_file_format(o->model, fmt, e);
    *fmt = named_format(o->base_weights);
    return 0;
}

/* The frozen base in p->base_weights' format: packed for a LoRA run (a
 * mixture's experts too, the router kept float32 rows; mxfp4's experts by
 * the load), on the host, whence a device takes the same bytes
 * (model_to_backend, which refuses a device without the frozen ops);
 * anything but f32 refused for full fine-tuning (every weight trains). */
static int pack_base(policy *p, const char *model_path, gerr *e) {
    const char *f = p->base_weights;
    if (!strcmp(f, "f32") && p->m.packed)
        return gerr_set(e, EX_SOFTWARE, "--base-weights f32: %s was loaded with its experts packed", model_path);
    if (!strcmp(f, "f32")) return 0;
    if (!p->has_lora)
        return gerr_set(e, EX_USAGE, "--base-weights %s: full fine-tuning trains every weight of %s; use an f32 base "
                        "(--base-weights f32, with --compute bf16 for bf16 products), or --lora-r", f, model_path);
    if (!strcmp(f, "mxfp4"))
        return p->m.packed_frozen ? 0
                                  : gerr_set(e, EX_USAGE, "--base-weights mxfp4: the experts of %s were not loaded from "
                                                          "MXFP4 blocks (a gpt-oss's Hugging Face _blocks and _scales, "
                                                          "or a GGUF's MXFP4); use f32, bf16 or q8",
                                             model_path);
    return model_pack_frozen(&p->m, named_format(f), e);
}

int policy_load(policy *p, const update_plan *plan, const dist *d, bool device, gerr *e) {
    memset(p, 0, sizeof *p);
    bool fresh_adapter = false, resumed = false;
    int rc = base_load_format(&plan->run, &p->base_fmt, e);
    /* a packed base (LoRA) packed as it is read: MXFP4 experts
     * from the file's blocks, bf16, q8 and q4k matrices from their floats */
    weight_format f = p->base_fmt;
    if (!rc)
        rc = f == WEIGHTS_MXFP4 ? model_load_adapter_mxfp4(plan->run.model, &p->m, &p->l, &p->has_lora, e)
             : f != WEIGHTS_F32 ? model_load_adapter_frozen(plan->run.model, f, &p->m, &p->l, &p->has_lora, e)
                                : model_load_adapter(plan->run.model, &p->m, &p->l, &p->has_lora, e);
    if (!rc) rc = load_adapter(p, plan, &fresh_adapter, e);
    if (!rc) rc = load_state(p, plan, device, &resumed, e);
    if (!rc) rc = pack_base(p, plan->run.model, e);
    if (!rc && fresh_adapter) lora_init(&p->l, (uint64_t)p->seed);
    if (!rc) rc = pick_ref(p, &plan->run, &plan->loss, e);
    if (!rc) rc = load_moments(p, &plan->run, plan->optim.kind, d, resumed && !fresh_adapter, e);
    if (rc) policy_free(p);
    return rc;
}

/* n floats of src (host) into a new buffer in be's memory. */
static int put_floats(const backend *be, float **dst, const float *src, size_t n, gerr *e) {
    void *q = NULL;
    int rc = be->mem_alloc(&q, (n ? n : 1) * sizeof(float), e);
    if (rc) return rc;
    *dst = q;
    return n ? be->mem_upload(q, src, n * sizeof(float), e) : 0;
}

int policy_to_device(policy *p, const backend *be, gerr *e) {
    if (p->bounds) return gerr_set(e, EX_USAGE, "--zero 1 on a device: the optimizer state is sharded on the host only");
    p->dev = be;
    int rc = model_to_backend(&p->m, be, e);
    if (!rc) rc = put_floats(be, &p->params_dev, p->params, p->n_trained, e);
    if (!rc && p->exp_avg) rc = put_floats(be, &p->exp_avg_dev, p->exp_avg, p->n_trained, e);
    if (!rc && p->exp_avg_sq) rc = put_floats(be, &p->exp_avg_sq_dev, p->exp_avg_sq, p->n_trained, e);
    if (rc || !p->has_lora) return rc;
    /* the same adapter with every factor at its place in params_dev */
    p->l_dev = p->l;
    p->l_dev.memory = p->params_dev;
    for (int t = 0; t < LORA_N_SETS; t++) {
        if (p->l.a[t]) p->l_dev.a[t] = p->params_dev + (p->l.a[t] - p->l.memory);
        if (p->l.b[t]) p->l_dev.b[t] = p->params_dev + (p->l.b[t] - p->l.memory);
    }
    return 0;
}

lora *policy_lora(policy *p) { return !p->has_lora ? NULL : p->dev ? &p->l_dev : &p->l; }

int policy_download(policy *p, gerr *e) {
    if (!p->dev) return 0;
    const backend *be = p->dev;
    size_t bytes = p->n_trained * sizeof(float);
    int rc = be->mem_download(p->params, p->params_dev, bytes, e);
    if (!rc && p->exp_avg_dev) rc = be->mem_download(p->exp_avg, p->exp_avg_dev, bytes, e);
    if (!rc && p->exp_avg_sq_dev) rc = be->mem_download(p->exp_avg_sq, p->exp_avg_sq_dev, bytes, e);
    return rc;
}

void policy_free(policy *p) {
    if (p->dev) {
        float *bufs[] = {p->params_dev, p->exp_avg_dev, p->exp_avg_sq_dev};
        for (size_t i = 0; i < 3; i++)
            if (bufs[i]) p->dev->mem_free(bufs[i]);
    }
    model_free(&p->m);
    if (p->has_lora) lora_free(&p->l);
    free(p->exp_avg), free(p->exp_avg_sq), free(p->ref_path), free(p->bounds);
    memset(p, 0, sizeof *p);
}

static bool decays(int param) {
    return param == P_TOK_EMBD || param == P_WQ || param == P_WK || param == P_WV || param == P_WO ||
           param == P_W_GATE || param == P_W_UP || param == P_W_DOWN || param == P_ROUTER || param == P_EXP_GATE ||
           param == P_EXP_UP || param == P_EXP_DOWN || param == P_LM_HEAD;
}

/* AdamW (or SGD) over flat elements lo .. hi-1, tensor by tensor (weight
 * decay is per tensor); the moments hold lo .. hi-1 of the flat state. */
static void step_range(policy *p, trainer *t, const optim_opts *c, long step_t, double lr, size_t lo, size_t hi) {
    const backend *be = model_backend(t->m);
    float *m = p->dev ? p->exp_avg_dev : p->exp_avg, *v = p->dev ? p->exp_avg_sq_dev : p->exp_avg_sq;
    float *params = p->dev ? p->params_dev : p->params;
    if (p->has_lora) { /* every factor is a matrix: all decay */
        if (hi > lo)
            optim_step(be, c, step_t, lr, params + lo, t->grad + lo, m, v, hi - lo, true);
        return;
    }
    size_t off = 0;
    for (int i = 0; i < MODEL_N_PARAMS; i++) {
        size_t end = off + p->m.param_sizes[i], a = off > lo ? off : lo, b = end < hi ? end : hi;
        if (b > a)
            optim_step(be, c, step_t, lr, params + a, t->grad + a, m ? m + (a - p->lo) : NULL,
                       v ? v + (a - p->lo) : NULL, b - a, decays(i));
        off = end;
    }
}

/* --group-sums: the float64 sums of every rank summed (this rank's slice
 * with ZeRO-1), then rounded once to the float gradient the step uses. */
static int reduce_group_sums(policy *p, trainer *t, const dist *d, gerr *e) {
    int rc = p->bounds ? dist_reduce_scatter_doubles(d, t->grad_sum, p->bounds, e)
                       : dist_sum_doubles(d, t->grad_sum, p->n_trained, e);
    if (rc) return rc;
    const double *sum = t->grad_sum;
    float *g = t->grad;
    long lo = (long)p->lo, hi = (long)p->hi;
#pragma omp parallel for schedule(static)
    for (long i = lo; i < hi; i++) g[i] = (float)sum[i];
    return 0;
}

/* The gradient summed over ranks and its global norm. On the host: whole on
 * every rank, or with ZeRO-1 only this rank's slice (the same bytes on the
 * wire, in two halves); with --group-sums from the float64 sums. On a
 * device: whole on every rank, summed in device memory (NCCL,
 * lib/dataparallel/nccl.c), the norm taken there. */
static int reduce_and_norm(policy *p, trainer *t, const dist *d, double *grad_norm, gerr *e) {
    int rc;
    if (t->grad_sum) {
        if ((rc = reduce_group_sums(p, t, d, e))) return rc;
        const float *g = t->grad + p->lo;
        size_t n = p->hi - p->lo;
        double sq = grad_sum_squares(&g, &n, 1);
        if (p->bounds && (rc = dist_sum_doubles(d, &sq, 1, e))) return rc;
        *grad_norm = sqrt(sq);
    } else if (p->dev) {
        if ((rc = dist_nccl_sum(d, t->grad, p->n_trained, e))) return rc;
        double sq = p->dev->sum_squares(t->grad, p->n_trained);
        if ((rc = p->dev->sync(e))) return rc;
        *grad_norm = sqrt(sq);
    } else if (p->bounds) {
        if ((rc = dist_reduce_scatter_floats(d, t->grad, p->bounds, e))) return rc;
        const float *g = t->grad + p->lo;
        size_t n = p->hi - p->lo;
        double sq = grad_sum_squares(&g, &n, 1);
        if ((rc = dist_sum_doubles(d, &sq, 1, e))) return rc;
        *grad_norm = sqrt(sq);
    } else {
        if ((rc = dist_sum_floats(d, t->grad, p->n_trained, e))) return rc;
        const float *g_all = t->grad;
        *grad_norm = grad_global_norm(&g_all, &p->n_trained, 1);
    }
    return 0;
}

int policy_step(policy *p, trainer *t, const optim_opts *c, const dist *d, double *grad_norm, double *lr, gerr *e) {
    int rc = reduce_and_norm(p, t, d, grad_norm, e);
    if (rc) return rc;
    if (!isfinite(*grad_norm))
        return gerr_set(e, EX_DATAERR, "step %lld: the gradient is not finite (norm %g); nothing written", p->step + 1,
                        *grad_norm);
    double scale = grad_clip_scale(*grad_norm, c->max_grad_norm);
    float *g_mut = t->grad + p->lo;
    size_t n_mine = p->hi - p->lo;
    if (!p->dev)
        grad_scale(&g_mut, &n_mine, 1, scale);
    else if (scale != 1.0)
        p->dev->scale_inplace(g_mut, (float)scale, n_mine); /* as grad_scale: a float factor */
    *lr = optim_lr_at(c, p->step);
    step_range(p, t, c, (long)p->step + 1, *lr, p->lo, p->hi);
    if (p->dev) { /* the weights the ops read, made again from the new floats */
        if (!p->has_lora) model_dev_refresh(&p->m, p->params_dev);
        if ((rc = p->dev->sync(e))) return rc;
    }
    if (p->bounds && (rc = dist_allgather_floats(d, p->params, p->bounds, e))) return rc;
    p->step++;
    return 0;
}
