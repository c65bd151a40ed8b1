# The float32 activation kernel, included by activation.pyx (the portable
# build) and by activation_avx2.pyx / activation_avx512.pyx (the same source
# built for newer CPUs, see setup.py). Documented in activation.pyx.

from cython.parallel cimport prange
from libc.math cimport INFINITY, fabsf

DEF CHUNK = 8192

# The activations, as activation_f32's ``op`` (a Python IntEnum too).
cpdef enum Activation:
    IDENTITY = 0
    RELU = 1
    LEAKY_RELU = 2
    CLIP = 3
    SIGMOID = 4
    HARD_SIGMOID = 5
    TANH = 6
    ELU = 7
    SELU = 8
    CELU = 9
    SOFTPLUS = 10
    SOFTSIGN = 11
    THRESHOLDED_RELU = 12
    HARD_SWISH = 13
    MISH = 14
    SWISH = 15
    GELU = 16
    GELU_TANH = 17
    SHRINK = 18


# -- exp, expm1, log1p -------------------------------------------------------

cdef extern from "_vexp.h" nogil:
    float _exp "ortc_exp"(float x)
    float _expm1_neg "ortc_expm1_neg"(float x)


cdef inline float _log1p_unit(float t) noexcept nogil:
    """log(1 + t) for t in [0, 1]: 2 atanh(s) with s = t / (2 + t) <= 1/3,
    its odd series to s**15 (the next term is below 2e-9 relative)."""
    cdef float two = 2.0, c3 = 0.3333333333333333, c5 = 0.2, c7 = 0.14285714285714285
    cdef float c9 = 0.1111111111111111, c11 = 0.09090909090909091
    cdef float c13 = 0.07692307692307693, c15 = 0.06666666666666667
    cdef float s = t / (two + t)
    cdef float z = s * s
    return two * s + two * s * z * (c3 + z * (c5 + z * (c7 + z * (c9 + z * (c11 + z * (c13
                                   + z * c15))))))


cdef inline float _erfc_pos(float a) noexcept nogil:
    """erfc(a) for a >= 0 by Abramowitz & Stegun 7.1.26: ``t p(t) exp(-a**2)``
    with ``t = 1 / (1 + 0.3275911 a)`` and a degree-4 polynomial ``p``
    (erf's absolute error below 1.5e-7), all in float; with no ``1 -``, it
    keeps its relative accuracy where erfc is small."""
    cdef float one = 1.0, c = 0.3275911
    cdef float a1 = 0.254829592, a2 = -0.284496736, a3 = 1.421413741
    cdef float a4 = -1.453152027, a5 = 1.061405429
    cdef float t = one / (one + c * a)
    return t * (a1 + t * (a2 + t * (a3 + t * (a4 + t * a5)))) * _exp(-a * a)


# -- the activations -----------------------------------------------------------

cdef inline float _sigmoid(float x) noexcept nogil:
    cdef float one = 1.0
    return one / (one + _exp(-x))


cdef inline float _tanh(float x) noexcept nogil:
    """tanh(x) as Eigen's rational approximation: x p(x**2) / q(x**2) of
    degrees 13 and 6 on x clamped to +-7.9053 (where it reaches 1), x itself
    below 4e-4; within 6 ULP, no exp and one division."""
    cdef float c = 7.90531110763549805, tiny = 0.0004
    cdef float a1 = 4.89352455891786e-03, a3 = 6.37261928875436e-04
    cdef float a5 = 1.48572235717979e-05, a7 = 5.12229709037114e-08
    cdef float a9 = -8.60467152213735e-11, a11 = 2.00018790482477e-13
    cdef float a13 = -2.76076847742355e-16
    cdef float b0 = 4.89352518554385e-03, b2 = 2.26843463243900e-03
    cdef float b4 = 1.18534705686654e-04, b6 = 1.19825839466702e-06
    cdef float v = c if x > c else x  # NaN goes through
    v = -c if v < -c else v
    cdef float z = v * v
    cdef float p = v * (a1 + z * (a3 + z * (a5 + z * (a7 + z * (a9 + z * (a11 + z * a13))))))
    cdef float q = b0 + z * (b2 + z * (b4 + z * b6))
    return x if fabsf(x) < tiny else p / q


