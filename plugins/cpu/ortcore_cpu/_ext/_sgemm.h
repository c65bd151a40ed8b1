/* Single-precision GEMM on packed operands: C (M x N) = A (M x K) B (K x N),
 * plus a bias row.
 *
 * Included by _gemm.pxi, so it is compiled three times (setup.py): for the
 * x86-64 baseline, with AVX2 and FMA, and with AVX-512. The vectors are
 * GCC/clang vector extensions of GM_VL floats; the compiler maps them onto
 * the widest registers the build's flags allow.
 *
 * B is packed once per weight (gm_pack_b_panel): panels of GM_NR columns, each a
 * K x GM_NR block stored row after row (zero columns past N). A is packed
 * per call (gm_pack_a_panel): panels of GM_MR rows, each stored column after
 * column (K x GM_MR, zero rows past M). gm_kernel keeps a GM_MR x GM_NR tile
 * of C in GM_MR * 2 vector registers over a slice of K: per step of k it
 * loads two vectors of B and broadcasts GM_MR values of A.
 *
 * gm_run walks the tiles of one thread's share: K in slices of GM_KC, rows
 * in blocks of GM_MC, B panels, A panels: the slice of a B panel (GM_KC x
 * GM_NR floats) stays in L1 while the A panels of a block pass over it, the
 * block's slice of packed A (GM_MC x GM_KC) stays in L2. The first slice starts
 * from the bias (or zero), the others add to what C holds.
 */
#ifndef ORTCORE_SGEMM_H
#define ORTCORE_SGEMM_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#if defined(__AVX512F__)
#define GM_VL 16
#define GM_MR 12 /* 24 accumulators + 2 B vectors + 1 broadcast of 32 registers */
#elif defined(__AVX__)
#define GM_VL 8
#define GM_MR 6 /* 12 + 2 + 1 of 16 */
#else
#define GM_VL 4
#define GM_MR 6 /* SSE2: 12 + 2 + 1 of 16 xmm, no FMA */
#endif
#define GM_NR (2 * GM_VL)
#define GM_KC 384 /* 256 to 768 tried on the transformer shapes: 384 a little ahead */
#define GM_MC 240 /* a multiple of every GM_MR */

/* gm_kernel prefetches B GM_PF steps of k ahead (4 KB of a packed panel
 * with AVX-512, 2 KB with AVX2): a transformer's weights (28 MB a BERT
 * layer) come from memory at every run, and the first row panel of A that
 * reads a panel's slice waits for it. Measured on an Intel Xeon (Emerald
 * Rapids, 2 vCPUs), the distance set at run time, runs alternating: BERT-base
 * 0.88-0.90x the time, GPT-2 0.87-0.90x (the AVX2 build's BERT 0.92x); 64
 * and 128 steps about the same; the CNNs unchanged (VGG-19, ResNet-50,
 * SqueezeNet on the AVX2 build within 1%). */
#define GM_PF 32

typedef float gm_v __attribute__((vector_size(GM_VL * 4)));
typedef float gm_vu __attribute__((vector_size(GM_VL * 4), aligned(4), may_alias));

/* Columns [n0, n0 + GM_NR) of B (K x N; element (k, n) at b[k * sk + n * sn])
 * into out (K x GM_NR), zero past N. sn = 1 for a row-major B, sk = 1 for a
 * transposed one. */
static inline void gm_pack_b_panel(const float *b, ptrdiff_t K, ptrdiff_t N, ptrdiff_t sk,
                                   ptrdiff_t sn, ptrdiff_t n0, float *out) {
    ptrdiff_t nr = N - n0 < GM_NR ? N - n0 : GM_NR;
    for (ptrdiff_t k = 0; k < K; k++) {
        float *o = out + k * GM_NR;
        const float *src = b + k * sk + n0 * sn;
        if (sn == 1) {
            memcpy(o, src, (size_t)nr * sizeof(float));
        } else {
            for (ptrdiff_t j = 0; j < nr; j++) o[j] = src[j * sn];
        }
        for (ptrdiff_t j = nr; j < GM_NR; j++) o[j] = 0.0f;
    }
}

