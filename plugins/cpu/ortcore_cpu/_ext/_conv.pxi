# The convolution helpers, included by conv.pyx (the portable build) and by
# conv_avx2.pyx / conv_avx512.pyx (the same source built for newer
# CPUs, see setup.py). Documented in conv.pyx.

from cython.parallel cimport parallel, prange, threadid
from libc.math cimport INFINITY
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcpy, memset

include "_index.pxi"
include "_steal.pxi"

# floats before and after each thread's buffer: a 64-byte cache line, so that
# buffers malloc'd side by side by two threads never share one (they did, and
# two threads ran slower than one)
cdef enum:
    _GUARD = 16


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


def bias_clamp(float[:, ::1] y, const float[::1] b, float lo, float hi, int nthreads):
    """Add ``b[r % M]`` (M = ``len(b)``, one value per output channel) to row r
    of ``y`` (N*M, spatial) and clamp it to [lo, hi], in place: a Conv's bias
    and its fused Relu or Clip in one pass. NaN stays NaN; ``b`` may be empty
    (no bias). Rows split over ``nthreads``."""
    cdef Py_ssize_t R = y.shape[0], L = y.shape[1], M = b.shape[0]
    cdef Py_ssize_t r, j
    cdef float bv, v
    cdef float* row
    cdef bint clamp = lo > -INFINITY or hi < INFINITY
    if M and R % M:
        raise ValueError(f"bias_clamp: {R} rows are not a multiple of {M} channels")
    if R == 0 or L == 0:
        return
    with nogil:
        for r in prange(R, num_threads=nthreads, schedule="static"):
            bv = b[r % M] if M else 0.0
            row = &y[r, 0]
            if clamp:
                for j in range(L):
                    v = row[j] + bv
                    v = lo if v < lo else v
                    row[j] = hi if v > hi else v
            else:
                for j in range(L):
                    row[j] = row[j] + bv


def bias_add_clamp(float[:, ::1] y, const float[::1] b, const float[:, ::1] z,
                   float lo, float hi, int nthreads):
    """Add ``b[r % M]`` and row r of ``z`` to row r of ``y`` (N*M, spatial) and
    clamp it to [lo, hi], in place: a Conv's bias, a residual of its output's
    shape and its fused Relu or Clip in one pass (FusedConvAdd). NaN stays NaN;
    ``b`` may be empty (no bias). Rows split over ``nthreads``."""
    cdef Py_ssize_t R = y.shape[0], L = y.shape[1], M = b.shape[0]
    cdef Py_ssize_t r, j
    cdef float bv, v
    cdef float* row
    cdef const float* zrow
    cdef bint clamp = lo > -INFINITY or hi < INFINITY
    if M and R % M:
        raise ValueError(f"bias_add_clamp: {R} rows are not a multiple of {M} channels")
    if z.shape[0] != R or z.shape[1] != L:
        raise ValueError(f"bias_add_clamp: z is {z.shape[0]}x{z.shape[1]}, y {R}x{L}")
    if R == 0 or L == 0:
        return
    with nogil:
        for r in prange(R, num_threads=nthreads, schedule="static"):
            bv = b[r % M] if M else 0.0
            row = &y[r, 0]
            zrow = &z[r, 0]
            if clamp:
                for j in range(L):
                    v = row[j] + bv + zrow[j]
                    v = lo if v < lo else v
                    row[j] = hi if v > hi else v
            else:
                for j in range(L):
                    row[j] = row[j] + bv + zrow[j]


# The algorithms, one file each: the depthwise stencils, the direct
# convolution (and the Conv fused with a max pool), the channel-vector
# convolution (which shares the direct convolution's scratch sizing)
include "_conv_depthwise.pxi"
include "_conv_direct.pxi"
include "_conv_cvec.pxi"
