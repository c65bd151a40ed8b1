/* Direct 2-D convolution in NCHW, vectorized along the output width.
 *
 * Included by _conv.pxi, so it is compiled three times: for the x86-64
 * baseline, with AVX2 and FMA, and with AVX-512 (setup.py). The vectors are
 * GCC/clang vector extensions of DC_VL floats (16 with AVX-512, 8 else); the
 * compiler maps them onto the widest registers the build's flags allow.
 *
 * Row mode. The input is prepared by dc_pack_phase (zero padding added,
 * and, for a stride s along the width, split into s column phases: phase p
 * holds padded columns p, p + s, p + 2s, ...), so that the input columns
 * one output row segment needs, for any filter column, are contiguous. The
 * weights are packed as [M/DC_OCB][C][KH][KW][DC_OCB]: DC_OCB output
 * channels side by side. dc_rows computes the DC_OCB output channels of one
 * output row: for every input channel, filter row and filter column it
 * loads up to DC_VMAX vectors of input and multiplies each with the
 * channels' weights, into DC_OCB * DC_VMAX accumulators kept in registers
 * (1x1 and 3x3 windows in loops of their own, without the tap tables).
 *
 * Flat mode (dc_flat): the padded planes are read as one long row each, so
 * a run of vectors covers several output rows of a small plane. With
 * strides the planes are split into row and column phases too (phase (py,
 * px) holds padded rows py, py + sh, ... and columns px, px + sw, ...), so
 * that every filter tap reads a run of one phase at a constant offset.
 *
 * The bias, a residual input and a clamp (fused Relu or Clip) are applied
 * when the output is written (in flat mode with AVX-512 from the registers,
 * with masked stores where a vector crosses output rows).
 */
#ifndef ORTCORE_DIRECT_CONV_H
#define ORTCORE_DIRECT_CONV_H

#include <stddef.h>
#include <string.h>

#include "_stencil.h" /* st_inside */

/* Vectors of DC_VL floats; DC_OCB output channels per block; up to DC_VMAX
 * vectors of output columns per step. AVX-512 has 32 registers: 8 x 3
 * accumulators + 3 inputs + 1 weight; AVX has 16: 4 x 3 + 3 + 1. */
#if defined(__AVX512F__)
#define DC_VL 16
#define DC_OCB 8
#define DC_VMAX 3
#elif defined(__AVX__)
#define DC_VL 8
#define DC_OCB 4
#define DC_VMAX 3
#else
#define DC_VL 8
#define DC_OCB 4
#define DC_VMAX 1 /* 8 xmm accumulators (each vector is two SSE registers) */
#endif

/* Whether a 3x3 step of one vector sums even and odd input channels apart:
 * with AVX2's DC_OCB = 4 its 4 accumulators alone leave the FMAs waiting on
 * each other (4 chains where two FMA pipes of latency 4 want 8). A row's
 * last, lone vector (55 columns: 1 of 7) took 24% of a 16 -> 64 channel
 * 55x55 convolution's time. Paired, on a Zen 3 (one thread, the kernel
 * alone): rows of 27 columns 0.86x the time, 28 0.93x, 55 0.94x, 56 0.97x;
 * rows without a lone vector (13, 14, 111, 112) as before. AVX-512 already
 * has 8 chains; SSE2 has no spare registers. */
#if DC_VMAX > 1 && DC_OCB < 8
#define DC_PAIR 1
#else
#define DC_PAIR 0
#endif

/* Software prefetches in dc_accumulate's 1x1 and 3x3 loops, DC_PF_X input
 * channels ahead for the input rows a step reads and DC_PF_W channels ahead
 * for the weights. Inside a model a Conv's input and weights come from L3
 * or memory (the nodes before it evicted them): one step reads a few lines
 * of each of many planes (a stride per channel, more streams than the
 * hardware prefetchers follow), and a 3x3 block's weights are a 4 KB page
 * every 14 channels. Measured on an Intel Xeon (Emerald Rapids, AVX-512, 2
 * vCPUs, 2 MB L2), whole models, the same session's runs alternating with
 * the distances set at run time: ResNet-50 0.90x the time, Inception v2
 * 0.91x, SqueezeNet 0.95x (input prefetches alone 0.95-0.96x; weight
 * distances of 32 to 256 channels, or prefetching into L2 only, the same). */
