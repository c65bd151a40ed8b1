"""Float32 elementwise kernels: binary arithmetic on same-shape, scalar and
per-channel operands, Relu, and a per-channel affine map (BatchNormalization).

Operation codes for the binary kernels: 0 add, 1 sub, 2 mul, 3 div. Loops run
with the GIL released, split over ``nthreads`` OpenMP threads in chunks.

:func:`binary_f32` is the cheap entry point for the common cases (one shape, or
a one-element operand): it reads the arrays through numpy's C API instead of
typed memoryviews, whose set-up costs more than adding two small tensors.
"""

cimport numpy as cnp
from cython.parallel cimport prange
from libc.math cimport INFINITY, erf as c_erf

cnp.import_array()

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


cdef inline bint _f32_c(object x) noexcept:
    return (cnp.PyArray_Check(x)
            and cnp.PyArray_TYPE(<cnp.ndarray>x) == cnp.NPY_FLOAT32
            and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>x))


cdef inline bint _same_shape(cnp.ndarray a, cnp.ndarray b) noexcept:
    cdef int nd = cnp.PyArray_NDIM(a), i
    cdef cnp.npy_intp* da = cnp.PyArray_DIMS(a)
    cdef cnp.npy_intp* db = cnp.PyArray_DIMS(b)
    if cnp.PyArray_NDIM(b) != nd:
        return False
    for i in range(nd):
        if da[i] != db[i]:
            return False
    return True


cdef bint _is_tail(cnp.ndarray full, cnp.ndarray small) noexcept:
    """Whether ``small``, without its leading 1s, is the trailing shape of
    ``full`` (a bias row, an attention mask): full (op) small needs no copy."""
    cdef int nf = cnp.PyArray_NDIM(full), ns = cnp.PyArray_NDIM(small), i
    cdef cnp.npy_intp* df = cnp.PyArray_DIMS(full)
    cdef cnp.npy_intp* ds = cnp.PyArray_DIMS(small)
    if ns > nf or cnp.PyArray_SIZE(small) == 0:
        return False
    i = 0
    while i < ns and ds[i] == 1:
        i += 1
    for i in range(i, ns):
        if ds[i] != df[nf - ns + i]:
            return False
    return True


cdef object _rows(int op, cnp.ndarray full, cnp.ndarray small, bint swap, int nthreads):
    """Row r of the result = row r of ``full`` (op) ``small`` (swapped when
    ``swap``), ``full`` viewed as (rows, small.size)."""
    cdef Py_ssize_t inner = cnp.PyArray_SIZE(small), n = cnp.PyArray_SIZE(full)
    cdef Py_ssize_t rows = n // inner, r, per, k, lo, hi, blocks
    cdef cnp.ndarray out = cnp.PyArray_EMPTY(
        cnp.PyArray_NDIM(full), cnp.PyArray_DIMS(full), cnp.NPY_FLOAT32, 0)
    cdef float* po = <float*>cnp.PyArray_DATA(out)
    cdef const float* pf = <const float*>cnp.PyArray_DATA(full)
    cdef const float* ps = <const float*>cnp.PyArray_DATA(small)
    if n < CHUNK:
        nthreads = 1
    # blocks of whole rows, about CHUNK elements each
    per = CHUNK // inner if inner < CHUNK else 1
    blocks = (rows + per - 1) // per
    with nogil:
        for k in prange(blocks, num_threads=nthreads, schedule="static"):
            lo = k * per
            hi = lo + per
            if hi > rows:
                hi = rows
            for r in range(lo, hi):
                if swap:
                    _vv(op, po + r * inner, ps, pf + r * inner, inner)
                else:
                    _vv(op, po + r * inner, pf + r * inner, ps, inner)
    return out


cdef int _thread_cap = 1 << 30


def set_thread_cap(int n):
    """The most threads :func:`binary_f32` splits work over (the run's share of
    the cores, see ``ortcore_cpu.threads``); ``n < 1`` lifts the cap. Kept here,
    in C, so that a scalar Add pays nothing for the budget."""
    global _thread_cap
    _thread_cap = n if n > 0 else 1 << 30


def binary_f32(int op, object a, object b, int nthreads):
    """Return a (op) b as a new float32 array when both are C-contiguous
    float32 arrays of one shape, or one of them has a single element or, less
    its leading 1s, the other's trailing shape, and no more dims than the
    other; ``None`` otherwise (the caller broadcasts).
    Work under 32768 elements runs on the calling thread."""
    return _binary_f32(op, a, b, nthreads)


