"""Convolution helpers: im2col / col2im for 3-D spatial data, direct depthwise 2-D.

All functions work on one image at a time, release the GIL and split their
outer loop over ``nthreads`` OpenMP threads. 1-D and 2-D convolutions use the
3-D functions with leading spatial extents of 1.
"""

from cython.parallel cimport prange
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
    if col.shape[0] != rows or col.shape[1] != od * oh * ow:
        raise ValueError("im2col: col has the wrong shape")
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
    if col.shape[0] != C * ksize or col.shape[1] != od * oh * ow:
        raise ValueError("col2im: col has the wrong shape")
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
    zeroed (or hold the bias)."""
    cdef Py_ssize_t C = x.shape[0], H = x.shape[1], W = x.shape[2]
    cdef Py_ssize_t kh = w.shape[1], kw = w.shape[2]
    cdef Py_ssize_t oh = out.shape[1], ow = out.shape[2]
    cdef Py_ssize_t c, y, ky, kx, iy, x_off, lo, hi, i
    cdef float wv
    cdef float* dst
    cdef const float* src
    if w.shape[0] != C or out.shape[0] != C:
        raise ValueError("depthwise2d: channel counts differ")
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
                        x_off = kx * dw - pw
                        lo = _first_valid(x_off, sw)
                        hi = _end_valid(x_off, sw, W, ow)
                        if sw == 1:
                            for i in range(lo, hi):
                                dst[i] = dst[i] + wv * src[i + x_off]
                        else:
                            for i in range(lo, hi):
                                dst[i] = dst[i] + wv * src[i * sw + x_off]
