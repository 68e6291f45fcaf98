#include "blas.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

char *openblas_get_corename(void);

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
