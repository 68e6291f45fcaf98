/* GGML block layouts and dequantization (see quant.h). Each dequantizer
 * works one block at a time and reads halves with memcpy, since blocks sit
 * at arbitrary offsets of a mapped file. Products and sums are separate
 * statements so no compiler fuses them into an FMA: gguf-py rounds each one,
 * and bit-exact parity with it is what the tests check. */
#include "quant.h"

#include <string.h>

#include "../ops/packed_mxfp4.h"
#include "../util/half.h"

typedef struct {
    const char *name;
    uint16_t block, bytes; /* values per block, bytes per block */
} type_info;

/* Every type ggml defines, so a file with a type we cannot dequantize still
 * opens and the error names the type. Gaps are numbers ggml retired. */
static const type_info types[GGML_TYPE_COUNT] = {
    [0] = {"F32", 1, 4},          [1] = {"F16", 1, 2},           [2] = {"Q4_0", 32, 18},
    [3] = {"Q4_1", 32, 20},       [6] = {"Q5_0", 32, 22},        [7] = {"Q5_1", 32, 24},
    [8] = {"Q8_0", 32, 34},       [9] = {"Q8_1", 32, 40},        [10] = {"Q2_K", 256, 84},
    [11] = {"Q3_K", 256, 110},    [12] = {"Q4_K", 256, 144},     [13] = {"Q5_K", 256, 176},
    [14] = {"Q6_K", 256, 210},    [15] = {"Q8_K", 256, 292},     [16] = {"IQ2_XXS", 256, 66},
    [17] = {"IQ2_XS", 256, 74},   [18] = {"IQ3_XXS", 256, 98},   [19] = {"IQ1_S", 256, 50},
    [20] = {"IQ4_NL", 32, 18},    [21] = {"IQ3_S", 256, 110},    [22] = {"IQ2_S", 256, 82},
    [23] = {"IQ4_XS", 256, 136},  [24] = {"I8", 1, 1},           [25] = {"I16", 1, 2},
    [26] = {"I32", 1, 4},         [27] = {"I64", 1, 8},          [28] = {"F64", 1, 8},
    [29] = {"IQ1_M", 256, 56},    [30] = {"BF16", 1, 2},         [34] = {"TQ1_0", 256, 54},
    [35] = {"TQ2_0", 256, 66},    [39] = {"MXFP4", 32, 17},
};

const char *quant_type_name(uint32_t type) { return type < GGML_TYPE_COUNT ? types[type].name : NULL; }

size_t quant_block_size(uint32_t type) { return type < GGML_TYPE_COUNT ? types[type].block : 0; }

size_t quant_type_size(uint32_t type) { return type < GGML_TYPE_COUNT ? types[type].bytes : 0; }

bool quant_supported(uint32_t type) {
    switch (type) {
    case GGML_TYPE_F32: case GGML_TYPE_F16: case GGML_TYPE_BF16: case GGML_TYPE_Q8_0:
    case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1:
    case GGML_TYPE_Q4_K: case GGML_TYPE_Q6_K: case GGML_TYPE_MXFP4:
        return true;
    default:
        return false;
    }
}

size_t quant_row_bytes(uint32_t type, size_t n) {
    size_t block = quant_block_size(type), bytes;
    if (!block || n % block) return 0;
    if (__builtin_mul_overflow(n / block, quant_type_size(type), &bytes)) return 0;
    return bytes;
}

static float half_at(const unsigned char *p) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return f16_to_f32(h);
}

/* ---- one block each: src points at the block, y receives its values ------ */

/* Q8_0: d (f16), 32 x int8. y = q * d. */
static void block_q8_0(const unsigned char *b, float *y) {
    float d = half_at(b);
    for (int i = 0; i < 32; i++) y[i] = (float)(int8_t)b[2 + i] * d;
}

/* Q4_0: d, 16 bytes of nibbles: low nibbles are values 0..15, high 16..31. y = (q - 8) * d. */
static void block_q4_0(const unsigned char *b, float *y) {
    float d = half_at(b);
    const unsigned char *qs = b + 2;
    for (int j = 0; j < 16; j++) {
        y[j] = (float)((qs[j] & 0x0F) - 8) * d;
        y[j + 16] = (float)((qs[j] >> 4) - 8) * d;
    }
}

/* Q4_1: d, m, 16 bytes of nibbles as Q4_0. y = q * d + m. */
static void block_q4_1(const unsigned char *b, float *y) {
    float d = half_at(b), m = half_at(b + 2);
    const unsigned char *qs = b + 4;
    for (int j = 0; j < 16; j++) {
        float lo = (float)(qs[j] & 0x0F) * d, hi = (float)(qs[j] >> 4) * d;
        y[j] = lo + m;
        y[j + 16] = hi + m;
    }
}

/* Q5_0 / Q5_1: d [, m], qh (32 high bits, bit i for value i), 16 bytes of low
 * nibbles as Q4_0. Q5_0: y = (q - 16) * d; Q5_1: y = q * d + m. */
static void block_q5(const unsigned char *b, float *y, int with_min) {
    float d = half_at(b), m = with_min ? half_at(b + 2) : 0.0f;
    const unsigned char *p = b + (with_min ? 4 : 2);
    uint32_t qh = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    const unsigned char *qs = p + 4;
    for (int i = 0; i < 32; i++) {
        int lo = i < 16 ? qs[i] & 0x0F : qs[i - 16] >> 4;
        int q = lo | (int)((qh >> i) & 1) << 4;
        if (with_min) {
            float t = (float)q * d;
            y[i] = t + m;
        } else {
            y[i] = (float)(q - 16) * d;
        }
    }
}

