# The packed single-precision GEMM, included by gemm.pyx (the portable build)
# and by gemm_avx2.pyx / gemm_avx512.pyx (the same source built for newer
# CPUs, see setup.py). Documented in gemm.pyx.

from cython.parallel cimport parallel, prange, threadid
from libc.math cimport INFINITY
from libc.stdint cimport uintptr_t
from libc.stdlib cimport free, malloc

import numpy as np

include "_steal.pxi"

cdef extern from "_sgemm.h" nogil:
    enum:
        GM_VL
        GM_MR
        GM_NR
        GM_MC
    void gm_pack_b_panel(const float* b, Py_ssize_t K, Py_ssize_t N, Py_ssize_t sk,
                         Py_ssize_t sn, Py_ssize_t n0, float* out)
    void gm_pack_a_panel(const float* a, Py_ssize_t M, Py_ssize_t K, Py_ssize_t sm,
                         Py_ssize_t sk, Py_ssize_t m0, float* out)
    ctypedef struct gm_epi:
        const float* rbias
        const float* z
        Py_ssize_t ldz
        float lo
        float hi
        int clamp
    int gm_pointwise_share(const float* ap, const float* x, Py_ssize_t ldx, float* y,
                           Py_ssize_t ldy, Py_ssize_t N, Py_ssize_t K, const gm_epi* ep,
                           Py_ssize_t m_lo, Py_ssize_t m_hi, Py_ssize_t p_lo, Py_ssize_t p_hi)
    void gm_run(const float* ap, const float* bp, float* c, Py_ssize_t N, Py_ssize_t K,
                Py_ssize_t ldc, const float* bias, Py_ssize_t m_lo, Py_ssize_t m_hi,
                Py_ssize_t p_lo, Py_ssize_t p_hi)
    void gm_matmul_packed_a(const float* ap, Py_ssize_t M, Py_ssize_t K, const float* b,
                            Py_ssize_t N, Py_ssize_t sbk, Py_ssize_t sbn, float* c,
                            Py_ssize_t ldc, float* bp)
    void gm_matmul_serial(const float* a, Py_ssize_t M, Py_ssize_t K, Py_ssize_t sam,
                          Py_ssize_t sak, const float* b, Py_ssize_t N, Py_ssize_t sbk,
                          Py_ssize_t sbn, float* c, Py_ssize_t ldc, float* ap, float* bp)

VECTOR = GM_VL
"""Floats per vector register of this build."""
ROWS = GM_MR
"""Rows of A per register tile."""
PANEL = GM_NR
"""Columns of B per packed panel (and per register tile)."""


def _aligned(Py_ssize_t size):
    """A float32 array of ``size`` values starting on a 64-byte boundary."""
    raw = np.empty(size + 16, np.float32)
    cdef Py_ssize_t off = ((64 - <uintptr_t>raw.ctypes.data % 64) % 64) // sizeof(float)
    return raw[off:off + size]


def pack_b(const float[:, :] b, int nthreads=1):
    """B (K, N), any strides (a transposed view too), packed for :func:`sgemm`:
    an array (ceil(N / PANEL), K, PANEL) whose panels hold PANEL columns each,
    row after row, zero past N; its data starts on a 64-byte boundary."""
    cdef Py_ssize_t K = b.shape[0], N = b.shape[1]
    cdef Py_ssize_t panels = (N + GM_NR - 1) // GM_NR, size = panels * K * GM_NR, p
    cdef Py_ssize_t sk = b.strides[0] // sizeof(float), sn = b.strides[1] // sizeof(float)
    packed = _aligned(size).reshape(panels, K, GM_NR)
    cdef float[:, :, ::1] out = packed
    if K == 0 or panels == 0:
        return packed
    for p in prange(panels, nogil=True, num_threads=nthreads, schedule="static"):
        gm_pack_b_panel(&b[0, 0], K, N, sk, sn, p * GM_NR, &out[p, 0, 0])
    return packed


