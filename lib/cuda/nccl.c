/* NCCL for data-parallel training on GPUs (cuda.h): the gradients of every
 * rank summed in device memory, over the communicator lib/dataparallel/nccl.c sets
 * up through MPI. libnccl is dlopen'ed at first use, like cuBLAS (ctx.c), so
 * a tool that never reduces maps nothing. The types come from nccl.h when
 * this build found it (the CUDA toolkit's, or NCCL's own install); without
 * it every entry says so. Not yet run on several GPUs (docs/gpu.md): NCCL
 * refuses two ranks on one device, so one GPU cannot test it beyond a
 * communicator of one rank (test_cuda_train). */
#include "ctx.h"

#include <dlfcn.h>
#include <string.h>

#if __has_include(<nccl.h>)
#include <nccl.h>

#define NCCL_FNS(X) X(ncclGetUniqueId) X(ncclCommInitRank) X(ncclAllReduce) X(ncclCommDestroy) X(ncclGetErrorString)

static struct {
#define NCCL_FIELD(name) __typeof__(&name) name;
    NCCL_FNS(NCCL_FIELD)
#undef NCCL_FIELD
} fn;

_Static_assert(sizeof(ncclUniqueId) == CUDA_NCCL_ID_BYTES, "NCCL's unique id is 128 bytes");

/* libnccl.so.2 and its functions, once per process (the handle stays). */
int cuda_nccl_load(gerr *e) {
    cuda_ctx *c = cuda_ctx_get();
    int rc = cuda_open(e);
    if (rc) return rc;
    if (!c->lib_nccl && !(c->lib_nccl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL)) &&
        !(c->lib_nccl = dlopen("libnccl.so", RTLD_NOW | RTLD_LOCAL)))
        return gerr_set(e, EX_UNAVAILABLE, "cannot load libnccl.so.2 (NCCL; its directory on LD_LIBRARY_PATH?): %s",
                        dlerror());
#define NCCL_LOAD(name)                                                 \
    if (!(*(void **)&fn.name = dlsym(c->lib_nccl, #name)))              \
        return gerr_set(e, EX_UNAVAILABLE, "libnccl.so.2 has no %s", #name);
    NCCL_FNS(NCCL_LOAD)
#undef NCCL_LOAD
    return 0;
}

static int nccl_failed(ncclResult_t r, const char *what, gerr *e) {
    if (r == ncclSuccess) return 0;
    return gerr_set(e, EX_UNAVAILABLE, "nccl: %s: %s", what, fn.ncclGetErrorString(r));
}

int cuda_nccl_id(unsigned char id[CUDA_NCCL_ID_BYTES], gerr *e) {
    int rc = cuda_nccl_load(e);
    if (rc) return rc;
    ncclUniqueId u;
    if ((rc = nccl_failed(fn.ncclGetUniqueId(&u), "ncclGetUniqueId", e))) return rc;
    memcpy(id, &u, sizeof u);
    return 0;
}

int cuda_nccl_init(int rank, int size, const unsigned char id[CUDA_NCCL_ID_BYTES], gerr *e) {
    cuda_ctx *c = cuda_ctx_get();
    int rc = cuda_nccl_load(e);
    if (rc) return rc;
    if (c->nccl_comm) return gerr_set(e, EX_SOFTWARE, "nccl: a communicator is open already");
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    ncclComm_t comm = NULL;
    if ((rc = nccl_failed(fn.ncclCommInitRank(&comm, size, u, rank), "ncclCommInitRank", e))) return rc;
    c->nccl_comm = comm;
    return 0;
}

int cuda_nccl_sum(float *buf, size_t n, gerr *e) {
    cuda_ctx *c = cuda_ctx_get();
    if (!c->open || !c->nccl_comm) return gerr_set(e, EX_SOFTWARE, "nccl: no communicator (cuda_nccl_init)");
    int rc = cuda_sync(e); /* an op's failure before it is reported as that op's */
    if (rc) return rc;
    if (n && (rc = nccl_failed(fn.ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, (ncclComm_t)c->nccl_comm, c->stream),
                               "ncclAllReduce", e)))
        return rc;
    return cuda_sync(e);
}

void cuda_nccl_close(void) {
    cuda_ctx *c = cuda_ctx_get();
    if (c->nccl_comm) (void)fn.ncclCommDestroy((ncclComm_t)c->nccl_comm);
    c->nccl_comm = NULL;
}

#else /* no nccl.h at build time */

static int absent(gerr *e) {
    return gerr_set(e, EX_UNAVAILABLE, "this build found no nccl.h: rebuild where NCCL's headers are installed");
}
int cuda_nccl_load(gerr *e) { return absent(e); }
int cuda_nccl_id(unsigned char id[CUDA_NCCL_ID_BYTES], gerr *e) {
    (void)id;
    return absent(e);
}
int cuda_nccl_init(int rank, int size, const unsigned char id[CUDA_NCCL_ID_BYTES], gerr *e) {
    (void)rank, (void)size, (void)id;
    return absent(e);
}
int cuda_nccl_sum(float *buf, size_t n, gerr *e) {
    (void)buf, (void)n;
    return absent(e);
}
void cuda_nccl_close(void) {}

#endif
