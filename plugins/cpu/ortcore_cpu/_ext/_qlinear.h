/* QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear's loops for
 * float32 and 8-bit integers, with numpy's results bit for bit:
 *  - quantize: saturate(rint(x / s) + zp): a float32 division (IEEE, as
 *    numpy's), rounded half to even, the zero point added (exact: both are
 *    integers below 2**24, or the sum saturates anyway), clamped; NaN gives
 *    0 as numpy's cast of NaN to an 8-bit integer does on x86-64;
 *  - dequantize: (float)(x - zp) * s, the difference exact;
 *  - min/max: the extremes of float32 values and whether any is NaN.
 * Included by _qlinear.pxi (so compiled once per qgemm build: QG_ISA). */
#ifndef ORTCORE_QLINEAR_H
#define ORTCORE_QLINEAR_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

static void ql_quantize(const float *x, ptrdiff_t n, float s, float zp, int out_signed,
                        uint8_t *y) {
    const float lo = out_signed ? -128.0f : 0.0f, hi = out_signed ? 127.0f : 255.0f;
    ptrdiff_t i = 0;
#if QG_ISA == 3
    const __m512 vs = _mm512_set1_ps(s), vz = _mm512_set1_ps(zp);
    const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_div_ps(_mm512_loadu_ps(x + i), vs);
        v = _mm512_add_ps(_mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                          vz);
        __mmask16 ok = _mm512_cmp_ps_mask(v, v, _CMP_ORD_Q);
        v = _mm512_min_ps(_mm512_max_ps(v, vlo), vhi);
        __m512i q = _mm512_maskz_mov_epi32(ok, _mm512_cvtps_epi32(v));
        QG_STORE16(y + i, _mm512_cvtepi32_epi8(q), 16, 0xFFFF);
    }
#elif QG_ISA >= 1
    const __m256 vs = _mm256_set1_ps(s), vz = _mm256_set1_ps(zp);
    const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_div_ps(_mm256_loadu_ps(x + i), vs);
        v = _mm256_add_ps(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), vz);
        __m256 ok = _mm256_cmp_ps(v, v, _CMP_ORD_Q);
        v = _mm256_and_ps(_mm256_min_ps(_mm256_max_ps(v, vlo), vhi), ok);
        __m256i q = _mm256_cvtps_epi32(v);
        __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
        w = out_signed ? _mm_packs_epi16(w, w) : _mm_packus_epi16(w, w);
        _mm_storel_epi64((__m128i *)(y + i), w);
    }
#endif
    for (; i < n; i++) {
        float v = rintf(x[i] / s) + zp;
        if (v != v) {
            y[i] = 0;
            continue;
        }
        v = v < lo ? lo : (v > hi ? hi : v);
        y[i] = (uint8_t)(int)v;
    }
}

static void ql_dequantize(const uint8_t *x, ptrdiff_t n, int xs, int32_t zp, float s, float *y) {
    if (xs) {
        const int8_t *v = (const int8_t *)x;
        for (ptrdiff_t i = 0; i < n; i++) y[i] = (float)((int32_t)v[i] - zp) * s;
    } else {
        for (ptrdiff_t i = 0; i < n; i++) y[i] = (float)((int32_t)x[i] - zp) * s;
    }
}

/* lo, hi: the least and greatest of x[0..n) (n > 0); returns whether any is NaN. */
static int ql_minmax(const float *x, ptrdiff_t n, float *lo, float *hi) {
    ptrdiff_t i = 0;
    float l = x[0], h = x[0];
    int nan = 0;
#if QG_ISA == 3
    if (n >= 16) {
        __m512 vl = _mm512_loadu_ps(x), vh = vl;
        __mmask16 bad = 0;
        for (i = 0; i + 16 <= n; i += 16) {
            __m512 v = _mm512_loadu_ps(x + i);
            bad |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
            vl = _mm512_min_ps(vl, v);
            vh = _mm512_max_ps(vh, v);
        }
        nan = bad != 0;
        l = _mm512_reduce_min_ps(vl);
        h = _mm512_reduce_max_ps(vh);
    }
#elif QG_ISA >= 1
    if (n >= 8) {
        __m256 vl = _mm256_loadu_ps(x), vh = vl, bad = _mm256_setzero_ps();
        for (i = 0; i + 8 <= n; i += 8) {
            __m256 v = _mm256_loadu_ps(x + i);
            bad = _mm256_or_ps(bad, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
            vl = _mm256_min_ps(vl, v);
            vh = _mm256_max_ps(vh, v);
        }
        nan = _mm256_movemask_ps(bad) != 0;
        float a[8], b[8];
        _mm256_storeu_ps(a, vl);
        _mm256_storeu_ps(b, vh);
        for (int t = 0; t < 8; t++) {
            l = a[t] < l ? a[t] : l;
            h = b[t] > h ? b[t] : h;
        }
    }
#endif
    for (; i < n; i++) {
        float v = x[i];
        if (v != v) nan = 1;
        l = v < l ? v : l;
        h = v > h ? v : h;
    }
    *lo = l;
    *hi = h;
    return nan;
}

#endif /* ORTCORE_QLINEAR_H */
