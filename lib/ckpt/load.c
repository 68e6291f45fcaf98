/* The one loader (see load.h): the kind of source from the path, probed
 * once, then its loader (load_hf.c, load_gguf.c, or an adapter directory
 * as its base plus the adapter), and for a model loaded for inference the
 * packing plan made once and followed by the loader and the packer. */
#include "load.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "adapter_dir.h"
#include "ckpt_paths.h"

typedef enum { SRC_HF_DIR, SRC_ADAPTER_DIR, SRC_GGUF } source_kind;

/* What path is: an adapter directory, another directory (a Hugging Face
 * model's), or a file (GGUF). EX_NOINPUT when it is not there. */
static int probe(const char *path, source_kind *kind, gerr *e) {
    struct stat st;
    if (stat(path, &st)) return gerr_set(e, EX_NOINPUT, "%s: no such file or directory", path);
    *kind = !S_ISDIR(st.st_mode) ? SRC_GGUF : lora_is_adapter_dir(path) ? SRC_ADAPTER_DIR : SRC_HF_DIR;
    return 0;
}

/* The adapter directory path: its base into *base (unmerged; with w, as
 * load_source loads it for w, *plan made), the adapter into *l (l->base
 * the base's path as found), both zeroed by the caller. On error nothing is
 * held. */
static int load_source(model *m, const char *path, source_kind kind, const weight_choice *w, pack_plan *plan,
                       gerr *e);
static int load_adapter_dir(const char *path, model *base, lora *l, const weight_choice *w, pack_plan *plan,
                            gerr *e) {
    char *base_path;
    source_kind kind;
    int rc = lora_adapter_base_path(path, &base_path, e);
    if (rc) return rc;
    if (!w) rc = model_load(base, base_path, e);
    else if (!(rc = probe(base_path, &kind, e))) rc = load_source(base, base_path, kind, w, plan, e);
    if (!rc && (rc = lora_load(l, &base->cfg, path, e))) {
        model_free(base);
        if (w) pack_plan_free(plan);
    }
    if (rc) {
        free(base_path);
        return rc;
    }
    /* the base as found, not as stored: the stored path may be relative to the adapter */
    free(l->base);
    l->base = base_path;
    return 0;
}

static int pack(model *m, const char *path, const pack_plan *plan, gerr *e);

/* The adapter directory path's base into *base, packed as a frozen plan for
 * w asks (model_pack after the loader followed it), and its adapter into
 * *l, both zeroed by the caller; on error nothing is held. */
static int load_adapter_packed(const char *path, model *base, lora *l, weight_choice w, gerr *e) {
    pack_plan plan = {0};
    w.pack_early = true; /* the adapter stays apart: nothing reads the base's rows before pack */
    int rc = load_adapter_dir(path, base, l, &w, &plan, e);
    if (!rc && (rc = pack(base, path, &plan, e))) {
        lora_free(l);
        model_free(base);
    }
    pack_plan_free(&plan);
    return rc;
}

/* A checkpoint trained on a frozen base packed in fmt, for inference as
 * the trainer runs it (grpo-update's policy.c, model_load_adapter_frozen
 * and model_load_adapter_mxfp4): the base packed as it is read by the
 * frozen plan (MXFP4: its experts written packed from the file's blocks,
 * the rest float32 rows; q4k: a Q4_K file's matrices its blocks), the adapter
 * kept unmerged in m->adapter. */
static int load_frozen_adapter(model *m, const char *path, weight_format fmt, gerr *e) {
    lora *l = xcalloc(1, sizeof *l);
    weight_choice w = {.fmt = fmt, .keep_mxfp4 = fmt == WEIGHTS_MXFP4, .frozen = true};
    int rc = load_adapter_packed(path, m, l, w, e);
    if (rc) {
        free(l);
        return rc;
    }
    m->adapter = l;
    return 0;
}

/* Whether adapter directory path's base holds its experts as MXFP4 blocks. */
static int base_is_mxfp4(const char *path, bool *mx, gerr *e) {
    char *base = NULL;
    weight_format f = WEIGHTS_F32;
    int rc = lora_adapter_base_path(path, &base, e);
    if (!rc) rc = model_file_format(base, &f, e);
    free(base);
    *mx = f == WEIGHTS_MXFP4;
    return rc;
}

