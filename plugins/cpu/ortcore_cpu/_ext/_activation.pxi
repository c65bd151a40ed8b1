# The float32 activation kernel, included by activation.pyx (the portable
# build) and by activation_avx2.pyx / activation_avx512.pyx (the same source
# built for newer CPUs, see setup.py). Documented in activation.pyx.

from cython.parallel cimport prange
from libc.math cimport copysignf, fabsf
from libc.stdint cimport int32_t

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

cdef union _Bits:
    float f
    int32_t i


cdef inline float _pow2(int32_t n) noexcept nogil:
    """2**n for n in [-126, 127], from its exponent bits."""
    cdef _Bits b
    b.i = (n + 127) << 23
    return b.f


cdef inline float _round(float v) noexcept nogil:
    """``v`` rounded to the nearest integer, for |v| < 2**22 (adding and
    removing 1.5 * 2**23 leaves no fraction bits; vectorizes, unlike rintf)."""
    cdef float magic = 12582912.0
    return (v + magic) - magic


cdef inline float _expm1_poly(float r) noexcept nogil:
    """exp(r) - 1 for |r| <= ln(2) / 2: Taylor to r**7 (the next term is
    below 6e-9), as r * (1 + ...) so that -0 stays -0."""
    cdef float one = 1.0, c2 = 0.5, c3 = 0.16666666666666666, c4 = 0.041666666666666664
    cdef float c5 = 0.008333333333333333, c6 = 0.001388888888888889
    cdef float c7 = 0.0001984126984126984
    return r * (one + r * (c2 + r * (c3 + r * (c4 + r * (c5 + r * (c6 + r * c7))))))


cdef inline float _reduce(float x, float* n) noexcept nogil:
    """``r`` with ``x = n * ln 2 + r``, |r| <= ln(2) / 2 (Cody-Waite: ln 2 in
    two parts, the first exact in a product with n). ``n`` is 0 for NaN, so
    that it converts to an int; ``r`` is then NaN."""
    cdef float log2e = 1.4426950408889634, ln2_hi = 0.693359375, ln2_lo = -2.12194440e-4
    cdef float k = _round(x * log2e)
    k = k if k == k else 0.0
    n[0] = k
    return (x - k * ln2_hi) - k * ln2_lo


cdef inline float _exp(float x) noexcept nogil:
    """exp(x): inf above float32's range, gradually 0 below it, NaN for NaN."""
    cdef float hi = 89.0, lo = -104.0, one = 1.0, k
    cdef int32_t n, n1
    x = hi if x > hi else x  # comparisons, not fminf: NaN goes through
    x = lo if x < lo else x
    cdef float p = one + _expm1_poly(_reduce(x, &k))
    n = <int32_t>k
    n1 = n >> 1  # 2**n in two factors: n reaches -150 and 128
    return p * _pow2(n1) * _pow2(n - n1)


cdef inline float _expm1_neg(float x) noexcept nogil:
    """exp(x) - 1 for x <= 0 (a positive x counts as 0), accurate near 0:
    2**n * expm1(r) + (2**n - 1), both terms exact but for expm1(r)."""
    cdef float lo = -30.0, zero = 0.0, one = 1.0, k, s
    x = zero if x > zero else x
    x = lo if x < lo else x  # expm1 is -1 in float32 below -17
    cdef float q = _expm1_poly(_reduce(x, &k))
    s = _pow2(<int32_t>k)
    return s * q + (s - one)


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


cdef inline float _erf(float x) noexcept nogil:
    """erf(x) by Abramowitz & Stegun 7.1.28: ``1 - 1 / p(|x|)**16`` with a
    degree-6 polynomial ``p``, absolute error below 3e-7 (float32's own
    rounding is 6e-8). Evaluated in double: p**16 would magnify float's
    rounding of p sixteenfold."""
    cdef float a = fabsf(x)
    cdef float p = 1.0 + a * (0.0705230784 + a * (0.0422820123 + a * (0.0092705272
                   + a * (0.0001520143 + a * (0.0002765672 + a * 0.0000430638)))))
    p = p * p
    p = p * p
    p = p * p
    p = p * p
    return copysignf(1.0 - 1.0 / p, x)


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
    return 0.5 * x * (1.0 + _erf(x * 0.7071067811865476))


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
