/* grpo-export's work: load the checkpoint, write the format asked for
 * (hf through lib/ckpt/hf_dir.h, gguf through gguf_export.c, peft here). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../ckpt/adapter_dir.h"
#include "../ckpt/hf_dir.h"
#include "../ckpt/load.h"
#include "../io/ckptdir.h"
#include "../tok/model_text.h"
#include "../util/strbuf.h"
#include "export.h"

int export_format_parse(const char *s, export_format *f, gerr *e) {
    static const char *const names[] = {[EXPORT_HF] = "hf", [EXPORT_PEFT] = "peft", [EXPORT_GGUF] = "gguf"};
    for (int i = EXPORT_HF; i <= EXPORT_GGUF; i++)
        if (!strcmp(s, names[i])) {
            *f = (export_format)i;
            return 0;
        }
    return gerr_set(e, EX_USAGE, "--format: expected hf, peft or gguf, got '%s'", s);
}

export_dtype export_default_dtype(export_format f) {
    switch (f) {
    case EXPORT_HF: return EXPORT_BF16;
    case EXPORT_PEFT: return EXPORT_F32;
    case EXPORT_GGUF: return EXPORT_F16;
    }
    return EXPORT_F32;
}

/* A Hugging Face Hub id: NAME or ORG/NAME of letters, digits, '-', '_', '.',
 * neither part starting with '.' or '-' (so no path spelling is one). */
static bool is_hub_id(const char *s) {
    int parts = 0;
    for (const char *p = s;; p++) {
        if (p == s || p[-1] == '/') {
            if (!isalnum((unsigned char)*p) && *p != '_') return false;
            parts++;
        }
        if (!*p) break;
        if (!isalnum((unsigned char)*p) && !strchr("-_./", *p)) return false;
        if (*p == '/' && p[1] == 0) return false;
    }
    return parts <= 2 && !strstr(s, "..");
}

/* The shapes an adapter depends on, equal in base and the directory named. */
static int check_same_shape(const model_config *want, const char *dir, gerr *e) {
    model_config c;
    int rc = config_load_hf(&c, dir, e);
    if (rc) return rc;
    if (c.dim != want->dim || c.hidden_dim != want->hidden_dim || c.n_layers != want->n_layers ||
        c.n_heads != want->n_heads || c.n_kv_heads != want->n_kv_heads || c.head_dim != want->head_dim ||
        c.vocab_size != want->vocab_size)
        return gerr_set(e, EX_DATAERR,
                        "--base-model %s: not the adapter's base (hidden %d, intermediate %d, layers %d, heads %d/%d "
                        "of %d, vocab %d; the adapter's: %d, %d, %d, %d/%d of %d, %d)",
                        dir, c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.vocab_size,
                        want->dim, want->hidden_dim, want->n_layers, want->n_heads, want->n_kv_heads, want->head_dim,
                        want->vocab_size);
    return 0;
}

/* base_model_name_or_path of the export: --base-model (an HF directory, made
 * absolute and checked against the base's shapes, or a Hub id), else the
 * base the adapter was trained on, absolute; a GGUF one gets *note. */
