/* 8-bit integer convolutions on the GEMM of _qgemm.h:
 *  - qg_conv_run: a 2-D convolution's columns (im2col) are never written
 *    whole: each thread packs one B panel of them (from the input padded
 *    once and split by stride phase, so that every row of the panel is
 *    consecutive bytes: 16 columns per SSE2 interleave) right before the
 *    register tiles read it from L1/L2;
 *  - qg_depthwise_plane_f32: a depthwise convolution in float32 lanes
 *    (exact: the sums are integers below 2**24), several vectors of outputs
 *    at a time; qg_depthwise_plane, its int32 form for windows too large.
 * Included by _qgemm.pxi after _qgemm.h (per build, QG_ISA). */
#ifndef ORTCORE_QCONV_H
#define ORTCORE_QCONV_H

#include "_qgemm.h"

/* ---- convolution: B panels packed from the input as the GEMM runs ------- */

/* A 2-D convolution's columns (im2col: k = (c, i, j) over C channels and a
 * kh x kw window, n = (oh, ow)) as qg_cols_panel reads them: each plane
 * padded with the padding value and its columns split into sw phases,
 * (C, Hp, sw, Wq) bytes, phase f of a row holding its padded columns f,
 * f + sw, f + 2 sw... Then every value of k reads the consecutive output
 * positions of a row of output (ow, ow + 1...) as consecutive bytes, at any
 * stride or dilation: window column j of output ow is padded column
 * ow sw + j dw, phase (j dw) % sw, index ow + (j dw) / sw. */
typedef struct {
    const uint8_t *xp;     /* the planes */
    const uint8_t *end;    /* one past the last byte that may be read */
    const ptrdiff_t *koff; /* (K) offset in xp of each k's value at (oh, ow) = (0, 0) */
    ptrdiff_t K, OH, OW;
    ptrdiff_t row;         /* offset between output rows: sh sw Wq */
} qg_cols;

/* One plane of x (H x W bytes) into out (Hp x sw x Wq), each byte xor flip,
 * padding (pt rows above, pl columns left, the rest below and right) fill. */
static void qg_cols_plane(const uint8_t *x, ptrdiff_t H, ptrdiff_t W, ptrdiff_t pt,
                          ptrdiff_t pl, ptrdiff_t Hp, ptrdiff_t sw, ptrdiff_t Wq, uint8_t fill,
                          uint8_t flip, uint8_t *out) {
    ptrdiff_t rowlen = sw * Wq;
    for (ptrdiff_t r = 0; r < Hp; r++) {
        uint8_t *o = out + r * rowlen;
        ptrdiff_t ih = r - pt;
        if (ih < 0 || ih >= H) {
            memset(o, fill, (size_t)rowlen);
            continue;
        }
        const uint8_t *xr = x + ih * W;
        if (sw == 1) {
            ptrdiff_t lo = pl < Wq ? pl : Wq, n = W < Wq - lo ? W : Wq - lo;
            memset(o, fill, (size_t)lo);
            for (ptrdiff_t w = 0; w < n; w++) o[lo + w] = xr[w] ^ flip;
            memset(o + lo + n, fill, (size_t)(Wq - lo - n));
        } else {
            for (ptrdiff_t f = 0; f < sw; f++) {
                /* index c reads iw = c sw + f - pl: inside x for c in [c0, c1) */
                uint8_t *of = o + f * Wq;
                ptrdiff_t c0 = pl - f <= 0 ? 0 : (pl - f + sw - 1) / sw;
                ptrdiff_t c1 = W + pl - f <= 0 ? 0 : (W + pl - f + sw - 1) / sw;
                if (c0 > Wq) c0 = Wq;
                if (c1 > Wq) c1 = Wq;
                if (c1 < c0) c1 = c0;
                memset(of, fill, (size_t)c0);
                const uint8_t *xf = xr + c0 * sw + f - pl;
                for (ptrdiff_t c = 0; c < c1 - c0; c++) of[c0 + c] = xf[c * sw] ^ flip;
                memset(of + c1, fill, (size_t)(Wq - c1));
            }
        }
    }
}

