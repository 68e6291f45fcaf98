/* LoRA adapter directories in PEFT's layout (see adapter_dir.h):
 * adapter_model.safetensors and adapter_config.json, written and read back,
 * and the base model an adapter names. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../io/mapped.h"
#include "../io/outstream.h"
#include "../util/strbuf.h"
#include "adapter_dir.h"
#include "ckpt_paths.h"

static const char ADAPTER_CONFIG[] = "adapter_config.json";
static const char ADAPTER_WEIGHTS[] = "adapter_model.safetensors";

static char *join(const char *dir, const char *file) {
    strbuf b = {0};
    sb_printf(&b, "%s/%s", dir, file);
    return b.data;
}

static bool is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* ---- writing ---------------------------------------------------------------------- */

/* A factor, its place in lora_tensor_list, and the place of the first
 * factor that lies in the same PEFT tensor. */
typedef struct {
    lora_tensor_ref r;
    size_t pos, first;
} placed_ref;

static int cmp_peft_pos(const void *a, const void *b) {
    const placed_ref *x = a, *y = b;
    int c = strcmp(x->r.peft, y->r.peft);
    return c ? c : (x->pos > y->pos) - (x->pos < y->pos);
}

static int cmp_first_pos(const void *a, const void *b) {
    const placed_ref *x = a, *y = b;
    return x->first != y->first ? (x->first > y->first) - (x->first < y->first) : (x->pos > y->pos) - (x->pos < y->pos);
}

/* The factors of l, *n of them, the pieces of each PEFT tensor side by
 * side: the tensors in order of their names (by_name), or of their first
 * piece in lora_tensor_list (the model's order: what a reader reports
 * first). */
static lora_tensor_ref *peft_refs(const lora *l, size_t *n, bool by_name) {
    *n = lora_tensor_list(l, NULL);
    lora_tensor_ref *refs = xcalloc(*n ? *n : 1, sizeof *refs);
    placed_ref *p = xcalloc(*n ? *n : 1, sizeof *p);
    lora_tensor_list(l, refs);
    for (size_t i = 0; i < *n; i++) p[i].r = refs[i], p[i].pos = i;
    qsort(p, *n, sizeof *p, cmp_peft_pos);
    for (size_t i = 0; i < *n; i++) p[i].first = i && !strcmp(p[i].r.peft, p[i - 1].r.peft) ? p[i - 1].first : p[i].pos;
    if (!by_name) qsort(p, *n, sizeof *p, cmp_first_pos);
    for (size_t i = 0; i < *n; i++) refs[i] = p[i].r;
    free(p);
    return refs;
}

/* The end of the run of refs from i that make one PEFT tensor. */
static size_t peft_end(const lora_tensor_ref *refs, size_t n, size_t i) {
    size_t j = i + 1;
    while (j < n && !strcmp(refs[j].peft, refs[i].peft)) j++;
    return j;
}

/* The JSON list of names[0..n) sorted (PEFT keeps target_modules as a set:
 * sorted names make the file reproducible), or the order given. */
static void json_names(strbuf *b, const char **names, int n, bool sort) {
    for (int i = 1; sort && i < n; i++)
        for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            const char *t = names[j];
            names[j] = names[j - 1], names[j - 1] = t;
        }
    sb_putc(b, '[');
    for (int i = 0; i < n; i++) sb_printf(b, "%s\n    \"%s\"", i ? "," : "", names[i]);
    sb_puts(b, n ? "\n  ]" : "]");
}

