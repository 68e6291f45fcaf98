/* The process's CUDA context (ctx.h), device memory and the first-error
 * record the backend's ops report through. */
#include "ctx.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The one context of this process: the CUDA runtime keeps its own per
 * process, and backend.h's ops take no context argument. */
static cuda_ctx ctx;

cuda_ctx *cuda_ctx_get(void) { return &ctx; }

bool cuda_built(void) { return true; }

int cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError(); /* a missing driver is not an error here */
        return 0;
    }
    return n;
}

void cuda_fail_msg(const char *what) {
    if (!ctx.err.code) gerr_set(&ctx.err, EX_SOFTWARE, "cuda: %s", what);
}

bool cuda_failed(cudaError_t rc, const char *what) {
    if (rc == cudaSuccess) return false;
    if (!ctx.err.code) gerr_set(&ctx.err, EX_SOFTWARE, "cuda: %s: %s", what, cudaGetErrorString(rc));
    return true;
}

bool cublas_failed(cublasStatus_t rc, const char *what) {
    if (rc == CUBLAS_STATUS_SUCCESS) return false;
    if (!ctx.err.code) gerr_set(&ctx.err, EX_SOFTWARE, "cublas: %s: status %d", what, (int)rc);
    return true;
}

bool cuda_broken(void) { return ctx.err.code != 0 || !ctx.open; }

/* Moves the recorded failure into e. */
static int take_error(gerr *e) {
    if (!ctx.err.code) return 0;
    *e = ctx.err;
    memset(&ctx.err, 0, sizeof ctx.err);
    return e->code;
}

#define STR2(x) #x
#define STR(x) STR2(x)

/* dlopens the library (its versioned name first) and reads every function
 * CUDA_BLAS_FNS lists from it. */
