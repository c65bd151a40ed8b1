# The pooling kernels, included by pool.pyx (the portable build) and by
# pool_avx2.pyx / pool_avx512.pyx (the same source built for newer
# CPUs, see setup.py). Documented in pool.pyx.

from cython.parallel cimport parallel, prange, threadid
from libc.math cimport INFINITY, NAN
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy  # used by _index.pxi

include "_index.pxi"
include "_steal.pxi"

# floats before and after each thread's buffer: a 64-byte cache line, so that
# buffers malloc'd side by side by two threads never share one (they did, and
# two threads ran slower than one)
cdef enum:
    _GUARD = 16

# Largest output plane (positions) of the masked-load stride-1 path
# (_pool2d_masked). 3x3 windows, 2 threads, AVX-512 Xeon, against the
# paths before it: 7x7 to 56x56 planes 0.62-0.88x the time, 112x112
# 1.35x, 224x224 1.9x (nine loads a vector of outputs, where the two-pass
# row path, its pass down the rows then along them, does six)
cdef enum:
    _POOL_MASKED_MAX = 3136


cdef inline Py_ssize_t _hi(Py_ssize_t off, Py_ssize_t d, Py_ssize_t k, Py_ssize_t size,
                          Py_ssize_t lo) noexcept nogil:
    """One past the last kernel tap of a window starting at ``off`` inside [0, size)."""
    cdef Py_ssize_t hi = _end_valid(off, d, size, k)
    return hi if hi > lo else lo


cdef Py_ssize_t* _row_taps(Py_ssize_t k, Py_ssize_t s, Py_ssize_t p, Py_ssize_t d,
                           Py_ssize_t size, Py_ssize_t count) except NULL:
    """For each kernel column kx, the output range [lo, hi) whose input
    index i * s - p + kx * d lies in [0, size); stored as pairs (malloc'd)."""
    cdef Py_ssize_t* taps = <Py_ssize_t*>malloc((2 * k + 2) * sizeof(Py_ssize_t))
    cdef Py_ssize_t kx, off
    if taps == NULL:
        raise MemoryError()
    for kx in range(k):
        off = kx * d - p
        taps[2 * kx] = _first_valid(off, s)
        if taps[2 * kx] > count:
            taps[2 * kx] = count
        taps[2 * kx + 1] = _end_valid(off, s, size, count)
        if taps[2 * kx + 1] < taps[2 * kx]:
            taps[2 * kx + 1] = taps[2 * kx]
    return taps