/* An adapter checkpoint: its base with the adapter merged in, so every tool
 * that only runs the model takes one; with w, *plan made for w. The base's
 * MXFP4 experts stay as the file's blocks (w keeping them) when the adapter
 * leaves them alone (gpt_oss's, the only MXFP4 experts, under an adapter on
 * attention), every other matrix float32 for the merge, packed later; an
 * adapter on them (stacked, lora.h), trained on their float32 values,
 * runs unmerged over the blocks instead (load_frozen_adapter: the same
 * values, which a merge would widen to float32). A checkpoint trained on
 * a packed frozen base (grpo-update --base-weights bf16|q8|q4k) merges
 * into that base's values, the model it trained (model_round_frozen; a q8
 * or q4k base's Q8_0 or Q4_K matrices read as the file's blocks, as the
 * trainer reads them, then widened), not the file's; for inference, when w
 * follows the frozen base (auto) or names its format, it runs on that base
 * unmerged instead (load_frozen_adapter; *plan then packs nothing more),
 * but on a device (w's on_device), whose inference runs no frozen base. */
static int load_merged_adapter(model *m, const char *path, const weight_choice *w, pack_plan *plan, gerr *e) {
    lora l;
    pack_plan base_plan = {0};
    weight_format base_fmt;
    bool stacked, mx = false;
    int rc = ckpt_base_weights_read(path, &base_fmt, e);
    if (!rc) rc = lora_adapter_stacked(path, &stacked, e);
    if (rc) return rc;
    if (w && !w->on_device && base_fmt != WEIGHTS_F32 && (w->frozen_base || w->fmt == base_fmt))
        return load_frozen_adapter(m, path, base_fmt, e);
    if (w && w->keep_mxfp4 && stacked && base_fmt == WEIGHTS_F32 && (rc = base_is_mxfp4(path, &mx, e))) return rc;
    if (mx) return load_frozen_adapter(m, path, WEIGHTS_MXFP4, e);
    bool blocks = base_fmt == WEIGHTS_Q4K || base_fmt == WEIGHTS_Q8; /* formats that take a file's blocks */
    weight_choice base_w = blocks ? (weight_choice){.fmt = base_fmt, .frozen = true}
                                  : (weight_choice){.fmt = WEIGHTS_F32, .keep_mxfp4 = w && w->keep_mxfp4 && !stacked};
    if ((rc = load_adapter_dir(path, m, &l, w || blocks ? &base_w : NULL, &base_plan, e))) return rc;
    if ((rc = model_round_frozen(m, base_fmt, &base_plan, e))) {
        lora_free(&l);
        pack_plan_free(&base_plan);
        model_free(m);
        return rc;
    }
    lora_merge(m, &l);
    lora_free(&l);
    /* merged into: no longer the file's values (the experts' only when the adapter is on them) */
    for (int i = 0; i < MODEL_N_PARAMS; i++)
        if (stacked || m->file_as[i] != WEIGHTS_MXFP4) m->file_as[i] = WEIGHTS_F32;
    if (stacked) m->experts_mxfp4 = false;
    if (w) {
        model_plan_packing(m, *w, plan);
        for (size_t i = 0; !blocks && i < plan->n_tensors && i < base_plan.n_tensors; i++) /* else widened */
            plan->verbatim[i] = base_plan.verbatim[i];
    }
    pack_plan_free(&base_plan);
    return 0;
}

/* The kind the caller asked for, or EX_DATAERR naming the model's. */
static int check_kind(const model *m, const char *path, bool classifier, gerr *e) {
    if (!classifier && m->cfg.seq_cls)
        return gerr_set(e, EX_DATAERR,
                        "%s: architecture \"%s\" is a sequence classifier (a reward model), not a causal LM", path,
                        m->cfg.architecture);
    if (classifier && !m->cfg.seq_cls)
        return gerr_set(e, EX_DATAERR,
                        "%s: architecture \"%s\" is not a sequence classifier (a reward model is a "
                        "LlamaForSequenceClassification, Qwen2ForSequenceClassification or "
                        "Qwen3ForSequenceClassification)",
                        path, m->cfg.architecture);
    return 0;
}

/* The source's loader; with w, *plan made for it once the config is
 * known and followed. On error *plan holds nothing. */
