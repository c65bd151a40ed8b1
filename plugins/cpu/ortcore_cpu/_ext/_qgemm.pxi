# The 8-bit integer GEMM, included by qgemm.pyx (the portable build) and by
# qgemm_avx2.pyx, qgemm_avxvnni.pyx and qgemm_avx512.pyx (the same source
# built for newer CPUs, see setup.py). Documented in qgemm.pyx; the kernel
# itself is _qgemm.h.

from cython.parallel cimport prange
from libc.stdint cimport int32_t, uint8_t, uintptr_t

import numpy as np

cdef extern from "_qgemm.h" nogil:
    enum:
        QG_MR
        QG_NR
        QG_ISA
        QG_VNNI
        QG_OUT_I32
        QG_OUT_F32
        QG_OUT_Q8
    ctypedef short qg_a_t
    ctypedef struct qg_geom:
        Py_ssize_t C, H, W, kh, kw, sh, sw, dh, dw, ph, pw, OH, OW
    ctypedef struct qg_epi:
        int kind
        int32_t K
        const int32_t* za
        const int32_t* zb
        const int32_t* rsum
        const int32_t* csum
        Py_ssize_t rs, cs
        const float* scale
        const float* fbias
        const double* mult
        const int32_t* ibias
        double yzp
        int zp_after
        int lo, hi
        int out_signed
        char* out
        Py_ssize_t ldo
    void qg_pack_b_panel(const uint8_t* b, Py_ssize_t K, Py_ssize_t N, Py_ssize_t sk,
                         Py_ssize_t sn, Py_ssize_t n0, uint8_t flip, int psgn, uint8_t* out,
                         int32_t* csum)
    void qg_pack_im2col_panel(const uint8_t* x, const qg_geom* g, Py_ssize_t n0, uint8_t pad,
                              uint8_t flip, int psgn, uint8_t* out, int32_t* csum)
    void qg_pack_a_panel(const uint8_t* a, Py_ssize_t M, Py_ssize_t K, Py_ssize_t sm,
                         Py_ssize_t sk, Py_ssize_t m0, uint8_t flip, int psgn, qg_a_t* out,
                         int32_t* rsum)
    void qg_run(const qg_a_t* ap, const uint8_t* bp, Py_ssize_t M, Py_ssize_t N, Py_ssize_t k4,
                int a_uns, int b_sgn, const qg_epi* e, Py_ssize_t m_lo, Py_ssize_t m_hi,
                Py_ssize_t p_lo, Py_ssize_t p_hi)
    void qg_depthwise_plane(const uint8_t* x, int xs, int32_t xz, const int32_t* wc,
                            const qg_geom* g, int32_t* acc)
    void qg_finish(const qg_epi* e, int32_t* t, Py_ssize_t m0, Py_ssize_t n0, int mr, int nr)

ROWS = QG_MR
"""Rows of A per packed panel (and register tile)."""
PANEL = QG_NR
"""Columns of B per packed panel (and register tile)."""
ISA = ("portable", "avx2", "avxvnni", "avx512vnni")[QG_ISA]
"""The instructions this build's tiles use."""
MIXED_SIGNS = bool(QG_VNNI)
"""Whether the tiles need one unsigned and one signed operand (vpdpbusd)."""


def _aligned_bytes(Py_ssize_t size):
    """A uint8 array of ``size`` bytes starting on a 64-byte boundary."""
    raw = np.empty(size + 64, np.uint8)
    cdef Py_ssize_t off = (64 - <uintptr_t>raw.ctypes.data % 64) % 64
    return raw[off:off + size]


cdef class Packed:
    """One operand packed for :func:`gemm`: A's row panels or B's column
    panels, with its signedness as packed (after any flip of the top bit),
    its zero points (int32, one per row of A or column of B, the flip's 128
    included), and its sums along K when they were asked for."""

    cdef readonly object data
    cdef readonly Py_ssize_t size
    cdef readonly Py_ssize_t K
    cdef readonly bint signed
    cdef readonly object zero
    cdef readonly bint zero_any
    cdef readonly object sums

    def __init__(self, data, Py_ssize_t size, Py_ssize_t K, bint signed, zero, sums):
        self.data = data
        self.size = size
        self.K = K
        self.signed = signed
        self.zero = zero
        self.zero_any = bool(np.any(zero))
        self.sums = sums


