"""The provider's CUDA kernels, as sources generated per op, element type and rank.

See :mod:`ortcore_cuda.kernels.spec` for what a kernel is; every kernel here
compiles with nvcc (sm_80, sm_90) and runs under the CPU emulation
(:mod:`ortcore_cuda.emulator`).
"""

from __future__ import annotations

from . import attention, cast, image, losses, misc, norm, quant, recurrent
from .elementwise import (
    BINARY,
    BOOL_BINARY,
    CAST_TYPES,
    COMPARE,
    INT_BINARY,
    INT_UNARY,
    INTS,
    PAD_MODES,
    PARAM_UNARY,
    POW_BASES,
    POW_EXPONENTS,
    RANGE_TYPES,
    UNARY,
    WORDS,
    binary_kernel,
    cast_kernel,
    clip_kernel,
    fill_kernel,
    fill_word_kernel,
    gather_kernel,
    int_binary_kernel,
    int_clip_kernel,
    int_unary_kernel,
    not_kernel,
    pad_kernel,
    param_kernel,
    pow_kernel,
    range_kernel,
    transpose_kernel,
    trilu_kernel,
    unary_kernel,
    where_kernel,
)
from .nn import batchnorm_kernel, im2col_kernel, lrn_kernel, pool_kernel
from .rows import REDUCTIONS, arg_kernel, layernorm_kernel, reduce_kernel, softmax_kernel
from .spec import DTYPES, Kernel

__all__ = ["all_kernels"]


def all_kernels() -> list[Kernel]:
    """Every kernel the provider has, for compiling them all at once."""
    from .elementwise import MAX_RANK

    out: list[Kernel] = []
    for dtype in DTYPES:
        out += [unary_kernel(op, dtype) for op in UNARY]
        out += [
            binary_kernel(op, dtype, r)
            for op in (*BINARY, *COMPARE)
            for r in range(1, MAX_RANK + 1)
        ]
        out += [clip_kernel(dtype), fill_kernel(dtype), im2col_kernel(dtype)]
        out += [pool_kernel(kind, dtype) for kind in ("max", "avg")] + [batchnorm_kernel(dtype)]
        out += [lrn_kernel(dtype)]
        out += [softmax_kernel(dtype), softmax_kernel(dtype, log=True), layernorm_kernel(dtype)]
        out += [reduce_kernel(op, dtype) for op in (*REDUCTIONS, "ReduceLogSumExp")]
        out += [arg_kernel(op, dtype) for op in ("ArgMax", "ArgMin")]
        out += [param_kernel(op, dtype) for op in PARAM_UNARY]
    out += [transpose_kernel(size, r) for size in WORDS for r in range(1, MAX_RANK + 1)]
    out += [where_kernel(size, r) for size in WORDS for r in range(1, MAX_RANK + 1)]
    out += [gather_kernel(size) for size in WORDS] + [fill_word_kernel(size) for size in WORDS]
    out += [range_kernel(t) for t in RANGE_TYPES]
    out += [pad_kernel(size, mode) for size in WORDS for mode in PAD_MODES]
    out += [pow_kernel(a, b) for a in POW_BASES for b in POW_EXPONENTS]
    out += [int_clip_kernel(t) for t in INTS]
    out += [cast_kernel(a, b) for a in CAST_TYPES for b in CAST_TYPES if a != b]
    out += [not_kernel()] + [trilu_kernel(size) for size in WORDS]
    out += [
        int_binary_kernel(op, t, r)
        for t in INTS
        for op in (*INT_BINARY, *COMPARE)
        for r in range(1, MAX_RANK + 1)
    ]
    out += [int_unary_kernel(op, t) for t in INTS for op in INT_UNARY]
    out += [int_binary_kernel(op, "b", r) for op in BOOL_BINARY for r in range(1, MAX_RANK + 1)]
    for family in (attention, cast, image, losses, misc, norm, quant, recurrent):
        out += family.all_kernels()
    return out
