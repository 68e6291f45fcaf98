/* The instruction sets the MXFP4 matmul and the products on decoded tiles
 * (packed_mxfp4.h, packed_tile.h) have a path for. Every path gives the same
 * bits; the SIMD ones are faster. Tests and benchmarks pick a path by name
 * to compare them; callers take packed_isa_best(). */
#ifndef GRPO_OPS_PACKED_ISA_H
#define GRPO_OPS_PACKED_ISA_H

#include <stdbool.h>

/* Slowest first: portable C, AVX2 with FMA, AVX-512F (with AVX2 and FMA). */
typedef enum { PACKED_SCALAR, PACKED_AVX2, PACKED_AVX512, PACKED_ISAS } packed_isa;

/* This CPU runs the path (the portable one runs everywhere). */
bool packed_isa_has(packed_isa isa);

/* The fastest path this CPU runs. */
packed_isa packed_isa_best(void);

/* "scalar", "avx2" or "avx512"; "?" for anything else. */
const char *packed_isa_name(packed_isa isa);

#endif
