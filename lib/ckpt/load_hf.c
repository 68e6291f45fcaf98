/* Loading a Hugging Face model directory: config.json, then the weights from
 * model.safetensors or the shards named by model.safetensors.index.json,
 * converted to float32 into the model's one buffer; a mixture's experts one
 * tensor each, or in transformers 5's stacked layout; gpt-oss's stacked,
 * in bf16 or as MXFP4 blocks (hf_mxfp4.h), which a plan may keep packed. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../formats/safetensors.h"
#include "../model/model.h"
#include "../util/bigmem.h"
#include "declared.h"
#include "file_formats.h"
#include "hf_mxfp4.h"
#include "load.h"
#include "oss_experts.h"
#include "../io/mapped.h"

enum { MAX_SHARDS = 256 };

typedef struct {
    st_file files[MAX_SHARDS];
    int n;
} shard_set;

static void shards_close(shard_set *s) {
    for (int i = 0; i < s->n; i++) st_close(&s->files[i]);
    s->n = 0;
}

static int shard_open(shard_set *s, const char *dir, const char *file, gerr *e) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->files[i].name, path)) return 0;
    if (s->n == MAX_SHARDS) return gerr_set(e, EX_DATAERR, "%s: more than %d shards", dir, MAX_SHARDS);
    int rc = st_open(&s->files[s->n], path, e);
    if (!rc) s->n++;
    return rc;
}

/* The shards the index's weight_map names, each opened once. */
static int open_index(shard_set *s, const char *dir, const char *index_path, const char *text, gerr *e) {
    cJSON *root = cJSON_Parse(text);
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    int rc = 0;
    if (!cJSON_IsObject(map)) {
        rc = gerr_set(e, EX_DATAERR, "%s: no \"weight_map\" object", index_path);
    } else {
        const cJSON *el;
        cJSON_ArrayForEach(el, map) {
            if (!cJSON_IsString(el) || strchr(el->valuestring, '/') || !*el->valuestring) {
                rc = gerr_set(e, EX_DATAERR, "%s: weight_map \"%s\": expected a file name in the directory",
                              index_path, el->string);
                break;
            }
            if ((rc = shard_open(s, dir, el->valuestring, e))) break;
        }
    }
    cJSON_Delete(root);
    return rc;
}

static const st_tensor *find(const shard_set *s, const char *name, const st_file **in) {
    for (int i = 0; i < s->n; i++) {
        const st_tensor *t = st_find(&s->files[i], name);
        if (t) {
            *in = &s->files[i];
            return t;
        }
    }
    return NULL;
}

/* transformers 5's own layout of a layer's experts (what save_pretrained
 * writes with save_original_format=False): model.layers.N.mlp.experts.
 * gate_up_proj [E, 2I, dim], each expert's gate rows then its up rows, and
 * experts.down_proj [E, dim, I] (either name may end in .weight). Expert
 * r->expert's slice of it into r->dst; 1 when the layer has no such tensor. */
static int load_fused_expert(const shard_set *s, const model *m, const model_tensor_ref *r, gerr *e) {
    const model_config *c = &m->cfg;
    bool down = r->param == P_EXP_DOWN;
    char name[128];
    const st_file *f = NULL;
    const st_tensor *t = NULL;
    for (int dot = 0; dot < 2 && !t; dot++) {
        snprintf(name, sizeof name, "model.layers.%d.mlp.experts.%s%s", r->layer, down ? "down_proj" : "gate_up_proj",
                 dot ? ".weight" : "");
        t = find(s, name, &f);
    }
    if (!t) return 1;
    int64_t E = c->n_experts, I = c->moe_hidden_dim, d = c->dim;
    int64_t rows = down ? d : 2 * I, cols = down ? I : d;
    if (t->ndim != 3 || t->shape[0] != E || t->shape[1] != rows || t->shape[2] != cols)
        return gerr_set(e, EX_DATAERR, "%s: tensor %s: expected shape [%lld, %lld, %lld]", f->name, name, (long long)E,
                        (long long)rows, (long long)cols);
    if (t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16)
        return gerr_set(e, EX_DATAERR, "%s: tensor %s: dtype %s is not supported (F32, F16, BF16)", f->name, name,
                        st_dtype_name(t->dtype));
    /* the expert's rows, as a tensor of their own */
    int64_t first = (int64_t)r->expert * rows + (r->param == P_EXP_UP ? I : 0), n_rows = down ? d : I;
    st_tensor slice = *t;
    size_t size = st_dtype_size(t->dtype);
    slice.data = (const char *)t->data + (size_t)(first * cols) * size;
    slice.numel = n_rows * cols;
    slice.nbytes = (size_t)slice.numel * size;
    return st_tensor_to_f32_finite(f, &slice, r->dst, e);
}

