"""What a kernel is, for the three things that run it: nvcc, pycuda and the CPU emulation.

A :class:`Kernel` is a ``__global__`` function's name, its parameters (C
type and name, in order) and the CUDA source that defines it. The same
source is compiled by nvcc for the GPU (``-arch=sm_80``, ``sm_90``), and by
g++ against ``emulator/cuda_emu.h`` for the CPU emulation
(:mod:`ortcore_cuda.emulator`): the parameters say how to pass arguments to
either.

Sources include :data:`PRELUDE`, which maps what differs between the two
(``cuda_fp16.h`` on nvcc; the emulation's own ``__half`` under g++).
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import numpy as np

__all__ = [
    "DTYPES",
    "PRELUDE",
    "SCALARS",
    "Kernel",
    "Param",
    "Snippet",
    "StructType",
    "floating",
    "translation_unit",
    "widen",
]

PRELUDE = """\
#ifdef ORTCORE_CUDA_EMU
#include "cuda_emu.h"
#else
#include <cuda_fp16.h>
#endif
typedef long long i64;
__device__ __forceinline__ float load_f(float v) { return v; }
__device__ __forceinline__ float load_f(__half v) { return __half2float(v); }
__device__ __forceinline__ void store_f(float *p, float v) { *p = v; }
__device__ __forceinline__ void store_f(__half *p, float v) { *p = __float2half(v); }
__device__ __forceinline__ float pymodf(float u, float v) {  // the divisor's sign, as numpy.mod
    float r = fmodf(u, v);
    return r == 0.0f ? copysignf(0.0f, v) : ((r < 0.0f) != (v < 0.0f) ? r + v : r);
}
__device__ __forceinline__ double pymod(double u, double v) {
    double r = fmod(u, v);
    return r == 0.0 ? copysign(0.0, v) : ((r < 0.0) != (v < 0.0) ? r + v : r);
}
__device__ __forceinline__ double load_f(double v) { return v; }
__device__ __forceinline__ void store_f(double *p, double v) { *p = v; }
"""
"""Definitions every kernel source starts with."""

DTYPES = {
    "f32": ("float", np.dtype(np.float32)),
    "f16": ("__half", np.dtype(np.float16)),
    "f64": ("double", np.dtype(np.float64)),
}
"""Element types the float kernels are generated for: suffix -> (C type,
numpy dtype). float16 computes in float; float64 kernels are the float
ones :func:`widen`-ed to compute in double."""

SCALARS: dict[str, np.dtype[Any]] = {
    "i64": np.dtype(np.int64),
    "long long": np.dtype(np.int64),
    "int": np.dtype(np.int32),
    "unsigned": np.dtype(np.uint32),
    "unsigned long long": np.dtype(np.uint64),
    "float": np.dtype(np.float32),
    "double": np.dtype(np.float64),
}
"""C types a kernel's scalar (by value, not struct) parameters may have, and
the numpy type each backend packs an argument as."""


@dataclass(frozen=True)
class Snippet:
    """Source that kernels share (a ``__device__`` helper, a struct), defined
    once per translation unit."""

    name: str
    definition: str


@dataclass(frozen=True)
class StructType(Snippet):
    """A struct passed by value (shapes and strides): its layout as a numpy
    structured dtype (which matches C's on x86-64 and on the GPU for fields
    of 8-byte integers)."""

    dtype: np.dtype = field(default_factory=lambda: np.dtype([]))

    def pack(self, **fields: object) -> np.ndarray:
        """One value of the struct, as a 0-d numpy record (its bytes are the argument)."""
        value = np.zeros((), self.dtype)
        for key, v in fields.items():
            value[key] = v
        return value


@dataclass(frozen=True)
class Param:
    """A kernel parameter: its C type (``const float*``, ``i64``, ``float``,
    or a :class:`StructType`'s name) and its name."""

    ctype: str
    name: str

    @property
    def is_pointer(self) -> bool:
        """Whether it is a device pointer."""
        return self.ctype.endswith("*")


@dataclass(frozen=True)
class Kernel:
    """A ``__global__`` function and its source (the function alone: a
    translation unit is :data:`PRELUDE`, the structs' definitions and the
    kernels' sources, see :func:`translation_unit`)."""

    name: str
    params: tuple[Param, ...]
    source: str
    needs: tuple[Snippet, ...] = ()

    def struct(self, ctype: str) -> StructType | None:
        """The struct a parameter of C type ``ctype`` is, if it is one."""
        for s in self.needs:
            if isinstance(s, StructType) and s.name == ctype:
                return s
        return None

    def signature(self) -> str:
        """``name(const float* x, float* y, i64 n)``."""
        return f"{self.name}({', '.join(f'{p.ctype} {p.name}' for p in self.params)})"


_MATH = (
    "acos acosh asin asinh atan atanh ceil copysign cos cosh erf exp expm1 fabs floor fmax fmin "
    "fmod log log1p pow pymod rint round rsqrt sin sinh sqrt tan tanh trunc"
).split()
_WIDEN = (
    (re.compile(r"\bfloat\b"), "double"),
    (re.compile(r"(?<![\w.])((?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)f\b"), r"\1"),
    (re.compile(r"\b(" + "|".join(_MATH) + r")f\("), r"\1("),
    (re.compile(r"\bFLT_(MAX|MIN|EPSILON)\b"), r"DBL_\1"),
)


def _widened(text: str) -> str:
    for pattern, repl in _WIDEN:
        text = pattern.sub(repl, text)
    return text


def widen(kernel: Kernel) -> Kernel:
    """``kernel``, written to compute in float, made to compute in double:
    ``float`` becomes ``double``, float literals (``1.0f``) and the float
    math functions (``expf``) their double forms, in its source, its scalar
    parameters and the helpers it needs (renamed, so a translation unit can
    hold both; C++ overloads the helpers' functions by type)."""
    needs = tuple(
        s if isinstance(s, StructType) else Snippet(f"{s.name}@f64", _widened(s.definition))
        for s in kernel.needs
    )
    params = tuple(replace(p, ctype=_widened(p.ctype)) for p in kernel.params)
    return Kernel(kernel.name, params, _widened(kernel.source), needs)


F = TypeVar("F", bound=Callable[..., Kernel])


def floating(generator: F) -> F:
    """Decorate a kernel generator written for float compute (a ``dtype``
    argument of ``f32``/``f16``) so that ``dtype="f64"`` gives its
    :func:`widen`-ed kernel."""
    signature = inspect.signature(generator)

    @functools.wraps(generator)
    def wrapper(*args: object, **kwargs: object) -> Kernel:
        kernel = generator(*args, **kwargs)
        if signature.bind(*args, **kwargs).arguments.get("dtype") == "f64":
            return widen(kernel)
        return kernel

    return wrapper  # type: ignore[return-value]


def translation_unit(kernels: list[Kernel] | tuple[Kernel, ...]) -> str:
    """One CUDA source holding ``kernels``: the prelude, each struct and
    shared helper once, then every kernel."""
    parts = [PRELUDE]
    seen: set[str] = set()
    for k in kernels:
        for snippet in k.needs:
            if snippet.name not in seen:
                seen.add(snippet.name)
                parts.append(snippet.definition)
    for k in kernels:
        parts.append(k.source)
    return "\n".join(parts)
