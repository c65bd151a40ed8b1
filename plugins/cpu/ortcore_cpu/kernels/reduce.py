"""Reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd,
ArgMax, ArgMin.

``axes`` is an attribute until ReduceSum opset 13 / the others opset 18 and
an optional input after; no axes reduces everything unless
``noop_with_empty_axes=1``. Empty reductions give the identity (0, 1, -inf,
+inf; NaN for the mean).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from ep_sdk import Compute, NodeInfo

from . import registry
from ._common import DT, NUMERIC, int_list, normalize_axes, normalize_axis

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
            n = int(np.prod([x.shape[a] for a in axes]))
            return np.sum(x, axis=axes, keepdims=keep, dtype=x.dtype) // max(n, 1)
        return np.mean(x, axis=axes, keepdims=keep, dtype=_work_dtype(x))


def _max(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    return np.max(x, axis=axes, keepdims=keep, initial=_extreme(x, True))


def _min(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    return np.min(x, axis=axes, keepdims=keep, initial=_extreme(x, False))


def _prod(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    return np.prod(x, axis=axes, keepdims=keep, dtype=_work_dtype(x))


_REDUCE: dict[str, _ReduceFn] = {
    "ReduceSum": _sum,
    "ReduceMean": _mean,
    "ReduceMax": _max,
    "ReduceMin": _min,
    "ReduceProd": _prod,
}

_MAXMIN_12 = NUMERIC  # 8-bit integers join at opset 12
_MAXMIN_20 = NUMERIC | {DT.BOOL}


def _reduce_builder(info: NodeInfo, axes_from_input: bool) -> Compute:
    fn = _REDUCE[info.op_type]
    keep = bool(info.attrs.get("keepdims", 1))
    noop = bool(info.attrs.get("noop_with_empty_axes", 0)) if axes_from_input else False
    axes_attr = info.attrs.get("axes")

    def compute(x: np.ndarray, axes_in: np.ndarray | None = None) -> tuple[np.ndarray]:
        axes_list = int_list(axes_in) if axes_from_input else int_list(axes_attr)
        if not axes_list:
            if noop:
                return (x,)
            axes = tuple(range(x.ndim))
        else:
            axes = normalize_axes(axes_list, x.ndim)
        out = fn(x, axes, keep)
        return (np.asarray(out).astype(x.dtype, copy=False),)

    return compute


@registry.kernel("ReduceSum", since=1, until=10, types={"T": NUMERIC})
@registry.kernel("ReduceSum", since=11, until=12, types={"T": NUMERIC})
@registry.kernel("ReduceMean", since=1, until=10, types={"T": NUMERIC})
@registry.kernel("ReduceMean", since=11, until=12, types={"T": NUMERIC})
@registry.kernel("ReduceMean", since=13, until=17, types={"T": NUMERIC})
@registry.kernel("ReduceProd", since=1, until=10, types={"T": NUMERIC})
@registry.kernel("ReduceProd", since=11, until=12, types={"T": NUMERIC})
@registry.kernel("ReduceProd", since=13, until=17, types={"T": NUMERIC})
@registry.kernel("ReduceMax", since=1, until=10, types={"T": NUMERIC})
@registry.kernel("ReduceMax", since=11, until=11, types={"T": NUMERIC})
@registry.kernel("ReduceMax", since=12, until=12, types={"T": _MAXMIN_12})
@registry.kernel("ReduceMax", since=13, until=17, types={"T": _MAXMIN_12})
@registry.kernel("ReduceMin", since=1, until=10, types={"T": NUMERIC})
@registry.kernel("ReduceMin", since=11, until=11, types={"T": NUMERIC})
@registry.kernel("ReduceMin", since=12, until=12, types={"T": _MAXMIN_12})
@registry.kernel("ReduceMin", since=13, until=17, types={"T": _MAXMIN_12})
def reduce_axes_attr(info: NodeInfo) -> Compute:
    """Reduction whose ``axes`` is an attribute (negative allowed from 11)."""
    return _reduce_builder(info, axes_from_input=False)


@registry.kernel("ReduceSum", since=13, types={"T": NUMERIC}, input_memory={1: "host"})
@registry.kernel("ReduceMean", since=18, types={"T": NUMERIC}, input_memory={1: "host"})
@registry.kernel("ReduceProd", since=18, types={"T": NUMERIC}, input_memory={1: "host"})
@registry.kernel("ReduceMax", since=18, until=19, types={"T": _MAXMIN_12}, input_memory={1: "host"})
@registry.kernel("ReduceMax", since=20, types={"T": _MAXMIN_20}, input_memory={1: "host"})
@registry.kernel("ReduceMin", since=18, until=19, types={"T": _MAXMIN_12}, input_memory={1: "host"})
@registry.kernel("ReduceMin", since=20, types={"T": _MAXMIN_20}, input_memory={1: "host"})
def reduce_axes_input(info: NodeInfo) -> Compute:
    """Reduction whose ``axes`` is an optional input, with ``noop_with_empty_axes``."""
    return _reduce_builder(info, axes_from_input=True)


@registry.kernel("ArgMax", since=1, until=10, types={"T": NUMERIC})
@registry.kernel("ArgMax", since=11, until=11, types={"T": NUMERIC})
@registry.kernel("ArgMax", since=12, until=12, types={"T": NUMERIC})
@registry.kernel("ArgMax", since=13, types={"T": NUMERIC})
@registry.kernel("ArgMin", since=1, until=10, types={"T": NUMERIC})
@registry.kernel("ArgMin", since=11, until=11, types={"T": NUMERIC})
@registry.kernel("ArgMin", since=12, until=12, types={"T": NUMERIC})
@registry.kernel("ArgMin", since=13, types={"T": NUMERIC})
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


__all__ = ["arg_max_min", "reduce_axes_attr", "reduce_axes_input"]