static int peft_base_name(const export_opts *o, const model *base, const char *trained_on, char **name, char **note,
                          gerr *e) {
    char abs[PATH_MAX];
    struct stat st;
    const char *b = o->base_model;
    if (!b) {
        *name = xstrdup(realpath(trained_on, abs) ? abs : trained_on);
        if (stat(*name, &st) == 0 && !S_ISDIR(st.st_mode)) {
            strbuf n = {0};
            sb_printf(&n,
                      "base_model_name_or_path is %s, a GGUF file, which PEFT cannot load; make a Hugging Face copy "
                      "and name it: grpo-export --model %s --format hf --dtype f32 --out BASE_DIR, then "
                      "grpo-export --model %s --format peft --base-model BASE_DIR --out %s",
                      *name, *name, o->model, o->out);
            *note = n.data;
        }
        return 0;
    }
    if (stat(b, &st) != 0) {
        if (!is_hub_id(b))
            return gerr_set(e, EX_NOINPUT, "--base-model %s: no such directory, and not a Hub id (NAME or ORG/NAME)", b);
        *name = xstrdup(b); /* PEFT downloads it: nothing here to check */
        strbuf n = {0};
        sb_printf(&n, "--base-model %s is no directory here: written as a Hub id", b);
        *note = n.data;
        return 0;
    }
    strbuf cfg = {0};
    sb_printf(&cfg, "%s/config.json", b);
    bool hf = S_ISDIR(st.st_mode) && access(cfg.data, F_OK) == 0;
    sb_free(&cfg);
    if (!hf)
        return gerr_set(e, EX_USAGE,
                        "--base-model %s: not a Hugging Face model directory (config.json); PEFT loads one or a Hub "
                        "id: make one with grpo-export --model %s --format hf --dtype f32 --out DIR",
                        b, b);
    int rc = check_same_shape(&base->cfg, b, e);
    if (!rc) *name = xstrdup(realpath(b, abs) ? abs : b);
    return rc;
}

/* --clamp's note, after any other one. */
static void note_clamped(char **note, size_t values, size_t tensors, export_dtype d) {
    if (!values) return;
    strbuf n = {0};
    if (*note) sb_printf(&n, "%s; ", *note);
    sb_printf(&n, "--clamp: %zu weights in %zu tensors were beyond what %s holds and were written as +-%g", values,
              tensors, export_dtype_name(d), export_dtype_limit(d));
    free(*note);
    *note = n.data;
}

/* One tensor against its dtype (clamped first with --clamp); counts into clamped[2]. */
static int fit_tensor(const export_opts *o, const char *name, float *x, size_t n, export_dtype d, size_t clamped[2],
                      gerr *e) {
    if (o->clamp) {
        size_t c = export_range_clamp(x, n, d);
        clamped[0] += c;
        clamped[1] += c > 0;
    }
    return export_range_check(o->model, name, x, n, d, e);
}

/* llama.cpp floors and ceils YaRN's ramp always: a model whose config says
 * truncate false (gpt-oss's own) gets other frequencies there, as llama.cpp's
 * own conversion of it does; *note says which. */
static void note_yarn_truncated(char **note, const model *m) {
    if (!m->cfg.rope_yarn || m->cfg.rope_truncate) return;
    model_config c = m->cfg;
    c.rope_truncate = true;
    float f[512];
    rope_inv_freq(f, &c);
    int lo = -1, hi = -1;
    for (int i = 0; i < c.head_dim / 2; i++)
        if (f[i] != m->inv_freq[i]) hi = i, lo = lo < 0 ? i : lo;
    if (lo < 0) return;
    strbuf n = {0};
    if (*note) sb_printf(&n, "%s; ", *note);
    sb_printf(&n, "llama.cpp truncates YaRN's ramp, this model's config does not: in the GGUF RoPE frequencies %d "
                  "to %d of %d differ from the model's, as in llama.cpp's own conversion of it",
              lo, hi, c.head_dim / 2);
    free(*note);
    *note = n.data;
}

/* hf's choice for gpt-oss's experts (hf_experts_mxfp4); when they are not
 * MXFP4 blocks under a dtype that could keep them, *note says why. */
static bool hf_keeps_mxfp4(const export_opts *o, const model *m, char **note) {
    int layer;
    bool kept = hf_experts_mxfp4(m, o->dtype, &layer);
    if (layer < 0) return kept;
    strbuf n = {0};
    if (*note) sb_printf(&n, "%s; ", *note);
    sb_printf(&n, "the experts of layer %d hold values MXFP4 does not (trained, or never MXFP4): every layer's are "
                  "written as %s, and config.json has no quantization_config",
              layer, export_dtype_name(o->dtype));
    free(*note);
    *note = n.data;
    return false;
}

/* Every weight the export writes, checked before anything is (export.h);
 * hf_mx: hf writes gpt-oss's experts as MXFP4 blocks. */