def max_pool(const float[:, :, :, ::1] x, float[:, :, :, ::1] out,
             Py_ssize_t kd, Py_ssize_t kh, Py_ssize_t kw,
             Py_ssize_t sd, Py_ssize_t sh, Py_ssize_t sw,
             Py_ssize_t pd, Py_ssize_t ph, Py_ssize_t pw,
             Py_ssize_t dd, Py_ssize_t dh, Py_ssize_t dw, int nthreads):
    """Max over each window; pads never win (an all-pad window gives -inf).

    Works a whole output row at a time so the innermost loop runs along
    the row and vectorizes."""
    cdef Py_ssize_t P = x.shape[0], D = x.shape[1], H = x.shape[2], W = x.shape[3]
    cdef Py_ssize_t od = out.shape[1], oh = out.shape[2], ow = out.shape[3]
    cdef Py_ssize_t p, z, y, i, kz, ky, kx, z0, zlo, zhi, y0, ylo, yhi, off, lo, hi
    cdef float v
    cdef float* dst
    cdef const float* src
    cdef Py_ssize_t* taps
    _check_window("max_pool", kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw)
    if out.shape[0] != P:
        raise ValueError("max_pool: x and out have different plane counts")
    _check_reach("max_pool", (D, H, W), (od, oh, ow), (kd, kh, kw), (sd, sh, sw), (pd, ph, pw),
                 (0, 0, 0), (dd, dh, dw))
    if _masked_path(D, od, kd, sd, pd, P, W, oh, ow, kh, kw, sh, sw):
        _pool2d_masked(x, out, kh, kw, ph, pw, dh, dw, True, NULL, NULL, nthreads)
        return
    if _plane_path(D, od, kd, sd, pd, sh, sw, P, oh, ow) and _flat_fits(H, W, oh, ow, kh, kw, dh, dw):
        _pool2d_flat(x, out, kh, kw, ph, pw, dh, dw, True, NULL, NULL, nthreads)
        return
    if _row_path(D, od, kd, sd, pd, P, oh, ow, W, kw, sw, pw, dw):
        _pool2d_rows(x, out, kh, kw, sh, sw, ph, pw, dh, dw, True, NULL, NULL, nthreads)
        return
    taps = _row_taps(kw, sw, pw, dw, W, ow)
    try:
      with nogil:
        for p in prange(P, num_threads=nthreads, schedule="static"):
            for z in range(od):
                z0 = z * sd - pd
                zlo = _first_valid(z0, dd)
                zhi = _hi(z0, dd, kd, D, zlo)
                for y in range(oh):
                    y0 = y * sh - ph
                    ylo = _first_valid(y0, dh)
                    yhi = _hi(y0, dh, kh, H, ylo)
                    dst = &out[p, z, y, 0]
                    for i in range(ow):
                        dst[i] = -INFINITY
                    for kz in range(zlo, zhi):
                        for ky in range(ylo, yhi):
                            src = &x[p, z0 + kz * dd, y0 + ky * dh, 0]
                            for kx in range(kw):
                                off = kx * dw - pw
                                lo = taps[2 * kx]
                                hi = taps[2 * kx + 1]
                                if sw == 1:
                                    for i in range(lo, hi):
                                        v = src[i + off]
                                        dst[i] = v if v > dst[i] else dst[i]
                                else:
                                    for i in range(lo, hi):
                                        v = src[i * sw + off]
                                        dst[i] = v if v > dst[i] else dst[i]
    finally:
        free(taps)


def max_pool_indices(const float[:, :, :, ::1] x, float[:, :, :, ::1] out,
                     int64_t[:, :, :, ::1] indices, bint column_major,
                     Py_ssize_t kd, Py_ssize_t kh, Py_ssize_t kw,
                     Py_ssize_t sd, Py_ssize_t sh, Py_ssize_t sw,
                     Py_ssize_t pd, Py_ssize_t ph, Py_ssize_t pw,
                     Py_ssize_t dd, Py_ssize_t dh, Py_ssize_t dw, int nthreads):
    """:func:`max_pool` that also stores in ``indices`` the flat index of each
    max over (N*C, D, H, W), row-major or (``column_major``) with the spatial
    dims in column-major order; the first of equal maxima wins."""
    cdef Py_ssize_t P = x.shape[0], D = x.shape[1], H = x.shape[2], W = x.shape[3]
    cdef Py_ssize_t od = out.shape[1], oh = out.shape[2], ow = out.shape[3]
    cdef Py_ssize_t p, z, y, i, kz, ky, kx, iz, iy, ix, best_at
    cdef Py_ssize_t z0, zlo, zhi, y0, ylo, yhi, x0, xlo, xhi
    cdef float best, v
    _check_window("max_pool_indices", kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw)
    if out.shape[0] != P:
        raise ValueError("max_pool_indices: x and out have different plane counts")
    if indices.shape[0] != P or indices.shape[1] != od or indices.shape[2] != oh or indices.shape[3] != ow:
        raise ValueError("max_pool_indices: indices and out have different shapes")
    _check_reach("max_pool_indices", (D, H, W), (od, oh, ow), (kd, kh, kw), (sd, sh, sw),
                 (pd, ph, pw), (0, 0, 0), (dd, dh, dw))
    with nogil:
        for p in prange(P, num_threads=nthreads, schedule="static"):
            for z in range(od):
                z0 = z * sd - pd
                zlo = _first_valid(z0, dd)
                zhi = _hi(z0, dd, kd, D, zlo)
                for y in range(oh):
                    y0 = y * sh - ph
                    ylo = _first_valid(y0, dh)
                    yhi = _hi(y0, dh, kh, H, ylo)
                    for i in range(ow):
                        x0 = i * sw - pw
                        xlo = _first_valid(x0, dw)
                        xhi = _hi(x0, dw, kw, W, xlo)
                        best = -INFINITY
                        best_at = -1
                        for kz in range(zlo, zhi):
                            iz = z0 + kz * dd
                            for ky in range(ylo, yhi):
                                iy = y0 + ky * dh
                                for kx in range(xlo, xhi):
                                    ix = x0 + kx * dw
                                    v = x[p, iz, iy, ix]
                                    if v > best or best_at < 0:
                                        best = v
                                        if column_major:
                                            best_at = (ix * H + iy) * D + iz
                                        else:
                                            best_at = (iz * H + iy) * W + ix
                        out[p, z, y, i] = best
                        indices[p, z, y, i] = p * D * H * W + (best_at if best_at >= 0 else 0)


