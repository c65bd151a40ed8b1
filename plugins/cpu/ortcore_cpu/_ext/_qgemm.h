/* 8-bit integer GEMM: C (M x N) = (A - za) (B - zb), exact in int32, with an
 * epilogue that writes int32, float32 (scaled, plus a bias) or 8-bit
 * (requantized: rounded half to even, shifted, saturated).
 *
 * Included by _qgemm.pxi, so it is compiled once per build (setup.py):
 *  - AVX-512 VNNI (QG_ISA 3): vpdpbusd on zmm, 16 int32 lanes of 4 u8 x s8
 *    products each, a tile of 8 rows x 48 columns (24 accumulators);
 *  - AVX-VNNI (QG_ISA 2): the same on ymm (vpdpbusd's VEX form), 6 x 16;
 *  - AVX2 (QG_ISA 1): B's bytes widened to int16 and multiplied by A's
 *    int16 with vpmaddwd (pairs summed into int32), 6 x 8. vpmaddubsw would
 *    do twice the bytes per instruction but saturates its int16 pair sums
 *    (255 * 127 * 2 > 32767): onnxruntime's MLAS runs it anyway for u8 x s8
 *    and documents the error ("reduce_range" quantizes weights to 7 bits so
 *    that no pair saturates). Results here must be exact for any weights, so
 *    this build pays the widening instead;
 *  - the portable build (QG_ISA 0): plain C over int32.
 *
 * Signs: vpdpbusd multiplies unsigned bytes by signed ones. Every dtype pair
 * reduces to that by flipping the top bit of one operand as it is packed
 * (x ^ 0x80 is x - 128 read as int8, or x + 128 read as uint8) and moving
 * the 128 into its zero point; the zero points are folded in afterwards
 * from row sums of A and column sums of B:
 *   sum_k (a - za)(b - zb) = sum_k a b - zb sum_k a - za sum_k b + K za zb,
 * all in wrapping 32-bit arithmetic: the result is the exact sum modulo
 * 2**32, as onnxruntime's and the numpy reference's int32 are.
 *
 * Packed B: panels of QG_NR columns; per group of 4 values of k, each
 * column's 4 bytes side by side (K padded to a multiple of 4 with zeros).
 * Packed A: panels of QG_MR rows, per group of 4 values of k each row's 4
 * values side by side: bytes in the VNNI builds, int16 in the others.
 */
#ifndef ORTCORE_QGEMM_H
#define ORTCORE_QGEMM_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
#include <immintrin.h>
#define QG_ISA 3
#define QG_MR 8
#define QG_VL 16
#define QG_NV 3
#elif defined(__AVXVNNI__) && defined(__AVX2__)
#include <immintrin.h>
#define QG_ISA 2
#define QG_MR 6
#define QG_VL 8
#define QG_NV 2
#elif defined(__AVX2__)
#include <immintrin.h>
#define QG_ISA 1
#define QG_MR 6
#define QG_VL 8
#define QG_NV 1
#else
#define QG_ISA 0
#define QG_MR 4
#define QG_VL 4
#define QG_NV 4
#endif
#define QG_NR (QG_VL * QG_NV)
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#define QG_VNNI (QG_ISA >= 2)

#if QG_VNNI
typedef uint8_t qg_a_t;
#else
typedef int16_t qg_a_t;
#endif

#define QG_INLINE static inline __attribute__((always_inline))

/* ---- packing ------------------------------------------------------------ */

/* Value of byte x of an operand of signedness sgn, flipped by flip (0 or 0x80),
 * as the packed operand's signedness (sgn ^ (flip != 0)) reads it. */
QG_INLINE int32_t qg_val(uint8_t x, int sgn) { return sgn ? (int32_t)(int8_t)x : (int32_t)x; }

/* Columns [n0, n0 + QG_NR) of B (K x N, element (k, n) at b[k * sk + n * sn])
 * into out (K4 x QG_NR x 4 bytes), each byte xor flip, zero past K and N.
 * csum (QG_NR int32) gets each column's sum of the packed values read with
 * signedness psgn, when not NULL. */
