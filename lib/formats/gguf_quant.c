#include "gguf_quant.h"

#include <math.h>
#include <string.h>

#include "../util/half.h"

void gguf_quantize_q8_0(const float *x, void *out, size_t n) {
    unsigned char *o = out;
    for (size_t b = 0; b < n / Q8_0_BLOCK; b++, x += Q8_0_BLOCK, o += Q8_0_BYTES) {
        float amax = 0;
        for (int j = 0; j < Q8_0_BLOCK; j++) amax = fmaxf(amax, fabsf(x[j]));
        /* float32 throughout, in ggml's order: d, then its inverse, then x * id */
        float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        uint16_t h = f32_to_f16(d);
        o[0] = (unsigned char)(h & 0xFF);
        o[1] = (unsigned char)(h >> 8);
        for (int j = 0; j < Q8_0_BLOCK; j++) {
            float v = x[j] * id;
            o[2 + j] = (unsigned char)(int8_t)roundf(v); /* half away from zero, as ggml and gguf-py */
        }
    }
}

void gguf_convert(uint32_t type, const float *x, void *out, size_t n) {
    switch (type) {
    case GGML_TYPE_F32: memcpy(out, x, n * sizeof *x); break;
    case GGML_TYPE_F16: f32_to_f16_array(x, out, n); break;
    case GGML_TYPE_BF16: f32_to_bf16_array(x, out, n); break;
    case GGML_TYPE_Q8_0: gguf_quantize_q8_0(x, out, n); break;
    default: break; /* the writer only plans the four types above */
    }
}
