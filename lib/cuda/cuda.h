/* The CUDA backend (lib/cuda): the backend.h table on an NVIDIA GPU, the
 * device memory it works on, and what a tool asks before choosing it.
 *
 * A build without CUDA (make CUDA=0, or no nvcc) links lib/cuda/none.c
 * instead: cuda_built() is false, cuda_open fails with EX_UNAVAILABLE and
 * backend_cuda() is NULL, so callers need no #ifdef.
 *
 * One context per process (the CUDA runtime's own context is per process
 * too): cuda_open makes the stream, the cuBLAS and cuBLASLt handles and the
 * staging buffers; the backend's ops run on that stream in order. The ops
 * of backend.h return nothing, so a failed CUDA or cuBLAS call inside one is
 * recorded (the first of them) and the op does nothing further; the caller
 * reads it back with cuda_sync, which also waits for the device.
 * lib/cuda/README says what is implemented, docs/gpu.md what has been
 * verified on a GPU. */
#ifndef GRPO_CUDA_H
#define GRPO_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../ops/backend.h"
#include "../util/err.h"
#include "../util/rng.h"

/* Whether this build has the CUDA backend. */
bool cuda_built(void);
/* Devices the runtime sees; 0 when there is none, no driver, or no CUDA
 * build. Never fails. */
int cuda_device_count(void);
/* Opens the process's context on device 0 (idempotent). EX_UNAVAILABLE
 * without a CUDA build or a device, EX_SOFTWARE when a handle or buffer
 * cannot be made. */
int cuda_open(gerr *e);
/* The same on device `index` (0 .. cuda_device_count() - 1): under mpirun a
 * rank takes its local rank's. A context open on another device is
 * EX_SOFTWARE. */
int cuda_open_device(int index, gerr *e);
void cuda_close(void);
/* The table over device memory; NULL in a build without CUDA. Its memory
 * entries work only after cuda_open. */
const backend *backend_cuda(void);
/* Waits for the device; returns and clears the first error the ops met. */
int cuda_sync(gerr *e);
/* "NVIDIA H100 80GB HBM3, 79.1 GiB, sm_90" for messages (empty when none). */
void cuda_device_name(char *buf, size_t n);

/* ---- device memory (every call checked; errors through e) ---------------- */
int cuda_alloc(void **p, size_t bytes, gerr *e);
void cuda_free(void *p);
int cuda_upload(void *dst, const void *src, size_t bytes, gerr *e);
int cuda_download(void *dst, const void *src, size_t bytes, gerr *e);
/* Peak bytes the context's allocations held (for the bench). */
size_t cuda_peak_bytes(void);

/* ---- NCCL (nccl.c): sums of device buffers across the ranks of a run ------ */
/* libnccl.so.2 is loaded at first use (dlopen: a tool that never reduces
 * maps nothing); EX_UNAVAILABLE when it cannot be, or when this build found
 * no nccl.h. NCCL's unique id, which one rank makes and every rank is given
 * (over MPI: lib/dataparallel/nccl.c): */
enum { CUDA_NCCL_ID_BYTES = 128 };
/* Loads libnccl (every rank first, so that none fails alone later). */
int cuda_nccl_load(gerr *e);
int cuda_nccl_id(unsigned char id[CUDA_NCCL_ID_BYTES], gerr *e);
/* Joins the communicator of `size` ranks as `rank`, on the open context's
 * device and stream. */
int cuda_nccl_init(int rank, int size, const unsigned char id[CUDA_NCCL_ID_BYTES], gerr *e);
/* In place: every rank's n floats of device memory summed, on every rank,
 * in order with the backend's ops; returns once it is done. */
int cuda_nccl_sum(float *buf, size_t n, gerr *e);

/* ---- sampling on the device (sample.c) ------------------------------------ */
/* sample.h's sample_token for n rows of device logits [n, V] when top-k,
 * top-p and min-p are off: the same uniform draw from each row's stream
 * rng[j] (advanced here as sample_token advances it), the token whose
 * cumulative probability in id order first passes it, its log-probability
 * under softmax(logits / T). temperature <= 0: greedy (first argmax, no
 * draw). tok and logp are host arrays; a row whose logits are not finite
 * gets token -1 (log-prob NaN), as sample_token returns. */
int cuda_sample_plain(const float *logits, int n, int V, double temperature, rng_stream *const *rng, int32_t *tok,
                      float *logp, gerr *e);
/* Philox4x32-10 computed on the device for n (counter[4], key[2]) pairs
 * (host arrays), so a test can hold it to lib/util/rng.c's. */
int cuda_philox(uint32_t *out, const uint32_t *counter, const uint32_t *key, int n, gerr *e);

#endif
