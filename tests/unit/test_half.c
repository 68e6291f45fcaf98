/* f16 / bf16 conversions: exact bit patterns, ties to even, specials, and
 * every one of the 65536 half patterns. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "util/half.h"

static uint32_t bits(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return x;
}

static float from_bits(uint32_t x) {
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

/* xorshift64*: a fixed-seed stream for the random checks. */
static uint64_t next_u64(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}

static int f16_is_nan(uint16_t h) { return (h & 0x7C00) == 0x7C00 && (h & 0x3FF); }
static int bf16_is_nan(uint16_t h) { return (h & 0x7F80) == 0x7F80 && (h & 0x7F); }

/* An independent rounding check: |x - h| is minimal over h's neighbours, and a
 * tie goes to the even pattern. Valid for finite x within the f16 range. */
static int nearest_even_ok(float x, uint16_t h, float (*widen)(uint16_t)) {
    double d = x, got = widen(h), err = fabs(got - d);
    uint16_t sign = h & 0x8000, mag = h & 0x7FFF;
    for (int delta = -1; delta <= 1; delta += 2) {
        int m = (int)mag + delta;
        uint16_t s = sign;
        if (m < 0) m = 1, s ^= 0x8000; /* below zero: the other sign's smallest */
        double other = widen((uint16_t)(s | m));
        if (isinf(other)) continue;
        double oerr = fabs(other - d);
        if (oerr < err) return 0;
        if (oerr == err && (mag & 1)) return 0;
    }
    return 1;
}