static void config_json(const lora *l, strbuf *b) {
    sb_puts(b, "{\n  \"alpha_pattern\": {},\n  \"auto_mapping\": null,\n  \"base_model_name_or_path\": ");
    if (l->base) sb_json_string(b, l->base, strlen(l->base));
    else sb_puts(b, "null");
    sb_puts(b, ",\n  \"bias\": \"none\",\n  \"fan_in_fan_out\": false,\n  \"inference_mode\": true,\n"
               "  \"init_lora_weights\": true,\n  \"layers_pattern\": null,\n  \"layers_to_transform\": null,\n"
               "  \"lora_alpha\": ");
    /* PEFT's lora_alpha is an int unless given as a float */
    if (l->alpha == floor(l->alpha) && l->alpha < 1e15) sb_printf(b, "%.0f", l->alpha);
    else sb_json_number(b, l->alpha);
    sb_puts(b, ",\n  \"lora_dropout\": ");
    sb_json_pyfloat(b, l->dropout, false);
    sb_printf(b, ",\n  \"modules_to_save\": null,\n  \"peft_type\": \"LORA\",\n  \"r\": %d,\n"
                 "  \"rank_pattern\": {},\n  \"revision\": null,\n  \"target_modules\": ",
              l->r);
    /* a stacked adapter's gate, up and down are target_parameters (gate_up_proj once, first) */
    const char *modules[LORA_N_TARGETS], *params[LORA_N_TARGETS];
    int n = 0, np = 0;
    for (int t = 0; t < LORA_N_TARGETS; t++) {
        if (!(l->targets & (1u << t))) continue;
        const char *p = l->stacked ? lora_target_parameter(t) : NULL;
        if (!p) modules[n++] = lora_target_module(t);
        else if (!np || strcmp(params[np - 1], p)) params[np++] = p;
    }
    json_names(b, modules, n, true);
    if (np) {
        sb_puts(b, ",\n  \"target_parameters\": ");
        json_names(b, params, np, false);
    }
    sb_printf(b, ",\n  \"task_type\": \"CAUSAL_LM\",\n  \"use_dora\": false,\n  \"use_rslora\": %s\n}",
              l->rslora ? "true" : "false");
}

int lora_save_dtype(const lora *l, const char *dir, st_dtype dtype, gerr *e) {
    if (dtype != ST_F32 && dtype != ST_F16 && dtype != ST_BF16)
        return gerr_set(e, EX_SOFTWARE, "lora_save: dtype %s is not F32, F16 or BF16", st_dtype_name(dtype));
    size_t n;
    lora_tensor_ref *refs = peft_refs(l, &n, true);
    float **pieced = xcalloc(n ? n : 1, sizeof *pieced); /* the tensors put together here, kept until written */
    st_writer w;
    st_writer_init(&w);
    int rc = st_writer_set_meta(&w, "format", "pt", e);
    for (size_t i = 0, end; i < n && !rc; i = end) {
        const lora_tensor_ref *r = &refs[i];
        end = peft_end(refs, n, i);
        const float *data = r->data;
        if (end > i + 1 || !lora_ref_whole(r)) {
            pieced[i] = xcalloc((size_t)(r->peft_rows * r->peft_cols), sizeof(float));
            for (size_t j = i; j < end; j++) lora_ref_to_peft(&refs[j], l->memory, pieced[i]);
            data = pieced[i];
        }
        int64_t shape[2] = {r->peft_rows, r->peft_cols};
        rc = st_writer_add_f32(&w, r->peft, dtype, 2, shape, data, e);
    }
    char *path = join(dir, ADAPTER_WEIGHTS);
    if (!rc) rc = st_write(&w, path, e);
    st_writer_free(&w);
    for (size_t i = 0; i < n; i++) free(pieced[i]);
    free(pieced);
    free(refs);
    free(path);
    if (rc) return rc;
    strbuf js = {0};
    config_json(l, &js);
    path = join(dir, ADAPTER_CONFIG);
    rc = write_file_atomic(path, js.data, js.len, e);
    free(path);
    sb_free(&js);
    return rc;
}

int lora_save(const lora *l, const char *dir, gerr *e) { return lora_save_dtype(l, dir, ST_F32, e); }

/* ---- adapter_config.json ------------------------------------------------------------ */

/* What lora_alloc needs, read from the config: the targets from
 * target_modules (modules; all_linear for "all-linear") and from
 * target_parameters (params: gate and up for gate_up_proj, down). */
