"""Binary arithmetic with broadcasting: Add, Sub, Mul, Div, Pow, Mod, and the
variadic Sum, Mean, Max, Min.

Opsets below 7 broadcast only when ``broadcast=1``, aligning the second
input with the first at ``axis`` (:func:`legacy_broadcast`).

Float32 operands of one shape, a scalar or a per-channel vector take the
Cython path; everything else uses numpy ufuncs. Results keep the ONNX dtype
(the first input's), whatever numpy would have promoted to.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
from ep_sdk import Compute, NodeInfo

from .._ext import elementwise as ext
from ..threads import on_share_change
from ._common import DT, INTS, normalize_axis, thread_count, threads_for
from ._versions import by_schema
from .unary import computes_in_float32

# binary_f32 caps its threads at the run's share of the cores in C (ortcore_cpu.threads).
on_share_change(ext.set_thread_cap)

_Ufunc = Callable[..., np.ndarray]


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division truncating toward zero, as C and onnxruntime do."""
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.floor_divide(a, b)
        if a.dtype.kind == "u":
            return q
        r = np.remainder(a, b)
    fix = (r != 0) & ((a < 0) ^ (b < 0))
    q += fix.astype(q.dtype)
    return q


def _channel_operand(full: np.ndarray, small: np.ndarray) -> tuple[int, int] | None:
    """If ``small`` broadcasts against ``full`` as a scalar or a per-channel
    vector (the shape (C, 1, ..., 1) aligned at some axis), return
    ``(rows, row_len)`` of ``full`` viewed as (rows, row_len); else ``None``."""
    if small.size == 1:
        n = full.size
        chunk = 1 << 15
        if n % chunk == 0 and n > chunk:
            return n // chunk, chunk
        return 1, n
    shape = small.shape
    while shape and shape[0] == 1:
        shape = shape[1:]
    nz = [i for i, d in enumerate(shape) if d != 1]
    if len(nz) != 1 or nz[0] != 0 or len(shape) > full.ndim:
        return None
    axis = full.ndim - len(shape)
    if full.shape[axis] != shape[0]:
        return None
    inner = int(np.prod(full.shape[axis + 1 :], dtype=np.int64))
    return full.size // inner if inner else 0, inner