def avg_pool(const float[:, :, :, ::1] x, float[:, :, :, ::1] out,
             Py_ssize_t kd, Py_ssize_t kh, Py_ssize_t kw,
             Py_ssize_t sd, Py_ssize_t sh, Py_ssize_t sw,
             Py_ssize_t pd, Py_ssize_t ph, Py_ssize_t pw,
             Py_ssize_t ed, Py_ssize_t eh, Py_ssize_t ew,
             Py_ssize_t dd, Py_ssize_t dh, Py_ssize_t dw,
             bint count_include_pad, int nthreads):
    """Mean over each window. ``pd..pw`` are the leading pads and ``ed..ew`` the
    trailing ones: with ``count_include_pad`` the divisor counts window
    positions inside the padded extent, otherwise only those inside the data.
    Works a whole output row at a time, like :func:`max_pool`."""
    cdef Py_ssize_t P = x.shape[0], D = x.shape[1], H = x.shape[2], W = x.shape[3]
    cdef Py_ssize_t od = out.shape[1], oh = out.shape[2], ow = out.shape[3]
    cdef Py_ssize_t p, z, y, i, kz, ky, kx, z0, zlo, zhi, y0, ylo, yhi, off, lo, hi
    cdef Py_ssize_t nz, ny, nx, x0, xlo
    cdef float* dst
    cdef const float* src
    cdef float inv
    cdef float* inv_y
    cdef Py_ssize_t* taps
    cdef float* inv_x
    cdef bint use_rows, use_flat, masked
    _check_window("avg_pool", kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw)
    if out.shape[0] != P:
        raise ValueError("avg_pool: x and out have different plane counts")
    if ed < 0 or eh < 0 or ew < 0:
        raise ValueError(f"avg_pool: end pads must be >= 0, got {(ed, eh, ew)}")
    _check_reach("avg_pool", (D, H, W), (od, oh, ow), (kd, kh, kw), (sd, sh, sw), (pd, ph, pw),
                 (ed, eh, ew), (dd, dh, dw))
    taps = _row_taps(kw, sw, pw, dw, W, ow)
    inv_x = <float*>malloc((ow + 1) * sizeof(float))
    if taps == NULL or inv_x == NULL:
        free(taps)
        free(inv_x)
        raise MemoryError()
    for i in range(ow):
        x0 = i * sw - pw
        xlo = _first_valid(x0, dw)
        if count_include_pad:
            nx = _end_valid(x0, dw, W + ew, kw)
        else:
            nx = _hi(x0, dw, kw, W, xlo) - xlo
        inv_x[i] = 1.0 / nx if nx > 0 else 0.0
    # the masked loads (AVX-512); else small stride-1 planes as flat rows,
    # other 2-D windows row by row
    masked = _masked_path(D, od, kd, sd, pd, P, W, oh, ow, kh, kw, sh, sw)
    use_flat = (not masked and _plane_path(D, od, kd, sd, pd, sh, sw, P, oh, ow)
                and _flat_fits(H, W, oh, ow, kh, kw, dh, dw))
    use_rows = (not masked and not use_flat
                and _row_path(D, od, kd, sd, pd, P, oh, ow, W, kw, sw, pw, dw))
    if masked or use_flat or use_rows:
        inv_y = <float*>malloc((oh + 1) * sizeof(float))
        if inv_y == NULL:
            free(taps)
            free(inv_x)
            raise MemoryError()
        for y in range(oh):
            y0 = y * sh - ph
            ylo = _first_valid(y0, dh)
            ny = _end_valid(y0, dh, H + eh, kh) if count_include_pad else _hi(y0, dh, kh, H, ylo) - ylo
            inv_y[y] = 1.0 / ny if ny > 0 else 0.0
        try:
            if masked:
                _pool2d_masked(x, out, kh, kw, ph, pw, dh, dw, False, inv_y, inv_x, nthreads)
            elif use_flat:
                _pool2d_flat(x, out, kh, kw, ph, pw, dh, dw, False, inv_y, inv_x, nthreads)
            else:
                _pool2d_rows(x, out, kh, kw, sh, sw, ph, pw, dh, dw, False, inv_y, inv_x,
                             nthreads)
        finally:
            free(taps)
            free(inv_x)
            free(inv_y)
        return
    try:
      with nogil:
        for p in prange(P, num_threads=nthreads, schedule="static"):
            for z in range(od):
                z0 = z * sd - pd
                zlo = _first_valid(z0, dd)
                zhi = _hi(z0, dd, kd, D, zlo)
                nz = _end_valid(z0, dd, D + ed, kd) if count_include_pad else zhi - zlo
                for y in range(oh):
                    y0 = y * sh - ph
                    ylo = _first_valid(y0, dh)
                    yhi = _hi(y0, dh, kh, H, ylo)
                    ny = _end_valid(y0, dh, H + eh, kh) if count_include_pad else yhi - ylo
                    dst = &out[p, z, y, 0]
                    for i in range(ow):
                        dst[i] = 0.0
                    for kz in range(zlo, zhi):
                        for ky in range(ylo, yhi):
                            src = &x[p, z0 + kz * dd, y0 + ky * dh, 0]
                            for kx in range(kw):
                                off = kx * dw - pw
                                lo = taps[2 * kx]
                                hi = taps[2 * kx + 1]
                                if sw == 1:
                                    for i in range(lo, hi):
                                        dst[i] = dst[i] + src[i + off]
                                else:
                                    for i in range(lo, hi):
                                        dst[i] = dst[i] + src[i * sw + off]
                    inv = 1.0 / (<double>nz * ny) if nz > 0 and ny > 0 else 0.0
                    for i in range(ow):
                        dst[i] = dst[i] * (inv_x[i] * inv)
    finally:
        free(taps)
        free(inv_x)