static void qg_pack_b_panel(const uint8_t *b, ptrdiff_t K, ptrdiff_t N, ptrdiff_t sk,
                            ptrdiff_t sn, ptrdiff_t n0, uint8_t flip, int psgn, uint8_t *out,
                            int32_t *csum) {
    ptrdiff_t nr = N - n0 < QG_NR ? N - n0 : QG_NR;
    ptrdiff_t k4 = (K + 3) / 4;
    uint32_t f32 = flip * 0x01010101u;
    if (nr < QG_NR || K % 4) memset(out, 0, (size_t)(k4 * QG_NR * 4));
    for (ptrdiff_t q = 0; q < k4; q++) {
        uint32_t *o = (uint32_t *)(out + q * QG_NR * 4);
        ptrdiff_t kk = K - 4 * q < 4 ? K - 4 * q : 4;
        const uint8_t *r0 = b + 4 * q * sk + n0 * sn;
        if (kk == 4 && sn == 1) {
            const uint8_t *r1 = r0 + sk, *r2 = r1 + sk, *r3 = r2 + sk;
            for (ptrdiff_t j = 0; j < nr; j++)
                o[j] = ((uint32_t)r0[j] | (uint32_t)r1[j] << 8 | (uint32_t)r2[j] << 16 |
                        (uint32_t)r3[j] << 24) ^ f32;
        } else {
            uint8_t *ob = (uint8_t *)o;
            for (ptrdiff_t j = 0; j < nr; j++)
                for (ptrdiff_t t = 0; t < kk; t++) ob[j * 4 + t] = r0[t * sk + j * sn] ^ flip;
        }
    }
    if (csum) {
        for (ptrdiff_t j = 0; j < QG_NR; j++) csum[j] = 0;
        for (ptrdiff_t q = 0; q < k4; q++) {
            const uint8_t *ob = out + q * QG_NR * 4;
            for (ptrdiff_t j = 0; j < nr; j++)
                csum[j] += qg_val(ob[4 * j], psgn) + qg_val(ob[4 * j + 1], psgn) +
                           qg_val(ob[4 * j + 2], psgn) + qg_val(ob[4 * j + 3], psgn);
        }
    }
}

/* A 2-D convolution's geometry: C channels of H x W, a kh x kw window of
 * strides sh, sw, dilations dh, dw, padded by ph rows above and pw columns
 * left, OH x OW outputs. */
typedef struct {
    ptrdiff_t C, H, W, kh, kw, sh, sw, dh, dw, ph, pw, OH, OW;
} qg_geom;

/* Rows [m0, m0 + QG_MR) of A (M x K, element (m, k) at a[m * sm + k * sk])
 * into out (K4 x QG_MR x 4 values), each byte xor flip (then read with
 * signedness psgn in the int16 builds), zero past K and M; rsum (QG_MR)
 * gets each row's sum when not NULL. */
