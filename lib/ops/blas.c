#include "blas.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

char *openblas_get_corename(void);
int openblas_get_parallel(void);
void openblas_set_num_threads(int n);

const char *blas_core_name(void) { return openblas_get_corename(); }

/* OpenBLAS's kernels: Debian's 0.3.21 takes recent Intel cores for old ones
 * and runs SSE3 kernels; name the family it should use. true when set. */
static bool choose_core(void) {
    if (getenv("OPENBLAS_CORETYPE")) return false; /* the user's choice, or our re-run */
    const char *core = openblas_get_corename();
    if (!core || (strcasecmp(core, "Prescott") && strcasecmp(core, "Core2") && strcasecmp(core, "Unknown"))) return false;
    const char *better = NULL;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq"))
        better = "SkylakeX";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        better = "Haswell";
    return better && setenv("OPENBLAS_CORETYPE", better, 1) == 0;
}

/* OpenMP's threads wait for work by spinning GOMP_SPINCOUNT times before they
 * sleep; libgomp's 300,000 spins make tools that share cores (a pipe, make
 * -j, a second job) take turns slowly (bench/omp_wait.sh). Unless the user
 * chose (OMP_WAIT_POLICY or GOMP_SPINCOUNT), the tools spin
 * BLAS_DEFAULT_SPINCOUNT times. true when set. */
static bool choose_wait(void) {
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return false;
    return setenv("GOMP_SPINCOUNT", BLAS_DEFAULT_SPINCOUNT, 1) == 0;
}

const char *blas_omp_wait(void) {
    const char *count = getenv("GOMP_SPINCOUNT");
    if (count) return count;
    const char *p = getenv("OMP_WAIT_POLICY");
    return p ? p : "libgomp's default";
}

void blas_ensure_fast_kernels(char **argv) {
    bool core = choose_core();
    bool wait = choose_wait();
    if (!core && !wait) return;
    execv("/proc/self/exe", argv);
    /* exec failed: carry on with what libraries chose, still correct */
}

/* openblas_get_parallel(): 2 when OpenBLAS is the OpenMP build. */
bool blas_shares_openmp(void) { return openblas_get_parallel() == 2; }

void blas_setup_threads(void) {
    if (!blas_shares_openmp()) openblas_set_num_threads(1);
}

void blas_set_threads(int n) {
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
    if (blas_shares_openmp()) openblas_set_num_threads(n);
}
