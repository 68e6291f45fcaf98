/* The 8-bit panel layout (packed_q8.h): packing, unpacking, the portable
 * matmul and the dispatch to the SIMD kernels (packed_q8_avx2.c,
 * packed_q8_vnni.c). */
#include "packed_q8.h"

#include <assert.h>
#if defined(__x86_64__) && defined(__clang__)
#include <cpuid.h>
#endif
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../formats/gguf_quant.h"
#include "packed_q8_kernels.h"
#include "packed_tile.h"
#include "../util/half.h"

enum { GROUP_BYTES = Q8W_NR * 4 /* 16 columns x 4 k */ };

/* F16C (the scales' vcvtph2ps). GCC reads it from libgcc's CPU model, set
 * once per process; clang 14, which builds the fuzzers, does not know the
 * name "f16c" there, so its builds execute CPUID itself. That instruction
 * exits to the hypervisor in a VM (7-8 us each on a cloud VM); asked on
 * every q8w_matmul call it would cost decode at batch 1 a third of its time
 * (211 calls a token); GCC builds ask libgcc, which asks once. */
static bool f16c_supported(void) {
#if Q8W_X86 && defined(__clang__)
    unsigned eax, ebx, ecx, edx;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
#elif Q8W_X86
    __builtin_cpu_init();
    return __builtin_cpu_supports("f16c");
#else
    return false;
#endif
}

