/* libFuzzer target: any bytes through the safetensors parser. A malformed
 * file must give an error, never a crash or a read outside the buffer; a
 * well-formed one must hand out tensors whose every byte can be read. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* A private heap copy so ASan sees the exact end of the "file". */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    if (size) memcpy(copy, data, size);
    st_file f;
    gerr e = {0};
    if (st_open_memory(&f, copy, size, "fuzz", &e) == 0) {
        unsigned sum = 0;
        for (size_t i = 0; i < f.n_tensors; i++) {
            const st_tensor *t = &f.tensors[i];
            const uint8_t *p = t->data;
            for (size_t j = 0; j < t->nbytes; j++) sum += p[j];
            if (st_find(&f, t->name) == NULL) abort(); /* every listed name is found */
            if (t->dtype == ST_F32 || t->dtype == ST_F16 || t->dtype == ST_BF16 || t->dtype == ST_F64) {
                float *out = malloc(((size_t)t->numel ? (size_t)t->numel : 1) * sizeof *out);
                if (out && st_tensor_to_f32(&f, t, out, &e) != 0) abort();
                free(out);
            }
        }
        for (size_t i = 0; i < f.n_meta; i++)
            if (st_meta_get(&f, f.meta[i].key) == NULL) abort();
        /* Keep the reads from being optimised away. */
        volatile unsigned sink = sum;
        (void)sink;
        st_close(&f);
    } else if (e.code != EX_DATAERR || strchr(e.msg, '\n') || strncmp(e.msg, "fuzz: ", 6)) {
        abort(); /* errors are one-line EX_DATAERR messages naming the input */
    }
    free(copy);
    return 0;
}
