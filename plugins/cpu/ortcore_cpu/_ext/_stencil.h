/* Stride-1 stencils (max and average pooling, depthwise convolution) on
 * whole planes read as one flat row, for outputs as wide as their input.
 *
 * Included by _pool.pxi and _conv.pxi, so compiled for the x86-64 baseline,
 * AVX2 and AVX-512 (setup.py); plain loops the compiler vectorizes.
 *
 * A plane x (H, W) is read as H * W contiguous floats. When the output is
 * as wide as the input (ow == W: the pads along the width add up to
 * (kw - 1) * dw), output position j = y * W + c reads, for filter tap (ky,
 * kx), input position j + voff(ky) + hoff(kx) with voff(ky) = (ky * dh - ph)
 * * W and hoff(kx) = kx * dw - pw. The tap is inside the plane's rows when
 * 0 <= j + voff(ky) < H * W, and inside its columns when 0 <= c + hoff(kx) <
 * W, which a column mask (one byte per output position and filter column)
 * says. The plane is copied (one memcpy) into a buffer with a margin of
 * pads before and after it (st_margins: as far as any tap reaches), so
 * every tap of every output reads inside the buffer; taps on rows outside
 * the plane read the margin's pads, taps whose column falls off the row are
 * replaced by the pad value through their mask. Each window is then one
 * loop as long as the plane: row-by-row loops on small planes (7x7, 14x14)
 * are too short for vectors, and a padded 2-D copy of each plane cost more
 * than the stencil. No plane is read outside its memory.
 *
 * The strided depthwise stencil at the end works on phases instead.
 */
#ifndef ORTCORE_STENCIL_H
#define ORTCORE_STENCIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* m[kx * L + j] = 1 if column (j % W) + kx * dw - pw is inside [0, W), else
 * 0, for the L positions of an output (OH, W) and kx < kw. */
static inline void st_masks(unsigned char *m, ptrdiff_t L, ptrdiff_t W, ptrdiff_t kw,
                            ptrdiff_t dw, ptrdiff_t pw) {
    for (ptrdiff_t kx = 0; kx < kw; kx++) {
        ptrdiff_t off = kx * dw - pw;
        unsigned char *mk = m + kx * L;
        for (ptrdiff_t j = 0; j < L; j++) {
            ptrdiff_t c = j % W;
            mk[j] = (c + off >= 0 && c + off < W) ? 1 : 0;
        }
    }
}

/* Floats the flat copy of a plane (see st_copy) needs before and after it. */
static inline void st_margins(ptrdiff_t H, ptrdiff_t W, ptrdiff_t OH, ptrdiff_t kh, ptrdiff_t kw,
                              ptrdiff_t dh, ptrdiff_t dw, ptrdiff_t ph, ptrdiff_t pw,
                              ptrdiff_t *before, ptrdiff_t *after) {
    ptrdiff_t first = -ph * W - pw;                            /* lowest offset read */
    ptrdiff_t last = OH * W - 1 + ((kh - 1) * dh - ph) * W + (kw - 1) * dw - pw;
    *before = first < 0 ? -first : 0;
    *after = last >= H * W ? last - H * W + 1 : 0;
}

/* Copy plane x (H * W floats) to buf + before, with `fill` in the `before`
 * floats ahead of it and the `after` floats behind it; return the copy. */
static inline const float *st_copy(const float *x, float *buf, ptrdiff_t HW, ptrdiff_t before,
                                   ptrdiff_t after, float fill) {
    for (ptrdiff_t i = 0; i < before; i++) buf[i] = fill;
    memcpy(buf + before, x, sizeof(float) * (size_t)HW);
    for (ptrdiff_t i = 0; i < after; i++) buf[before + HW + i] = fill;
    return buf + before;
}

/* Max (take_max; NaN never wins, a window with nothing inside gives -inf)
 * or sum of a stride-1 window over plane x (H, W) into out (OH, W); buf
 * holds the plane's flat copy (st_margins), m the masks of st_masks. The
 * sums are multiplied by inv[j] (OH * W floats: the average's divisors)
 * when inv is not NULL. */
