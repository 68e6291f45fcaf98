/* lib/dataparallel without a launcher: which environments count as an MPI launch,
 * and that a process outside one is rank 0 of 1 whose collectives are plain
 * copies (the MPI paths run under mpirun in tests/bats/update_mpi.bats). */
#include <stdlib.h>

#include "check.h"
#include "dataparallel/dist.h"

static const char *const launch_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_STEP_ID",
                                          "SLURM_STEP_NUM_TASKS"};

static void clear_env(void) {
    for (size_t i = 0; i < sizeof launch_vars / sizeof *launch_vars; i++) unsetenv(launch_vars[i]);
}

static void test_launched(void) {
    TEST("dist_launched: mpirun, PMI, PMIx, an srun step of several tasks; not a batch script");
    clear_env();
    CHECK(!dist_launched());
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    CHECK(dist_launched());
    setenv("OMPI_COMM_WORLD_SIZE", "", 1);
    CHECK(!dist_launched());
    clear_env();
    setenv("PMI_SIZE", "4", 1);
    CHECK(dist_launched());
    clear_env();
    setenv("PMIX_RANK", "0", 1);
    CHECK(dist_launched());
    clear_env();
    setenv("SLURM_STEP_NUM_TASKS", "8", 1); /* an allocation's batch script: no step */
    CHECK(!dist_launched());
    setenv("SLURM_STEP_ID", "0", 1);
    CHECK(dist_launched());
    setenv("SLURM_STEP_NUM_TASKS", "1", 1); /* a one-task step needs no MPI */
    CHECK(!dist_launched());
    clear_env();
}

static void test_single(void) {
    TEST("outside a launcher: rank 0 of 1, no MPI, collectives copy, agreement returns the local status");
    clear_env();
    dist d;
    gerr e = {0};
    CHECK_EQ_INT(dist_start(&d, &e), 0);
    CHECK(d.rank == 0 && d.size == 1 && !d.mpi);
    CHECK_EQ_INT(dist_default_threads(&d), 0);
    CHECK_EQ_INT(dist_agree(&d, 0, &e), 0);
    CHECK_EQ_INT(dist_agree(&d, EX_DATAERR, &e), EX_DATAERR);
    CHECK_EQ_INT(dist_check_same(&d, "anything", "x", EX_USAGE, &e), 0);
    float g[3] = {1.5f, -2.0f, 0.25f}, all[3] = {0};
    size_t counts[1] = {3}, bounds[2] = {0, 3};
    CHECK_EQ_INT(dist_sum_floats(&d, g, 3, &e), 0);
    CHECK(g[0] == 1.5f && g[1] == -2.0f && g[2] == 0.25f);
    CHECK_EQ_INT(dist_reduce_scatter_floats(&d, g, bounds, &e), 0);
    CHECK_EQ_INT(dist_allgather_floats(&d, g, bounds, &e), 0);
    CHECK(g[0] == 1.5f && g[1] == -2.0f && g[2] == 0.25f);
    CHECK_EQ_INT(dist_gather_floats(&d, g, all, counts, &e), 0);
    CHECK(all[0] == 1.5f && all[2] == 0.25f);
    all[0] = 0;
    CHECK_EQ_INT(dist_allgatherv_floats(&d, g, all, counts, &e), 0);
    CHECK(all[0] == 1.5f);
    double s = 3.0;
    CHECK_EQ_INT(dist_sum_doubles(&d, &s, 1, &e), 0);
    CHECK(s == 3.0);
    long v = 7, out = 0;
    CHECK_EQ_INT(dist_allgather_bytes(&d, &v, &out, sizeof v, &e), 0);
    CHECK_EQ_INT(out, 7);
    dist_end(&d);
    CHECK(!d.mpi);
}

int main(void) {
    test_launched();
    test_single();
    return check_done();
}
