/* The process's CUDA context and the helpers every file of lib/cuda uses:
 * the checked-call macros that record the first failure, and staging of
 * host index arrays (backend.h passes positions, tokens and row offsets as
 * host arrays). Internal to lib/cuda. */
#ifndef GRPO_CUDA_CTX_H
#define GRPO_CUDA_CTX_H

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "cuda.h"

/* cuBLAS and cuBLASLt are loaded at cuda_open (dlopen), not linked: mapping
 * their 600 MB at every start cost each tool about 0.1 s, GPU or not. */
#define CUDA_BLAS_FNS(X)                                                                                   \
    X(lt, cublasLtCreate) X(lt, cublasLtDestroy) X(lt, cublasLtMatmul) X(lt, cublasLtMatmulAlgoGetHeuristic) \
    X(lt, cublasLtMatmulAlgoConfigSetAttribute) X(lt, cublasLtMatmulDescCreate)                            \
    X(lt, cublasLtMatmulDescDestroy) X(lt, cublasLtMatmulDescSetAttribute)                                 \
    X(lt, cublasLtMatmulPreferenceCreate) X(lt, cublasLtMatmulPreferenceDestroy)                           \
    X(lt, cublasLtMatmulPreferenceSetAttribute) X(lt, cublasLtMatrixLayoutCreate)                          \
    X(lt, cublasLtMatrixLayoutDestroy) X(blas, cublasCreate_v2) X(blas, cublasDestroy_v2)                   \
    X(blas, cublasSetStream_v2) X(blas, cublasSgemm_v2)

typedef struct {
#define CUDA_BLAS_FIELD(lib, name) __typeof__(&name) name;
    CUDA_BLAS_FNS(CUDA_BLAS_FIELD)
#undef CUDA_BLAS_FIELD
} cuda_blas_fns;

/* A cuBLAS or cuBLASLt function of the open context. */
#define BLAS(name) (cuda_ctx_get()->fn.name)

/* Staging slots: an op copies up to this many host arrays at once. The
 * algorithm cache's room: a dense model takes about 6 (out_dim, in_dim,
 * alignment) keys; a mixture of experts adds its router's and experts'
 * shapes, each expert's output rows at the alignments their row offsets
 * give (a tiny model's narrow rows: up to 3 per shape), and the unit tests
 * run many models in one process. */
enum { CUDA_STAGE_SLOTS = 3, CUDA_GEMM_ALGOS = 64, CUDA_ACT16_SLOTS = 2 };

/* cuBLASLt's algorithm for one weight shape, chosen once so that a row's
 * products do not depend on how many rows share the call (byte-identical
 * records whatever --batch). */
typedef struct {
    int out_dim, in_dim;
    unsigned align; /* the operands' pointer alignment it was chosen for */
    cublasLtMatmulAlgo_t algo;
} cuda_gemm_algo;

typedef struct {
    bool open;
    int device;
    cuda_blas_fns fn;
    void *lib_lt, *lib_blas; /* dlopen handles */
    void *lib_nccl, *nccl_comm; /* nccl.c: libnccl's handle, the communicator (NULL: none) */
    cudaStream_t stream;
    cublasHandle_t blas;
    cublasLtHandle_t lt;
    void *lt_ws;
    size_t lt_ws_bytes;
    void *stage[CUDA_STAGE_SLOTS];
    size_t stage_bytes[CUDA_STAGE_SLOTS];
    /* what each slot holds, so that the same positions and offsets staged
     * by every layer of a forward are copied once */
    void *staged[CUDA_STAGE_SLOTS];
    size_t staged_bytes[CUDA_STAGE_SLOTS], staged_cap[CUDA_STAGE_SLOTS];
    void *out;  /* small results copied back to the host (sampling) */
    size_t out_bytes;
    /* bf16 copies of a GEMM's operands: slot 0 and 1 (a backward rounds
     * two; an MXFP4 expert's expansion takes 1 in a forward) */
    uint16_t *act16[CUDA_ACT16_SLOTS];
    size_t act16_n[CUDA_ACT16_SLOTS];
    cuda_gemm_algo algos[CUDA_GEMM_ALGOS];
    int n_algos;
    size_t live_bytes, peak_bytes;
    gerr err; /* the first failure of an op since cuda_sync */
} cuda_ctx;

cuda_ctx *cuda_ctx_get(void);
/* nccl.c: destroys the communicator, if any (cuda_close). */
void cuda_nccl_close(void);

/* Records a failure (the first one sticks) and returns true when rc is one. */
bool cuda_failed(cudaError_t rc, const char *what);
bool cublas_failed(cublasStatus_t rc, const char *what);
/* Records a failure that is not a CUDA status. */
void cuda_fail_msg(const char *what);
/* Whether an earlier op failed (later ops then do nothing). */
bool cuda_broken(void);

/* A device copy of host[bytes] in staging slot `slot` (grown as needed),
 * ordered on the stream before the next launch; NULL after a failure. */
const void *cuda_stage(const void *host, size_t bytes, int slot);
/* A device buffer of at least bytes for results, reused; NULL after a failure. */
void *cuda_out(size_t bytes);
/* The bf16 scratch of n elements for GEMM operands (slot 0 or 1, each
 * grown as needed); NULL after a failure. */
uint16_t *cuda_act16(size_t n);
uint16_t *cuda_act16_slot(int slot, size_t n);

#endif