#define DC_PF_X 8
#define DC_PF_W 64
#ifndef DC_PF_OUT
#define DC_PF_OUT 1
#endif

typedef float dc_v8 __attribute__((vector_size(DC_VL * 4)));
typedef float dc_v8u __attribute__((vector_size(DC_VL * 4), aligned(4), may_alias));

/* n floats from s to d (not overlapping) in whole vectors, the last one
 * overlapping the one before: a padded row is tens of floats, short for a
 * call of memcpy. */
static inline void dc_copy(float *d, const float *s, ptrdiff_t n) {
    if (n < DC_VL) {
        for (ptrdiff_t j = 0; j < n; j++) d[j] = s[j];
        return;
    }
    ptrdiff_t j = 0;
    for (; j + DC_VL <= n; j += DC_VL) *(dc_v8u *)(d + j) = *(const dc_v8u *)(s + j);
    if (j < n) *(dc_v8u *)(d + n - DC_VL) = *(const dc_v8u *)(s + n - DC_VL);
}

/* n zeros from d. */
static inline void dc_zero(float *d, ptrdiff_t n) {
    ptrdiff_t j = 0;
    for (; j + DC_VL <= n; j += DC_VL) *(dc_v8u *)(d + j) = (dc_v8){0};
    for (; j < n; j++) d[j] = 0.0f;
}

/* Phase-split padded copy of one image x (C, H, W) into out (SH, S, C, NR,
 * WQ): out[q, p, c, r - base, j] = x[c, r * SH + q - ph, j * S + p - pw],
 * zero outside x, for the padded rows r0 <= r < r1 of channel c and row
 * phase q (the caller splits channels, phases and rows over threads; NR
 * rows from padded row `base` are kept). Each row copies its inside
 * columns in one loop without branches (with S = 2 a constant stride the
 * compiler vectorizes) and zeroes the rest. */
static inline void dc_pack_rows(const float *x, ptrdiff_t H, ptrdiff_t W, float *out,
                                ptrdiff_t C, ptrdiff_t SH, ptrdiff_t S, ptrdiff_t NR,
                                ptrdiff_t WQ, ptrdiff_t ph, ptrdiff_t pw, ptrdiff_t c,
                                ptrdiff_t q, ptrdiff_t r0, ptrdiff_t r1, ptrdiff_t base) {
    const float *xc = x + c * H * W;
    for (ptrdiff_t p = 0; p < S; p++) {
        float *o = out + ((q * S + p) * C + c) * NR * WQ;
        ptrdiff_t lo, hi;
        st_inside(W, S, p, pw, WQ, &lo, &hi);
        for (ptrdiff_t r = r0; r < r1; r++) {
            float *orow = o + (r - base) * WQ;
            ptrdiff_t iy = r * SH + q - ph;
            if (iy < 0 || iy >= H || hi == lo) {
                dc_zero(orow, WQ);
                continue;
            }
            /* column j reads src[j * S] */
            const float *src = xc + iy * W + p - pw;
            for (ptrdiff_t j = 0; j < lo; j++) orow[j] = 0.0f;
            if (S == 1) {
                dc_copy(orow + lo, src + lo, hi - lo);
            } else if (S == 2) {
                for (ptrdiff_t j = lo; j < hi; j++) orow[j] = src[2 * j];
            } else {
                for (ptrdiff_t j = lo; j < hi; j++) orow[j] = src[j * S];
            }
            for (ptrdiff_t j = hi; j < WQ; j++) orow[j] = 0.0f;
        }
    }
}

/* All rows of channel c and row phase q (see dc_pack_rows). */
static inline void dc_pack_phase(const float *x, ptrdiff_t H, ptrdiff_t W, float *out,
                                 ptrdiff_t C, ptrdiff_t SH, ptrdiff_t S, ptrdiff_t HP,
                                 ptrdiff_t WQ, ptrdiff_t ph, ptrdiff_t pw, ptrdiff_t c,
                                 ptrdiff_t q) {
    dc_pack_rows(x, H, W, out, C, SH, S, HP, WQ, ph, pw, c, q, 0, HP, 0);
}

