/* exp and expm1 of one float, as plain arithmetic that vectorizes.
 *
 * Included by _activation.pxi (so compiled for the baseline, AVX2 and
 * AVX-512 builds). The functions are always inlined: in the activation
 * kernel's long parallel body GCC otherwise stopped inlining them past a
 * size limit, and a loop calling one ran an element at a time (a 10x
 * slower Gelu or softmax).
 *
 * exp(x) = 2**n * exp(r) with x = n ln 2 + r, |r| <= ln(2) / 2 (Cody-Waite:
 * ln 2 in two parts, the first exact in a product with n), and exp(r) - 1
 * a Taylor polynomial to r**7 (the next term is below 6e-9): within about
 * 2 ULP. */
#ifndef ORTCORE_VEXP_H
#define ORTCORE_VEXP_H

#include <stdint.h>
#include <string.h>

#define ORTC_ALWAYS_INLINE static inline __attribute__((always_inline))

/* 2**n for n in [-126, 127], from its exponent bits. */
ORTC_ALWAYS_INLINE float ortc_pow2(int32_t n) {
    int32_t i = (n + 127) << 23;
    float f;
    memcpy(&f, &i, sizeof f);
    return f;
}

/* exp(r) - 1 for |r| <= ln(2) / 2, as r * (1 + ...) so that -0 stays -0. */
ORTC_ALWAYS_INLINE float ortc_expm1_poly(float r) {
    const float c2 = 0.5f, c3 = 0.16666666666666666f, c4 = 0.041666666666666664f;
    const float c5 = 0.008333333333333333f, c6 = 0.001388888888888889f;
    const float c7 = 0.0001984126984126984f;
    return r * (1.0f + r * (c2 + r * (c3 + r * (c4 + r * (c5 + r * (c6 + r * c7))))));
}

/* r with x = n ln 2 + r; *n is the integer n as a float, 0 for NaN (so that
 * it converts to an int; r is then NaN). Rounding adds and removes 1.5 *
 * 2**23, which leaves no fraction bits for |v| < 2**22 (rintf would not
 * vectorize). */
ORTC_ALWAYS_INLINE float ortc_reduce(float x, float *n) {
    const float log2e = 1.4426950408889634f, ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
    const float magic = 12582912.0f;
    float k = (x * log2e + magic) - magic;
    k = k == k ? k : 0.0f;
    *n = k;
    return (x - k * ln2_hi) - k * ln2_lo;
}

/* exp(x): inf above float32's range, gradually 0 below it, NaN for NaN. */
ORTC_ALWAYS_INLINE float ortc_exp(float x) {
    float k;
    x = x > 89.0f ? 89.0f : x; /* comparisons, not fminf: NaN goes through */
    x = x < -104.0f ? -104.0f : x;
    float p = 1.0f + ortc_expm1_poly(ortc_reduce(x, &k));
    int32_t n = (int32_t)k;
    int32_t n1 = n >> 1; /* 2**n in two factors: n reaches -150 and 128 */
    return p * ortc_pow2(n1) * ortc_pow2(n - n1);
}

/* exp(x) - 1 for x <= 0 (a positive x counts as 0), accurate near 0:
 * 2**n * expm1(r) + (2**n - 1), both terms exact but for expm1(r). */
ORTC_ALWAYS_INLINE float ortc_expm1_neg(float x) {
    float k;
    x = x > 0.0f ? 0.0f : x;
    x = x < -30.0f ? -30.0f : x; /* expm1 is -1 in float32 below -17 */
    float q = ortc_expm1_poly(ortc_reduce(x, &k));
    float s = ortc_pow2((int32_t)k);
    return s * q + (s - 1.0f);
}

#endif
