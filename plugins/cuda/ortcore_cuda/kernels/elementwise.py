"""Elementwise kernels, generated per op, element type and (for broadcasting) rank.

* Unary: ``unary_<op>_<dtype>(const T* x, T* y, i64 n)``, a grid-stride loop;
  the arithmetic is done in float (float16 is loaded and stored through
  float, as onnxruntime's CUDA kernels do).
* Binary with numpy broadcasting: ``binary_<op>_<dtype>_r<R>(const T* a,
  const T* b, T* y, i64 n, Bcast s)``: each output index is split into its
  R coordinates (the loop unrolled for R) and each input's offset built from
  its strides, 0 along broadcast dimensions. :func:`broadcast_args` computes
  ``n`` and ``s`` for two input shapes.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import numpy as np

from .spec import DTYPES, Kernel, Param, StructType

__all__ = [
    "BINARY",
    "BCAST",
    "MAX_RANK",
    "UNARY",
    "binary_kernel",
    "broadcast_args",
    "cast_kernel",
    "permute_args",
    "transpose_kernel",
    "unary_kernel",
]

WORDS = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}
"""Element sizes the data-movement kernels are generated for, and their C types."""

UNARY: dict[str, str] = {
    "Relu": "v < 0.0f ? 0.0f : v",  # NaN stays NaN
    "Sigmoid": "1.0f / (1.0f + expf(-v))",
    "Tanh": "tanhf(v)",
    "Exp": "expf(v)",
    "Log": "logf(v)",
    "Neg": "-v",
    "Abs": "fabsf(v)",
    "Sqrt": "sqrtf(v)",
    "Reciprocal": "1.0f / v",
    "Erf": "erff(v)",
    "Sin": "sinf(v)",
    "Cos": "cosf(v)",
    "Floor": "floorf(v)",
    "Ceil": "ceilf(v)",
    "Softplus": "v > 20.0f ? v : log1pf(expf(v))",
    "Gelu": "0.5f * v * (1.0f + erff(v * 0.70710678118654752f))",
    "GeluTanh": "0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)))",
}
"""Unary ops: the float expression of ``v``."""

BINARY: dict[str, str] = {
    "Add": "u + v",
    "Sub": "u - v",
    "Mul": "u * v",
    "Div": "u / v",
    "Pow": "powf(u, v)",
    "Max": "(u != u || u > v) ? u : v",  # NaN in either propagates, as numpy.maximum
    "Min": "(u != u || u < v) ? u : v",
    "PRelu": "u < 0.0f ? u * v : u",
}
"""Binary ops: the float expression of ``u`` (first input) and ``v``."""

MAX_RANK = 6

BCAST = StructType(
    "Bcast",
    f"struct Bcast {{ i64 dims[{MAX_RANK}]; i64 sa[{MAX_RANK}]; i64 sb[{MAX_RANK}]; }};",
    np.dtype(
        [("dims", "<i8", (MAX_RANK,)), ("sa", "<i8", (MAX_RANK,)), ("sb", "<i8", (MAX_RANK,))]
    ),
)
"""The output's dims and both inputs' element strides (0 where broadcast)."""

_LOOP = (
    "for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; "
    "i += (i64)gridDim.x * blockDim.x)"
)


@cache
def unary_kernel(op: str, dtype: str) -> Kernel:
    """The kernel of unary ``op`` (a key of :data:`UNARY`) for ``dtype`` (``f32``, ``f16``)."""
    ctype = DTYPES[dtype][0]
    name = f"unary_{op.lower()}_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, {ctype}* __restrict__ y, i64 n) {{
    {_LOOP} {{
        float v = load_f(x[i]);
        store_f(&y[i], {UNARY[op]});
    }}
}}
"""
    params = (Param(f"const {ctype}*", "x"), Param(f"{ctype}*", "y"), Param("i64", "n"))
    return Kernel(name, params, source)