cdef inline float _swish(float x, float alpha) noexcept nogil:
    """x * sigmoid(alpha * x), as x / (1 + exp(-alpha * x))."""
    cdef float one = 1.0
    return x / (one + _exp(-alpha * x))


cdef inline float _gelu_tanh(float x) noexcept nogil:
    """0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x**3), as
    x / (1 + exp(-2u)): the same function, without 1 + tanh's cancellation."""
    cdef float one = 1.0
    cdef float a = -1.5957691216057308  # -2 sqrt(2/pi)
    cdef float b = -0.07135481627159719  # -2 sqrt(2/pi) * 0.044715
    return x / (one + _exp(x * (a + b * x * x)))


cdef inline float _gelu(float x) noexcept nogil:
    """x Phi(x) = x (1 + erf(x / sqrt 2)) / 2, as x (2 - e) / 2 for x >= 0 and
    x e / 2 below, e = erfc(|x| / sqrt 2): no cancellation where the result
    is small (within 5e-7 absolute, 7% relative where it is below 1e-6)."""
    cdef float half = 0.5, two = 2.0, rsqrt2 = 0.7071067811865476
    cdef float e = _erfc_pos(fabsf(x) * rsqrt2)
    return half * x * (two - e if x >= 0 else e)


cdef inline float _softplus(float x) noexcept nogil:
    """max(x, 0) + log1p(exp(-|x|)): no overflow, exact-ish for x << 0."""
    cdef float zero = 0.0
    cdef float m = x if x > zero else zero
    return m + _log1p_unit(_exp(-fabsf(x)))


cdef inline float _mish(float x) noexcept nogil:
    """x tanh(softplus(x)) = x n / (n + 2), n = e**x (e**x + 2); x past 20."""
    cdef float two = 2.0, big = 20.0
    cdef float e = _exp(x)
    cdef float n = e * (e + two)
    return x if x > big else x * n / (n + two)


cdef inline float _clip(float v, float lo, float hi) noexcept nogil:
    """v within [lo, hi]; NaN stays NaN."""
    v = lo if v < lo else v
    return hi if v > hi else v


cdef void _apply(int op, const float* s, float* d, Py_ssize_t n, float alpha,
                 float beta) noexcept nogil:
    """d[j] = act(s[j]), one loop per activation (so each vectorizes)."""
    cdef Py_ssize_t j
    cdef float zero = 0.0, one = 1.0, v
    cdef float sixth = 0.16666666666666666, half = 0.5
    if op == IDENTITY:
        if s != d:
            for j in range(n):
                d[j] = s[j]
    elif op == RELU:
        for j in range(n):
            d[j] = zero if s[j] < zero else s[j]
    elif op == LEAKY_RELU:
        for j in range(n):
            d[j] = s[j] if s[j] >= zero else alpha * s[j]
    elif op == CLIP:
        for j in range(n):
            d[j] = _clip(s[j], alpha, beta)
    elif op == SIGMOID:
        for j in range(n):
            d[j] = _sigmoid(s[j])
    elif op == HARD_SIGMOID:
        for j in range(n):
            d[j] = _clip(alpha * s[j] + beta, zero, one)
    elif op == TANH:
        for j in range(n):
            d[j] = _tanh(s[j])
    elif op == ELU:
        for j in range(n):
            d[j] = s[j] if s[j] >= zero else alpha * _expm1_neg(s[j])
    elif op == SELU:  # alpha, gamma (in beta)
        for j in range(n):
            d[j] = beta * (s[j] if s[j] > zero else alpha * _expm1_neg(s[j]))
    elif op == CELU:
        for j in range(n):
            d[j] = s[j] if s[j] >= zero else alpha * _expm1_neg(s[j] / alpha)
    elif op == SOFTPLUS:
        for j in range(n):
            d[j] = _softplus(s[j])
    elif op == SOFTSIGN:
        for j in range(n):
            d[j] = s[j] / (one + fabsf(s[j]))
    elif op == THRESHOLDED_RELU:
        for j in range(n):
            d[j] = s[j] if s[j] > alpha else zero
    elif op == HARD_SWISH:
        for j in range(n):
            d[j] = s[j] * _clip(sixth * s[j] + half, zero, one)
    elif op == MISH:
        for j in range(n):
            d[j] = _mish(s[j])
    elif op == SWISH:
        for j in range(n):
            d[j] = _swish(s[j], alpha)
    elif op == GELU:
        for j in range(n):
            d[j] = _gelu(s[j])
    elif op == GELU_TANH:
        for j in range(n):
            d[j] = _gelu_tanh(s[j])
    elif op == SHRINK:  # lambd, bias (in beta)
        for j in range(n):
            v = s[j]
            d[j] = v + beta if v < -alpha else (v - beta if v > alpha else zero)


