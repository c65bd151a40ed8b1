/* The attention's row softmax, softmax(s * scale + m), on whole vectors.
 *
 * Included by _activation.pxi (so compiled for the baseline, AVX2 and
 * AVX-512 builds). Written with GCC/clang vector extensions of SM_VL floats
 * rather than left to the auto-vectorizer: the scalar loops over lanes it
 * was given before ran at about a third of this speed (rows of 128 scores:
 * 170 ns a row against 55 with AVX-512). sm_vexp is ortc_exp (_vexp.h) on a
 * vector, with selects for its comparisons; the tail of a row past its last
 * whole vector goes through ortc_exp itself.
 *
 * Three passes over a row: scale, mask and maximum; exp and sum; the
 * division. A NaN never wins the maximum, but its exp is NaN and so is the
 * row's sum, which makes the whole row NaN, as a row holding +inf, or -inf
 * only.
 */
#ifndef ORTCORE_SOFTMAX_H
#define ORTCORE_SOFTMAX_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "_vexp.h"

#if defined(__AVX512F__)
#define SM_VL 16
#elif defined(__AVX__)
#define SM_VL 8
#else
#define SM_VL 4
#endif

typedef float sm_v __attribute__((vector_size(SM_VL * 4)));
typedef float sm_vu __attribute__((vector_size(SM_VL * 4), aligned(4), may_alias));
typedef int32_t sm_vi __attribute__((vector_size(SM_VL * 4)));

/* mask ? a : b, lane by lane (mask lanes all ones or all zeros). */
ORTC_ALWAYS_INLINE sm_v sm_select(sm_vi mask, sm_v a, sm_v b) {
    return (sm_v)((mask & (sm_vi)a) | (~mask & (sm_vi)b));
}

/* Scores this far below the row's maximum give 0: their exp (under 1.7e-28
 * of the maximum's) and its share would only make subnormal floats, which
 * the multiplier takes many times longer over (a causal mask's -3.4e38 did
 * that to half of every row: 2x slower rows), and which a sum of at least 1
 * never sees. */
#define SM_FLUSH (-64.0f)

ORTC_ALWAYS_INLINE sm_v sm_splat(float x) { return x - (sm_v){0}; }

/* exp(x) for x <= 0 (from ortc_exp, lane by lane), 0 below SM_FLUSH. */
ORTC_ALWAYS_INLINE sm_v sm_vexp(sm_v x) {
    const sm_v lo = sm_splat(SM_FLUSH), magic = sm_splat(12582912.0f);
    sm_vi gone = x < lo;
    x = sm_select(gone, lo, x);
    sm_v k = (x * 1.4426950408889634f + magic) - magic;
    k = sm_select(k == k, k, sm_splat(0.0f));
    sm_v r = (x - k * 0.693359375f) - k * -2.12194440e-4f;
    const float c2 = 0.5f, c3 = 0.16666666666666666f, c4 = 0.041666666666666664f;
    const float c5 = 0.008333333333333333f, c6 = 0.001388888888888889f;
    const float c7 = 0.0001984126984126984f;
    sm_v p = 1.0f + r * (1.0f + r * (c2 + r * (c3 + r * (c4 + r * (c5 + r * (c6 + r * c7))))));
    sm_vi n = __builtin_convertvector(k, sm_vi);
    sm_vi n1 = n >> 1;
    sm_v y = p * (sm_v)((n1 + 127) << 23) * (sm_v)((n - n1 + 127) << 23);
    return sm_select(gone, sm_splat(0.0f), y);
}

/* s = softmax(s * scale + m) over n values, in place (m NULL: no mask). */
static inline void sm_scaled_softmax(float *s, const float *m, ptrdiff_t n, float scale) {
    ptrdiff_t full = n - n % SM_VL, j;
    sm_v vmax = sm_splat(-INFINITY), vsum = sm_splat(0.0f);
    float top = -INFINITY, total = 0.0f;
    for (j = 0; j < full; j += SM_VL) {
        sm_v t = *(sm_vu *)(s + j) * scale;
        if (m != NULL) t += *(const sm_vu *)(m + j);
        *(sm_vu *)(s + j) = t;
        vmax = sm_select(t > vmax, t, vmax);
    }
    for (; j < n; j++) {
        float t = s[j] * scale + (m != NULL ? m[j] : 0.0f);
        s[j] = t;
        top = t > top ? t : top;
    }
    for (int k = 0; k < SM_VL; k++) top = vmax[k] > top ? vmax[k] : top;
    for (j = 0; j < full; j += SM_VL) {
        sm_v t = sm_vexp(*(sm_vu *)(s + j) - top);
        *(sm_vu *)(s + j) = t;
        vsum += t;
    }
    for (; j < n; j++) {
        float x = s[j] - top;
        float t = x < SM_FLUSH ? 0.0f : ortc_exp(x);
        s[j] = t;
        total += t;
    }
    for (int k = 0; k < SM_VL; k++) total += vsum[k];
    float inv = 1.0f / total;
    for (j = 0; j < full; j += SM_VL) *(sm_vu *)(s + j) *= inv;
    for (; j < n; j++) s[j] *= inv;
}

#endif