/* gpt_oss's expert matrix r from its layer's MXFP4 pair (hf_mxfp4.h): 1
 * when the file has no such pair; packed when plan keeps it MXFP4. */
static int load_oss_mxfp4(const shard_set *s, const model *m, const model_tensor_ref *r, pack_plan *plan,
                          bool *verbatim, gerr *e) {
    char name[128];
    const st_file *fb = NULL, *fs = NULL;
    snprintf(name, sizeof name, "%s_blocks", r->hf);
    const st_tensor *blocks = find(s, name, &fb);
    snprintf(name, sizeof name, "%s_scales", r->hf);
    const st_tensor *scales = find(s, name, &fs);
    if (!blocks && !scales) return 1;
    if (!blocks || !scales)
        return gerr_set(e, EX_DATAERR, "%s: tensor %s_%s is missing (MXFP4 takes _blocks and _scales)",
                        (fb ? fb : fs)->name, r->hf, blocks ? "scales" : "blocks");
    bool packed = plan && plan->hold[r->param] == HOLD_PACKED && plan->as[r->param] == WEIGHTS_MXFP4;
    const hf_mxfp4_pair pair = {fb->name, fs->name, blocks, scales};
    int rc = hf_mxfp4_expert(&m->cfg, r, &pair, packed, e);
    *verbatim = !rc && packed;
    return rc;
}

/* gpt_oss's experts (model.c's oss_names): expert r->expert's slice of its
 * layer's stacked tensor (oss_experts.h: gate_up_proj [E, dim, 2I],
 * down_proj [E, I, dim], gate_up_proj_bias [E, 2I], down_proj_bias
 * [E, dim]) into r->dst as our [I, dim], [dim, I] or vector; a matrix
 * stored as MXFP4 blocks through load_oss_mxfp4 (*verbatim when packed). */
static int load_oss_expert(const shard_set *s, const model *m, const model_tensor_ref *r, const char *dir,
                           pack_plan *plan, bool *verbatim, gerr *e) {
    const st_file *f = NULL;
    const st_tensor *t = find(s, r->hf, &f);
    int rc;
    if (!t && r->cols > 0 && (rc = load_oss_mxfp4(s, m, r, plan, verbatim, e)) != 1) return rc;
    if (!t) return gerr_set(e, EX_DATAERR, "%s: tensor %s is missing", dir, r->hf);
    oss_layout L = oss_expert_layout(&m->cfg, r);
    bool matrix = L.in > 0;
    if (t->ndim != (matrix ? 3 : 2) || t->shape[0] != L.experts || t->shape[1] != (matrix ? L.in : L.out) ||
        (matrix && t->shape[2] != L.out)) {
        if (matrix)
            return gerr_set(e, EX_DATAERR, "%s: tensor %s: expected shape [%lld, %lld, %lld]", f->name, r->hf,
                            (long long)L.experts, (long long)L.in, (long long)L.out);
        return gerr_set(e, EX_DATAERR, "%s: tensor %s: expected shape [%lld, %lld]", f->name, r->hf,
                        (long long)L.experts, (long long)L.out);
    }
    if (t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16)
        return gerr_set(e, EX_DATAERR,
                        "%s: tensor %s: dtype %s is not supported (F32, F16, BF16, or MXFP4 as %s_blocks and _scales)",
                        f->name, r->hf, st_dtype_name(t->dtype), r->hf);
    int64_t per = matrix ? L.in * L.out : L.out;
    st_tensor slice = *t;
    size_t size = st_dtype_size(t->dtype);
    slice.data = (const char *)t->data + (size_t)(r->expert * per) * size;
    slice.numel = per;
    slice.nbytes = (size_t)per * size;
    float *tmp = xcalloc((size_t)per, sizeof *tmp);
    rc = st_tensor_to_f32_finite(f, &slice, tmp, e);
    for (int64_t i = 0; !rc && i < r->rows; i++) { /* ours [out, in] from [in, out] */
        int64_t col = L.first + L.step * i;
        for (int64_t j = 0; j < (matrix ? r->cols : 1); j++) r->dst[i * (matrix ? r->cols : 1) + j] = tmp[j * L.out + col];
    }
    free(tmp);
    return rc;
}