/* Rows [m0, m0 + GM_MR) of A (M x K; element (m, k) at a[m * sm + k * sk])
 * into out (K x GM_MR), zero past M. */
static inline void gm_pack_a_panel(const float *a, ptrdiff_t M, ptrdiff_t K, ptrdiff_t sm,
                                   ptrdiff_t sk, ptrdiff_t m0, float *out) {
    ptrdiff_t mr = M - m0 < GM_MR ? M - m0 : GM_MR;
    if (mr < GM_MR) memset(out, 0, (size_t)(K * GM_MR) * sizeof(float));
    if (sm == 1) { /* A transposed (a convolution's columns): runs of mr along m */
        for (ptrdiff_t k = 0; k < K; k++) {
            const float *src = a + m0 + k * sk;
            for (ptrdiff_t i = 0; i < mr; i++) out[k * GM_MR + i] = src[i];
        }
        return;
    }
    for (ptrdiff_t i = 0; i < mr; i++) {
        const float *src = a + (m0 + i) * sm;
        float *o = out + i;
        if (sk == 1) {
            for (ptrdiff_t k = 0; k < K; k++) o[k * GM_MR] = src[k];
        } else {
            for (ptrdiff_t k = 0; k < K; k++) o[k * GM_MR] = src[k * sk];
        }
    }
}

/* The first nr sums t of a tile's row into r: added to it (add), else
 * from bias[j] (bias non-NULL) or from 0. A cut tile's (its last columns
 * past N) store. */
static inline void gm_put_cut(float *r, const float *t, ptrdiff_t nr, int add,
                              const float *bias) {
    for (ptrdiff_t j = 0; j < nr; j++) {
        float start = add ? r[j] : (bias != NULL ? bias[j] : 0.0f);
        r[j] = start + t[j];
    }
}

/* gm_kernel for a tile of nr <= GM_VL columns (a last, partial panel of
 * B): one vector of sums per row instead of two, half the multiplies. The
 * 16 products of a Winograd convolution on 13x13 (49 tiles: a last panel of
 * one column), 192-256 x 48-64 x 49, took 0.89-0.96x the time so (Zen 3,
 * 1 or 2 threads); SqueezeNet and ShuffleNet 0.99x. */
static __attribute__((noinline)) void gm_kernel_half(const float *restrict ap,
                                                     const float *restrict bp, ptrdiff_t ldb,
                                                     ptrdiff_t kc, float *restrict c,
                                                     ptrdiff_t ldc, ptrdiff_t mr, ptrdiff_t nr,
                                                     int add, const float *restrict bias) {
    gm_v c0[GM_MR];
#pragma GCC unroll 16
    for (int i = 0; i < GM_MR; i++) c0[i] = (gm_v){0};
    for (ptrdiff_t k = 0; k < kc; k++) {
        gm_v b0 = *(const gm_vu *)(bp + k * ldb);
        const float *a = ap + k * GM_MR;
#pragma GCC unroll 16
        for (int i = 0; i < GM_MR; i++) c0[i] += (a[i] - (gm_v){0}) * b0;
    }
    for (ptrdiff_t i = 0; i < mr; i++) {
        float t[GM_VL];
        *(gm_vu *)t = c0[i];
        gm_put_cut(c + i * ldc, t, nr, add, bias);
    }
}

/* One GM_MR x GM_NR tile: c[i, j] (+)= sum over k < kc of ap[k, i]
 * bp[k * ldb + j], starting from c (add), from bias[j] (bias non-NULL) or
 * from 0. Writes mr rows and nr columns of c (row stride ldc). ldb is GM_NR
 * for a packed panel of B, B's row stride for a panel read in place. */