typedef struct {
    int r;
    double alpha, dropout;
    bool rslora, all_linear;
    unsigned modules, params;
    char *base;
} adapter_cfg;

static bool empty_or_null(const cJSON *v) {
    return !v || cJSON_IsNull(v) || ((cJSON_IsObject(v) || cJSON_IsArray(v)) && !v->child) ||
           (cJSON_IsString(v) && !*v->valuestring);
}

/* Refuses the LoraConfig features that change the math we implement. */
static int check_unsupported(const cJSON *root, const char *path, gerr *e) {
    static const char *const must_be_empty[] = {"modules_to_save", "layers_to_transform", "rank_pattern",
                                                "alpha_pattern",   "layer_replication",   "exclude_modules",
                                                "trainable_token_indices"};
    static const char *const must_be_false[] = {"use_dora", "fan_in_fan_out", "lora_bias", "use_qalora"};
    for (size_t i = 0; i < sizeof must_be_empty / sizeof *must_be_empty; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, must_be_empty[i]);
        if (!empty_or_null(v))
            return gerr_set(e, EX_DATAERR, "%s: \"%s\" is not supported (expected null or empty)", path,
                            must_be_empty[i]);
    }
    for (size_t i = 0; i < sizeof must_be_false / sizeof *must_be_false; i++)
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, must_be_false[i])))
            return gerr_set(e, EX_DATAERR, "%s: \"%s\": true is not supported", path, must_be_false[i]);
    const cJSON *bias = cJSON_GetObjectItemCaseSensitive(root, "bias");
    if (bias && !cJSON_IsNull(bias) && !(cJSON_IsString(bias) && !strcmp(bias->valuestring, "none")))
        return gerr_set(e, EX_DATAERR, "%s: \"bias\": only \"none\" is supported, got %s", path,
                        cJSON_IsString(bias) ? bias->valuestring : "a non-string");
    return 0;
}

/* target_modules into c->modules (c->all_linear); with have_params (a
 * target_parameters list) it may be empty or null. */
static int parse_targets(const cJSON *tm, bool have_params, adapter_cfg *c, const char *path, gerr *e) {
    unsigned *targets = &c->modules;
    *targets = 0;
    if (cJSON_IsString(tm)) {
        /* a string is a regex in PEFT; only its "all-linear" shorthand is ours */
        if (strcmp(tm->valuestring, "all-linear"))
            return gerr_set(e, EX_DATAERR, "%s: target_modules \"%s\": regex targets are not supported (list the modules)",
                            path, tm->valuestring);
        *targets = (1u << LORA_N_TARGETS) - 1;
        c->all_linear = true;
        return 0;
    }
    if (have_params && (!tm || cJSON_IsNull(tm) || (cJSON_IsArray(tm) && !tm->child))) return 0;
    if (!cJSON_IsArray(tm) || !tm->child)
        return gerr_set(e, EX_DATAERR, "%s: target_modules: expected a non-empty list of module names", path);
    const cJSON *it;
    cJSON_ArrayForEach(it, tm) {
        if (!cJSON_IsString(it)) return gerr_set(e, EX_DATAERR, "%s: target_modules: expected strings", path);
        int found = -1;
        for (int t = 0; t < LORA_N_TARGETS; t++)
            if (!strcmp(it->valuestring, lora_target_module(t))) found = t;
        if (found < 0)
            return gerr_set(e, EX_DATAERR,
                            "%s: target module \"%s\" is not supported (q_proj, k_proj, v_proj, o_proj, gate_proj, "
                            "up_proj, down_proj are)",
                            path, it->valuestring);
        *targets |= 1u << found;
    }
    return 0;
}

/* target_parameters (null or a list) into c->params: each entry a name of
 * gpt_oss's stacked experts, whole or its last dot-separated parts (PEFT
 * matches a parameter whose name ends with it), as every layer has them. */