/* Add the filter taps of one input channel (its plane at `plane`, its
 * weights at w: [KH][KW][DC_OCB]) to acc: V vectors from position ow0 of
 * the row at offset `at`; tap (ky, kx) reads at kyoff[ky] + koff[kx]. */
static inline __attribute__((always_inline)) void dc_channel(
    dc_v8 acc[DC_OCB][DC_VMAX], const int V, const float *plane, const float *w,
    ptrdiff_t KH, ptrdiff_t KW, ptrdiff_t at, const ptrdiff_t *kyoff, const ptrdiff_t *koff,
    ptrdiff_t ow0) {
    for (ptrdiff_t ky = 0; ky < KH; ky++) {
        const float *row = plane + at + kyoff[ky] + ow0;
        const float *wk = w + ky * KW * DC_OCB;
        /* unrolled (a loop of loads of each tap's offset before): first
         * layers alone, 2 threads, 3 -> 64 / 96 channels 7x7 stride 2 on
         * 224x224 0.89-0.92x the time, 11x11 stride 4 0.91x; 96 -> 256 5x5
         * stride 2 on 55x55 0.86x */
#pragma GCC unroll 8
        for (ptrdiff_t kx = 0; kx < KW; kx++) {
            const float *src = row + koff[kx];
            dc_v8 in[DC_VMAX];
            for (int v = 0; v < V; v++) in[v] = *(const dc_v8u *)(src + DC_VL * v);
            for (int r = 0; r < DC_OCB; r++) {
                const float s = wk[kx * DC_OCB + r];
                const dc_v8 b = s - (dc_v8){0}; /* s in every lane */
                for (int v = 0; v < V; v++) acc[r][v] += b * in[v];
            }
        }
    }
}

#if DC_PAIR
/* Add the first C - C % 2 input channels of a 3x3 window whose taps read at
 * offsets o to one vector of sums (V = 1), the even and odd channels summed
 * apart and added at the end (see DC_PAIR); return how many channels that
 * is (dc_accumulate adds an odd count's last one). */
static inline __attribute__((always_inline)) ptrdiff_t dc_accumulate_pairs(
    dc_v8 acc[DC_OCB][DC_VMAX], const float *xph, ptrdiff_t C, ptrdiff_t CS,
    const float *xlast, const float *w, const ptrdiff_t o[9]) {
    dc_v8 a0[DC_OCB], a1[DC_OCB];
    for (int r = 0; r < DC_OCB; r++) a0[r] = a1[r] = (dc_v8){0};
    ptrdiff_t c = 0;
    for (; c + 1 < C; c += 2, w += 18 * DC_OCB) {
        const float *p0 = xph + c * CS;
        const float *p1 = c + 1 < C - 1 ? p0 + CS : xlast;
        for (int t = 0; t < 9; t++) {
            const dc_v8 i0 = *(const dc_v8u *)(p0 + o[t]);
            const dc_v8 i1 = *(const dc_v8u *)(p1 + o[t]);
            for (int r = 0; r < DC_OCB; r++) {
                a0[r] += (w[t * DC_OCB + r] - (dc_v8){0}) * i0;
                a1[r] += (w[(9 + t) * DC_OCB + r] - (dc_v8){0}) * i1;
            }
        }
    }
    for (int r = 0; r < DC_OCB; r++) acc[r][0] += a0[r] + a1[r];
    return c;
}
#endif

/* Accumulate V vectors (DC_VL * V positions from ow0 of the row at offset
 * `at` of each plane) of the output channels of block `ocb` into acc. Plane
 * c < C - 1 starts at xph + c * CS, the last one at xlast (xph + (C - 1) *
 * CS, or a copy of it when the planes are the caller's input and the last
 * vectors would read past its end). */