static inline void gm_kernel(const float *restrict ap, const float *restrict bp, ptrdiff_t ldb,
                             ptrdiff_t kc, float *restrict c, ptrdiff_t ldc, ptrdiff_t mr,
                             ptrdiff_t nr, int add, const float *restrict bias) {
    if (nr <= GM_VL) {
        gm_kernel_half(ap, bp, ldb, kc, c, ldc, mr, nr, add, bias);
        return;
    }
    gm_v c0[GM_MR], c1[GM_MR];
#pragma GCC unroll 16
    for (int i = 0; i < GM_MR; i++) {
        c0[i] = (gm_v){0};
        c1[i] = (gm_v){0};
    }
    for (ptrdiff_t k = 0; k < kc; k++) {
        gm_v b0 = *(const gm_vu *)(bp + k * ldb);
        gm_v b1 = *(const gm_vu *)(bp + k * ldb + GM_VL);
        const float *a = ap + k * GM_MR;
        __builtin_prefetch(bp + (k + GM_PF) * ldb);
#if GM_NR > 16
        __builtin_prefetch(bp + (k + GM_PF) * ldb + GM_VL); /* the step's second line */
#endif
#pragma GCC unroll 16
        for (int i = 0; i < GM_MR; i++) {
            gm_v av = a[i] - (gm_v){0}; /* a[i] in every lane */
            c0[i] += av * b0;
            c1[i] += av * b1;
        }
    }
    gm_v s0 = (gm_v){0}, s1 = (gm_v){0};
    if (!add && bias != NULL && nr == GM_NR) {
        s0 = *(const gm_vu *)bias;
        s1 = *(const gm_vu *)(bias + GM_VL);
    }
    if (nr == GM_NR) {
        for (ptrdiff_t i = 0; i < mr; i++) {
            gm_vu *r0 = (gm_vu *)(c + i * ldc), *r1 = (gm_vu *)(c + i * ldc + GM_VL);
            if (add) {
                *r0 += c0[i];
                *r1 += c1[i];
            } else {
                *r0 = c0[i] + s0;
                *r1 = c1[i] + s1;
            }
        }
        return;
    }
    for (ptrdiff_t i = 0; i < mr; i++) {
        float t[GM_NR];
        *(gm_vu *)t = c0[i];
        *(gm_vu *)(t + GM_VL) = c1[i];
        gm_put_cut(c + i * ldc, t, nr, add, bias);
    }
}

/* A convolution's epilogue (1x1 Convs on this GEMM, see gemm.pyx's
 * pointwise), applied to each tile of C once its sums are whole: a bias
 * per row, a residual z (C's layout, row stride ldz), then a clamp to
 * [lo, hi] (a NaN stays NaN). */
typedef struct {
    const float *rbias; /* NULL: none */
    const float *z;     /* NULL: none */
    ptrdiff_t ldz;
    float lo, hi;
    int clamp;
} gm_epi;

typedef int gm_vi __attribute__((vector_size(GM_VL * 4)));

/* t < lo ? lo : t, then t > hi ? hi : t, lane by lane (a NaN stays NaN), in
 * bit operations: C's vector extensions compare but have no ?: on vectors. */
static inline gm_v gm_clamp(gm_v t, gm_v lo, gm_v hi) {
    gm_vi below = t < lo;
    t = (gm_v)((below & (gm_vi)lo) | (~below & (gm_vi)t));
    gm_vi above = t > hi;
    return (gm_v)((above & (gm_vi)hi) | (~above & (gm_vi)t));
}

/* ep on the mr x nr block at c (row stride ldc), row m0 and column n0 of
 * ep's: a panel's rows of a row block, in L1 after gm_kernel wrote them.
 * Not in gm_kernel, whose sums keep every register (the epilogue's values
 * there pushed the sums onto the stack and halved the kernel's speed), nor
 * inlined into the tile loop. */
