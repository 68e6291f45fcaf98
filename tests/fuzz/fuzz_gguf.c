/* libFuzzer target: any bytes through the GGUF parser. A malformed file must
 * give a one-line EX_DATAERR naming the input, never a crash or a read
 * outside the buffer; a well-formed one must let every KV be read (arrays
 * element by element, nested ones walked) and every tensor of a supported
 * type be dequantized. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "formats/quant.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reads v and, for arrays, every element down to the leaves. */
static unsigned touch(const gguf_value *v, int depth) {
    unsigned sum = (unsigned)v->type;
    uint64_t u;
    int64_t i;
    double d;
    float f;
    bool b;
    gguf_str s;
    if (gguf_value_u64(v, &u)) sum += (unsigned)u;
    if (gguf_value_i64(v, &i)) sum += (unsigned)i;
    if (gguf_value_f64(v, &d)) sum += d > 0;
    if (gguf_value_f32(v, &f)) sum += f > 0;
    if (gguf_value_bool(v, &b)) sum += b;
    if (gguf_value_str(v, &s)) {
        for (size_t k = 0; k < s.len; k++) sum += (unsigned char)s.ptr[k];
    }
    if (v->type == GGUF_ARRAY) {
        if (depth > GGUF_MAX_DEPTH) abort(); /* the parser caps nesting */
        /* Bounded so a long array of nested arrays stays quick. */
        uint64_t n = v->count < 4096 ? v->count : 4096;
        for (uint64_t k = 0; k < n; k++) {
            gguf_value e = gguf_array_at(v, k);
            sum += touch(&e, depth + 1);
        }
    }
    return sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* A private heap copy so ASan sees the exact end of the "file". */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    if (size) memcpy(copy, data, size);
    gguf_file f;
    gerr e = {0};
    if (gguf_open_memory(&f, copy, size, "fuzz", &e) == 0) {
        unsigned sum = 0;
        for (size_t i = 0; i < f.n_kv; i++) {
            if (gguf_find_kv(&f, f.kvs[i].key) != &f.kvs[i]) abort();
            sum += touch(&f.kvs[i].v, 0);
        }
        for (size_t i = 0; i < f.n_tensors; i++) {
            const gguf_tensor *t = &f.tensors[i];
            if (gguf_find_tensor(&f, t->name) != t) abort();
            const uint8_t *p = t->data;
            if (p < copy || t->nbytes > size || p + t->nbytes > copy + size) abort();
            if (t->numel > (1u << 20)) continue; /* bounded work per input */
            float *out = malloc((t->numel ? t->numel : 1) * sizeof *out);
            if (!out) continue;
            int rc = gguf_tensor_to_f32(&f, t, out, &e);
            if (quant_supported(t->type) ? rc != 0 : rc != EX_DATAERR) abort();
            for (uint64_t k = 0; k < t->numel && !rc; k++) sum += out[k] > 0;
            free(out);
        }
        volatile unsigned sink = sum;
        (void)sink;
        gguf_close(&f);
    } else if (e.code != EX_DATAERR || strchr(e.msg, '\n') || strncmp(e.msg, "fuzz: ", 6)) {
        abort();
    }
    free(copy);
    return 0;
}