static int parse_parameters(const cJSON *tp, adapter_cfg *c, const char *path, gerr *e) {
    c->params = 0;
    if (!tp || cJSON_IsNull(tp)) return 0;
    if (!cJSON_IsArray(tp)) return gerr_set(e, EX_DATAERR, "%s: target_parameters: expected a list of names", path);
    const cJSON *it;
    cJSON_ArrayForEach(it, tp) {
        if (!cJSON_IsString(it)) return gerr_set(e, EX_DATAERR, "%s: target_parameters: expected strings", path);
        unsigned found = 0;
        for (int t = LORA_GATE; t < LORA_N_TARGETS; t++) {
            const char *full = lora_target_parameter(t);
            size_t n = strlen(it->valuestring), m = strlen(full);
            if (n && n <= m && !strcmp(full + m - n, it->valuestring) && (n == m || full[m - n - 1] == '.'))
                found |= 1u << t;
        }
        if (!found)
            return gerr_set(e, EX_DATAERR,
                            "%s: target_parameters entry \"%s\" is not supported (mlp.experts.gate_up_proj and "
                            "mlp.experts.down_proj, gpt_oss's experts in every layer, are)",
                            path, it->valuestring);
        c->params |= found;
    }
    return 0;
}

/* The targets of c on a model of shape cfg: gpt_oss's gate, up and down are
 * its stacked experts, named by target_parameters only (all-linear leaves
 * them out, as PEFT's finds no nn.Linear there); target_parameters on
 * another model is refused. */
static int resolve_targets(const adapter_cfg *c, const model_config *cfg, const char *path, unsigned *targets,
                           gerr *e) {
    unsigned ffn = 1u << LORA_GATE | 1u << LORA_UP | 1u << LORA_DOWN, modules = c->modules;
    bool oss = cfg->arch == ARCH_GPT_OSS;
    if (oss && c->all_linear) modules &= ~ffn;
    if (oss && (modules & ffn))
        return gerr_set(e, EX_DATAERR,
                        "%s: target_modules: gate_proj, up_proj and down_proj name no module of gpt_oss (its experts "
                        "are the parameters mlp.experts.gate_up_proj and down_proj: target_parameters)",
                        path);
    if (!oss && c->params)
        return gerr_set(e, EX_DATAERR,
                        "%s: target_parameters: supported on gpt_oss's stacked experts only (this model is %s)", path,
                        model_arch_name(cfg->arch));
    *targets = modules | c->params;
    return 0;
}

static int parse_config(const cJSON *root, adapter_cfg *c, const char *path, gerr *e) {
    if (!cJSON_IsObject(root)) return gerr_set(e, EX_DATAERR, "%s: not a JSON object", path);
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(root, "peft_type");
    if (!cJSON_IsString(pt) || strcmp(pt->valuestring, "LORA"))
        return gerr_set(e, EX_DATAERR, "%s: peft_type: expected \"LORA\", got %s", path,
                        cJSON_IsString(pt) ? pt->valuestring : "none");
    int rc = check_unsupported(root, path, e);
    if (rc) return rc;
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(root, "r");
    if (!cJSON_IsNumber(r) || r->valuedouble != floor(r->valuedouble) || r->valuedouble < 1 || r->valuedouble > 1 << 20)
        return gerr_set(e, EX_DATAERR, "%s: \"r\": expected a positive integer", path);
    c->r = (int)r->valuedouble;
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, "lora_alpha");
    c->alpha = 8; /* LoraConfig's default */
    if (a && !cJSON_IsNull(a)) {
        if (!cJSON_IsNumber(a) || !(a->valuedouble > 0) || !isfinite(a->valuedouble))
            return gerr_set(e, EX_DATAERR, "%s: \"lora_alpha\": expected a positive number", path);
        c->alpha = a->valuedouble;
    }
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(root, "lora_dropout");
    c->dropout = 0;
    if (d && !cJSON_IsNull(d)) {
        if (!cJSON_IsNumber(d) || !(d->valuedouble >= 0 && d->valuedouble < 1))
            return gerr_set(e, EX_DATAERR, "%s: \"lora_dropout\": expected a number in [0, 1)", path);
        c->dropout = d->valuedouble;
    }
    c->rslora = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "use_rslora"));
    if ((rc = parse_parameters(cJSON_GetObjectItemCaseSensitive(root, "target_parameters"), c, path, e)) ||
        (rc = parse_targets(cJSON_GetObjectItemCaseSensitive(root, "target_modules"), c->params != 0, c, path, e)))
        return rc;
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(root, "base_model_name_or_path");
    c->base = cJSON_IsString(b) && *b->valuestring ? xstrdup(b->valuestring) : NULL;
    return 0;
}