cdef inline bint _plane_path(Py_ssize_t D, Py_ssize_t od, Py_ssize_t kd, Py_ssize_t sd,
                             Py_ssize_t pd, Py_ssize_t sh, Py_ssize_t sw, Py_ssize_t P,
                             Py_ssize_t oh, Py_ssize_t ow) noexcept:
    """Whether a pooling is 2-D with stride 1 (and not empty): the padded-plane path."""
    return (D == 1 and od == 1 and kd == 1 and sd == 1 and pd == 0 and sh == 1 and sw == 1
            and P > 0 and oh > 0 and ow > 0)


cdef void _pool2d_flat(const float[:, :, :, ::1] x, float[:, :, :, ::1] out,
                       Py_ssize_t kh, Py_ssize_t kw, Py_ssize_t ph, Py_ssize_t pw,
                       Py_ssize_t dh, Py_ssize_t dw, bint take_max,
                       const float* inv_y, const float* inv_x, int nthreads) except *:
    """Stride-1 2-D max (``take_max``) or average pooling whose output is as
    wide as its input, each plane read as one flat row (``st_pool`` of
    ``_stencil.h``, on a copy of the plane with a margin of pads): no
    row-by-row padded copy, and loops as long as the plane, which matters
    on small planes. Averages are scaled by ``inv_y[y] * inv_x[i]``."""
    cdef Py_ssize_t P = x.shape[0], H = x.shape[2], W = x.shape[3]
    cdef Py_ssize_t oh = out.shape[2], ow = out.shape[3]
    cdef Py_ssize_t p, y, j
    cdef unsigned char* masks = <unsigned char*>malloc(kw * oh * ow)
    cdef float* inv = NULL
    cdef float* buf = NULL
    cdef Py_ssize_t before, after
    cdef int n = nthreads if nthreads > 1 else 1, tid
    cdef void* raw = NULL
    cdef ws_share* shares
    if masks == NULL:
        raise MemoryError()
    if not take_max:
        inv = <float*>malloc(oh * ow * sizeof(float))
        if inv == NULL:
            free(masks)
            raise MemoryError()
        for y in range(oh):
            for j in range(ow):
                inv[y * ow + j] = inv_x[j] * inv_y[y]
    st_masks(masks, oh * ow, W, kw, dw, pw)
    st_margins(H, W, oh, kh, kw, dh, dw, ph, pw, &before, &after)
    try:
        raw = _shares(n, P)
        shares = ws_align(raw)
        with nogil, parallel(num_threads=n):
            # one buffer per thread, guarded (_GUARD); a thread without one
            # takes no planes (the others take its share)
            buf = <float*>malloc((before + H * W + after + 2 * _GUARD) * sizeof(float))
            if buf != NULL:
                tid = threadid()
                p = ws_next(shares, n, tid)
                while p >= 0:
                    st_pool(&x[p, 0, 0, 0], &out[p, 0, 0, 0], buf + _GUARD, masks, H, W, oh, kh,
                            kw, dh, dw, ph, pw, take_max, inv)
                    p = ws_next(shares, n, tid)
                free(buf)
        if ws_left(shares, n):
            raise MemoryError()
    finally:
        free(masks)
        free(inv)
        free(raw)


