/* Weights packed for the inference matmul y = x W^T.
 *
 * OpenBLAS copies ("packs") W into its kernel's panel layout on every call;
 * at decode batch sizes (tens of rows) that copy costs about a fifth of the
 * step. A model used only for inference is packed once instead: W [N, K]
 * (row-major, HF's [out, in]) becomes ceil(N/32) panels, panel p holding
 * columns 32p .. 32p+31 as [K][32] (zero-padded past N). The kernel (AVX-512,
 * 8 rows x 32 columns of accumulators in registers; on AVX2 with FMA the
 * same block in four passes) streams one panel per block of rows. Each
 * output is fused multiply-adds over k in order from zero, then the bias:
 * results depend neither on the thread count, nor on the rows beside a row,
 * nor on which of the two kernels ran. */
#ifndef GRPO_MODEL_PACKED_H
#define GRPO_MODEL_PACKED_H

#include <stdbool.h>
#include <stddef.h>

enum { PACKED_NR = 32 /* columns per panel */, PACKED_MR = 8 /* rows per kernel call */ };

/* The CPU runs a packed kernel (AVX-512F, or AVX2 with FMA). When false
 * nothing is packed and callers keep OpenBLAS. */
bool packed_supported(void);

/* "avx512f" or "avx2": the kernel packed_matmul runs here (NULL when none). */
const char *packed_kernel(void);

/* Floats of W [n, k] packed (n rounded up to whole panels). */
size_t packed_floats(int n, int k);

/* dst[packed_floats(n, k)] = W [n, k] in panels; dst must not overlap w. */
void packed_pack(float *dst, const float *w, int n, int k);

/* out[m, n] = in[m, k] @ W^T (+ bias[n]) with W packed by packed_pack.
 * OpenMP-parallel over panels. Only when packed_supported(). */
void packed_matmul(float *out, const float *in, const float *w_packed, const float *bias, int m, int k, int n);

#endif