/* model_pack_rows' source: rows of a safetensors tensor, checked finite. */
typedef struct {
    const st_file *f;
    const st_tensor *t;
} tensor_rows;

static int fill_rows(void *ctx, int row0, int rows, float *out, gerr *e) {
    const tensor_rows *src = ctx;
    return st_tensor_rows_to_f32_finite(src->f, src->t, row0, rows, out, e);
}

/* Every tensor, as float32 or, where plan (NULL: none) keeps MXFP4 blocks,
 * packed and marked verbatim; a matrix the plan packs as it loads packed
 * from the file's rows (model_pack_rows). */
static int load_tensors(model *m, const shard_set *s, const char *dir, pack_plan *plan, gerr *e) {
    size_t n = model_tensor_list(m, NULL);
    model_tensor_ref *refs = xcalloc(n, sizeof *refs);
    model_tensor_list(m, refs);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        const model_tensor_ref *r = &refs[i];
        if (m->cfg.arch == ARCH_GPT_OSS && r->expert >= 0) {
            bool verbatim = false;
            rc = load_oss_expert(s, m, r, dir, plan, &verbatim, e);
            if (plan) plan->verbatim[i] = verbatim;
            if (!rc && plan) rc = model_pack_loaded(plan, i, r, e);
            continue;
        }
        const st_file *f = NULL;
        const st_tensor *t = find(s, r->hf, &f);
        if (!t && r->expert >= 0 && (rc = load_fused_expert(s, m, r, e)) != 1) {
            if (rc) break;
            if (plan) rc = model_pack_loaded(plan, i, r, e);
            continue;
        }
        if (!t) {
            rc = gerr_set(e, EX_DATAERR, "%s: tensor %s is missing", dir, r->hf);
            break;
        }
        int ndim = r->cols ? 2 : 1;
        if (t->ndim != ndim || t->shape[0] != r->rows || (ndim == 2 && t->shape[1] != r->cols)) {
            char got[128] = "", exp[64];
            for (int d = 0; d < t->ndim && d < 4; d++)
                snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", d ? ", " : "",
                         (long long)t->shape[d]);
            if (ndim == 2) snprintf(exp, sizeof exp, "%lld, %lld", (long long)r->rows, (long long)r->cols);
            else snprintf(exp, sizeof exp, "%lld", (long long)r->rows);
            rc = gerr_set(e, EX_DATAERR, "%s: tensor %s has shape [%s], expected [%s]", f->name, r->hf, got, exp);
            break;
        }
        if (t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16) {
            rc = gerr_set(e, EX_DATAERR, "%s: tensor %s: dtype %s is not supported (F32, F16, BF16)", f->name,
                          r->hf, st_dtype_name(t->dtype));
            break;
        }
        if (plan && model_packs_loaded(plan, i, r)) { /* a chunk of rows at a time, no float32 copy */
            tensor_rows src = {f, t};
            rc = model_pack_rows(plan, i, r, fill_rows, &src, e);
        } else {
            big_will_fill(r->dst, (size_t)t->numel * sizeof *r->dst);
            rc = st_tensor_to_f32_finite(f, t, r->dst, e);
        }
        if (!rc && f->map) map_drop(t->data, t->nbytes); /* the file's pages not held beside the copy */
        if (!rc && plan) rc = model_pack_loaded(plan, i, r, e);
    }
    free(refs);
    return rc;
}

