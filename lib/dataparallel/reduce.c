/* The float collectives of data-parallel training (dist.h): the gradient
 * sum, ZeRO-1's reduce-scatter and all-gather, gathers to rank 0. MPI counts
 * are ints: the sum goes in chunks, the vector collectives check that every
 * count and offset fits (a 2^31-float slice is 8 GiB, past what one CPU rank
 * trains). */
#include <limits.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "mpi_err.h"

/* Floats per MPI_Allreduce call, and per MPI_Reduce_scatter call over all
 * ranks: Open MPI's algorithms allocate temporaries as large as the message,
 * which must stay small beside the gradient (64 MiB), or a ZeRO-1 rank would
 * spend on them what it saves on the moments. */
#define SUM_CHUNK ((size_t)1 << 24)

/* In place, in chunks of SUM_CHUNK elements of `size` bytes. */
static int sum_chunked(const dist *d, void *buf, size_t n, size_t size, MPI_Datatype type, gerr *e) {
    if (d->size == 1) return 0;
    for (size_t off = 0; off < n; off += SUM_CHUNK) {
        int count = (int)(n - off < SUM_CHUNK ? n - off : SUM_CHUNK);
        int rc = MPI_Allreduce(MPI_IN_PLACE, (char *)buf + off * size, count, type, MPI_SUM, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return dist_mpi_error(e, "MPI_Allreduce", rc);
    }
    return 0;
}

int dist_sum_floats(const dist *d, float *buf, size_t n, gerr *e) {
    return sum_chunked(d, buf, n, sizeof *buf, MPI_FLOAT, e);
}

int dist_sum_doubles(const dist *d, double *buf, size_t n, gerr *e) {
    return sum_chunked(d, buf, n, sizeof *buf, MPI_DOUBLE, e);
}

/* counts[r] and displs[r] as ints; EX_SOFTWARE when one does not fit. */
static int int_layout(const dist *d, const size_t *counts, int **cnt, int **dsp, gerr *e) {
    *cnt = xmalloc(sizeof(int) * (size_t)d->size);
    *dsp = xmalloc(sizeof(int) * (size_t)d->size);
    size_t off = 0;
    for (int r = 0; r < d->size; r++) {
        if (counts[r] > INT_MAX || off > INT_MAX) {
            free(*cnt), free(*dsp);
            *cnt = *dsp = NULL;
            return gerr_set(e, EX_SOFTWARE, "a buffer of more than %d floats does not fit one MPI collective here",
                            INT_MAX);
        }
        (*cnt)[r] = (int)counts[r], (*dsp)[r] = (int)off;
        off += counts[r];
    }
    return 0;
}

/* int_layout of the ranges of a bounds array [size + 1]. */
static int bounds_layout(const dist *d, const size_t *bounds, int **cnt, int **dsp, gerr *e) {
    size_t *counts = xmalloc(sizeof *counts * (size_t)d->size);
    for (int r = 0; r < d->size; r++) counts[r] = bounds[r + 1] - bounds[r];
    int rc = int_layout(d, counts, cnt, dsp, e);
    free(counts);
    return rc;
}

/* dist_reduce_scatter_floats for elements of `size` bytes of MPI type `type`. */
static int reduce_scatter(const dist *d, void *buf, const size_t *bounds, size_t size, MPI_Datatype type, gerr *e) {
    if (d->size == 1) return 0;
    size_t n = (size_t)d->size, piece = SUM_CHUNK / n > 0 ? SUM_CHUNK / n : 1, longest = 0;
    for (size_t r = 0; r < n; r++) longest = bounds[r + 1] - bounds[r] > longest ? bounds[r + 1] - bounds[r] : longest;
    /* round k sums piece k of every rank's slice: the pieces packed in rank
     * order into send, this rank's sum back into its slice */
    char *bytes = buf, *send = xmalloc(size * piece * n), *recv = xmalloc(size * piece);
    int *cnt = xmalloc(sizeof(int) * n), rc = 0;
    for (size_t off = 0; !rc && off < longest; off += piece) {
        size_t packed = 0;
        for (size_t r = 0; r < n; r++) {
            size_t len = bounds[r + 1] - bounds[r], c = off < len ? (len - off < piece ? len - off : piece) : 0;
            if (c) memcpy(send + packed * size, bytes + (bounds[r] + off) * size, size * c);
            cnt[r] = (int)c, packed += c;
        }
        rc = MPI_Reduce_scatter(send, recv, cnt, type, MPI_SUM, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) rc = dist_mpi_error(e, "MPI_Reduce_scatter", rc);
        else if (cnt[d->rank]) memcpy(bytes + (bounds[d->rank] + off) * size, recv, size * (size_t)cnt[d->rank]);
    }
    free(send), free(recv), free(cnt);
    return rc;
}

int dist_reduce_scatter_floats(const dist *d, float *buf, const size_t *bounds, gerr *e) {
    return reduce_scatter(d, buf, bounds, sizeof *buf, MPI_FLOAT, e);
}

int dist_reduce_scatter_doubles(const dist *d, double *buf, const size_t *bounds, gerr *e) {
    return reduce_scatter(d, buf, bounds, sizeof *buf, MPI_DOUBLE, e);
}

int dist_allgather_floats(const dist *d, float *buf, const size_t *bounds, gerr *e) {
    if (d->size == 1) return 0;
    int *cnt, *dsp;
    int rc = bounds_layout(d, bounds, &cnt, &dsp, e);
    if (rc) return rc;
    rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, cnt, dsp, MPI_FLOAT, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) rc = dist_mpi_error(e, "MPI_Allgatherv", rc);
    free(cnt), free(dsp);
    return rc;
}

/* Every rank's `mine` (counts[r] floats) into all, in rank order: on rank 0
 * alone (to_all false) or on every rank. */
static int gather(const dist *d, const float *mine, float *all, const size_t *counts, bool to_all, gerr *e) {
    if (d->size == 1) {
        memmove(all, mine, sizeof(float) * counts[0]);
        return 0;
    }
    int *cnt, *dsp;
    int rc = int_layout(d, counts, &cnt, &dsp, e);
    if (rc) return rc;
    rc = to_all ? MPI_Allgatherv(mine, cnt[d->rank], MPI_FLOAT, all, cnt, dsp, MPI_FLOAT, MPI_COMM_WORLD)
                : MPI_Gatherv(mine, cnt[d->rank], MPI_FLOAT, all, cnt, dsp, MPI_FLOAT, 0, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) rc = dist_mpi_error(e, to_all ? "MPI_Allgatherv" : "MPI_Gatherv", rc);
    free(cnt), free(dsp);
    return rc;
}

int dist_gather_floats(const dist *d, const float *mine, float *all, const size_t *counts, gerr *e) {
    return gather(d, mine, all, counts, false, e);
}

int dist_allgatherv_floats(const dist *d, const float *mine, float *all, const size_t *counts, gerr *e) {
    return gather(d, mine, all, counts, true, e);
}

int dist_allgather_bytes(const dist *d, const void *mine, void *all, size_t n, gerr *e) {
    if (d->size == 1) {
        memmove(all, mine, n);
        return 0;
    }
    if (n > INT_MAX) return gerr_set(e, EX_SOFTWARE, "MPI_Allgather: %zu bytes do not fit one call", n);
    int rc = MPI_Allgather(mine, (int)n, MPI_BYTE, all, (int)n, MPI_BYTE, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : dist_mpi_error(e, "MPI_Allgather", rc);
}
