"""Float32 elementwise kernels: binary arithmetic on same-shape, scalar and
per-channel operands, Relu, and a per-channel affine map (BatchNormalization).

Operation codes for the binary kernels: 0 add, 1 sub, 2 mul, 3 div. Loops run
with the GIL released, split over ``nthreads`` OpenMP threads in chunks.
"""

from cython.parallel cimport prange
from libc.math cimport erf as c_erf

DEF CHUNK = 32768

ADD = 0
SUB = 1
MUL = 2
DIV = 3


cdef inline void _vv(int op, float* o, const float* a, const float* b,
                     Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    if op == 0:
        for i in range(n):
            o[i] = a[i] + b[i]
    elif op == 1:
        for i in range(n):
            o[i] = a[i] - b[i]
    elif op == 2:
        for i in range(n):
            o[i] = a[i] * b[i]
    else:
        for i in range(n):
            o[i] = a[i] / b[i]


cdef inline void _vs(int op, float* o, const float* a, float s, bint swap,
                     Py_ssize_t n) noexcept nogil:
    """o = a (op) s, or s (op) a when ``swap``."""
    cdef Py_ssize_t i
    if op == 0:
        for i in range(n):
            o[i] = a[i] + s
    elif op == 2:
        for i in range(n):
            o[i] = a[i] * s
    elif op == 1:
        if swap:
            for i in range(n):
                o[i] = s - a[i]
        else:
            for i in range(n):
                o[i] = a[i] - s
    else:
        if swap:
            for i in range(n):
                o[i] = s / a[i]
        else:
            for i in range(n):
                o[i] = a[i] / s


def binary_same(int op, const float[::1] a, const float[::1] b, float[::1] out,
                int nthreads):
    """out = a (op) b for flat arrays of one length."""
    cdef Py_ssize_t n = out.shape[0], chunks = (n + CHUNK - 1) // CHUNK, k, lo, hi
    if a.shape[0] != n or b.shape[0] != n:
        raise ValueError("binary_same: lengths differ")
    with nogil:
        for k in prange(chunks, num_threads=nthreads, schedule="static"):
            lo = k * CHUNK
            hi = lo + CHUNK
            if hi > n:
                hi = n
            _vv(op, &out[lo], &a[lo], &b[lo], hi - lo)


def binary_rows(int op, const float[:, ::1] full, const float[::1] small, float[:, ::1] out,
                bint swap, int nthreads):
    """Row r of ``out`` = row r of ``full`` (op) ``small[r % len(small)]``
    (operands swapped when ``swap``). A scalar operand is one row per chunk
    with ``len(small) == 1``; a per-channel one is (N*C, H*W) with ``len == C``."""
    cdef Py_ssize_t R = full.shape[0], I = full.shape[1], C = small.shape[0], r
    if out.shape[0] != R or out.shape[1] != I or C == 0:
        raise ValueError("binary_rows: bad shapes")
    with nogil:
        for r in prange(R, num_threads=nthreads, schedule="static"):
            _vs(op, &out[r, 0], &full[r, 0], small[r % C], swap, I)


def relu(const float[::1] x, float[::1] out, int nthreads):
    """out = max(x, 0); NaN stays NaN."""
    cdef Py_ssize_t n = out.shape[0], chunks = (n + CHUNK - 1) // CHUNK, k, lo, hi, i
    if x.shape[0] != n:
        raise ValueError("relu: lengths differ")
    with nogil:
        for k in prange(chunks, num_threads=nthreads, schedule="static"):
            lo = k * CHUNK
            hi = lo + CHUNK
            if hi > n:
                hi = n
            for i in range(lo, hi):
                out[i] = 0.0 if x[i] < 0.0 else x[i]


def channel_affine(const float[:, ::1] x, const float[::1] scale, const float[::1] shift,
                   float[:, ::1] out, int nthreads):
    """Row r of ``out`` = row r of ``x`` * scale[c] + shift[c], c = r % len(scale)."""
    cdef Py_ssize_t R = x.shape[0], I = x.shape[1], C = scale.shape[0], r, i, c
    cdef float s, t
    cdef const float* src
    cdef float* dst
    if shift.shape[0] != C or C == 0 or out.shape[0] != R or out.shape[1] != I:
        raise ValueError("channel_affine: bad shapes")
    with nogil:
        for r in prange(R, num_threads=nthreads, schedule="static"):
            c = r % C
            s = scale[c]
            t = shift[c]
            src = &x[r, 0]
            dst = &out[r, 0]
            for i in range(I):
                dst[i] = src[i] * s + t


ctypedef fused real:
    float
    double


def erf(const real[::1] x, real[::1] out, int nthreads):
    """out = erf(x) (C99 ``erf``)."""
    cdef Py_ssize_t n = out.shape[0], i
    if x.shape[0] != n:
        raise ValueError("erf: lengths differ")
    with nogil:
        for i in prange(n, num_threads=nthreads, schedule="static"):
            out[i] = c_erf(x[i])