static inline __attribute__((always_inline)) void dc_accumulate(
    dc_v8 acc[DC_OCB][DC_VMAX], const int V, const float *xph, ptrdiff_t C, ptrdiff_t CS,
    const float *xlast, const float *wp, ptrdiff_t KH, ptrdiff_t KW, ptrdiff_t ocb,
    ptrdiff_t at, const ptrdiff_t *kyoff, const ptrdiff_t *koff, ptrdiff_t ow0) {
    for (int r = 0; r < DC_OCB; r++)
        for (int v = 0; v < V; v++) acc[r][v] = (dc_v8){0};
    const ptrdiff_t WC = KH * KW * DC_OCB; /* weights per input channel */
    const float *w = wp + ocb * C * WC;
    if (KH == 1 && KW == 1) {
        /* one tap: a plain loop over the channels, no tap tables */
        const float *src = xph + at + kyoff[0] + koff[0] + ow0;
        for (ptrdiff_t c = 0; c < C - 1; c++, src += CS, w += DC_OCB) {
            dc_v8 in[DC_VMAX];
            /* the lines of V vectors from src, DC_PF_X planes on */
            if (c + DC_PF_X < C - 1)
                for (int v = 0; v <= V; v++) __builtin_prefetch(src + DC_PF_X * CS + DC_VL * v);
            __builtin_prefetch(w + DC_PF_W * DC_OCB);
            for (int v = 0; v < V; v++) in[v] = *(const dc_v8u *)(src + DC_VL * v);
            for (int r = 0; r < DC_OCB; r++) {
                const dc_v8 b = w[r] - (dc_v8){0};
                for (int v = 0; v < V; v++) acc[r][v] += b * in[v];
            }
        }
        dc_channel(acc, V, xlast, w, 1, 1, at, kyoff, koff, ow0);
        return;
    }
    if (KH == 3 && KW == 3) {
        /* 3x3: the nine tap offsets once, each channel's taps unrolled */
        ptrdiff_t o[9];
        for (int t = 0; t < 9; t++) o[t] = at + kyoff[t / 3] + koff[t % 3] + ow0;
        ptrdiff_t c = 0;
#if DC_PAIR
        if (V == 1) {
            c = dc_accumulate_pairs(acc, xph, C, CS, xlast, w, o);
            w += c * 9 * DC_OCB;
        }
#endif
        for (; c < C; c++, w += 9 * DC_OCB) {
            const float *plane = c < C - 1 ? xph + c * CS : xlast;
            /* the three rows' lines, DC_PF_X planes on; the channel's
             * weights DC_PF_W channels on */
            if (c + DC_PF_X < C - 1)
                for (int k = 0; k < 9; k += 3)
                    for (int v = 0; v <= V; v++)
                        __builtin_prefetch(plane + DC_PF_X * CS + o[k] + DC_VL * v);
            for (int k = 0; k < 9 * DC_OCB; k += 16)
                __builtin_prefetch(w + DC_PF_W * 9 * DC_OCB + k);
            /* the taps unrolled (GCC kept a loop that loaded each tap's
             * offset): 3x3 Convs of 64-128 channels on 56x56 alone, 2
             * threads, 0.97-0.98x the time; Inception v2 0.99x */
#pragma GCC unroll 9
            for (int t = 0; t < 9; t++) {
                dc_v8 in[DC_VMAX];
                for (int v = 0; v < V; v++) in[v] = *(const dc_v8u *)(plane + o[t] + DC_VL * v);
                for (int r = 0; r < DC_OCB; r++) {
                    const dc_v8 b = w[t * DC_OCB + r] - (dc_v8){0};
                    for (int v = 0; v < V; v++) acc[r][v] += b * in[v];
                }
            }
        }
        return;
    }
    for (ptrdiff_t c = 0; c < C - 1; c++)
        dc_channel(acc, V, xph + c * CS, w + c * WC, KH, KW, at, kyoff, koff, ow0);
    dc_channel(acc, V, xlast, w + (C - 1) * WC, KH, KW, at, kyoff, koff, ow0);
}

/* Write n sums from src (scratch: changed) to out, with the bias bv, the
 * residual zr (NULL: none) and the clamp. */
static inline void dc_write(float *out, float *src, const float *zr, float bv, ptrdiff_t n,
                            float lo, float hi, int clamp) {
    if (zr) {
        for (ptrdiff_t j = 0; j < n; j++) src[j] += bv + zr[j];
    } else {
        for (ptrdiff_t j = 0; j < n; j++) src[j] += bv;
    }
    if (clamp) {
        for (ptrdiff_t j = 0; j < n; j++) {
            float t = src[j];
            t = t < lo ? lo : t;
            out[j] = t > hi ? hi : t;
        }
    } else {
        memcpy(out, src, sizeof(float) * (size_t)n);
    }
}

