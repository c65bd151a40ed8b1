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

/* Positions [n0, n0 + QG_NR) of a 2-D convolution's columns (im2col) packed
 * as B: k = (c, i, j) over C channels and a kh x kw window, n = (oh, ow);
 * x (C x H x W) one image's planes (a group's), padding reads pad. */
typedef struct {
    ptrdiff_t C, H, W, kh, kw, sh, sw, dh, dw, ph, pw, OH, OW;
} qg_geom;

static void qg_pack_im2col_panel(const uint8_t *x, const qg_geom *g, ptrdiff_t n0, uint8_t pad,
                                 uint8_t flip, int psgn, uint8_t *out, int32_t *csum) {
    ptrdiff_t P = g->OH * g->OW, K = g->C * g->kh * g->kw, ks = g->kh * g->kw;
    ptrdiff_t nr = P - n0 < QG_NR ? P - n0 : QG_NR;
    ptrdiff_t k4 = (K + 3) / 4;
    if (nr < QG_NR || K % 4) memset(out, 0, (size_t)(k4 * QG_NR * 4));
    for (ptrdiff_t k = 0; k < K; k++) {
        ptrdiff_t c = k / ks, i = k % ks / g->kw, j = k % g->kw;
        const uint8_t *plane = x + c * g->H * g->W;
        uint8_t *ob = out + (k / 4) * QG_NR * 4 + (k % 4);
        ptrdiff_t col = 0;
        while (col < nr) {
            ptrdiff_t n = n0 + col, oh = n / g->OW, ow0 = n % g->OW;
            ptrdiff_t run = g->OW - ow0 < nr - col ? g->OW - ow0 : nr - col;
            ptrdiff_t ih = oh * g->sh - g->ph + i * g->dh;
            uint8_t *o = ob + col * 4;
            if (ih < 0 || ih >= g->H) {
                for (ptrdiff_t t = 0; t < run; t++) o[4 * t] = pad ^ flip;
            } else {
                const uint8_t *row = plane + ih * g->W;
                ptrdiff_t off = j * g->dw - g->pw;
                /* ow whose iw = ow * sw + off is inside [0, W) */
                ptrdiff_t lo = off >= 0 ? 0 : (-off + g->sw - 1) / g->sw;
                ptrdiff_t hi = g->W - off <= 0 ? 0 : (g->W - off + g->sw - 1) / g->sw;
                for (ptrdiff_t t = 0; t < run; t++) {
                    ptrdiff_t ow = ow0 + t;
                    o[4 * t] = (ow >= lo && ow < hi ? row[ow * g->sw + off] : pad) ^ flip;
                }
            }
            col += run;
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
                       const int mr, const int a_uns, const int b_sgn) {
    (void)b_sgn;
    __m512i acc[QG_MR][QG_NV];
#pragma GCC unroll 8
    for (int r = 0; r < QG_MR; r++)
#pragma GCC unroll 3
        for (int v = 0; v < QG_NV; v++) acc[r][v] = _mm512_setzero_si512();
    for (ptrdiff_t q = 0; q < k4; q++) {
        __m512i b[QG_NV];
#pragma GCC unroll 3
        for (int v = 0; v < QG_NV; v++)
            b[v] = _mm512_loadu_si512((const void *)(bp + (q * QG_NR + v * QG_VL) * 4));
#pragma GCC unroll 8
        for (int r = 0; r < QG_MR; r++) {
            if (r >= mr) break;
            int32_t w;
            memcpy(&w, ap + (q * QG_MR + r) * 4, 4);
            __m512i a = _mm512_set1_epi32(w);
#pragma GCC unroll 3
            for (int v = 0; v < QG_NV; v++)
                acc[r][v] = a_uns ? _mm512_dpbusd_epi32(acc[r][v], a, b[v])
                                  : _mm512_dpbusd_epi32(acc[r][v], b[v], a);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < QG_MR; r++) {
        if (r >= mr) break;
#pragma GCC unroll 3
        for (int v = 0; v < QG_NV; v++)
            _mm512_storeu_si512((void *)(t + r * QG_NR + v * QG_VL), acc[r][v]);
    }
}
#elif QG_ISA == 2
QG_INLINE void qg_tile(const qg_a_t *ap, const uint8_t *bp, ptrdiff_t k4, int32_t *t,
                       const int mr, const int a_uns, const int b_sgn) {
    (void)b_sgn;
    __m256i acc[QG_MR][QG_NV];
#pragma GCC unroll 8
    for (int r = 0; r < QG_MR; r++)
#pragma GCC unroll 3
        for (int v = 0; v < QG_NV; v++) acc[r][v] = _mm256_setzero_si256();
    for (ptrdiff_t q = 0; q < k4; q++) {
        __m256i b[QG_NV];
#pragma GCC unroll 3
        for (int v = 0; v < QG_NV; v++)
            b[v] = _mm256_loadu_si256((const __m256i *)(bp + (q * QG_NR + v * QG_VL) * 4));
#pragma GCC unroll 8
        for (int r = 0; r < QG_MR; r++) {
            if (r >= mr) break;
            int32_t w;
            memcpy(&w, ap + (q * QG_MR + r) * 4, 4);
            __m256i a = _mm256_set1_epi32(w);
#pragma GCC unroll 3
            for (int v = 0; v < QG_NV; v++)
                acc[r][v] = a_uns ? _mm256_dpbusd_avx_epi32(acc[r][v], a, b[v])
                                  : _mm256_dpbusd_avx_epi32(acc[r][v], b[v], a);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < QG_MR; r++) {
        if (r >= mr) break;
#pragma GCC unroll 3
        for (int v = 0; v < QG_NV; v++)
            _mm256_storeu_si256((__m256i *)(t + r * QG_NR + v * QG_VL), acc[r][v]);
    }
}
#elif QG_ISA == 1
/* b_sgn: B's packed bytes are signed (widened with sign) or not. The int16
 * lanes of a widened half hold 2 columns x 4 values of k per 128-bit lane;
 * vpmaddwd leaves two partial sums per column, added at the end. */
QG_INLINE void qg_tile(const qg_a_t *ap, const uint8_t *bp, ptrdiff_t k4, int32_t *t,
                       const int mr, const int a_uns, const int b_sgn) {
    (void)a_uns;
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
                       const int mr, const int a_uns, const int b_sgn) {
    (void)a_uns;
    uint32_t acc[QG_MR][QG_NR];
    memset(acc, 0, sizeof(acc));
    for (ptrdiff_t q = 0; q < k4; q++) {
        const uint8_t *b = bp + q * QG_NR * 4;
        int32_t bv[QG_NR * 4];
        for (int j = 0; j < QG_NR * 4; j++) bv[j] = qg_val(b[j], b_sgn);
        for (int r = 0; r < mr; r++) {
            const qg_a_t *a = ap + (q * QG_MR + r) * 4;
            int32_t a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
            for (int j = 0; j < QG_NR; j++)
                acc[r][j] += (uint32_t)(a0 * bv[4 * j] + a1 * bv[4 * j + 1] +
                                        a2 * bv[4 * j + 2] + a3 * bv[4 * j + 3]);
        }
    }
    for (int r = 0; r < mr; r++)
        for (int j = 0; j < QG_NR; j++) t[r * QG_NR + j] = (int32_t)acc[r][j];
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
    const double *mult;     /* Q8: y = (acc + ibias) * mult */
    const int32_t *ibias;
    double yzp;             /* Q8: added before rounding, or after with zp_after */
    int zp_after;
    int lo, hi;             /* Q8: saturation bounds */
    int out_signed;         /* Q8: int8 out, else uint8 */
    char *out;              /* element (m, n) at out + (m * ldo + n) * size */
    ptrdiff_t ldo;
} qg_epi;

/* Finish the tile t (mr x nr of QG_NR-wide rows) at (m0, n0). */
static void qg_finish(const qg_epi *e, int32_t *t, ptrdiff_t m0, ptrdiff_t n0, int mr, int nr) {
    for (int r = 0; r < mr; r++) {
        ptrdiff_t m = m0 + r;
        uint32_t *row = (uint32_t *)(t + r * QG_NR);
        if (e->rsum) {
            uint32_t rs = (uint32_t)e->rsum[m];
            const int32_t *zb = e->zb + n0;
            for (int j = 0; j < nr; j++) row[j] -= (uint32_t)zb[j] * rs;
        }
        if (e->csum) {
            uint32_t za = (uint32_t)e->za[m];
            const int32_t *cs = e->csum + n0;
            for (int j = 0; j < nr; j++) row[j] -= za * (uint32_t)cs[j];
            if (e->rsum) {
                uint32_t kz = (uint32_t)e->K * za;
                const int32_t *zb = e->zb + n0;
                for (int j = 0; j < nr; j++) row[j] += kz * (uint32_t)zb[j];
            }
        }
        const int32_t *acc = (const int32_t *)row;
        ptrdiff_t p0 = m * e->rs + n0 * e->cs;
        if (e->kind == QG_OUT_I32) {
            memcpy(e->out + (m * e->ldo + n0) * 4, acc, (size_t)nr * 4);
        } else if (e->kind == QG_OUT_F32) {
            float *o = (float *)e->out + m * e->ldo + n0;
            for (int j = 0; j < nr; j++) o[j] = (float)acc[j] * e->scale[p0 + j * e->cs];
            if (e->fbias)
                for (int j = 0; j < nr; j++) o[j] = o[j] + e->fbias[p0 + j * e->cs];
        } else {
            double y[QG_NR];
            for (int j = 0; j < nr; j++) y[j] = (double)acc[j];
            if (e->ibias)
                for (int j = 0; j < nr; j++) y[j] += (double)e->ibias[p0 + j * e->cs];
            for (int j = 0; j < nr; j++) y[j] *= e->mult[p0 + j * e->cs];
            if (e->zp_after) {
                for (int j = 0; j < nr; j++) y[j] = rint(y[j]) + e->yzp;
            } else {
                for (int j = 0; j < nr; j++) y[j] = rint(y[j] + e->yzp);
            }
            double lo = e->lo, hi = e->hi;
            for (int j = 0; j < nr; j++) y[j] = y[j] < lo ? lo : (y[j] > hi ? hi : y[j]);
            if (e->out_signed) {
                int8_t *o = (int8_t *)e->out + m * e->ldo + n0;
                for (int j = 0; j < nr; j++) o[j] = (int8_t)(int)y[j];
            } else {
                uint8_t *o = (uint8_t *)e->out + m * e->ldo + n0;
                for (int j = 0; j < nr; j++) o[j] = (uint8_t)(int)y[j];
            }
        }
    }
}

/* All tiles of rows [m_lo, m_hi) (m_lo a multiple of QG_MR) and B panels
 * [p_lo, p_hi): packed A (ap) and B (bp) of k4 groups of k. */
static void qg_run(const qg_a_t *ap, const uint8_t *bp, ptrdiff_t M, ptrdiff_t N, ptrdiff_t k4,
                   int a_uns, int b_sgn, const qg_epi *e, ptrdiff_t m_lo, ptrdiff_t m_hi,
                   ptrdiff_t p_lo, ptrdiff_t p_hi) {
    int32_t t[QG_MR * QG_NR] __attribute__((aligned(64)));
    if (m_hi > M) m_hi = M;
    for (ptrdiff_t p = p_lo; p < p_hi; p++) {
        const uint8_t *b = bp + p * k4 * QG_NR * 4;
        ptrdiff_t n0 = p * QG_NR;
        int nr = (int)(N - n0 < QG_NR ? N - n0 : QG_NR);
        for (ptrdiff_t m0 = m_lo; m0 < m_hi; m0 += QG_MR) {
            const qg_a_t *a = ap + m0 * k4 * 4;
            int mr = (int)(m_hi - m0 < QG_MR ? m_hi - m0 : QG_MR);
            /* constant arguments for each case: one specialized loop each */
#define QG_CASE(R)                                                                   \
    case R:                                                                          \
        if (a_uns) {                                                                 \
            if (b_sgn) qg_tile(a, b, k4, t, R, 1, 1); else qg_tile(a, b, k4, t, R, 1, 0); \
        } else {                                                                     \
            if (b_sgn) qg_tile(a, b, k4, t, R, 0, 1); else qg_tile(a, b, k4, t, R, 0, 0); \
        }                                                                            \
        break;
            switch (mr) {
                QG_CASE(1)
                QG_CASE(2)
                QG_CASE(3)
                QG_CASE(4)
#if QG_MR > 4
                QG_CASE(5)
                QG_CASE(6)
#endif
#if QG_MR > 6
                QG_CASE(7)
                QG_CASE(8)
#endif
            }
#undef QG_CASE
            qg_finish(e, t, m0, n0, mr, nr);
        }
    }
}

/* ---- depthwise convolution ---------------------------------------------- */

/* One channel of a 2-D depthwise convolution: acc (OH x OW) = sum over the
 * window of (x - xz) (w - wz), padding contributing nothing; x is read with
 * signedness xs. */
static void qg_depthwise_plane(const uint8_t *x, int xs, int32_t xz, const int32_t *wc,
                               const qg_geom *g, int32_t *acc) {
    ptrdiff_t OH = g->OH, OW = g->OW, W = g->W;
    for (ptrdiff_t oh = 0; oh < OH; oh++) {
        uint32_t *row = (uint32_t *)acc + oh * OW;
        for (ptrdiff_t ow = 0; ow < OW; ow++) row[ow] = 0;
        for (ptrdiff_t i = 0; i < g->kh; i++) {
            ptrdiff_t ih = oh * g->sh - g->ph + i * g->dh;
            if (ih < 0 || ih >= g->H) continue;
            const uint8_t *xr = x + ih * W;
            for (ptrdiff_t j = 0; j < g->kw; j++) {
                uint32_t wv = (uint32_t)wc[i * g->kw + j];
                ptrdiff_t off = j * g->dw - g->pw;
                ptrdiff_t lo = off >= 0 ? 0 : (-off + g->sw - 1) / g->sw;
                ptrdiff_t hi = W - off <= 0 ? 0 : (W - off + g->sw - 1) / g->sw;
                if (hi > OW) hi = OW;
                if (wv == 0 || lo >= hi) continue;
                if (g->sw == 1) {
                    const uint8_t *xp = xr + off;
                    if (xs) {
                        for (ptrdiff_t ow = lo; ow < hi; ow++)
                            row[ow] += (uint32_t)((int32_t)(int8_t)xp[ow] - xz) * wv;
                    } else {
                        for (ptrdiff_t ow = lo; ow < hi; ow++)
                            row[ow] += (uint32_t)((int32_t)xp[ow] - xz) * wv;
                    }
                } else {
                    for (ptrdiff_t ow = lo; ow < hi; ow++)
                        row[ow] += (uint32_t)(qg_val(xr[ow * g->sw + off], xs) - xz) * wv;
                }
            }
        }
    }
}

#endif /* ORTCORE_QGEMM_H */