static void qg_pack_a_panel(const uint8_t *a, ptrdiff_t M, ptrdiff_t K, ptrdiff_t sm,
                            ptrdiff_t sk, ptrdiff_t m0, uint8_t flip, int psgn, qg_a_t *out,
                            int32_t *rsum) {
    ptrdiff_t mr = M - m0 < QG_MR ? M - m0 : QG_MR;
    ptrdiff_t k4 = (K + 3) / 4;
    if (mr < QG_MR || K % 4) memset(out, 0, (size_t)(k4 * QG_MR * 4) * sizeof(qg_a_t));
    for (ptrdiff_t r = 0; r < mr; r++) {
        const uint8_t *src = a + (m0 + r) * sm;
        int32_t s = 0;
        if (sk == 1) {
            /* rows of consecutive bytes: 4 at a time, and the sum in a loop
             * the compiler vectorizes */
            ptrdiff_t k4f = K / 4;
#if QG_VNNI
            uint32_t f32 = flip * 0x01010101u;
            for (ptrdiff_t q = 0; q < k4f; q++) {
                uint32_t w;
                memcpy(&w, src + 4 * q, 4);
                w ^= f32;
                memcpy(out + (q * QG_MR + r) * 4, &w, 4);
            }
#else
            for (ptrdiff_t q = 0; q < k4f; q++) {
                qg_a_t *o = out + (q * QG_MR + r) * 4;
                for (int t = 0; t < 4; t++) o[t] = (qg_a_t)qg_val(src[4 * q + t] ^ flip, psgn);
            }
#endif
            for (ptrdiff_t k = 4 * k4f; k < K; k++) {
                uint8_t v = src[k] ^ flip;
#if QG_VNNI
                out[(k / 4 * QG_MR + r) * 4 + k % 4] = v;
#else
                out[(k / 4 * QG_MR + r) * 4 + k % 4] = (qg_a_t)qg_val(v, psgn);
#endif
            }
            if (rsum) {
                if (psgn) {
                    for (ptrdiff_t k = 0; k < K; k++) s += (int32_t)(int8_t)(src[k] ^ flip);
                } else {
                    for (ptrdiff_t k = 0; k < K; k++) s += (int32_t)(uint8_t)(src[k] ^ flip);
                }
                rsum[r] = s;
            }
            continue;
        }
        for (ptrdiff_t k = 0; k < K; k++) {
            uint8_t v = src[k * sk] ^ flip;
#if QG_VNNI
            out[(k / 4 * QG_MR + r) * 4 + k % 4] = v;
#else
            out[(k / 4 * QG_MR + r) * 4 + k % 4] = (qg_a_t)qg_val(v, psgn);
#endif
            s += qg_val(v, psgn);
        }
        if (rsum) rsum[r] = s;
    }
    if (rsum)
        for (ptrdiff_t r = mr; r < QG_MR; r++) rsum[r] = 0;
}

/* ---- the register tiles ------------------------------------------------- */

