/* exp, expm1 and log of one float, as plain arithmetic that vectorizes.
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

/* log(x) of a float: NaN below 0 and for NaN, -inf at 0, inf at inf.
 * x = 2**e * m with m in [sqrt(1/2), sqrt(2)), log(m) = 2 atanh(s) with
 * s = (m - 1) / (m + 1), |s| <= 0.172, its odd series to s**11 (the next
 * term is below 2e-10). Subnormals are scaled by 2**23 first. */
ORTC_ALWAYS_INLINE float ortc_log(float x) {
    const float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
    float xs = x < 1.17549435e-38f ? x * 8388608.0f : x;
    float bias = x < 1.17549435e-38f ? 23.0f : 0.0f;
    int32_t i;
    memcpy(&i, &xs, sizeof i);
    int32_t e = ((i >> 23) & 0xff) - 127;
    int32_t mi = (i & 0x7fffff) | 0x3f800000;
    float m;
    memcpy(&m, &mi, sizeof m);
    float big = m > 1.41421356f ? 1.0f : 0.0f;
    m = big > 0.0f ? m * 0.5f : m;
    float k = (float)e + big - bias;
    float s = (m - 1.0f) / (m + 1.0f);
    float z = s * s;
    float r = 2.0f * s +
              2.0f * s * z *
                  (0.33333333f + z * (0.2f + z * (0.14285714f + z * (0.11111111f + z * 0.09090909f))));
    float out = k * ln2_hi + (k * ln2_lo + r);
    out = x == 0.0f ? -__builtin_inff() : out;
    out = x > 3.40282347e38f ? __builtin_inff() : out;
    out = (x < 0.0f || x != x) ? __builtin_nanf("") : out;
    return out;
}

#endif
