# The 8-bit integer GEMM, included by qgemm.pyx (the portable build) and by
# qgemm_avx2.pyx, qgemm_avxvnni.pyx and qgemm_avx512.pyx (the same source
# built for newer CPUs, see setup.py). Documented in qgemm.pyx; the kernel
# itself is _qgemm.h.

from cython.parallel cimport prange, threadid
from libc.stdint cimport int32_t, uint8_t, uintptr_t

import threading

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
        const float* mult
        const int32_t* ibias
        int32_t yzp
        int lo, hi
        int out_signed
        char* out
        Py_ssize_t ldo
    void qg_pack_b_panel(const uint8_t* b, Py_ssize_t K, Py_ssize_t N, Py_ssize_t sk,
                         Py_ssize_t sn, Py_ssize_t n0, uint8_t flip, int psgn, uint8_t* out,
                         int32_t* csum)
    void qg_pack_a_panel(const uint8_t* a, Py_ssize_t M, Py_ssize_t K, Py_ssize_t sm,
                         Py_ssize_t sk, Py_ssize_t m0, uint8_t flip, int psgn, qg_a_t* out,
                         int32_t* rsum)
    void qg_run(const qg_a_t* ap, const uint8_t* bp, Py_ssize_t M, Py_ssize_t N, Py_ssize_t k4,
                int a_uns, int b_sgn, const qg_epi* e, Py_ssize_t m_lo, Py_ssize_t m_hi,
                Py_ssize_t p_lo, Py_ssize_t p_hi)
    void qg_finish(const qg_epi* e, int32_t* t, Py_ssize_t m0, Py_ssize_t n0, int mr, int nr,
                   const int32_t* cs)

cdef extern from "_qconv.h" nogil:
    enum:
        QG_DW_FLOAT_TAPS
    ctypedef struct qg_cols:
        const uint8_t* xp
        const uint8_t* end
        const Py_ssize_t* koff
        Py_ssize_t K, OH, OW, row
    void qg_cols_plane(const uint8_t* x, Py_ssize_t H, Py_ssize_t W, Py_ssize_t pt,
                       Py_ssize_t pl, Py_ssize_t Hp, Py_ssize_t sw, Py_ssize_t Wq, uint8_t fill,
                       uint8_t flip, uint8_t* out)
    void qg_conv_run(const qg_a_t* ap, const qg_cols* g, Py_ssize_t M, int s, int psgn,
                     int sums, const qg_epi* e, Py_ssize_t m_lo, Py_ssize_t m_hi,
                     Py_ssize_t p_lo, Py_ssize_t p_hi, uint8_t* scratch)
    void qg_depthwise_plane(const uint8_t* x, int xs, int32_t xz, const int32_t* wc,
                            const qg_geom* g, int32_t* acc)
    void qg_depthwise_plane_f32(const uint8_t* x, int xs, int32_t xz, const int32_t* wc,
                                const qg_geom* g, int32_t* acc, float* buf)
    Py_ssize_t qg_depthwise_buf(const qg_geom* g)

ROWS = QG_MR
"""Rows of A per packed panel (and register tile)."""
PANEL = QG_NR
"""Columns of B per packed panel (and register tile)."""
ISA = ("portable", "avx2", "avxvnni", "avx512vnni")[QG_ISA]
"""The instructions this build's tiles use."""
MIXED_SIGNS = bool(QG_VNNI)
"""Whether the tiles need one unsigned and one signed operand (vpdpbusd)."""


_local = threading.local()


def _work(Py_ssize_t size):
    """A uint8 work buffer of ``size`` bytes on a 64-byte boundary, this
    Python thread's own and reused by its next call (fresh memory costs a
    page fault per 4 KiB on first touch)."""
    buf = getattr(_local, "buf", None)
    if buf is None or buf.size < size:
        buf = _aligned_bytes(max(size, 1 << 16))
        _local.buf = buf
    return buf[:size]


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
    if M * K < 1 << 18:  # packing a small one takes less than waking a thread
        nthreads = 1
    if M and K:
        for q in prange(panels, nogil=True, num_threads=max(1, nthreads), schedule="dynamic"):
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
    if N * K < 1 << 18:
        nthreads = 1
    if N and K:
        for q in prange(panels, nogil=True, num_threads=max(1, nthreads), schedule="dynamic"):
            qg_pack_b_panel(&b[0, 0], K, N, sk, sn, q * QG_NR, fl, psgn, dp + q * psize,
                            cp + q * QG_NR if cp != NULL else NULL)
    return Packed(data, N, K, psgn, _zero_points(zero, N, signed, flip), cs)


cdef inline Py_ssize_t _channel_stride(p, Py_ssize_t n) except -1:
    """0 for a per-tensor parameter (one value), 1 for one per channel."""
    if p.shape[0] == 1:
        return 0
    if p.shape[0] != n:
        raise ValueError(f"gemm: a per-channel parameter has {p.shape[0]} values, not {n}")
    return 1