typedef int dc_vi __attribute__((vector_size(DC_VL * 4)));

/* Write n columns of one accumulated vector group to y rows, with the
 * bias, residual and clamp: whole vectors from the registers, a row's last
 * partial one through dc_write (which took as long as the sums of a first
 * layer's few channels when every vector went through it). */
static inline void dc_store(dc_v8 acc[DC_OCB][DC_VMAX], int V, float *y, const float *z,
                            const float *bias, ptrdiff_t M, ptrdiff_t OH, ptrdiff_t OW,
                            ptrdiff_t ocb, ptrdiff_t oy, ptrdiff_t ow0, float lo, float hi,
                            int clamp) {
    float tmp[DC_VL]; /* a row's last partial vector */
    ptrdiff_t n = OW - ow0;
    if (n > DC_VL * V) n = DC_VL * V;
    const int whole = (int)(n / DC_VL); /* vectors written from the registers */
    const dc_v8 lov = lo - (dc_v8){0}, hiv = hi - (dc_v8){0};
    for (int r = 0; r < DC_OCB; r++) {
        ptrdiff_t m = ocb * DC_OCB + r;
        if (m >= M) break;
        ptrdiff_t at = (m * OH + oy) * OW + ow0;
        const float bv = bias ? bias[m] : 0.0f;
        const dc_v8 bvv = bv - (dc_v8){0};
        for (int v = 0; v < whole; v++) {
            dc_v8 t = acc[r][v] + bvv;
            if (z) t += *(const dc_v8u *)(z + at + DC_VL * v);
            if (clamp) {
                /* t < lo ? lo : t, then t > hi ? hi : t, as dc_write (a NaN
                 * stays NaN), in bit operations: C's vector extensions
                 * compare but have no ?: on vectors */
                dc_vi below = t < lov;
                t = (dc_v8)((below & (dc_vi)lov) | (~below & (dc_vi)t));
                dc_vi above = t > hiv;
                t = (dc_v8)((above & (dc_vi)hiv) | (~above & (dc_vi)t));
            }
            *(dc_v8u *)(y + at + DC_VL * v) = t;
        }
        const ptrdiff_t done = (ptrdiff_t)whole * DC_VL;
        if (done < n) {
            memcpy(tmp, &acc[r][whole], sizeof(float) * DC_VL);
            dc_write(y + at + done, tmp, z ? z + at + done : NULL, bv, n - done, lo, hi, clamp);
        }
    }
}

/* One work item: the output channels of block `ocb`, output row `oy`, all
 * columns. y and z are (M, OH, OW) of one image; bias is NULL or (M,).
 * kyoff[ky] = ky * dh * WQ; koff as for dc_accumulate. */
static void dc_rows(const float *xph, ptrdiff_t C, ptrdiff_t HP, ptrdiff_t WQ,
                    const float *wp, ptrdiff_t KH, ptrdiff_t KW, const ptrdiff_t *kyoff,
                    const ptrdiff_t *koff, ptrdiff_t sh, float *y, const float *z,
                    const float *bias, ptrdiff_t M, ptrdiff_t OH, ptrdiff_t OW, float lo,
                    float hi, int clamp, ptrdiff_t ocb, ptrdiff_t oy) {
    dc_v8 acc[DC_OCB][DC_VMAX];
    ptrdiff_t ow0 = 0;
/* accumulate and write V vectors of columns from ow0 */
#define DC_STEP(V)                                                                          \
    do {                                                                                    \
        dc_accumulate(acc, V, xph, C, HP * WQ, xph + (C - 1) * HP * WQ, wp, KH, KW, ocb,    \
                      oy * sh * WQ, kyoff, koff, ow0);                                      \
        dc_store(acc, V, y, z, bias, M, OH, OW, ocb, oy, ow0, lo, hi, clamp);               \
    } while (0)
    for (; ow0 + DC_VL * DC_VMAX <= OW; ow0 += DC_VL * DC_VMAX) DC_STEP(DC_VMAX);
    /* the tail: one narrower step where it fits, else single vectors */
#if DC_VMAX > 2
    if (OW - ow0 > 2 * DC_VL) {
        DC_STEP(3);
        return;
    }
#endif
#if DC_VMAX > 1
    if (OW - ow0 > DC_VL) {
        DC_STEP(2);
        return;
    }
#endif
    for (; ow0 < OW; ow0 += DC_VL) DC_STEP(1);
#undef DC_STEP
}