int main(void) {
    TEST("f32_to_f16 exact patterns");
    CHECK_EQ_INT(f32_to_f16(1.0f), 0x3C00);
    CHECK_EQ_INT(f32_to_f16(-2.0f), 0xC000);
    CHECK_EQ_INT(f32_to_f16(0.5f), 0x3800);
    CHECK_EQ_INT(f32_to_f16(0.1f), 0x2E66);
    CHECK_EQ_INT(f32_to_f16(0.0f), 0x0000);
    CHECK_EQ_INT(f32_to_f16(-0.0f), 0x8000);
    CHECK_EQ_INT(f32_to_f16(65504.0f), 0x7BFF);
    CHECK_EQ_INT(f32_to_f16(-65504.0f), 0xFBFF);
    CHECK_EQ_INT(f32_to_f16(65519.0f), 0x7BFF); /* below the tie: largest finite */
    CHECK_EQ_INT(f32_to_f16(65520.0f), 0x7C00); /* the tie rounds to even = inf */
    CHECK_EQ_INT(f32_to_f16(1e10f), 0x7C00);
    CHECK_EQ_INT(f32_to_f16(INFINITY), 0x7C00);
    CHECK_EQ_INT(f32_to_f16(-INFINITY), 0xFC00);
    CHECK_EQ_INT(f32_to_f16(FLT_MAX), 0x7C00);
    CHECK_EQ_INT(f32_to_f16(ldexpf(1, -14)), 0x0400); /* smallest normal */
    CHECK_EQ_INT(f32_to_f16(ldexpf(1, -24)), 0x0001); /* smallest subnormal */
    CHECK_EQ_INT(f32_to_f16(-ldexpf(1, -24)), 0x8001);
    CHECK_EQ_INT(f32_to_f16(ldexpf(1023, -24)), 0x03FF); /* largest subnormal */
    CHECK_EQ_INT(f32_to_f16(FLT_MIN), 0x0000);
    CHECK_EQ_INT(f32_to_f16(ldexpf(1, -26)), 0x0000);

    TEST("f32_to_f16 ties to even");
    CHECK_EQ_INT(f32_to_f16(1.0f + ldexpf(1, -11)), 0x3C00);     /* between 3C00 and 3C01 */
    CHECK_EQ_INT(f32_to_f16(1.0f + 3 * ldexpf(1, -11)), 0x3C02); /* between 3C01 and 3C02 */
    CHECK_EQ_INT(f32_to_f16(1.0f + ldexpf(1, -11) + ldexpf(1, -20)), 0x3C01); /* just above */
    CHECK_EQ_INT(f32_to_f16(2049.0f), 0x6800);                   /* 2048 vs 2050 */
    CHECK_EQ_INT(f32_to_f16(2051.0f), 0x6802);                   /* 2050 vs 2052 */
    CHECK_EQ_INT(f32_to_f16(ldexpf(1, -25)), 0x0000);            /* 0 vs 2^-24 */
    CHECK_EQ_INT(f32_to_f16(ldexpf(1, -25) * 1.0000001f), 0x0001);
    CHECK_EQ_INT(f32_to_f16(ldexpf(3, -25)), 0x0002);            /* 1 vs 2 units */
    CHECK_EQ_INT(f32_to_f16(ldexpf(5, -25)), 0x0002);            /* 2 vs 3 units */
    CHECK_EQ_INT(f32_to_f16(ldexpf(2047, -25)), 0x0400);         /* subnormal rounds up to normal */

    TEST("f32_to_f16 NaN stays NaN");
    CHECK(f16_is_nan(f32_to_f16(NAN)));
    CHECK(f16_is_nan(f32_to_f16(from_bits(0x7F800001)))); /* payload only in low bits */
    CHECK(f16_is_nan(f32_to_f16(from_bits(0xFFC00000))));
    CHECK_EQ_INT(f32_to_f16(from_bits(0xFFC00000)) & 0x8000, 0x8000);

    TEST("f16_to_f32 exact values");
    CHECK(f16_to_f32(0x3C00) == 1.0f);
    CHECK(f16_to_f32(0xC000) == -2.0f);
    CHECK(f16_to_f32(0x7BFF) == 65504.0f);
    CHECK(f16_to_f32(0x0001) == ldexpf(1, -24));
    CHECK(f16_to_f32(0x03FF) == ldexpf(1023, -24));
    CHECK(f16_to_f32(0x0400) == ldexpf(1, -14));
    CHECK(f16_to_f32(0x7C00) == INFINITY);
    CHECK(f16_to_f32(0xFC00) == -INFINITY);
    CHECK(isnan(f16_to_f32(0x7E00)));
    CHECK(isnan(f16_to_f32(0x7C01)));
    CHECK(f16_to_f32(0x8000) == 0 && signbit(f16_to_f32(0x8000)));

    TEST("f16 round trip of all 65536 patterns");
    int mismatches = 0, nan_lost = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        uint16_t back = f32_to_f16(f16_to_f32((uint16_t)h));
        if (f16_is_nan((uint16_t)h)) {
            nan_lost += !f16_is_nan(back) || (back & 0x8000) != (h & 0x8000);
        } else {
            mismatches += back != h;
        }
    }
    CHECK_EQ_INT(mismatches, 0);
    CHECK_EQ_INT(nan_lost, 0);

    TEST("f32_to_f16 rounds to nearest even on random floats");
    uint64_t seed = 0x9E3779B97F4A7C15ull;
    int wrong = 0;
    for (int i = 0; i < 400000; i++) {
        /* Exponents from 2^-27 to 2^15 cover zero-rounding, subnormals and normals. */
        uint32_t r = (uint32_t)next_u64(&seed);
        uint32_t exp = 100 + (r >> 8) % 43;
        float x = from_bits((r & 0x80000000) | (exp << 23) | ((uint32_t)next_u64(&seed) & 0x7FFFFF));
        if (fabsf(x) >= 65504.0f) continue;
        wrong += !nearest_even_ok(x, f32_to_f16(x), f16_to_f32);
    }
    CHECK_EQ_INT(wrong, 0);

    TEST("bf16 exact patterns and ties to even");
    CHECK_EQ_INT(f32_to_bf16(1.0f), 0x3F80);
    CHECK_EQ_INT(f32_to_bf16(-2.0f), 0xC000);
    CHECK_EQ_INT(f32_to_bf16(1.0f + ldexpf(1, -8)), 0x3F80);     /* tie: 3F80 even */
    CHECK_EQ_INT(f32_to_bf16(1.0f + 3 * ldexpf(1, -8)), 0x3F82); /* tie: 3F82 even */
    CHECK_EQ_INT(f32_to_bf16(1.0f + ldexpf(1, -8) + ldexpf(1, -20)), 0x3F81);
    CHECK_EQ_INT(f32_to_bf16(0.1f), 0x3DCD);
    CHECK_EQ_INT(f32_to_bf16(FLT_MAX), 0x7F80); /* rounds past the largest finite */
    CHECK_EQ_INT(f32_to_bf16(from_bits(0x7F7F7FFF)), 0x7F7F);
    CHECK_EQ_INT(f32_to_bf16(INFINITY), 0x7F80);
    CHECK_EQ_INT(f32_to_bf16(-INFINITY), 0xFF80);
    CHECK_EQ_INT(f32_to_bf16(-0.0f), 0x8000);
    CHECK_EQ_INT(f32_to_bf16(from_bits(0x00010000)), 0x0001); /* subnormal kept */
    CHECK(bf16_is_nan(f32_to_bf16(NAN)));
    CHECK(bf16_is_nan(f32_to_bf16(from_bits(0x7F800001))));
    CHECK(bf16_is_nan(f32_to_bf16(from_bits(0xFF80FFFF))));
    CHECK(bf16_to_f32(0x3F80) == 1.0f);
    CHECK(bits(bf16_to_f32(0xABCD)) == 0xABCD0000u);

    TEST("bf16 round trip of all 65536 patterns");
    mismatches = nan_lost = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        uint16_t back = f32_to_bf16(bf16_to_f32((uint16_t)h));
        if (bf16_is_nan((uint16_t)h))
            nan_lost += !bf16_is_nan(back);
        else
            mismatches += back != h;
    }
    CHECK_EQ_INT(mismatches, 0);
    CHECK_EQ_INT(nan_lost, 0);

    TEST("f32_to_bf16 rounds to nearest even on random floats");
    wrong = 0;
    for (int i = 0; i < 400000; i++) {
        float x = from_bits((uint32_t)next_u64(&seed));
        if (!isfinite(x) || fabsf(x) >= from_bits(0x7F7F0000)) continue;
        wrong += !nearest_even_ok(x, f32_to_bf16(x), bf16_to_f32);
    }
    CHECK_EQ_INT(wrong, 0);

    TEST("array forms match the scalar ones");
    enum { N = 1000 };
    float in[N], out16[N], outb[N];
    uint16_t h16[N], hb[N];
    for (int i = 0; i < N; i++) in[i] = (float)((int64_t)(next_u64(&seed) % 2000001) - 1000000) / 997.0f;
    f32_to_f16_array(in, h16, N);
    f32_to_bf16_array(in, hb, N);
    f16_to_f32_array(h16, out16, N);
    bf16_to_f32_array(hb, outb, N);
    int diff = 0;
    for (int i = 0; i < N; i++) {
        diff += h16[i] != f32_to_f16(in[i]) || hb[i] != f32_to_bf16(in[i]);
        diff += bits(out16[i]) != bits(f16_to_f32(h16[i])) || bits(outb[i]) != bits(bf16_to_f32(hb[i]));
    }
    CHECK_EQ_INT(diff, 0);
    return check_done();
}