/* Interleave n (1 to 16) consecutive bytes of the rows p0..p3 into o: 4
 * bytes (one of each row) per column. With SSE2 all 16 are written (o has
 * room) and read where that stays before end. */
QG_INLINE void qg_il4(const uint8_t *p0, const uint8_t *p1, const uint8_t *p2,
                      const uint8_t *p3, ptrdiff_t n, const uint8_t *end, uint8_t *o) {
#if defined(__SSE2__)
    if (p0 + 16 <= end && p1 + 16 <= end && p2 + 16 <= end && p3 + 16 <= end) {
        __m128i a = _mm_loadu_si128((const __m128i *)p0), b = _mm_loadu_si128((const __m128i *)p1);
        __m128i c = _mm_loadu_si128((const __m128i *)p2), d = _mm_loadu_si128((const __m128i *)p3);
        __m128i ab0 = _mm_unpacklo_epi8(a, b), ab1 = _mm_unpackhi_epi8(a, b);
        __m128i cd0 = _mm_unpacklo_epi8(c, d), cd1 = _mm_unpackhi_epi8(c, d);
        _mm_storeu_si128((__m128i *)o, _mm_unpacklo_epi16(ab0, cd0));
        _mm_storeu_si128((__m128i *)(o + 16), _mm_unpackhi_epi16(ab0, cd0));
        _mm_storeu_si128((__m128i *)(o + 32), _mm_unpacklo_epi16(ab1, cd1));
        _mm_storeu_si128((__m128i *)(o + 48), _mm_unpackhi_epi16(ab1, cd1));
        return;
    }
#else
    (void)end;
#endif
    if (n > 16) n = 16;
    for (ptrdiff_t t = 0; t < n; t++) {
        o[4 * t] = p0[t];
        o[4 * t + 1] = p1[t];
        o[4 * t + 2] = p2[t];
        o[4 * t + 3] = p3[t];
    }
}

/* Columns [n0, n0 + QG_NR) packed as B into out (K4 x QG_NR x 4 bytes, with
 * 128 bytes of room after it: whole chunks of 16 or 32 columns are written). Past K the last group repeats a row of its
 * own (A is 0 there: no product changes); past P the columns hold anything
 * (their results are dropped). csum (QG_NR) gets each column's sum over K
 * of the values read with signedness psgn, when not NULL. */