def _binary(
    op_code: int, ufunc: _Ufunc, threads: int, types: tuple[Any, ...] = (None, None)
) -> Compute:
    """Return a compute function for a broadcasting arithmetic op.

    The variant is chosen here, once, from the static input ``types``: float32
    operands go straight to the Cython kernel (which also covers scalars and
    empty tensors) with no dtype guards; other inputs keep numpy's upcasting
    guards, since their types may not be known until run time.
    """
    fast = ext.binary_f32

    if types[0] == DT.FLOAT and types[1] == DT.FLOAT:

        def broadcast(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
            return _broadcast_f32(op_code, ufunc, a, b, threads)

        return functools.partial(ext.binary_f32_kernel, op_code, threads, broadcast)

    def compute(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
        out = fast(op_code, a, b, threads)
        if out is not None:
            return (out,)
        if a.dtype == np.float32 and b.dtype == np.float32:
            return _broadcast_f32(op_code, ufunc, a, b, threads)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if computes_in_float32(a.dtype):
                out = ufunc(a.astype(np.float32), b.astype(np.float32))
            else:
                out = ufunc(a, b)
        if out.dtype != a.dtype:
            out = out.astype(a.dtype)
        return (out,)

    return compute


def _broadcast_f32(
    op_code: int, ufunc: _Ufunc, a: np.ndarray, b: np.ndarray, threads: int
) -> tuple[np.ndarray]:
    """Float32 operands that :func:`ext.binary_f32` declined: non-contiguous,
    per-channel or general broadcasting."""
    if a.size and b.size:
        fast = _fast_f32(op_code, a, b, threads)
        if fast is not None:
            return (fast,)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        out = np.asarray(ufunc(a, b))
    return (out if out.dtype == a.dtype else out.astype(a.dtype),)


def _fast_f32(op: int, a: np.ndarray, b: np.ndarray, threads: int) -> np.ndarray | None:
    """Cython float32 path; ``None`` when the shapes need general broadcasting."""
    if a.shape == b.shape:
        out = np.empty(a.shape, np.float32)
        ext.binary_same(
            op,
            np.ascontiguousarray(a).reshape(-1),
            np.ascontiguousarray(b).reshape(-1),
            out.reshape(-1),
            threads_for(a.size, threads),
        )
        return out
    for full, small, swap in ((a, b, False), (b, a, True)):
        if small.ndim > full.ndim or small.size > full.size:
            continue
        rows = _channel_operand(full, small)
        if rows is None:
            continue
        out = np.empty(full.shape, np.float32)
        ext.binary_rows(
            op,
            np.ascontiguousarray(full).reshape(rows),
            np.ascontiguousarray(small).reshape(-1),
            out.reshape(rows),
            swap,
            threads_for(full.size, threads),
        )
        return out
    return None


def legacy_broadcast(info: NodeInfo, compute: Compute) -> Compute:
    """Wrap a binary ``compute`` for opsets below 7: with ``broadcast=1`` and
    an ``axis``, B's dims align with A's from ``axis`` on (else from the end,
    as numpy does)."""
    axis = info.attrs.get("axis")
    if info.opset >= 7 or not info.attrs.get("broadcast", 0) or axis is None:
        return compute

    def aligned(a: np.ndarray, b: np.ndarray) -> Any:
        start = normalize_axis(int(axis), a.ndim)
        trailing = a.ndim - start - b.ndim
        return compute(a, b.reshape(b.shape + (1,) * trailing) if trailing > 0 else b)

    return aligned


_ARITH: dict[str, tuple[int, _Ufunc]] = {
    "Add": (ext.ADD, np.add),
    "Sub": (ext.SUB, np.subtract),
    "Mul": (ext.MUL, np.multiply),
    "Div": (ext.DIV, np.divide),
}


@by_schema("Add", "Sub", "Mul", "Div")
def arithmetic(info: NodeInfo) -> Compute:
    """Add/Sub/Mul/Div with multidirectional broadcasting (legacy rules
    below opset 7). Integer Div truncates toward zero; integer overflow wraps.
    """
    return legacy_broadcast(info, _arithmetic(info))


def _arithmetic(info: NodeInfo) -> Compute:
    op_code, ufunc = _ARITH[info.op_type]
    itype = info.input_types[0]
    if info.op_type == "Div" and itype is not None and itype in INTS:
        return _binary(op_code, _int_div, thread_count(info))
    if info.op_type == "Div" and itype is None:

        def div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            if a.dtype.kind in "iu":
                return _int_div(a, b)
            return np.divide(a, b)

        return _binary(op_code, div, thread_count(info), info.input_types)
    return _binary(op_code, ufunc, thread_count(info), info.input_types)


@by_schema("Pow", params=())
def pow_(info: NodeInfo) -> Compute:
    """Pow: the result has the base's type (opset 12+ allows another exponent type)."""

    def compute(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
        if computes_in_float32(a.dtype) or computes_in_float32(b.dtype):
            with np.errstate(all="ignore"):
                out = np.power(a.astype(np.float32), b.astype(np.float32))
            return (out.astype(a.dtype),)
        if a.dtype.kind in "iu" or b.dtype.kind in "iu":
            with np.errstate(all="ignore"):
                out = np.power(a.astype(np.float64), b.astype(np.float64))
            if a.dtype.kind in "iu":
                out = np.trunc(out)
            return (out.astype(a.dtype),)
        if a.dtype == np.float32 and b.size == 1 and float(b.reshape(-1)[0]) == 2.0:
            return (np.square(a),)
        with np.errstate(all="ignore"):
            if b.dtype != a.dtype and np.result_type(a, b) != a.dtype:
                # a wider exponent (float16 ** float32) is not rounded to the
                # base's type first: the result would lose digits
                return (np.power(a.astype(np.result_type(a, b)), b).astype(a.dtype),)
            out = np.power(a, b.astype(a.dtype, copy=False))
        return (out,)

    return legacy_broadcast(info, compute)


def _variadic(fold: Callable[[Any, Any], np.ndarray], mean: bool, threads: int) -> Compute:
    add = _binary(ext.ADD, np.add, threads)

    def compute(*xs: np.ndarray) -> tuple[np.ndarray]:
        dtype = xs[0].dtype
        if computes_in_float32(dtype):
            xs = tuple(x.astype(np.float32) for x in xs)
        if fold is np.add and len(xs) == 2:
            out = add(xs[0], xs[1])[0]
        else:
            out = np.asarray(xs[0])
            for x in xs[1:]:
                out = fold(out, x)
            out = np.array(np.broadcast_to(out, np.broadcast_shapes(*(x.shape for x in xs))))
        if mean:
            if out.dtype.kind in "iu":
                out = out // len(xs)
            else:
                out = out / np.asarray(len(xs), out.dtype)
        return (out.astype(dtype, copy=False),)

    return compute


@by_schema("Sum", "Mean")
def sum_mean(info: NodeInfo) -> Compute:
    """Sum and Mean of any number of inputs (opset 8+ broadcasts; earlier
    inputs must share a shape, a case broadcasting covers)."""
    return _variadic(np.add, info.op_type == "Mean", thread_count(info))


@by_schema("Max", "Min")
def max_min(info: NodeInfo) -> Compute:
    """Elementwise Max / Min of any number of inputs; NaN propagates."""
    fold = np.maximum if info.op_type == "Max" else np.minimum
    return _variadic(fold, False, thread_count(info))


def _mod(a: np.ndarray, b: np.ndarray, fmod: bool) -> np.ndarray:
    fn = np.fmod if fmod else np.mod
    if computes_in_float32(a.dtype):
        return fn(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)
    with np.errstate(divide="ignore", invalid="ignore"):
        return fn(a, b).astype(a.dtype, copy=False)


@by_schema("Mod")
def mod(info: NodeInfo) -> Compute:
    """Mod: remainder with the divisor's sign, or the dividend's (C fmod)
    when ``fmod=1``."""
    fmod = bool(info.attrs.get("fmod", 0))
    return lambda a, b: (_mod(a, b, fmod),)


__all__ = ["arithmetic", "legacy_broadcast", "max_min", "mod", "pow_", "sum_mean"]
