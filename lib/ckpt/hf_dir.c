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

int hf_write_weights_progress(const char *out_path, const model *m, export_dtype dtype, progress *pg, gerr *e) {
    if (!hf_torch_dtype(dtype))
        return gerr_set(e, EX_USAGE, "dtype %s is not a Hugging Face dtype (f32, f16 or bf16)", export_dtype_name(dtype));
    if (m->cfg.arch == ARCH_GPT_OSS) /* its experts' stacked tensors (model.c's oss_names) are read, not yet written */
        return gerr_set(e, EX_DATAERR, "%s: writing gpt_oss weights (stacked experts) is not supported", out_path);
    size_t n = model_tensor_list(m, NULL);
    model_tensor_ref *refs = xcalloc(n, sizeof *refs);
    model_tensor_list(m, refs);
    qsort(refs, n, sizeof *refs, cmp_ref); /* the order the safetensors package writes */
    st_dtype sd = dtype == EXPORT_F32 ? ST_F32 : dtype == EXPORT_F16 ? ST_F16 : ST_BF16;
    st_writer w;
    st_writer_init(&w);
    w.pg = pg;
    if (pg) pg->total = (int64_t)n;
    int rc = st_writer_set_meta(&w, "format", "pt", e);
    for (size_t i = 0; i < n && !rc; i++) {
        const model_tensor_ref *r = &refs[i];
        int64_t shape[2] = {r->rows, r->cols};
        rc = st_writer_add_f32(&w, r->hf, sd, r->cols ? 2 : 1, shape, r->dst, e);
    }
    if (!rc) rc = st_write(&w, out_path, e);
    st_writer_free(&w);
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
