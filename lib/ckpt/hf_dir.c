/* model.safetensors of an export (gpt-oss's experts stacked, as MXFP4
 * blocks where hf_experts_mxfp4 says), and the whole Hugging Face directory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../io/ckptdir.h"
#include "../formats/gguf_quant.h"
#include "../formats/safetensors.h"
#include "../ops/packed_mxfp4.h"
#include "hf_dir.h"
#include "oss_experts.h"

const char *hf_torch_dtype(export_dtype d) {
    switch (d) {
    case EXPORT_F32: return "float32";
    case EXPORT_F16: return "float16";
    case EXPORT_BF16: return "bfloat16";
    case EXPORT_Q8_0:
    case EXPORT_Q4_K: return NULL;
    }
    return NULL;
}

static int cmp_ref(const void *a, const void *b) {
    return strcmp(((const model_tensor_ref *)a)->hf, ((const model_tensor_ref *)b)->hf);
}

/* gpt_oss's stacked expert tensor of refs [0, n) (all of one hf name, in
 * any order) in its bf16 layout (oss_experts.h): gate_up_proj [E, dim, 2I],
 * down_proj [E, I, dim], gate_up_proj_bias [E, 2I], down_proj_bias [E, dim]. */
static float *oss_stack(const model *m, const model_tensor_ref *refs, size_t n, int *ndim, int64_t shape[3]) {
    oss_layout L = oss_expert_layout(&m->cfg, &refs[0]);
    bool matrix = L.in > 0;
    int64_t per = matrix ? L.in * L.out : L.out;
    *ndim = matrix ? 3 : 2;
    shape[0] = L.experts, shape[1] = matrix ? L.in : L.out, shape[2] = L.out;
    float *t = xcalloc((size_t)(L.experts * per), sizeof *t);
    for (size_t k = 0; k < n; k++) {
        const model_tensor_ref *r = &refs[k];
        float *x = t + r->expert * per;
        oss_layout R = oss_expert_layout(&m->cfg, r); /* gate's and up's first differ */
        for (int64_t i = 0; i < r->rows; i++) {
            int64_t col = R.first + R.step * i;
            if (!matrix) x[col] = r->dst[i];
            for (int64_t j = 0; matrix && j < r->cols; j++) x[j * L.out + col] = r->dst[i * r->cols + j];
        }
    }
    return t;
}

/* The same refs' matrices (MXFP4's values: hf_experts_mxfp4) as gpt-oss's
 * own pair, added to w: NAME_blocks uint8 [E, N, K/32, 16] and NAME_scales
 * uint8 [E, N, K/32] (hf_mxfp4.h), into buffers kept[0] and kept[1]. */
static int oss_add_mxfp4(st_writer *w, const model *m, const model_tensor_ref *refs, size_t n, void *kept[2],
                         gerr *e) {
    oss_layout L = oss_expert_layout(&m->cfg, &refs[0]);
    int64_t nb = L.in / MX4W_K_BLOCK, rows = L.experts * L.out;
    unsigned char *blocks = kept[0] = xcalloc((size_t)(rows * nb), MX4W_HF_BYTES);
    unsigned char *scales = kept[1] = xcalloc((size_t)(rows * nb), 1);
    for (size_t k = 0; k < n; k++) {
        const model_tensor_ref *r = &refs[k];
        oss_layout R = oss_expert_layout(&m->cfg, r); /* gate's and up's first differ */
        for (int64_t i = 0; i < r->rows; i++) {
            int64_t row = r->expert * L.out + R.first + R.step * i;
            if (!hf_mxfp4_exact(r->dst + i * r->cols, blocks + row * nb * MX4W_HF_BYTES, scales + row * nb,
                                (size_t)r->cols))
                return gerr_set(e, EX_SOFTWARE, "%s: expert %d, row %lld: not MXFP4's values", r->hf, r->expert,
                                (long long)i);
        }
    }
    char name[128];
    const int64_t bshape[4] = {L.experts, L.out, nb, MX4W_HF_BYTES}, sshape[3] = {L.experts, L.out, nb};
    snprintf(name, sizeof name, "%s_blocks", refs[0].hf);
    int rc = st_writer_add(w, name, ST_U8, 4, bshape, blocks, e);
    snprintf(name, sizeof name, "%s_scales", refs[0].hf);
    if (!rc) rc = st_writer_add(w, name, ST_U8, 3, sshape, scales, e);
    return rc;
}