cdef bint _masked_path(Py_ssize_t D, Py_ssize_t od, Py_ssize_t kd, Py_ssize_t sd,
                       Py_ssize_t pd, Py_ssize_t P, Py_ssize_t W, Py_ssize_t oh, Py_ssize_t ow,
                       Py_ssize_t kh, Py_ssize_t kw, Py_ssize_t sh, Py_ssize_t sw):
    """Whether a pooling takes the AVX-512 build's masked-load path
    (``_pool2d_masked``): 2-D, stride 1, the output as wide as the input and
    at most ``_POOL_MASKED_MAX`` positions, its masks (a vector's taps)
    within ``_MAX_PLANE`` (in Python integers: they can overflow)."""
    return (ST_DW16 and D == 1 and od == 1 and kd == 1 and sd == 1 and pd == 0
            and sh == 1 and sw == 1 and P > 0 and oh > 0 and ow == W
            and <object>oh * W <= _POOL_MASKED_MAX
            and <object>st_dw_vectors16(oh * W) * kh * kw <= _MAX_PLANE)


cdef void _pool2d_masked(const float[:, :, :, ::1] x, float[:, :, :, ::1] out,
                         Py_ssize_t kh, Py_ssize_t kw, Py_ssize_t ph, Py_ssize_t pw,
                         Py_ssize_t dh, Py_ssize_t dw, bint take_max,
                         const float* inv_y, const float* inv_x, int nthreads) except *:
    """Stride-1 2-D max (``take_max``) or average pooling whose output is as
    wide as its input, in the AVX-512 build: each plane is read where it is
    as one flat row of vectors, every tap a masked load (``st_pool_flat16``
    of ``_stencil.h``, on the depthwise kernels' masks, made once for all
    planes) in which a lane whose input is outside the plane is the pad
    (-inf, or 0 for a sum). Averages are scaled by ``inv_y[y] * inv_x[i]``.
    No plane is copied and no thread needs a buffer; the planes are shared
    out with stealing (``_steal.h``)."""
    cdef Py_ssize_t P = x.shape[0], H = x.shape[2], W = x.shape[3]
    cdef Py_ssize_t oh = out.shape[2], ow = out.shape[3]
    cdef Py_ssize_t T = kh * kw, L = oh * W
    cdef Py_ssize_t p, y, j
    cdef int n = nthreads if nthreads > 1 else 1, tid
    cdef void* raw = NULL
    cdef ws_share* shares
    cdef Py_ssize_t count = st_dw_vectors16(L) * T
    cdef uint16_t* masks = <uint16_t*>malloc(count * sizeof(uint16_t))
    cdef Py_ssize_t* off = <Py_ssize_t*>malloc(T * sizeof(Py_ssize_t))
    cdef float* inv = NULL
    if masks == NULL or off == NULL:
        free(masks)
        free(off)
        raise MemoryError()
    try:
        st_dw_masks16(masks, off, H, W, oh, kh, kw, dh, dw, ph, pw)
        if not take_max:  # each flat position's divisor
            inv = <float*>malloc(L * sizeof(float))
            if inv == NULL:
                raise MemoryError()
            for y in range(oh):
                for j in range(W):
                    inv[y * W + j] = inv_x[j] * inv_y[y]
        raw = _shares(n, P)
        shares = ws_align(raw)
        with nogil, parallel(num_threads=n):
            tid = threadid()
            p = ws_next(shares, n, tid)
            while p >= 0:
                st_pool_flat16(&x[p, 0, 0, 0], &out[p, 0, 0, 0], masks, off, L, T, take_max, inv)
                p = ws_next(shares, n, tid)
    finally:
        free(masks)
        free(off)
        free(inv)
        free(raw)


