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

static int cmp_ref_name(const void *a, const void *b) {
    return strcmp(((const lora_tensor_ref *)a)->name, ((const lora_tensor_ref *)b)->name);
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
                 "  \"rank_pattern\": {},\n  \"revision\": null,\n  \"target_modules\": [",
              l->r);
    /* PEFT keeps target_modules as a set; sorted names make the file reproducible */
    const char *names[LORA_N_TARGETS];
    int n = 0;
    for (int t = 0; t < LORA_N_TARGETS; t++)
        if (l->targets & (1u << t)) {
            int i = n++;
            while (i > 0 && strcmp(names[i - 1], lora_target_module(t)) > 0) names[i] = names[i - 1], i--;
            names[i] = lora_target_module(t);
        }
    for (int i = 0; i < n; i++) sb_printf(b, "%s\n    \"%s\"", i ? "," : "", names[i]);
    sb_printf(b, "%s],\n  \"task_type\": \"CAUSAL_LM\",\n  \"use_dora\": false,\n  \"use_rslora\": %s\n}",
              n ? "\n  " : "", l->rslora ? "true" : "false");
}

int lora_save_dtype(const lora *l, const char *dir, st_dtype dtype, gerr *e) {
    if (dtype != ST_F32 && dtype != ST_F16 && dtype != ST_BF16)
        return gerr_set(e, EX_SOFTWARE, "lora_save: dtype %s is not F32, F16 or BF16", st_dtype_name(dtype));
    size_t n = lora_tensor_list(l, NULL);
    lora_tensor_ref *refs = xcalloc(n ? n : 1, sizeof *refs);
    lora_tensor_list(l, refs);
    qsort(refs, n, sizeof *refs, cmp_ref_name);
    st_writer w;
    st_writer_init(&w);
    int rc = st_writer_set_meta(&w, "format", "pt", e);
    for (size_t i = 0; i < n && !rc; i++) {
        const lora_tensor_ref *r = &refs[i];
        int64_t shape[2] = {r->rows, r->cols};
        rc = st_writer_add_f32(&w, r->name, dtype, 2, shape, r->data, e);
    }
    char *path = join(dir, ADAPTER_WEIGHTS);
    if (!rc) rc = st_write(&w, path, e);
    st_writer_free(&w);
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

/* What lora_alloc needs, read from the config. */
typedef struct {
    int r;
    double alpha, dropout;
    bool rslora;
    unsigned targets;
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
                                                "target_parameters", "trainable_token_indices"};
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

static int parse_targets(const cJSON *tm, unsigned *targets, const char *path, gerr *e) {
    *targets = 0;
    if (cJSON_IsString(tm)) {
        /* a string is a regex in PEFT; only its "all-linear" shorthand is ours */
        if (strcmp(tm->valuestring, "all-linear"))
            return gerr_set(e, EX_DATAERR, "%s: target_modules \"%s\": regex targets are not supported (list the modules)",
                            path, tm->valuestring);
        *targets = (1u << LORA_N_TARGETS) - 1;
        return 0;
    }
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
    if ((rc = parse_targets(cJSON_GetObjectItemCaseSensitive(root, "target_modules"), &c->targets, path, e)))
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

static int read_factors(lora *l, const st_file *f, gerr *e) {
    size_t n = lora_tensor_list(l, NULL);
    lora_tensor_ref *refs = xcalloc(n ? n : 1, sizeof *refs);
    lora_tensor_list(l, refs);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        const lora_tensor_ref *r = &refs[i];
        const st_tensor *t = st_find(f, r->name);
        if (!t) {
            rc = gerr_set(e, EX_DATAERR, "%s: tensor %s is missing", f->name, r->name);
        } else if (t->ndim != 2 || t->shape[0] != r->rows || t->shape[1] != r->cols) {
            char got[128];
            shape_text(got, sizeof got, t->shape, t->ndim);
            rc = gerr_set(e, EX_DATAERR, "%s: tensor %s has shape [%s], expected [%lld, %lld]", f->name, r->name, got,
                          (long long)r->rows, (long long)r->cols);
        } else if (t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16) {
            rc = gerr_set(e, EX_DATAERR, "%s: tensor %s: dtype %s is not supported (F32, F16, BF16)", f->name,
                          r->name, st_dtype_name(t->dtype));
        } else {
            rc = st_tensor_to_f32_finite(f, t, r->data, e);
        }
    }
    /* every tensor was found once, so a count above n means tensors we would ignore */
    for (size_t i = 0; i < f->n_tensors && !rc && f->n_tensors != n; i++) {
        bool known = false;
        for (size_t j = 0; j < n && !known; j++) known = !strcmp(f->tensors[i].name, refs[j].name);
        if (!known)
            rc = gerr_set(e, EX_DATAERR, "%s: tensor %s is not a LoRA factor of the target_modules in %s", f->name,
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
    const char *why = rc ? NULL : lora_targets_refused(cfg, c.targets);
    if (why) rc = gerr_set(e, EX_DATAERR, "%s/%s: target_modules: %s", dir, ADAPTER_CONFIG, why);
    if (!rc) rc = lora_alloc(l, cfg, c.r, c.alpha, c.rslora, c.dropout, c.targets, c.base, e);
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