#if QG_ISA == 3
/* a_uns: A is vpdpbusd's unsigned operand (else B is). */
QG_INLINE void qg_tile(const qg_a_t *ap, const uint8_t *bp, ptrdiff_t k4, int32_t *t,
                       const int mr, const int a_uns, const int nv) {
    __m512i acc[QG_MR][QG_NV];
#pragma GCC unroll 8
    for (int r = 0; r < QG_MR; r++)
#pragma GCC unroll 3
        for (int v = 0; v < QG_NV; v++) acc[r][v] = _mm512_setzero_si512();
    for (ptrdiff_t q = 0; q < k4; q++) {
        __m512i b[QG_NV];
#pragma GCC unroll 3
        for (int v = 0; v < nv; v++)
            b[v] = _mm512_loadu_si512((const void *)(bp + (q * QG_NR + v * QG_VL) * 4));
#pragma GCC unroll 8
        for (int r = 0; r < QG_MR; r++) {
            if (r >= mr) break;
            int32_t w;
            memcpy(&w, ap + (q * QG_MR + r) * 4, 4);
            __m512i a = _mm512_set1_epi32(w);
#pragma GCC unroll 3
            for (int v = 0; v < nv; v++)
                acc[r][v] = a_uns ? _mm512_dpbusd_epi32(acc[r][v], a, b[v])
                                  : _mm512_dpbusd_epi32(acc[r][v], b[v], a);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < QG_MR; r++) {
        if (r >= mr) break;
#pragma GCC unroll 3
        for (int v = 0; v < nv; v++)
            _mm512_storeu_si512((void *)(t + r * QG_NR + v * QG_VL), acc[r][v]);
    }
}
#elif QG_ISA == 2
QG_INLINE void qg_tile(const qg_a_t *ap, const uint8_t *bp, ptrdiff_t k4, int32_t *t,
                       const int mr, const int a_uns, const int nv) {
    __m256i acc[QG_MR][QG_NV];
#pragma GCC unroll 8
    for (int r = 0; r < QG_MR; r++)
#pragma GCC unroll 3
        for (int v = 0; v < QG_NV; v++) acc[r][v] = _mm256_setzero_si256();
    for (ptrdiff_t q = 0; q < k4; q++) {
        __m256i b[QG_NV];
#pragma GCC unroll 3
        for (int v = 0; v < nv; v++)
            b[v] = _mm256_loadu_si256((const __m256i *)(bp + (q * QG_NR + v * QG_VL) * 4));
#pragma GCC unroll 8
        for (int r = 0; r < QG_MR; r++) {
            if (r >= mr) break;
            int32_t w;
            memcpy(&w, ap + (q * QG_MR + r) * 4, 4);
            __m256i a = _mm256_set1_epi32(w);
#pragma GCC unroll 3
            for (int v = 0; v < nv; v++)
                acc[r][v] = a_uns ? _mm256_dpbusd_avx_epi32(acc[r][v], a, b[v])
                                  : _mm256_dpbusd_avx_epi32(acc[r][v], b[v], a);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < QG_MR; r++) {
        if (r >= mr) break;
#pragma GCC unroll 3
        for (int v = 0; v < nv; v++)
            _mm256_storeu_si256((__m256i *)(t + r * QG_NR + v * QG_VL), acc[r][v]);
    }
}
#elif QG_ISA == 1
/* b_sgn: B's packed bytes are signed (widened with sign) or not. The int16
 * lanes of a widened half hold 2 columns x 4 values of k per 128-bit lane;
 * vpmaddwd leaves two partial sums per column, added at the end. */
QG_INLINE void qg_tile(const qg_a_t *ap, const uint8_t *bp, ptrdiff_t k4, int32_t *t,
                       const int mr, const int b_sgn, const int nv) {
    (void)nv;
    __m256i lo[QG_MR], hi[QG_MR];
#pragma GCC unroll 8
    for (int r = 0; r < QG_MR; r++) lo[r] = hi[r] = _mm256_setzero_si256();
    for (ptrdiff_t q = 0; q < k4; q++) {
        __m256i raw = _mm256_loadu_si256((const __m256i *)(bp + q * QG_NR * 4));
        __m128i r0 = _mm256_castsi256_si128(raw), r1 = _mm256_extracti128_si256(raw, 1);
        __m256i b0 = b_sgn ? _mm256_cvtepi8_epi16(r0) : _mm256_cvtepu8_epi16(r0);
        __m256i b1 = b_sgn ? _mm256_cvtepi8_epi16(r1) : _mm256_cvtepu8_epi16(r1);
#pragma GCC unroll 8
        for (int r = 0; r < QG_MR; r++) {
            if (r >= mr) break;
            long long w;
            memcpy(&w, ap + (q * QG_MR + r) * 4, 8);
            __m256i a = _mm256_set1_epi64x(w);
            lo[r] = _mm256_add_epi32(lo[r], _mm256_madd_epi16(b0, a));
            hi[r] = _mm256_add_epi32(hi[r], _mm256_madd_epi16(b1, a));
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < QG_MR; r++) {
        if (r >= mr) break;
        __m256i h = _mm256_hadd_epi32(lo[r], hi[r]); /* c0 c1 c4 c5 | c2 c3 c6 c7 */
        h = _mm256_permute4x64_epi64(h, 0xD8);
        _mm256_storeu_si256((__m256i *)(t + r * QG_NR), h);
    }
}
#else
QG_INLINE void qg_tile(const qg_a_t *ap, const uint8_t *bp, ptrdiff_t k4, int32_t *t,
                       const int mr, const int b_sgn, const int nv) {
    const int nc = nv * QG_VL;
    uint32_t acc[QG_MR][QG_NR];
    memset(acc, 0, sizeof(acc));
    for (ptrdiff_t q = 0; q < k4; q++) {
        const uint8_t *b = bp + q * QG_NR * 4;
        int32_t bv[QG_NR * 4];
        for (int j = 0; j < nc * 4; j++) bv[j] = qg_val(b[j], b_sgn);
        for (int r = 0; r < mr; r++) {
            const qg_a_t *a = ap + (q * QG_MR + r) * 4;
            int32_t a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
            for (int j = 0; j < nc; j++)
                acc[r][j] += (uint32_t)(a0 * bv[4 * j] + a1 * bv[4 * j + 1] +
                                        a2 * bv[4 * j + 2] + a3 * bv[4 * j + 3]);
        }
    }
    for (int r = 0; r < mr; r++)
        for (int j = 0; j < nc; j++) t[r * QG_NR + j] = (int32_t)acc[r][j];
}
#endif

/* ---- the epilogue ------------------------------------------------------- */

enum { QG_OUT_I32 = 0, QG_OUT_F32 = 1, QG_OUT_Q8 = 2 };

typedef struct {
    int kind;               /* QG_OUT_* */
    int32_t K;              /* the number of terms */
    const int32_t *za;      /* per row (M), with the flip's 128 */
    const int32_t *zb;      /* per column (N) */
    const int32_t *rsum;    /* row sums of packed A (M), NULL where zb is all 0 */
    const int32_t *csum;    /* column sums of packed B (N), NULL where za is all 0 */
    /* per-channel parameters: element (m, n) at p[m * rs + n * cs] */
    ptrdiff_t rs, cs;
    const float *scale;     /* F32: y = (float)acc * scale (+ fbias) */
    const float *fbias;
    const float *mult;      /* Q8: y = (float)(acc + ibias) * mult, in float32 */
    const int32_t *ibias;
    int32_t yzp;            /* Q8: the zero point, added after rounding */
    int lo, hi;             /* Q8: saturation bounds */
    int out_signed;         /* Q8: int8 out, else uint8 */
    char *out;              /* element (m, n) at out + (m * ldo + n) * size */
    ptrdiff_t ldo;
} qg_epi;

#if QG_ISA == 3
/* Store the 16 bytes b (n of them, mask k): narrowed in a register first.
 * The compiler would otherwise fold vpmovdb into its store form, several
 * times slower (microcoded on AMD Zen 4). */
#define QG_STORE16(dst, b, n, k)                                 \
    do {                                                         \
        __m128i qg_b_ = (b);                                     \
        __asm__("" : "+x"(qg_b_));                               \
        if ((n) == 16)                                           \
            _mm_storeu_si128((__m128i *)(dst), qg_b_);           \
        else                                                     \
            _mm_mask_storeu_epi8((dst), (k), qg_b_);             \
    } while (0)
#endif

/* nr values of acc requantized into out as onnxruntime's MLAS
 * (MlasRequantizeOutput) does, per-channel parameters from p0 (step e->cs):
 * the int32 sum acc + ibias (wrapping) converted to float32, multiplied by
 * the float32 mult (one rounding, no fused add), clamped to [lo - yzp,
 * hi - yzp] (max then min: a NaN becomes lo - yzp, as maxps/minps give),
 * rounded to nearest even (cvtps2dq in the default rounding mode), plus
 * yzp. The numpy reference (_qgemm_ref.requantize) computes the same. */
QG_INLINE void qg_q8_row(const qg_epi *e, const int32_t *acc, int nr, ptrdiff_t p0, char *out) {
    const ptrdiff_t cs = e->cs;
    const int32_t *ib = e->ibias;
    const float *mu = e->mult;
    const float flo = (float)(e->lo - e->yzp), fhi = (float)(e->hi - e->yzp);
    int j = 0;
#if QG_ISA == 3
    const __m512 lo = _mm512_set1_ps(flo), hi = _mm512_set1_ps(fhi);
    const __m512i yz = _mm512_set1_epi32(e->yzp);
    const __m512i bv = ib && !cs ? _mm512_set1_epi32(ib[p0]) : _mm512_setzero_si512();
    const __m512 mv = cs ? _mm512_setzero_ps() : _mm512_set1_ps(mu[p0]);
    for (; j < nr; j += 16) {
        int n = nr - j < 16 ? nr - j : 16;
        __mmask16 k = (__mmask16)((1u << n) - 1);
        __m512i a = _mm512_maskz_loadu_epi32(k, acc + j);
        if (ib) a = _mm512_add_epi32(a, cs ? _mm512_maskz_loadu_epi32(k, ib + p0 + j) : bv);
        __m512 m = cs ? _mm512_maskz_loadu_ps(k, mu + p0 + j) : mv;
        __m512 y = _mm512_mul_ps(_mm512_cvtepi32_ps(a), m);
        y = _mm512_min_ps(_mm512_max_ps(y, lo), hi);
        __m512i v = _mm512_add_epi32(_mm512_cvtps_epi32(y), yz);
        QG_STORE16(out + j, _mm512_cvtepi32_epi8(v), n, k);
    }
#elif QG_ISA >= 1
    const __m256 lo = _mm256_set1_ps(flo), hi = _mm256_set1_ps(fhi);
    const __m256i yz = _mm256_set1_epi32(e->yzp);
    const __m256i bv = ib && !cs ? _mm256_set1_epi32(ib[p0]) : _mm256_setzero_si256();
    const __m256 mv = cs ? _mm256_setzero_ps() : _mm256_set1_ps(mu[p0]);
    for (; j + 8 <= nr; j += 8) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(acc + j));
        if (ib) a = _mm256_add_epi32(a, cs ? _mm256_loadu_si256((const __m256i *)(ib + p0 + j)) : bv);
        __m256 m = cs ? _mm256_loadu_ps(mu + p0 + j) : mv;
        __m256 y = _mm256_mul_ps(_mm256_cvtepi32_ps(a), m);
        y = _mm256_min_ps(_mm256_max_ps(y, lo), hi);
        __m256i v = _mm256_add_epi32(_mm256_cvtps_epi32(y), yz);
        /* every value already in [lo, hi]: the packs do not saturate */
        __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
        w = e->out_signed ? _mm_packs_epi16(w, w) : _mm_packus_epi16(w, w);
        _mm_storel_epi64((__m128i *)(out + j), w);
    }
#endif
    for (; j < nr; j++) {
        ptrdiff_t p = p0 + j * cs;
        int32_t a = acc[j];
        if (ib) a = (int32_t)((uint32_t)a + (uint32_t)ib[p]);
        float y = (float)a * mu[p];
        y = y > flo ? y : flo; /* maxps: the second operand where either is NaN */
        y = y < fhi ? y : fhi;
        out[j] = (char)((int)rintf(y) + e->yzp);
    }
}

/* nr values of acc as float32: (float)acc * scale (+ fbias), a multiply and
 * an add each rounded (no fused multiply-add), as numpy computes them. */
static void qg_f32_row(const qg_epi *e, const int32_t *acc, int nr, ptrdiff_t p0, float *o) {
    int j = 0;
#if QG_ISA == 3
    for (; j < nr; j += 16) {
        int n = nr - j < 16 ? nr - j : 16;
        __mmask16 k = (__mmask16)((1u << n) - 1);
        __m512 y = _mm512_cvtepi32_ps(_mm512_maskz_loadu_epi32(k, acc + j));
        __m512 s = e->cs ? _mm512_maskz_loadu_ps(k, e->scale + p0 + j)
                         : _mm512_set1_ps(e->scale[p0]);
        y = _mm512_mul_ps(y, s);
        if (e->fbias)
            y = _mm512_add_ps(y, e->cs ? _mm512_maskz_loadu_ps(k, e->fbias + p0 + j)
                                       : _mm512_set1_ps(e->fbias[p0]));
        _mm512_mask_storeu_ps(o + j, k, y);
    }
#elif QG_ISA >= 1
    for (; j + 8 <= nr; j += 8) {
        __m256 y = _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(acc + j)));
        __m256 s = e->cs ? _mm256_loadu_ps(e->scale + p0 + j) : _mm256_set1_ps(e->scale[p0]);
        y = _mm256_mul_ps(y, s);
        if (e->fbias)
            y = _mm256_add_ps(y, e->cs ? _mm256_loadu_ps(e->fbias + p0 + j)
                                       : _mm256_set1_ps(e->fbias[p0]));
        _mm256_storeu_ps(o + j, y);
    }