cdef bint _row_path(Py_ssize_t D, Py_ssize_t od, Py_ssize_t kd, Py_ssize_t sd,
                    Py_ssize_t pd, Py_ssize_t P, Py_ssize_t oh, Py_ssize_t ow, Py_ssize_t W,
                    Py_ssize_t kw, Py_ssize_t sw, Py_ssize_t pw, Py_ssize_t dw):
    """Whether a pooling is 2-D (and not empty) with a padded row of at most
    ``_MAX_PLANE`` floats (in Python integers: it can overflow): the row path."""
    if not (D == 1 and od == 1 and kd == 1 and sd == 1 and pd == 0
            and P > 0 and oh > 0 and ow > 0):
        return False
    return _row_width(W, ow, kw, sw, pw, dw) <= _MAX_PLANE


cdef object _row_width(Py_ssize_t W, Py_ssize_t ow, Py_ssize_t kw, Py_ssize_t sw,
                       Py_ssize_t pw, Py_ssize_t dw):
    """Floats of the row path's padded row: the data after ``pw`` pads, and
    every column an output reads."""
    return max(<object>pw + W, (<object>ow - 1) * sw + (<object>kw - 1) * dw + 1)


cdef extern from "_pool.h" nogil:
    enum:
        PL_SLACK
    Py_ssize_t pl_block_rows(Py_ssize_t rs, Py_ssize_t OH)
    void pl_plane(const float* x, Py_ssize_t H, Py_ssize_t W, float* y, Py_ssize_t OH,
                  Py_ssize_t OW, Py_ssize_t kh, Py_ssize_t kw, Py_ssize_t sh, Py_ssize_t sw,
                  Py_ssize_t ph, Py_ssize_t pw, Py_ssize_t dh, Py_ssize_t dw, int take_max,
                  const float* inv_y, const float* inv_x, float* row, Py_ssize_t Wr)


cdef inline void _fill(float* buf, Py_ssize_t n, float value) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(n):
        buf[j] = value


