/* Direct 2-D convolution in NCHW, vectorized along the output channels.
 *
 * Included by _conv.pxi (compiled for the x86-64 baseline, AVX2 + FMA and
 * AVX-512; the vectors are GCC/clang vector extensions of CV_VL floats: 16
 * with AVX-512, 8 else). The direct kernel of _direct_conv.h puts output
 * positions in the vector lanes and broadcasts each weight; this one puts
 * CV_OCB = 2 * CV_VL output channels in two vectors and broadcasts each
 * input value, as onnxruntime's NCHWc kernels do, but reads and writes
 * plain NCHW: a tile of up to CV_NP consecutive output positions (of the
 * flattened output plane, so a tile may span rows; 6 with AVX2, 12 with
 * AVX-512) keeps 2 x CV_NP vectors of sums in registers (12 of AVX2's 16,
 * 24 of AVX-512's 32), and every (input channel, filter tap) step is 2
 * weight loads, CV_NP broadcasts and 2 * CV_NP FMAs. The lanes never go to
 * waste on a row's end (55 columns are 6.9 vectors of positions, but the
 * positions are split in tiles of 5 or 6 wherever the row ends), nor on
 * small planes (7 x 7 is 49 positions: 3.1 vectors of 16). The sums
 * are turned around (position-major to channel-major) into a staging
 * buffer, a work item's run of positions at a time, and go to the output
 * from there with the bias, a residual and a clamp.
 *
 * The input is the padded, column-phase-split copy of dc_pack_rows (row
 * mode: SH = 1) of the padded rows from r0 that a thread's items read, so
 * output (oy, ox) reads tap (ky, kx) at plane offset (oy * sh - r0) * WQ +
 * ox + kyoff[ky] + koff[kx]. The weights are packed as
 * [ceil(M / CV_OCB)][C][KH * KW][CV_OCB] (zeros past M).
 */
#ifndef ORTCORE_CVEC_CONV_H
#define ORTCORE_CVEC_CONV_H

#include <stddef.h>
#include <string.h>

/* With AVX-512 the vectors are 16 floats and a tile is 12 positions: 2 x
 * 12 sums in 24 of its 32 registers, each (channel, tap) step 2 weight
 * loads, 12 broadcasts and 24 FMAs, over 32 output channels. */
#if defined(__AVX512F__)
#define CV_VL 16
#define CV_NP 12
#else
#define CV_VL 8
#define CV_NP 6
#endif
#define CV_NV 2
#define CV_OCB (CV_VL * CV_NV)

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

/* Weights prefetched CV_PF (channel, tap) steps ahead (2 KB with AVX-512,
 * 1 KB with AVX2): a block's weights come from L3 or memory at its first
 * tile inside a model. On the Xeon (Emerald Rapids, 2 vCPUs), distance
 * set at run time, runs alternating: Inception v1 0.96-0.97x the time,
 * DenseNet 0.98x, SqueezeNet 0.99x (8 and 32 steps about the same). */
#define CV_PF 16

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
            __builtin_prefetch(w + CV_PF * CV_OCB);
#if CV_OCB > 16
            __builtin_prefetch(w + CV_PF * CV_OCB + 16); /* the step's second line */
#endif
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

/* Most positions of one work item (runs of CV_RUN_TILES tiles): 192 either
 * way, so that the staging buffer of AVX-512's 32 channels stays in L1. */
#if CV_NP > 6
#define CV_RUN_TILES 16
#else
#define CV_RUN_TILES 32
#endif
#define CV_RUN_MAX (CV_RUN_TILES * CV_NP)
/* A row of the work item's staging buffer: 8 floats of slack for whole
 * vector stores past its last tile. */
#define CV_STAGE_ROW (CV_RUN_MAX + CV_VL)

/* Put a tile's sums with the bias (bv: the block's 16 values) into the
 * staging buffer st (channel r's positions at st + r * CV_STAGE_ROW, the
 * tile's from column c0): channel-major there, as the output wants them.
 * With AVX the 8 x 8 transposes are in registers and each channel's row
 * goes in one store of 8 (its lanes past NP are written again by the next
 * tile, or ignored). */
