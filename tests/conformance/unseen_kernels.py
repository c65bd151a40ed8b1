"""The healthy numpy kernels the providers of :mod:`tests.conformance.faulty_unseen` start from.

A small provider as an author writes one: 19 ops in pure numpy, each claimed
for the opsets and element types a real provider of them claims, following
the ONNX semantics of every claimed opset (Softmax before 13 coerces to 2-D,
Split takes ``num_outputs`` from 18). Every kernel returns arrays it made
(never a view of an input), computes float16 and bfloat16 in float32 and
keeps no state between runs. A faulty provider replaces one entry of
:data:`KERNELS` (or wraps the registry) with its bug.

Never uses onnx.reference: the oracle must not check itself.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx_ir as ir

import ep_sdk
from ep_sdk import KernelRegistry, NodeInfo
from ep_sdk.dtypes import DataType, to_numpy

__all__ = ["KERNELS", "Kernel", "axis_of", "narrow", "registry", "widen"]

D = DataType
FLOATS = frozenset({D.FLOAT, D.DOUBLE, D.FLOAT16, D.BFLOAT16})
WIDE_INTS = frozenset({D.INT32, D.INT64, D.UINT32, D.UINT64})
INTS = WIDE_INTS | {D.INT8, D.UINT8, D.INT16, D.UINT16}
NUMERIC = FLOATS | INTS
TENSORS = NUMERIC | {D.BOOL}
IDX = frozenset({D.INT32, D.INT64})

Fn = Callable[..., Any]
Builder = Callable[[NodeInfo], Fn]


@dataclass(frozen=True)
class Kernel:
    """One op of the provider: its builder (returns a compute function giving
    one array or a tuple of them), opsets and type constraints."""

    build: Builder
    since: int
    types: dict[str | int, frozenset[DataType]] = field(default_factory=dict)
    until: int | None = None


def is_narrow_float(dt: np.dtype) -> bool:
    """float16, or bfloat16 (numpy kind 'V' for ml_dtypes)."""
    return dt.itemsize == 2 and dt.kind in "fV"


def narrow(y: Any, dt: np.dtype) -> np.ndarray:
    """``y`` as an array of ``dt``."""
    return np.asarray(y).astype(dt, copy=False)


def axis_of(axis: int, rank: int) -> int:
    """A possibly negative axis as an index into a shape of ``rank`` dims."""
    return axis + rank if axis < 0 else axis


def widen(x: np.ndarray) -> np.ndarray:
    """``x`` in the type a kernel computes in: float32 for float16 and bfloat16."""
    return x.astype(np.float32) if is_narrow_float(x.dtype) else x


# -- elementwise ----------------------------------------------------------------


def _binary(fn: Fn) -> Builder:
    def build(info: NodeInfo) -> Fn:
        def compute(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            with np.errstate(all="ignore"):  # inf - inf, overflow: IEEE's answers
                return narrow(fn(widen(a), widen(b)), a.dtype)

        return compute

    return build


def int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division truncated toward zero (C's), in the integer type."""
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.floor_divide(a, b)
        r = np.remainder(a, b)
    return q + ((r != 0) & ((a < 0) ^ (b < 0))).astype(q.dtype)


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu":
        return int_div(a, b)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.divide(a, b)


def _less(info: NodeInfo) -> Fn:
    return lambda a, b: np.asarray(np.less(widen(a), widen(b)))


def _relu(info: NodeInfo) -> Fn:
    return lambda x: narrow(np.maximum(widen(x), 0), x.dtype)


def _leaky_relu(info: NodeInfo) -> Fn:
    alpha = float(info.attrs["alpha"])
    return lambda x: narrow(np.where(widen(x) < 0, widen(x) * alpha, widen(x)), x.dtype)


def _identity(info: NodeInfo) -> Fn:
    return lambda x: np.array(x, copy=True)


# -- matrix products -------------------------------------------------------------


def _matmul(info: NodeInfo) -> Fn:
    return lambda a, b: narrow(np.matmul(widen(a), widen(b)), a.dtype)


def _gemm(info: NodeInfo) -> Fn:
    alpha, beta = float(info.attrs["alpha"]), float(info.attrs["beta"])
    ta, tb = int(info.attrs["transA"]), int(info.attrs["transB"])

    def compute(a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None) -> np.ndarray:
        x, w = widen(a), widen(b)
        y = alpha * ((x.T if ta else x) @ (w.T if tb else w))
        if c is not None:
            y = y + beta * widen(c)  # unidirectional broadcast: numpy's rules hold
        return narrow(y, a.dtype)

    return compute


# -- normalizations ----------------------------------------------------------------