cdef object _zero_points(zero, Py_ssize_t size, bint signed, bint flip):
    """``zero`` (None, a scalar or ``size`` values) as int32 (size,), moved
    by the 128 of a flip of the operand's top bit."""
    z = np.zeros(size, np.int32) if zero is None else np.broadcast_to(
        np.asarray(zero).astype(np.int32).reshape(-1), (size,)).copy()
    if flip:
        z += 128 if signed else -128
    return z


def pack_a(const uint8_t[:, :] a, bint signed, zero, bint flip, bint sums, int nthreads=1):
    """A (M, K) as bytes (a uint8 view of uint8 or int8 data, any strides)
    packed into row panels: ``signed`` says how its bytes read, ``zero``
    is None, a scalar or (M,) zero points, ``flip`` flips the top bit of
    each value (and moves the zero points), ``sums`` keeps each row's sum
    (needed when B's zero points are not all 0)."""
    cdef Py_ssize_t M = a.shape[0], K = a.shape[1], k4 = (K + 3) // 4
    cdef Py_ssize_t panels = (M + QG_MR - 1) // QG_MR, q
    cdef Py_ssize_t sm = a.strides[0], sk = a.strides[1]
    cdef Py_ssize_t psize = k4 * QG_MR * 4
    cdef bint psgn = signed ^ flip
    cdef uint8_t fl = 0x80 if flip else 0
    data = _aligned_bytes(max(1, panels * psize) * sizeof(qg_a_t))
    rs = np.zeros(max(1, panels * QG_MR), np.int32) if sums else None
    cdef uint8_t[::1] d = data
    cdef int32_t[::1] r = rs if sums else None
    cdef qg_a_t* dp = <qg_a_t*>&d[0]
    cdef int32_t* rp = &r[0] if sums else NULL
    if M and K:
        for q in prange(panels, nogil=True, num_threads=max(1, nthreads), schedule="static"):
            qg_pack_a_panel(&a[0, 0], M, K, sm, sk, q * QG_MR, fl, psgn, dp + q * psize,
                            rp + q * QG_MR if rp != NULL else NULL)
    return Packed(data, M, K, psgn, _zero_points(zero, M, signed, flip), rs)


def pack_b(const uint8_t[:, :] b, bint signed, zero, bint flip, bint sums, int nthreads=1):
    """B (K, N) as bytes, any strides (a transposed view too), packed into
    column panels; the other arguments as :func:`pack_a`'s (``zero``: None,
    a scalar or (N,) zero points; ``sums``: each column's sum)."""
    cdef Py_ssize_t K = b.shape[0], N = b.shape[1], k4 = (K + 3) // 4
    cdef Py_ssize_t panels = (N + QG_NR - 1) // QG_NR, q
    cdef Py_ssize_t sk = b.strides[0], sn = b.strides[1]
    cdef Py_ssize_t psize = k4 * QG_NR * 4
    cdef bint psgn = signed ^ flip
    cdef uint8_t fl = 0x80 if flip else 0
    data = _aligned_bytes(max(1, panels * psize))
    cs = np.zeros(max(1, panels * QG_NR), np.int32) if sums else None
    cdef uint8_t[::1] d = data
    cdef int32_t[::1] c = cs if sums else None
    cdef uint8_t* dp = &d[0]
    cdef int32_t* cp = &c[0] if sums else NULL
    if N and K:
        for q in prange(panels, nogil=True, num_threads=max(1, nthreads), schedule="static"):
            qg_pack_b_panel(&b[0, 0], K, N, sk, sn, q * QG_NR, fl, psgn, dp + q * psize,
                            cp + q * QG_NR if cp != NULL else NULL)
    return Packed(data, N, K, psgn, _zero_points(zero, N, signed, flip), cs)