static __attribute__((noinline)) void gm_epi_tile(float *c, ptrdiff_t ldc, ptrdiff_t mr,
                                                  ptrdiff_t nr, const gm_epi *ep, ptrdiff_t m0,
                                                  ptrdiff_t n0) {
    const gm_v lo = ep->lo - (gm_v){0}, hi = ep->hi - (gm_v){0};
    for (ptrdiff_t i = 0; i < mr; i++) {
        float *r = c + i * ldc;
        const float rb = ep->rbias != NULL ? ep->rbias[m0 + i] : 0.0f;
        const float *zr = ep->z != NULL ? ep->z + (m0 + i) * ep->ldz + n0 : NULL;
        ptrdiff_t j = 0;
        for (; j + GM_VL <= nr; j += GM_VL) {
            gm_v t = *(const gm_vu *)(r + j) + rb;
            if (zr != NULL) t += *(const gm_vu *)(zr + j);
            if (ep->clamp) t = gm_clamp(t, lo, hi);
            *(gm_vu *)(r + j) = t;
        }
        for (; j < nr; j++) {
            float v = r[j] + rb;
            if (zr != NULL) v += zr[j];
            if (ep->clamp) {
                v = v < ep->lo ? ep->lo : v;
                v = v > ep->hi ? ep->hi : v;
            }
            r[j] = v;
        }
    }
}

/* C rows [m_lo, m_hi) (m_lo a multiple of GM_MR) and B panels [p_lo, p_hi)
 * of C = A B (+ bias): ap is all of A packed (panels of K x GM_MR); panel p
 * of B starts at bp + p * pstride, its rows ldb floats apart (packed:
 * pstride K * GM_NR, ldb GM_NR; read in place from a row-major B: pstride
 * GM_NR, ldb B's row stride, every panel whole). Rows go in blocks of
 * GM_MC, so that the slice of packed A a block reads (GM_MC x GM_KC floats)
 * stays in L2. ep: a convolution's epilogue (rows and columns of C), or
 * NULL. */
static inline void gm_run_b(const float *ap, const float *bp, ptrdiff_t ldb, ptrdiff_t pstride,
                            float *c, ptrdiff_t N, ptrdiff_t K, ptrdiff_t ldc, const float *bias,
                            ptrdiff_t m_lo, ptrdiff_t m_hi, ptrdiff_t p_lo, ptrdiff_t p_hi,
                            const gm_epi *ep) {
    for (ptrdiff_t k0 = 0; k0 < K; k0 += GM_KC) {
        ptrdiff_t kc = K - k0 < GM_KC ? K - k0 : GM_KC;
        for (ptrdiff_t mb = m_lo; mb < m_hi; mb += GM_MC) {
            ptrdiff_t mb_hi = m_hi - mb < GM_MC ? m_hi : mb + GM_MC;
            for (ptrdiff_t p = p_lo; p < p_hi; p++) {
                ptrdiff_t n0 = p * GM_NR;
                ptrdiff_t nr = N - n0 < GM_NR ? N - n0 : GM_NR;
                const float *bs = bp + p * pstride + k0 * ldb;
                const float *bias_p = bias != NULL ? bias + n0 : NULL;
                for (ptrdiff_t m0 = mb; m0 < mb_hi; m0 += GM_MR) {
                    ptrdiff_t mr = mb_hi - m0 < GM_MR ? mb_hi - m0 : GM_MR;
                    gm_kernel(ap + m0 * K + k0 * GM_MR, bs, ldb, kc, c + m0 * ldc + n0, ldc, mr,
                              nr, k0 > 0, bias_p);
                }
                /* the block's rows of this panel are whole (still in L1) */
                if (ep != NULL && k0 + kc >= K)
                    gm_epi_tile(c + mb * ldc + n0, ldc, mb_hi - mb, nr, ep, mb, n0);
            }
        }
    }
}

/* One share of a 1x1 convolution (gemm.pyx's pointwise): rows [m_lo,
 * m_hi) and panels [p_lo, p_hi) of y (M x N, row stride ldy) = A x with
 * the epilogue ep, A packed (ap), x (K x N, row stride ldx) read in place
 * but for a partial last panel, packed here. Not inlined into the OpenMP
 * region, where the compiler kept the tile loop's bounds on the stack.
 * Returns 0, or -1 without memory for the last panel. */
