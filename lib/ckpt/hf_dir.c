/* model.safetensors of an export, and the whole Hugging Face directory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../io/ckptdir.h"
#include "../formats/safetensors.h"
#include "hf_dir.h"

const char *hf_torch_dtype(export_dtype d) {
    switch (d) {
    case EXPORT_F32: return "float32";
    case EXPORT_F16: return "float16";
    case EXPORT_BF16: return "bfloat16";
    case EXPORT_Q8_0: return NULL;
    }
    return NULL;
}

static int cmp_ref(const void *a, const void *b) {
    return strcmp(((const model_tensor_ref *)a)->hf, ((const model_tensor_ref *)b)->hf);
}

/* gpt_oss's stacked expert tensor of refs [0, n) (all of one hf name, in
 * any order), the inverse of load_hf.c's load_oss_expert: gate_up_proj
 * [E, dim, 2I] (x W; gate the even columns, up the odd), down_proj
 * [E, I, dim], gate_up_proj_bias [E, 2I], down_proj_bias [E, dim]. */
static float *oss_stack(const model *m, const model_tensor_ref *refs, size_t n, int *ndim, int64_t shape[3]) {
    const model_config *c = &m->cfg;
    bool fused = refs[0].param != P_EXP_DOWN && refs[0].param != P_EXP_DOWN_B, matrix = refs[0].cols > 0;
    int64_t E = c->n_experts, I = c->moe_hidden_dim, d = c->dim;
    int64_t a = fused ? d : I, b = fused ? 2 * I : d, per = matrix ? a * b : b;
    *ndim = matrix ? 3 : 2;
    shape[0] = E, shape[1] = matrix ? a : b, shape[2] = b;
    float *t = xcalloc((size_t)(E * per), sizeof *t);
    for (size_t k = 0; k < n; k++) {
        const model_tensor_ref *r = &refs[k];
        int odd = r->param == P_EXP_UP || r->param == P_EXP_UP_B;
        float *x = t + r->expert * per;
        for (int64_t i = 0; i < r->rows; i++) {
            int64_t col = fused ? 2 * i + odd : i;
            if (!matrix) x[col] = r->dst[i];
            for (int64_t j = 0; matrix && j < r->cols; j++) x[j * b + col] = r->dst[i * r->cols + j];
        }
    }
    return t;
}

int hf_write_weights_progress(const char *out_path, const model *m, export_dtype dtype, progress *pg, gerr *e) {
    if (!hf_torch_dtype(dtype))
        return gerr_set(e, EX_USAGE, "dtype %s is not a Hugging Face dtype (f32, f16 or bf16)", export_dtype_name(dtype));
    size_t n = model_tensor_list(m, NULL), n_stacked = 0;
    model_tensor_ref *refs = xcalloc(n, sizeof *refs);
    float **stacked = xcalloc(n, sizeof *stacked); /* kept until written: float32 is written by pointer */
    model_tensor_list(m, refs);
    qsort(refs, n, sizeof *refs, cmp_ref); /* the order the safetensors package writes */
    st_dtype sd = dtype == EXPORT_F32 ? ST_F32 : dtype == EXPORT_F16 ? ST_F16 : ST_BF16;
    st_writer w;
    st_writer_init(&w);
    w.pg = pg;
    int rc = st_writer_set_meta(&w, "format", "pt", e);
    for (size_t i = 0, next; i < n && !rc; i = next) {
        const model_tensor_ref *r = &refs[i];
        for (next = i + 1; next < n && !strcmp(refs[next].hf, r->hf);) next++;
        if (m->cfg.arch == ARCH_GPT_OSS && r->expert >= 0) { /* refs stacked into one tensor of the file */
            int ndim;
            int64_t shape[3];
            float *t = stacked[n_stacked++] = oss_stack(m, r, next - i, &ndim, shape);
            rc = st_writer_add_f32(&w, r->hf, sd, ndim, shape, t, e);
            continue;
        }
        int64_t shape[2] = {r->rows, r->cols};
        rc = st_writer_add_f32(&w, r->hf, sd, r->cols ? 2 : 1, shape, r->dst, e);
    }
    if (pg) pg->total = (int64_t)w.n_tensors;
    if (!rc) rc = st_write(&w, out_path, e);
    st_writer_free(&w);
    for (size_t i = 0; i < n_stacked; i++) free(stacked[i]);
    free(stacked);
    free(refs);
    return rc;
}

int hf_write_weights(const char *out_path, const model *m, export_dtype dtype, gerr *e) {
    return hf_write_weights_progress(out_path, m, dtype, NULL, e);
}

static int write_in(ckptdir *c, const char *file, const model *m, const char *source, export_dtype dtype,
                    progress *pg, gerr *e) {
    char *path = ckptdir_path(c, file, e);
    if (!path) return e->code;
    int rc = !strcmp(file, "config.json") ? hf_write_config(path, m, source, hf_torch_dtype(dtype), e)
                                          : hf_write_weights_progress(path, m, dtype, pg, e);
    free(path);
    return rc;
}

int hf_export_dir(const char *out_dir, const model *m, const char *source, export_dtype dtype, progress *pg,
                  gerr *e) {
    if (!hf_torch_dtype(dtype))
        return gerr_set(e, EX_USAGE, "dtype %s is not a Hugging Face dtype (f32, f16 or bf16)", export_dtype_name(dtype));
    ckptdir c = {0};
    int rc = ckptdir_begin(&c, out_dir, e);
    if (rc) return rc;
    if ((rc = write_in(&c, "config.json", m, source, dtype, NULL, e)) ||
        (rc = hf_write_text_files(c.tmp_dir, source, e)) ||
        (rc = write_in(&c, "model.safetensors", m, source, dtype, pg, e))) {
        ckptdir_fail(&c, e);
        return rc;
    }
    return ckptdir_commit(&c, e);
}