/* Flat mode: the padded phase planes (sh, sw, C, HQ, WQ) with HQ = OH + (KH
 * - 1) * dh / sh and WQ = OW + (KW - 1) * dw / sw are read as one long row
 * each. Flat position j = oy * WQ + ox is output (oy, ox) where ox < OW
 * (the other positions are computed and dropped), so small output planes
 * fill whole vectors instead of one row each; tap (ky, kx) reads position j
 * + a * WQ + b of phase ((ky * dh) % sh, (kx * dw) % sw), a = ky * dh / sh,
 * b = kx * dw / sw (kyoff and koff hold those offsets). The scratch holds
 * DC_VL * DC_VMAX floats past the last plane: the last vectors read past it
 * (into positions that are dropped). */

#if defined(__AVX512F__)
#include <immintrin.h>

/* Write vector v, flat positions p0 .. p0 + 15 of output channel yc (OH x
 * OW; residual zc or NULL; p0 is at output row oy, column ox of the flat
 * layout with WQ columns), with the clamp (the bias is in v): the lanes
 * below L that fall on one output row go out in one masked store each (the
 * dropped positions between rows are skipped). max(lo, t) and min(hi, t)
 * keep a NaN t. */
static inline __attribute__((always_inline)) void dc_put16(
    __m512 v, float *yc, const float *zc, ptrdiff_t p0, ptrdiff_t oy, ptrdiff_t ox,
    ptrdiff_t L, ptrdiff_t OW, ptrdiff_t WQ, __m512 lo, __m512 hi, int clamp) {
    ptrdiff_t end = L - p0; /* lanes at or past `end` are outside the plane */
    if (end > 16) end = 16;
    for (ptrdiff_t t = 0; t < end;) {
        ptrdiff_t run = OW - ox;
        if (run > end - t) run = end - t;
        if (run > 0) {
            __mmask16 k = (__mmask16)(((1u << run) - 1u) << t);
            ptrdiff_t at = oy * OW + ox - t; /* where lane 0 would go */
            __m512 u = v;
            if (zc) u = _mm512_add_ps(u, _mm512_maskz_loadu_ps(k, zc + at));
            if (clamp) u = _mm512_min_ps(hi, _mm512_max_ps(lo, u));
            _mm512_mask_storeu_ps(yc + at, k, u);
        }
        t += WQ - ox;
        ox = 0;
        oy++;
    }
}

/* dc_store_flat from registers (AVX-512): a vector on one output row goes
 * out in one store, the others (crossing rows, or past the plane) lane run
 * by lane run. Not inlined: dc_flat's sums keep every register. */
static __attribute__((noinline)) void dc_store_flat16(
    dc_v8 acc[DC_OCB][DC_VMAX], int V, float *y, ptrdiff_t ycs, const float *z,
    const float *bias, ptrdiff_t M, ptrdiff_t OH, ptrdiff_t OW, ptrdiff_t WQ, ptrdiff_t ocb,
    ptrdiff_t j0, float lo, float hi, int clamp) {
    const ptrdiff_t L = (OH - 1) * WQ + OW;
    const __m512 lov = _mm512_set1_ps(lo), hiv = _mm512_set1_ps(hi);
    ptrdiff_t oy = j0 / WQ, ox = j0 - oy * WQ;
    for (int v = 0; v < V; v++) {
        ptrdiff_t p0 = j0 + DC_VL * v;
        if (p0 >= L) break;
        /* on one output row, or on consecutive rows that drop nothing */
        const int whole = (WQ == OW || ox + DC_VL <= OW) && p0 + DC_VL <= L;
        const ptrdiff_t at = oy * OW + ox;
        for (int r = 0; r < DC_OCB; r++) {
            ptrdiff_t m = ocb * DC_OCB + r;
            if (m >= M) break;
            float *yc = y + m * ycs;
            const float *zc = z ? z + m * OH * OW : NULL;
            __m512 u = _mm512_add_ps((__m512)acc[r][v], _mm512_set1_ps(bias ? bias[m] : 0.0f));
            if (whole) {
                if (zc) u = _mm512_add_ps(u, _mm512_loadu_ps(zc + at));
                if (clamp) u = _mm512_min_ps(hiv, _mm512_max_ps(lov, u));
                _mm512_storeu_ps(yc + at, u);
            } else {
                dc_put16(u, yc, zc, p0, oy, ox, L, OW, WQ, lov, hiv, clamp);
            }
        }
        for (ox += DC_VL; ox >= WQ; ox -= WQ) oy++;
    }
}
#endif