#endif
    for (; j < nr; j++) {
        ptrdiff_t p = p0 + j * e->cs;
        float y = (float)acc[j] * e->scale[p];
        if (e->fbias) y = y + e->fbias[p];
        o[j] = y;
    }
}

/* Finish the tile t (mr x nr of QG_NR-wide rows) at (m0, n0); cs: the
 * column sums of its B panel (NULL where A's zero points are all 0). */
static void qg_finish(const qg_epi *e, int32_t *t, ptrdiff_t m0, ptrdiff_t n0, int mr, int nr,
                      const int32_t *cs) {
    for (int r = 0; r < mr; r++) {
        ptrdiff_t m = m0 + r;
        uint32_t *row = (uint32_t *)(t + r * QG_NR);
        if (e->rsum) {
            uint32_t rs = (uint32_t)e->rsum[m];
            const int32_t *zb = e->zb + n0;
            for (int j = 0; j < nr; j++) row[j] -= (uint32_t)zb[j] * rs;
        }
        if (cs) {
            uint32_t za = (uint32_t)e->za[m];
            for (int j = 0; j < nr; j++) row[j] -= za * (uint32_t)cs[j];
            if (e->rsum) {
                uint32_t kz = (uint32_t)e->K * za;
                const int32_t *zb = e->zb + n0;
                for (int j = 0; j < nr; j++) row[j] += kz * (uint32_t)zb[j];
            }
        }
        const int32_t *acc = (const int32_t *)row;
        ptrdiff_t p0 = m * e->rs + n0 * e->cs;
        if (e->kind == QG_OUT_I32)
            memcpy(e->out + (m * e->ldo + n0) * 4, acc, (size_t)nr * 4);
        else if (e->kind == QG_OUT_F32)
            qg_f32_row(e, acc, nr, p0, (float *)e->out + m * e->ldo + n0);
        else
            qg_q8_row(e, acc, nr, p0, e->out + m * e->ldo + n0);
    }
}

