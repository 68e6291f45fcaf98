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

void blas_ensure_fast_kernels(char **argv) {
    if (getenv("OPENBLAS_CORETYPE")) return; /* the user's choice, or our re-run */
    const char *core = openblas_get_corename();
    if (!core || (strcasecmp(core, "Prescott") && strcasecmp(core, "Core2") && strcasecmp(core, "Unknown"))) return;
    const char *better = NULL;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq"))
        better = "SkylakeX";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        better = "Haswell";
    if (!better || setenv("OPENBLAS_CORETYPE", better, 1) != 0) return;
    execv("/proc/self/exe", argv);
    /* exec failed: carry on with the slow kernels, still correct */
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