static inline void st_pool(const float *x, float *out, float *buf, const unsigned char *m,
                           ptrdiff_t H, ptrdiff_t W, ptrdiff_t OH, ptrdiff_t kh, ptrdiff_t kw,
                           ptrdiff_t dh, ptrdiff_t dw, ptrdiff_t ph, ptrdiff_t pw, int take_max,
                           const float *inv) {
    const ptrdiff_t L = OH * W;
    const float fill = take_max ? -__builtin_inff() : 0.0f;
    ptrdiff_t before, after;
    st_margins(H, W, OH, kh, kw, dh, dw, ph, pw, &before, &after);
    const float *a = st_copy(x, buf, H * W, before, after, fill);
    if (kh == 3 && kw == 3) {
        const ptrdiff_t r0 = -ph * W, r1 = (dh - ph) * W, r2 = (2 * dh - ph) * W;
        const ptrdiff_t c0 = -pw, c1 = dw - pw, c2 = 2 * dw - pw;
        const unsigned char *m0 = m, *m1 = m + L, *m2 = m + 2 * L;
        /* each filter column's three rows first, then the columns' masks */
        if (take_max) {
            for (ptrdiff_t j = 0; j < L; j++) {
                const float *q = a + j;
                float s0 = fill, s1 = fill, s2 = fill, v;
#define ST_MAX(s, o) v = q[o]; s = v > s ? v : s;
                ST_MAX(s0, r0 + c0) ST_MAX(s0, r1 + c0) ST_MAX(s0, r2 + c0)
                ST_MAX(s1, r0 + c1) ST_MAX(s1, r1 + c1) ST_MAX(s1, r2 + c1)
                ST_MAX(s2, r0 + c2) ST_MAX(s2, r1 + c2) ST_MAX(s2, r2 + c2)
#undef ST_MAX
                s0 = m0[j] ? s0 : fill;
                s1 = m1[j] ? s1 : fill;
                s2 = m2[j] ? s2 : fill;
                s0 = s1 > s0 ? s1 : s0;
                out[j] = s2 > s0 ? s2 : s0;
            }
        } else {
            for (ptrdiff_t j = 0; j < L; j++) {
                const float *q = a + j;
                float s0 = q[r0 + c0] + q[r1 + c0] + q[r2 + c0];
                float s1 = q[r0 + c1] + q[r1 + c1] + q[r2 + c1];
                float s2 = q[r0 + c2] + q[r1 + c2] + q[r2 + c2];
                out[j] = (m0[j] ? s0 : 0.0f) + (m1[j] ? s1 : 0.0f) + (m2[j] ? s2 : 0.0f);
            }
        }
    } else {
        for (ptrdiff_t j = 0; j < L; j++) out[j] = fill;
        for (ptrdiff_t ky = 0; ky < kh; ky++) {
            for (ptrdiff_t kx = 0; kx < kw; kx++) {
                const ptrdiff_t off = (ky * dh - ph) * W + kx * dw - pw;
                const unsigned char *mk = m + kx * L;
                if (take_max) {
                    for (ptrdiff_t j = 0; j < L; j++) {
                        float v = a[j + off];
                        v = mk[j] ? v : fill;
                        out[j] = v > out[j] ? v : out[j];
                    }
                } else {
                    for (ptrdiff_t j = 0; j < L; j++) {
                        float v = a[j + off];
                        out[j] += mk[j] ? v : 0.0f;
                    }
                }
            }
        }
    }
    if (inv)
        for (ptrdiff_t j = 0; j < L; j++) out[j] *= inv[j];
}

/* Depthwise convolution of plane x (H, W) with filter w (kh, kw), stride 1,
 * added to out (OH, W), which holds zeros or the bias; buf holds the
 * plane's flat copy (st_margins), m the masks of st_masks. */
static inline void st_depthwise(const float *x, const float *w, float *out, float *buf,
                                const unsigned char *m, ptrdiff_t H, ptrdiff_t W, ptrdiff_t OH,
                                ptrdiff_t kh, ptrdiff_t kw, ptrdiff_t dh, ptrdiff_t dw,
                                ptrdiff_t ph, ptrdiff_t pw) {
    const ptrdiff_t L = OH * W;
    ptrdiff_t before, after;
    st_margins(H, W, OH, kh, kw, dh, dw, ph, pw, &before, &after);
    const float *a = st_copy(x, buf, H * W, before, after, 0.0f);
    if (kh == 3 && kw == 3) {
        const ptrdiff_t r0 = -ph * W, r1 = (dh - ph) * W, r2 = (2 * dh - ph) * W;
        const ptrdiff_t c0 = -pw, c1 = dw - pw, c2 = 2 * dw - pw;
        const unsigned char *m0 = m, *m1 = m + L, *m2 = m + 2 * L;
        const float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3], w4 = w[4];
        const float w5 = w[5], w6 = w[6], w7 = w[7], w8 = w[8];
        for (ptrdiff_t j = 0; j < L; j++) {
            const float *q = a + j;
            float s0 = w0 * q[r0 + c0] + w3 * q[r1 + c0] + w6 * q[r2 + c0];
            float s1 = w1 * q[r0 + c1] + w4 * q[r1 + c1] + w7 * q[r2 + c1];
            float s2 = w2 * q[r0 + c2] + w5 * q[r1 + c2] + w8 * q[r2 + c2];
            out[j] += (m0[j] ? s0 : 0.0f) + (m1[j] ? s1 : 0.0f) + (m2[j] ? s2 : 0.0f);
        }
    } else {
        for (ptrdiff_t ky = 0; ky < kh; ky++) {
            for (ptrdiff_t kx = 0; kx < kw; kx++) {
                const ptrdiff_t off = (ky * dh - ph) * W + kx * dw - pw;
                const unsigned char *mk = m + kx * L;
                const float wv = w[ky * kw + kx];
                for (ptrdiff_t j = 0; j < L; j++) {
                    float v = wv * a[j + off];
                    out[j] += mk[j] ? v : 0.0f;
                }
            }
        }
    }
}