cdef void _chunk(int op, const float* x, const float* b, Py_ssize_t nb, float* o,
                 Py_ssize_t lo, Py_ssize_t hi, float alpha, float beta) noexcept nogil:
    """o[lo:hi] = act(x[lo:hi] + bias): the bias added into ``o`` first,
    row piece by row piece, then the activation applied there in place."""
    cdef const float* src = x + lo
    cdef Py_ssize_t i = lo, c, step, j
    if nb:
        while i < hi:
            c = i % nb
            step = nb - c if nb - c < hi - i else hi - i
            for j in range(step):
                o[i + j] = x[i + j] + b[c + j]
            i += step
        src = o + lo
    _apply(op, src, o + lo, hi - lo, alpha, beta)


def activation_f32(int op, const float[::1] x, const float[::1] bias, float[::1] out,
                   float alpha, float beta, int nthreads):
    """``out = act(x + bias)`` for flat float32 arrays; ``out`` may be ``x``.

    ``op`` is an :class:`Activation`; ``alpha`` and ``beta`` are its
    parameters (LeakyRelu, Elu, Celu, Swish, ThresholdedRelu: alpha; Clip:
    min, max; HardSigmoid: alpha, beta; Selu: alpha, gamma; Shrink: lambd,
    bias; the rest take none). ``bias`` repeats along ``x`` (element i gets
    ``bias[i % len(bias)]``: a bias along the last axis); give a length-0
    array for none. Work is split in chunks of 8192 elements.

    Raises:
        ValueError: an unknown ``op``, lengths that differ, or a bias whose
            length does not divide ``x``'s.
    """
    cdef Py_ssize_t n = x.shape[0], nb = bias.shape[0]
    cdef Py_ssize_t chunks = (n + CHUNK - 1) // CHUNK, k, lo, hi
    cdef const float* pb = NULL
    if op < IDENTITY or op > SHRINK:
        raise ValueError(f"activation_f32: unknown op {op}")
    if out.shape[0] != n:
        raise ValueError("activation_f32: x and out lengths differ")
    if nb and n % nb:
        raise ValueError(f"activation_f32: bias length {nb} does not divide {n}")
    if n == 0:
        return
    if nb:
        pb = &bias[0]
    with nogil:
        for k in prange(chunks, num_threads=nthreads, schedule="static"):
            lo = k * CHUNK
            hi = lo + CHUNK
            if hi > n:
                hi = n
            _chunk(op, &x[0], pb, nb, &out[0], lo, hi, alpha, beta)


# -- the attention's softmax --------------------------------------------------

cdef extern from "_softmax.h" nogil:
    void sm_scaled_softmax(float* s, const float* m, Py_ssize_t n, float scale)


