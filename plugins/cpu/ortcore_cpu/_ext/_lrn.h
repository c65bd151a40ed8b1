/* Local response normalization (ONNX LRN) of float32 NCHW data, across the
 * channels:
 *
 *     y[n, c, p] = x[n, c, p] / (bias + alpha / size * sum_k x[n, k, p]**2) ** beta
 *
 * with k over the channels max(0, c - before) .. min(C - 1, c + after).
 *
 * Included by _activation.pxi (so compiled for the baseline, AVX2 and
 * AVX-512 builds). lrn_chunk does a run of L positions (L <= LRN_BLOCK) of
 * one image, every channel: each window sum is added up afresh from the
 * squares of its `size` rows (no running sum: nothing cancels, and the
 * rows are in L1), in loops over the positions that the compiler
 * vectorizes. The power is two square roots for the usual beta = 0.75,
 * one for 0.5, none for 1, else exp(beta * log(d)); a base below zero
 * gives NaN and zero gives what x / 0**beta gives, as pow would. */
#ifndef ORTCORE_LRN_H
#define ORTCORE_LRN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "_vexp.h" /* ortc_exp */

#define LRN_BLOCK 256

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

/* d ** beta for d >= 0 through powmode: 0 general, 1 beta = 0.75, 2 beta =
 * 0.5, 3 beta = 1. */
ORTC_ALWAYS_INLINE float lrn_pow(float d, float beta, int powmode) {
    if (powmode == 1) {
        float t = __builtin_sqrtf(d);
        return t * __builtin_sqrtf(t);
    }
    if (powmode == 2) return __builtin_sqrtf(d);
    if (powmode == 3) return d;
    return ortc_exp(beta * ortc_log(d));
}

/* Positions p0 .. p0 + L - 1 of one image (x and y: C rows of S floats),
 * every channel. */
static void lrn_chunk(
    const float *x, float *y, ptrdiff_t C, ptrdiff_t S, ptrdiff_t p0, ptrdiff_t L,
    ptrdiff_t before, ptrdiff_t after, float scale, float bias, float beta, int powmode) {
    float sum[LRN_BLOCK];
    for (ptrdiff_t c = 0; c < C; c++) {
        ptrdiff_t lo = c - before < 0 ? 0 : c - before;
        ptrdiff_t hi = c + after > C - 1 ? C - 1 : c + after;
        for (ptrdiff_t j = 0; j < L; j++) sum[j] = 0.0f;
        for (ptrdiff_t k = lo; k <= hi; k++) {
            const float *xr = x + k * S + p0;
            for (ptrdiff_t j = 0; j < L; j++) sum[j] += xr[j] * xr[j];
        }
        const float *xc = x + c * S + p0;
        float *yc = y + c * S + p0;
        if (powmode == 1) {
            for (ptrdiff_t j = 0; j < L; j++) yc[j] = xc[j] / lrn_pow(bias + scale * sum[j], beta, 1);
        } else if (powmode == 2) {
            for (ptrdiff_t j = 0; j < L; j++) yc[j] = xc[j] / lrn_pow(bias + scale * sum[j], beta, 2);
        } else if (powmode == 3) {
            for (ptrdiff_t j = 0; j < L; j++) yc[j] = xc[j] / (bias + scale * sum[j]);
        } else {
            for (ptrdiff_t j = 0; j < L; j++) yc[j] = xc[j] / lrn_pow(bias + scale * sum[j], beta, 0);
        }
    }
}

#endif
