/* The element types a written model takes: hf_dir.h's weights (grpo-update
 * writes f32) and grpo-export --dtype. */
#ifndef GRPO_EXPORT_DTYPE_H
#define GRPO_EXPORT_DTYPE_H

#include <string.h>
#include <sysexits.h>

#include "../util/err.h"

typedef enum { EXPORT_F32, EXPORT_F16, EXPORT_BF16, EXPORT_Q8_0, EXPORT_Q4_K } export_dtype;

static inline const char *export_dtype_name(export_dtype d) {
    static const char *const names[] = {"f32", "f16", "bf16", "q8_0", "q4_k"};
    return names[d];
}

static inline int export_dtype_parse(const char *s, export_dtype *d, gerr *e) {
    for (int i = EXPORT_F32; i <= EXPORT_Q4_K; i++)
        if (!strcmp(s, export_dtype_name((export_dtype)i))) {
            *d = (export_dtype)i;
            return 0;
        }
    return gerr_set(e, EX_USAGE, "--dtype: expected f32, f16, bf16, q8_0 or q4_k, got '%s'", s);
}

#endif