cdef void _pool2d_rows(const float[:, :, :, ::1] x, float[:, :, :, ::1] out,
                       Py_ssize_t kh, Py_ssize_t kw, Py_ssize_t sh, Py_ssize_t sw,
                       Py_ssize_t ph, Py_ssize_t pw, Py_ssize_t dh, Py_ssize_t dw,
                       bint take_max, const float* inv_y, const float* inv_x,
                       int nthreads) except *:
    """2-D max (``take_max``) or average pooling, any strides, one output row
    at a time in two passes (``pl_plane`` of ``_pool.h``): the window's input
    rows are combined column by column into a padded row, then each output
    takes its ``kw`` taps from that row, both passes in whole vectors. Pads
    are -inf for max (they, and NaN, never win) and 0 for average, whose
    sums are then scaled by ``inv_y[y] * inv_x[i]``. Per output this reads
    ``kh * W / ow + kw`` values where the general loop reads ``kh * kw``."""
    cdef Py_ssize_t P = x.shape[0], H = x.shape[2], W = x.shape[3]
    cdef Py_ssize_t oh = out.shape[2], ow = out.shape[3]
    cdef Py_ssize_t Wr = _row_width(W, ow, kw, sw, pw, dw)
    cdef Py_ssize_t size = pl_block_rows(Wr + PL_SLACK, oh) * (Wr + PL_SLACK)
    cdef Py_ssize_t p
    cdef float fill = -INFINITY if take_max else 0.0
    cdef float* mem = NULL
    cdef int n = nthreads if nthreads > 1 else 1, tid
    cdef void* raw = _shares(n, P)
    cdef ws_share* shares = ws_align(raw)
    try:
        with nogil, parallel(num_threads=n):
            # one buffer per thread, guarded (_GUARD), holding the pads; a
            # thread without one takes no planes (the others take its share)
            mem = <float*>malloc((size + 2 * _GUARD) * sizeof(float))
            if mem != NULL:
                _fill(mem + _GUARD, size, fill)
                tid = threadid()
                p = ws_next(shares, n, tid)
                while p >= 0:
                    pl_plane(&x[p, 0, 0, 0], H, W, &out[p, 0, 0, 0], oh, ow, kh, kw, sh, sw, ph,
                             pw, dh, dw, take_max, inv_y, inv_x, mem + _GUARD, Wr)
                    p = ws_next(shares, n, tid)
                free(mem)
        if ws_left(shares, n):
            raise MemoryError()
    finally:
        free(raw)


cdef inline double _row_sum(const float* r, Py_ssize_t L) noexcept nogil:
    # eight independent sums (in double): the adds overlap instead of waiting
    # on one another, and the compiler may vectorize them
    cdef double a[8]
    cdef Py_ssize_t j = 0, k
    for k in range(8):
        a[k] = 0
    while j + 8 <= L:
        for k in range(8):
            a[k] += r[j + k]
        j += 8
    while j < L:
        a[0] += r[j]
        j += 1
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))


cdef inline float _row_max(const float* r, Py_ssize_t L) noexcept nogil:
    # eight independent running maxima without branches (v > m ? v : m is
    # one max instruction), NaNs counted on the side: a NaN makes it NaN
    cdef float m[8]
    cdef float v
    cdef int nans = 0
    cdef Py_ssize_t j = 0, k
    for k in range(8):
        m[k] = -INFINITY
    while j + 8 <= L:
        for k in range(8):
            v = r[j + k]
            m[k] = v if v > m[k] else m[k]
            nans |= v != v
        j += 8
    while j < L:
        v = r[j]
        m[0] = v if v > m[0] else m[0]
        nans |= v != v
        j += 1
    if nans:
        return NAN
    for k in range(1, 8):
        m[0] = m[k] if m[k] > m[0] else m[0]
    return m[0]


def global_pool(const float[:, ::1] x, float[::1] out, bint take_max, int nthreads):
    """Mean (or max) of each row of ``x`` (N*C, spatial) into ``out`` (N*C).
    Means are summed in double; a NaN in a row makes its max NaN."""
    cdef Py_ssize_t P = x.shape[0], L = x.shape[1]
    cdef Py_ssize_t p
    if out.shape[0] != P:
        raise ValueError("global_pool: x and out have different plane counts")
    if P == 0:
        return
    with nogil:
        for p in prange(P, num_threads=nthreads, schedule="static"):
            if take_max:
                out[p] = _row_max(&x[p, 0], L) if L else -INFINITY
            else:
                # 0/0 gives NaN for an empty plane
                out[p] = <float>((_row_sum(&x[p, 0], L) if L else 0.0) / L)
