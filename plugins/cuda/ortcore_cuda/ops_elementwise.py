"""Element-wise ops: unary and parametric activations, arithmetic and comparison
(broadcasting, float and integer), bitwise and logical ops, Cast and CastLike
between the common types, Not, Clip and Where.

Kernels: :mod:`ortcore_cuda.kernels.elementwise`, one thread an output
element (grid-stride). :func:`register` adds this family's kernels to the
provider's registry; :func:`decline` says why a node of this family is not
covered (or ``None``). Variadic Sum, Max and Min fold their inputs pairwise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx_ir as ir
from ep_sdk import GraphContext, KernelRegistry, NodeInfo

from .kernels import elementwise as ew
from .ops_common import (
    FLOATS64,
    INT_TYPES,
    MOVABLE,
    SIGNED,
    device_of,
    input_rank,
    suffix,
)
from .tensor import CudaTensor

__all__ = [
    "BINARY_SINCE",
    "BROADCASTING",
    "CASTABLE",
    "PARAM_SINCE",
    "UNARY_SINCE",
    "decline",
    "register",
]

UNARY_SINCE = {
    "Relu": 6,
    "Sigmoid": 6,
    "Tanh": 6,
    "Exp": 6,
    "Log": 6,
    "Neg": 6,
    "Abs": 6,
    "Sqrt": 6,
    "Reciprocal": 6,
    "Floor": 6,
    "Ceil": 6,
    "Erf": 9,
    "Sin": 7,
    "Cos": 7,
    "Softplus": 1,
    "Sign": 9,
    "Round": 11,
    "HardSwish": 14,
    "Mish": 18,
    "Softsign": 1,
    "Tan": 7,
    "Asin": 7,
    "Acos": 7,
    "Atan": 7,
    "Sinh": 9,
    "Cosh": 9,
    "Asinh": 9,
    "Acosh": 9,
    "Atanh": 9,
}


PARAM_SINCE: dict[str, tuple[int, str, float, str, float]] = {
    "LeakyRelu": (6, "alpha", 0.01, "", 0.0),
    "Elu": (6, "alpha", 1.0, "", 0.0),
    "Selu": (6, "alpha", 1.67326319217681884765625, "gamma", 1.05070102214813232421875),
    "Celu": (12, "alpha", 1.0, "", 0.0),
    "HardSigmoid": (6, "alpha", 0.2, "beta", 0.5),
    "ThresholdedRelu": (10, "alpha", 1.0, "", 0.0),
    "Shrink": (9, "bias", 0.0, "lambd", 0.5),
    "Swish": (24, "alpha", 1.0, "", 0.0),
}
"""Unary ops with attributes: since, the attributes passed as alpha and beta, with defaults."""


_ISUFFIX = {dtype: suffix for suffix, (_, dtype) in ew.INTS.items()} | {np.dtype(np.bool_): "b"}


BINARY_SINCE = {"Add": 7, "Sub": 7, "Mul": 7, "Div": 7, "Pow": 7, "Max": 8, "Min": 8, "PRelu": 7}


BROADCASTING = {
    *BINARY_SINCE,
    "Sum",
    "Transpose",
    "Mod",
    "BitwiseAnd",
    "BitwiseOr",
    "BitwiseXor",
    "And",
    "Or",
    "Xor",
    "Equal",
    "Less",
    "Greater",
    "LessOrEqual",
    "GreaterOrEqual",
}
"""Ops whose kernels index by rank (up to ``MAX_RANK``)."""


def _unary(op: str) -> Callable[[NodeInfo], Any]:
    def build(info: NodeInfo) -> Any:
        cuda = device_of(info)
        name = op
        if op == "Gelu" and info.attr("approximate", "none") == "tanh":
            name = "GeluTanh"

        def compute(x: CudaTensor) -> tuple[CudaTensor]:
            y = cuda.empty(x.shape, x.dtype)
            if x.size:
                cuda.launch_over(ew.unary_kernel(name, suffix(x)), x.size, x.ptr, y.ptr, x.size)
            return (y,)

        return compute

    return build


def _param_unary(op: str) -> Callable[[NodeInfo], Any]:
    def build(info: NodeInfo) -> Any:
        cuda = device_of(info)
        _, a_name, a_default, b_name, b_default = PARAM_SINCE[op]
        alpha = float(info.attr(a_name, a_default))
        beta = float(info.attr(b_name, b_default)) if b_name else 0.0

        def compute(x: CudaTensor) -> tuple[CudaTensor]:
            y = cuda.empty(x.shape, x.dtype)
            if x.size:
                kernel = ew.param_kernel(op, suffix(x))
                cuda.launch_over(kernel, x.size, x.ptr, y.ptr, x.size, alpha, beta)
            return (y,)

        return compute

    return build


def _int_binary(op: str) -> Callable[[NodeInfo], Any]:
    def build(info: NodeInfo) -> Any:
        cuda = device_of(info)
        name = "FMod" if op == "Mod" and int(info.attr("fmod", 0)) else op
        if op == "BitShift":
            name = "BitShiftLeft" if info.attr("direction") == "LEFT" else "BitShiftRight"
        compare = op in ew.COMPARE

        def pair(a: CudaTensor, b: CudaTensor) -> CudaTensor:
            out, rank, s = ew.broadcast_args(a.shape, b.shape)
            y = cuda.empty(out, np.bool_ if compare else a.dtype)
            if y.size:
                kernel = ew.int_binary_kernel(name, _ISUFFIX[a.dtype], rank)
                cuda.launch_over(kernel, y.size, a.ptr, b.ptr, y.ptr, y.size, s)
            return y

        def compute(*xs: CudaTensor) -> tuple[CudaTensor]:
            if len(xs) == 1:  # Max, Min of one input
                return (cuda.copy(xs[0], xs[0].shape),)
            acc = pair(xs[0], xs[1])
            for x in xs[2:]:
                acc = pair(acc, x)
            return (acc,)

        return compute

    return build


def _int_unary(op: str) -> Callable[[NodeInfo], Any]:
    def build(info: NodeInfo) -> Any:
        cuda = device_of(info)

        def compute(x: CudaTensor) -> tuple[CudaTensor]:
            y = cuda.empty(x.shape, x.dtype)
            if x.size:
                kernel = ew.int_unary_kernel(op, _ISUFFIX[x.dtype])
                cuda.launch_over(kernel, x.size, x.ptr, y.ptr, x.size)
            return (y,)

        return compute

    return build


def _binary(op: str) -> Callable[[NodeInfo], Any]:
    def build(info: NodeInfo) -> Any:
        cuda = device_of(info)
        name = "FMod" if op == "Mod" and int(info.attr("fmod", 0)) else op
        mixed = _pow_mixed(info) if op == "Pow" else None  # a float32 base, a float64 exponent

        def pair(a: CudaTensor, b: CudaTensor) -> CudaTensor:
            if a.dtype != b.dtype:
                raise TypeError(f"{info.describe()}: inputs of types {a.dtype} and {b.dtype}")
            out, rank, s = ew.broadcast_args(a.shape, b.shape)
            y = cuda.empty(out, a.dtype)
            if y.size:
                kernel = ew.binary_kernel(name, suffix(a), rank)
                cuda.launch_over(kernel, y.size, a.ptr, b.ptr, y.ptr, y.size, s)
            return y

        def compute(*xs: CudaTensor) -> tuple[CudaTensor]:
            if len(xs) == 1:  # Sum, Max, Min of one input
                return (cuda.copy(xs[0], xs[0].shape),)
            if mixed is not None and xs[0].dtype != xs[1].dtype:
                return mixed(*xs)  # type: ignore[no-any-return]
            acc = pair(xs[0], xs[1])
            for x in xs[2:]:  # variadic Sum, Max, Min: folded pairwise, broadcasting
                acc = pair(acc, x)
            return (acc,)

        return compute

    return build


def _pow_mixed(info: NodeInfo) -> Any:
    """Pow of a base and an exponent of different types (computed in double)."""
    cuda = device_of(info)

    def compute(a: CudaTensor, b: CudaTensor) -> tuple[CudaTensor]:
        out = np.broadcast_shapes(a.shape, b.shape)
        if len(out) > ew.MAX_RANK:
            raise ValueError(f"{info.describe()}: rank {len(out)} (the kernel goes to 6)")
        pad = (1,) * ew.MAX_RANK
        _, _, s = ew.broadcast_args(
            (pad + a.shape)[-ew.MAX_RANK :], (pad + b.shape)[-ew.MAX_RANK :]
        )
        y = cuda.empty(out, a.dtype)
        if y.size:
            kernel = ew.pow_kernel(_CAST_SUFFIX[a.dtype], _CAST_SUFFIX[b.dtype])
            cuda.launch_over(kernel, y.size, a.ptr, b.ptr, y.ptr, y.size, s)
        return (y,)

    return compute


_CAST_SUFFIX = {dtype: suffix for suffix, (_, dtype) in ew.CAST_TYPES.items() if suffix != "b"}


_CASTS = {t: suffix for suffix, (_, t) in ew.CAST_TYPES.items()}


CASTABLE = (
    ir.DataType.FLOAT,
    ir.DataType.FLOAT16,
    ir.DataType.DOUBLE,
    ir.DataType.INT64,
    ir.DataType.INT32,
    ir.DataType.INT16,
    ir.DataType.INT8,
    ir.DataType.UINT64,
    ir.DataType.UINT32,
    ir.DataType.UINT16,
    ir.DataType.UINT8,
    ir.DataType.BOOL,
)


def _cast(info: NodeInfo) -> Any:
    """Cast to ``to`` (the output's static type, else the attribute) or,
    CastLike, to the target's type (known when it runs, if not before)."""
    cuda = device_of(info)
    known: np.dtype | None
    try:
        known = np.dtype(info.output_dtype(0))
    except TypeError:  # an untyped output (a subgraph's values are not inferred)
        to = info.attr("to")
        known = np.dtype(ir.DataType(int(to)).numpy()) if to is not None else None

    def compute(x: CudaTensor, *like: Any) -> tuple[CudaTensor]:
        to = known if known is not None else np.dtype(like[0].dtype)
        if x.dtype == to:
            return (cuda.copy(x, x.shape),)
        y = cuda.empty(x.shape, to)
        if y.size:
            kernel = ew.cast_kernel(_CASTS[x.dtype], _CASTS[to])
            cuda.launch_over(kernel, y.size, x.ptr, y.ptr, y.size)
        return (y,)

    return compute


def _not(info: NodeInfo) -> Any:
    cuda = device_of(info)

    def compute(x: CudaTensor) -> tuple[CudaTensor]:
        y = cuda.empty(x.shape, x.dtype)
        if y.size:
            cuda.launch_over(ew.not_kernel(), y.size, x.ptr, y.ptr, y.size)
        return (y,)

    return compute


def _compare(op: str) -> Callable[[NodeInfo], Any]:
    def build(info: NodeInfo) -> Any:
        cuda = device_of(info)

        def compute(a: CudaTensor, b: CudaTensor) -> tuple[CudaTensor]:
            out, rank, s = ew.broadcast_args(a.shape, b.shape)
            y = cuda.empty(out, np.bool_)
            if y.size:
                kernel = ew.binary_kernel(op, suffix(a), rank)
                cuda.launch_over(kernel, y.size, a.ptr, b.ptr, y.ptr, y.size, s)
            return (y,)

        return compute

    return build


def _clip(info: NodeInfo) -> Any:
    cuda = device_of(info)

    def compute(x: CudaTensor, lo: Any = None, hi: Any = None) -> tuple[CudaTensor]:
        if info.opset < 11:
            low, high = float(info.attr("min", -np.inf)), float(info.attr("max", np.inf))
        else:
            low = float(np.asarray(lo).reshape(-1)[0]) if lo is not None else -np.inf
            high = float(np.asarray(hi).reshape(-1)[0]) if hi is not None else np.inf
        y = cuda.empty(x.shape, x.dtype)
        if y.size:
            cuda.launch_over(ew.clip_kernel(suffix(x)), y.size, x.ptr, y.ptr, y.size, low, high)
        return (y,)

    return compute


def _int_clip(info: NodeInfo) -> Any:
    cuda = device_of(info)

    def compute(x: CudaTensor, lo: Any = None, hi: Any = None) -> tuple[CudaTensor]:
        limits = np.iinfo(x.dtype)
        bounds = [
            np.asarray(v, x.dtype).reshape(-1)[:1] if v is not None and np.size(v) else None
            for v in (lo, hi)
        ]
        low = bounds[0] if bounds[0] is not None else np.array([limits.min], x.dtype)
        high = bounds[1] if bounds[1] is not None else np.array([limits.max], x.dtype)
        y = cuda.empty(x.shape, x.dtype)
        if y.size:
            bits = [int.from_bytes(v.tobytes(), "little") for v in (low, high)]
            kernel = ew.int_clip_kernel(_ISUFFIX[x.dtype])
            cuda.launch_over(kernel, y.size, x.ptr, y.ptr, y.size, *bits)
        return (y,)

    return compute


def _where(info: NodeInfo) -> Any:
    cuda = device_of(info)

    def compute(cond: CudaTensor, a: CudaTensor, b: CudaTensor) -> tuple[CudaTensor]:
        out, rank, s = ew.where_args(cond.shape, a.shape, b.shape)
        y = cuda.empty(out, a.dtype)
        if y.size:
            kernel = ew.where_kernel(a.dtype.itemsize, rank)
            cuda.launch_over(kernel, y.size, cond.ptr, a.ptr, b.ptr, y.ptr, y.size, s)
        return (y,)

    return compute


def register(reg: KernelRegistry) -> None:
    """Add this family's kernels to ``reg``."""
    wide: dict[str | int, tuple[ir.DataType, ...]] = {"T": FLOATS64}
    for op, since in UNARY_SINCE.items():
        reg.kernel(op, since=since, types=wide)(_unary(op))
    reg.kernel("Gelu", since=20, types=wide)(_unary("Gelu"))
    for op, since in BINARY_SINCE.items():
        types: dict[str | int, tuple[ir.DataType, ...]] = (
            {"T": FLOATS64, "T1": FLOATS64} if op == "Pow" else wide
        )
        reg.kernel(op, since=since, types=types)(_binary(op))
    int_base = (ir.DataType.INT32, ir.DataType.INT64)
    reg.kernel("Pow", since=12, types={"T": int_base, "T1": (*FLOATS64, *INT_TYPES)})(_pow_mixed)
    reg.kernel("Pow", since=12, types={"T": FLOATS64, "T1": INT_TYPES})(_pow_mixed)
    reg.kernel("Sum", since=8, types=wide)(_binary("Add"))
    for op, (since, *_rest) in PARAM_SINCE.items():
        reg.kernel(op, since=since, types=wide)(_param_unary(op))
    for op, since, allowed in (
        ("Abs", 6, INT_TYPES),
        ("Neg", 6, SIGNED),
        ("Sign", 9, INT_TYPES),
        ("Relu", 14, SIGNED),
        ("BitwiseNot", 18, INT_TYPES),
    ):
        reg.kernel(op, since=since, types={"T": allowed})(_int_unary(op))
    reg.kernel("BitShift", since=11, types={"T": INT_TYPES})(_int_binary("BitShift"))
    reg.kernel("Mod", since=10, types=wide)(_binary("Mod"))
    ints: dict[str | int, tuple[ir.DataType, ...]] = {"T": INT_TYPES}
    for op, since in (
        ("Add", 7),
        ("Sub", 7),
        ("Mul", 7),
        ("Div", 7),
        ("Max", 12),
        ("Min", 12),
        ("Mod", 10),
        ("Equal", 11),
        ("Less", 9),
        ("Greater", 9),
        ("LessOrEqual", 12),
        ("GreaterOrEqual", 12),
    ):
        reg.kernel(op, since=since, types=ints)(_int_binary(op))
    for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor"):
        reg.kernel(op, since=18, types=ints)(_int_binary(op))
    bools: dict[str | int, tuple[ir.DataType, ...]] = {"T": (ir.DataType.BOOL,)}
    for op in ("And", "Or", "Xor"):
        reg.kernel(op, since=7, types=bools)(_int_binary(op))
    reg.kernel("Equal", since=11, types=bools)(_int_binary("Xor"))
    reg.kernel("Cast", since=6, types={0: CASTABLE, "T2": CASTABLE})(_cast)
    reg.kernel("CastLike", since=15, types={0: CASTABLE, 1: CASTABLE})(_cast)
    reg.kernel("Not", since=1, types={"T": (ir.DataType.BOOL,)})(_not)
    reg.kernel("Where", since=9, types={"T": MOVABLE})(_where)
    for op, since in (
        ("Equal", 11),
        ("Less", 9),
        ("Greater", 9),
        ("LessOrEqual", 12),
        ("GreaterOrEqual", 12),
    ):
        reg.kernel(op, since=since, types=wide)(_compare(op))
    reg.kernel("Clip", since=6, until=10, types=wide)(_clip)
    reg.kernel("Clip", since=11, types=wide, input_memory={1: "host", 2: "host"})(_clip)
    reg.kernel("Clip", since=12, types={"T": INT_TYPES}, input_memory={1: "host", 2: "host"})(
        _int_clip
    )


def decline(node: ir.Node, graph: GraphContext) -> str | None:
    """Why this family's kernel for ``node`` does not cover it, or ``None``."""
    op = node.op_type
    if op in BROADCASTING and op != "Transpose":
        ranks = [input_rank(node, i) for i in range(len(node.inputs))]
        if max(r or 0 for r in ranks) > ew.MAX_RANK:  # an unknown rank is checked at run time
            return f"CUDA: {op} of rank over {ew.MAX_RANK}"
    if op == "Where":
        rank = input_rank(node)
        # an unknown rank is checked when the kernel runs
        if rank is not None and (rank > ew.MAX_RANK or rank == 0):
            return f"CUDA: {op} of rank {rank}"
        if any((input_rank(node, i) or 0) > ew.MAX_RANK for i in range(3)):
            return f"CUDA: Where of rank over {ew.MAX_RANK}"
    return None