def pack_im2col(const uint8_t[:, :, :] x, bint signed, int pad, tuple geometry, bint flip,
                bint sums, int nthreads=1):
    """The columns of a 2-D convolution of ``x`` (C, H, W) (one image's, or
    one group's, channels as bytes, rows of contiguous values) packed as B
    (K = C * kh * kw, N = OH * OW), the padding reading ``pad`` (the input's
    zero point, as a byte); ``geometry`` is (kh, kw, sh, sw, dh, dw, ph,
    pw, OH, OW). The other arguments as :func:`pack_b`'s; the zero point is
    ``pad``'s value."""
    cdef qg_geom g
    g.C, g.H, g.W = x.shape[0], x.shape[1], x.shape[2]
    g.kh, g.kw, g.sh, g.sw, g.dh, g.dw, g.ph, g.pw, g.OH, g.OW = geometry
    if g.C > 1 and (x.strides[0] != g.H * g.W or x.strides[1] != g.W) or (
            g.W > 1 and x.strides[2] != 1):
        raise ValueError("pack_im2col: x's planes are not contiguous")
    cdef Py_ssize_t K = g.C * g.kh * g.kw, N = g.OH * g.OW, k4 = (K + 3) // 4
    cdef Py_ssize_t panels = (N + QG_NR - 1) // QG_NR, q
    cdef Py_ssize_t psize = k4 * QG_NR * 4
    cdef bint psgn = signed ^ flip
    cdef uint8_t fl = 0x80 if flip else 0
    data = _aligned_bytes(max(1, panels * psize))
    cs = np.zeros(max(1, panels * QG_NR), np.int32) if sums else None
    cdef uint8_t[::1] d = data
    cdef int32_t[::1] c = cs if sums else None
    cdef uint8_t* dp = &d[0]
    cdef int32_t* cp = &c[0] if sums else NULL
    zero = np.int32(<int>(<signed char>pad) if signed else (pad & 0xFF))
    if N and K:
        for q in prange(panels, nogil=True, num_threads=max(1, nthreads), schedule="static"):
            qg_pack_im2col_panel(&x[0, 0, 0], &g, q * QG_NR, <uint8_t>pad, fl, psgn,
                                 dp + q * psize, cp + q * QG_NR if cp != NULL else NULL)
    return Packed(data, N, K, psgn, _zero_points(zero, N, signed, flip), cs)


cdef inline Py_ssize_t _channel_stride(p, Py_ssize_t n) except -1:
    """0 for a per-tensor parameter (one value), 1 for one per channel."""
    if p.shape[0] == 1:
        return 0
    if p.shape[0] != n:
        raise ValueError(f"gemm: a per-channel parameter has {p.shape[0]} values, not {n}")
    return 1