static int fit_model(const export_opts *o, model *m, bool hf_mx, char **note, gerr *e) {
    size_t n = model_tensor_list(m, NULL), clamped[2] = {0, 0};
    model_tensor_ref *refs = xcalloc(n, sizeof *refs);
    model_tensor_list(m, refs);
    int rc = 0;
    bool mxfp4 = false; /* the layer's experts of refs[i] written MXFP4: exact, no range to check */
    for (size_t i = 0; i < n && !rc; i++) {
        const model_tensor_ref *r = &refs[i];
        bool gguf = o->format == EXPORT_GGUF;
        if (gguf && r->expert <= 0) mxfp4 = gguf_export_mxfp4(m, r, o->dtype);
        if ((gguf && mxfp4) || (hf_mx && r->expert >= 0 && r->cols)) continue;
        export_dtype d = gguf ? gguf_export_tensor_dtype(o->dtype, r->param, r->cols) : o->dtype;
        rc = fit_tensor(o, gguf ? r->gguf : r->hf, r->dst, (size_t)r->rows * (size_t)(r->cols ? r->cols : 1), d,
                        clamped, e);
    }
    free(refs);
    if (!rc) note_clamped(note, clamped[0], clamped[1], o->dtype);
    return rc;
}

static int fit_adapter(const export_opts *o, lora *l, char **note, gerr *e) {
    size_t n = lora_tensor_list(l, NULL), clamped[2] = {0, 0};
    lora_tensor_ref *refs = xcalloc(n, sizeof *refs);
    lora_tensor_list(l, refs);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++)
        rc = fit_tensor(o, refs[i].name, refs[i].data, (size_t)refs[i].rows * (size_t)refs[i].cols, o->dtype,
                        clamped, e);
    free(refs);
    if (!rc) note_clamped(note, clamped[0], clamped[1], o->dtype);
    return rc;
}

/* The phase shown on stderr (on a terminal or with --progress): "grpo-export
 * WHAT PATH", counting tensors, or its time alone (peft's few). */
typedef struct {
    progress pg;
    bool open;
    char label[PATH_MAX + 64];
} shown;

static void show_end(shown *s) {
    if (s->open) progress_finish(&s->pg);
    s->open = false;
}

static void show(shown *s, const export_opts *o, const char *what, const char *path, const char *unit) {
    show_end(s);
    snprintf(s->label, sizeof s->label, "%s %s %s", tool_name(), what, path);
    if (unit) progress_start(&s->pg, s->label, unit, 0, o->progress);
    else progress_phase(&s->pg, s->label, o->progress);
    s->open = true;
}

static int export_peft(const export_opts *o, shown *sh, char **note, gerr *e) {
    model base;
    lora l;
    bool has_adapter;
    int rc = model_load_adapter(o->model, &base, &l, &has_adapter, e);
    if (rc) return rc;
    if (!has_adapter) {
        model_free(&base);
        return gerr_set(e, EX_DATAERR,
                        "%s: --format peft needs an adapter checkpoint (a directory with adapter_config.json); this "
                        "model has full weights: use --format hf or gguf",
                        o->model);
    }
    char *name = NULL;
    if (!(rc = peft_base_name(o, &base, l.base, &name, note, e))) {
        free(l.base);
        l.base = name;
        rc = fit_adapter(o, &l, note, e);
    }
    st_dtype sd = o->dtype == EXPORT_F32 ? ST_F32 : o->dtype == EXPORT_F16 ? ST_F16 : ST_BF16;
    ckptdir c = {0};
    if (!rc) show(sh, o, "writing", o->out, NULL);
    if (!rc && !(rc = ckptdir_begin(&c, o->out, e))) {
        if ((rc = lora_save_dtype(&l, c.tmp_dir, sd, e))) ckptdir_fail(&c, e);
        else rc = ckptdir_commit(&c, e);
    }
    if (rc) free(*note), *note = NULL;
    lora_free(&l);
    model_free(&base);
    return rc;
}

/* Where the tokenizer comes from: the model itself, or the base of an
 * adapter directory that carries no tokenizer. */