static int read_config(const char *dir, adapter_cfg *c, gerr *e) {
    memset(c, 0, sizeof *c);
    char *path = join(dir, ADAPTER_CONFIG);
    size_t len;
    char *text = read_regular_file(path, &len, e);
    int rc = text ? 0 : e->code;
    if (text) {
        cJSON *root = cJSON_ParseWithLength(text, len);
        rc = root ? parse_config(root, c, path, e) : gerr_set(e, EX_DATAERR, "%s: not valid JSON", path);
        cJSON_Delete(root);
        free(text);
    }
    free(path);
    return rc;
}

/* ---- adapter_model.safetensors ---------------------------------------------------- */

static void shape_text(char *buf, size_t cap, const int64_t *shape, int ndim) {
    buf[0] = 0;
    for (int d = 0; d < ndim && d < ST_MAX_DIMS; d++)
        snprintf(buf + strlen(buf), cap - strlen(buf), "%s%lld", d ? ", " : "", (long long)shape[d]);
}

/* PEFT's tensor of refs[0] into every ref that lies in it (refs[0 .. n)). */
static int read_tensor(lora *l, const st_file *f, const lora_tensor_ref *refs, size_t n, gerr *e) {
    const lora_tensor_ref *r = &refs[0];
    const st_tensor *t = st_find(f, r->peft);
    if (!t) return gerr_set(e, EX_DATAERR, "%s: tensor %s is missing", f->name, r->peft);
    if (t->ndim != 2 || t->shape[0] != r->peft_rows || t->shape[1] != r->peft_cols) {
        char got[128];
        shape_text(got, sizeof got, t->shape, t->ndim);
        return gerr_set(e, EX_DATAERR, "%s: tensor %s has shape [%s], expected [%lld, %lld]", f->name, r->peft, got,
                        (long long)r->peft_rows, (long long)r->peft_cols);
    }
    if (t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16)
        return gerr_set(e, EX_DATAERR, "%s: tensor %s: dtype %s is not supported (F32, F16, BF16)", f->name, r->peft,
                        st_dtype_name(t->dtype));
    if (n == 1 && lora_ref_whole(r)) return st_tensor_to_f32_finite(f, t, r->data, e);
    float *whole = xmalloc((size_t)(r->peft_rows * r->peft_cols) * sizeof *whole);
    int rc = st_tensor_to_f32_finite(f, t, whole, e);
    for (size_t i = 0; i < n && !rc; i++) lora_ref_from_peft(&refs[i], whole, l->memory);
    free(whole);
    return rc;
}

static int read_factors(lora *l, const st_file *f, gerr *e) {
    size_t n, n_tensors = 0;
    lora_tensor_ref *refs = peft_refs(l, &n, false);
    int rc = 0;
    for (size_t i = 0, end; i < n && !rc; i = end, n_tensors++) {
        end = peft_end(refs, n, i);
        rc = read_tensor(l, f, refs + i, end - i, e);
    }
    /* every tensor was found once, so a count above n_tensors means tensors we would ignore */
    for (size_t i = 0; i < f->n_tensors && !rc && f->n_tensors != n_tensors; i++) {
        bool known = false;
        for (size_t j = 0; j < n && !known; j++) known = !strcmp(f->tensors[i].name, refs[j].peft);
        if (!known)
            rc = gerr_set(e, EX_DATAERR, "%s: tensor %s is not a LoRA factor of the targets in %s", f->name,
                          f->tensors[i].name, ADAPTER_CONFIG);
    }
    free(refs);
    return rc;
}

