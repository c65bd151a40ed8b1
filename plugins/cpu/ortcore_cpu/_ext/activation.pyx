"""Float32 activations in one pass: ``out = act(x + bias)``.

One entry point, :func:`activation_f32`, for every activation of onnx's
elementwise set and of the fused ops (the codes of :class:`Activation`). Each
activation is plain float arithmetic, with ``exp``, ``expm1`` and ``log1p``
as polynomials on a reduced argument instead of libm calls, so GCC
vectorizes the loops; they run with the GIL released, split over
``nthreads`` OpenMP threads in chunks.

Accuracy, against the formula in float64 on the same float32 input: exp,
expm1 and log1p within about 2 ULP (Taylor terms well past float32's
precision; Cody-Waite range reduction), so Sigmoid, Swish, the tanh Gelu
(``x * sigmoid(2u)``, the same function as ``0.5 x (1 + tanh(u))`` without
its cancellation), Mish, Softplus, Elu, Selu and Celu within a few ULP of
the float32 value of their argument; Tanh within 6 ULP (Eigen's rational
approximation, no exp); the exact Gelu within 5e-7 absolute and 0.2%
relative where it is above 1e-6 in magnitude (x (1 + erf(x / sqrt 2)) / 2
with erfc(|x| / sqrt 2) by Abramowitz & Stegun 7.1.26, no cancellation for
negative x). exp and expm1 are in ``_vexp.h``, always inlined. NaN stays NaN, ±inf give the formula's limit
(or NaN where the formula is ``inf * 0``, as onnxruntime), results past
float32's range overflow to inf or underflow gradually to 0.

This module is the portable (x86-64 baseline) build; ``activation_avx2``
and ``activation_avx512`` are the same source (``_activation.pxi``) built
with AVX2 and FMA, and with AVX-512, where the compiler accepts those flags
(``setup.py``); :func:`cpu_level` says which of them this CPU runs, and
``ortcore_cpu.kernels._isa`` picks the module.
"""

include "_activation.pxi"


cdef extern from *:
    """
    static int ortcore_cpu_level(void) {
    #if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
            return __builtin_cpu_supports("avx512f") ? 2 : 1;
        }
    #endif
        return 0;
    }
    """
    int ortcore_cpu_level() noexcept nogil


def cpu_level():
    """The newest build of this kernel the CPU runs: 0 the portable one, 1
    AVX2 with FMA, 2 AVX-512 (CPUID and the OS's register state, as the
    compiler's ``__builtin_cpu_supports`` reads them; 0 off x86 or with
    another compiler)."""
    return ortcore_cpu_level()
