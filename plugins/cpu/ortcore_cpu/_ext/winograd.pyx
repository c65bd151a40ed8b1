"""Winograd F(2x2, 3x3) transforms for float32 3x3 convolutions with stride 1.

Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks" (2015): each
2x2 output tile is ``A^T [(G g G^T) * (B^T d B)] A`` with ``d`` the 4x4 input
tile and ``g`` the 3x3 filter. Summed over channels, the 16 elementwise
products become 16 GEMMs ``M[k] = U[k] @ V[k]``: ``U`` (16, M, C) is the
filter transform (done with numpy by the caller), ``V`` (16, C, T) the input
transform of the T tiles and ``M`` (16, M, T) the transformed output.

``V`` and ``M`` are passed as 2-D arrays (16, S): plane ``k`` is row ``k``,
whose first C*T (M*T) elements are the (C, T) ((M, T)) matrix, row-major. S
may exceed C*T: a caller pads it so that the planes are not 4 KiB apart,
since the transforms touch all 16 planes together and same-set cache lines
would evict each other. ``v[:, :C*T].reshape(16, C, T)`` is then the GEMM
operand, a view.

Tiles are numbered image by image, then row by row: tile ``(n, ty, tx)`` of a
band of tile rows ``[ty0, ty1)`` is column ``(n * (ty1 - ty0) + ty - ty0) * tw
+ tx``, so a caller can transform a whole batch, or a band of tile rows at a
time. Both transforms release the GIL and split their outer loop (channel,
image, tile row) over ``nthreads`` OpenMP threads. The inner loops take up to
``_CHUNK`` tiles of one tile row at a time, without divisions or bounds checks,
between small arrays on the stack: the input rows are first copied there,
zero-padded, and the results copied out (clipped to the output at its edges).
Since those arrays cannot alias the caller's memory, the compiler vectorizes
the loops across tiles.
"""

from cython.parallel cimport prange
from libc.math cimport INFINITY
from libc.string cimport memcpy, memset

cdef enum:
    _CHUNK = 64  # tiles per step of the inner loops


cdef void _input_tiles(const float* x, Py_ssize_t H, Py_ssize_t W, Py_ssize_t iy0,
                       Py_ssize_t ix0, Py_ssize_t nt, float* o,
                       Py_ssize_t kstride) noexcept nogil:
    """Transform ``nt`` <= _CHUNK tiles of one row of a channel plane ``x`` (H, W).

    Tile ``i`` reads rows ``iy0`` to ``iy0 + 3`` and columns ``ix0 + 2*i`` to
    ``ix0 + 2*i + 3``; element k of its transform goes to ``o[k * kstride + i]``.
    """
    cdef float d[4][2 * _CHUNK + 2]
    cdef float t[16][_CHUNK]
    cdef Py_ssize_t wb = 2 * nt + 2
    cdef Py_ssize_t lo, hi, r, iy, j, i, k
    cdef float a0, a1, a2, a3
    # d[r] holds columns ix0 to ix0 + wb - 1 of row iy0 + r; [lo, hi) lie inside x
    lo = -ix0 if ix0 < 0 else 0
    hi = W - ix0
    if lo > wb:
        lo = wb
    if hi > wb:
        hi = wb
    if hi < lo:
        hi = lo
    for r in range(4):
        iy = iy0 + r
        if iy < 0 or iy >= H:
            memset(&d[r][0], 0, wb * sizeof(float))
            continue
        if lo > 0:
            memset(&d[r][0], 0, lo * sizeof(float))
        if hi > lo:
            memcpy(&d[r][lo], x + iy * W + ix0 + lo, (hi - lo) * sizeof(float))
        if hi < wb:
            memset(&d[r][hi], 0, (wb - hi) * sizeof(float))
    # vertical pass, in place: B^T d
    for j in range(wb):
        a0 = d[0][j]
        a1 = d[1][j]
        a2 = d[2][j]
        a3 = d[3][j]
        d[0][j] = a0 - a2
        d[1][j] = a1 + a2
        d[2][j] = a2 - a1
        d[3][j] = a1 - a3
    # horizontal pass: (B^T d) B, one tile per step
    for i in range(nt):
        j = 2 * i
        t[0][i] = d[0][j] - d[0][j + 2]
        t[1][i] = d[0][j + 1] + d[0][j + 2]
        t[2][i] = d[0][j + 2] - d[0][j + 1]
        t[3][i] = d[0][j + 1] - d[0][j + 3]
        t[4][i] = d[1][j] - d[1][j + 2]
        t[5][i] = d[1][j + 1] + d[1][j + 2]
        t[6][i] = d[1][j + 2] - d[1][j + 1]
        t[7][i] = d[1][j + 1] - d[1][j + 3]
        t[8][i] = d[2][j] - d[2][j + 2]
        t[9][i] = d[2][j + 1] + d[2][j + 2]
        t[10][i] = d[2][j + 2] - d[2][j + 1]
        t[11][i] = d[2][j + 1] - d[2][j + 3]
        t[12][i] = d[3][j] - d[3][j + 2]
        t[13][i] = d[3][j + 1] + d[3][j + 2]
        t[14][i] = d[3][j + 2] - d[3][j + 1]
        t[15][i] = d[3][j + 1] - d[3][j + 3]
    for k in range(16):
        memcpy(o + k * kstride, &t[k][0], nt * sizeof(float))


