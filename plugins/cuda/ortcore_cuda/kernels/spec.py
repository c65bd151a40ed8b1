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

from dataclasses import dataclass, field

import numpy as np

__all__ = ["DTYPES", "PRELUDE", "Kernel", "Param", "Snippet", "StructType", "translation_unit"]

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
"""
"""Definitions every kernel source starts with."""

DTYPES = {"f32": ("float", np.dtype(np.float32)), "f16": ("__half", np.dtype(np.float16))}
"""Element types the kernels are generated for: suffix -> (C type, numpy dtype)."""


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