def binary_f32_kernel(int op, int nthreads, object fallback, object a, object b):
    """:func:`binary_f32` as a compute function's body: ``(a (op) b,)``, or
    ``fallback(a, b)`` where :func:`binary_f32` declines. Bound to its first
    three arguments with ``functools.partial``, it is the kernel itself: a
    float32 Add, Sub, Mul or Div then runs no Python frame of its own."""
    out = _binary_f32(op, a, b, nthreads)
    if out is None:
        return fallback(a, b)
    return (out,)


cdef object _binary_f32(int op, object a, object b, int nthreads):
    """:func:`binary_f32`'s body."""
    cdef cnp.ndarray x, y, full, out
    cdef Py_ssize_t n, chunks, k, lo, hi
    cdef float s
    cdef bint swap = False
    cdef float* po
    cdef const float* pf
    cdef const float* pb
    if nthreads > _thread_cap:
        nthreads = _thread_cap
    if not (_f32_c(a) and _f32_c(b)):
        return None
    x = <cnp.ndarray>a
    y = <cnp.ndarray>b
    if _same_shape(x, y):
        n = cnp.PyArray_SIZE(x)
        out = cnp.PyArray_EMPTY(cnp.PyArray_NDIM(x), cnp.PyArray_DIMS(x), cnp.NPY_FLOAT32, 0)
        po = <float*>cnp.PyArray_DATA(out)
        pf = <const float*>cnp.PyArray_DATA(x)
        pb = <const float*>cnp.PyArray_DATA(y)
        if n < CHUNK:
            _vv(op, po, pf, pb, n)
            return out
        chunks = (n + CHUNK - 1) // CHUNK
        with nogil:
            for k in prange(chunks, num_threads=nthreads, schedule="static"):
                lo = k * CHUNK
                hi = lo + CHUNK
                if hi > n:
                    hi = n
                _vv(op, po + lo, pf + lo, pb + lo, hi - lo)
        return out
    if cnp.PyArray_SIZE(y) == 1 and cnp.PyArray_NDIM(y) <= cnp.PyArray_NDIM(x):
        full = x
        s = (<const float*>cnp.PyArray_DATA(y))[0]
    elif cnp.PyArray_SIZE(x) == 1 and cnp.PyArray_NDIM(x) <= cnp.PyArray_NDIM(y):
        full = y
        s = (<const float*>cnp.PyArray_DATA(x))[0]
        swap = True
    elif _is_tail(x, y):
        return _rows(op, x, y, False, nthreads)
    elif _is_tail(y, x):
        return _rows(op, y, x, True, nthreads)
    else:
        return None
    n = cnp.PyArray_SIZE(full)
    out = cnp.PyArray_EMPTY(cnp.PyArray_NDIM(full), cnp.PyArray_DIMS(full), cnp.NPY_FLOAT32, 0)
    po = <float*>cnp.PyArray_DATA(out)
    pf = <const float*>cnp.PyArray_DATA(full)
    if n < CHUNK:
        _vs(op, po, pf, s, swap, n)
        return out
    chunks = (n + CHUNK - 1) // CHUNK
    with nogil:
        for k in prange(chunks, num_threads=nthreads, schedule="static"):
            lo = k * CHUNK
            hi = lo + CHUNK
            if hi > n:
                hi = n
            _vs(op, po + lo, pf + lo, s, swap, hi - lo)
    return out


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
                   float[:, ::1] out, int nthreads, float lo=-INFINITY, float hi=INFINITY):
    """Row r of ``out`` = row r of ``x`` * scale[c] + shift[c], c = r % len(scale),
    clamped to [lo, hi] (a fused Relu or Clip; a NaN stays NaN)."""
    cdef Py_ssize_t R = x.shape[0], I = x.shape[1], C = scale.shape[0], r, i, c
    cdef float s, t, v
    cdef const float* src
    cdef float* dst
    cdef bint clamp = lo > -INFINITY or hi < INFINITY
    if shift.shape[0] != C or C == 0 or out.shape[0] != R or out.shape[1] != I:
        raise ValueError("channel_affine: bad shapes")
    with nogil:
        for r in prange(R, num_threads=nthreads, schedule="static"):
            c = r % C
            s = scale[c]
            t = shift[c]
            src = &x[r, 0]
            dst = &out[r, 0]
            if clamp:
                for i in range(I):
                    v = src[i] * s + t
                    v = lo if v < lo else v
                    dst[i] = hi if v > hi else v
            else:
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