@cache
def binary_kernel(op: str, dtype: str, rank: int) -> Kernel:
    """The broadcasting kernel of binary ``op`` for ``dtype`` and output rank
    ``rank`` (1 to :data:`MAX_RANK`)."""
    if not 1 <= rank <= MAX_RANK:
        raise ValueError(f"rank {rank} is outside 1..{MAX_RANK}")
    ctype = DTYPES[dtype][0]
    name = f"binary_{op.lower()}_{dtype}_r{rank}"
    steps = "\n".join(
        f"        {{ i64 c = r % s.dims[{k}]; r /= s.dims[{k}]; "
        f"oa += c * s.sa[{k}]; ob += c * s.sb[{k}]; }}"
        for k in reversed(range(rank))
    )
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ a, const {ctype}* __restrict__ b,
                       {ctype}* __restrict__ y, i64 n, Bcast s) {{
    {_LOOP} {{
        i64 r = i, oa = 0, ob = 0;
{steps}
        float u = load_f(a[oa]), v = load_f(b[ob]);
        store_f(&y[i], {BINARY[op]});
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "a"),
        Param(f"const {ctype}*", "b"),
        Param(f"{ctype}*", "y"),
        Param("i64", "n"),
        Param("Bcast", "s"),
    )
    return Kernel(name, params, source, (BCAST,))


def broadcast_args(a: Sequence[int], b: Sequence[int]) -> tuple[tuple[int, ...], int, np.ndarray]:
    """The output shape of broadcasting shapes ``a`` and ``b`` (numpy's rule),
    the rank the kernel is generated for (at least 1), and the ``Bcast``
    argument (contiguous inputs).

    Raises:
        ValueError: the shapes do not broadcast, or the output has more than
            :data:`MAX_RANK` dimensions.
    """
    out = tuple(np.broadcast_shapes(tuple(a), tuple(b)))
    rank = max(len(out), 1)
    if rank > MAX_RANK:
        raise ValueError(f"broadcast output of rank {rank}: the kernels go to {MAX_RANK}")
    dims = list(out) if out else [1]

    def strides(shape: Sequence[int]) -> list[int]:
        padded = [1] * (rank - len(shape)) + list(shape)
        contiguous = [1] * rank
        for k in reversed(range(rank - 1)):
            contiguous[k] = contiguous[k + 1] * padded[k + 1]
        return [0 if padded[k] == 1 and dims[k] != 1 else contiguous[k] for k in range(rank)]

    pad = [1] * (MAX_RANK - rank)
    zero = [0] * (MAX_RANK - rank)
    value = BCAST.pack(dims=dims + pad, sa=strides(a) + zero, sb=strides(b) + zero)
    return out, rank, value


@cache
def transpose_kernel(itemsize: int, rank: int) -> Kernel:
    """``y = x`` permuted, for elements of ``itemsize`` bytes (any type):
    output index -> input offset through the input's strides permuted
    (``Bcast.dims``: the output's dims; ``Bcast.sa``: the input stride of
    each output axis; see :func:`permute_args`)."""
    if not 1 <= rank <= MAX_RANK:
        raise ValueError(f"rank {rank} is outside 1..{MAX_RANK}")
    word = WORDS[itemsize]
    name = f"transpose_b{itemsize}_r{rank}"
    steps = "\n".join(
        f"        {{ i64 c = r % s.dims[{k}]; r /= s.dims[{k}]; ox += c * s.sa[{k}]; }}"
        for k in reversed(range(rank))
    )
    source = f"""\
extern "C" __global__ void {name}(const {word}* __restrict__ x, {word}* __restrict__ y,
                                  i64 n, Bcast s) {{
    {_LOOP} {{
        i64 r = i, ox = 0;
{steps}
        y[i] = x[ox];
    }}
}}
"""
    params = (
        Param(f"const {word}*", "x"),
        Param(f"{word}*", "y"),
        Param("i64", "n"),
        Param("Bcast", "s"),
    )
    return Kernel(name, params, source, (BCAST,))


def permute_args(shape: Sequence[int], perm: Sequence[int]) -> tuple[tuple[int, ...], np.ndarray]:
    """The output shape of transposing ``shape`` by ``perm``, and the
    ``Bcast`` argument of :func:`transpose_kernel` (a contiguous input)."""
    rank = len(shape)
    strides = [1] * rank
    for k in reversed(range(rank - 1)):
        strides[k] = strides[k + 1] * shape[k + 1]
    out = tuple(shape[p] for p in perm)
    pad = MAX_RANK - rank
    value = BCAST.pack(
        dims=list(out) + [1] * pad, sa=[strides[p] for p in perm] + [0] * pad, sb=[0] * MAX_RANK
    )
    return out, value


@cache
def cast_kernel(src: str, dst: str) -> Kernel:
    """``y = (dst) x`` between float element types (``f32``, ``f16``)."""
    a, b = DTYPES[src][0], DTYPES[dst][0]
    name = f"cast_{src}_{dst}"
    source = f"""\
extern "C" __global__ void {name}(const {a}* __restrict__ x, {b}* __restrict__ y, i64 n) {{
    {_LOOP} store_f(&y[i], load_f(x[i]));
}}
"""
    return Kernel(name, (Param(f"const {a}*", "x"), Param(f"{b}*", "y"), Param("i64", "n")), source)
