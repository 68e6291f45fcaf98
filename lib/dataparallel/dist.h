/* Data-parallel training over MPI: which rank this process is, and the
 * collectives grpo-update needs (formats/checkpoint.md,
 * docs/many-machines.md).
 *
 * A process started by mpirun or srun (seen in its environment, see
 * dist_launched) calls MPI_Init; any other process never touches MPI and
 * is rank 0 of 1, for which every call below returns at once. Errors are
 * EX_UNAVAILABLE naming the MPI call; most MPI failures abort the whole job
 * instead (MPI_ERRORS_ARE_FATAL, the default), which is what keeps the other
 * ranks from waiting forever on a rank that died.
 *
 * Collectives must be called by every rank in the same order: callers go
 * through the same code path on every rank and use dist_agree after each
 * step that can fail on one rank alone. */
#ifndef GRPO_DIST_H
#define GRPO_DIST_H

#include <stdbool.h>
#include <stddef.h>

#include "../util/err.h"

typedef struct {
    int rank, size;
    int local_size; /* ranks on this machine */
    int local_rank; /* this rank among them (its GPU's index, nccl.c) */
    bool mpi;       /* MPI_Init was called: dist_end finalizes */
} dist;

/* True when the environment says an MPI launcher started this process:
 * OMPI_COMM_WORLD_SIZE (Open MPI's mpirun), PMI_SIZE (MPICH, srun --mpi=pmi2),
 * PMIX_RANK (srun --mpi=pmix, Open MPI 5), or SLURM_STEP_NUM_TASKS > 1 inside
 * an srun step. */
bool dist_launched(void);

/* Rank 0 of 1 without a launcher; else MPI_Init and this rank. EX_UNAVAILABLE
 * when the launcher started N tasks but MPI sees another number (srun without
 * an MPI plugin makes N singletons, each of which would train alone). */
int dist_start(dist *d, gerr *e);
/* MPI_Finalize when dist_start initialized MPI. */
void dist_end(dist *d);

/* OpenMP threads for this rank when the user gave none: the CPUs it may run
 * on, shared with the other ranks of its machine when the launcher did not
 * bind it (so ranks do not oversubscribe the cores); 0 = leave the default
 * (no MPI). */
int dist_default_threads(const dist *d);

/* Every rank passes its own status (0 or an exit code with e set). Returns
 * the local one when set, else the first failing rank's code, with e saying
 * which rank stopped: every rank leaves the same way, none waits for the
 * others at a later collective. */
int dist_agree(const dist *d, int rc, gerr *e);

/* Checks that every rank holds the same text (a hash of it is compared);
 * when not, every rank fails with `code`: "WHAT differs between ranks: rank
 * R's is not rank 0's (...)". */
int dist_check_same(const dist *d, const char *text, const char *what, int code, gerr *e);

/* ---- collectives on float buffers (reduce.c) --------------------------------- */

/* In place, every rank ends with the elementwise sum over ranks. */
int dist_sum_floats(const dist *d, float *buf, size_t n, gerr *e);
/* The same for doubles. */
int dist_sum_doubles(const dist *d, double *buf, size_t n, gerr *e);
/* buf holds n = bounds[size] floats on every rank; afterwards buf[bounds[r]
 * .. bounds[r+1]) on rank r is the sum over ranks of that range (the rest of
 * buf is scratch). ZeRO-1's gradient reduction. */
int dist_reduce_scatter_floats(const dist *d, float *buf, const size_t *bounds, gerr *e);
/* The same for doubles (--group-sums). */
int dist_reduce_scatter_doubles(const dist *d, double *buf, const size_t *bounds, gerr *e);
/* Rank r's range buf[bounds[r] .. bounds[r+1]) is copied to every rank. */
int dist_allgather_floats(const dist *d, float *buf, const size_t *bounds, gerr *e);
/* Rank 0 receives every rank's `mine` (counts[r] floats) into all, in rank
 * order; all is unused elsewhere. */
int dist_gather_floats(const dist *d, const float *mine, float *all, const size_t *counts, gerr *e);
/* Every rank receives every rank's `mine` (counts[r] floats) into all, in
 * rank order. */
int dist_allgatherv_floats(const dist *d, const float *mine, float *all, const size_t *counts, gerr *e);
/* Every rank's n bytes into all (size * n bytes), in rank order; the ranks
 * run the same build on the same architecture, so plain structs travel as
 * bytes. */
int dist_allgather_bytes(const dist *d, const void *mine, void *all, size_t n, gerr *e);

/* ---- device buffers over NCCL (nccl.c) ----------------------------------------- */

/* Under MPI with the CUDA backend: this rank's GPU (its local rank's,
 * modulo the devices it sees), opened before anything else opens device 0.
 * Nothing without MPI or without a device. */
int dist_device_open(const dist *d, gerr *e);
/* The NCCL communicator of every rank, its unique id made by rank 0 and
 * handed out over MPI. Every rank calls it (a collective). */
int dist_nccl_start(const dist *d, gerr *e);
/* In place: the sum over ranks of n floats of device memory (NCCL). */
int dist_nccl_sum(const dist *d, float *dev_buf, size_t n, gerr *e);

#endif