static int load_source(model *m, const char *path, source_kind kind, const weight_choice *w, pack_plan *plan,
                       gerr *e) {
    switch (kind) {
    case SRC_GGUF: return model_load_gguf(m, path, w, plan, e);
    case SRC_HF_DIR: return model_load_hf(m, path, w, plan, e);
    default: return load_merged_adapter(m, path, w, plan, e);
    }
}

/* model_pack, its refusals (a shape the format cannot hold, no MXFP4
 * experts to keep) naming the model. */
static int pack(model *m, const char *path, const pack_plan *plan, gerr *e) {
    int rc = model_pack(m, plan, e);
    if (rc == EX_DATAERR || rc == EX_USAGE) {
        gerr why = *e;
        gerr_set(e, rc, "%s: %s", path, why.msg);
    }
    return rc;
}

/* A model of the kind asked for from a source of kind `kind`, packed as *w
 * asks when w is not NULL. */
static int load_kind(model *m, const char *path, source_kind kind, bool classifier, const weight_choice *w,
                     gerr *e) {
    memset(m, 0, sizeof *m);
    if (classifier && kind == SRC_ADAPTER_DIR)
        return gerr_set(e, EX_DATAERR, "%s: an adapter directory; a reward model must be a full checkpoint", path);
    pack_plan plan = {0};
    /* a checkpoint's or file's matrices packed as they are read; an
     * adapter's base is merged first (load_merged_adapter's own plan) */
    weight_choice early;
    if (w && kind != SRC_ADAPTER_DIR) early = *w, early.pack_early = true, w = &early;
    int rc = load_source(m, path, kind, w, &plan, e);
    if (!rc) rc = check_kind(m, path, classifier, e);
    if (!rc && w) rc = pack(m, path, &plan, e);
    pack_plan_free(&plan);
    if (rc) model_free(m);
    return rc;
}

/* model_load_adapter, with w the base packed as a frozen plan for *w asks. */
static int load_adapter_or_model(const char *path, model *base, lora *l, bool *has_adapter, const weight_choice *w,
                                 gerr *e) {
    memset(l, 0, sizeof *l);
    memset(base, 0, sizeof *base);
    *has_adapter = false;
    source_kind kind;
    int rc = probe(path, &kind, e);
    if (rc || kind != SRC_ADAPTER_DIR) return rc ? rc : load_kind(base, path, kind, false, w, e);
    rc = w ? load_adapter_packed(path, base, l, *w, e) : load_adapter_dir(path, base, l, NULL, NULL, e);
    *has_adapter = !rc;
    return rc;
}

int model_load_adapter(const char *path, model *base, lora *l, bool *has_adapter, gerr *e) {
    return load_adapter_or_model(path, base, l, has_adapter, NULL, e);
}

int model_load_adapter_mxfp4(const char *path, model *base, lora *l, bool *has_adapter, gerr *e) {
    weight_choice w = {.fmt = WEIGHTS_F32, .keep_mxfp4 = true, .frozen = true};
    return load_adapter_or_model(path, base, l, has_adapter, &w, e);
}

int model_load_adapter_frozen(const char *path, weight_format fmt, model *base, lora *l, bool *has_adapter, gerr *e) {
    weight_choice w = {.fmt = fmt, .frozen = true};
    return load_adapter_or_model(path, base, l, has_adapter, &w, e);
}

static int load_any(model *m, const char *path, bool classifier, const weight_choice *w, gerr *e) {
    memset(m, 0, sizeof *m);
    source_kind kind;
    int rc = probe(path, &kind, e);
    return rc ? rc : load_kind(m, path, kind, classifier, w, e);
}

int model_file_format(const char *path, weight_format *fmt, gerr *e) {
    *fmt = WEIGHTS_F32;
    source_kind kind;
    int rc = probe(path, &kind, e);
    if (rc) return rc;
    switch (kind) {
    case SRC_GGUF: return model_gguf_format(path, fmt, e);
    case SRC_HF_DIR: return model_hf_format(path, fmt, e);
    default: return ckpt_base_weights_read(path, fmt, e);
    }
}

int model_load(model *m, const char *path, gerr *e) { return load_any(m, path, false, NULL, e); }

int model_load_classifier(model *m, const char *path, gerr *e) { return load_any(m, path, true, NULL, e); }

int model_load_for_inference(model *m, const char *path, bool classifier, weight_choice w, gerr *e) {
    return load_any(m, path, classifier, &w, e);
}
