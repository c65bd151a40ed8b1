"""Elementwise kernels, generated per op, element type and (for broadcasting) rank.

* Unary: ``unary_<op>_<dtype>(const T* x, T* y, i64 n)``, a grid-stride loop;
  the arithmetic is done in float (float16 is loaded and stored through
  float, as onnxruntime's CUDA kernels do).
* Binary with numpy broadcasting: ``binary_<op>_<dtype>_r<R>(const T* a,
  const T* b, T* y, i64 n, Bcast s)``: each output index is split into its
  R coordinates (the loop unrolled for R) and each input's offset built from
  its strides, 0 along broadcast dimensions. :func:`broadcast_args` computes
  ``n`` and ``s`` for two input shapes.

The data-movement kernels (Transpose, copies, Trilu, Pad, Gather, Where,
fills) are :mod:`ortcore_cuda.kernels.movement`, the shared loop and
broadcast geometry :mod:`ortcore_cuda.kernels.grid`; their names are
importable from here too.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import numpy as np

from .grid import _LOOP as _LOOP
from .grid import BCAST as BCAST
from .grid import MAX_RANK as MAX_RANK
from .grid import WORDS as WORDS
from .grid import _coords
from .movement import PAD_ARGS as PAD_ARGS
from .movement import PAD_MODES as PAD_MODES
from .movement import WHERE as WHERE
from .movement import contiguous as contiguous
from .movement import copy_args as copy_args
from .movement import fill_kernel as fill_kernel
from .movement import fill_word_kernel as fill_word_kernel
from .movement import gather_kernel as gather_kernel
from .movement import pad_args as pad_args
from .movement import pad_kernel as pad_kernel
from .movement import permute_args as permute_args
from .movement import transpose_kernel as transpose_kernel
from .movement import trilu_kernel as trilu_kernel
from .movement import where_args as where_args
from .movement import where_kernel as where_kernel
from .spec import DTYPES, Kernel, Param, Snippet, floating

__all__ = [
    "BINARY",
    "BCAST",
    "MAX_RANK",
    "UNARY",
    "binary_kernel",
    "broadcast_args",
    "cast_kernel",
    "clip_kernel",
    "contiguous",
    "copy_args",
    "fill_kernel",
    "fill_word_kernel",
    "range_kernel",
    "gather_kernel",
    "int_binary_kernel",
    "int_clip_kernel",
    "int_unary_kernel",
    "not_kernel",
    "pad_args",
    "pad_kernel",
    "pow_kernel",
    "param_kernel",
    "permute_args",
    "trilu_kernel",
    "where_kernel",
    "transpose_kernel",
    "unary_kernel",
]

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
    "Sign": "v > 0.0f ? 1.0f : (v < 0.0f ? -1.0f : v)",
    "Round": "rintf(v)",  # half to even, as ONNX
    "HardSwish": "v * fmaxf(0.0f, fminf(1.0f, v / 6.0f + 0.5f))",
    "Mish": "v * tanhf(v > 20.0f ? v : log1pf(expf(v)))",
    "Softsign": "v / (1.0f + fabsf(v))",
    "Tan": "tanf(v)",
    "Asin": "asinf(v)",
    "Acos": "acosf(v)",
    "Atan": "atanf(v)",
    "Sinh": "sinhf(v)",
    "Cosh": "coshf(v)",
    "Asinh": "asinhf(v)",
    "Acosh": "acoshf(v)",
    "Atanh": "atanhf(v)",
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
    "Mod": "pymodf(u, v)",
    "FMod": "fmodf(u, v)",
}
"""Binary ops: the float expression of ``u`` (first input) and ``v``."""


@cache
@floating
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


PARAM_UNARY: dict[str, str] = {
    "LeakyRelu": "v < 0.0f ? alpha * v : v",
    "Elu": "v < 0.0f ? alpha * (expf(v) - 1.0f) : v",
    "Selu": "v <= 0.0f ? beta * (alpha * expf(v) - alpha) : beta * v",
    "Celu": "fmaxf(0.0f, v) + fminf(0.0f, alpha * (expf(v / alpha) - 1.0f))",
    "HardSigmoid": "fmaxf(0.0f, fminf(1.0f, alpha * v + beta))",
    "ThresholdedRelu": "v > alpha ? v : 0.0f",
    "Shrink": "v < -beta ? v + alpha : (v > beta ? v - alpha : 0.0f)",  # alpha: bias, beta: lambd
    "Swish": "v / (1.0f + expf(-alpha * v))",
}
"""Unary ops with attributes: the float expression of ``v``, ``alpha`` and ``beta``."""


@cache
@floating
def param_kernel(op: str, dtype: str) -> Kernel:
    """The kernel of ``op`` (a key of :data:`PARAM_UNARY`) with its two attributes."""
    ctype = DTYPES[dtype][0]
    name = f"unary_{op.lower()}_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, {ctype}* __restrict__ y, i64 n,
                                  float alpha, float beta) {{
    {_LOOP} {{
        float v = load_f(x[i]);
        store_f(&y[i], {PARAM_UNARY[op]});
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "x"),
        Param(f"{ctype}*", "y"),
        Param("i64", "n"),
        Param("float", "alpha"),
        Param("float", "beta"),
    )
    return Kernel(name, params, source)


INTS = {
    "i8": ("signed char", np.dtype(np.int8)),
    "i16": ("short", np.dtype(np.int16)),
    "i32": ("int", np.dtype(np.int32)),
    "i64": ("long long", np.dtype(np.int64)),
    "u8": ("unsigned char", np.dtype(np.uint8)),
    "u16": ("unsigned short", np.dtype(np.uint16)),
    "u32": ("unsigned int", np.dtype(np.uint32)),
    "u64": ("unsigned long long", np.dtype(np.uint64)),
}
"""Integer element types of the integer kernels: suffix -> (C type, numpy dtype)."""

INT_BINARY: dict[str, str] = {
    "Add": "u + v",
    "Sub": "u - v",
    "Mul": "u * v",
    "Div": "v == 0 ? 0 : u / v",  # truncates toward zero, as onnxruntime; 0 for a zero divisor
    "Max": "u > v ? u : v",
    "Min": "u < v ? u : v",
    "Mod": "v == 0 ? 0 : ((u % v != 0 && ((u % v < 0) != (v < 0))) ? u % v + v : u % v)",
    "FMod": "v == 0 ? 0 : u % v",
    "BitwiseAnd": "u & v",
    "BitwiseOr": "u | v",
    "BitwiseXor": "u ^ v",
    # shifts by a negative amount or the width or more: the sign extension alone, as ONNX
    "BitShiftLeft": "(v < 0 || v >= 8 * (int)sizeof(u)) ? 0 : (unsigned long long)u << v",
    "BitShiftRight": "(v < 0 || v >= 8 * (int)sizeof(u)) ? (u < 0 ? -1 : 0) : u >> v",
}
"""Integer binary ops: the C expression of ``u`` and ``v`` (Mod: the divisor's sign, as Python)."""

BOOL_BINARY = {"And": "u && v", "Or": "u || v", "Xor": "(u != 0) != (v != 0)"}

INT_UNARY: dict[str, str] = {
    "Abs": "u < 0 ? -u : u",
    "Neg": "-u",
    "Sign": "(u > 0) - (u < 0)",
    "Relu": "u < 0 ? 0 : u",
    "BitwiseNot": "~u",
}
"""Integer unary ops: the C expression of ``u`` (wrapping as the type does)."""


@cache
def int_unary_kernel(op: str, dtype: str) -> Kernel:
    """The kernel of integer unary ``op`` (a key of :data:`INT_UNARY`) for ``dtype`` (of
    :data:`INTS`)."""
    ctype = INTS[dtype][0]
    name = f"iunary_{op.lower()}_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, {ctype}* __restrict__ y, i64 n) {{
    {_LOOP} {{
        {ctype} u = x[i];
        y[i] = ({ctype})({INT_UNARY[op]});
    }}
}}
"""
    params = (Param(f"const {ctype}*", "x"), Param(f"{ctype}*", "y"), Param("i64", "n"))
    return Kernel(name, params, source)


@cache
def int_binary_kernel(op: str, dtype: str, rank: int) -> Kernel:
    """Broadcasting integer (``i32``, ``i64``) or bool (``b``) binary ops,
    comparisons included (bool output)."""
    if dtype == "b":
        ctype, expr, out = "unsigned char", f"(unsigned char)({BOOL_BINARY[op]})", "unsigned char"
    else:
        ctype = INTS[dtype][0]
        if op in COMPARE:
            expr, out = f"(unsigned char)({COMPARE[op]})", "unsigned char"
        else:
            expr, out = f"({ctype})({INT_BINARY[op]})", ctype
    name = f"ibinary_{op.lower()}_{dtype}_r{rank}"
    steps = _coords(rank, ("oa", "sa"), ("ob", "sb"))
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ a, const {ctype}* __restrict__ b,
                                  {out}* __restrict__ y, i64 n, Bcast s) {{
    {_LOOP} {{
        i64 r = i, oa = 0, ob = 0;
{steps}
        {ctype} u = a[oa], v = b[ob];
        y[i] = {expr};
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "a"),
        Param(f"const {ctype}*", "b"),
        Param(f"{out}*", "y"),
        Param("i64", "n"),
        Param("Bcast", "s"),
    )
    return Kernel(name, params, source, (BCAST,))


COMPARE: dict[str, str] = {
    "Equal": "u == v",
    "Less": "u < v",
    "Greater": "u > v",
    "LessOrEqual": "u <= v",
    "GreaterOrEqual": "u >= v",
}
"""Comparisons: the float expression of ``u`` and ``v``; the output is bool."""


@cache
@floating
def binary_kernel(op: str, dtype: str, rank: int) -> Kernel:
    """The broadcasting kernel of binary ``op`` for ``dtype`` and output rank
    ``rank`` (1 to :data:`MAX_RANK`)."""
    if not 1 <= rank <= MAX_RANK:
        raise ValueError(f"rank {rank} is outside 1..{MAX_RANK}")
    ctype = DTYPES[dtype][0]
    compare = op in COMPARE
    out = "unsigned char" if compare else ctype
    expr = f"(unsigned char)({COMPARE[op]})" if compare else BINARY[op]
    store = "y[i] = " + expr + ";" if compare else f"store_f(&y[i], {expr});"
    name = f"binary_{op.lower()}_{dtype}_r{rank}"
    steps = _coords(rank, ("oa", "sa"), ("ob", "sb"))
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ a, const {ctype}* __restrict__ b,
                       {out}* __restrict__ y, i64 n, Bcast s) {{
    {_LOOP} {{
        i64 r = i, oa = 0, ob = 0;
{steps}
        float u = load_f(a[oa]), v = load_f(b[ob]);
        {store}
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "a"),
        Param(f"const {ctype}*", "b"),
        Param(f"{out}*", "y"),
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


CAST_TYPES = {
    "f32": ("float", np.dtype(np.float32)),
    "f16": ("__half", np.dtype(np.float16)),
    "f64": ("double", np.dtype(np.float64)),
    "i64": ("long long", np.dtype(np.int64)),
    "i32": ("int", np.dtype(np.int32)),
    "i16": ("short", np.dtype(np.int16)),
    "i8": ("signed char", np.dtype(np.int8)),
    "u64": ("unsigned long long", np.dtype(np.uint64)),
    "u32": ("unsigned int", np.dtype(np.uint32)),
    "u16": ("unsigned short", np.dtype(np.uint16)),
    "u8": ("unsigned char", np.dtype(np.uint8)),
    "b": ("unsigned char", np.dtype(np.bool_)),
}
"""Element types Cast converts between: suffix -> (C type, numpy dtype)."""


@cache
def cast_kernel(src: str, dst: str) -> Kernel:
    """``y = (dst) x`` between the types of :data:`CAST_TYPES`: floats through
    float (float16 rounds to nearest even), integers directly, float to
    integer truncating toward zero, anything to bool as ``x != 0``."""
    a, b = CAST_TYPES[src][0], CAST_TYPES[dst][0]
    floats = ("f32", "f16")
    if dst == "b":
        body = (
            "y[i] = (unsigned char)("
            + ("load_f(x[i]) != 0.0f" if src in floats else "x[i] != 0")
            + ");"
        )
    elif dst in floats:
        value = "load_f(x[i])" if src in floats else "(float)x[i]"
        body = f"store_f(&y[i], {value});"
    else:
        value = f"({b})load_f(x[i])" if src in floats else f"({b})x[i]"
        body = f"y[i] = {value};"
    name = f"cast_{src}_{dst}"
    source = f"""\