static __attribute__((noinline)) int gm_pointwise_share(const float *ap, const float *x,
                                                         ptrdiff_t ldx, float *y, ptrdiff_t ldy,
                                                         ptrdiff_t N, ptrdiff_t K, const gm_epi *ep,
                                                         ptrdiff_t m_lo, ptrdiff_t m_hi,
                                                         ptrdiff_t p_lo, ptrdiff_t p_hi) {
    const ptrdiff_t whole = N / GM_NR, n0 = whole * GM_NR;
    gm_run_b(ap, x, ldx, GM_NR, y, N, K, ldy, NULL, m_lo, m_hi, p_lo,
             p_hi < whole ? p_hi : whole, ep);
    if (p_hi > whole) {
        float *bp = (float *)malloc((size_t)(K * GM_NR) * sizeof(float));
        if (bp == NULL) return -1;
        gm_epi tail = *ep; /* its columns from n0 */
        if (tail.z != NULL) tail.z += n0;
        gm_pack_b_panel(x, K, N, ldx, 1, n0, bp);
        gm_run_b(ap, bp, GM_NR, K * GM_NR, y + n0, N - n0, K, ldy, NULL, m_lo, m_hi, 0, 1, &tail);
        free(bp);
    }
    return 0;
}

/* Floats of B (K x columns) that gm_run_rows keeps in L2 while the row
 * panels of A pass over it: a quarter of a Zen 3's 512 KiB. */
#define GM_ROWS_B 32768

/* C rows [m_lo, m_hi) and B panels [p_lo, p_hi) of C = A B for K <= GM_KC
 * (one slice), as gm_run_b without bias or epilogue but row panel by row
 * panel: each panel of GM_MR rows of A runs along a chunk of B's panels (up
 * to GM_ROWS_B floats of B), so that C is written a few whole rows at a time
 * instead of a column panel of every row. Winograd's products with wide
 * transformed outputs, 96-192 x 64-96 x 476-784 (bands of 56x56 tiles),
 * took 0.67-0.93x the time so on one thread of a Zen 3 and 0.90x on two;
 * 196 columns or fewer as before; ResNet-50 0.98x, SqueezeNet 0.99-1.0x,
 * Inception v2 1.0x in-process paired (2 threads). */
static inline void gm_run_rows(const float *ap, const float *bp, ptrdiff_t ldb, ptrdiff_t pstride,
                               float *c, ptrdiff_t N, ptrdiff_t K, ptrdiff_t ldc,
                               ptrdiff_t m_lo, ptrdiff_t m_hi, ptrdiff_t p_lo, ptrdiff_t p_hi) {
    const ptrdiff_t chunk = GM_ROWS_B / (K * GM_NR) > 1 ? GM_ROWS_B / (K * GM_NR) : 1;
    for (ptrdiff_t pc = p_lo; pc < p_hi; pc += chunk) {
        const ptrdiff_t pe = p_hi - pc < chunk ? p_hi : pc + chunk;
        for (ptrdiff_t m0 = m_lo; m0 < m_hi; m0 += GM_MR) {
            const ptrdiff_t mr = m_hi - m0 < GM_MR ? m_hi - m0 : GM_MR;
            for (ptrdiff_t p = pc; p < pe; p++) {
                const ptrdiff_t n0 = p * GM_NR;
                const ptrdiff_t nr = N - n0 < GM_NR ? N - n0 : GM_NR;
                gm_kernel(ap + m0 * K, bp + p * pstride, ldb, K, c + m0 * ldc + n0, ldc, mr, nr,
                          0, NULL);
            }
        }
    }
}

/* gm_run_b on B packed (panels of K x GM_NR). */
static inline void gm_run(const float *ap, const float *bp, float *c, ptrdiff_t N, ptrdiff_t K,
                          ptrdiff_t ldc, const float *bias, ptrdiff_t m_lo, ptrdiff_t m_hi,
                          ptrdiff_t p_lo, ptrdiff_t p_hi) {
    gm_run_b(ap, bp, GM_NR, K * GM_NR, c, N, K, ldc, bias, m_lo, m_hi, p_lo, p_hi, NULL);
}