/* Q4_K: d, dmin (f16), 12 bytes packing eight 6-bit scales and mins, 128
 * bytes of nibbles. Value i is in sub-block s = i / 32; sub-block 2c takes
 * the low nibbles of bytes 32c..32c+31, sub-block 2c+1 their high nibbles.
 * y = (d * sc[s]) * q - dmin * mn[s]. */
static void block_q4_k(const unsigned char *b, float *y) {
    float d = half_at(b), dmin = half_at(b + 2);
    const unsigned char *sc = b + 4, *qs = b + 16;
    for (int s = 0; s < 8; s++) {
        int scale, min;
        if (s < 4) {
            scale = sc[s] & 63;
            min = sc[s + 4] & 63;
        } else {
            scale = (sc[s + 4] & 0x0F) | (sc[s - 4] >> 6) << 4;
            min = (sc[s + 4] >> 4) | (sc[s] >> 6) << 4;
        }
        float ds = d * (float)scale, ms = dmin * (float)min;
        const unsigned char *q = qs + 32 * (s / 2);
        int shift = 4 * (s % 2);
        for (int l = 0; l < 32; l++) {
            float t = ds * (float)((q[l] >> shift) & 0x0F);
            y[32 * s + l] = t - ms;
        }
    }
}

/* Q6_K: ql (128 bytes of low nibbles), qh (64 bytes of 2-bit highs), 16 int8
 * scales, d (f16). Value i (group g = i / 32, lane l = i % 32, half h = g / 4,
 * r = g % 4): low nibble of ql[64h + 32(r % 2) + l] shifted by 4(r / 2),
 * high bits qh[32h + l] >> 2r. y = (d * scale[i / 16]) * (q - 32). */
static void block_q6_k(const unsigned char *b, float *y) {
    const unsigned char *ql = b, *qh = b + 128;
    const int8_t *scales = (const int8_t *)(b + 192);
    float d = half_at(b + 208);
    for (int i = 0; i < QK_K; i++) {
        int g = i / 32, l = i % 32, h = g / 4, r = g % 4;
        int lo = (ql[64 * h + 32 * (r % 2) + l] >> (4 * (r / 2))) & 0x0F;
        int hi = (qh[32 * h + l] >> (2 * r)) & 3;
        float ds = d * (float)scales[i / 16];
        y[i] = ds * (float)((lo | hi << 4) - 32);
    }
}

/* MXFP4: e (E8M0), 16 bytes of E2M1 codes, low nibbles values 0..15, high
 * 16..31; y = code's value in halves * 2^(e - 128), exact (packed_mxfp4.h's
 * values: ggml's dequantize_row_mxfp4 bit for bit). */
static void block_mxfp4(const unsigned char *b, float *y) {
    float d = mx4w_scale(b[0]);
    for (int j = 0; j < 16; j++) {
        y[j] = (float)MX4W_HALF_UNITS[b[1 + j] & 0x0F] * d;
        y[j + 16] = (float)MX4W_HALF_UNITS[b[1 + j] >> 4] * d;
    }
}

static void one_block(uint32_t type, const unsigned char *b, float *y) {
    switch (type) {
    case GGML_TYPE_Q8_0: block_q8_0(b, y); break;
    case GGML_TYPE_Q4_0: block_q4_0(b, y); break;
    case GGML_TYPE_Q4_1: block_q4_1(b, y); break;
    case GGML_TYPE_Q5_0: block_q5(b, y, 0); break;
    case GGML_TYPE_Q5_1: block_q5(b, y, 1); break;
    case GGML_TYPE_Q4_K: block_q4_k(b, y); break;
    case GGML_TYPE_Q6_K: block_q6_k(b, y); break;
    case GGML_TYPE_MXFP4: block_mxfp4(b, y); break;
    default: break; /* unreachable: quant_supported first */
    }
}

static int dequantize(uint32_t type, const void *src, float *dst, size_t n, bool threads, gerr *e) {
    const char *name = quant_type_name(type);
    if (!name) return gerr_set(e, EX_DATAERR, "unknown tensor type %u", type);
    if (!quant_supported(type))
        return gerr_set(e, EX_DATAERR,
                        "unsupported tensor type %s (%u): supported are F32, F16, BF16, Q8_0, Q4_0, "
                        "Q4_1, Q5_0, Q5_1, Q4_K, Q6_K, MXFP4",
                        name, type);
    size_t block = quant_block_size(type), bytes = quant_type_size(type);
    if (n % block)
        return gerr_set(e, EX_DATAERR, "%zu values of type %s: not a multiple of its block size %zu",
                        n, name, block);
    const unsigned char *p = src;
    switch (type) {
    case GGML_TYPE_F32:
        memcpy(dst, p, n * sizeof *dst);
        return 0;
    case GGML_TYPE_F16:
    case GGML_TYPE_BF16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, sizeof h);
            dst[i] = type == GGML_TYPE_F16 ? f16_to_f32(h) : bf16_to_f32(h);
        }
        return 0;
    default:
        break;
    }
    /* blocks are independent: loading a model is dominated by this loop */
    const long long n_blocks = (long long)(n / block);
    if (!threads) { /* no OpenMP region at all: its entry costs ~1 us a call */
        for (long long k = 0; k < n_blocks; k++) one_block(type, p + k * bytes, dst + k * block);
        return 0;
    }
#pragma omp parallel for schedule(static) if (n_blocks >= 4096)
    for (long long k = 0; k < n_blocks; k++) one_block(type, p + k * bytes, dst + k * block);
    return 0;
}

int quant_dequantize(uint32_t type, const void *src, float *dst, size_t n, gerr *e) {
    return dequantize(type, src, dst, n, true, e);
}

int quant_dequantize_here(uint32_t type, const void *src, float *dst, size_t n, gerr *e) {
    return dequantize(type, src, dst, n, false, e);
}
