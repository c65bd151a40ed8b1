"""Comparison and logic: Equal, Less, Greater, LessOrEqual, GreaterOrEqual,
And, Or, Xor, Not, Where. Outputs are bool, with numpy broadcasting."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from ep_sdk import Compute, NodeInfo

from ._versions import by_schema
from .elementwise import legacy_broadcast
from .unary import computes_in_float32

_COMPARE: dict[str, Callable[..., np.ndarray]] = {
    "Equal": np.equal,
    "Less": np.less,
    "Greater": np.greater,
    "LessOrEqual": np.less_equal,
    "GreaterOrEqual": np.greater_equal,
    "And": np.logical_and,
    "Or": np.logical_or,
    "Xor": np.logical_xor,
}


@by_schema("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor")
def compare(info: NodeInfo) -> Compute:
    """Broadcasting comparison or logical op giving a bool tensor (legacy
    ``broadcast``/``axis`` rules below opset 7)."""
    fn = _COMPARE[info.op_type]

    def compute(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
        if computes_in_float32(a.dtype) or computes_in_float32(b.dtype):
            a, b = a.astype(np.float32), b.astype(np.float32)
        return (np.asarray(fn(a, b), dtype=np.bool_),)

    return legacy_broadcast(info, compute)


@by_schema("Not")
def not_(info: NodeInfo) -> Compute:
    """Logical negation."""
    return lambda x: (np.logical_not(x),)


@by_schema("Where")
def where(info: NodeInfo) -> Compute:
    """Select from X where the condition holds, else from Y (broadcasting)."""

    def compute(cond: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray]:
        return (np.where(cond, x, y).astype(x.dtype, copy=False),)

    return compute