static int text_source(const char *path, char **out, gerr *e) {
    *out = NULL;
    if (lora_is_adapter_dir(path)) {
        char *tok = xmalloc(strlen(path) + sizeof "/tokenizer.json");
        strcpy(tok, path);
        strcat(tok, "/tokenizer.json");
        bool own = access(tok, F_OK) == 0;
        free(tok);
        if (!own) return lora_adapter_base_path(path, out, e);
    }
    *out = xstrdup(path);
    return 0;
}

/* hf's text files, from the directory they come from (text_source, as for
 * gguf): tokenizer.json there, and the text side they make (tokenizer,
 * tokenizer_config.json, generation_config.json) loaded as every tool loads
 * it (a GGUF source's is built from its metadata). EX_NOINPUT or EX_DATAERR
 * naming the file, before anything is written. */
static int check_tokenizer(const char *model, gerr *e) {
    char *source;
    gerr ignored = {0};
    if (text_source(model, &source, &ignored)) return 0; /* the base is missing: model_load says so */
    struct stat st;
    bool dir = !stat(source, &st) && S_ISDIR(st.st_mode);
    strbuf path = {0};
    sb_printf(&path, "%s/tokenizer.json", source);
    int rc = 0;
    if (dir && stat(path.data, &st))
        rc = gerr_set(e, EX_NOINPUT, "%s: cannot open: %s (--format hf writes the model's tokenizer)", path.data,
                      strerror(errno));
    else if (dir) {
        model_text mt;
        rc = model_text_load(source, &mt, e);
        if (!rc) model_text_free(&mt);
    }
    free(source);
    sb_free(&path);
    return rc;
}

int export_run(const export_opts *o, char **note, gerr *e) {
    *note = NULL;
    if (o->format != EXPORT_GGUF && !hf_torch_dtype(o->dtype))
        return gerr_set(e, EX_USAGE, "--dtype %s: not a Hugging Face dtype; --format %s takes f32, f16 or bf16",
                        export_dtype_name(o->dtype), o->format == EXPORT_HF ? "hf" : "peft");
    if (o->base_model && o->format != EXPORT_PEFT)
        return gerr_set(e, EX_USAGE, "--base-model: only --format peft names a base model");
    shown sh = {0};
    show(&sh, o, "loading", o->model, NULL);
    if (o->format == EXPORT_PEFT) {
        int rc = export_peft(o, &sh, note, e);
        show_end(&sh);
        return rc;
    }
    model m;
    int rc = o->format == EXPORT_HF ? check_tokenizer(o->model, e) : 0;
    if (!rc) rc = model_load(&m, o->model, e);
    if (rc) {
        show_end(&sh);
        return rc;
    }
    const model_config *c = &m.cfg;
    if (o->format == EXPORT_GGUF && c->arch != ARCH_GPT_OSS &&
        (c->rope_yarn || c->sliding_window > 0 || c->attn_sinks || c->attn_o_bias))
        rc = gerr_set(e, EX_DATAERR,
                      "%s: --format gguf does not write YaRN RoPE, sliding windows or attention sinks (but gpt-oss's)",
                      o->model);
    if (!rc && o->format == EXPORT_GGUF) note_yarn_truncated(note, &m);
    bool hf_mx = !rc && o->format == EXPORT_HF && hf_keeps_mxfp4(o, &m, note);
    if (!rc && !(rc = fit_model(o, &m, hf_mx, note, e))) {
        show(&sh, o, "writing", o->out, "tensors");
        if (o->format == EXPORT_HF) {
            rc = hf_export_dir(o->out, &m, o->model, o->dtype, hf_mx, &sh.pg, e);
        } else {
            char *source;
            if (!(rc = text_source(o->model, &source, e))) {
                rc = gguf_export_progress(o->out, &m, source, o->dtype, &sh.pg, e);
                free(source);
            }
        }
    }
    show_end(&sh);
    if (rc) free(*note), *note = NULL;
    model_free(&m);
    return rc;
}