/* The register tile for mr rows and nv vectors of columns: s is a_uns in
 * the VNNI builds (A is vpdpbusd's unsigned operand), b_sgn in the others
 * (B's packed bytes are signed). Constant arguments: one loop each. */
#define QG_T(R, NV) (s ? qg_tile(a, b, k4, t, R, 1, NV) : qg_tile(a, b, k4, t, R, 0, NV))
#if QG_MR > 6
#define QG_MR_CASES(NV) case 7: QG_T(7, NV); break; case 6: QG_T(6, NV); break; \
    case 5: QG_T(5, NV); break; case 4: QG_T(4, NV); break; case 3: QG_T(3, NV); break; \
    case 2: QG_T(2, NV); break; default: QG_T(1, NV); break;
#elif QG_MR > 4
#define QG_MR_CASES(NV) case 5: QG_T(5, NV); break; case 4: QG_T(4, NV); break; \
    case 3: QG_T(3, NV); break; case 2: QG_T(2, NV); break; default: QG_T(1, NV); break;
#else
#define QG_MR_CASES(NV) case 3: QG_T(3, NV); break; case 2: QG_T(2, NV); break; \
    default: QG_T(1, NV); break;
#endif
#define QG_PANEL_FN(NV)                                                                     \
    static void qg_panel_##NV(const qg_a_t *ap, const uint8_t *b, ptrdiff_t k4, int s,      \
                              const qg_epi *e, const int32_t *cs, ptrdiff_t m_lo,           \
                              ptrdiff_t m_hi, ptrdiff_t n0, int nr) {                       \
        int32_t t[QG_MR * QG_NR] __attribute__((aligned(64)));                              \
        for (ptrdiff_t m0 = m_lo; m0 < m_hi; m0 += QG_MR) {                                 \
            const qg_a_t *a = ap + m0 * k4 * 4;                                             \
            int mr = (int)(m_hi - m0 < QG_MR ? m_hi - m0 : QG_MR);                          \
            switch (mr) {                                                                   \
            case QG_MR: QG_T(QG_MR, NV); break;                                             \
            QG_MR_CASES(NV)                                                                 \
            }                                                                               \
            qg_finish(e, t, m0, n0, mr, nr, cs);                                            \
        }                                                                                   \
    }