/* Strided depthwise convolution on small planes: plane x (H, W), begin pads
 * (ph, pw), output (OH, OW). The zero-padded plane is split into sh * sw
 * phases, phase (ry, rx) holding padded rows ry, ry + sh, ... and columns
 * rx, rx + sw, ... as a (HQ, WQ) plane; filter tap (ky, kx) of output (y,
 * c) is then element (y + a, c + b) of phase (ky * dh % sh, kx * dw % sw)
 * with a = ky * dh / sh, b = kx * dw / sw, so every tap reads the flat
 * positions j = y * WQ + c of one phase plus a constant: one loop as long
 * as the output plane (positions with c >= OW are computed and dropped),
 * instead of short loops per output row. (Pooling, which is separable, is
 * faster row by row: see _pool2d_rows.) */

/* Rows and columns of each phase plane. */
static inline void st_phase_shape(ptrdiff_t OH, ptrdiff_t OW, ptrdiff_t kh, ptrdiff_t kw,
                                  ptrdiff_t sh, ptrdiff_t sw, ptrdiff_t dh, ptrdiff_t dw,
                                  ptrdiff_t *HQ, ptrdiff_t *WQ) {
    *HQ = OH + (kh - 1) * dh / sh;
    *WQ = OW + (kw - 1) * dw / sw;
}

/* Columns j of a phase row that read inside an input row of W columns:
 * j * S + p - pw in [0, W), as [*lo, *hi) clipped to [0, WQ). */