cdef inline double _speedup(Py_ssize_t parts, Py_ssize_t shares) noexcept nogil:
    """How many times faster ``parts`` equal parts run on ``shares`` threads
    than on one (the busiest thread takes ceil(parts / shares))."""
    return parts / <double>((parts + shares - 1) // shares)


cdef void _run_tiles(const float* ap, const float* bp, float* c, Py_ssize_t M, Py_ssize_t N,
                     Py_ssize_t K, const float* bias, int nthreads) noexcept nogil:
    """All tiles of C (M, N) = A B (+ bias) from packed A and B, split over
    ``nthreads`` threads along N or M, whichever splits into panels more
    evenly (along N on a tie): work items of one B panel, or of the row
    panels of one block of GM_MC rows (whose slice of packed A stays in L2
    while every B panel passes), in one share of consecutive items a
    thread; a thread done with its share takes the back half of what is
    left of another's (``_steal.h``)."""
    cdef Py_ssize_t panels = (N + GM_NR - 1) // GM_NR, mpanels = (M + GM_MR - 1) // GM_MR
    cdef Py_ssize_t shares_n = min(nthreads, panels), shares_m = min(nthreads, mpanels)
    cdef bint along_n = _speedup(panels, shares_n) >= _speedup(mpanels, shares_m)
    cdef Py_ssize_t shares = shares_n if along_n else shares_m
    cdef Py_ssize_t per, items, item, u0, u1, t
    cdef int tid
    cdef void* raw = NULL
    cdef ws_share* ws
    if shares <= 1:
        gm_run(ap, bp, c, N, K, N, bias, 0, M, 0, panels)
        return
    if along_n:
        per = 1
        items = panels
    else:
        per = min(GM_MC // GM_MR, (mpanels + shares - 1) // shares)
        items = (mpanels + per - 1) // per
    raw = malloc((shares + 1) * sizeof(ws_share))
    if raw == NULL:
        # no memory for the shares: the same shares, none taken over
        for t in prange(shares, num_threads=shares, schedule="static", chunksize=1):
            if along_n:
                gm_run(ap, bp, c, N, K, N, bias, 0, M, panels * t // shares,
                       panels * (t + 1) // shares)
            else:
                gm_run(ap, bp, c, N, K, N, bias, mpanels * t // shares * GM_MR,
                       min(M, mpanels * (t + 1) // shares * GM_MR), 0, panels)
        return
    ws = ws_align(raw)
    ws_init(ws, <int>shares, items)
    with parallel(num_threads=shares):
        tid = threadid()
        item = ws_next(ws, <int>shares, tid)
        while item >= 0:
            if along_n:
                gm_run(ap, bp, c, N, K, N, bias, 0, M, item, item + 1)
            else:
                u0 = item * per * GM_MR
                u1 = min(M, (item + 1) * per * GM_MR)
                gm_run(ap, bp, c, N, K, N, bias, u0, u1, 0, panels)
            item = ws_next(ws, <int>shares, tid)
    free(raw)


def sgemm(const float[:, :] a, const float[:, :, ::1] bp, Py_ssize_t n, const float[::1] bias,
          float[:, ::1] out, int nthreads):
    """``out = a @ B (+ bias)`` for a B packed by :func:`pack_b` (``bp``, N =
    ``n`` columns); ``a`` (M, K) of any strides, ``bias`` (N,) or None,
    ``out`` (M, N). A is packed into a buffer of the call; the tiles are
    split over ``nthreads`` OpenMP threads, with the GIL released."""
    cdef Py_ssize_t M = a.shape[0], K = a.shape[1]
    cdef Py_ssize_t panels = (n + GM_NR - 1) // GM_NR, mpanels = (M + GM_MR - 1) // GM_MR
    cdef Py_ssize_t sm = a.strides[0] // sizeof(float), sk = a.strides[1] // sizeof(float)
    cdef Py_ssize_t q
    cdef const float* bias_p = NULL
    cdef float* ap
    if n < 0 or bp.shape[0] != panels or bp.shape[1] != K or bp.shape[2] != GM_NR:
        raise ValueError(
            f"sgemm: packed B of shape ({bp.shape[0]}, {bp.shape[1]}, {bp.shape[2]}) is not "
            f"({panels}, {K}, {GM_NR}) for A of {K} columns and {n} output columns")
    if out.shape[0] != M or out.shape[1] != n:
        raise ValueError(f"sgemm: out is ({out.shape[0]}, {out.shape[1]}), not ({M}, {n})")
    if bias is not None:
        if bias.shape[0] != n:
            raise ValueError(f"sgemm: bias has {bias.shape[0]} values, not {n}")
        bias_p = &bias[0]
    if M == 0 or n == 0:
        return
    if K == 0:
        raise ValueError("sgemm: K is 0 (no terms to sum)")
    nthreads = max(nthreads, 1)
    ap = <float*>malloc(mpanels * K * GM_MR * sizeof(float))
    if ap == NULL:
        raise MemoryError()
    with nogil:
        for q in prange(mpanels, num_threads=nthreads, schedule="static"):
            gm_pack_a_panel(&a[0, 0], M, K, sm, sk, q * GM_MR, ap + q * K * GM_MR)
        _run_tiles(ap, &bp[0, 0, 0], &out[0, 0], M, n, K, bias_p, nthreads)
    free(ap)


def batched_sgemm(const float[:, :, :, :] a, const float[:, :, :, :] b, float[:, :, :, :] out,
                  int nthreads):
    """``out[i, j] = a[i, j] @ b[i, j]`` for each (i, j), the products split
    over ``nthreads`` OpenMP threads (each on one thread, with the GIL
    released): the many small products of attention, one per batch and
    head. ``a`` (B, H, M, K) and ``b`` (B, H, K, N) of any strides (the
    views of heads in a (batch, sequence, heads, size) tensor too), ``out``
    (B, H, M, N) with rows of contiguous values (any other strides)."""
    cdef Py_ssize_t n1 = a.shape[0], n2 = a.shape[1], M = a.shape[2], K = a.shape[3]
    cdef Py_ssize_t N = b.shape[3], nb = n1 * n2, i, i1, i2
    cdef Py_ssize_t sa1 = a.strides[0] // sizeof(float), sa2 = a.strides[1] // sizeof(float)
    cdef Py_ssize_t sam = a.strides[2] // sizeof(float), sak = a.strides[3] // sizeof(float)
    cdef Py_ssize_t sb1 = b.strides[0] // sizeof(float), sb2 = b.strides[1] // sizeof(float)
    cdef Py_ssize_t sbk = b.strides[2] // sizeof(float), sbn = b.strides[3] // sizeof(float)
    cdef Py_ssize_t sc1 = out.strides[0] // sizeof(float), sc2 = out.strides[1] // sizeof(float)
    cdef Py_ssize_t ldc = out.strides[2] // sizeof(float)
    cdef Py_ssize_t a_size = (M + GM_MR - 1) // GM_MR * GM_MR * K
    cdef Py_ssize_t b_size = (N + GM_NR - 1) // GM_NR * GM_NR * K
    cdef float* ap
    cdef float* bp
    cdef int failed = 0
    if b.shape[0] != n1 or b.shape[1] != n2 or b.shape[2] != K or out.shape[0] != n1 \
            or out.shape[1] != n2 or out.shape[2] != M or out.shape[3] != N:
        raise ValueError(
            f"batched_sgemm: shapes ({n1}, {n2}, {M}, {K}) @ "
            f"({b.shape[0]}, {b.shape[1]}, {b.shape[2]}, {N}) -> "
            f"({out.shape[0]}, {out.shape[1]}, {out.shape[2]}, {out.shape[3]}) do not match")
    if N > 1 and out.strides[3] != sizeof(float):
        raise ValueError("batched_sgemm: out's rows are not contiguous")
    if nb == 0 or M == 0 or N == 0:
        return
    if K == 0:
        raise ValueError("batched_sgemm: K is 0 (no terms to sum)")
    with nogil, parallel(num_threads=max(1, min(nthreads, nb))):
        ap = <float*>malloc(a_size * sizeof(float))
        bp = <float*>malloc(b_size * sizeof(float))
        for i in prange(nb, schedule="static"):
            i1 = i // n2
            i2 = i % n2
            if ap == NULL or bp == NULL:
                failed += 1  # a reduction: summed over the threads
            else:
                gm_matmul_serial(&a[0, 0, 0, 0] + i1 * sa1 + i2 * sa2, M, K, sam, sak,
                                 &b[0, 0, 0, 0] + i1 * sb1 + i2 * sb2, N, sbk, sbn,
                                 &out[0, 0, 0, 0] + i1 * sc1 + i2 * sc2, ldc, ap, bp)
        free(ap)
        free(bp)
    if failed:
        raise MemoryError()


def pack_a_batch(const float[:, :, :] a):
    """The matrices of ``a`` (B, M, K), any strides, packed for
    :func:`batched_sgemm_packed_a`: an array (B, ceil(M / ROWS) * ROWS * K)
    holding each one's row panels (K x ROWS each, zero past M); a constant
    operand (Winograd's transformed filters) is packed once this way
    instead of at every product."""
    cdef Py_ssize_t nb = a.shape[0], M = a.shape[1], K = a.shape[2]
    cdef Py_ssize_t mpanels = (M + GM_MR - 1) // GM_MR, size = mpanels * GM_MR * K, i, q
    cdef Py_ssize_t sb = a.strides[0] // sizeof(float)
    cdef Py_ssize_t sm = a.strides[1] // sizeof(float), sk = a.strides[2] // sizeof(float)
    packed = np.zeros((nb, size), np.float32)
    cdef float[:, ::1] out = packed
    if nb == 0 or M == 0 or K == 0:
        return packed
    for i in range(nb):
        for q in range(mpanels):
            gm_pack_a_panel(&a[0, 0, 0] + i * sb, M, K, sm, sk, q * GM_MR, &out[i, q * K * GM_MR])
    return packed


def batched_sgemm_packed_a(const float[:, ::1] ap, Py_ssize_t M, const float[:, :, :] b,
                           float[:, :, :] out, int nthreads):
    """``out[i] = a[i] @ b[i]`` for each i, ``a`` given packed by
    :func:`pack_a_batch` (``ap``, M rows each), the products split over
    ``nthreads`` OpenMP threads, one product per thread at a time (each
    thread packs its product's B). ``b`` (B, K, N) of any strides, ``out``
    (B, M, N) with rows of contiguous values."""
    cdef Py_ssize_t nb = b.shape[0], K = b.shape[1], N = b.shape[2], i
    cdef Py_ssize_t mpanels = (M + GM_MR - 1) // GM_MR
    cdef Py_ssize_t panels = (N + GM_NR - 1) // GM_NR
    cdef Py_ssize_t sb0 = b.strides[0] // sizeof(float)
    cdef Py_ssize_t sbk = b.strides[1] // sizeof(float), sbn = b.strides[2] // sizeof(float)
    cdef Py_ssize_t sc0 = out.strides[0] // sizeof(float), ldc = out.strides[1] // sizeof(float)
    cdef Py_ssize_t b_size = panels * GM_NR * K
    cdef float* bp
    cdef int failed = 0
    if ap.shape[0] != nb or ap.shape[1] != mpanels * GM_MR * K or out.shape[0] != nb \
            or out.shape[1] != M or out.shape[2] != N:
        raise ValueError(
            f"batched_sgemm_packed_a: packed A ({ap.shape[0]}, {ap.shape[1]}) for {M} rows, "
            f"B ({nb}, {K}, {N}) and out ({out.shape[0]}, {out.shape[1]}, {out.shape[2]}) "
            "do not match")
    if N > 1 and out.strides[2] != sizeof(float):
        raise ValueError("batched_sgemm_packed_a: out's rows are not contiguous")
    if nb == 0 or M == 0 or N == 0:
        return
    if K == 0:
        raise ValueError("batched_sgemm_packed_a: K is 0 (no terms to sum)")
    with nogil, parallel(num_threads=max(1, min(nthreads, nb))):
        bp = <float*>malloc(b_size * sizeof(float))
        for i in prange(nb, schedule="static"):
            if bp == NULL:
                failed += 1  # a reduction: summed over the threads
            else:
                gm_matmul_packed_a(&ap[i, 0], M, K, &b[0, 0, 0] + i * sb0, N, sbk, sbn,
                                   &out[0, 0, 0] + i * sc0, ldc, bp)
        free(bp)
    if failed:
        raise MemoryError()


def pointwise(const float[:, ::1] ap not None, Py_ssize_t M, const float[:, :] x not None,
              float[:, :] y not None, const float[::1] bias not None, const float[:, :] z,
              float lo, float hi, int nthreads, Py_ssize_t group=1, bint interleave=False):
    """``y = clamp(a @ x + bias[:, None] + z, lo, hi)``: a 1x1 convolution of
    one image, ``a`` (M, K) its weights given packed by :func:`pack_a_batch`
    (``ap``: one row of it), ``x`` (K, N) its input planes, ``y`` (M, N)
    its output (a slice of channels of a larger tensor too), ``bias`` (M,)
    or empty, ``z`` a residual of ``y``'s shape or None; ``x``, ``y`` and
    ``z`` with rows of contiguous values. With ``group`` > 1 the rows of
    ``x`` and of ``y`` split into that many groups, each group's output
    the product of its own weights (``ap`` then holds ``pack_a_batch`` of
    the (group, M / group, K / group) weights, a row each) and its input.

    With ``interleave`` (and no residual) the groups' rows are written
    channel-shuffled: row ``j`` of group ``g`` is row ``j * group + g`` of
    ``y`` (ShuffleNet's channel shuffle of a grouped 1x1 Conv's output, the
    Reshape/Transpose/Reshape it takes, done by the stores).

    ``x`` is read in place in panels of PANEL columns (only a last, partial
    one is packed). Each group's tiles split into shares along N or M,
    whichever splits more evenly (M on a tie), so that the groups' shares
    make up ``nthreads`` OpenMP threads' work (a group a thread when there
    are as many groups); each thread takes a contiguous run of the shares,
    groups in order, so that it writes one run of channels, as the kernels
    after it split theirs (a thread then reads what it wrote: ShuffleNet on
    2 threads of a Zen 3 VM ran 0.95x the time so, against interleaved
    groups and positions split first). The bias, residual and clamp are
    applied to each row block's panel of the output once its sums are
    whole (while it is in L1)."""
    cdef Py_ssize_t K = x.shape[0], N = x.shape[1]
    if group < 1 or K % group or M % group:
        raise ValueError(f"pointwise: {K} input and {M} output rows in {group} groups")
    cdef Py_ssize_t kg = K // group, mg = M // group
    cdef Py_ssize_t mpanels = (mg + GM_MR - 1) // GM_MR
    cdef Py_ssize_t panels = (N + GM_NR - 1) // GM_NR
    cdef Py_ssize_t per_group = max(1, nthreads // group)
    cdef Py_ssize_t shares_n = max(1, min(per_group, panels))
    cdef Py_ssize_t shares_m = max(1, min(per_group, mpanels))
    cdef bint along_n = _speedup(panels, shares_n) > _speedup(mpanels, shares_m)
    cdef Py_ssize_t shares = shares_n if along_n else shares_m
    cdef Py_ssize_t ldx = x.strides[0] // sizeof(float), ldy = y.strides[0] // sizeof(float)
    cdef Py_ssize_t item, g, t, m_lo, m_hi, p_lo, p_hi
    cdef gm_epi ep
    cdef gm_epi epg
    cdef const float* ag
    cdef const float* xg
    cdef float* yg
    cdef int failed = 0
    if ap.shape[0] != group or ap.shape[1] != mpanels * GM_MR * kg or y.shape[0] != M \
            or y.shape[1] != N:
        raise ValueError(
            f"pointwise: packed A ({ap.shape[0]}, {ap.shape[1]}) for {M} rows in {group} "
            f"groups, x ({K}, {N}) and y ({y.shape[0]}, {y.shape[1]}) do not match")
    if bias.shape[0] not in (0, M):
        raise ValueError(f"pointwise: bias of {bias.shape[0]} values for {M} rows")
    if interleave and z is not None:
        raise ValueError("pointwise: a residual with interleaved (channel-shuffled) rows")
    if z is not None and (z.shape[0] != M or z.shape[1] != N):
        raise ValueError(f"pointwise: residual ({z.shape[0]}, {z.shape[1]}) for y ({M}, {N})")
    if N > 1 and (x.strides[1] != sizeof(float) or y.strides[1] != sizeof(float)
                  or (z is not None and z.strides[1] != sizeof(float))):
        raise ValueError("pointwise: x, y and z need rows of contiguous values")
    if M == 0 or N == 0:
        return
    if K == 0:
        raise ValueError("pointwise: K is 0 (no terms to sum)")
    ep.rbias = &bias[0] if bias.shape[0] else NULL
    ep.z = &z[0, 0] if z is not None else NULL
    ep.ldz = z.strides[0] // sizeof(float) if z is not None else 0
    ep.lo = lo
    ep.hi = hi
    ep.clamp = lo > -INFINITY or hi < INFINITY
    with nogil, parallel(num_threads=min(nthreads, group * shares)):
        for item in prange(group * shares, schedule="static"):
            g = item // shares
            t = item % shares
            # group g's weights, input and output rows, bias and residual
            ag = &ap[g, 0]
            xg = &x[0, 0] + g * kg * ldx
            yg = &y[0, 0] + (g if interleave else g * mg) * ldy
            epg = ep
            if epg.rbias != NULL:
                epg.rbias = epg.rbias + g * mg
            if epg.z != NULL:
                epg.z = epg.z + g * mg * epg.ldz
            if along_n:
                m_lo = 0
                m_hi = mg
                p_lo = panels * t // shares
                p_hi = panels * (t + 1) // shares
            else:
                m_lo = mpanels * t // shares * GM_MR
                m_hi = min(mg, mpanels * (t + 1) // shares * GM_MR)
                p_lo = 0
                p_hi = panels
            if gm_pointwise_share(ag, xg, ldx, yg, ldy * group if interleave else ldy, N, kg,
                                  &epg, m_lo, m_hi, p_lo, p_hi):
                failed += 1  # a reduction: summed over the threads
    if failed:
        raise MemoryError()