/* A classifier whose config says no label count has as many as score.weight has rows. */
static int labels_from_score(model *m, const shard_set *s, const char *dir, gerr *e) {
    const st_file *f = NULL;
    const st_tensor *t = find(s, "score.weight", &f);
    if (!t) return gerr_set(e, EX_DATAERR, "%s: tensor score.weight is missing", dir);
    if (t->ndim != 2 || t->shape[0] < 1 || t->shape[0] > 1 << 20)
        return gerr_set(e, EX_DATAERR, "%s: tensor score.weight: expected [num_labels, %d]", f->name, m->cfg.dim);
    m->cfg.num_labels = (int)t->shape[0];
    return 0;
}

/* The file load_tensors reads and its model's family. */
typedef struct {
    const shard_set *s;
    bool oss;
} hf_source;

/* The format the directory holds matrix r in (file_formats.h): gpt_oss's
 * experts as MXFP4 blocks (NAME_blocks and NAME_scales, no NAME), BF16
 * tensors as such, anything else float32's. */
static weight_format tensor_format(const model_tensor_ref *r, const void *src) {
    const hf_source *h = src;
    const st_file *f;
    const st_tensor *t = find(h->s, r->hf, &f);
    if (t) return t->dtype == ST_BF16 ? WEIGHTS_BF16 : WEIGHTS_F32;
    char name[128];
    snprintf(name, sizeof name, "%s_blocks", r->hf);
    return h->oss && r->expert >= 0 && find(h->s, name, &f) ? WEIGHTS_MXFP4 : WEIGHTS_F32;
}

/* The directory's shards: those its model.safetensors.index.json names, or
 * model.safetensors. */
static int shards_open_dir(shard_set *s, const char *dir, gerr *e) {
    char index_path[4096];
    snprintf(index_path, sizeof index_path, "%s/model.safetensors.index.json", dir);
    char *index;
    int rc = read_optional_file(index_path, &index, NULL, e);
    if (!rc && index) rc = open_index(s, dir, index_path, index, e);
    else if (!rc) rc = shard_open(s, dir, "model.safetensors", e);
    free(index);
    return rc;
}

int model_hf_format(const char *dir, weight_format *fmt, gerr *e) {
    *fmt = WEIGHTS_F32;
    shard_set *s = xcalloc(1, sizeof *s);
    int rc = shards_open_dir(s, dir, e);
    const st_file *f;
    const st_tensor *t;
    if (rc) {
    } else if (find(s, "model.layers.0.mlp.experts.gate_up_proj_blocks", &f)) {
        *fmt = WEIGHTS_MXFP4;
    } else if ((t = find(s, "model.layers.0.self_attn.q_proj.weight", &f)) && t->dtype == ST_BF16) {
        *fmt = WEIGHTS_BF16;
    }
    shards_close(s);
    free(s);
    return rc;
}

int model_load_hf(model *m, const char *dir, const weight_choice *w, pack_plan *plan, gerr *e) {
    int rc = config_load_hf(&m->cfg, dir, e);
    if (rc) return rc;
    shard_set *s = xcalloc(1, sizeof *s);
    rc = shards_open_dir(s, dir, e);
    if (!rc && m->cfg.seq_cls && m->cfg.num_labels == 0) rc = labels_from_score(m, s, dir, e);
    if (!rc) rc = model_check_declared_st(&m->cfg, s->files, s->n, dir, e);
    if (!rc) rc = model_alloc(m, e);
    bool planned = false;
    if (!rc && w) {
        model_note_file_formats(m, tensor_format, &(hf_source){s, m->cfg.arch == ARCH_GPT_OSS});
        model_plan_packing(m, *w, plan), planned = true;
    }
    if (!rc) rc = model_fits_memory(m, planned ? plan : NULL, e);
    if (!rc) rc = load_tensors(m, s, dir, planned ? plan : NULL, e);
    shards_close(s);
    free(s);
    if (rc && planned) pack_plan_free(plan);
    return rc;
}