bool q8w_supported(void) {
#if Q8W_X86
    __builtin_cpu_init();
    return f16c_supported() && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

static int panel_count(int n) { return (n + Q8W_NR - 1) / Q8W_NR; }

size_t q8w_bytes(int n, int k) {
    assert(k % Q8W_K_BLOCK == 0);
    return (size_t)panel_count(n) * q8w_panel_bytes(k);
}

/* Offsets of block b of column col in the layout: its f16 scale, its
 * quant i (k = 32b + i). */
static size_t scale_offset(int col, int b, int k) {
    return (size_t)(col / Q8W_NR) * q8w_panel_bytes(k) + q8w_scales_at(b) + (size_t)(col % Q8W_NR) * 2;
}
static size_t quant_offset(int col, int b, int k, int i) {
    return (size_t)(col / Q8W_NR) * q8w_panel_bytes(k) + q8w_quants_at(b) +
           (size_t)(i / 4) * GROUP_BYTES + (size_t)(col % Q8W_NR) * 4 + (size_t)(i % 4);
}

/* The scale's f16 bits little-endian, as in a Q8_0 block. */
static void put_block(void *w, int col, int b, int k, uint16_t d, const int8_t *q) {
    unsigned char *bytes = w, *scale = bytes + scale_offset(col, b, k);
    scale[0] = (unsigned char)(d & 0xFF), scale[1] = (unsigned char)(d >> 8);
    for (int i = 0; i < Q8W_K_BLOCK; i++) bytes[quant_offset(col, b, k, i)] = (unsigned char)q[i];
}

static float get_block(const void *w, int col, int b, int k, int8_t *q) {
    const unsigned char *bytes = w, *scale = bytes + scale_offset(col, b, k);
    for (int i = 0; i < Q8W_K_BLOCK; i++) q[i] = (int8_t)bytes[quant_offset(col, b, k, i)];
    return f16_to_f32((uint16_t)(scale[0] | scale[1] << 8));
}

/* One 34-byte Q8_0 block (f16 d little-endian, 32 int8) into the layout. */
static void put_q8_0_block(void *w, int col, int b, int k, const unsigned char *src) {
    int8_t q[Q8W_K_BLOCK];
    memcpy(q, src + 2, sizeof q);
    put_block(w, col, b, k, (uint16_t)(src[0] | src[1] << 8), q);
}

static const int8_t zero_quants[Q8W_K_BLOCK];

/* Block b of column col of W as 34 Q8_0 bytes, from floats or from blocks. */
typedef void (*q8_0_source)(const void *src, int col, int b, int k, unsigned char out[Q8_0_BYTES]);

static void quantize_source(const void *src, int col, int b, int k, unsigned char out[Q8_0_BYTES]) {
    /* the GGUF quantizer's bytes, so q8w_pack and q8w_pack_q8_0 agree */
    gguf_quantize_q8_0((const float *)src + (size_t)col * k + (size_t)b * Q8W_K_BLOCK, out, Q8W_K_BLOCK);
}

static void q8_0_rows_source(const void *src, int col, int b, int k, unsigned char out[Q8_0_BYTES]) {
    size_t row_blocks = (size_t)(k / Q8W_K_BLOCK);
    memcpy(out, (const unsigned char *)src + ((size_t)col * row_blocks + (size_t)b) * Q8_0_BYTES, Q8_0_BYTES);
}

static void pack_panels(void *dst, const void *src, q8_0_source source, int n, int k) {
    assert(k % Q8W_K_BLOCK == 0);
    int nb = k / Q8W_K_BLOCK, panels = panel_count(n);
#pragma omp parallel for schedule(static)
    for (int p = 0; p < panels; p++) {
        unsigned char *panel = (unsigned char *)dst + (size_t)p * q8w_panel_bytes(k);
        if (nb % 2) memset(panel + q8w_scales_at(nb), 0, Q8W_SCALE_BYTES); /* the odd block's pad */
        for (int j = 0; j < Q8W_NR; j++) {
            int col = p * Q8W_NR + j;
            for (int b = 0; b < nb; b++) {
                if (col < n) {
                    unsigned char q8_0[Q8_0_BYTES];
                    source(src, col, b, k, q8_0);
                    put_q8_0_block(dst, col, b, k, q8_0);
                } else {
                    put_block(dst, col, b, k, 0, zero_quants);
                }
            }
        }
    }
}

void q8w_pack_q8_0(void *dst, const void *blocks, int n, int k) { pack_panels(dst, blocks, q8_0_rows_source, n, k); }

void q8w_pack(void *dst, const float *w, int n, int k) { pack_panels(dst, w, quantize_source, n, k); }

void q8w_unpack_row(float *dst, const void *src, int row, int k) {
    assert(k % Q8W_K_BLOCK == 0);
    for (int b = 0; b < k / Q8W_K_BLOCK; b++) {
        int8_t q[Q8W_K_BLOCK];
        float d = get_block(src, row, b, k, q);
        for (int i = 0; i < Q8W_K_BLOCK; i++) dst[(size_t)b * Q8W_K_BLOCK + i] = (float)q[i] * d;
    }
}

void q8w_unpack(float *dst, const void *src, int n, int k) {
#pragma omp parallel for schedule(static)
    for (int col = 0; col < n; col++) q8w_unpack_row(dst + (size_t)col * k, src, col, k);
}

void q8w_quantize_row(const float *x, int k, int8_t *q, float *d) {
    for (int b = 0; b < k / Q8W_K_BLOCK; b++) {
        const float *xb = x + (size_t)b * Q8W_K_BLOCK;
        float amax = 0.0f;
        for (int i = 0; i < Q8W_K_BLOCK; i++) amax = fmaxf(amax, fabsf(xb[i]));
        d[b] = amax / 127.0f;
        float inv = d[b] != 0.0f ? 1.0f / d[b] : 0.0f;
        /* the clamp changes no finite value (|x * inv| rounds to <= 127) and
         * keeps a NaN from a non-finite x out of the int8 conversion (UB) */
        for (int i = 0; i < Q8W_K_BLOCK; i++)
            q[b * Q8W_K_BLOCK + i] = (int8_t)roundf(fminf(fmaxf(xb[i] * inv, -127.0f), 127.0f));
    }
}

/* One output from a quantized row: exact block dots, then the float32
 * fused multiply-add over blocks in order, as each lane of the AVX2 kernel. */
static float dot_column(const int8_t *qx, const float *dx, const void *w, int col, int k) {
    float acc = 0.0f;
    for (int b = 0; b < k / Q8W_K_BLOCK; b++) {
        int8_t q[Q8W_K_BLOCK];
        float d = get_block(w, col, b, k, q);
        int32_t dot = 0;
        for (int i = 0; i < Q8W_K_BLOCK; i++) dot += (int32_t)qx[b * Q8W_K_BLOCK + i] * q[i];
        acc = fmaf((float)dot, dx[b] * d, acc);
    }
    return acc;
}

void q8w_matmul_scalar(float *out, const float *in, const void *w, const float *bias, int m, int k, int n) {
    assert(k % Q8W_K_BLOCK == 0 && k <= Q8W_MAX_K);
#pragma omp parallel for schedule(static)
    for (int r = 0; r < m; r++) {
        int8_t qx[Q8W_MAX_K];
        float dx[Q8W_MAX_K / Q8W_K_BLOCK];
        q8w_quantize_row(in + (size_t)r * k, k, qx, dx);
        for (int col = 0; col < n; col++) {
            float acc = dot_column(qx, dx, w, col, k);
            out[(size_t)r * n + col] = bias ? acc + bias[col] : acc; /* no + 0.0f: it would turn -0 into +0 */
        }
    }
}

static bool vnni_supported(void) {
#if Q8W_X86
    __builtin_cpu_init();
    return q8w_supported() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
#else
    return false;
#endif
}

q8w_kernel q8w_kernel_used(void) { return vnni_supported() ? Q8W_VNNI : q8w_supported() ? Q8W_AVX2 : Q8W_SCALAR; }

const char *q8w_kernel_name(q8w_kernel kernel) {
    static const char *const names[Q8W_KERNELS] = {"scalar", "avx2", "vnni"};
    return kernel >= 0 && kernel < Q8W_KERNELS ? names[kernel] : "?";
}

bool q8w_matmul_kernel(q8w_kernel kernel, float *out, const float *in, const void *w, const float *bias, int m, int k,
                       int n) {
    assert(k % Q8W_K_BLOCK == 0 && k <= Q8W_MAX_K);
    if (kernel < 0 || kernel > q8w_kernel_used()) return false;
    if (m <= 0 || n <= 0) return true;
    switch (kernel) {
#if Q8W_X86
    case Q8W_VNNI: q8w_matmul_vnni(out, in, w, bias, m, k, n); break;
    case Q8W_AVX2: q8w_matmul_avx2(out, in, w, bias, m, k, n); break;
#endif
    default: q8w_matmul_scalar(out, in, w, bias, m, k, n); break;
    }
    return true;
}

void q8w_matmul(float *out, const float *in, const void *w, const float *bias, int m, int k, int n) {
    q8w_matmul_kernel(q8w_kernel_used(), out, in, w, bias, m, k, n);
}

bool q8w_matmul_widen(float *out, const float *in, const void *w, const float *bias, int m, int k, int n) {
    assert(k % Q8W_K_BLOCK == 0);
#if Q8W_X86
    if (q8w_supported()) {
        if (m > 0 && n > 0) q8w_matmul_widen_avx2(out, in, w, bias, m, k, n);
        return true;
    }
#endif
    (void)out, (void)in, (void)w, (void)bias, (void)m, (void)k, (void)n;
    return false;
}

/* W[c0 .. c0+nc)[i0 .. i0+32): one block of each column, q * d. */
static void decode_t(float *s, const void *w, int n, int k, int c0, int nc, int i0) {
    (void)n;
    for (int c = 0; c < nc; c++) {
        int8_t q[Q8W_K_BLOCK];
        float d = get_block(w, c0 + c, i0 / Q8W_K_BLOCK, k, q);
        for (int i = 0; i < Q8W_K_BLOCK; i++) s[(size_t)c * PT_TK + i] = (float)q[i] * d;
    }
}

/* W[i0 .. i0+32)[c0 .. c0+nc) as s[c][j]: nc/32 blocks of 32 columns, zero past n. */
static void decode_f(float *s, const void *w, int n, int k, int c0, int nc, int i0) {
    for (int j = 0; j < PT_TK; j++)
        for (int b = c0 / Q8W_K_BLOCK; b < (c0 + nc) / Q8W_K_BLOCK; b++) {
            int8_t q[Q8W_K_BLOCK];
            float d = i0 + j < n ? get_block(w, i0 + j, b, k, q) : 0.0f;
            for (int i = 0; i < Q8W_K_BLOCK; i++)
                s[(size_t)(b * Q8W_K_BLOCK + i - c0) * PT_TK + j] = i0 + j < n ? (float)q[i] * d : 0.0f;
        }
}

#if Q8W_X86
static const pt_decode_fn decoders_t[PACKED_ISAS] = {decode_t, q8w_decode_t_avx2, q8w_decode_t_avx512};
static const pt_decode_fn decoders_f[PACKED_ISAS] = {decode_f, q8w_decode_f_avx2, q8w_decode_f_avx512};
#else
static const pt_decode_fn decoders_t[PACKED_ISAS] = {decode_t, decode_t, decode_t};
static const pt_decode_fn decoders_f[PACKED_ISAS] = {decode_f, decode_f, decode_f};
#endif

bool q8w_matmul_t_isa(packed_isa isa, float *dx, const float *dy, const void *w, int m, int k, int n,
                      bool accumulate) {
    assert(k % Q8W_K_BLOCK == 0);
    return pt_matmul_t(isa, decoders_t, dx, dy, w, m, k, n, accumulate);
}

bool q8w_matmul_f32_isa(packed_isa isa, float *out, const float *in, const void *w, const float *bias, int m, int k,
                        int n) {
    assert(k % Q8W_K_BLOCK == 0);
    return pt_matmul(isa, decoders_f, out, in, w, bias, m, k, n);
}

void q8w_matmul_f32(float *out, const float *in, const void *w, const float *bias, int m, int k, int n) {
    q8w_matmul_f32_isa(packed_isa_best(), out, in, w, bias, m, k, n);
}

void q8w_matmul_t(float *dx, const float *dy, const void *w, int m, int k, int n, bool accumulate) {
    q8w_matmul_t_isa(packed_isa_best(), dx, dy, w, m, k, n, accumulate);
}
