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

#include "_vexp.h" /* ortc_exp, ortc_log */

#define LRN_BLOCK 256

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
/* one loop per power, each vectorized with its power inlined */
#define LRN_ROW(MODE)                                                                       \
    for (ptrdiff_t j = 0; j < L; j++) yc[j] = xc[j] / lrn_pow(bias + scale * sum[j], beta, MODE)
        switch (powmode) {
        case 1: LRN_ROW(1); break;
        case 2: LRN_ROW(2); break;
        case 3: LRN_ROW(3); break;
        default: LRN_ROW(0);
        }
#undef LRN_ROW
    }
}

#endif