bool hf_experts_mxfp4(const model *m, export_dtype dtype, int *layer) {
    *layer = -1;
    if (m->cfg.arch != ARCH_GPT_OSS || dtype == EXPORT_F32) return false;
    size_t n = model_tensor_list(m, NULL);
    model_tensor_ref *refs = xcalloc(n, sizeof *refs);
    model_tensor_list(m, refs);
    for (size_t i = 0; i < n && *layer < 0; i++)
        if (refs[i].expert == 0 && refs[i].cols && !experts_mxfp4_exact(m, &refs[i])) *layer = refs[i].layer;
    free(refs);
    return *layer < 0;
}

int hf_write_weights_progress(const char *out_path, const model *m, export_dtype dtype, bool mxfp4, progress *pg,
                              gerr *e) {
    if (!hf_torch_dtype(dtype))
        return gerr_set(e, EX_USAGE, "dtype %s is not a Hugging Face dtype (f32, f16 or bf16)", export_dtype_name(dtype));
    size_t n = model_tensor_list(m, NULL), n_kept = 0;
    model_tensor_ref *refs = xcalloc(n, sizeof *refs);
    void **kept = xcalloc(2 * n, sizeof *kept); /* kept until written: float32 is written by pointer */
    model_tensor_list(m, refs);
    qsort(refs, n, sizeof *refs, cmp_ref);
    st_dtype sd = dtype == EXPORT_F32 ? ST_F32 : dtype == EXPORT_F16 ? ST_F16 : ST_BF16;
    st_writer w;
    st_writer_init(&w);
    w.pg = pg;
    int rc = st_writer_set_meta(&w, "format", "pt", e);
    /* the safetensors package's order: the float tensors by name, then the uint8 ones */
    for (int pass = 0; pass < 2 && !rc; pass++)
        for (size_t i = 0, next; i < n && !rc; i = next) {
            const model_tensor_ref *r = &refs[i];
            for (next = i + 1; next < n && !strcmp(refs[next].hf, r->hf);) next++;
            bool stacked = m->cfg.arch == ARCH_GPT_OSS && r->expert >= 0, blocks = stacked && mxfp4 && r->cols;
            if (blocks != (pass == 1)) continue;
            if (blocks) {
                rc = oss_add_mxfp4(&w, m, r, next - i, kept + n_kept, e);
                n_kept += 2;
            } else if (stacked) { /* refs stacked into one tensor of the file */
                int ndim;
                int64_t shape[3];
                float *t = kept[n_kept++] = oss_stack(m, r, next - i, &ndim, shape);
                rc = st_writer_add_f32(&w, r->hf, sd, ndim, shape, t, e);
            } else {
                int64_t shape[2] = {r->rows, r->cols};
                rc = st_writer_add_f32(&w, r->hf, sd, r->cols ? 2 : 1, shape, r->dst, e);
            }
        }
    if (pg) pg->total = (int64_t)w.n_tensors;
    if (!rc) rc = st_write(&w, out_path, e);
    st_writer_free(&w);
    for (size_t i = 0; i < n_kept; i++) free(kept[i]);
    free(kept);
    free(refs);
    return rc;
}

int hf_write_weights(const char *out_path, const model *m, export_dtype dtype, gerr *e) {
    return hf_write_weights_progress(out_path, m, dtype, false, NULL, e);
}

static int write_in(ckptdir *c, const char *file, const model *m, const char *source, export_dtype dtype,
                    bool mxfp4, progress *pg, gerr *e) {
    char *path = ckptdir_path(c, file, e);
    if (!path) return e->code;
    int rc = !strcmp(file, "config.json") ? hf_write_config(path, m, source, hf_torch_dtype(dtype), mxfp4, e)
                                          : hf_write_weights_progress(path, m, dtype, mxfp4, pg, e);
    free(path);
    return rc;
}

int hf_export_dir(const char *out_dir, const model *m, const char *source, export_dtype dtype, bool mxfp4,
                  progress *pg, gerr *e) {
    if (!hf_torch_dtype(dtype))
        return gerr_set(e, EX_USAGE, "dtype %s is not a Hugging Face dtype (f32, f16 or bf16)", export_dtype_name(dtype));
    ckptdir c = {0};
    int rc = ckptdir_begin(&c, out_dir, e);
    if (rc) return rc;
    if ((rc = write_in(&c, "config.json", m, source, dtype, mxfp4, NULL, e)) ||
        (rc = hf_write_text_files(c.tmp_dir, source, e)) ||
        (rc = write_in(&c, "model.safetensors", m, source, dtype, mxfp4, pg, e))) {
        ckptdir_fail(&c, e);
        return rc;
    }
    return ckptdir_commit(&c, e);
}