def softmax_along(x: np.ndarray, axis: int) -> np.ndarray:
    """Softmax of ``x`` along one axis, in ``x``'s own (wide) type."""
    if x.size == 0:
        return x.copy()
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def _softmax(info: NodeInfo) -> Fn:
    axis = int(info.attrs["axis"])
    coerce = info.opset < 13  # before 13: the input as 2-D, [outer dims, inner dims]

    def compute(x: np.ndarray) -> np.ndarray:
        a = axis_of(axis, x.ndim)
        w = widen(x)
        if coerce:
            rows = math.prod(x.shape[:a])
            y = softmax_along(w.reshape(rows, math.prod(x.shape[a:])), 1).reshape(x.shape)
        else:
            y = softmax_along(w, a)
        return narrow(y, x.dtype)

    return compute


def _layer_norm(info: NodeInfo) -> Fn:
    axis, eps = int(info.attrs["axis"]), float(info.attrs["epsilon"])
    stats_types = [
        to_numpy(t) if t is not None else np.dtype(np.float32) for t in info.output_types
    ]

    def compute(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> tuple[Any, ...]:
        return layer_norm(x, w, b, axis, eps, stats_types)

    return compute


def layer_norm(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None,
    axis: int,
    eps: float,
    stats_types: Sequence[np.dtype],
) -> tuple[Any, ...]:
    """LayerNormalization's three outputs (stash type float32, float64 for double)."""
    a = axis_of(axis, x.ndim)
    stash = np.float64 if x.dtype == np.float64 else np.float32
    xs: np.ndarray[Any, Any] = x.astype(stash)
    axes = tuple(range(a, x.ndim))
    mean = np.mean(xs, axis=axes, keepdims=True)
    inv = 1.0 / np.sqrt(np.mean((xs - mean) ** 2, axis=axes, keepdims=True) + eps)
    y = (xs - mean) * inv * w.astype(stash)
    if b is not None:
        y = y + b.astype(stash)
    out: list[Any] = [narrow(y, x.dtype)]
    for value, dt in zip((mean, inv), stats_types[1:]):
        out.append(narrow(value, dt))
    return tuple(out[: len(stats_types)])


# -- shapes and indices -------------------------------------------------------------


def _flatten(info: NodeInfo) -> Fn:
    axis = int(info.attrs["axis"])

    def compute(x: np.ndarray) -> np.ndarray:
        a = axis_of(axis, x.ndim)
        return x.reshape(math.prod(x.shape[:a]), math.prod(x.shape[a:])).copy()

    return compute


def _transpose(info: NodeInfo) -> Fn:
    perm = info.attrs.get("perm")

    def compute(x: np.ndarray) -> np.ndarray:
        p = list(perm) if perm is not None else list(range(x.ndim))[::-1]
        return np.transpose(x, p).copy()

    return compute


def arg_reduce(x: np.ndarray, axis: int, keepdims: bool, last: bool, fn: Fn) -> np.ndarray:
    """ArgMax/ArgMin (``fn``: np.argmax or np.argmin) of ``x``."""
    a = axis_of(axis, x.ndim)
    w = widen(x)
    if last:
        flipped = np.flip(w, axis=a)
        idx = x.shape[a] - 1 - fn(flipped, axis=a)
    else:
        idx = fn(w, axis=a)
    idx = np.asarray(idx, dtype=np.int64)
    return np.expand_dims(idx, a) if keepdims else idx


def _arg(fn: Fn) -> Builder:
    def build(info: NodeInfo) -> Fn:
        axis, keep = int(info.attrs["axis"]), bool(info.attrs["keepdims"])
        last = bool(info.attrs.get("select_last_index", 0))
        return lambda x: arg_reduce(x, axis, keep, last, fn)

    return build


def split_sizes(length: int, parts: int) -> list[int]:
    """Split 18's sizes for ``num_outputs``: ceil(length / parts) each, the last smaller."""
    each = -(-length // parts)
    sizes = [min(each, max(length - i * each, 0)) for i in range(parts)]
    return sizes


def _split(info: NodeInfo) -> Fn:
    axis = int(info.attrs["axis"])
    count = len(info.node.outputs)
    num = info.attrs.get("num_outputs")

    def compute(x: np.ndarray, split: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
        a = axis_of(axis, x.ndim)
        if split is not None:
            sizes = [int(s) for s in split]
        else:
            sizes = split_sizes(x.shape[a], int(num) if num is not None else count)
        return parts(x, a, sizes)

    return compute


def parts(x: np.ndarray, axis: int, sizes: Sequence[int]) -> tuple[np.ndarray, ...]:
    """``x`` cut along ``axis`` into pieces of ``sizes`` (copies)."""
    bounds = np.cumsum([0, *sizes])
    index: list[Any] = [slice(None)] * x.ndim
    out = []
    for lo, hi in itertools.pairwise(bounds):
        index[axis] = slice(int(lo), int(hi))
        out.append(x[tuple(index)].copy())
    return tuple(out)


def _gather(info: NodeInfo) -> Fn:
    axis = int(info.attrs["axis"])

    def compute(data: np.ndarray, indices: np.ndarray) -> np.ndarray:
        a = axis_of(axis, data.ndim)
        idx = np.where(indices < 0, indices + data.shape[a], indices).astype(np.int64)
        return np.take(data, idx, axis=a)

    return compute


def _constant_of_shape(info: NodeInfo) -> Fn:
    value = info.attrs.get("value")
    fill = np.asarray(value).reshape(-1)[:1] if value is not None else np.zeros(1, np.float32)

    def compute(shape: np.ndarray) -> np.ndarray:
        return np.full(tuple(int(d) for d in shape), fill[0], dtype=fill.dtype)

    return compute


def reduce_sum(x: np.ndarray, axes: Sequence[int] | None, keepdims: bool) -> np.ndarray:
    """Sum over ``axes`` (``None``: all), float16/bfloat16 accumulated in float32."""
    w = widen(x)
    ax = None if axes is None else tuple(axis_of(int(a), x.ndim) for a in axes)
    if x.dtype.kind in "iu":
        y = np.sum(x, axis=ax, keepdims=keepdims, dtype=x.dtype)
    else:
        y = np.sum(w, axis=ax, keepdims=keepdims)
    return narrow(y, x.dtype)


def _reduce_sum(info: NodeInfo) -> Fn:
    keep, noop = bool(info.attrs["keepdims"]), bool(info.attrs["noop_with_empty_axes"])

    def compute(x: np.ndarray, axes: np.ndarray | None = None) -> np.ndarray:
        if axes is None or axes.size == 0:
            return x.copy() if noop else reduce_sum(x, None, keep)
        return reduce_sum(x, [int(a) for a in axes.reshape(-1)], keep)

    return compute


KERNELS: dict[str, Kernel] = {
    "Add": Kernel(_binary(np.add), 7, {"T": NUMERIC}),
    "Sub": Kernel(_binary(np.subtract), 7, {"T": NUMERIC}),
    "Mul": Kernel(_binary(np.multiply), 7, {"T": NUMERIC}),
    "Div": Kernel(_binary(_div), 7, {"T": NUMERIC}),
    "Less": Kernel(_less, 9, {"T": NUMERIC}),
    "Relu": Kernel(_relu, 6, {"T": FLOATS | {D.INT8, D.INT16, D.INT32, D.INT64}}),
    "LeakyRelu": Kernel(_leaky_relu, 6, {"T": FLOATS}),
    "Identity": Kernel(_identity, 13, {"T": TENSORS, "V": TENSORS}),
    "MatMul": Kernel(_matmul, 13, {"T": FLOATS | WIDE_INTS}),
    "Gemm": Kernel(_gemm, 13, {"T": FLOATS}),
    "Softmax": Kernel(_softmax, 1, {"T": FLOATS}),
    "LayerNormalization": Kernel(_layer_norm, 17, {"T": FLOATS, "U": frozenset({D.FLOAT})}),
    "Flatten": Kernel(_flatten, 13, {"T": TENSORS}),
    "Transpose": Kernel(_transpose, 13, {"T": TENSORS}),
    "ArgMax": Kernel(_arg(np.argmax), 13, {"T": NUMERIC}),
    "ArgMin": Kernel(_arg(np.argmin), 13, {"T": NUMERIC}),
    "Split": Kernel(_split, 13, {"T": TENSORS}),
    "Gather": Kernel(_gather, 13, {"T": TENSORS, "Tind": IDX}),
    "ConstantOfShape": Kernel(_constant_of_shape, 9, {"T1": frozenset({D.INT64}), "T2": TENSORS}),
    "ReduceSum": Kernel(_reduce_sum, 13, {"T": FLOATS | WIDE_INTS}),
}
"""The healthy provider's ops."""


def registry(
    kernels: dict[str, Kernel], wrap: Callable[[str, Builder], Builder] | None = None
) -> KernelRegistry:
    """A registry of ``kernels``; ``wrap(op, builder)`` may replace each builder
    (a provider-wide mechanism, such as a kernel cache)."""
    reg = KernelRegistry()
    for op, k in kernels.items():
        build = wrap(op, k.build) if wrap is not None else k.build

        def builder(info: NodeInfo, build: Builder = build) -> Fn:
            compute = build(info)

            def run(*args: Any) -> tuple[Any, ...]:
                out = compute(*args)
                return out if isinstance(out, tuple) else (out,)

            return run

        reg.kernel(op, since=k.since, until=k.until, types=k.types)(builder)
    return reg


def tensors_only(node: ir.Node) -> bool:
    """Whether every value ``node`` reads and makes is a tensor (not a
    sequence or an optional, which these kernels do not take)."""
    values = (*node.inputs, *node.outputs)
    return all(v is None or v.type is None or isinstance(v.type, ir.TensorType) for v in values)


def supported(reg: KernelRegistry, node: ir.Node, opsets: Mapping[str, int]) -> bool:
    """Whether ``reg`` has a kernel for ``node`` and the node is of tensors only."""
    return tensors_only(node) and isinstance(reg.lookup_node(node, opsets), ep_sdk.KernelDef)
