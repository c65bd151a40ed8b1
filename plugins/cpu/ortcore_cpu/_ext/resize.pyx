"""Separable 2-D resampling of the last two axes of (planes, H, W) arrays,
float32 or float64: nearest (one tap per axis) and filtered (linear, cubic,
antialiased: any number of taps per axis, weights precomputed by the caller).

Rows of output planes are split over ``nthreads`` OpenMP threads with the
GIL released.
"""

from cython.parallel cimport prange

ctypedef fused real:
    float
    double


def resize_nearest(const real[:, :, ::1] x, const Py_ssize_t[::1] iy,
                   const Py_ssize_t[::1] ix, real[:, :, ::1] out, int nthreads):
    """``out[p, i, j] = x[p, iy[i], ix[j]]`` (indices already clamped)."""
    cdef Py_ssize_t P = out.shape[0], OH = out.shape[1], OW = out.shape[2]
    cdef Py_ssize_t H = x.shape[1], W = x.shape[2], t, p, i, j
    cdef const real* row
    cdef real* o
    if iy.shape[0] != OH or ix.shape[0] != OW or x.shape[0] != P:
        raise ValueError("resize_nearest: shapes differ")
    for i in range(OH):
        if iy[i] < 0 or iy[i] >= H:
            raise ValueError("resize_nearest: row index out of range")
    for j in range(OW):
        if ix[j] < 0 or ix[j] >= W:
            raise ValueError("resize_nearest: column index out of range")
    if P * OH * OW == 0:
        return
    with nogil:
        for t in prange(P * OH, num_threads=nthreads, schedule="static"):
            p = t // OH
            i = t - p * OH
            row = &x[p, iy[i], 0]
            o = &out[p, i, 0]
            for j in range(OW):
                o[j] = row[ix[j]]


def resize_taps(const real[:, :, ::1] x, const Py_ssize_t[:, ::1] ty,
                const real[:, ::1] wy, const Py_ssize_t[:, ::1] tx,
                const real[:, ::1] wx, real[:, :, ::1] out, int nthreads):
    """``out[p, i, j] = sum_a sum_b wy[i, a] wx[j, b] x[p, ty[i, a], tx[j, b]]``
    (tap indices already clamped to the input)."""
    cdef Py_ssize_t P = out.shape[0], OH = out.shape[1], OW = out.shape[2]
    cdef Py_ssize_t H = x.shape[1], W = x.shape[2], KY = ty.shape[1], KX = tx.shape[1]
    cdef Py_ssize_t t, p, i, j, a, b
    cdef const real* row
    cdef real* o
    cdef real acc, w
    if (ty.shape[0] != OH or tx.shape[0] != OW or x.shape[0] != P
            or wy.shape[0] != OH or wy.shape[1] != KY or wx.shape[0] != OW or wx.shape[1] != KX):
        raise ValueError("resize_taps: shapes differ")
    for i in range(OH):
        for a in range(KY):
            if ty[i, a] < 0 or ty[i, a] >= H:
                raise ValueError("resize_taps: row tap out of range")
    for j in range(OW):
        for b in range(KX):
            if tx[j, b] < 0 or tx[j, b] >= W:
                raise ValueError("resize_taps: column tap out of range")
    if P * OH * OW == 0:
        return
    with nogil:
        for t in prange(P * OH, num_threads=nthreads, schedule="static"):
            p = t // OH
            i = t - p * OH
            o = &out[p, i, 0]
            for j in range(OW):
                o[j] = 0
            for a in range(KY):
                row = &x[p, ty[i, a], 0]
                w = wy[i, a]
                for j in range(OW):
                    acc = 0
                    for b in range(KX):
                        acc = acc + wx[j, b] * row[tx[j, b]]
                    o[j] = o[j] + w * acc