cdef void _output_tiles(const float* s, Py_ssize_t kstride, Py_ssize_t nt,
                        float* y0, float* y1, Py_ssize_t ncols, float bias, float lo,
                        float hi, bint clamp) noexcept nogil:
    """Transform ``nt`` <= _CHUNK tiles, element k of tile ``i`` at
    ``s[k * kstride + i]``, into output rows ``y0`` and ``y1`` (``NULL``: past
    the output), of which the first ``ncols`` <= 2 * nt columns are written,
    plus ``bias``, clamped to [lo, hi] with ``clamp`` (a NaN stays NaN)."""
    cdef float r0[2 * _CHUNK]
    cdef float r1[2 * _CHUNK]
    cdef const float* p0 = s
    cdef const float* p1 = s + kstride
    cdef const float* p2 = s + 2 * kstride
    cdef const float* p3 = s + 3 * kstride
    cdef const float* p4 = s + 4 * kstride
    cdef const float* p5 = s + 5 * kstride
    cdef const float* p6 = s + 6 * kstride
    cdef const float* p7 = s + 7 * kstride
    cdef const float* p8 = s + 8 * kstride
    cdef const float* p9 = s + 9 * kstride
    cdef const float* p10 = s + 10 * kstride
    cdef const float* p11 = s + 11 * kstride
    cdef const float* p12 = s + 12 * kstride
    cdef const float* p13 = s + 13 * kstride
    cdef const float* p14 = s + 14 * kstride
    cdef const float* p15 = s + 15 * kstride
    cdef Py_ssize_t i
    cdef float s00, s01, s02, s03, s10, s11, s12, s13
    for i in range(nt):
        # vertical: A^T M, then horizontal: (A^T M) A
        s00 = p0[i] + p4[i] + p8[i]
        s01 = p1[i] + p5[i] + p9[i]
        s02 = p2[i] + p6[i] + p10[i]
        s03 = p3[i] + p7[i] + p11[i]
        s10 = p4[i] - p8[i] - p12[i]
        s11 = p5[i] - p9[i] - p13[i]
        s12 = p6[i] - p10[i] - p14[i]
        s13 = p7[i] - p11[i] - p15[i]
        r0[2 * i] = s00 + s01 + s02
        r0[2 * i + 1] = s01 - s02 - s03
        r1[2 * i] = s10 + s11 + s12
        r1[2 * i + 1] = s11 - s12 - s13
    for i in range(2 * nt):
        r0[i] = r0[i] + bias
        r1[i] = r1[i] + bias
    if clamp:
        for i in range(2 * nt):
            r0[i] = lo if r0[i] < lo else r0[i]
            r0[i] = hi if r0[i] > hi else r0[i]
            r1[i] = lo if r1[i] < lo else r1[i]
            r1[i] = hi if r1[i] > hi else r1[i]
    memcpy(y0, &r0[0], ncols * sizeof(float))
    if y1 != NULL:
        memcpy(y1, &r1[0], ncols * sizeof(float))