static void qg_cols_panel(const qg_cols *g, ptrdiff_t n0, int psgn, uint8_t *out,
                          int32_t *csum) {
    ptrdiff_t P = g->OH * g->OW, K = g->K, k4 = (K + 3) / 4;
    ptrdiff_t nr = P - n0 < QG_NR ? P - n0 : QG_NR;
    ptrdiff_t rs[QG_NR], ro[QG_NR], rl[QG_NR];
    int runs = 0;
    for (ptrdiff_t col = 0; col < nr;) {
        ptrdiff_t n = n0 + col, oh = n / g->OW, ow = n % g->OW;
        ptrdiff_t run = g->OW - ow < nr - col ? g->OW - ow : nr - col;
        ptrdiff_t off = oh * g->row + ow;
        if (runs && ro[runs - 1] + rl[runs - 1] == off) {
            rl[runs - 1] += run;
        } else {
            rs[runs] = col;
            ro[runs] = off;
            rl[runs] = run;
            runs++;
        }
        col += run;
    }
    /* the groups whose rows all stay before end for whole 16-byte chunks */
    ptrdiff_t reach = 0;
    for (int r = 0; r < runs; r++) {
        ptrdiff_t top = ro[r] + (rl[r] + 31) / 32 * 32;
        if (top > reach) reach = top;
    }
    ptrdiff_t safe = (g->end - g->xp) - reach;
    for (ptrdiff_t q = 0; q < k4; q++) {
        const ptrdiff_t *ko = g->koff + 4 * q;
        ptrdiff_t kk = K - 4 * q;
        ptrdiff_t o0 = ko[0], o1 = ko[kk > 1 ? 1 : 0], o2 = ko[kk > 2 ? 2 : 0];
        ptrdiff_t o3 = ko[kk > 3 ? 3 : 0];
        const uint8_t *p0 = g->xp + o0, *p1 = g->xp + o1, *p2 = g->xp + o2, *p3 = g->xp + o3;
        uint8_t *o = out + q * QG_NR * 4;
#if defined(__SSE2__)
        if (o0 <= safe && o1 <= safe && o2 <= safe && o3 <= safe) {
            for (int r = 0; r < runs; r++) {
                const uint8_t *a0 = p0 + ro[r], *a1 = p1 + ro[r], *a2 = p2 + ro[r];
                const uint8_t *a3 = p3 + ro[r];
                uint8_t *ob = o + rs[r] * 4;
                ptrdiff_t t = 0;
#if defined(__AVX2__)
                for (; t + 16 < rl[r]; t += 32) {
                    __m256i a = _mm256_loadu_si256((const __m256i *)(a0 + t));
                    __m256i b = _mm256_loadu_si256((const __m256i *)(a1 + t));
                    __m256i c = _mm256_loadu_si256((const __m256i *)(a2 + t));
                    __m256i d = _mm256_loadu_si256((const __m256i *)(a3 + t));
                    __m256i ab0 = _mm256_unpacklo_epi8(a, b), ab1 = _mm256_unpackhi_epi8(a, b);
                    __m256i cd0 = _mm256_unpacklo_epi8(c, d), cd1 = _mm256_unpackhi_epi8(c, d);
                    /* columns 0-3 | 16-19, 4-7 | 20-23, 8-11 | 24-27, 12-15 | 28-31 */
                    __m256i q0 = _mm256_unpacklo_epi16(ab0, cd0), q1 = _mm256_unpackhi_epi16(ab0, cd0);
                    __m256i q2 = _mm256_unpacklo_epi16(ab1, cd1), q3 = _mm256_unpackhi_epi16(ab1, cd1);
                    uint8_t *w = ob + 4 * t;
                    _mm256_storeu_si256((__m256i *)w, _mm256_permute2x128_si256(q0, q1, 0x20));
                    _mm256_storeu_si256((__m256i *)(w + 32), _mm256_permute2x128_si256(q2, q3, 0x20));
                    _mm256_storeu_si256((__m256i *)(w + 64), _mm256_permute2x128_si256(q0, q1, 0x31));
                    _mm256_storeu_si256((__m256i *)(w + 96), _mm256_permute2x128_si256(q2, q3, 0x31));
                }
#endif
                for (; t < rl[r]; t += 16) {
                    __m128i a = _mm_loadu_si128((const __m128i *)(a0 + t));
                    __m128i b = _mm_loadu_si128((const __m128i *)(a1 + t));
                    __m128i c = _mm_loadu_si128((const __m128i *)(a2 + t));
                    __m128i d = _mm_loadu_si128((const __m128i *)(a3 + t));
                    __m128i ab0 = _mm_unpacklo_epi8(a, b), ab1 = _mm_unpackhi_epi8(a, b);
                    __m128i cd0 = _mm_unpacklo_epi8(c, d), cd1 = _mm_unpackhi_epi8(c, d);
                    _mm_storeu_si128((__m128i *)(ob + 4 * t), _mm_unpacklo_epi16(ab0, cd0));
                    _mm_storeu_si128((__m128i *)(ob + 4 * t + 16), _mm_unpackhi_epi16(ab0, cd0));
                    _mm_storeu_si128((__m128i *)(ob + 4 * t + 32), _mm_unpacklo_epi16(ab1, cd1));
                    _mm_storeu_si128((__m128i *)(ob + 4 * t + 48), _mm_unpackhi_epi16(ab1, cd1));
                }
            }
            continue;
        }
#else
        (void)safe;
#endif
        for (int r = 0; r < runs; r++)
            for (ptrdiff_t t = 0; t < rl[r]; t += 16)
                qg_il4(p0 + ro[r] + t, p1 + ro[r] + t, p2 + ro[r] + t, p3 + ro[r] + t,
                       rl[r] - t, g->end, o + (rs[r] + t) * 4);
    }
    if (csum) {
        for (ptrdiff_t j = 0; j < QG_NR; j++) csum[j] = 0;
        for (ptrdiff_t q = 0; q < k4; q++) {
            const uint8_t *ob = out + q * QG_NR * 4;
            int kk = K - 4 * q < 4 ? (int)(K - 4 * q) : 4;
            for (ptrdiff_t j = 0; j < nr; j++)
                for (int t = 0; t < kk; t++) csum[j] += qg_val(ob[4 * j + t], psgn);
        }
    }
}

