/* Direct 2-D convolution in NCHW, vectorized along the output channels.
 *
 * Included by _conv.pxi (compiled for the x86-64 baseline, AVX2 + FMA and
 * AVX-512; the vectors are GCC/clang vector extensions of CV_VL = 8 floats
 * in every build). The direct kernel of _direct_conv.h puts output
 * positions in the vector lanes and broadcasts each weight; this one puts
 * CV_OCB = 16 output channels in two vectors and broadcasts each input
 * value, as onnxruntime's NCHWc kernels do, but reads and writes plain NCHW:
 * a tile of up to CV_NP = 6 consecutive output positions (of the flattened
 * output plane, so a tile may span rows) keeps 2 x 6 vectors of sums in
 * registers (12 of AVX2's 16), and every (input channel, filter tap) step
 * is 2 weight loads, 6 broadcasts and 12 FMAs. The lanes never go to waste
 * on a row's end (55 columns are 6.9 vectors of positions, but the
 * positions are split in tiles of 5 or 6 wherever the row ends). The sums
 * are turned around (channel-major to position-major) when a tile is
 * written, with the bias, a residual and a clamp.
 *
 * The input is the padded, column-phase-split copy of dc_pack_phase (row
 * mode: SH = 1), so output (oy, ox) reads tap (ky, kx) at plane offset
 * oy * sh * WQ + ox + kyoff[ky] + koff[kx]. The weights are packed as
 * [ceil(M / 16)][C][KH * KW][16] (zeros past M).
 */
#ifndef ORTCORE_CVEC_CONV_H
#define ORTCORE_CVEC_CONV_H

#include <stddef.h>
#include <string.h>

#define CV_VL 8
#define CV_NV 2
#define CV_OCB (CV_VL * CV_NV)
#define CV_NP 6

/* Whether this build runs the kernel as designed: AVX's 16 registers of 8
 * floats hold the 12 sums, and the sums are transposed in registers. In the
 * x86-64 baseline build each vector is two SSE registers (the sums spill);
 * the kernel is right there but not fast, and the Conv kernel keeps its
 * other paths. */
#if defined(__AVX__)
#define CV_NATIVE 1
#else
#define CV_NATIVE 0
#endif

typedef float cv_v __attribute__((vector_size(CV_VL * 4)));
typedef float cv_vu __attribute__((vector_size(CV_VL * 4), aligned(4), may_alias));

/* Sums of one tile: NP output positions whose window origins are at q[p]
 * in every input plane (C planes CS floats apart from xph), for the 16
 * output channels whose weights w hold [C][T][16]; tap t reads at toff[t]
 * from the origin. */
static inline __attribute__((always_inline)) void cv_tile(
    cv_v acc[CV_NV][CV_NP], const int NP, const float *xph, ptrdiff_t C, ptrdiff_t CS,
    const float *w, ptrdiff_t T, const ptrdiff_t *toff, const ptrdiff_t *q) {
    const float *xp[CV_NP]; /* each position's window origin in the first plane */
    for (int p = 0; p < NP; p++) {
        xp[p] = xph + q[p];
        acc[0][p] = acc[1][p] = (cv_v){0};
    }
    for (ptrdiff_t c = 0; c < C; c++) {
        for (ptrdiff_t t = 0; t < T; t++, w += CV_OCB) {
            const ptrdiff_t o = c * CS + toff[t];
            const cv_v w0 = *(const cv_vu *)w, w1 = *(const cv_vu *)(w + CV_VL);
            for (int p = 0; p < NP; p++) {
                const cv_v b = xp[p][o] - (cv_v){0}; /* the input value in every lane */
                acc[0][p] += w0 * b;
                acc[1][p] += w1 * b;
            }
        }
    }
}

#if defined(__AVX__)
#include <immintrin.h>