QG_PANEL_FN(1)
#if QG_NV > 1
QG_PANEL_FN(2)
#endif
#if QG_NV > 2
QG_PANEL_FN(3)
#endif
#if QG_NV > 3
QG_PANEL_FN(4)
#endif

/* Rows [m_lo, m_hi) (m_lo a multiple of QG_MR) of packed A (ap) against one
 * packed B panel b of nr columns at n0, finished; only the vectors of
 * columns the panel fills are computed. */
static void qg_panel(const qg_a_t *ap, const uint8_t *b, ptrdiff_t k4, int s, const qg_epi *e,
                     const int32_t *cs, ptrdiff_t m_lo, ptrdiff_t m_hi, ptrdiff_t n0, int nr) {
    int nv = (nr + QG_VL - 1) / QG_VL;
    switch (nv) {
#if QG_NV > 3
    case 3: qg_panel_3(ap, b, k4, s, e, cs, m_lo, m_hi, n0, nr); break;
    case 2: qg_panel_2(ap, b, k4, s, e, cs, m_lo, m_hi, n0, nr); break;
    case 1: qg_panel_1(ap, b, k4, s, e, cs, m_lo, m_hi, n0, nr); break;
    default: qg_panel_4(ap, b, k4, s, e, cs, m_lo, m_hi, n0, nr); break;
#elif QG_NV > 2
    case 2: qg_panel_2(ap, b, k4, s, e, cs, m_lo, m_hi, n0, nr); break;
    case 1: qg_panel_1(ap, b, k4, s, e, cs, m_lo, m_hi, n0, nr); break;
    default: qg_panel_3(ap, b, k4, s, e, cs, m_lo, m_hi, n0, nr); break;
#elif QG_NV > 1
    case 1: qg_panel_1(ap, b, k4, s, e, cs, m_lo, m_hi, n0, nr); break;
    default: qg_panel_2(ap, b, k4, s, e, cs, m_lo, m_hi, n0, nr); break;
#else
    default: qg_panel_1(ap, b, k4, s, e, cs, m_lo, m_hi, n0, nr); break;
#endif
    }
}

/* All tiles of rows [m_lo, m_hi) (m_lo a multiple of QG_MR) and B panels
 * [p_lo, p_hi): packed A (ap) and B (bp) of k4 groups of k. */
static void qg_run(const qg_a_t *ap, const uint8_t *bp, ptrdiff_t M, ptrdiff_t N, ptrdiff_t k4,
                   int a_uns, int b_sgn, const qg_epi *e, ptrdiff_t m_lo, ptrdiff_t m_hi,
                   ptrdiff_t p_lo, ptrdiff_t p_hi) {
    int s = QG_VNNI ? a_uns : b_sgn;
    if (m_hi > M) m_hi = M;
    for (ptrdiff_t p = p_lo; p < p_hi; p++) {
        ptrdiff_t n0 = p * QG_NR;
        int nr = (int)(N - n0 < QG_NR ? N - n0 : QG_NR);
        qg_panel(ap, bp + p * k4 * QG_NR * 4, k4, s, e, e->csum ? e->csum + n0 : NULL, m_lo,
                 m_hi, n0, nr);
    }
}

#endif /* ORTCORE_QGEMM_H */