def attention_softmax(float[:, ::1] s, const float[:, ::1] mask, const Py_ssize_t[::1] mask_row,
                      float scale, int nthreads):
    """The attention's ``softmax(s * scale + mask)`` along each row of ``s``,
    in place: row ``r`` adds ``mask[mask_row[r]]`` (a mask broadcast over
    batches, heads or queries is stored once); a ``mask`` of no rows adds
    nothing. Rows split over ``nthreads`` threads.

    Raises:
        ValueError: ``mask``'s rows are not as long as ``s``'s, ``mask_row``
            does not hold one index per row of ``s``, or one is out of range.
    """
    cdef Py_ssize_t R = s.shape[0], L = s.shape[1], M = mask.shape[0], r
    if M and mask.shape[1] != L:
        raise ValueError(f"attention_softmax: mask rows of {mask.shape[1]}, scores of {L}")
    if M and mask_row.shape[0] != R:
        raise ValueError(f"attention_softmax: {mask_row.shape[0]} mask rows for {R} score rows")
    for r in range(mask_row.shape[0] if M else 0):
        if mask_row[r] < 0 or mask_row[r] >= M:
            raise ValueError(f"attention_softmax: mask row {mask_row[r]} of {M}")
    if R == 0 or L == 0:
        return
    with nogil:
        for r in prange(R, num_threads=nthreads, schedule="static"):
            sm_scaled_softmax(&s[r, 0], &mask[mask_row[r], 0] if M else NULL, L, scale)


# -- LRN ---------------------------------------------------------------------

cdef extern from "_lrn.h" nogil:
    int LRN_BLOCK
    void lrn_chunk(const float* x, float* y, Py_ssize_t C, Py_ssize_t S, Py_ssize_t p0,
                   Py_ssize_t L, Py_ssize_t before, Py_ssize_t after, float scale, float bias,
                   float beta, int powmode)


def lrn_f32(const float[:, :, ::1] x, float[:, :, ::1] out, Py_ssize_t size, float alpha,
            float beta, float bias, int nthreads):
    """ONNX LRN of float32 ``x`` (N, C, S: the spatial axes flattened) into
    ``out`` (the same shape, not ``x``): ``x / (bias + alpha / size *
    window_sum(x**2)) ** beta``, the window over ``(size - 1) // 2`` channels
    before and ``ceil((size - 1) / 2)`` after each channel. Runs of positions,
    every channel each, split over ``nthreads`` threads.

    Raises:
        ValueError: ``out``'s shape is not ``x``'s, or ``size`` < 1.
    """
    cdef Py_ssize_t N = x.shape[0], C = x.shape[1], S = x.shape[2]
    cdef Py_ssize_t before = (size - 1) // 2, after = size - 1 - (size - 1) // 2
    cdef Py_ssize_t per, L, k, n, p0
    cdef int powmode = 0
    cdef float scale
    if size < 1:
        raise ValueError(f"lrn_f32: size {size} < 1")
    if out.shape[0] != N or out.shape[1] != C or out.shape[2] != S:
        raise ValueError(f"lrn_f32: out of shape {(out.shape[0], out.shape[1], out.shape[2])} for x of {(N, C, S)}")
    if N == 0 or C == 0 or S == 0:
        return
    scale = alpha / <float>size
    if beta == 0.75:
        powmode = 1
    elif beta == 0.5:
        powmode = 2
    elif beta == 1.0:
        powmode = 3
    # About four runs a thread, of 8 to LRN_BLOCK positions.
    per = (4 * max(nthreads, 1) + N - 1) // N
    L = (S + per - 1) // per
    L = min(max((L + 7) // 8 * 8, 8), LRN_BLOCK, S)
    per = (S + L - 1) // L
    with nogil:
        for k in prange(N * per, num_threads=max(nthreads, 1), schedule="static"):
            n = k // per
            p0 = (k % per) * L
            lrn_chunk(&x[n, 0, 0], &out[n, 0, 0], C, S, p0, min(L, S - p0), before, after,
                      scale, bias, beta, powmode)
