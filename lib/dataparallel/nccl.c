/* Data-parallel sums of device buffers (dist.h): NCCL's communicator over
 * the ranks MPI started, bootstrapped by handing rank 0's unique id to every
 * rank, and each rank on the GPU of its local rank. The sums themselves run
 * in lib/cuda/nccl.c. Not yet run on several GPUs (docs/many-machines.md). */
#include <stdlib.h>

#include "../cuda/cuda.h"
#include "dist.h"

int dist_device_open(const dist *d, gerr *e) {
    int n = cuda_device_count();
    if (!d->mpi || n <= 0) return 0;
    return cuda_open_device(d->local_rank % n, e);
}

int dist_nccl_start(const dist *d, gerr *e) {
    unsigned char id[CUDA_NCCL_ID_BYTES] = {0};
    int rc = cuda_nccl_load(e);
    if (!rc && d->rank == 0) rc = cuda_nccl_id(id, e);
    /* any rank's failure reaches every rank before one waits in NCCL */
    if ((rc = dist_agree(d, rc, e))) return rc;
    unsigned char *all = malloc((size_t)d->size * CUDA_NCCL_ID_BYTES);
    if (!all) return gerr_set(e, EX_SOFTWARE, "out of memory for NCCL's ids");
    rc = dist_allgather_bytes(d, id, all, CUDA_NCCL_ID_BYTES, e);
    if (!rc) rc = cuda_nccl_init(d->rank, d->size, all, e); /* rank 0's id leads */
    free(all);
    return rc;
}

int dist_nccl_sum(const dist *d, float *dev_buf, size_t n, gerr *e) {
    if (d->size == 1) return 0;
    return cuda_nccl_sum(dev_buf, n, e);
}
