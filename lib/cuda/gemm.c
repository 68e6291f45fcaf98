/* Matrix products on the device. The model's y = x W^T goes through
 * cuBLASLt with W in bf16 (uploaded once) and x rounded to bf16, fp32
 * accumulation and fp32 output; the general fp32 product (LoRA's factors)
 * through cublasSgemm. Row-major [a, b] is column-major [b, a], so
 * y[n, out] = x[n, in] W[out, in]^T is, column-major, y^T = W^T x^T with W
 * seen as [in, out]: op(A) = transpose, A = W (ld in), B = x (ld in). */
#include "gemm.h"

#include <stdint.h>
#include <string.h>

#include "kernels.h"

/* The largest power of two (up to 256) dividing the address: cuBLASLt's
 * heuristic assumes 256-byte aligned operands unless told, and an algorithm
 * chosen under that assumption refuses (INVALID_VALUE) a pointer into the
 * middle of a row of an odd-sized matrix, as a tiny model's vocabulary gives. */
static unsigned ptr_align(const void *p) {
    uintptr_t a = (uintptr_t)p;
    unsigned r = 256;
    while (r > 1 && a % r) r /= 2;
    return r;
}

/* The alignment all three operands of a product share. */
static unsigned operands_align(const void *a, const void *b, const void *d) {
    unsigned r = ptr_align(a);
    if (ptr_align(b) < r) r = ptr_align(b);
    if (ptr_align(d) < r) r = ptr_align(d);
    return r;
}

/* The alignment y = x W^T's algorithm is chosen for: the operands', but
 * no more than one output row of out_dim floats gives, so that every row
 * offset into one output buffer (a mixture of experts' products write
 * their expert's slots from any row) keys the same algorithm, and a row's
 * bytes do not depend on where its expert's rows start in the batch. A
 * model's widths are multiples of 64 floats, so this binds only on narrow
 * ones (tiny test models, a small vocabulary). */
static unsigned product_align(const void *w, const void *x16, const float *out, int out_dim) {
    unsigned a = operands_align(w, x16, out);
    size_t row = (size_t)out_dim * sizeof(float);
    while (a > 1 && row % a) a /= 2;
    return a;
}

/* A preference with the operands' true alignment and the context's
 * workspace; the caller destroys it. */
static cublasLtMatmulPreference_t pref_for(cuda_ctx *c, unsigned align) {
    cublasLtMatmulPreference_t p = NULL;
    uint32_t a = align;
    if (cublas_failed(BLAS(cublasLtMatmulPreferenceCreate)(&p), "preference")) return NULL;
    bool bad = cublas_failed(BLAS(cublasLtMatmulPreferenceSetAttribute)(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                                        &c->lt_ws_bytes, sizeof c->lt_ws_bytes),
                             "preference");
    const cublasLtMatmulPreferenceAttributes_t which[] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4 && !bad; i++)
        bad = cublas_failed(BLAS(cublasLtMatmulPreferenceSetAttribute)(p, which[i], &a, sizeof a), "preference");
    if (bad) {
        BLAS(cublasLtMatmulPreferenceDestroy)(p);
        return NULL;
    }
    return p;
}

/* fp32 compute and scale type, op(A) = ta, op(B) = tb; false on success
 * (*op then to be destroyed), true (recorded) on a failure. */