cdef list _epilogue(qg_epi* e, out, Py_ssize_t M, Py_ssize_t N, Py_ssize_t chans,
                    int channel_axis, scale, fbias, mult, ibias, int yzp):
    """Fill e's output part for ``out`` (M, N) (its dtype says which
    epilogue) and its parameters; returns the arrays e points into, to be
    kept alive while it is used."""
    cdef Py_ssize_t stride = 0
    if out.shape[0] != M or out.shape[1] != N or (N > 1 and out.strides[1] != out.itemsize):
        raise ValueError(f"gemm: out of shape {out.shape} for a ({M}, {N}) product")
    cdef const float[::1] sc = scale
    cdef const float[::1] fb = fbias
    cdef const float[::1] mu = _float32(mult) if mult is not None else None
    cdef const int32_t[::1] ib = ibias
    e.scale = e.fbias = NULL
    e.mult = NULL
    e.ibias = NULL
    e.yzp = yzp
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
    return [sc, fb, mu, ib, out_b]


def _float32(mult):
    """``mult`` as it is if float32, else a TypeError: a multiplier rounded
    to float32 here would not be the one computed in float32 arithmetic
    from float32 scales, which onnxruntime's requantization uses."""
    m = np.asarray(mult)
    if m.dtype != np.float32:
        raise TypeError(f"gemm: the multiplier must be float32, got {m.dtype}")
    return m