static inline void st_inside(ptrdiff_t W, ptrdiff_t S, ptrdiff_t p, ptrdiff_t pw, ptrdiff_t WQ,
                             ptrdiff_t *lo, ptrdiff_t *hi) {
    ptrdiff_t first = pw - p; /* j * S >= first */
    ptrdiff_t l = first <= 0 ? 0 : (first + S - 1) / S;
    ptrdiff_t last = W - 1 + pw - p; /* j * S <= last */
    ptrdiff_t h = last < 0 ? 0 : last / S + 1;
    if (h > WQ) h = WQ;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

/* The phase planes of x (zeros for the pads) into buf (sh * sw * HQ * WQ floats). */
static inline void st_phases(const float *x, float *buf, ptrdiff_t H, ptrdiff_t W,
                             ptrdiff_t sh, ptrdiff_t sw, ptrdiff_t ph, ptrdiff_t pw,
                             ptrdiff_t HQ, ptrdiff_t WQ) {
    for (ptrdiff_t ry = 0; ry < sh; ry++) {
        for (ptrdiff_t rx = 0; rx < sw; rx++) {
            float *q = buf + (ry * sw + rx) * HQ * WQ;
            /* the phase's columns inside the data: [lo, hi) */
            ptrdiff_t c0 = rx - pw; /* input column of phase column 0 */
            ptrdiff_t lo, hi;
            st_inside(W, sw, rx, pw, WQ, &lo, &hi);
            for (ptrdiff_t u = 0; u < HQ; u++) {
                float *row = q + u * WQ;
                ptrdiff_t r = u * sh + ry - ph;
                if (r < 0 || r >= H) {
                    for (ptrdiff_t v = 0; v < WQ; v++) row[v] = 0.0f;
                    continue;
                }
                const float *xr = x + r * W; /* column c0 + v * sw of it */
                for (ptrdiff_t v = 0; v < lo; v++) row[v] = 0.0f;
                if (sw == 2) {
                    for (ptrdiff_t v = lo; v < hi; v++) row[v] = xr[c0 + 2 * v];
                } else {
                    for (ptrdiff_t v = lo; v < hi; v++) row[v] = xr[c0 + v * sw];
                }
                for (ptrdiff_t v = hi; v < WQ; v++) row[v] = 0.0f;
            }
        }
    }
}

/* Offset of tap (ky, kx) in the phase planes. */
static inline ptrdiff_t st_tap(ptrdiff_t ky, ptrdiff_t kx, ptrdiff_t sh, ptrdiff_t sw,
                               ptrdiff_t dh, ptrdiff_t dw, ptrdiff_t HQ, ptrdiff_t WQ) {
    ptrdiff_t ty = ky * dh, tx = kx * dw;
    return ((ty % sh) * sw + tx % sw) * HQ * WQ + (ty / sh) * WQ + tx / sw;
}

/* Strided depthwise convolution of plane x with filter w (kh, kw), added to
 * out (OH, OW), which holds zeros or the bias; buf: the phases
 * (st_phase_shape) and then (OH - 1) * WQ + OW floats. */
static inline void st_depthwise_strided(const float *x, const float *w, float *out,
                                        float *buf, ptrdiff_t H, ptrdiff_t W, ptrdiff_t OH,
                                        ptrdiff_t OW, ptrdiff_t kh, ptrdiff_t kw, ptrdiff_t sh,
                                        ptrdiff_t sw, ptrdiff_t dh, ptrdiff_t dw, ptrdiff_t ph,
                                        ptrdiff_t pw) {
    ptrdiff_t HQ, WQ;
    st_phase_shape(OH, OW, kh, kw, sh, sw, dh, dw, &HQ, &WQ);
    st_phases(x, buf, H, W, sh, sw, ph, pw, HQ, WQ);
    const ptrdiff_t L = (OH - 1) * WQ + OW;
    float *t = buf + sh * sw * HQ * WQ;
    if (kh == 3 && kw == 3) {
        const float *p0 = buf + st_tap(0, 0, sh, sw, dh, dw, HQ, WQ);
        const float *p1 = buf + st_tap(0, 1, sh, sw, dh, dw, HQ, WQ);
        const float *p2 = buf + st_tap(0, 2, sh, sw, dh, dw, HQ, WQ);
        const float *p3 = buf + st_tap(1, 0, sh, sw, dh, dw, HQ, WQ);
        const float *p4 = buf + st_tap(1, 1, sh, sw, dh, dw, HQ, WQ);
        const float *p5 = buf + st_tap(1, 2, sh, sw, dh, dw, HQ, WQ);
        const float *p6 = buf + st_tap(2, 0, sh, sw, dh, dw, HQ, WQ);
        const float *p7 = buf + st_tap(2, 1, sh, sw, dh, dw, HQ, WQ);
        const float *p8 = buf + st_tap(2, 2, sh, sw, dh, dw, HQ, WQ);
        const float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3], w4 = w[4];
        const float w5 = w[5], w6 = w[6], w7 = w[7], w8 = w[8];
        for (ptrdiff_t j = 0; j < L; j++)
            t[j] = w0 * p0[j] + w1 * p1[j] + w2 * p2[j] + w3 * p3[j] + w4 * p4[j] + w5 * p5[j]
                   + w6 * p6[j] + w7 * p7[j] + w8 * p8[j];
    } else {
        for (ptrdiff_t j = 0; j < L; j++) t[j] = 0.0f;
        for (ptrdiff_t ky = 0; ky < kh; ky++) {
            for (ptrdiff_t kx = 0; kx < kw; kx++) {
                const float *p = buf + st_tap(ky, kx, sh, sw, dh, dw, HQ, WQ);
                const float wv = w[ky * kw + kx];
                for (ptrdiff_t j = 0; j < L; j++) t[j] += wv * p[j];
            }
        }
    }
    for (ptrdiff_t y = 0; y < OH; y++) {
        const float *src = t + y * WQ;
        float *dst = out + y * OW;
        for (ptrdiff_t c = 0; c < OW; c++) dst[c] += src[c];
    }
}


/* 3x3 depthwise convolution with stride 2 and no dilation (MobileNet's and
 * ShuffleNet's downsampling), one output row at a time in vectors. The
 * plane is copied into a zero-padded buffer (st_dw_s2_rows x
 * st_dw_s2_cols floats, ST_S2_SLACK more), whose pads the caller zeroes
 * once: each call writes only the plane's place. Output (y, i) reads
 * columns 2i, 2i + 1 and 2i + 2 of padded rows 2y to 2y + 2: with AVX2
 * and AVX-512, two vectors of a row give the even lanes (a vector of
 * outputs' first taps), and one float on, the second taps, and so on. The
 * phase path above (st_depthwise_strided) left its gathers and its nine
 * streams to the compiler, which ran them as scalar code. */
#if defined(__AVX512F__)
#include <immintrin.h>
#define ST_VL 16
typedef __m512 st_v;
typedef float st_vu __attribute__((vector_size(64), aligned(4), may_alias));
/* Lanes 0, 2, ..., 30 of the 32 floats at p. */
static inline st_v st_even(const float *p) {
    const __m512i idx = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
                                          28, 30);
    return _mm512_permutex2var_ps(_mm512_loadu_ps(p), idx, _mm512_loadu_ps(p + 16));
}
#elif defined(__AVX2__)
#include <immintrin.h>
#define ST_VL 8
typedef __m256 st_v;
typedef float st_vu __attribute__((vector_size(32), aligned(4), may_alias));
/* Lanes 0, 2, ..., 14 of the 16 floats at p. */
static inline st_v st_even(const float *p) {
    __m256 s = _mm256_shuffle_ps(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8), 0x88);
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(s), 0xD8));
}
#else
#define ST_VL 1
#endif

/* Floats read past the padded plane (by the last vectors, into lanes that
 * are dropped). */
