/* 2-D max and average pooling of one plane, one output row at a time.
 *
 * Included by _pool.pxi, so compiled for the x86-64 baseline, with AVX2 and
 * with AVX-512 (setup.py). Pooling is separable: each output row is made in
 * two passes. The vertical pass (pl_vrows) combines the window's input rows
 * column by column into a row buffer that has the pads on both sides; the
 * horizontal pass (pl_hrow) takes each output's kw taps from that buffer.
 * Both passes run along rows in whole vectors (pl_v: 16 floats with
 * AVX-512, 8 with AVX2, one set of wrappers per build): a row ends with a
 * vector that overlaps the one before (masks only for rows narrower than a
 * vector), and a stride of 2 along the width (the common 3x3 stride-2 pool)
 * reads two vectors and keeps their even lanes. The AVX2 build ended rows
 * in scalar tails until 2026-12-03: on a Zen 3 its 3x3 max pools then took
 * 0.5-0.8x the time they had (planes of 27x27 to 111x111). The vertical
 * pass runs a block of rows ahead of the horizontal one (PL_BLOCK_FLOATS).
 * The Cython loops this replaces were left to the compiler, which
 * vectorized the strided reads poorly and spent rows of 13-55 columns in
 * scalar tails: a cached plane took 4-7x as long as copying it; this takes
 * 0.5-0.9x their time on planes of 14x14 to 56x56 and as long on larger
 * ones, whose reads wait on memory.
 *
 * Max: the pads and the fill are -inf, and a NaN input never wins (the
 * running max m becomes v only where v > m), so a window of pads and NaNs
 * gives -inf. Average: sums, then scaled by inv_y[y] * inv_x[x] (the
 * divisors, which the caller works out for count_include_pad).
 */
#ifndef ORTCORE_POOL_H
#define ORTCORE_POOL_H

#include <stddef.h>

#include "_stencil.h" /* st_even: a stride of 2 from the even lanes */

#if defined(__AVX512F__)
#include <immintrin.h>
#define PL_VL 16
#elif defined(__AVX2__)
#include <immintrin.h>
#define PL_VL 8
#else
#define PL_VL 1
#endif

/* Floats the row buffer needs past the padded row: the horizontal pass's
 * last vectors read up to two vectors past their first tap. */
#define PL_SLACK (2 * PL_VL + 16)

static inline float pl_mx(float m, float v) { return v > m ? v : m; }

#if PL_VL == 16
/* Vectors of PL_VL floats and the masks of their first lanes, one set of
 * wrappers per build, so that both vector builds share the passes below. */
