"""Row-wise float kernels over the last (contiguous) axis: Softmax and
LogSoftmax, LayerNormalization, and the Sum/Mean/Max/Min reductions (of each
row, or of a whole flat array in parallel chunks).

Every kernel takes C-contiguous float32 or float64 arrays, releases the GIL
and splits rows over ``nthreads`` OpenMP threads. The per-row loops are
small C functions vectorized with ``omp simd`` (sums accumulate in double;
float32 exp is a polynomial of about 1 ulp); NaN propagates as in numpy.
"""

from cython.parallel cimport prange
from libc.stdlib cimport free, malloc

cdef extern from *:
    """
    #include <math.h>
    #include <stdint.h>

    /* exp(x) for x <= 0 (softmax shifts by the row max): Cody-Waite range
       reduction and the Cephes degree-6 polynomial; 0 below -87.3. */
    static inline float ortc_expf_neg(float x) {
        float xc = x < -88.0f ? -88.0f : x;
        float t = xc * 1.44269504088896341f;
        int32_t k = (int32_t)(t - 0.5f);
        float n = (float)k, r, p;
        union { int32_t i; float f; } u;
        r = xc - n * 0.693359375f + n * 2.12194440e-4f;
        p = 1.9875691500E-4f;
        p = p * r + 1.3981999507E-3f;
        p = p * r + 8.3334519073E-3f;
        p = p * r + 4.1665795894E-2f;
        p = p * r + 1.6666665459E-1f;
        p = p * r + 5.0000001201E-1f;
        p = p * r * r + r + 1.0f;
        u.i = (k + 127) << 23;
        return x < -87.3f ? 0.0f : p * u.f;
    }

    /* Sums add vectorized blocks of ORTC_BLOCK values (in T) into a double. */
    #define ORTC_BLOCK 512
    /* The exp loop is built for AVX2+FMA too where GCC can pick at load time. */
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
    #define ORTC_CLONES __attribute__((target_clones("arch=haswell", "default")))
    #else
    #define ORTC_CLONES
    #endif
    #define ORTC_ROWS(T, EXP)                                                       \\
    static double ortc_sum_##T(const T* x, Py_ssize_t n) {                          \\
        double s = 0;                                                               \\
        for (Py_ssize_t lo = 0; lo < n; lo += ORTC_BLOCK) {                         \\
            Py_ssize_t hi = lo + ORTC_BLOCK < n ? lo + ORTC_BLOCK : n;              \\
            T b = 0;                                                                \\
            _Pragma("omp simd reduction(+:b)")                                      \\
            for (Py_ssize_t i = lo; i < hi; i++) b += x[i];                         \\
            s += b;                                                                 \\
        }                                                                           \\
        return s;                                                                   \\
    }                                                                               \\
    static double ortc_sq_dev_##T(const T* x, Py_ssize_t n, T m) {                  \\
        double s = 0;                                                               \\
        for (Py_ssize_t lo = 0; lo < n; lo += ORTC_BLOCK) {                         \\
            Py_ssize_t hi = lo + ORTC_BLOCK < n ? lo + ORTC_BLOCK : n;              \\
            T b = 0;                                                                \\
            _Pragma("omp simd reduction(+:b)")                                      \\
            for (Py_ssize_t i = lo; i < hi; i++) { T t = x[i] - m; b += t * t; }    \\
            s += b;                                                                 \\
        }                                                                           \\
        return s;                                                                   \\
    }                                                                               \\
    ORTC_CLONES static double ortc_exp_sum_##T(const T* x, T* o, Py_ssize_t n, T m) {           \\
        double s = 0;                                                               \\
        for (Py_ssize_t lo = 0; lo < n; lo += ORTC_BLOCK) {                         \\
            Py_ssize_t hi = lo + ORTC_BLOCK < n ? lo + ORTC_BLOCK : n;              \\
            T b = 0;                                                                \\
            _Pragma("omp simd reduction(+:b)")                                      \\
            for (Py_ssize_t i = lo; i < hi; i++) { T e = EXP(x[i] - m); o[i] = e; b += e; } \\
            s += b;                                                                 \\
        }                                                                           \\
        return s;                                                                   \\
    }                                                                               \\
    static double ortc_extreme_##T(const T* x, Py_ssize_t n, int take_max) {        \\
        T m = x[0];                                                                 \\
        int bad = 0;                                                                \\
        if (take_max) {                                                             \\
            _Pragma("omp simd reduction(max:m) reduction(|:bad)")                   \\
            for (Py_ssize_t i = 0; i < n; i++) { m = x[i] > m ? x[i] : m; bad |= x[i] != x[i]; } \\
        } else {                                                                    \\
            _Pragma("omp simd reduction(min:m) reduction(|:bad)")                   \\
            for (Py_ssize_t i = 0; i < n; i++) { m = x[i] < m ? x[i] : m; bad |= x[i] != x[i]; } \\
        }                                                                           \\
        return bad ? NAN : (double)m;                                               \\
    }                                                                               \\
    static void ortc_softmax_##T(const T* x, T* o, Py_ssize_t n, int take_log) {    \\
        double mx = ortc_extreme_##T(x, n, 1), s;                                   \\
        T m = (T)mx, c;                                                             \\
        if (!isfinite(mx)) {                                                        \\
            for (Py_ssize_t i = 0; i < n; i++) o[i] = NAN;                          \\
            return;                                                                 \\
        }                                                                           \\
        s = ortc_exp_sum_##T(x, o, n, m);                                           \\
        if (take_log) {                                                             \\
            c = (T)log(s);                                                          \\
            _Pragma("omp simd")                                                     \\
            for (Py_ssize_t i = 0; i < n; i++) o[i] = (x[i] - m) - c;               \\
        } else {                                                                    \\
            c = (T)(1.0 / s);                                                       \\
            _Pragma("omp simd")                                                     \\
            for (Py_ssize_t i = 0; i < n; i++) o[i] *= c;                           \\
        }                                                                           \\
    }                                                                               \\
    static void ortc_layer_norm_##T(const T* x, const T* g, const T* b, T* o,       \\
                                    Py_ssize_t n, double eps, T* mean, T* inv) {    \\
        T m = (T)(ortc_sum_##T(x, n) / n), r;                                       \\
        r = (T)(1.0 / sqrt(ortc_sq_dev_##T(x, n, m) / n + eps));                    \\
        *mean = m;                                                                  \\
        *inv = r;                                                                   \\
        if (b) {                                                                    \\
            _Pragma("omp simd")                                                     \\
            for (Py_ssize_t i = 0; i < n; i++) o[i] = (x[i] - m) * r * g[i] + b[i]; \\
        } else {                                                                    \\
            _Pragma("omp simd")                                                     \\
            for (Py_ssize_t i = 0; i < n; i++) o[i] = (x[i] - m) * r * g[i];        \\
        }                                                                           \\
    }                                                                               \\
    static double ortc_reduce_##T(const T* x, Py_ssize_t n, int op) {               \\
        return op <= 1 ? ortc_sum_##T(x, n) : ortc_extreme_##T(x, n, op == 2);      \\
    }

    ORTC_ROWS(float, ortc_expf_neg)
    ORTC_ROWS(double, exp)
    """
    void ortc_softmax_float(const float* x, float* o, Py_ssize_t n, int take_log) nogil
    void ortc_softmax_double(const double* x, double* o, Py_ssize_t n, int take_log) nogil
    void ortc_layer_norm_float(const float* x, const float* g, const float* b, float* o,
                               Py_ssize_t n, double eps, float* mean, float* inv) nogil
    void ortc_layer_norm_double(const double* x, const double* g, const double* b, double* o,
                                Py_ssize_t n, double eps, double* mean, double* inv) nogil
    double ortc_reduce_float(const float* x, Py_ssize_t n, int op) nogil
    double ortc_reduce_double(const double* x, Py_ssize_t n, int op) nogil