#define ST_S2_SLACK (2 * ST_VL + 8)

/* Rows and columns of the padded plane: the plane after its begin pads,
 * and every row and column an output reads. */
static inline ptrdiff_t st_dw_s2_rows(ptrdiff_t H, ptrdiff_t OH, ptrdiff_t ph) {
    return ph + H > 2 * OH + 1 ? ph + H : 2 * OH + 1;
}
static inline ptrdiff_t st_dw_s2_cols(ptrdiff_t W, ptrdiff_t OW, ptrdiff_t pw) {
    return pw + W > 2 * OW + 1 ? pw + W : 2 * OW + 1;
}

/* out (OH, OW), holding zeros or the bias, += the 3x3 stride-2 depthwise
 * convolution of plane x (H, W) with w (9 floats), begin pads ph, pw; buf:
 * the padded plane (rows of WP = st_dw_s2_cols floats), zero outside the
 * plane's place. */
static inline void st_dw3x3_s2(const float *x, const float *w, float *out, float *buf,
                               ptrdiff_t H, ptrdiff_t W, ptrdiff_t OH, ptrdiff_t OW,
                               ptrdiff_t ph, ptrdiff_t pw, ptrdiff_t WP) {
    for (ptrdiff_t r = 0; r < H; r++)
        memcpy(buf + (r + ph) * WP + pw, x + r * W, (size_t)W * sizeof(float));
    const float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3], w4 = w[4];
    const float w5 = w[5], w6 = w[6], w7 = w[7], w8 = w[8];
    for (ptrdiff_t y = 0; y < OH; y++) {
        const float *a = buf + 2 * y * WP, *b = a + WP, *c = b + WP;
        float *dst = out + y * OW;
        ptrdiff_t i = 0;
#if ST_VL > 1
        for (; i < OW; i += ST_VL) {
            const ptrdiff_t j = 2 * i;
            st_v s = w0 * st_even(a + j) + w1 * st_even(a + j + 1) + w2 * st_even(a + j + 2);
            s += w3 * st_even(b + j) + w4 * st_even(b + j + 1) + w5 * st_even(b + j + 2);
            s += w6 * st_even(c + j) + w7 * st_even(c + j + 1) + w8 * st_even(c + j + 2);
            if (i + ST_VL <= OW) {
                *(st_vu *)(dst + i) = *(const st_vu *)(dst + i) + s;
            } else { /* the row's last outputs: the vector's first lanes */
                float t[ST_VL];
                *(st_vu *)t = s;
                for (ptrdiff_t k = 0; i + k < OW; k++) dst[i + k] += t[k];
            }
        }
#else
        for (; i < OW; i++) {
            const ptrdiff_t j = 2 * i;
            dst[i] += w0 * a[j] + w1 * a[j + 1] + w2 * a[j + 2] + w3 * b[j] + w4 * b[j + 1]
                      + w5 * b[j + 2] + w6 * c[j] + w7 * c[j + 1] + w8 * c[j + 2];
        }
#endif
    }
}

/* Stride-1 depthwise convolution with AVX-512 masked loads, for outputs as
 * wide as their input (any window, dilation and pads): the plane is read
 * where it is, as one flat row of vectors, and every tap of every vector
 * loads only the lanes whose input is inside the plane (the lanes masked
 * off read nothing: AVX-512 suppresses their faults, so the addresses
 * before or past the plane are never touched). The masks depend on the
 * geometry only, so they are made once for all channels (st_dw_masks16).
 * The flat stencil above (st_depthwise: a copy of each plane with margins,
 * byte masks the compiler turned into blends) and the padded-plane path
 * ran 1.5-3x slower. */
#if ST_VL == 16
#define ST_DW16 1

/* Vectors of L positions (a flat output, or an output row). */
static inline ptrdiff_t st_dw_vectors16(ptrdiff_t L) { return (L + 15) / 16; }

/* Lanes [lo, hi) of a 16-lane mask (clipped to 0..16). */
static inline uint16_t st_lanes16(ptrdiff_t lo, ptrdiff_t hi) {
    if (lo < 0) lo = 0;
    if (hi > 16) hi = 16;
    if (hi <= lo) return 0;
    return (uint16_t)((((uint32_t)1 << hi) - 1u) & ~(((uint32_t)1 << lo) - 1u));
}

/* For an output (OH, W) of a plane (H, W) and a kh x kw window (dilations
 * dh, dw; begin pads ph, pw): off[t] = where tap t = ky * kw + kx reads,
 * relative to the output position, and m[v * T + t] (T = kh * kw) = the
 * lanes of vector v (flat positions 16 v ... 16 v + 15) whose tap t is
 * inside the plane and which are inside the output. */