static bool matmul_desc(cublasLtMatmulDesc_t *op, cublasOperation_t ta, cublasOperation_t tb) {
    return cublas_failed(BLAS(cublasLtMatmulDescCreate)(op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul desc") ||
           cublas_failed(BLAS(cublasLtMatmulDescSetAttribute)(*op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
                         "transa") ||
           cublas_failed(BLAS(cublasLtMatmulDescSetAttribute)(*op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
                         "transb");
}

/* The algorithm for (out_dim, in_dim, alignment), chosen once at a fixed row
 * count and with one split of the inner dimension, so a row's sums are the
 * same whatever the number of rows (records byte-identical across --batch).
 * Checked on an H100 by rollout_device.bats' --batch test. */
static const cublasLtMatmulAlgo_t *algo_for(cuda_ctx *c, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t la,
                                            int out_dim, int in_dim, unsigned align) {
    for (int i = 0; i < c->n_algos; i++)
        if (c->algos[i].out_dim == out_dim && c->algos[i].in_dim == in_dim && c->algos[i].align == align)
            return &c->algos[i].algo;
    if (c->n_algos == CUDA_GEMM_ALGOS) {
        cuda_fail_msg("more weight shapes than the algorithm cache holds");
        return NULL;
    }
    enum { PROBE_ROWS = 256 };
    cublasLtMatrixLayout_t lb = NULL, ld = NULL;
    cublasLtMatmulPreference_t pref = pref_for(c, align);
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    const cublasLtMatmulAlgo_t *out = NULL;
    if (pref &&
        !cublas_failed(BLAS(cublasLtMatrixLayoutCreate)(&lb, CUDA_R_16BF, (uint64_t)in_dim, PROBE_ROWS, in_dim), "layout") &&
        !cublas_failed(BLAS(cublasLtMatrixLayoutCreate)(&ld, CUDA_R_32F, (uint64_t)out_dim, PROBE_ROWS, out_dim), "layout") &&
        !cublas_failed(BLAS(cublasLtMatmulAlgoGetHeuristic)(c->lt, op, la, lb, ld, ld, pref, 1, &res, &found),
                       "heuristic")) {
        if (!found) {
            cuda_fail_msg("cuBLASLt has no bf16 algorithm for a weight shape");
        } else {
            int one = 1; /* no split of the inner dimension: sums in one order */
            if (cublas_failed(BLAS(cublasLtMatmulAlgoConfigSetAttribute)(&res.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &one,
                                                                   sizeof one),
                              "split-k"))
                goto done;
            cuda_gemm_algo *a = &c->algos[c->n_algos++];
            a->out_dim = out_dim;
            a->in_dim = in_dim;
            a->align = align;
            a->algo = res.algo;
            out = &a->algo;
        }
    }
done:
    if (pref) BLAS(cublasLtMatmulPreferenceDestroy)(pref);
    if (lb) BLAS(cublasLtMatrixLayoutDestroy)(lb);
    if (ld) BLAS(cublasLtMatrixLayoutDestroy)(ld);
    return out;
}

void cuda_matmul_bf16(float *out, const float *in, const uint16_t *w, const float *bias, int n, int in_dim,
                      int out_dim) {
    cuda_ctx *c = cuda_ctx_get();
    if (cuda_broken() || n <= 0) return;
    uint16_t *x16 = cuda_act16((size_t)n * in_dim);
    if (!x16 || cuda_failed(cu_to_bf16(x16, in, (size_t)n * in_dim, c->stream), "to bf16")) return;
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    float alpha = 1.0f, beta = 0.0f;
    if (!matmul_desc(&op, ta, tb) &&
        !cublas_failed(BLAS(cublasLtMatrixLayoutCreate)(&la, CUDA_R_16BF, (uint64_t)in_dim, (uint64_t)out_dim, in_dim),
                       "layout") &&
        !cublas_failed(BLAS(cublasLtMatrixLayoutCreate)(&lb, CUDA_R_16BF, (uint64_t)in_dim, (uint64_t)n, in_dim), "layout") &&
        !cublas_failed(BLAS(cublasLtMatrixLayoutCreate)(&ld, CUDA_R_32F, (uint64_t)out_dim, (uint64_t)n, out_dim),
                       "layout")) {
        unsigned align = product_align(w, x16, out, out_dim);
        const cublasLtMatmulAlgo_t *algo = algo_for(c, op, la, out_dim, in_dim, align);
        cublasStatus_t st = CUBLAS_STATUS_NOT_SUPPORTED;
        if (algo)
            st = BLAS(cublasLtMatmul)(c->lt, op, &alpha, w, la, x16, lb, &beta, out, ld, out, ld, algo, c->lt_ws,
                                c->lt_ws_bytes, c->stream);
        if ((st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_INVALID_VALUE) && !cuda_broken()) {
            /* the shape's algorithm refuses this row count: cuBLASLt's own
             * choice for it (the result may then depend on the batch) */
            cublasLtMatmulHeuristicResult_t res;
            cublasLtMatmulPreference_t pref = pref_for(c, align);
            int found = 0;
            if (pref &&
                !cublas_failed(BLAS(cublasLtMatmulAlgoGetHeuristic)(c->lt, op, la, lb, ld, ld, pref, 1, &res, &found),
                               "heuristic")) {
                if (!found)
                    cuda_fail_msg("cuBLASLt has no bf16 algorithm for a product");
                else
                    st = BLAS(cublasLtMatmul)(c->lt, op, &alpha, w, la, x16, lb, &beta, out, ld, out, ld, &res.algo,
                                        c->lt_ws, c->lt_ws_bytes, c->stream);
            }
            if (pref) BLAS(cublasLtMatmulPreferenceDestroy)(pref);
        }
        if (!cuda_broken()) cublas_failed(st, "cublasLtMatmul");
    }
    if (ld) BLAS(cublasLtMatrixLayoutDestroy)(ld);
    if (lb) BLAS(cublasLtMatrixLayoutDestroy)(lb);
    if (la) BLAS(cublasLtMatrixLayoutDestroy)(la);
    if (op) BLAS(cublasLtMatmulDescDestroy)(op);
    if (bias && !cuda_broken()) cuda_failed(cu_bias_add(out, bias, n, out_dim, c->stream), "bias");
}

void cuda_gemm_f32(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                   int ldb, float beta, float *C, int ldc) {
    if (cuda_broken()) return;
    /* row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T */
    cublas_failed(BLAS(cublasSgemm_v2)(cuda_ctx_get()->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N,
                              M, K, &alpha, B, ldb, A, lda, &beta, C, ldc),
                  "cublasSgemm");
}

/* D (+)= op(A) op(B), column-major: A stored [a_rows, a_cols] with ld lda, B
 * likewise, both bf16; D fp32 [m, n] with ld ldd. cuBLASLt's heuristic for
 * the operands' alignment, one split of the inner dimension (sums in one
 * order: the same bytes every call). */
static void lt_gemm_bf16(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const uint16_t *A, int lda,
                         const uint16_t *B, int ldb, float beta, float *D, int ldd) {
    cuda_ctx *c = cuda_ctx_get();
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    float alpha = 1.0f;
    int a_rows = ta == CUBLAS_OP_N ? m : k, a_cols = ta == CUBLAS_OP_N ? k : m;
    int b_rows = tb == CUBLAS_OP_N ? k : n, b_cols = tb == CUBLAS_OP_N ? n : k;
    unsigned align = operands_align(A, B, D);
    cublasLtMatmulHeuristicResult_t res;
    int found = 0, one = 1;
    if (!matmul_desc(&op, ta, tb) &&
        !cublas_failed(BLAS(cublasLtMatrixLayoutCreate)(&la, CUDA_R_16BF, (uint64_t)a_rows, (uint64_t)a_cols, lda),
                       "layout") &&
        !cublas_failed(BLAS(cublasLtMatrixLayoutCreate)(&lb, CUDA_R_16BF, (uint64_t)b_rows, (uint64_t)b_cols, ldb),
                       "layout") &&
        !cublas_failed(BLAS(cublasLtMatrixLayoutCreate)(&ld, CUDA_R_32F, (uint64_t)m, (uint64_t)n, ldd), "layout") &&
        (pref = pref_for(c, align)) &&
        !cublas_failed(BLAS(cublasLtMatmulAlgoGetHeuristic)(c->lt, op, la, lb, ld, ld, pref, 1, &res, &found),
                       "heuristic")) {
        if (!found)
            cuda_fail_msg("cuBLASLt has no bf16 algorithm for a backward product");
        else if (!cublas_failed(BLAS(cublasLtMatmulAlgoConfigSetAttribute)(&res.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
                                                                         &one, sizeof one),
                                "split-k"))
            cublas_failed(BLAS(cublasLtMatmul)(c->lt, op, &alpha, A, la, B, lb, &beta, D, ld, D, ld, &res.algo, c->lt_ws,
                                               c->lt_ws_bytes, c->stream),
                          "cublasLtMatmul (backward)");
    }
    if (pref) BLAS(cublasLtMatmulPreferenceDestroy)(pref);
    if (ld) BLAS(cublasLtMatrixLayoutDestroy)(ld);
    if (lb) BLAS(cublasLtMatrixLayoutDestroy)(lb);
    if (la) BLAS(cublasLtMatrixLayoutDestroy)(la);
    if (op) BLAS(cublasLtMatmulDescDestroy)(op);
}

/* Row-major [r, c] is column-major [c, r]: din[n, in] = dout[n, out] w[out, in]
 * is, column-major, din^T[in, n] = w^T[in, out] dout^T[out, n] (both as
 * stored, no transpose); dw[out, in] += dout^T in is dw^T[in, out] +=
 * in^T[in, n] (dout^T[out, n])^T. */
void cuda_matmul_backward_bf16(float *din, float *dw, float *db, const float *dout, const float *in,
                               const uint16_t *w, int n, int in_dim, int out_dim, bool accumulate) {
    cuda_ctx *c = cuda_ctx_get();
    if (cuda_broken() || n <= 0) return;
    if (din || dw) {
        uint16_t *dout16 = cuda_act16_slot(1, (size_t)n * out_dim);
        if (!dout16 || cuda_failed(cu_to_bf16(dout16, dout, (size_t)n * out_dim, c->stream), "to bf16")) return;
        if (din)
            lt_gemm_bf16(CUBLAS_OP_N, CUBLAS_OP_N, in_dim, n, out_dim, w, in_dim, dout16, out_dim,
                         accumulate ? 1.0f : 0.0f, din, in_dim);
        if (dw && !cuda_broken()) {
            uint16_t *in16 = cuda_act16_slot(0, (size_t)n * in_dim);
            if (!in16 || cuda_failed(cu_to_bf16(in16, in, (size_t)n * in_dim, c->stream), "to bf16")) return;
            lt_gemm_bf16(CUBLAS_OP_N, CUBLAS_OP_T, in_dim, out_dim, n, in16, in_dim, dout16, out_dim, 1.0f, dw,
                         in_dim);
        }
    }
    if (db && !cuda_broken()) cuda_failed(cu_colsum_add(db, dout, n, out_dim, c->stream), "column sums");
}
