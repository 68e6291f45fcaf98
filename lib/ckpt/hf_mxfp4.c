/* gpt-oss's MXFP4 experts from Hugging Face safetensors (hf_mxfp4.h). */
#include "hf_mxfp4.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ops/ops.h"
#include "../ops/packed_mxfp4.h"
#include "oss_experts.h"

/* "[a, b, ...]" of t's shape into buf. */
static const char *shape_text(const st_tensor *t, char *buf, size_t size) {
    size_t at = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < t->ndim && at < size; d++)
        at += (size_t)snprintf(buf + at, size - at, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    if (at < size) snprintf(buf + at, size - at, "]");
    return buf;
}

/* t is uint8 of shape dims[ndim], or EX_DATAERR naming it. */
static int check_shape(const char *file, const char *name, const char *suffix, const st_tensor *t, int ndim,
                       const int64_t *dims, gerr *e) {
    bool ok = t->dtype == ST_U8 && t->ndim == ndim;
    for (int d = 0; ok && d < ndim; d++) ok = t->shape[d] == dims[d];
    if (ok) return 0;
    char want[96] = "[", got[96];
    for (int d = 0; d < ndim; d++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", d ? ", " : "", (long long)dims[d]);
    snprintf(want + strlen(want), sizeof want - strlen(want), "]");
    return gerr_set(e, EX_DATAERR, "%s: tensor %s%s: expected U8 of shape %s (MXFP4), got %s of shape %s", file, name,
                    suffix, want, st_dtype_name(t->dtype), shape_text(t, got, sizeof got));
}

/* Every value of n rows of nb blocks finite, and no NaN scale; else
 * EX_DATAERR naming the tensor, the expert, the row and the block. */
static int check_values(const hf_mxfp4_pair *t, const model_tensor_ref *r, const unsigned char *codes,
                        const unsigned char *scales, int64_t n, int64_t nb, gerr *e) {
    for (int64_t i = 0; i < n * nb; i++) {
        const char *why = mx4w_block_fault(scales[i], codes + i * MX4W_HF_BYTES);
        if (why)
            return gerr_set(e, EX_DATAERR, "%s: tensor %s_scales: expert %d, row %lld, block %lld: scale byte %d %s",
                            t->scales_file, r->hf, r->expert, (long long)(i / nb), (long long)(i % nb), scales[i], why);
    }
    return 0;
}

/* Code q under scale d (in halves) as transformers reads it: FP4_VALUES
 * has -0 for code 8, where ggml and the packed kernels have +0. */
static float hf_value(unsigned q, float d) { return q == 8 ? -0.0f : (float)MX4W_HALF_UNITS[q] * d; }

int hf_mxfp4_expert(const model_config *c, const model_tensor_ref *r, const hf_mxfp4_pair *t, bool packed, gerr *e) {
    oss_layout L = oss_expert_layout(c, r);
    int64_t E = L.experts, N = L.out, K = L.in, n = r->rows;
    if (K % MX4W_K_BLOCK)
        return gerr_set(e, EX_DATAERR, "%s: tensor %s_blocks: MXFP4 needs an input width that is a multiple of 32, got %lld",
                        t->blocks_file, r->hf, (long long)K);
    int64_t nb = K / MX4W_K_BLOCK;
    const int64_t bdims[4] = {E, N, nb, MX4W_HF_BYTES}, sdims[3] = {E, N, nb};
    int rc = check_shape(t->blocks_file, r->hf, "_blocks", t->blocks, 4, bdims, e);
    if (!rc) rc = check_shape(t->scales_file, r->hf, "_scales", t->scales, 3, sdims, e);
    if (rc) return rc;
    /* the expert's rows: down_proj's all, gate's the even rows of gate_up_proj, up's the odd */
    size_t row_codes = (size_t)nb * MX4W_HF_BYTES;
    unsigned char *codes = xmalloc((size_t)n * row_codes), *scales = xmalloc((size_t)n * (size_t)nb);
    for (int64_t i = 0; i < n; i++) {
        int64_t src = (int64_t)r->expert * N + L.first + L.step * i;
        memcpy(codes + (size_t)i * row_codes, (const unsigned char *)t->blocks->data + (size_t)src * row_codes, row_codes);
        memcpy(scales + (size_t)i * nb, (const unsigned char *)t->scales->data + (size_t)src * nb, (size_t)nb);
    }
    rc = check_values(t, r, codes, scales, n, nb, e);
    if (!rc && packed) {
        weights_pack_blocks(WEIGHTS_MXFP4, r->dst, codes, scales, (int)n, (int)K);
    } else if (!rc) {
        for (int64_t i = 0; i < n * nb; i++) {
            float d = mx4w_scale(scales[i]);
            for (int j = 0; j < MX4W_HF_BYTES; j++) {
                unsigned char b = codes[i * MX4W_HF_BYTES + j];
                r->dst[i * MX4W_K_BLOCK + 2 * j] = hf_value(b & 15, d);
                r->dst[i * MX4W_K_BLOCK + 2 * j + 1] = hf_value(b >> 4, d);
            }
        }
    }
    free(codes), free(scales);
    return rc;
}