static inline void st_dw_masks16(uint16_t *m, ptrdiff_t *off, ptrdiff_t H, ptrdiff_t W,
                                 ptrdiff_t OH, ptrdiff_t kh, ptrdiff_t kw, ptrdiff_t dh,
                                 ptrdiff_t dw, ptrdiff_t ph, ptrdiff_t pw) {
    const ptrdiff_t L = OH * W, T = kh * kw, nv = st_dw_vectors16(L);
    for (ptrdiff_t t = 0; t < T; t++)
        off[t] = ((t / kw) * dh - ph) * W + (t % kw) * dw - pw;
    ptrdiff_t c0 = 0; /* column of vector v's first lane */
    for (ptrdiff_t v = 0; v < nv; v++) {
        const ptrdiff_t j0 = 16 * v;
        for (ptrdiff_t kx = 0; kx < kw; kx++) {
            const ptrdiff_t o = kx * dw - pw;
            uint16_t cols = 0;
            ptrdiff_t c = c0;
            for (int l = 0; l < 16; l++) {
                if (c + o >= 0 && c + o < W) cols |= (uint16_t)(1u << l);
                if (++c == W) c = 0;
            }
            for (ptrdiff_t ky = 0; ky < kh; ky++) {
                /* rows y with 0 <= y + ky * dh - ph < H, and y < OH */
                ptrdiff_t y0 = ph - ky * dh, y1 = H + ph - ky * dh;
                if (y0 < 0) y0 = 0;
                if (y1 > OH) y1 = OH;
                const uint16_t rows = y1 > y0 ? st_lanes16(y0 * W - j0, y1 * W - j0) : 0;
                m[v * T + ky * kw + kx] = cols & rows;
            }
        }
        c0 = (c0 + 16) % W;
    }
}

/* st_dw_flat16 for a window of T taps known at compile time (9, 25):
 * the weights in registers, the tap loop unrolled. */
static inline __attribute__((always_inline)) void st_dw_flat16_t(
    const float *x, const float *w, const float *bias, float *out, const uint16_t *m,
    const ptrdiff_t *off, ptrdiff_t L, const int T) {
    const ptrdiff_t nv = st_dw_vectors16(L);
    const __m512 b = _mm512_set1_ps(bias ? *bias : 0.0f);
    __m512 wv[25]; /* T <= 25 */
    ptrdiff_t o[25];
    for (int t = 0; t < T; t++) {
        wv[t] = _mm512_set1_ps(w[t]);
        o[t] = off[t];
    }
    for (ptrdiff_t v = 0; v < nv; v++, m += T) {
        const ptrdiff_t j = 16 * v;
        const __mmask16 keep = (__mmask16)st_lanes16(0, L - j);
        __m512 acc = bias ? b : _mm512_maskz_loadu_ps(keep, out + j);
        for (int t = 0; t < T; t++)
            acc = _mm512_fmadd_ps(wv[t], _mm512_maskz_loadu_ps((__mmask16)m[t], x + j + o[t]),
                                  acc);
        _mm512_mask_storeu_ps(out + j, keep, acc);
    }
}

/* out (L = OH * W flat positions) = *bias + the convolution of plane x
 * with w (T taps) through the masks and offsets of st_dw_masks16; with
 * bias NULL, out holds zeros or the bias and the convolution is added. */
static inline void st_dw_flat16(const float *x, const float *w, const float *bias, float *out,
                                const uint16_t *m, const ptrdiff_t *off, ptrdiff_t L,
                                ptrdiff_t T) {
    if (T == 9) {
        st_dw_flat16_t(x, w, bias, out, m, off, L, 9);
        return;
    }
    if (T == 25) {
        st_dw_flat16_t(x, w, bias, out, m, off, L, 25);
        return;
    }
    const ptrdiff_t nv = st_dw_vectors16(L);
    const __m512 b = _mm512_set1_ps(bias ? *bias : 0.0f);
    for (ptrdiff_t v = 0; v < nv; v++, m += T) {
        const ptrdiff_t j = 16 * v;
        const __mmask16 keep = (__mmask16)st_lanes16(0, L - j);
        __m512 acc = bias ? b : _mm512_maskz_loadu_ps(keep, out + j);
        for (ptrdiff_t t = 0; t < T; t++)
            acc = _mm512_fmadd_ps(_mm512_set1_ps(w[t]),
                                  _mm512_maskz_loadu_ps((__mmask16)m[t], x + j + off[t]), acc);
        _mm512_mask_storeu_ps(out + j, keep, acc);
    }
}

/* Depthwise convolution with a column stride S of 1 or 2 row by row, with
 * AVX-512 masked loads (any window, dilations, pads and row stride; the
 * outputs of any width): tap (ky, kx) of output row oy's vector of 16
 * outputs from ox0 reads input row oy * sh - ph + ky * dh, columns S * (ox0
 * + l) - pw + kx * dw: with S = 1 one masked load from c0 = ox0 - pw + kx *
 * dw, with S = 2 the 32 floats from c0 = 2 * ox0 - pw + kx * dw in two and
 * their even lanes picked by one permute (st_even without the padded copy
 * of the plane). Rows outside the plane are skipped; the columns' masks
 * depend on the vector and the filter column only (st_dw_row_masks16). */