int lora_load(lora *l, const model_config *cfg, const char *dir, gerr *e) {
    memset(l, 0, sizeof *l);
    adapter_cfg c;
    int rc = read_config(dir, &c, e);
    if (rc) {
        free(c.base);
        return rc;
    }
    char *path = join(dir, ADAPTER_WEIGHTS);
    if (!is_file(path)) {
        char *bin = join(dir, "adapter_model.bin");
        rc = is_file(bin) ? gerr_set(e, EX_DATAERR,
                                     "%s: pickle adapters are not supported; save it with safe_serialization=True", bin)
                          : gerr_set(e, EX_NOINPUT, "%s: no such file", path);
        free(bin);
    }
    unsigned targets = 0;
    char *cfg_path = join(dir, ADAPTER_CONFIG);
    if (!rc) rc = resolve_targets(&c, cfg, cfg_path, &targets, e);
    const char *why = rc ? NULL : lora_targets_refused(cfg, targets);
    if (why) rc = gerr_set(e, EX_DATAERR, "%s: target_parameters: %s", cfg_path, why);
    if (!rc && c.dropout > 0 && (why = lora_dropout_refused(cfg, targets)))
        rc = gerr_set(e, EX_DATAERR, "%s: lora_dropout %g: %s", cfg_path, c.dropout, why);
    free(cfg_path);
    if (!rc) rc = lora_alloc(l, cfg, c.r, c.alpha, c.rslora, c.dropout, targets, c.base, e);
    if (!rc) {
        st_file f;
        if (!(rc = st_open(&f, path, e))) {
            rc = read_factors(l, &f, e);
            st_close(&f);
        }
        if (rc) lora_free(l);
    }
    free(path);
    free(c.base);
    return rc;
}

int lora_adapter_stacked(const char *dir, bool *stacked, gerr *e) {
    adapter_cfg c;
    int rc = read_config(dir, &c, e);
    *stacked = !rc && c.params;
    free(c.base);
    return rc;
}

/* ---- the base model ------------------------------------------------------------------ */

bool lora_is_adapter_dir(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return false;
    const char *files[] = {ADAPTER_CONFIG, "model.safetensors", "model.safetensors.index.json"};
    bool has[3];
    for (int i = 0; i < 3; i++) {
        char *p = join(path, files[i]);
        has[i] = access(p, F_OK) == 0;
        free(p);
    }
    return has[0] && !has[1] && !has[2];
}

int lora_adapter_base_path(const char *dir, char **path, gerr *e) {
    *path = NULL;
    adapter_cfg c;
    char *rel = NULL, *abs = NULL, *cand = NULL;
    int rc = read_config(dir, &c, e);
    char *cfg_path = join(dir, ADAPTER_CONFIG);
    if (!rc && !c.base) rc = gerr_set(e, EX_DATAERR, "%s: base_model_name_or_path is missing", cfg_path);
    if (!rc) rc = ckpt_paths_read(dir, "base_model", &rel, &abs, e);
    if (!rc) {
        ckpt_ref r = {"base model",
                      rel || abs ? "grpo/state.json paths.base_model, adapter_config.json base_model_name_or_path"
                                 : "adapter_config.json base_model_name_or_path; a Hub id must be downloaded and named "
                                   "by path",
                      rel, abs, c.base};
        rc = ckpt_path_resolve(dir, &r, &cand, e);
    }
    if (!rc) {
        char a[PATH_MAX], b[PATH_MAX];
        if (!realpath(cand, a)) rc = gerr_set(e, EX_NOINPUT, "%s: base model %s: %s", cfg_path, cand, strerror(errno));
        else if (realpath(dir, b) && !strcmp(a, b))
            rc = gerr_set(e, EX_DATAERR, "%s: base_model_name_or_path names the adapter directory itself", cfg_path);
    }
    if (rc) free(cand);
    else *path = cand;
    free(rel);
    free(abs);
    free(cfg_path);
    free(c.base);
    return rc;
}