/* Rows [m_lo, m_hi) of packed A (the weights) against the B panels [p_lo,
 * p_hi) of a convolution's columns, each packed into scratch (L1/L2 sized:
 * K4 x QG_NR x 4 bytes + 64) just before its tiles run. s as qg_panel's;
 * sums: A's zero points are not all 0 (B's column sums are needed). */
static void qg_conv_run(const qg_a_t *ap, const qg_cols *g, ptrdiff_t M, int s, int psgn,
                        int sums, const qg_epi *e, ptrdiff_t m_lo, ptrdiff_t m_hi,
                        ptrdiff_t p_lo, ptrdiff_t p_hi, uint8_t *scratch) {
    int32_t cs[QG_NR];
    ptrdiff_t P = g->OH * g->OW, k4 = (g->K + 3) / 4;
    if (m_hi > M) m_hi = M;
    for (ptrdiff_t p = p_lo; p < p_hi; p++) {
        ptrdiff_t n0 = p * QG_NR;
        int nr = (int)(P - n0 < QG_NR ? P - n0 : QG_NR);
        qg_cols_panel(g, n0, psgn, scratch, sums ? cs : NULL);
        qg_panel(ap, scratch, k4, s, e, sums ? cs : NULL, m_lo, m_hi, n0, nr);
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


/* One channel of a 2-D depthwise convolution in float32 lanes: exact where
 * every partial sum is an integer below 2**24, that is for kh kw taps of
 * (x - xz) (w - wz), each at most 255 x 255 in magnitude, when kh kw <= 258
 * (the caller checks). buf: (Hp x sw x Wq) + QG_DW_BLOCK QG_FV floats, the window's
 * extent of x - xz split into sw phases as qg_cols lays bytes out, padding
 * 0 (qg_depthwise_buf gives its size). */
#if QG_ISA == 3
#define QG_FV 16
#elif QG_ISA >= 1
#define QG_FV 8
#else
#define QG_FV 4
#endif
#define QG_DW_FLOAT_TAPS 258
#define QG_DW_BLOCK 4
typedef float qg_vf __attribute__((vector_size(QG_FV * 4), aligned(4)));
typedef int32_t qg_vi __attribute__((vector_size(QG_FV * 4), aligned(4)));
/* a + v w: every value an integer below 2**24, so fused or not it is exact */
#if QG_ISA == 3
#define QG_FMA(a, v, w) ((qg_vf)_mm512_fmadd_ps((__m512)(v), _mm512_set1_ps(w), (__m512)(a)))
#elif QG_ISA >= 1
#define QG_FMA(a, v, w) ((qg_vf)_mm256_fmadd_ps((__m256)(v), _mm256_set1_ps(w), (__m256)(a)))
#else
#define QG_FMA(a, v, w) ((a) + (v) * (w))
#endif

static ptrdiff_t qg_depthwise_buf(const qg_geom *g) {
    ptrdiff_t Hp = (g->OH - 1) * g->sh + (g->kh - 1) * g->dh + 1;
    ptrdiff_t Wp = (g->OW - 1) * g->sw + (g->kw - 1) * g->dw + 1;
    ptrdiff_t Wq = (Wp + g->sw - 1) / g->sw;
    return Hp * g->sw * Wq + QG_DW_BLOCK * QG_FV;
}

static void qg_depthwise_plane_f32(const uint8_t *x, int xs, int32_t xz, const int32_t *wc,
                                   const qg_geom *g, int32_t *acc, float *buf) {
    ptrdiff_t sw = g->sw, OW = g->OW;
    ptrdiff_t Hp = (g->OH - 1) * g->sh + (g->kh - 1) * g->dh + 1;
    ptrdiff_t Wp = (OW - 1) * sw + (g->kw - 1) * g->dw + 1;
    ptrdiff_t Wq = (Wp + sw - 1) / sw, rowlen = sw * Wq;
    float wf[QG_DW_FLOAT_TAPS];
    ptrdiff_t taps = g->kh * g->kw;
    ptrdiff_t toff[QG_DW_FLOAT_TAPS];
    for (ptrdiff_t t = 0; t < taps; t++) {
        ptrdiff_t i = t / g->kw, c = t % g->kw * g->dw;
        wf[t] = (float)wc[t];
        toff[t] = i * g->dh * rowlen + c % sw * Wq + c / sw;
    }
    for (ptrdiff_t r = 0; r < Hp; r++) {
        float *o = buf + r * rowlen;
        ptrdiff_t ih = r - g->ph;
        if (ih < 0 || ih >= g->H) {
            memset(o, 0, (size_t)rowlen * sizeof(float));
            continue;
        }
        const uint8_t *xr = x + ih * g->W;
        if (sw == 1) {
            ptrdiff_t lo = g->pw < Wq ? g->pw : Wq;
            ptrdiff_t n = g->W < Wq - lo ? g->W : Wq - lo;
            memset(o, 0, (size_t)lo * sizeof(float));
            memset(o + lo + n, 0, (size_t)(Wq - lo - n) * sizeof(float));
            if (xs) {
                for (ptrdiff_t c = 0; c < n; c++) o[lo + c] = (float)((int32_t)(int8_t)xr[c] - xz);
            } else {
                for (ptrdiff_t c = 0; c < n; c++) o[lo + c] = (float)((int32_t)xr[c] - xz);
            }
        } else {
            for (ptrdiff_t f = 0; f < sw; f++) {
                float *of = o + f * Wq;
                for (ptrdiff_t c = 0; c < Wq; c++) {
                    ptrdiff_t iw = c * sw + f - g->pw;
                    of[c] = iw >= 0 && iw < g->W ? (float)(qg_val(xr[iw], xs) - xz) : 0.0f;
                }
            }
        }
    }
    memset(buf + Hp * rowlen, 0, QG_DW_BLOCK * QG_FV * sizeof(float));
    for (ptrdiff_t oh = 0; oh < g->OH; oh++) {
        const float *rows = buf + oh * g->sh * rowlen;
        int32_t *out = acc + oh * OW;
        /* QG_DW_BLOCK vectors of outputs at a time: as many independent sums */
        for (ptrdiff_t ow = 0; ow < OW; ow += QG_DW_BLOCK * QG_FV) {
            qg_vf a[QG_DW_BLOCK];
#pragma GCC unroll 4
            for (int u = 0; u < QG_DW_BLOCK; u++) a[u] = (qg_vf){0};
            for (ptrdiff_t t = 0; t < taps; t++) {
                const float *src = rows + toff[t] + ow;
                float wt = wf[t];
#pragma GCC unroll 4
                for (int u = 0; u < QG_DW_BLOCK; u++) {
                    qg_vf v;
                    memcpy(&v, src + u * QG_FV, sizeof v);
                    a[u] = QG_FMA(a[u], v, wt);
                }
            }
#pragma GCC unroll 4
            for (int u = 0; u < QG_DW_BLOCK; u++) {
                ptrdiff_t o0 = ow + u * QG_FV;
                if (o0 >= OW) break;
                qg_vi r = __builtin_convertvector(a[u], qg_vi);
                if (OW - o0 >= QG_FV) {
                    memcpy(out + o0, &r, sizeof r);
                } else {
                    for (ptrdiff_t l = 0; l < OW - o0; l++) out[o0 + l] = r[l];
                }
            }
        }
    }
}
#endif /* ORTCORE_QCONV_H */
