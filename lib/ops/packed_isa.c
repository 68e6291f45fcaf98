#include "packed_isa.h"

bool packed_isa_has(packed_isa isa) {
    switch (isa) {
    case PACKED_SCALAR: return true;
#if defined(__x86_64__) && defined(__GNUC__)
    case PACKED_AVX2:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case PACKED_AVX512:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512f") && packed_isa_has(PACKED_AVX2);
#endif
    default: return false;
    }
}

packed_isa packed_isa_best(void) {
    return packed_isa_has(PACKED_AVX512) ? PACKED_AVX512 : packed_isa_has(PACKED_AVX2) ? PACKED_AVX2 : PACKED_SCALAR;
}

const char *packed_isa_name(packed_isa isa) {
    static const char *const names[PACKED_ISAS] = {"scalar", "avx2", "avx512"};
    return isa >= 0 && isa < PACKED_ISAS ? names[isa] : "?";
}