typedef __m512 pl_v;
typedef __mmask16 pl_m;
static inline pl_v pl_set1(float a) { return _mm512_set1_ps(a); }
static inline pl_v pl_load(const float *p) { return _mm512_loadu_ps(p); }
static inline void pl_store(float *p, pl_v v) { _mm512_storeu_ps(p, v); }
static inline pl_v pl_max(pl_v a, pl_v b) { return _mm512_max_ps(a, b); }
static inline pl_v pl_add(pl_v a, pl_v b) { return _mm512_add_ps(a, b); }
static inline pl_v pl_mul(pl_v a, pl_v b) { return _mm512_mul_ps(a, b); }
/* The first n (< PL_VL) lanes. */
static inline pl_m pl_mask(ptrdiff_t n) { return (pl_m)((1u << n) - 1u); }
/* The lanes of k from p, the others `other`. */
static inline pl_v pl_mload(pl_m k, const float *p, pl_v other) {
    return _mm512_mask_loadu_ps(other, k, p);
}
static inline void pl_mstore(float *p, pl_m k, pl_v v) { _mm512_mask_storeu_ps(p, k, v); }
#elif PL_VL == 8
typedef __m256 pl_v;
typedef __m256i pl_m;
static inline pl_v pl_set1(float a) { return _mm256_set1_ps(a); }
static inline pl_v pl_load(const float *p) { return _mm256_loadu_ps(p); }
static inline void pl_store(float *p, pl_v v) { _mm256_storeu_ps(p, v); }
static inline pl_v pl_max(pl_v a, pl_v b) { return _mm256_max_ps(a, b); }
static inline pl_v pl_add(pl_v a, pl_v b) { return _mm256_add_ps(a, b); }
static inline pl_v pl_mul(pl_v a, pl_v b) { return _mm256_mul_ps(a, b); }
static inline pl_m pl_mask(ptrdiff_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
static inline pl_v pl_mload(pl_m k, const float *p, pl_v other) {
    /* masked-off lanes read nothing (and cannot fault); they load as 0 */
    return _mm256_blendv_ps(other, _mm256_maskload_ps(p, k), _mm256_castsi256_ps(k));
}
static inline void pl_mstore(float *p, pl_m k, pl_v v) { _mm256_maskstore_ps(p, k, v); }
#endif

/* The first kernel row ky with y0 + ky * dh >= 0 and one past the last one
 * with y0 + ky * dh < H, as [*lo, *hi) within [0, kh]. */
static inline void pl_rows_inside(ptrdiff_t y0, ptrdiff_t dh, ptrdiff_t kh, ptrdiff_t H,
                                  ptrdiff_t *lo, ptrdiff_t *hi) {
    /* no divisions without dilation: two of them cost more than the row */
    ptrdiff_t l = y0 >= 0 ? 0 : dh == 1 ? -y0 : (-y0 + dh - 1) / dh;
    ptrdiff_t h = H - y0 <= 0 ? 0 : dh == 1 ? H - y0 : (H - y0 - 1) / dh + 1;
    if (l > kh) l = kh;
    if (h > kh) h = kh;
    if (h < l) h = l;
    *lo = l;
    *hi = h;
}

/* data[j] (j < W) = max (take_max) or sum over ky in [lo, hi) of the plane's
 * row y0 + ky * dh; the fill (-inf or 0) where lo == hi. */
static inline __attribute__((always_inline)) void pl_vrows(float *data, const float *plane,
                                                          ptrdiff_t W, ptrdiff_t y0,
                                                          ptrdiff_t lo, ptrdiff_t hi,
                                                          ptrdiff_t dh, int take_max) {
    const float fill = take_max ? -__builtin_inff() : 0.0f;
    ptrdiff_t j = 0;
    if (hi <= lo) {
        for (j = 0; j < W; j++) data[j] = fill;
        return;
    }
    const float *first = plane + (y0 + lo * dh) * W;
    const ptrdiff_t step = dh * W, n = hi - lo;
#if PL_VL > 1
    const pl_v f = pl_set1(fill);
    if (W < PL_VL) { /* one masked vector */
        const pl_m k = pl_mask(W);
        const float *p = first;
        pl_v acc = f;
        for (ptrdiff_t r = 0; r < n; r++, p += step)
            acc = take_max ? pl_max(pl_mload(k, p, f), acc) : pl_add(acc, pl_mload(k, p, f));
        pl_mstore(data, k, acc);
        return;
    }
    /* Whole vectors, the last one ending at the row's end (overlapping the
     * one before: those columns are written twice, alike), rather than a
     * scalar tail, which took as long as the vectors on rows of 13-111
     * columns. Masked loads that missed the cache took twice as long on
     * Zen 5, so only rows narrower than a vector use them. */
    for (;;) {
        if (j + PL_VL > W) j = W - PL_VL;
        const float *p = first + j;
        pl_v acc;
        if (take_max) {
            /* up to three rows without a loop: the usual 3-high window
             * (the first row through a max too: a NaN never wins) */
            acc = pl_max(pl_load(p), f);
            if (n >= 2) acc = pl_max(pl_load(p + step), acc);
            if (n >= 3) acc = pl_max(pl_load(p + 2 * step), acc);
            for (ptrdiff_t r = 3; r < n; r++) acc = pl_max(pl_load(p + r * step), acc);
        } else {
            acc = pl_load(p);
            if (n >= 2) acc = pl_add(acc, pl_load(p + step));
            if (n >= 3) acc = pl_add(acc, pl_load(p + 2 * step));
            for (ptrdiff_t r = 3; r < n; r++) acc = pl_add(acc, pl_load(p + r * step));
        }
        pl_store(data + j, acc);
        j += PL_VL;
        if (j >= W) return;
    }
#else
    for (ptrdiff_t t = 0; t < W; t++) data[t] = fill;
    for (ptrdiff_t r = 0; r < n; r++) {
        const float *p = first + r * step;
        if (take_max) {
            for (ptrdiff_t t = 0; t < W; t++) data[t] = pl_mx(data[t], p[t]);
        } else {
            for (ptrdiff_t t = 0; t < W; t++) data[t] += p[t];
        }
    }
#endif
}

/* dst[i] (i < ow) = max (take_max) or sum of row[i * sw + kx * dw] over kx
 * < kw, times inv_x[i] * sy when inv_x is not NULL. row holds at least
 * (ow - 1) * sw + (kw - 1) * dw + 1 floats, and PL_SLACK more that may be
 * read (into lanes that are dropped). */
static inline __attribute__((always_inline)) void pl_hrow(float *dst, const float *row,
                                                         ptrdiff_t ow, ptrdiff_t kw,
                                                         ptrdiff_t sw, ptrdiff_t dw,
                                                         int take_max, const float *inv_x,
                                                         float sy) {
    ptrdiff_t i = 0;
#if PL_VL > 1
    if (sw <= 2) {
        /* whole vectors, the last one ending at the row's end (see
         * pl_vrows); masked only in rows narrower than a vector */
        const pl_v syv = pl_set1(sy);
        const pl_m k = pl_mask(ow < PL_VL ? ow : 0);
        for (;;) {
            if (i + PL_VL > ow && ow >= PL_VL) i = ow - PL_VL;
            const float *p = row + i * sw;
            pl_v acc = sw == 1 ? pl_load(p) : st_even(p);
            for (ptrdiff_t kx = 1; kx < kw; kx++) {
                const float *q = p + kx * dw;
                const pl_v v = sw == 1 ? pl_load(q) : st_even(q);
                acc = take_max ? pl_max(v, acc) : pl_add(acc, v);
            }
            if (ow < PL_VL) {
                if (inv_x) acc = pl_mul(acc, pl_mul(pl_mload(k, inv_x, syv), syv));
                pl_mstore(dst, k, acc);
                return;
            }
            if (inv_x) acc = pl_mul(acc, pl_mul(pl_load(inv_x + i), syv));
            pl_store(dst + i, acc);
            i += PL_VL;
            if (i >= ow) return;
        }
    }
#endif
    for (; i < ow; i++) {
        const float *p = row + i * sw;
        float s = p[0];
        for (ptrdiff_t kx = 1; kx < kw; kx++) s = take_max ? pl_mx(s, p[kx * dw]) : s + p[kx * dw];
        dst[i] = inv_x ? s * (inv_x[i] * sy) : s;
    }
}

/* Floats of the rows the vertical pass writes before the horizontal pass
 * reads them (4 KiB): a row read back right after it was written waited
 * for its stores (a load that spans several recent stores, or masked ones,
 * cannot take its data from the store buffer), and that wait cost as much
 * as the rest of the row. Written a block of rows ahead, the rows are in
 * the L1 cache when they are read; blocks of 16 KiB were slower on planes
 * read from memory (the loads of a block no longer overlapped the
 * horizontal pass). */
#define PL_BLOCK_FLOATS 1024

/* Rows of a block for rows of rs floats: at least 1. */
static inline ptrdiff_t pl_block_rows(ptrdiff_t rs, ptrdiff_t OH) {
    ptrdiff_t b = PL_BLOCK_FLOATS / rs;
    if (b > OH) b = OH;
    return b < 1 ? 1 : b;
}

/* Pool plane x (H, W) into y (OH, OW): window kh x kw, strides sh, sw,
 * begin pads ph, pw, dilations dh, dw; inv_y (OH) and inv_x (OW) scale the
 * sums of an average (NULL for max). buf is the thread's buffer of
 * pl_block_rows(rs, OH) rows of rs = Wr + PL_SLACK floats, Wr >= pw + W and
 * >= (OW - 1) * sw + (kw - 1) * dw + 1, holding the fill (-inf for max, 0
 * for average) outside columns [pw, pw + W) of each row: the pads, which
 * no call writes. */
static void pl_plane(const float *x, ptrdiff_t H, ptrdiff_t W, float *y, ptrdiff_t OH,
                     ptrdiff_t OW, ptrdiff_t kh, ptrdiff_t kw, ptrdiff_t sh, ptrdiff_t sw,
                     ptrdiff_t ph, ptrdiff_t pw, ptrdiff_t dh, ptrdiff_t dw, int take_max,
                     const float *inv_y, const float *inv_x, float *buf, ptrdiff_t Wr) {
    const ptrdiff_t rs = Wr + PL_SLACK, B = pl_block_rows(rs, OH);
    for (ptrdiff_t oy0 = 0; oy0 < OH; oy0 += B) {
        const ptrdiff_t nb = OH - oy0 < B ? OH - oy0 : B;
        for (ptrdiff_t b = 0; b < nb; b++) {
            ptrdiff_t y0 = (oy0 + b) * sh - ph, lo, hi;
            pl_rows_inside(y0, dh, kh, H, &lo, &hi);
            pl_vrows(buf + b * rs + pw, x, W, y0, lo, hi, dh, take_max);
        }
        for (ptrdiff_t b = 0; b < nb; b++)
            pl_hrow(y + (oy0 + b) * OW, buf + b * rs, OW, kw, sw, dw, take_max,
                    take_max ? NULL : inv_x, take_max ? 1.0f : inv_y[oy0 + b]);
    }
}

#endif