ctypedef fused real:
    float
    double

SUM = 0
MEAN = 1
MAX = 2
MIN = 3

DEF CHUNK = 65536


cdef inline void _softmax_row(const real* x, real* o, Py_ssize_t d, bint take_log) noexcept nogil:
    if real is float:
        ortc_softmax_float(x, o, d, take_log)
    else:
        ortc_softmax_double(x, o, d, take_log)


cdef inline double _reduce(const real* x, Py_ssize_t n, int op) noexcept nogil:
    """Sum (ops SUM, MEAN) or extreme (MAX, MIN) of ``n`` >= 1 values."""
    if real is float:
        return ortc_reduce_float(x, n, op)
    else:
        return ortc_reduce_double(x, n, op)


def softmax(const real[:, ::1] x, real[:, ::1] out, bint take_log, int nthreads):
    """Softmax (LogSoftmax when ``take_log``) of each row of ``x`` into ``out``.

    A row holding -inf only, or +inf or NaN, gives NaN, as ONNX defines it.
    """
    cdef Py_ssize_t r, R = x.shape[0], D = x.shape[1]
    if out.shape[0] != R or out.shape[1] != D:
        raise ValueError("softmax: shapes differ")
    if D == 0:
        return
    with nogil:
        for r in prange(R, num_threads=nthreads, schedule="static"):
            _softmax_row(&x[r, 0], &out[r, 0], D, take_log)