def input_transform(const float[:, :, :, ::1] x, float[:, ::1] v,
                    Py_ssize_t ph, Py_ssize_t pw, Py_ssize_t ty0, Py_ssize_t ty1,
                    Py_ssize_t tw, int nthreads):
    """Input transform ``V = B^T d B`` of the tiles of ``x`` (N, C, H, W).

    Tile ``(ty, tx)`` reads rows ``2*ty - ph`` to ``2*ty - ph + 3`` and columns
    ``2*tx - pw`` to ``2*tx - pw + 3`` (outside ``x``: zero); ``tw`` is the
    number of tiles per row. ``v`` is (16, S) with S >= C * T, T = N * (ty1 -
    ty0) * tw (see the module docstring); ``v[k, c * T + t]`` is element k of
    tile t, channel c.
    """
    cdef Py_ssize_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3]
    cdef Py_ssize_t nty = ty1 - ty0
    cdef Py_ssize_t tiles = N * nty * tw
    cdef Py_ssize_t rows = C * N * nty
    cdef Py_ssize_t kstride, r, c, rest, n, ty, tx, nt, ch
    cdef Py_ssize_t nch = (tw + _CHUNK - 1) // _CHUNK
    cdef const float* plane
    cdef float* o
    if ph < 0 or pw < 0 or ty0 < 0 or nty < 0 or tw < 0:
        raise ValueError("winograd input_transform: negative pad or tile range")
    if ph > 2147483647 or pw > 2147483647 or ty1 > 2147483647:
        raise ValueError("winograd input_transform: pad or tile range too large")
    # in Python integers: the product of the arguments can overflow
    if v.shape[0] != 16 or v.shape[1] < C * <object>N * nty * tw:
        raise ValueError("winograd input_transform: v has the wrong shape")
    if tiles == 0 or C == 0:
        return
    kstride = v.shape[1]
    if nthreads < 1:
        nthreads = 1
    with nogil:
        for r in prange(rows, num_threads=nthreads, schedule="static"):
            # r = (c * N + n) * nty + ty - ty0: tiles r * tw to r * tw + tw - 1
            c = r // (N * nty)
            rest = r - c * (N * nty)
            n = rest // nty
            ty = ty0 + rest - n * nty
            plane = &x[n, c, 0, 0] if H * W > 0 else NULL
            o = &v[0, r * tw]
            for ch in range(nch):
                tx = ch * _CHUNK
                nt = tw - tx if tw - tx < _CHUNK else _CHUNK
                _input_tiles(plane, H, W, 2 * ty - ph, 2 * tx - pw, nt, o + tx, kstride)


def output_transform(const float[:, ::1] m, float[:, :, :, :] y,
                     Py_ssize_t ty0, Py_ssize_t ty1, Py_ssize_t tw, int nthreads,
                     const float[::1] bias=None, float lo=-INFINITY, float hi=INFINITY):
    """Output transform ``A^T M A`` of the tiles in ``m`` into rows ``2*ty0`` to
    ``2*ty1 - 1`` of ``y`` (N, M, oh, ow), plus ``bias`` ((M,), or None) and
    clamped to [lo, hi] (a Conv's fused Relu or Clip; a NaN stays NaN) as it
    is written. ``y``'s rows are contiguous; its other strides are any (the
    channels of a larger tensor).

    ``m`` is (16, S) with S >= M * T, T = N * (ty1 - ty0) * tw, laid out like
    the ``v`` of :func:`input_transform`; ``tw`` must be ``ceil(ow / 2)``.
    Tiles that stick out of ``y`` (odd ``oh`` or ``ow``) write only their part
    inside it.
    """
    cdef Py_ssize_t N = y.shape[0], M = y.shape[1], oh = y.shape[2], ow = y.shape[3]
    cdef Py_ssize_t nty = ty1 - ty0
    cdef Py_ssize_t tiles = N * nty * tw
    cdef Py_ssize_t rows = M * N * nty
    cdef Py_ssize_t kstride, r, mm, rest, n, ty, tx, nt, ncols, ch
    cdef Py_ssize_t nch = (tw + _CHUNK - 1) // _CHUNK
    cdef const float* s
    cdef float* y0
    cdef float* y1
    cdef const float* bp = NULL
    cdef bint clamp = lo > -INFINITY or hi < INFINITY
    cdef Py_ssize_t yrow = y.strides[2] // sizeof(float)
    if ty0 < 0 or nty < 0 or 2 * <object>ty1 > oh + 1 or 2 * <object>tw < ow or 2 * <object>tw > ow + 1:
        raise ValueError("winograd output_transform: tile range does not fit y")
    if m.shape[0] != 16 or m.shape[1] < M * <object>N * nty * tw:
        raise ValueError("winograd output_transform: m has the wrong shape")
    if ow > 1 and y.strides[3] != sizeof(float):
        raise ValueError("winograd output_transform: y's rows are not contiguous")
    if bias is not None and bias.shape[0] != M:
        raise ValueError(
            f"winograd output_transform: bias of {bias.shape[0]} values for {M} channels")
    if bias is not None and M > 0:
        bp = &bias[0]
    if tiles == 0 or M == 0:
        return
    kstride = m.shape[1]
    if nthreads < 1:
        nthreads = 1
    with nogil:
        for r in prange(rows, num_threads=nthreads, schedule="static"):
            mm = r // (N * nty)
            rest = r - mm * (N * nty)
            n = rest // nty
            ty = ty0 + rest - n * nty
            s = &m[0, r * tw]
            y0 = &y[n, mm, 2 * ty, 0]
            y1 = y0 + yrow if 2 * ty + 1 < oh else NULL
            for ch in range(nch):
                tx = ch * _CHUNK
                nt = tw - tx if tw - tx < _CHUNK else _CHUNK
                ncols = ow - 2 * tx if ow - 2 * tx < 2 * nt else 2 * nt
                _output_tiles(s + tx, kstride, nt, y0 + 2 * tx,
                              y1 + 2 * tx if y1 != NULL else NULL, ncols,
                              bp[mm] if bp != NULL else 0.0, lo, hi, clamp)
