/* The one loader (see load.h): the format from the path, then the format's
 * loader (load_hf.c, load_gguf.c), an adapter directory as its base plus
 * the adapter, and the packing of a model loaded for inference. */
#include "load.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "adapter_dir.h"

int model_load_adapter(const char *path, model *base, lora *l, bool *has_adapter, gerr *e) {
    memset(l, 0, sizeof *l);
    *has_adapter = false;
    if (!lora_is_adapter_dir(path)) return model_load(base, path, e);
    memset(base, 0, sizeof *base);
    char *base_path;
    int rc = lora_adapter_base_path(path, &base_path, e);
    if (rc) return rc;
    rc = model_load(base, base_path, e);
    if (!rc && (rc = lora_load(l, &base->cfg, path, e))) model_free(base);
    if (rc) {
        free(base_path);
        return rc;
    }
    /* the base as found, not as stored: the stored path may be relative to the adapter */
    free(l->base);
    l->base = base_path;
    *has_adapter = true;
    return 0;
}

/* An adapter checkpoint: its base with the adapter merged in, so every tool
 * that only runs the model takes one. */
static int load_merged_adapter(model *m, const char *path, gerr *e) {
    lora l;
    bool has_adapter;
    int rc = model_load_adapter(path, m, &l, &has_adapter, e);
    if (rc) return rc;
    lora_merge(m, &l);
    lora_free(&l);
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

/* model_pack_for_inference_except, its EX_DATAERR (a shape the format
 * cannot hold) naming the model. */
static int pack(model *m, const char *path, weight_format fmt, const bool *done, gerr *e) {
    int rc = model_pack_for_inference_except(m, fmt, done, e);
    if (rc == EX_DATAERR) {
        gerr why = *e;
        gerr_set(e, rc, "%s: %s", path, why.msg);
    }
    return rc;
}

/* A model of the kind asked for, packed in *fmt when fmt is not NULL. A
 * GGUF's matrices in fmt's own blocks are written packed by its loader
 * (flagged in done); the rest are packed here, after the kind is known. */
static int load_any(model *m, const char *path, bool classifier, const weight_format *fmt, gerr *e) {
    memset(m, 0, sizeof *m);
    if (classifier && lora_is_adapter_dir(path))
        return gerr_set(e, EX_DATAERR, "%s: an adapter directory; a reward model must be a full checkpoint", path);
    struct stat st;
    if (stat(path, &st)) return gerr_set(e, EX_NOINPUT, "%s: no such file or directory", path);
    bool *done = NULL;
    int rc;
    if (S_ISDIR(st.st_mode) && lora_is_adapter_dir(path)) rc = load_merged_adapter(m, path, e);
    else rc = S_ISDIR(st.st_mode) ? model_load_hf(m, path, e) : model_load_gguf(m, path, fmt, &done, e);
    if (!rc) rc = check_kind(m, path, classifier, e);
    if (!rc && fmt) rc = pack(m, path, *fmt, done, e);
    free(done);
    if (rc) model_free(m);
    return rc;
}

int model_load(model *m, const char *path, gerr *e) { return load_any(m, path, false, NULL, e); }

int model_load_classifier(model *m, const char *path, gerr *e) { return load_any(m, path, true, NULL, e); }

int model_load_for_inference(model *m, const char *path, bool classifier, weight_format fmt, gerr *e) {
    return load_any(m, path, classifier, &fmt, e);
}