static inline __attribute__((always_inline)) void cv_stage(cv_v acc[CV_NV][CV_NP], const int NP,
                                                          const float *bv, float *st,
                                                          ptrdiff_t c0) {
#if defined(__AVX512F__)
    /* each 16-lane vector as two halves of 8 channels, the tile's positions
     * in groups of 8: one 8 x 8 transpose per half and group */
    for (int v = 0; v < CV_NV; v++) {
        const __m512 b = _mm512_loadu_ps(bv + CV_VL * v);
        for (int g = 0; g < NP; g += 8) {
            __m256 lo[8], hi[8], out[8];
            for (int p = 0; p < 8; p++) {
                if (g + p < NP) {
                    const __m512 t = _mm512_add_ps((__m512)acc[v][g + p], b);
                    lo[p] = _mm512_castps512_ps256(t);
                    hi[p] = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(t), 1));
                } else {
                    lo[p] = hi[p] = _mm256_setzero_ps();
                }
            }
            cv_transpose8(lo, out);
            for (int i = 0; i < 8; i++)
                _mm256_storeu_ps(st + (v * CV_VL + i) * CV_STAGE_ROW + c0 + g, out[i]);
            cv_transpose8(hi, out);
            for (int i = 0; i < 8; i++)
                _mm256_storeu_ps(st + (v * CV_VL + 8 + i) * CV_STAGE_ROW + c0 + g, out[i]);
        }
    }
#elif defined(__AVX__)
    for (int v = 0; v < CV_NV; v++) {
        __m256 in[8], out[8];
        const __m256 b = _mm256_loadu_ps(bv + CV_VL * v);
        for (int p = 0; p < 8; p++)
            in[p] = p < NP ? _mm256_add_ps((__m256)acc[v][p], b) : _mm256_setzero_ps();
        cv_transpose8(in, out);
        for (int i = 0; i < CV_VL; i++)
            _mm256_storeu_ps(st + (v * CV_VL + i) * CV_STAGE_ROW + c0, out[i]);
    }
#else
    for (int v = 0; v < CV_NV; v++)
        for (int p = 0; p < NP; p++)
            for (int i = 0; i < CV_VL; i++)
                st[(v * CV_VL + i) * CV_STAGE_ROW + c0 + p] = acc[v][p][i] + bv[v * CV_VL + i];
#endif
}

/* Write n staged positions of the block's channels below M (from m0;
 * planes of P floats) from flat position j0, with the residual z (NULL:
 * none) and the clamp, as dc_write does: (sum + bias) + z, then t < lo ?
 * lo : t, t > hi ? hi : t. One contiguous run per channel: the output
 * takes long runs of stores rather than 16 channels' rows of 8 at a time
 * (which took the time of the sums on 3 input channels). */
static inline void cv_flush(const float *st, ptrdiff_t n, float *y, const float *z,
                            ptrdiff_t M, ptrdiff_t P, ptrdiff_t m0, ptrdiff_t j0, float lo,
                            float hi, int clamp) {
    ptrdiff_t rows = M - m0;
    if (rows > CV_OCB) rows = CV_OCB;
    for (ptrdiff_t r = 0; r < rows; r++) {
        const float *sr = st + r * CV_STAGE_ROW;
        float *yr = y + (m0 + r) * P + j0;
        if (z) {
            const float *zr = z + (m0 + r) * P + j0;
            if (clamp) {
                for (ptrdiff_t i = 0; i < n; i++) {
                    float t = sr[i] + zr[i];
                    t = t < lo ? lo : t;
                    yr[i] = t > hi ? hi : t;
                }
            } else {
                for (ptrdiff_t i = 0; i < n; i++) yr[i] = sr[i] + zr[i];
            }
        } else if (clamp) {
            for (ptrdiff_t i = 0; i < n; i++) {
                float t = sr[i];
                t = t < lo ? lo : t;
                yr[i] = t > hi ? hi : t;
            }
        } else {
            memcpy(yr, sr, sizeof(float) * (size_t)n);
        }
    }
}

/* The tiles of one work item (see cv_run), T a constant where the caller
 * names one: the 3x3 window's taps unrolled. */