def gemm(Packed a, Packed b, out, *, scale=None, fbias=None, mult=None, ibias=None,
         double yzp=0.0, bint zp_after=False, int channel_axis=1, int nthreads=1):
    """``out = (A - za) @ (B - zb)`` from packed A (M rows) and B (N
    columns), finished by ``out``'s dtype: int32 as is; float32 times
    ``scale`` (plus ``fbias``); uint8 or int8 requantized:
    ``saturate(rint((acc + ibias) * mult + yzp))`` (``rint(...) + yzp``
    with ``zp_after``) in float64. ``scale``, ``fbias`` (float32),
    ``mult`` (float64) and ``ibias`` (int32) hold one value or one per
    channel, channels along ``channel_axis`` (0: rows, 1: columns).
    ``out`` (M, N) has rows of contiguous values. Tiles split over
    ``nthreads`` OpenMP threads, with the GIL released."""
    cdef Py_ssize_t M = a.size, N = b.size, K = a.K, k4 = (K + 3) // 4
    cdef Py_ssize_t mpanels = (M + QG_MR - 1) // QG_MR, panels = (N + QG_NR - 1) // QG_NR
    cdef Py_ssize_t chans = M if channel_axis == 0 else N, stride = 0, item, items, per, mchunks
    cdef qg_epi e
    cdef int a_uns, b_sgn
    if b.K != K:
        raise ValueError(f"gemm: A has {K} columns, B {b.K} rows")
    if out.shape[0] != M or out.shape[1] != N or (N > 1 and out.strides[1] != out.itemsize):
        raise ValueError(f"gemm: out of shape {out.shape} for a ({M}, {N}) product")
    if QG_VNNI and a.signed == b.signed:
        raise ValueError("gemm: this build needs one unsigned and one signed operand")
    if b.zero_any and a.sums is None or a.zero_any and b.sums is None:
        raise ValueError("gemm: nonzero zero points need the other operand's sums")
    cdef const int32_t[::1] za = a.zero
    cdef const int32_t[::1] zb = b.zero
    cdef const int32_t[::1] rsum = a.sums if b.zero_any else None
    cdef const int32_t[::1] csum = b.sums if a.zero_any else None
    cdef const float[::1] sc = scale
    cdef const float[::1] fb = fbias
    cdef const double[::1] mu = mult
    cdef const int32_t[::1] ib = ibias
    cdef const uint8_t[::1] ad = a.data
    cdef const uint8_t[::1] bd = b.data
    e.K = <int32_t>K
    e.za = &za[0] if M else NULL
    e.zb = &zb[0] if N else NULL
    e.rsum = &rsum[0] if rsum is not None else NULL
    e.csum = &csum[0] if csum is not None else NULL
    e.scale = e.fbias = NULL
    e.mult = NULL
    e.ibias = NULL
    e.yzp = yzp
    e.zp_after = zp_after
    e.lo = e.hi = 0
    e.out_signed = 0
    dt = out.dtype
    if dt == np.int32:
        e.kind = QG_OUT_I32
    elif dt == np.float32:
        e.kind = QG_OUT_F32
        if sc is None:
            raise ValueError("gemm: a float32 output needs a scale")
        stride = _channel_stride(sc, chans)
        e.scale = &sc[0]
        if fb is not None:
            if _channel_stride(fb, chans) != stride:
                raise ValueError("gemm: scale and bias differ in being per channel")
            e.fbias = &fb[0]
    elif dt == np.uint8 or dt == np.int8:
        e.kind = QG_OUT_Q8
        e.out_signed = dt == np.int8
        e.lo, e.hi = (-128, 127) if e.out_signed else (0, 255)
        if mu is None:
            raise ValueError("gemm: an 8-bit output needs a multiplier")
        stride = _channel_stride(mu, chans)
        e.mult = &mu[0]
        if ib is not None:
            if stride == 0 and _channel_stride(ib, chans) != 0:
                # the multiplier is per tensor, the bias per channel
                mu = np.broadcast_to(mult, (chans,)).copy()
                e.mult = &mu[0]
                stride = 1
            elif _channel_stride(ib, chans) == 0 and stride == 1:
                ib = np.broadcast_to(ibias, (chans,)).copy()
            e.ibias = &ib[0]
    else:
        raise TypeError(f"gemm: no {dt} output")
    e.rs = stride if channel_axis == 0 else 0
    e.cs = stride if channel_axis != 0 else 0
    out_b = out.view(np.uint8) if M and N else None
    cdef uint8_t[:, :] ob = out_b
    e.out = <char*>&ob[0, 0] if out_b is not None else NULL
    e.ldo = out.strides[0] // out.itemsize if M > 1 else N
    if M == 0 or N == 0:
        return
    a_uns = not a.signed
    b_sgn = b.signed
    nthreads = max(1, nthreads)
    # work items: a B panel and a chunk of A's row panels each; chunks only
    # where B has too few panels to go round the threads
    mchunks = 1 if panels >= 2 * nthreads else min(mpanels, (2 * nthreads + panels - 1) // panels)
    per = (mpanels + mchunks - 1) // mchunks
    mchunks = (mpanels + per - 1) // per
    items = panels * mchunks
    cdef const qg_a_t* app = <const qg_a_t*>&ad[0]
    cdef const uint8_t* bpp = &bd[0]
    with nogil:
        if nthreads == 1 or items == 1:
            qg_run(app, bpp, M, N, k4, a_uns, b_sgn, &e, 0, M, 0, panels)
        else:
            for item in prange(items, num_threads=min(nthreads, items), schedule="static"):
                qg_run(app, bpp, M, N, k4, a_uns, b_sgn, &e, (item % mchunks) * per * QG_MR,
                       ((item % mchunks) + 1) * per * QG_MR, item // mchunks,
                       item // mchunks + 1)


def depthwise(const uint8_t[:, :, :] x, bint signed, int xz, const int32_t[:, ::1] w,
              tuple geometry, out, *, mult=None, ibias=None, double yzp=0.0, int nthreads=1):
    """A 2-D depthwise convolution of one image: channel c of ``out`` (C,
    OH, OW) from channel c of ``x`` (C, H, W, bytes read as ``signed``
    says, planes contiguous) and its filter ``w[c]`` (kh * kw values, the
    weight's zero point already taken off), the padding reading the zero
    point ``xz``; ``geometry`` as :func:`pack_im2col`'s. ``out`` int32
    takes the sums; uint8/int8 the requantized values
    ``saturate(rint((acc + ibias) * mult + yzp))``, ``mult`` and ``ibias``
    one value or one per channel."""
    cdef qg_geom g
    g.C, g.H, g.W = x.shape[0], x.shape[1], x.shape[2]
    g.kh, g.kw, g.sh, g.sw, g.dh, g.dw, g.ph, g.pw, g.OH, g.OW = geometry
    cdef Py_ssize_t C = g.C, P = g.OH * g.OW, c
    if w.shape[0] != C or w.shape[1] != g.kh * g.kw:
        raise ValueError(f"depthwise: filters ({w.shape[0]}, {w.shape[1]}) for {C} channels")
    if out.shape != (C, g.OH, g.OW) or not out.flags.c_contiguous:
        raise ValueError(f"depthwise: out of shape {out.shape}, not ({C}, {g.OH}, {g.OW})")
    if g.C > 1 and (x.strides[0] != g.H * g.W or x.strides[1] != g.W) or (
            g.W > 1 and x.strides[2] != 1):
        raise ValueError("depthwise: x's planes are not contiguous")
    if C == 0 or P == 0:
        return
    cdef qg_epi e
    cdef bint requant = out.dtype != np.int32
    acc = out if not requant else np.empty((C, g.OH, g.OW), np.int32)
    cdef int32_t[:, :, ::1] ac = acc
    cdef const double[::1] mu = None
    cdef const int32_t[::1] ib = None
    cdef uint8_t[:, :, ::1] ob
    e.kind = QG_OUT_Q8
    e.K = 0
    e.rsum = e.csum = NULL
    e.za = e.zb = NULL
    e.scale = e.fbias = NULL
    e.zp_after = 0
    e.yzp = yzp
    e.ldo = P
    if requant:
        mu = np.broadcast_to(np.asarray(mult, np.float64).reshape(-1), (C,)).copy()
        if ibias is not None:
            ib = np.broadcast_to(np.asarray(ibias, np.int32).reshape(-1), (C,)).copy()
        e.mult = &mu[0]
        e.ibias = &ib[0] if ib is not None else NULL
        e.rs = 1
        e.cs = 0
        e.out_signed = out.dtype == np.int8
        e.lo, e.hi = (-128, 127) if e.out_signed else (0, 255)
        ob = out.view(np.uint8)
        e.out = <char*>&ob[0, 0, 0]
    with nogil:
        for c in prange(C, num_threads=max(1, min(nthreads, C)), schedule="static"):
            qg_depthwise_plane(&x[c, 0, 0], signed, xz, &w[c, 0], &g, &ac[c, 0, 0])
            if requant:
                _finish_rows(&e, &ac[c, 0, 0], c, P)


cdef void _finish_rows(const qg_epi* e, int32_t* acc, Py_ssize_t c, Py_ssize_t P) noexcept nogil:
    """Requantize channel c's P sums into the output (QG_NR at a time)."""
    cdef Py_ssize_t n0
    cdef int32_t t[QG_MR * QG_NR]
    cdef int nr, j
    n0 = 0
    while n0 < P:
        nr = <int>min(<Py_ssize_t>QG_NR, P - n0)
        for j in range(nr):
            t[j] = acc[n0 + j]
        qg_finish(e, t, c, n0, 1, nr)
        n0 += QG_NR


cdef extern from *:
    """
    static int ortcore_qg_features(void) {
    #if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
        int f = 0;
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) f |= 1;
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")
            && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni")) f |= 2;
    #if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
        if (__builtin_cpu_supports("avxvnni")) f |= 4;
    #endif
        return f;
    #else
        return 0;
    #endif
    }
    """
    int ortcore_qg_features() noexcept nogil


def cpu_features():
    """The instruction sets of this CPU the builds of this module need:
    a set of ``"avx2"`` (with FMA), ``"avx512vnni"`` (with AVX-512 F, BW
    and VL) and ``"avxvnni"`` (CPUID and the OS's register state, as the
    compiler's ``__builtin_cpu_supports`` reads them)."""
    cdef int f = ortcore_qg_features()
    return {name for bit, name in ((1, "avx2"), (2, "avx512vnni"), (4, "avxvnni")) if f & bit}