/* Transpose 8 x 8: out[i] lane k = in[k] lane i. */
static inline __attribute__((always_inline)) void cv_transpose8(const __m256 in[8],
                                                                __m256 out[8]) {
    __m256 t[8], u[8];
    for (int k = 0; k < 8; k += 2) {
        t[k] = _mm256_unpacklo_ps(in[k], in[k + 1]);
        t[k + 1] = _mm256_unpackhi_ps(in[k], in[k + 1]);
    }
    for (int k = 0; k < 8; k += 4) {
        u[k] = _mm256_shuffle_ps(t[k], t[k + 2], 0x44);
        u[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], 0xEE);
        u[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0x44);
        u[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0xEE);
    }
    for (int k = 0; k < 4; k++) {
        out[k] = _mm256_permute2f128_ps(u[k], u[k + 4], 0x20);
        out[k + 4] = _mm256_permute2f128_ps(u[k], u[k + 4], 0x31);
    }
}
#endif

/* Write a tile's sums: output channels m0 .. m0 + 15 (those below M) at
 * flat positions j0 .. j0 + NP - 1 of planes of P floats, with the bias
 * (NULL: none), the residual z (NULL: none) and the clamp, as dc_write
 * does: (sum + bias) + z, then t < lo ? lo : t, t > hi ? hi : t. With AVX
 * the sums are transposed in registers, and where the work item's
 * positions go on for 8 past j0 (jend) each channel's row goes out in one
 * store of 8 (the lanes past NP are written again by the next tile). */
static inline __attribute__((always_inline)) void cv_store(
    cv_v acc[CV_NV][CV_NP], const int NP, float *y, const float *z, const float *bias,
    ptrdiff_t M, ptrdiff_t P, ptrdiff_t m0, ptrdiff_t j0, ptrdiff_t jend, float lo, float hi,
    int clamp) {
    float bv[CV_OCB];
    ptrdiff_t n = M - m0;
    if (n > CV_OCB) n = CV_OCB;
    for (int r = 0; r < CV_OCB; r++) bv[r] = bias && r < n ? bias[m0 + r] : 0.0f;
#if defined(__AVX__)
    const __m256 lov = _mm256_set1_ps(lo), hiv = _mm256_set1_ps(hi);
    const int whole = j0 + 8 <= jend;
    for (int v = 0; v < CV_NV && v * CV_VL < n; v++) {
        __m256 in[8], out[8];
        const __m256 b = _mm256_loadu_ps(bv + CV_VL * v);
        for (int p = 0; p < 8; p++)
            in[p] = p < NP ? _mm256_add_ps((__m256)acc[v][p], b) : _mm256_setzero_ps();
        cv_transpose8(in, out);
        for (int i = 0; i < CV_VL && v * CV_VL + i < n; i++) {
            const ptrdiff_t at = (m0 + v * CV_VL + i) * P + j0;
            __m256 t = out[i];
            if (whole) {
                if (z) t = _mm256_add_ps(t, _mm256_loadu_ps(z + at));
                if (clamp) t = _mm256_min_ps(hiv, _mm256_max_ps(lov, t));
                _mm256_storeu_ps(y + at, t);
            } else {
                float row[8];
                _mm256_storeu_ps(row, t);
                for (int p = 0; p < NP; p++) {
                    float e = row[p];
                    if (z) e += z[at + p];
                    if (clamp) {
                        e = e < lo ? lo : e;
                        e = e > hi ? hi : e;
                    }
                    y[at + p] = e;
                }
            }
        }
    }
#else
    float buf[CV_NV][CV_NP][CV_VL];
    (void)jend;
    for (int v = 0; v < CV_NV; v++) {
        const cv_v b = *(const cv_vu *)(bv + CV_VL * v);
        for (int p = 0; p < NP; p++) *(cv_vu *)buf[v][p] = acc[v][p] + b;
    }
    for (ptrdiff_t r = 0; r < n; r++) {
        float *yr = y + (m0 + r) * P + j0;
        const float *zr = z ? z + (m0 + r) * P + j0 : NULL;
        const int v = (int)(r / CV_VL), i = (int)(r % CV_VL);
        for (int p = 0; p < NP; p++) {
            float t = buf[v][p][i];
            if (zr) t += zr[p];
            if (clamp) {
                t = t < lo ? lo : t;
                t = t > hi ? hi : t;
            }
            yr[p] = t;
        }
    }
#endif
}