/* C (M x N, row stride ldc) = A B on one thread, A given packed (ap: the
 * row panels of gm_pack_a_panel, K x GM_MR each), B (K x N) with (k, n) at
 * b[k * sbk + n * sbn] packed here into bp (ceil(N / GM_NR) * GM_NR * K
 * floats). */
static inline void gm_matmul_pack_b(const float *ap, ptrdiff_t M, ptrdiff_t K, const float *b,
                                    ptrdiff_t N, ptrdiff_t sbk, ptrdiff_t sbn, float *c,
                                    ptrdiff_t ldc, float *bp) {
    ptrdiff_t panels = (N + GM_NR - 1) / GM_NR;
    for (ptrdiff_t p = 0; p < panels; p++)
        gm_pack_b_panel(b, K, N, sbk, sbn, p * GM_NR, bp + p * K * GM_NR);
    gm_run(ap, bp, c, N, K, ldc, NULL, 0, M, 0, panels);
}

/* gm_matmul_pack_b for a constant A packed once (Winograd's filter
 * transform). B is packed here into bp (ceil(N / GM_NR) * GM_NR * K
 * floats), except where its rows are contiguous, M <= GM_MC (each panel of
 * B is read once, all of A passing over it) and N >= 4 * GM_NR: its whole
 * panels are then read in place and only a last partial one is packed.
 * Winograd's products of 32-128 output channels on 196-784 tiles took
 * 0.90-0.95x the time so on a Zen 3 (2 threads, a product each: packing B
 * took as long as reading it from L3 again); with 49 tiles (rows of 49
 * floats, a panel's rows straddling two cache lines) they lost 1.06-1.09x,
 * and more rows than GM_MC read each panel of B once per block of rows.
 * With K <= GM_KC the panels read in place go row panel by row panel
 * (gm_run_rows). */
static inline void gm_matmul_packed_a(const float *ap, ptrdiff_t M, ptrdiff_t K,
                                      const float *b, ptrdiff_t N, ptrdiff_t sbk,
                                      ptrdiff_t sbn, float *c, ptrdiff_t ldc, float *bp) {
    if (sbn == 1 && M <= GM_MC && N >= 4 * GM_NR) {
        ptrdiff_t whole = N / GM_NR;
        if (K <= GM_KC)
            gm_run_rows(ap, b, sbk, GM_NR, c, N, K, ldc, 0, M, 0, whole);
        else
            gm_run_b(ap, b, sbk, GM_NR, c, N, K, ldc, NULL, 0, M, 0, whole, NULL);
        if (whole * GM_NR < N) { /* the partial last panel */
            ptrdiff_t n0 = whole * GM_NR;
            gm_pack_b_panel(b, K, N, sbk, sbn, n0, bp);
            gm_run(ap, bp, c + n0, N - n0, K, ldc, NULL, 0, M, 0, 1);
        }
        return;
    }
    gm_matmul_pack_b(ap, M, K, b, N, sbk, sbn, c, ldc, bp);
}

/* C (M x N, row stride ldc) = A B on one thread, both operands packed here:
 * A (M x K) with element (m, k) at a[m * sam + k * sak], B (K x N) with
 * (k, n) at b[k * sbk + n * sbn]; ap and bp hold ceil(M / GM_MR) * GM_MR * K
 * and ceil(N / GM_NR) * GM_NR * K floats. For the products of attention, one
 * head per call. */
static inline void gm_matmul_serial(const float *a, ptrdiff_t M, ptrdiff_t K, ptrdiff_t sam,
                                    ptrdiff_t sak, const float *b, ptrdiff_t N, ptrdiff_t sbk,
                                    ptrdiff_t sbn, float *c, ptrdiff_t ldc, float *ap, float *bp) {
    ptrdiff_t mpanels = (M + GM_MR - 1) / GM_MR;
    for (ptrdiff_t q = 0; q < mpanels; q++)
        gm_pack_a_panel(a, M, K, sam, sak, q * GM_MR, ap + q * K * GM_MR);
    gm_matmul_pack_b(ap, M, K, b, N, sbk, sbn, c, ldc, bp);
}

#endif