extern "C" __global__ void {name}(const {a}* __restrict__ x, {b}* __restrict__ y, i64 n) {{
    {_LOOP} {body}
}}
"""
    return Kernel(name, (Param(f"const {a}*", "x"), Param(f"{b}*", "y"), Param("i64", "n")), source)


@cache
def not_kernel() -> Kernel:
    """Logical Not of bools."""
    source = f"""\
extern "C" __global__ void logical_not(const unsigned char* __restrict__ x,
                                       unsigned char* __restrict__ y, i64 n) {{
    {_LOOP} y[i] = (unsigned char)!x[i];
}}
"""
    params = (Param("const unsigned char*", "x"), Param("unsigned char*", "y"), Param("i64", "n"))
    return Kernel("logical_not", params, source)


@cache
@floating
def clip_kernel(dtype: str) -> Kernel:
    """``y = min(max(x, lo), hi)``: NaN stays NaN, and ``lo > hi`` gives ``hi``, as ONNX."""
    ctype = DTYPES[dtype][0]
    name = f"clip_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, {ctype}* __restrict__ y, i64 n,
                                  float lo, float hi) {{
    {_LOOP} {{
        float v = load_f(x[i]);
        store_f(&y[i], v != v ? v : fminf(fmaxf(v, lo), hi));  // min > max gives max
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "x"),
        Param(f"{ctype}*", "y"),
        Param("i64", "n"),
        Param("float", "lo"),
        Param("float", "hi"),
    )
    return Kernel(name, params, source)


TO_DOUBLE = Snippet(
    "to_double",
    """\
