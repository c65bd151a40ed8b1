"""Reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd,
ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp, ArgMax,
ArgMin.

``axes`` is an attribute until ReduceSum opset 13 / the others opset 18 and
an optional input after; no axes reduces everything unless
``noop_with_empty_axes=1``. Empty reductions give the identity (0, 1, -inf,
+inf; NaN for the mean).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
from ep_sdk import Compute, NodeInfo

from .._ext import rowwise
from ._common import (
    DT,
    FLOATS,
    NUMERIC,
    int_list,
    normalize_axes,
    normalize_axis,
    thread_count,
    threads_for,
)
from ._versions import per_schema_version

_BF16_NP = np.dtype(ml_dtypes.bfloat16)

_ReduceFn = Callable[[np.ndarray, tuple[int, ...], bool], np.ndarray]


def _extreme(x: np.ndarray, largest: bool) -> Any:
    if x.dtype.kind == "f":
        return -np.inf if largest else np.inf
    if x.dtype.kind == "b":
        return not largest
    info = np.iinfo(x.dtype)
    return info.min if largest else info.max


def _work_dtype(x: np.ndarray) -> Any:
    return np.float32 if x.dtype == np.float16 else x.dtype


def _sum(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    return np.sum(x, axis=axes, keepdims=keep, dtype=_work_dtype(x))


def _mean(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        if x.dtype.kind in "iu":
            n = max(int(np.prod([x.shape[a] for a in axes])), 1)
            total = np.asarray(np.sum(x, axis=axes, keepdims=keep, dtype=x.dtype))
            q = total // n  # floors; onnxruntime's integer division truncates toward zero
            return np.where((total < 0) & (q * n != total), q + 1, q).astype(x.dtype)
        return np.mean(x, axis=axes, keepdims=keep, dtype=_work_dtype(x))


def _max(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    return np.max(x, axis=axes, keepdims=keep, initial=_extreme(x, True))


def _min(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    return np.min(x, axis=axes, keepdims=keep, initial=_extreme(x, False))


def _prod(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    return np.prod(x, axis=axes, keepdims=keep, dtype=_work_dtype(x))


def _float_work(x: np.ndarray) -> np.ndarray:
    """``x`` in a float type to compute logs and roots in (ints go to float64)."""
    if x.dtype.kind == "f" and x.dtype.itemsize >= 4:
        return x
    return x.astype(np.float32 if x.dtype.kind == "f" else np.float64)


def _l1(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    return np.sum(np.abs(x), axis=axes, keepdims=keep, dtype=_work_dtype(x))


def _sum_square(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    w = x.astype(_work_dtype(x), copy=False)
    return np.sum(w * w, axis=axes, keepdims=keep)


def _l2(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    w = _float_work(x)
    out = np.sqrt(np.sum(w * w, axis=axes, keepdims=keep))
    return np.round(out) if x.dtype.kind in "iu" else out


def _log_sum(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(np.sum(_float_work(x), axis=axes, keepdims=keep))


def _log_sum_exp(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    w = _float_work(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        m = np.max(w, axis=axes, keepdims=True, initial=-np.inf)
        m = np.where(np.isfinite(m), m, 0).astype(w.dtype)
        s = np.sum(np.exp(w - m), axis=axes, keepdims=True)
        out = np.log(s) + m
    return out if keep else out.reshape([d for i, d in enumerate(out.shape) if i not in axes])


_REDUCE: dict[str, _ReduceFn] = {
    "ReduceL1": _l1,
    "ReduceL2": _l2,
    "ReduceSumSquare": _sum_square,
    "ReduceLogSum": _log_sum,
    "ReduceLogSumExp": _log_sum_exp,
    "ReduceSum": _sum,
    "ReduceMean": _mean,
    "ReduceMax": _max,
    "ReduceMin": _min,
    "ReduceProd": _prod,
}

_FAST_OPS = {
    "ReduceSum": rowwise.SUM,
    "ReduceMean": rowwise.MEAN,
    "ReduceMax": rowwise.MAX,
    "ReduceMin": rowwise.MIN,
}
_FAST_TYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _reduce_fast(
    x: np.ndarray, axes: tuple[int, ...], keep: bool, op: int, threads: int
) -> np.ndarray | None:
    """Float32/float64 reduction over the last axis or over all axes, in
    Cython; None for other cases (other axes, dtypes, empty reductions)."""
    if x.dtype not in _FAST_TYPES or x.size == 0 or not axes:
        return None
    nthreads = threads_for(x.size // 8, threads)  # cheap per element: 8x the grain
    if len(axes) == x.ndim:
        value = rowwise.reduce_all(np.ascontiguousarray(x).reshape(-1), op, nthreads)
        return np.full((1,) * x.ndim if keep else (), value, x.dtype)
    if axes != (x.ndim - 1,):
        return None
    out = np.empty(x.shape[:-1], x.dtype)
    flat = np.ascontiguousarray(x).reshape(-1, x.shape[-1])
    rowwise.reduce_rows(flat, out.reshape(-1), op, nthreads)
    return out[..., None] if keep else out


_BF16 = frozenset({DT.BFLOAT16})
_MAXMIN_12 = NUMERIC  # 8-bit integers join at opset 12
_MAXMIN_20 = NUMERIC | {DT.BOOL} | _BF16
_AXES_ATTR_TO_17 = ("ReduceMean", "ReduceProd", "ReduceMax", "ReduceMin")
"""Reductions whose ``axes`` is an attribute until opset 17 (ReduceSum: 12)."""
_NORMS_ATTR = ("ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp")
"""Norm-like reductions whose ``axes`` is an attribute until opset 17."""


def _reduce_builder(info: NodeInfo, axes_from_input: bool) -> Compute:
    fn = _REDUCE[info.op_type]
    keep = bool(info.attrs.get("keepdims", 1))
    noop = bool(info.attrs.get("noop_with_empty_axes", 0)) if axes_from_input else False
    axes_attr = info.attrs.get("axes")
    fast_op = _FAST_OPS.get(info.op_type)
    threads = thread_count(info)

    def compute(x: np.ndarray, axes_in: np.ndarray | None = None) -> tuple[np.ndarray]:
        axes_list = int_list(axes_in) if axes_from_input else int_list(axes_attr)
        if not axes_list:
            # noop: nothing is reduced, yet the element-wise part still applies
            # (ReduceSumSquare squares, ReduceLogSum takes the log), as in
            # onnxruntime and onnx.reference
            axes = () if noop else tuple(range(x.ndim))
        else:
            axes = normalize_axes(axes_list, x.ndim)
        if fast_op is not None and axes:
            fast = _reduce_fast(x, tuple(sorted(axes)), keep, fast_op, threads)
            if fast is not None:
                return (fast,)
        # bfloat16 is reduced in float32.
        work = x.astype(np.float32) if x.dtype == _BF16_NP else x
        out = fn(work, axes, keep)
        return (np.asarray(out).astype(x.dtype, copy=False),)

    return compute


@per_schema_version("ReduceSum", *_AXES_ATTR_TO_17, until=12, types={"T": NUMERIC})
@per_schema_version(*_AXES_ATTR_TO_17, since=13, until=17, types={"T": NUMERIC | _BF16})
def reduce_axes_attr(info: NodeInfo) -> Compute:
    """Reduction whose ``axes`` is an attribute (negative allowed from 11)."""
    return _reduce_builder(info, axes_from_input=False)


@per_schema_version(*_NORMS_ATTR, until=12, types={"T": NUMERIC})
@per_schema_version(*_NORMS_ATTR, since=13, until=17, types={"T": NUMERIC | _BF16})
def reduce_norm_axes_attr(info: NodeInfo) -> Compute:
    """Norm-style reduction whose ``axes`` is an attribute."""
    return _reduce_builder(info, axes_from_input=False)


_H = {1: "host"}


@per_schema_version(
    "ReduceL1",
    "ReduceL2",
    "ReduceSumSquare",
    since=18,
    types={"T": NUMERIC | _BF16},
    input_memory=_H,
)
@per_schema_version(
    "ReduceLogSum",
    "ReduceLogSumExp",
    since=18,
    until=27,
    types={"T": NUMERIC | _BF16},
    input_memory=_H,
)
@per_schema_version(
    "ReduceLogSum", "ReduceLogSumExp", since=28, types={"T": FLOATS | _BF16}, input_memory=_H
)
def reduce_norm_axes_input(info: NodeInfo) -> Compute:
    """Norm-style reduction whose ``axes`` is an optional input."""
    return _reduce_builder(info, axes_from_input=True)


@per_schema_version("ReduceSum", since=13, types={"T": NUMERIC | _BF16}, input_memory=_H)
@per_schema_version(
    "ReduceMean", "ReduceProd", since=18, types={"T": NUMERIC | _BF16}, input_memory=_H
)
@per_schema_version(
    "ReduceMax", "ReduceMin", since=18, until=19, types={"T": _MAXMIN_12 | _BF16}, input_memory=_H
)
@per_schema_version("ReduceMax", "ReduceMin", since=20, types={"T": _MAXMIN_20}, input_memory=_H)
def reduce_axes_input(info: NodeInfo) -> Compute:
    """Reduction whose ``axes`` is an optional input, with ``noop_with_empty_axes``."""
    return _reduce_builder(info, axes_from_input=True)


@per_schema_version("ArgMax", "ArgMin", types={"T": NUMERIC})
def arg_max_min(info: NodeInfo) -> Compute:
    """int64 index of the first (or with ``select_last_index``, 12+, the last)
    max/min along ``axis`` (negative from 11)."""
    fn = np.argmax if info.op_type == "ArgMax" else np.argmin
    axis_attr = int(info.attrs.get("axis", 0))
    keep = bool(info.attrs.get("keepdims", 1))
    last = info.opset >= 12 and bool(info.attrs.get("select_last_index", 0))

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        axis = normalize_axis(axis_attr, x.ndim)
        if last:
            flipped = np.flip(x, axis=axis)
            idx = x.shape[axis] - 1 - fn(flipped, axis=axis, keepdims=keep)
        else:
            idx = fn(x, axis=axis, keepdims=keep)
        return (np.asarray(idx, dtype=np.int64),)

    return compute


__all__ = [
    "arg_max_min",
    "reduce_axes_attr",
    "reduce_axes_input",
    "reduce_norm_axes_attr",
    "reduce_norm_axes_input",
]