def layer_norm(const real[:, ::1] x, const real[::1] scale, const real[::1] bias,
               real[:, ::1] out, real[::1] mean, real[::1] inv_std, double eps,
               int nthreads):
    """Normalize each row of ``x`` to zero mean and unit variance, then apply
    ``scale`` and ``bias`` (which may be None); the row means and reciprocal
    standard deviations go to ``mean`` and ``inv_std``."""
    cdef Py_ssize_t r, R = x.shape[0], D = x.shape[1]
    cdef const real* bp = NULL
    if scale.shape[0] != D or out.shape[0] != R or out.shape[1] != D:
        raise ValueError("layer_norm: shapes differ")
    if mean.shape[0] != R or inv_std.shape[0] != R:
        raise ValueError("layer_norm: statistics shapes differ")
    if bias is not None:
        if bias.shape[0] != D:
            raise ValueError("layer_norm: bias shape differs")
        bp = &bias[0]
    if D == 0:
        return
    with nogil:
        for r in prange(R, num_threads=nthreads, schedule="static"):
            if real is float:
                ortc_layer_norm_float(&x[r, 0], &scale[0], bp, &out[r, 0], D, eps,
                                      &mean[r], &inv_std[r])
            else:
                ortc_layer_norm_double(&x[r, 0], &scale[0], bp, &out[r, 0], D, eps,
                                       &mean[r], &inv_std[r])


def reduce_rows(const real[:, ::1] x, real[::1] out, int op, int nthreads):
    """``out[r]`` = reduction ``op`` (SUM, MEAN, MAX, MIN) of row r of ``x``
    (rows must be non-empty)."""
    cdef Py_ssize_t r, R = x.shape[0], D = x.shape[1]
    if out.shape[0] != R or D == 0:
        raise ValueError("reduce_rows: bad shapes")
    with nogil:
        for r in prange(R, num_threads=nthreads, schedule="static"):
            out[r] = <real>(_reduce(&x[r, 0], D, op) / (D if op == 1 else 1))


def reduce_all(const real[::1] x, int op, int nthreads):
    """Reduction ``op`` of the whole non-empty array ``x``, as a Python float;
    chunks are reduced in parallel, then combined."""
    cdef Py_ssize_t n = x.shape[0], chunks = (n + CHUNK - 1) // CHUNK, k, lo, hi
    cdef double acc
    cdef double* part
    if n == 0:
        raise ValueError("reduce_all: empty input")
    part = <double*>malloc(chunks * sizeof(double))
    if part == NULL:
        raise MemoryError()
    with nogil:
        for k in prange(chunks, num_threads=nthreads, schedule="static"):
            lo = k * CHUNK
            hi = lo + CHUNK
            if hi > n:
                hi = n
            part[k] = _reduce(&x[lo], hi - lo, op)
        acc = part[0]
        for k in range(1, chunks):
            if op <= 1:
                acc = acc + part[k]
            elif op == 2:
                if part[k] > acc or part[k] != part[k]:
                    acc = part[k]
            elif part[k] < acc or part[k] != part[k]:
                acc = part[k]
    free(part)
    if op == 1:
        acc = acc / n
    return acc
