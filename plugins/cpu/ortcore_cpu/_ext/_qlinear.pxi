# QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear's loops
# (_qlinear.h), included by _qgemm.pxi: built per ISA with the GEMM.

cdef extern from "_qlinear.h" nogil:
    void ql_quantize(const float* x, Py_ssize_t n, float s, float zp, int out_signed, uint8_t* y)
    void ql_dequantize(const uint8_t* x, Py_ssize_t n, int xs, int32_t zp, float s, float* y)
    int ql_minmax(const float* x, Py_ssize_t n, float* lo, float* hi)

cdef enum:
    QL_CHUNK = 32768


cdef Py_ssize_t _blocks(Py_ssize_t n, Py_ssize_t inner, Py_ssize_t chans, Py_ssize_t* size):
    """Work blocks for n values in channel runs of ``inner``: one per run
    when there is more than one channel, else chunks of QL_CHUNK."""
    if chans > 1:
        size[0] = inner
        return n // inner if inner else 0
    size[0] = QL_CHUNK
    return (n + QL_CHUNK - 1) // QL_CHUNK


def quantize(const float[::1] x, const float[::1] scale, const float[::1] zero, bint out_signed,
             uint8_t[::1] y, Py_ssize_t inner, int nthreads=1):
    """``y = saturate(rint(x / scale) + zero)`` over float32 ``x`` (flat),
    into uint8 or int8 bytes ``y`` (``out_signed``): ``scale`` and ``zero``
    (float32, C values each) per tensor (C = 1) or per channel, channel
    c covering the runs of ``inner`` values b with b % C == c. Rounding
    half to even; NaN gives 0."""
    cdef Py_ssize_t n = x.shape[0], C = scale.shape[0], size, b, blocks, lo, hi
    if y.shape[0] != n or zero.shape[0] != C or C < 1 or (C > 1 and n % (inner * C)):
        raise ValueError("quantize: shapes disagree")
    if n == 0:
        return
    blocks = _blocks(n, inner, C, &size)
    with nogil:
        for b in prange(blocks, num_threads=max(1, min(nthreads, blocks)), schedule="static"):
            lo = b * size
            hi = min(lo + size, n)
            ql_quantize(&x[lo], hi - lo, scale[b % C], zero[b % C], out_signed, &y[lo])


def dequantize(const uint8_t[::1] x, bint signed, const int32_t[::1] zero,
               const float[::1] scale, float[::1] y, Py_ssize_t inner, int nthreads=1):
    """``y = (float)(x - zero) * scale`` over 8-bit ``x`` (bytes read as
    ``signed`` says, flat) into float32 ``y``; ``zero`` and ``scale`` per
    tensor or per channel as :func:`quantize`'s."""
    cdef Py_ssize_t n = x.shape[0], C = scale.shape[0], size, b, blocks, lo, hi
    if y.shape[0] != n or zero.shape[0] != C or C < 1 or (C > 1 and n % (inner * C)):
        raise ValueError("dequantize: shapes disagree")
    if n == 0:
        return
    blocks = _blocks(n, inner, C, &size)
    with nogil:
        for b in prange(blocks, num_threads=max(1, min(nthreads, blocks)), schedule="static"):
            lo = b * size
            hi = min(lo + size, n)
            ql_dequantize(&x[lo], hi - lo, signed, zero[b % C], scale[b % C], &y[lo])


def minmax(const float[::1] x, int nthreads=1):
    """(least, greatest, any NaN) of float32 ``x`` (not empty)."""
    cdef Py_ssize_t n = x.shape[0], size, b, blocks, lo, hi
    if n == 0:
        raise ValueError("minmax: no values")
    blocks = _blocks(n, n, 1, &size)
    parts = np.empty((blocks, 2), np.float32)
    nans = np.zeros(blocks, np.int32)
    cdef float[:, ::1] pv = parts
    cdef int32_t[::1] nv = nans
    with nogil:
        for b in prange(blocks, num_threads=max(1, min(nthreads, blocks)), schedule="static"):
            lo = b * size
            hi = min(lo + size, n)
            nv[b] = ql_minmax(&x[lo], hi - lo, &pv[b, 0], &pv[b, 1])
    return np.float32(parts[:, 0].min()), np.float32(parts[:, 1].max()), bool(nans.any())