/* Write the flat positions from j0 of V accumulated vectors to y, whose
 * output channel m starts at y + m * ycs (OH * OW, or more where the
 * channels go out interleaved with other groups'). */
static inline void dc_store_flat(dc_v8 acc[DC_OCB][DC_VMAX], int V, float *y, ptrdiff_t ycs,
                                 const float *z, const float *bias, ptrdiff_t M, ptrdiff_t OH,
                                 ptrdiff_t OW, ptrdiff_t WQ, ptrdiff_t ocb, ptrdiff_t j0,
                                 float lo, float hi, int clamp) {
#if defined(__AVX512F__) && DC_VL == 16
    dc_store_flat16(acc, V, y, ycs, z, bias, M, OH, OW, WQ, ocb, j0, lo, hi, clamp);
#else
    float tmp[DC_VL * DC_VMAX];
    ptrdiff_t L = (OH - 1) * WQ + OW;
    ptrdiff_t n = L - j0;
    if (n > DC_VL * V) n = DC_VL * V;
    for (int r = 0; r < DC_OCB; r++) {
        ptrdiff_t m = ocb * DC_OCB + r;
        if (m >= M) break;
        memcpy(tmp, acc[r], sizeof(float) * DC_VL * (size_t)V);
        float bv = bias ? bias[m] : 0.0f;
        if (WQ == OW) {
            /* no dropped positions: the output rows are one run */
            ptrdiff_t at = m * OH * OW + j0;
            dc_write(y + m * ycs + j0, tmp, z ? z + at : NULL, bv, n, lo, hi, clamp);
            continue;
        }
        ptrdiff_t oy = j0 / WQ, ox = j0 - oy * WQ;
        for (ptrdiff_t t = 0; t < n;) {
            /* one run of columns of output row oy, from ox */
            ptrdiff_t run = OW - ox;
            if (run > n - t) run = n - t;
            if (run > 0) {
                ptrdiff_t at = (m * OH + oy) * OW + ox;
                dc_write(y + m * ycs + oy * OW + ox, tmp + t, z ? z + at : NULL, bv, run, lo,
                         hi, clamp);
            }
            /* skip the run and the dropped positions up to the next row */
            t += WQ - ox;
            ox = 0;
            oy++;
        }
    }
#endif
}

#if defined(__AVX512F__) && DC_PF_OUT
/* Prefetch the lines of floats from .. to (both included): with intent to
 * write (PREFETCHW) or to read. */
static inline __attribute__((always_inline)) void dc_prefetch_lines(const float *from,
                                                                    const float *to,
                                                                    int write) {
    const char *e = (const char *)to;
    for (const char *p = (const char *)((uintptr_t)from & ~(uintptr_t)63); p <= e; p += 64) {
        if (write)
            __asm__ volatile("prefetchw %0" : : "m"(*p));
        else
            __builtin_prefetch(p, 0, 3);
    }
}
#endif