static inline __attribute__((always_inline)) void cv_tiles(
    const float *xph, ptrdiff_t C, ptrdiff_t CS, ptrdiff_t WQ, const float *w, const ptrdiff_t T,
    const ptrdiff_t *toff, ptrdiff_t sh, ptrdiff_t r0, float *y, const float *z,
    const float *bias, ptrdiff_t M, ptrdiff_t OH, ptrdiff_t OW, float lo, float hi, int clamp,
    ptrdiff_t m0, ptrdiff_t j0, ptrdiff_t j1) {
    const ptrdiff_t n = j1 - j0;
    const ptrdiff_t tiles = (n + CV_NP - 1) / CV_NP;
    const ptrdiff_t base = n / tiles, extra = n % tiles; /* `extra` tiles of base + 1 */
    ptrdiff_t oy = j0 / OW, ox = j0 - oy * OW;
    float st[CV_OCB * CV_STAGE_ROW] __attribute__((aligned(32)));
    float bv[CV_OCB];
    for (int r = 0; r < CV_OCB; r++) bv[r] = bias && m0 + r < M ? bias[m0 + r] : 0.0f;
    cv_v acc[CV_NV][CV_NP];
    ptrdiff_t q[CV_NP];
    for (ptrdiff_t k = 0, c0 = 0; k < tiles; k++) {
        const int np = (int)(base + (k < extra));
        for (int p = 0; p < np; p++) {
            q[p] = (oy * sh - r0) * WQ + ox;
            if (++ox == OW) {
                ox = 0;
                oy++;
            }
        }
        switch (np) {
#define CV_CASE(N)                                                                 \
    case N:                                                                        \
        cv_tile(acc, N, xph, C, CS, w, T, toff, q);                                \
        cv_stage(acc, N, bv, st, c0);                                              \
        break;
#if CV_NP > 6
            CV_CASE(12)
            CV_CASE(11)
            CV_CASE(10)
            CV_CASE(9)
            CV_CASE(8)
            CV_CASE(7)
#endif
            CV_CASE(6)
            CV_CASE(5)
            CV_CASE(4)
            CV_CASE(3)
            CV_CASE(2)
            CV_CASE(1)
#undef CV_CASE
        }
        c0 += np;
    }
    cv_flush(st, n, y, z, M, OH * OW, m0, j0, lo, hi, clamp);
}

/* One work item: the 16 output channels of block ocb at flat output
 * positions j0 .. j1 - 1 (OH x OW planes), in tiles of 5 or 6 positions
 * (fewer only when the item has fewer). xph: the padded phase planes (C
 * planes of WQ columns, CS apart) from padded row r0; wp: the packed
 * weights; toff[t]: tap t's offset (kyoff[ky] + koff[kx]); sh: the row
 * stride. */
static void cv_run(const float *xph, ptrdiff_t C, ptrdiff_t CS, ptrdiff_t WQ, const float *wp,
                   ptrdiff_t T, const ptrdiff_t *toff, ptrdiff_t sh, ptrdiff_t r0, float *y,
                   const float *z, const float *bias, ptrdiff_t M, ptrdiff_t OH, ptrdiff_t OW,
                   float lo, float hi, int clamp, ptrdiff_t ocb, ptrdiff_t j0, ptrdiff_t j1) {
    const float *w = wp + ocb * C * T * CV_OCB;
    const ptrdiff_t m0 = ocb * CV_OCB;
    /* at most CV_RUN_MAX positions a staging buffer (the caller's items
     * have no more; longer ones go in parts) */
    for (ptrdiff_t a = j0; a < j1; a += CV_RUN_MAX) {
        const ptrdiff_t b = j1 - a < CV_RUN_MAX ? j1 : a + CV_RUN_MAX;
        if (T == 9)
            cv_tiles(xph, C, CS, WQ, w, 9, toff, sh, r0, y, z, bias, M, OH, OW, lo, hi, clamp,
                     m0, a, b);
        else if (T == 1)
            cv_tiles(xph, C, CS, WQ, w, 1, toff, sh, r0, y, z, bias, M, OH, OW, lo, hi, clamp,
                     m0, a, b);
        else
            cv_tiles(xph, C, CS, WQ, w, T, toff, sh, r0, y, z, bias, M, OH, OW, lo, hi, clamp,
                     m0, a, b);
    }
}

#endif
