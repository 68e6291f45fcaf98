#include "gguf_quant.h"

#include <math.h>
#include <string.h>

#include "../ops/packed_mxfp4.h"
#include "../ops/packed_q4k.h"
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

/* The code of value q (in halves of the scale), or -1 when no code has it:
 * +0 code 0, -0 code 8 (transformers' -0, which ggml reads as +0). */
static int mxfp4_code(float q) {
    if (q == 0) return signbit(q) ? 8 : 0;
    for (int c = 0; c < 16; c++)
        if (c != 8 && (float)MX4W_HALF_UNITS[c] == q) return c;
    return -1;
}

/* One block of 32 values as e and their codes, with the smallest scale
 * that holds them all: at least amax / 12 halves. */
static bool mxfp4_block(const float *x, int *scale, int code[MX4W_K_BLOCK]) {
    float amax = 0;
    for (int j = 0; j < MX4W_K_BLOCK; j++) amax = fmaxf(amax, fabsf(x[j]));
    if (!isfinite(amax)) return false;
    int e = 0;
    if (amax > 0) { /* 2^(e - 128) >= amax / 12, then upwards while amax fits a code */
        int ex;
        frexpf(amax / 12, &ex);
        e = ex + 127 < 0 ? 0 : ex + 127;
        while (e > 0 && amax / mx4w_scale((uint8_t)(e - 1)) <= 12) e--;
    }
    for (; e < MX4W_NAN_SCALE; e++) {
        int j = 0;
        float d = mx4w_scale((uint8_t)e);
        for (; j < MX4W_K_BLOCK && (code[j] = mxfp4_code(x[j] / d)) >= 0 && MX4W_HALF_UNITS[code[j]] * d == x[j]; j++) {}
        if (j < MX4W_K_BLOCK) {
            if (amax / d < 1) return false; /* larger scales hold even fewer values */
            continue;
        }
        *scale = e;
        return true;
    }
    return false;
}

bool gguf_mxfp4_exact(const float *x, void *out, size_t n) {
    unsigned char *o = out;
    int e, code[MX4W_K_BLOCK];
    for (size_t b = 0; b < n / MX4W_K_BLOCK; b++, o += MX4W_GGUF_BYTES) {
        if (!mxfp4_block(x + b * MX4W_K_BLOCK, &e, code)) return false;
        o[0] = (unsigned char)e;
        for (int j = 0; j < 16; j++) o[1 + j] = (unsigned char)(code[j] | code[j + 16] << 4);
    }
    return true;
}

bool hf_mxfp4_exact(const float *x, void *blocks, void *scales, size_t n) {
    unsigned char *o = blocks, *s = scales;
    int e, code[MX4W_K_BLOCK];
    for (size_t b = 0; b < n / MX4W_K_BLOCK; b++, o += MX4W_HF_BYTES) {
        if (!mxfp4_block(x + b * MX4W_K_BLOCK, &e, code)) return false;
        s[b] = (unsigned char)e;
        for (int j = 0; j < 16; j++) o[j] = (unsigned char)(code[2 * j] | code[2 * j + 1] << 4);
    }
    return true;
}

void gguf_convert(uint32_t type, const float *x, void *out, size_t n) {
    switch (type) {
    case GGML_TYPE_F32: memcpy(out, x, n * sizeof *x); break;
    case GGML_TYPE_F16: f32_to_f16_array(x, out, n); break;
    case GGML_TYPE_BF16: f32_to_bf16_array(x, out, n); break;
    case GGML_TYPE_Q8_0: gguf_quantize_q8_0(x, out, n); break;
    case GGML_TYPE_MXFP4: gguf_mxfp4_exact(x, out, n); break;
    case GGML_TYPE_Q4_K: q4kw_quantize_gguf(out, x, n); break;
    default: break; /* the writer only plans the six types above */
    }
}
