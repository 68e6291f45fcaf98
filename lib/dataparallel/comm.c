/* Who this process is in an MPI job, and agreeing on failures (dist.h).
 *
 * libmpi is linked (only into the programs that use it, with --as-needed)
 * rather than dlopen'ed: MPI's handles are implementation-specific (Open
 * MPI's MPI_COMM_WORLD is the address of a data symbol, MPICH's an integer),
 * so a dlopen would tie this code to one implementation's binary interface,
 * while linking compiles against whichever mpi.h the machine has. The price
 * outside MPI is the dynamic loader mapping libmpi (about 1 ms, measured on
 * the dev machine against a 100 ms+ update); MPI_Init, the real start-up
 * cost, runs only under a launcher. */
#include "dist.h"

#include <mpi.h>
#include <stdio.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpi_err.h"

/* A positive integer from the environment, else 0. */
static long env_count(const char *name) {
    const char *v = getenv(name);
    if (!v || !*v) return 0;
    char *end;
    long n = strtol(v, &end, 10);
    return *end == '\0' && n > 0 ? n : 0;
}

bool dist_launched(void) {
    if (env_count("OMPI_COMM_WORLD_SIZE") || env_count("PMI_SIZE") || getenv("PMIX_RANK")) return true;
    /* an srun step of several tasks (the batch script itself has no step task count > 1) */
    return getenv("SLURM_STEP_ID") && env_count("SLURM_STEP_NUM_TASKS") > 1;
}

/* The size the launcher announced, 0 when it said none. */
static long launcher_size(void) {
    long n = env_count("OMPI_COMM_WORLD_SIZE");
    if (!n) n = env_count("PMI_SIZE");
    if (!n && getenv("SLURM_STEP_ID")) n = env_count("SLURM_STEP_NUM_TASKS");
    return n;
}

int dist_mpi_error(gerr *e, const char *call, int rc) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "error %d", rc);
    return gerr_set(e, EX_UNAVAILABLE, "%s: %s", call, text);
}

int dist_start(dist *d, gerr *e) {
    memset(d, 0, sizeof *d);
    d->size = d->local_size = 1;
    if (!dist_launched()) return 0;
    int provided, rc;
    /* only the main thread calls MPI; OpenMP threads never do */
    if ((rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided)) != MPI_SUCCESS)
        return dist_mpi_error(e, "MPI_Init_thread", rc);
    d->mpi = true;
    if ((rc = MPI_Comm_rank(MPI_COMM_WORLD, &d->rank)) != MPI_SUCCESS ||
        (rc = MPI_Comm_size(MPI_COMM_WORLD, &d->size)) != MPI_SUCCESS)
        return dist_mpi_error(e, "MPI_Comm_rank/size", rc);
    MPI_Comm local;
    if ((rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &local)) !=
            MPI_SUCCESS ||
        (rc = MPI_Comm_size(local, &d->local_size)) != MPI_SUCCESS ||
        (rc = MPI_Comm_rank(local, &d->local_rank)) != MPI_SUCCESS || (rc = MPI_Comm_free(&local)) != MPI_SUCCESS)
        return dist_mpi_error(e, "MPI_Comm_split_type", rc);
    long want = launcher_size();
    if (want && want != d->size)
        return gerr_set(e, EX_UNAVAILABLE,
                        "the launcher started %ld tasks but MPI sees %d: with srun, give --mpi=pmix (or the MPI "
                        "plugin your cluster uses); nothing written",
                        want, d->size);
    return 0;
}

void dist_end(dist *d) {
    if (d->mpi) MPI_Finalize();
    d->mpi = false;
}

int dist_default_threads(const dist *d) {
    if (!d->mpi) return 0;
    cpu_set_t set;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int mine = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)online;
    /* bound by the launcher: its CPUs are its own; unbound: share the machine */
    int n = mine < online ? mine : mine / (d->local_size > 0 ? d->local_size : 1);
    return n > 0 ? n : 1;
}

int dist_agree(const dist *d, int rc, gerr *e) {
    if (d->size == 1) return rc;
    int *all = xcalloc((size_t)d->size, sizeof *all);
    int mrc = MPI_Allgather(&rc, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
    if (mrc != MPI_SUCCESS) {
        free(all);
        return rc ? rc : dist_mpi_error(e, "MPI_Allgather", mrc);
    }
    if (!rc) {
        for (int r = 0; r < d->size && !rc; r++) {
            if (all[r])
                rc = gerr_set(e, all[r], "rank %d of %d: rank %d stopped with exit %d (its own message says why)",
                              d->rank, d->size, r, all[r]);
        }
    }
    free(all);
    return rc;
}