/* m[(vi * kw + kx) * 2 + h] = the lanes of load h (h = 1: the second 16
 * floats with S = 2) of output row vector vi, filter column kx, whose
 * columns are inside the row (W columns). */
static inline void st_dw_row_masks16(uint16_t *m, ptrdiff_t W, ptrdiff_t OW, ptrdiff_t kw,
                                     ptrdiff_t S, ptrdiff_t dw, ptrdiff_t pw) {
    const ptrdiff_t nvr = st_dw_vectors16(OW);
    for (ptrdiff_t vi = 0; vi < nvr; vi++)
        for (ptrdiff_t kx = 0; kx < kw; kx++) {
            const ptrdiff_t c0 = S * 16 * vi - pw + kx * dw;
            m[(vi * kw + kx) * 2] = st_lanes16(-c0, W - c0);
            m[(vi * kw + kx) * 2 + 1] = st_lanes16(-c0 - 16, W - c0 - 16);
        }
}

static inline __attribute__((always_inline)) void st_dw_rows16_s(
    const float *x, const float *w, const float *bias, float *out, const uint16_t *m,
    ptrdiff_t H, ptrdiff_t W, ptrdiff_t OH, ptrdiff_t OW, ptrdiff_t kh, ptrdiff_t kw,
    ptrdiff_t sh, ptrdiff_t dh, ptrdiff_t dw, ptrdiff_t ph, ptrdiff_t pw, const int S) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
                                           28, 30);
    const ptrdiff_t nvr = st_dw_vectors16(OW);
    const __m512 b = _mm512_set1_ps(bias ? *bias : 0.0f);
    for (ptrdiff_t oy = 0; oy < OH; oy++) {
        float *orow = out + oy * OW;
        for (ptrdiff_t vi = 0; vi < nvr; vi++) {
            const ptrdiff_t ox0 = 16 * vi;
            const __mmask16 keep = (__mmask16)st_lanes16(0, OW - ox0);
            __m512 acc = bias ? b : _mm512_maskz_loadu_ps(keep, orow + ox0);
            const uint16_t *mk = m + vi * kw * 2; /* this vector's column masks */
            for (ptrdiff_t ky = 0; ky < kh; ky++) {
                const ptrdiff_t iy = oy * sh - ph + ky * dh;
                if (iy < 0 || iy >= H) continue;
                const float *row = x + iy * W;
                const float *wk = w + ky * kw;
                for (ptrdiff_t kx = 0; kx < kw; kx++) {
                    const ptrdiff_t c0 = S * ox0 - pw + kx * dw;
                    __m512 v = _mm512_maskz_loadu_ps((__mmask16)mk[2 * kx], row + c0);
                    if (S == 2)
                        v = _mm512_permutex2var_ps(
                            v, even,
                            _mm512_maskz_loadu_ps((__mmask16)mk[2 * kx + 1], row + c0 + 16));
                    acc = _mm512_fmadd_ps(_mm512_set1_ps(wk[kx]), v, acc);
                }
            }
            _mm512_mask_storeu_ps(orow + ox0, keep, acc);
        }
    }
}

/* out (OH, OW) = *bias + the depthwise convolution of plane x (H, W) with
 * w (kh, kw), column stride S (1 or 2), through the masks of
 * st_dw_row_masks16; with bias NULL, out holds zeros or the bias and the
 * convolution is added. */
static inline void st_dw_rows16(const float *x, const float *w, const float *bias, float *out,
                                const uint16_t *m, ptrdiff_t H, ptrdiff_t W, ptrdiff_t OH,
                                ptrdiff_t OW, ptrdiff_t kh, ptrdiff_t kw, ptrdiff_t sh,
                                ptrdiff_t S, ptrdiff_t dh, ptrdiff_t dw, ptrdiff_t ph,
                                ptrdiff_t pw) {
    if (S == 2)
        st_dw_rows16_s(x, w, bias, out, m, H, W, OH, OW, kh, kw, sh, dh, dw, ph, pw, 2);
    else
        st_dw_rows16_s(x, w, bias, out, m, H, W, OH, OW, kh, kw, sh, dh, dw, ph, pw, 1);
}

/* Pooling with AVX-512 masked loads, on the depthwise kernels' masks: a
 * masked-off lane (its input outside the plane) loads the pad value, -inf
 * for max (a pad never wins) or 0 for a sum, so no plane is copied with
 * margins and no byte masks are blended in. Maxima keep NaN from winning
 * (max(v, acc) returns acc when v is NaN), as the other pooling paths do;
 * sums are scaled by the average's divisors. */

