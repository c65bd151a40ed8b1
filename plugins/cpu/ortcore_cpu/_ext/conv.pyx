"""Convolution helpers: im2col / col2im for 3-D spatial data, direct depthwise 2-D.

All functions work on one image at a time, release the GIL and split their
outer loop over ``nthreads`` OpenMP threads. 1-D and 2-D convolutions use the
3-D functions with leading spatial extents of 1.
"""

from cython.parallel cimport prange
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

include "_index.pxi"


def im2col(const float[:, :, :, ::1] x, float[:, ::1] col,
           Py_ssize_t kd, Py_ssize_t kh, Py_ssize_t kw,
           Py_ssize_t sd, Py_ssize_t sh, Py_ssize_t sw,
           Py_ssize_t pd, Py_ssize_t ph, Py_ssize_t pw,
           Py_ssize_t dd, Py_ssize_t dh, Py_ssize_t dw,
           Py_ssize_t od, Py_ssize_t oh, Py_ssize_t ow, int nthreads):
    """Unfold ``x`` (C, D, H, W) into ``col`` (C*kd*kh*kw, od*oh*ow); pads read as 0."""
    cdef Py_ssize_t C = x.shape[0], D = x.shape[1], H = x.shape[2], W = x.shape[3]
    cdef Py_ssize_t rows = C * kd * kh * kw, ksize = kd * kh * kw
    cdef Py_ssize_t r, c, k, kz, ky, kx, z, y, iz, iy, x_off, lo, hi, i
    cdef float* dst
    cdef const float* src
    _check_window("im2col", kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw)
    # in Python integers: the products of the arguments can overflow
    if col.shape[0] != C * <object>kd * kh * kw or col.shape[1] != <object>od * oh * ow:
        raise ValueError("im2col: col has the wrong shape")
    _check_reach("im2col", (D, H, W), (od, oh, ow), (kd, kh, kw), (sd, sh, sw), (pd, ph, pw),
                 (0, 0, 0), (dd, dh, dw))
    with nogil:
        for r in prange(rows, num_threads=nthreads, schedule="static"):
            c = r // ksize
            k = r - c * ksize
            kz = k // (kh * kw)
            ky = (k // kw) % kh
            kx = k % kw
            x_off = kx * dw - pw
            lo = _first_valid(x_off, sw)
            hi = _end_valid(x_off, sw, W, ow)
            if lo > ow:
                lo = ow
            if hi < lo:
                hi = lo
            for z in range(od):
                iz = z * sd - pd + kz * dd
                for y in range(oh):
                    dst = &col[r, (z * oh + y) * ow]
                    iy = y * sh - ph + ky * dh
                    if iz < 0 or iz >= D or iy < 0 or iy >= H:
                        memset(dst, 0, ow * sizeof(float))
                        continue
                    if lo > 0:
                        memset(dst, 0, lo * sizeof(float))
                    if hi < ow:
                        memset(dst + hi, 0, (ow - hi) * sizeof(float))
                    src = &x[c, iz, iy, 0]
                    if sw == 1:
                        if hi > lo:
                            memcpy(dst + lo, src + lo + x_off, (hi - lo) * sizeof(float))
                    else:
                        for i in range(lo, hi):
                            dst[i] = src[i * sw + x_off]


def col2im(const float[:, ::1] col, float[:, :, :, ::1] x,
           Py_ssize_t kd, Py_ssize_t kh, Py_ssize_t kw,
           Py_ssize_t sd, Py_ssize_t sh, Py_ssize_t sw,
           Py_ssize_t pd, Py_ssize_t ph, Py_ssize_t pw,
           Py_ssize_t dd, Py_ssize_t dh, Py_ssize_t dw,
           Py_ssize_t od, Py_ssize_t oh, Py_ssize_t ow, int nthreads):
    """Fold ``col`` (C*kd*kh*kw, od*oh*ow) back, adding into ``x`` (C, D, H, W).

    The adjoint of :func:`im2col`, used by ConvTranspose; ``x`` must start zeroed.
    """
    cdef Py_ssize_t C = x.shape[0], D = x.shape[1], H = x.shape[2], W = x.shape[3]
    cdef Py_ssize_t ksize = kd * kh * kw
    cdef Py_ssize_t r, c, k, kz, ky, kx, z, y, iz, iy, x_off, lo, hi, i
    cdef const float* src
    cdef float* dst
    _check_window("col2im", kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw)
    # in Python integers: the products of the arguments can overflow
    if col.shape[0] != C * <object>kd * kh * kw or col.shape[1] != <object>od * oh * ow:
        raise ValueError("col2im: col has the wrong shape")
    _check_reach("col2im", (D, H, W), (od, oh, ow), (kd, kh, kw), (sd, sh, sw), (pd, ph, pw),
                 (0, 0, 0), (dd, dh, dw))
    with nogil:
        for c in prange(C, num_threads=nthreads, schedule="static"):
            for k in range(ksize):
                r = c * ksize + k
                kz = k // (kh * kw)
                ky = (k // kw) % kh
                kx = k % kw
                x_off = kx * dw - pw
                lo = _first_valid(x_off, sw)
                hi = _end_valid(x_off, sw, W, ow)
                for z in range(od):
                    iz = z * sd - pd + kz * dd
                    if iz < 0 or iz >= D:
                        continue
                    for y in range(oh):
                        iy = y * sh - ph + ky * dh
                        if iy < 0 or iy >= H:
                            continue
                        src = &col[r, (z * oh + y) * ow]
                        dst = &x[c, iz, iy, 0]
                        for i in range(lo, hi):
                            dst[i * sw + x_off] += src[i]


def depthwise2d(const float[:, :, ::1] x, const float[:, :, ::1] w, float[:, :, ::1] out,
                Py_ssize_t sh, Py_ssize_t sw, Py_ssize_t ph, Py_ssize_t pw,
                Py_ssize_t dh, Py_ssize_t dw, int nthreads):
    """Depthwise 2-D convolution of one image: channel c of ``x`` (C, H, W) with
    filter ``w[c]`` (C, kh, kw) into ``out`` (C, oh, ow), which must start
    zeroed (or hold the bias).

    The valid output range of each filter column is the same for every
    channel and row, so it is computed once (no division in the loops)."""
    cdef Py_ssize_t C = x.shape[0], H = x.shape[1], W = x.shape[2]
    cdef Py_ssize_t kh = w.shape[1], kw = w.shape[2]
    cdef Py_ssize_t oh = out.shape[1], ow = out.shape[2]
    cdef Py_ssize_t c, y, ky, kx, iy, x_off, lo, hi, i
    cdef float wv
    cdef float* dst
    cdef const float* src
    cdef Py_ssize_t* bounds
    if w.shape[0] != C or out.shape[0] != C:
        raise ValueError("depthwise2d: channel counts differ")
    _check_window("depthwise2d", 1, kh, kw, 1, sh, sw, 0, ph, pw, 1, dh, dw)
    _check_reach("depthwise2d", (H, W), (oh, ow), (kh, kw), (sh, sw), (ph, pw), (0, 0), (dh, dw))
    if C == 0 or oh == 0 or ow == 0:
        return
    if sh == 1 and sw == 1 and _plane_fits(oh, ow, kh, kw, dh, dw):
        _depthwise2d_s1(x, w, out, ph, pw, dh, dw, nthreads)
        return
    bounds = <Py_ssize_t*>malloc(3 * kw * sizeof(Py_ssize_t))
    if bounds == NULL:
        raise MemoryError()
    for kx in range(kw):
        x_off = kx * dw - pw
        lo = _first_valid(x_off, sw)
        hi = _end_valid(x_off, sw, W, ow)
        if lo > ow:
            lo = ow
        if hi < lo:
            hi = lo
        bounds[3 * kx] = lo
        bounds[3 * kx + 1] = hi
        bounds[3 * kx + 2] = x_off
    try:
        with nogil:
            for c in prange(C, num_threads=nthreads, schedule="static"):
                for y in range(oh):
                    dst = &out[c, y, 0]
                    for ky in range(kh):
                        iy = y * sh - ph + ky * dh
                        if iy < 0 or iy >= H:
                            continue
                        src = &x[c, iy, 0]
                        for kx in range(kw):
                            wv = w[c, ky, kx]
                            lo = bounds[3 * kx]
                            hi = bounds[3 * kx + 1]
                            x_off = bounds[3 * kx + 2]
                            if sw == 1:
                                for i in range(lo, hi):
                                    dst[i] = dst[i] + wv * src[i + x_off]
                            else:
                                for i in range(lo, hi):
                                    dst[i] = dst[i] + wv * src[i * sw + x_off]
    finally:
        free(bounds)


cdef inline void _taps3x3(float* tmp, const float* pad, const float* k,
                          Py_ssize_t row, Py_ssize_t col, Py_ssize_t n) noexcept nogil:
    """``tmp[j] = sum of k[3a+b] * pad[j + a*row + b*col]`` for j < n (a 3x3 stencil)."""
    cdef Py_ssize_t j
    cdef float k0 = k[0], k1 = k[1], k2 = k[2], k3 = k[3], k4 = k[4]
    cdef float k5 = k[5], k6 = k[6], k7 = k[7], k8 = k[8]
    cdef const float* a = pad
    cdef const float* b = pad + row
    cdef const float* d = pad + 2 * row
    for j in range(n):
        tmp[j] = (k0 * a[j] + k1 * a[j + col] + k2 * a[j + 2 * col]
                  + k3 * b[j] + k4 * b[j + col] + k5 * b[j + 2 * col]
                  + k6 * d[j] + k7 * d[j + col] + k8 * d[j + 2 * col])


cdef void _depthwise2d_s1(const float[:, :, ::1] x, const float[:, :, ::1] w,
                          float[:, :, ::1] out, Py_ssize_t ph, Py_ssize_t pw,
                          Py_ssize_t dh, Py_ssize_t dw, int nthreads) except *:
    """Stride-1 depthwise convolution on a zero-padded copy of each channel.

    With the plane padded to width ``Wp``, every filter tap is one
    ``tmp[j] += w * pad[j + offset]`` over ``(oh - 1) * Wp + ow`` contiguous
    elements (columns past ``ow`` are computed and dropped), so the inner
    loop is long and vectorizes, instead of one short loop per output row.
    """
    cdef Py_ssize_t C = x.shape[0], H = x.shape[1], W = x.shape[2]
    cdef Py_ssize_t kh = w.shape[1], kw = w.shape[2]
    cdef Py_ssize_t oh = out.shape[1], ow = out.shape[2]
    # rows/columns of the padded plane that any output reads
    cdef Py_ssize_t Hp = oh + (kh - 1) * dh, Wp = ow + (kw - 1) * dw
    cdef Py_ssize_t L = (oh - 1) * Wp + ow
    cdef Py_ssize_t c, y, ky, kx, j, off
    cdef float wv
    cdef float* pad
    cdef float* tmp
    cdef float* dst
    cdef const float* src
    cdef bint failed = False
    with nogil:
        for c in prange(C, num_threads=nthreads, schedule="static"):
            pad = <float*>malloc((Hp * Wp + oh * Wp) * sizeof(float))
            if pad == NULL:
                failed = True
                continue
            tmp = pad + Hp * Wp
            _padded_plane(pad, &x[c, 0, 0], H, W, Hp, Wp, ph, pw, 0.0)
            if kh == 3 and kw == 3:
                # all nine taps in one pass: each tmp element written once
                _taps3x3(tmp, pad, &w[c, 0, 0], dh * Wp, dw, L)
            else:
                memset(tmp, 0, oh * Wp * sizeof(float))
                for ky in range(kh):
                    for kx in range(kw):
                        wv = w[c, ky, kx]
                        off = ky * dh * Wp + kx * dw
                        src = pad + off
                        for j in range(L):
                            tmp[j] = tmp[j] + wv * src[j]
            for y in range(oh):
                dst = &out[c, y, 0]
                for j in range(ow):
                    dst[j] = dst[j] + tmp[y * Wp + j]
            free(pad)
    if failed:
        raise MemoryError()
