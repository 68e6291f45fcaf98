/* OpenBLAS picks its kernels for the CPU once, when the library loads.
 * Debian 12's OpenBLAS 0.3.21 does not know recent Intel cores (seen here:
 * family 6 model 207) and falls back to its Prescott (SSE3) kernels, about
 * ten times slower than the AVX-512 ones the CPU can run. The choice can
 * only be made through OPENBLAS_CORETYPE before the library loads, so when
 * the fallback is detected the program re-runs itself with it set. */
#ifndef GRPO_BLAS_H
#define GRPO_BLAS_H

#include <stdbool.h>

/* GOMP_SPINCOUNT the tools run with unless OMP_WAIT_POLICY or GOMP_SPINCOUNT
 * is set (blas.c says why; bench/README.md has the numbers). */
#define BLAS_DEFAULT_SPINCOUNT "1000"

/* Call first thing in main: sets what OpenBLAS and OpenMP read from the
 * environment when they load (the kernel family on CPUs Debian's OpenBLAS
 * does not know, OpenMP's spin before a thread sleeps) and re-runs the
 * program once to apply it. Returns only when no re-run is needed (or the
 * re-run failed, and the libraries' choices stay). */
void blas_ensure_fast_kernels(char **argv);
/* How OpenMP's threads wait, as the environment says: GOMP_SPINCOUNT's
 * value, else OMP_WAIT_POLICY's ("passive"), else "libgomp's default". */
const char *blas_omp_wait(void);
/* The kernel family OpenBLAS runs ("SkylakeX", "Haswell", ...). */
const char *blas_core_name(void);

/* Whether OpenBLAS is its OpenMP build, running on our thread pool. */
bool blas_shares_openmp(void);
/* With a pthreads OpenBLAS, sets it to one thread (a process-wide OpenBLAS
 * setting) so that matmul_forward splits the work on our OpenMP threads and
 * no second pool of spinning threads competes with ours. With the OpenMP
 * OpenBLAS (one shared pool) it changes nothing. */
void blas_setup_threads(void);
/* --threads N: the OpenMP pool, which the OpenMP OpenBLAS shares. */
void blas_set_threads(int n);

#endif