/* The tiles of one work item (see cv_run), T a constant where the caller
 * names one: the 3x3 window's taps unrolled. */
static inline __attribute__((always_inline)) void cv_tiles(
    const float *xph, ptrdiff_t C, ptrdiff_t CS, ptrdiff_t WQ, const float *w, const ptrdiff_t T,
    const ptrdiff_t *toff, ptrdiff_t sh, float *y, const float *z, const float *bias,
    ptrdiff_t M, ptrdiff_t OH, ptrdiff_t OW, float lo, float hi, int clamp, ptrdiff_t m0,
    ptrdiff_t j0, ptrdiff_t j1) {
    const ptrdiff_t P = OH * OW, n = j1 - j0;
    const ptrdiff_t tiles = (n + CV_NP - 1) / CV_NP;
    const ptrdiff_t base = n / tiles, extra = n % tiles; /* `extra` tiles of base + 1 */
    ptrdiff_t oy = j0 / OW, ox = j0 - oy * OW;
    cv_v acc[CV_NV][CV_NP];
    ptrdiff_t q[CV_NP];
    for (ptrdiff_t k = 0, j = j0; k < tiles; k++) {
        const int np = (int)(base + (k < extra));
        for (int p = 0; p < np; p++) {
            q[p] = oy * sh * WQ + ox;
            if (++ox == OW) {
                ox = 0;
                oy++;
            }
        }
        switch (np) {
#define CV_CASE(N)                                                                 \
    case N:                                                                        \
        cv_tile(acc, N, xph, C, CS, w, T, toff, q);                                \
        cv_store(acc, N, y, z, bias, M, P, m0, j, j1, lo, hi, clamp);              \
        break;
            CV_CASE(6)
            CV_CASE(5)
            CV_CASE(4)
            CV_CASE(3)
            CV_CASE(2)
            CV_CASE(1)
#undef CV_CASE
        }
        j += np;
    }
}

/* One work item: the 16 output channels of block ocb at flat output
 * positions j0 .. j1 - 1 (OH x OW planes), in tiles of 5 or 6 positions
 * (fewer only when the item has fewer). xph: the padded phase planes (C
 * planes of HP x WQ, CS = HP * WQ apart); wp: the packed weights; toff[t]:
 * tap t's offset (kyoff[ky] + koff[kx]); sh: the row stride. */
static void cv_run(const float *xph, ptrdiff_t C, ptrdiff_t CS, ptrdiff_t WQ, const float *wp,
                   ptrdiff_t T, const ptrdiff_t *toff, ptrdiff_t sh, float *y, const float *z,
                   const float *bias, ptrdiff_t M, ptrdiff_t OH, ptrdiff_t OW, float lo,
                   float hi, int clamp, ptrdiff_t ocb, ptrdiff_t j0, ptrdiff_t j1) {
    const float *w = wp + ocb * C * T * CV_OCB;
    const ptrdiff_t m0 = ocb * CV_OCB;
    if (j1 <= j0) return;
    if (T == 9)
        cv_tiles(xph, C, CS, WQ, w, 9, toff, sh, y, z, bias, M, OH, OW, lo, hi, clamp, m0, j0, j1);
    else if (T == 1)
        cv_tiles(xph, C, CS, WQ, w, 1, toff, sh, y, z, bias, M, OH, OW, lo, hi, clamp, m0, j0, j1);
    else
        cv_tiles(xph, C, CS, WQ, w, T, toff, sh, y, z, bias, M, OH, OW, lo, hi, clamp, m0, j0, j1);
}

#endif