/* Prefetch, with intent to write, the output lines of a flat-mode item
 * (the channels of block `ocb`, nv vectors of flat positions from j0)
 * before its sums: a large output is not in the cache when the item
 * writes it, and each store that misses waits for its line (a read for
 * ownership) at the item's end, where nothing else overlaps it. The lines
 * of the residual z (NULL: none; channel m at z + m * OH * OW) that the
 * item adds as it writes are read at that end too, so they are fetched
 * with them: ResNet-50's 1x1 Convs with the shortcut added (64 -> 256 on
 * 56x56, one Conv, Add and Relu a session, 2 threads) 0.89-0.95x the
 * time, the whole model 0.98x (60 rounds, sessions alternating in one
 * process). The AVX-512 build only (PREFETCHW, which every AVX-512 CPU
 * has). */
static inline void dc_prefetch_out(float *y, ptrdiff_t ycs, const float *z, ptrdiff_t M,
                                   ptrdiff_t OH, ptrdiff_t OW, ptrdiff_t WQ, ptrdiff_t ocb,
                                   ptrdiff_t j0, ptrdiff_t nv) {
#if defined(__AVX512F__) && DC_PF_OUT
    const ptrdiff_t L = (OH - 1) * WQ + OW;
    ptrdiff_t j1 = j0 + nv * DC_VL;
    if (j1 > L) j1 = L;
    if (j1 <= j0) return;
    /* where flat positions j0 and j1 - 1 land in a channel's plane */
    const ptrdiff_t y0 = j0 / WQ, y1 = (j1 - 1) / WQ;
    ptrdiff_t x0 = j0 - y0 * WQ, x1 = j1 - 1 - y1 * WQ;
    if (x0 >= OW) x0 = OW - 1;
    if (x1 >= OW) x1 = OW - 1;
    const ptrdiff_t a = y0 * OW + x0, b = y1 * OW + x1;
    for (int r = 0; r < DC_OCB; r++) {
        const ptrdiff_t m = ocb * DC_OCB + r;
        if (m >= M) break;
        dc_prefetch_lines(y + m * ycs + a, y + m * ycs + b, 1);
        if (z) dc_prefetch_lines(z + m * OH * OW + a, z + m * OH * OW + b, 0);
    }
#else
    (void)y, (void)ycs, (void)z, (void)M, (void)OH, (void)OW, (void)WQ, (void)ocb, (void)j0;
    (void)nv;
#endif
}

/* One work item of flat mode: the output channels of block `ocb`, nv
 * vectors of flat positions from j0 (clipped to the plane); the last input
 * plane at xlast (see dc_accumulate); output channel m at y + m * ycs.
 * pf_out: whether the item prefetches its output lines (dc_prefetch_out;
 * not when the output is a buffer in the cache). */
static void dc_flat(const float *xph, ptrdiff_t C, ptrdiff_t HQ, ptrdiff_t WQ,
                    const float *xlast, const float *wp, ptrdiff_t KH, ptrdiff_t KW,
                    const ptrdiff_t *kyoff, const ptrdiff_t *koff,
                    float *y, ptrdiff_t ycs, const float *z, const float *bias, ptrdiff_t M,
                    ptrdiff_t OH, ptrdiff_t OW, float lo, float hi, int clamp, ptrdiff_t ocb,
                    ptrdiff_t j0, ptrdiff_t nv, int pf_out) {
    dc_v8 acc[DC_OCB][DC_VMAX];
#if DC_VMAX > 1
    ptrdiff_t rest = (OH - 1) * WQ + OW - j0;
    if (rest > nv * DC_VL) rest = nv * DC_VL;
#endif
    if (pf_out) dc_prefetch_out(y, ycs, z, M, OH, OW, WQ, ocb, j0, nv);
#define DC_FLAT(V)                                                                          \
    do {                                                                                    \
        dc_accumulate(acc, V, xph, C, HQ * WQ, xlast, wp, KH, KW, ocb, 0, kyoff, koff, j0); \
        dc_store_flat(acc, V, y, ycs, z, bias, M, OH, OW, WQ, ocb, j0, lo, hi, clamp);      \
    } while (0)
#if DC_VMAX > 2
    if (rest > 2 * DC_VL) {
        DC_FLAT(DC_VMAX);
        return;
    }
#endif
#if DC_VMAX > 1
    if (rest > DC_VL) {
        DC_FLAT(2);
        return;
    }
#endif
    DC_FLAT(1);
#undef DC_FLAT
}

#endif