static int load_blas(gerr *e) {
    static const char *const names[2][2] = {
        {"libcublasLt.so." STR(CUBLAS_VER_MAJOR), "libcublasLt.so"},
        {"libcublas.so." STR(CUBLAS_VER_MAJOR), "libcublas.so"},
    };
    void **handles[2] = {&ctx.lib_lt, &ctx.lib_blas};
    for (int i = 0; i < 2; i++) {
        for (int j = 0; j < 2 && !*handles[i]; j++) *handles[i] = dlopen(names[i][j], RTLD_NOW | RTLD_LOCAL);
        if (!*handles[i]) return gerr_set(e, EX_UNAVAILABLE, "cannot load %s: %s", names[i][0], dlerror());
    }
    void *lt = ctx.lib_lt, *blas = ctx.lib_blas;
    (void)lt, (void)blas;
#define LOAD(lib, name)                                                                               \
    if (!(*(void **)&ctx.fn.name = dlsym(lib, #name)))                                                \
        return gerr_set(e, EX_UNAVAILABLE, "%s has no %s", lib == lt ? names[0][0] : names[1][0], #name);
    CUDA_BLAS_FNS(LOAD)
#undef LOAD
    return 0;
}

int cuda_open(gerr *e) { return ctx.open ? 0 : cuda_open_device(0, e); }

int cuda_open_device(int index, gerr *e) {
    if (ctx.open)
        return ctx.device == index ? 0
                                   : gerr_set(e, EX_SOFTWARE, "cuda: the context is open on device %d, not %d",
                                              ctx.device, index);
    int n = cuda_device_count();
    if (n <= 0) return gerr_set(e, EX_UNAVAILABLE, "no CUDA device found");
    if (index < 0 || index >= n) return gerr_set(e, EX_UNAVAILABLE, "no CUDA device %d (%d found)", index, n);
    memset(&ctx, 0, sizeof ctx);
    ctx.device = index;
    int rc = load_blas(e);
    if (rc) {
        if (ctx.lib_lt) dlclose(ctx.lib_lt);
        if (ctx.lib_blas) dlclose(ctx.lib_blas);
        memset(&ctx, 0, sizeof ctx);
        return rc;
    }
    ctx.lt_ws_bytes = (size_t)32 << 20; /* cuBLASLt's workspace: Hopper kernels want 32 MiB */
    bool bad = cuda_failed(cudaSetDevice(index), "cudaSetDevice") ||
               cuda_failed(cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking), "cudaStreamCreate") ||
               cublas_failed(BLAS(cublasCreate_v2)(&ctx.blas), "cublasCreate") ||
               cublas_failed(BLAS(cublasSetStream_v2)(ctx.blas, ctx.stream), "cublasSetStream") ||
               cublas_failed(BLAS(cublasLtCreate)(&ctx.lt), "cublasLtCreate") ||
               cuda_failed(cudaMalloc(&ctx.lt_ws, ctx.lt_ws_bytes), "cudaMalloc (cuBLASLt workspace)");
    ctx.open = true; /* so that cuda_close frees what was made */
    if (bad) {
        gerr err = ctx.err;
        cuda_close();
        *e = err;
        return e->code;
    }
    return 0;
}

void cuda_close(void) {
    if (!ctx.open) return;
    if (ctx.stream) (void)cudaStreamSynchronize(ctx.stream);
    cuda_nccl_close();
    for (int i = 0; i < CUDA_STAGE_SLOTS; i++) {
        (void)cudaFree(ctx.stage[i]);
        free(ctx.staged[i]);
    }
    (void)cudaFree(ctx.out);
    for (int i = 0; i < CUDA_ACT16_SLOTS; i++) (void)cudaFree(ctx.act16[i]);
    (void)cudaFree(ctx.lt_ws);
    if (ctx.lt) (void)BLAS(cublasLtDestroy)(ctx.lt);
    if (ctx.blas) (void)BLAS(cublasDestroy_v2)(ctx.blas);
    if (ctx.stream) (void)cudaStreamDestroy(ctx.stream);
    /* the libraries stay loaded: a later cuda_open finds them again */
    void *lt = ctx.lib_lt, *blas = ctx.lib_blas, *nccl = ctx.lib_nccl;
    memset(&ctx, 0, sizeof ctx);
    ctx.lib_lt = lt, ctx.lib_blas = blas, ctx.lib_nccl = nccl;
}

int cuda_sync(gerr *e) {
    if (ctx.open && !ctx.err.code) cuda_failed(cudaStreamSynchronize(ctx.stream), "cudaStreamSynchronize");
    return take_error(e);
}

void cuda_device_name(char *buf, size_t n) {
    struct cudaDeviceProp p;
    if (!n) return;
    buf[0] = 0;
    if (cuda_device_count() <= 0 || cudaGetDeviceProperties(&p, ctx.open ? ctx.device : 0) != cudaSuccess) return;
    snprintf(buf, n, "%s, %.1f GiB, sm_%d%d", p.name, (double)p.totalGlobalMem / (1 << 30), p.major, p.minor);
}

/* ---- memory ------------------------------------------------------------------ */

/* Allocations carry their size in front, for the live and peak counts. */
enum { HEADER = 256 };

int cuda_alloc(void **p, size_t bytes, gerr *e) {
    *p = NULL;
    int rc = cuda_open(e);
    if (rc) return rc;
    char *raw = NULL;
    cudaError_t st = cudaMalloc((void **)&raw, bytes + HEADER);
    if (st != cudaSuccess)
        return gerr_set(e, EX_SOFTWARE, "cuda: cannot allocate %zu MiB of device memory: %s", bytes >> 20,
                        cudaGetErrorString(st));
    st = cudaMemcpy(raw, &bytes, sizeof bytes, cudaMemcpyHostToDevice);
    if (st != cudaSuccess) {
        (void)cudaFree(raw);
        return gerr_set(e, EX_SOFTWARE, "cuda: cudaMemcpy: %s", cudaGetErrorString(st));
    }
    ctx.live_bytes += bytes;
    if (ctx.live_bytes > ctx.peak_bytes) ctx.peak_bytes = ctx.live_bytes;
    *p = raw + HEADER;
    return 0;
}

void cuda_free(void *p) {
    if (!p) return;
    /* the stream's queued work may still use p */
    if (ctx.open) cuda_failed(cudaStreamSynchronize(ctx.stream), "cudaStreamSynchronize");
    char *raw = (char *)p - HEADER;
    size_t bytes = 0;
    if (cudaMemcpy(&bytes, raw, sizeof bytes, cudaMemcpyDeviceToHost) == cudaSuccess && bytes <= ctx.live_bytes)
        ctx.live_bytes -= bytes;
    cuda_failed(cudaFree(raw), "cudaFree");
}

size_t cuda_peak_bytes(void) { return ctx.peak_bytes; }

/* Copies ordered on the context's stream, waited for: the host side may be
 * reused as soon as they return. */
static int copy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, const char *what, gerr *e) {
    int rc = cuda_open(e);
    if (rc) return rc;
    /* after a failed op the copy is not made, and that failure is returned:
     * a caller reading results back learns of it here */
    if (!ctx.err.code && bytes && !cuda_failed(cudaMemcpyAsync(dst, src, bytes, kind, ctx.stream), what))
        cuda_failed(cudaStreamSynchronize(ctx.stream), what);
    return take_error(e);
}

int cuda_upload(void *dst, const void *src, size_t bytes, gerr *e) {
    return copy(dst, src, bytes, cudaMemcpyHostToDevice, "upload", e);
}

int cuda_download(void *dst, const void *src, size_t bytes, gerr *e) {
    return copy(dst, src, bytes, cudaMemcpyDeviceToHost, "download", e);
}

/* ---- staging ----------------------------------------------------------------- */

static void *grow(void **buf, size_t *have, size_t bytes, const char *what) {
    if (bytes <= *have) return *buf;
    size_t want = bytes + bytes / 2 + 4096;
    /* no queued kernel may still read the old buffer */
    if (*buf && (cuda_failed(cudaStreamSynchronize(ctx.stream), what) || cuda_failed(cudaFree(*buf), what)))
        return NULL;
    *buf = NULL;
    *have = 0;
    if (cuda_failed(cudaMalloc(buf, want), what)) {
        *buf = NULL;
        return NULL;
    }
    *have = want;
    return *buf;
}

const void *cuda_stage(const void *host, size_t bytes, int slot) {
    if (cuda_broken()) return NULL;
    void *had = ctx.stage[slot];
    void *d = grow(&ctx.stage[slot], &ctx.stage_bytes[slot], bytes, "staging buffer");
    if (!d || !bytes) return d;
    /* the slot already holds these bytes (every layer stages the same rows) */
    if (d == had && ctx.staged_bytes[slot] == bytes && !memcmp(ctx.staged[slot], host, bytes)) return d;
    /* from pageable memory the copy returns once the host side is read */
    if (cuda_failed(cudaMemcpyAsync(d, host, bytes, cudaMemcpyHostToDevice, ctx.stream), "staging copy")) return NULL;
    if (ctx.staged_cap[slot] < bytes) {
        void *p = realloc(ctx.staged[slot], bytes);
        if (!p) { /* no record kept: the next call copies again */
            ctx.staged_bytes[slot] = 0;
            return d;
        }
        ctx.staged[slot] = p;
        ctx.staged_cap[slot] = bytes;
    }
    memcpy(ctx.staged[slot], host, bytes);
    ctx.staged_bytes[slot] = bytes;
    return d;
}

void *cuda_out(size_t bytes) {
    if (cuda_broken()) return NULL;
    return grow(&ctx.out, &ctx.out_bytes, bytes, "result buffer");
}

uint16_t *cuda_act16_slot(int slot, size_t n) {
    if (cuda_broken()) return NULL;
    size_t have = ctx.act16_n[slot] * sizeof(uint16_t);
    void *buf = ctx.act16[slot];
    void *d = grow(&buf, &have, n * sizeof(uint16_t), "bf16 activations");
    ctx.act16[slot] = buf;
    ctx.act16_n[slot] = have / sizeof(uint16_t);
    return d;
}

uint16_t *cuda_act16(size_t n) { return cuda_act16_slot(0, n); }