/* The fill vector and one step of a max (take_max) or a sum. */
static inline __m512 st_pool_fill16(int take_max) {
    return _mm512_set1_ps(take_max ? -__builtin_inff() : 0.0f);
}
static inline __attribute__((always_inline)) __m512 st_pool_op16(__m512 v, __m512 acc,
                                                                 int take_max) {
    return take_max ? _mm512_max_ps(v, acc) : _mm512_add_ps(acc, v);
}

/* acc combined with the lanes k of the 16 floats at p (the others keep
 * acc): a zero-masked load (a load alone; a merge-masked one adds a blend)
 * and a masked max, or an add of the zeros. */
static inline __attribute__((always_inline)) __m512 st_pool_tap16(const float *p, __mmask16 k,
                                                                  __m512 acc, int take_max) {
    const __m512 v = _mm512_maskz_loadu_ps(k, p);
    return take_max ? _mm512_mask_max_ps(acc, k, v, acc) : _mm512_add_ps(acc, v);
}

/* st_pool_flat16's loop, the tap loop on two chains (a max or add waits
 * for the one before it on its chain only); unrolled where T is a
 * constant (9). */
static inline __attribute__((always_inline)) void st_pool_flat16_t(
    const float *x, float *out, const uint16_t *m, const ptrdiff_t *off, ptrdiff_t L,
    const ptrdiff_t T, const int take_max, const float *inv) {
    const ptrdiff_t nv = st_dw_vectors16(L);
    const __m512 fill = st_pool_fill16(take_max);
    for (ptrdiff_t v = 0; v < nv; v++, m += T) {
        const ptrdiff_t j = 16 * v;
        const __mmask16 keep = (__mmask16)st_lanes16(0, L - j);
        __m512 a0 = fill, a1 = fill;
        for (ptrdiff_t t = 0; t + 1 < T; t += 2) {
            a0 = st_pool_tap16(x + j + off[t], (__mmask16)m[t], a0, take_max);
            a1 = st_pool_tap16(x + j + off[t + 1], (__mmask16)m[t + 1], a1, take_max);
        }
        if (T % 2) a0 = st_pool_tap16(x + j + off[T - 1], (__mmask16)m[T - 1], a0, take_max);
        __m512 acc = st_pool_op16(a1, a0, take_max);
        if (inv) acc = _mm512_mul_ps(acc, _mm512_maskz_loadu_ps(keep, inv + j));
        _mm512_mask_storeu_ps(out + j, keep, acc);
    }
}

/* Stride-1 max (take_max) or sum of a window over plane x into out (L =
 * OH * W flat positions, the output as wide as the input), through the
 * masks and offsets of st_dw_masks16 (T taps); sums are multiplied by
 * inv[j] (L floats) when inv is not NULL. */
static inline void st_pool_flat16(const float *x, float *out, const uint16_t *m,
                                  const ptrdiff_t *off, ptrdiff_t L, ptrdiff_t T, int take_max,
                                  const float *inv) {
    if (T == 9 && take_max)
        st_pool_flat16_t(x, out, m, off, L, 9, 1, inv);
    else if (T == 9)
        st_pool_flat16_t(x, out, m, off, L, 9, 0, inv);
    else if (take_max)
        st_pool_flat16_t(x, out, m, off, L, T, 1, inv);
    else
        st_pool_flat16_t(x, out, m, off, L, T, 0, inv);
}
#else
#define ST_DW16 0
static inline ptrdiff_t st_dw_vectors16(ptrdiff_t L) { return (L + 15) / 16; }
static inline void st_dw_masks16(uint16_t *m, ptrdiff_t *off, ptrdiff_t H, ptrdiff_t W,
                                 ptrdiff_t OH, ptrdiff_t kh, ptrdiff_t kw, ptrdiff_t dh,
                                 ptrdiff_t dw, ptrdiff_t ph, ptrdiff_t pw) {}
static inline void st_dw_flat16(const float *x, const float *w, const float *bias, float *out,
                                const uint16_t *m, const ptrdiff_t *off, ptrdiff_t L,
                                ptrdiff_t T) {}
static inline void st_dw_row_masks16(uint16_t *m, ptrdiff_t W, ptrdiff_t OW, ptrdiff_t kw,
                                     ptrdiff_t S, ptrdiff_t dw, ptrdiff_t pw) {}
static inline void st_dw_rows16(const float *x, const float *w, const float *bias, float *out,
                                const uint16_t *m, ptrdiff_t H, ptrdiff_t W, ptrdiff_t OH,
                                ptrdiff_t OW, ptrdiff_t kh, ptrdiff_t kw, ptrdiff_t sh,
                                ptrdiff_t S, ptrdiff_t dh, ptrdiff_t dw, ptrdiff_t ph,
                                ptrdiff_t pw) {}
static inline void st_pool_flat16(const float *x, float *out, const uint16_t *m,
                                  const ptrdiff_t *off, ptrdiff_t L, ptrdiff_t T, int take_max,
                                  const float *inv) {}
#endif

#endif