__device__ __forceinline__ double to_double(__half v) { return (double)__half2float(v); }
template <typename T> __device__ __forceinline__ double to_double(T v) { return (double)v; }
__device__ __forceinline__ void store_double(__half *p, double v) { *p = __float2half((float)v); }
template <typename T> __device__ __forceinline__ void store_double(T *p, double v) { *p = (T)v; }
""",
)
"""Any element type to double and back (float16 through float)."""

POW_BASES = ("f16", "f32", "f64", "i32", "i64")
POW_EXPONENTS = ("f16", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")
"""Element types of :func:`pow_kernel`'s base (also the output's) and exponent."""


@cache
def pow_kernel(base: str, exponent: str) -> Kernel:
    """Pow of a base and an exponent of any two types (broadcast at rank
    :data:`MAX_RANK`): computed in double, the result converted to the
    base's type (an integer truncated, as ONNX's reference)."""
    a, b = CAST_TYPES[base][0], CAST_TYPES[exponent][0]
    name = f"pow_{base}_{exponent}"
    steps = _coords(MAX_RANK, ("oa", "sa"), ("ob", "sb"))
    source = f"""\
extern "C" __global__ void {name}(const {a}* __restrict__ x, const {b}* __restrict__ e,
                                  {a}* __restrict__ y, i64 n, Bcast s) {{
    {_LOOP} {{
        i64 r = i, oa = 0, ob = 0;
{steps}
        store_double(&y[i], pow(to_double(x[oa]), to_double(e[ob])));
    }}
}}
"""
    params = (
        Param(f"const {a}*", "x"),
        Param(f"const {b}*", "e"),
        Param(f"{a}*", "y"),
        Param("i64", "n"),
        Param("Bcast", "s"),
    )
    return Kernel(name, params, source, (BCAST, TO_DOUBLE))


@cache
def int_clip_kernel(dtype: str) -> Kernel:
    """Clip of an integer type (of :data:`INTS`): the bounds given as their bits."""
    ctype = INTS[dtype][0]
    name = f"iclip_{dtype}"
    source = f"""\
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, {ctype}* __restrict__ y, i64 n,
                                  unsigned long long lo_bits, unsigned long long hi_bits) {{
    {ctype} lo = ({ctype})lo_bits, hi = ({ctype})hi_bits;
    {_LOOP} {{
        {ctype} v = x[i];
        y[i] = v < lo ? lo : (v > hi ? hi : v);
        if (lo > hi) y[i] = hi;  // min > max gives max, as ONNX
    }}
}}
"""
    params = (
        Param(f"const {ctype}*", "x"),
        Param(f"{ctype}*", "y"),
        Param("i64", "n"),
        Param("unsigned long long", "lo_bits"),
        Param("unsigned long long", "hi_bits"),
    )
    return Kernel(name, params, source)


RANGE_TYPES = ("f32", "f64", "i16", "i32", "i64")
"""Element types of :func:`range_kernel` (those of ONNX's Range)."""


@cache
def range_kernel(dtype: str) -> Kernel:
    """``y[i] = start + i * delta`` (of :data:`RANGE_TYPES`): floats computed
    in double and rounded once, integers in 64 bits."""
    ctype = CAST_TYPES[dtype][0]
    integer = dtype.startswith("i")
    arg = "i64" if integer else "double"
    name = f"range_{dtype}"
    source = f"""\
extern "C" __global__ void {name}({ctype}* __restrict__ y, i64 n, {arg} start, {arg} delta) {{
    {_LOOP} y[i] = ({ctype})(start + ({arg})i * delta);
}}
"""
    params = (Param(f"{ctype}*", "y"), Param("i64", "n"), Param(arg, "start"), Param(arg, "delta"))
    return Kernel(name, params, source)