cdef Py_ssize_t _chunks(Py_ssize_t panels, Py_ssize_t mpanels, int nthreads,
                        Py_ssize_t* per) noexcept:
    """Work items: a B panel and a chunk of A's row panels each; chunks only
    where B has too few panels to go round the threads. Returns the number
    of chunks, per gets the row panels of each."""
    cdef Py_ssize_t mchunks = 1 if panels >= 2 * nthreads else min(
        mpanels, (2 * nthreads + panels - 1) // panels)
    per[0] = (mpanels + mchunks - 1) // mchunks
    return (mpanels + per[0] - 1) // per[0]


def gemm(Packed a, Packed b, out, *, scale=None, fbias=None, mult=None, ibias=None,
         int yzp=0, int channel_axis=1, int nthreads=1):
    """``out = (A - za) @ (B - zb)`` from packed A (M rows) and B (N
    columns), finished by ``out``'s dtype: int32 as is; float32 times
    ``scale`` (plus ``fbias``); uint8 or int8 requantized:
    ``rint(clip((float32)(acc + ibias) * mult, lo - yzp, hi - yzp)) + yzp``
    in float32 as onnxruntime computes (``_qgemm_ref.requantize``).
    ``scale``, ``fbias``, ``mult`` (float32) and ``ibias`` (int32) hold one
    value or one per
    channel, channels along ``channel_axis`` (0: rows, 1: columns).
    ``out`` (M, N) has rows of contiguous values. Tiles split over
    ``nthreads`` OpenMP threads, with the GIL released."""
    cdef Py_ssize_t M = a.size, N = b.size, K = a.K, k4 = (K + 3) // 4
    cdef Py_ssize_t mpanels = (M + QG_MR - 1) // QG_MR, panels = (N + QG_NR - 1) // QG_NR
    cdef Py_ssize_t item, items, per, mchunks
    cdef qg_epi e
    cdef int a_uns, b_sgn
    if b.K != K:
        raise ValueError(f"gemm: A has {K} columns, B {b.K} rows")
    if QG_VNNI and a.signed == b.signed:
        raise ValueError("gemm: this build needs one unsigned and one signed operand")
    if b.zero_any and a.sums is None or a.zero_any and b.sums is None:
        raise ValueError("gemm: nonzero zero points need the other operand's sums")
    keep = _epilogue(&e, out, M, N, M if channel_axis == 0 else N, channel_axis, scale, fbias,
                     mult, ibias, yzp)
    cdef const int32_t[::1] za = a.zero
    cdef const int32_t[::1] zb = b.zero
    cdef const int32_t[::1] rsum = a.sums if b.zero_any else None
    cdef const int32_t[::1] csum = b.sums if a.zero_any else None
    cdef const uint8_t[::1] ad = a.data
    cdef const uint8_t[::1] bd = b.data
    e.K = <int32_t>K
    e.za = &za[0] if M else NULL
    e.zb = &zb[0] if N else NULL
    e.rsum = &rsum[0] if rsum is not None else NULL
    e.csum = &csum[0] if csum is not None else NULL
    if M == 0 or N == 0:
        return
    a_uns = not a.signed
    b_sgn = b.signed
    nthreads = max(1, nthreads)
    mchunks = _chunks(panels, mpanels, nthreads, &per)
    items = panels * mchunks
    cdef const qg_a_t* app = <const qg_a_t*>&ad[0]
    cdef const uint8_t* bpp = &bd[0]
    with nogil:
        if nthreads == 1 or items == 1:
            qg_run(app, bpp, M, N, k4, a_uns, b_sgn, &e, 0, M, 0, panels)
        else:
            for item in prange(items, num_threads=min(nthreads, items), schedule="dynamic"):
                qg_run(app, bpp, M, N, k4, a_uns, b_sgn, &e, (item % mchunks) * per * QG_MR,
                       ((item % mchunks) + 1) * per * QG_MR, item // mchunks,
                       item // mchunks + 1)


def conv(Packed a, const uint8_t[:, :, :] x, bint signed, int xz, tuple geometry, out, *,
         mult=None, ibias=None, int yzp=0, int nthreads=1):
    """A 2-D convolution of one image (or one group of its channels):
    ``out`` (M, OH * OW) = A (the packed weights, M rows of K = C * kh * kw)
    times the columns of ``x`` (C, H, W, bytes read as ``signed`` says,
    planes contiguous; padding reads the zero point ``xz``), finished as
    :func:`gemm`'s are (int32, or 8-bit with ``mult``, ``ibias`` and
    ``yzp`` per row). ``geometry`` is (kh, kw, sh, sw, dh, dw, ph, pw, OH,
    OW). No im2col is materialized: each thread packs a panel of columns
    (from the input padded once, its columns split by stride phase) right
    before the tiles that read it."""
    cdef Py_ssize_t C = x.shape[0], H = x.shape[1], W = x.shape[2]
    cdef Py_ssize_t kh, kw, sh, sw, dh, dw, ph, pw, OH, OW
    kh, kw, sh, sw, dh, dw, ph, pw, OH, OW = geometry
    cdef Py_ssize_t K = C * kh * kw, P = OH * OW, M = a.size, k4 = (K + 3) // 4
    cdef Py_ssize_t mpanels = (M + QG_MR - 1) // QG_MR, panels = (P + QG_NR - 1) // QG_NR
    cdef Py_ssize_t item, items, per, mchunks, c, i, j, Hp, Wq, plane, sz, nt
    if a.K != K:
        raise ValueError(f"conv: weights of {a.K} columns for {K} = {C} x {kh} x {kw}")
    if C > 1 and (x.strides[0] != H * W or x.strides[1] != W) or (W > 1 and x.strides[2] != 1):
        raise ValueError("conv: x's planes are not contiguous")
    cdef bint flip = QG_VNNI and signed == a.signed
    cdef bint psgn = signed ^ flip
    cdef uint8_t fl = 0x80 if flip else 0
    cdef qg_epi e
    keep = _epilogue(&e, out, M, P, M, 0, None, None, mult, ibias, yzp)
    if M == 0 or P == 0:
        return
    zb = np.full(P, xz + ((128 if signed else -128) if flip else 0), np.int32)
    cdef const int32_t[::1] zbv = zb
    cdef const int32_t[::1] za = a.zero
    cdef const int32_t[::1] rsum = a.sums
    cdef bint zb_any = zb[0] != 0
    if zb_any and a.sums is None:
        raise ValueError("conv: a nonzero input zero point needs the weights' sums")
    e.K = <int32_t>K
    e.za = &za[0]
    e.zb = &zbv[0]
    e.rsum = &rsum[0] if zb_any else NULL
    e.csum = NULL
    # the input as qg_cols reads it: copied (padded, phase split, flipped)
    # unless it already is
    cdef bint direct = sw == 1 and ph == 0 and pw == 0 and not flip and (
        (OH - 1) * sh + (kh - 1) * dh < H and (OW - 1) + (kw - 1) * dw < W)
    cdef const uint8_t* xs = &x[0, 0, 0]
    cdef uint8_t* xpp
    xpp = <uint8_t*>xs
    if direct:
        Hp, Wq = H, W
    else:
        Hp = (OH - 1) * sh + (kh - 1) * dh + 1
        Wq = ((OW - 1) * sw + (kw - 1) * dw + 1 + sw - 1) // sw
    plane = Hp * sw * Wq
    koff = np.empty(max(1, K), np.intp)
    cdef Py_ssize_t[::1] ko = koff
    for c in range(C):
        for i in range(kh):
            for j in range(kw):
                ko[(c * kh + i) * kw + j] = (c * plane + i * dh * sw * Wq
                                             + (j * dw) % sw * Wq + (j * dw) // sw)
    cdef qg_cols g
    g.xp = xpp
    g.end = xpp + C * plane
    g.koff = &ko[0]
    g.K, g.OH, g.OW, g.row = K, OH, OW, sh * sw * Wq
    nthreads = max(1, nthreads)
    mchunks = _chunks(panels, mpanels, nthreads, &per)
    items = panels * mchunks
    nt = min(nthreads, items)
    sz = k4 * QG_NR * 4 + 128
    sz = (sz + 63) // 64 * 64
    cdef Py_ssize_t xsz = 0 if direct else (C * plane + 64 + 63) // 64 * 64
    work = _work(sz * nt + xsz)
    cdef uint8_t* sp = <uint8_t*><uintptr_t>work.ctypes.data
    if not direct:
        xpp = sp + sz * nt
        g.xp = xpp
        g.end = xpp + C * plane + 64
    cdef const qg_a_t* app = <const qg_a_t*><uintptr_t>a.data.ctypes.data
    cdef int s = (not a.signed) if QG_VNNI else psgn
    cdef int sums = a.zero_any
    cdef uint8_t fill = (<uint8_t>xz) ^ fl
    with nogil:
        if not direct:
            if nt > 1 and C * plane >= 1 << 18:
                for c in prange(C, num_threads=nt, schedule="dynamic"):
                    qg_cols_plane(xs + c * H * W, H, W, ph, pw, Hp, sw, Wq, fill, fl,
                                  xpp + c * plane)
            else:
                for c in range(C):
                    qg_cols_plane(xs + c * H * W, H, W, ph, pw, Hp, sw, Wq, fill, fl,
                                  xpp + c * plane)
        if nt == 1:
            qg_conv_run(app, &g, M, s, psgn, sums, &e, 0, M, 0, panels, sp)
        else:
            for item in prange(items, num_threads=nt, schedule="dynamic"):
                qg_conv_run(app, &g, M, s, psgn, sums, &e, (item % mchunks) * per * QG_MR,
                            ((item % mchunks) + 1) * per * QG_MR, item // mchunks,
                            item // mchunks + 1, sp + threadid() * sz)


def depthwise(const uint8_t[:, :, :] x, bint signed, int xz, const int32_t[:, ::1] w,
              tuple geometry, out, *, mult=None, ibias=None, int yzp=0, int nthreads=1):
    """A 2-D depthwise convolution of one image: channel c of ``out`` (C,
    OH, OW) from channel c of ``x`` (C, H, W, bytes read as ``signed``
    says, planes contiguous) and its filter ``w[c]`` (kh * kw values, the
    weight's zero point already taken off), the padding reading the zero
    point ``xz``; ``geometry`` as :func:`pack_im2col`'s. ``out`` int32
    takes the sums; uint8/int8 the requantized values
    as :func:`gemm`'s, ``mult`` (float32) and ``ibias`` one value or one per
    channel."""
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
    cdef int nt = max(1, min(nthreads, C))
    cdef bint fast = g.kh * g.kw <= QG_DW_FLOAT_TAPS
    cdef Py_ssize_t bsz = (qg_depthwise_buf(&g) + 15) // 16 * 16 if fast else 0
    cdef Py_ssize_t asz = (P + 15) // 16 * 16 if requant else 0
    # per thread: the float plane, and the sums of a channel to requantize
    work = _work(4 * (nt * bsz + nt * asz) + 64)
    fbuf = work[:4 * nt * bsz].view(np.float32)
    abuf = work[4 * nt * bsz:4 * (nt * bsz + nt * asz)].view(np.int32)
    cdef float[::1] fb = fbuf
    cdef int32_t[::1] ab = abuf
    cdef int32_t[:, :, ::1] ac = out if not requant else None
    cdef int32_t* accp
    cdef int tid
    cdef const float[::1] mu = None
    cdef const int32_t[::1] ib = None
    cdef uint8_t[:, :, ::1] ob
    e.kind = QG_OUT_Q8
    e.K = 0
    e.rsum = e.csum = NULL
    e.za = e.zb = NULL
    e.scale = e.fbias = NULL
    e.yzp = yzp
    e.ldo = P
    if requant:
        mu = np.broadcast_to(_float32(mult).reshape(-1), (C,)).copy()
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
        for c in prange(C, num_threads=nt, schedule="dynamic"):
            tid = threadid()
            accp = &ab[tid * asz] if requant else &ac[c, 0, 0]
            if fast:
                qg_depthwise_plane_f32(&x[c, 0, 0], signed, xz, &w[c, 0], &g, accp,
                                       &fb[tid * bsz])
            else:
                qg_depthwise_plane(&x[c, 0, 0], signed, xz, &w[c, 0], &g, accp)
            if requant:
                _finish_rows(&e, accp, c, P)


cdef void _finish_rows(const qg_epi* e, int32_t* acc, Py_ssize_t c, Py_ssize_t P) noexcept nogil:
    """Requantize channel c's P sums (acc, overwritten) into the output."""
    qg_finish(e, acc, c, 0, 1, <int>P, NULL)


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


include "_qlinear.pxi"
