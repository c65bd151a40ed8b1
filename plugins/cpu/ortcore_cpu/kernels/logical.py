"""Comparison and logic: Equal, Less, Greater, LessOrEqual, GreaterOrEqual,
And, Or, Xor, Not, Where. Outputs are bool, with numpy broadcasting."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from ep_sdk import Compute, NodeInfo

from . import registry
from ._common import ALL, ALL_STR, BOOL, FLOATS, INTS, NUMERIC

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


@registry.kernel("Equal", since=7, until=10, types={"T": INTS | BOOL})
@registry.kernel("Equal", since=11, until=12, types={"T": ALL})
@registry.kernel("Equal", since=13, until=18, types={"T": ALL})
@registry.kernel("Equal", since=19, types={"T": ALL_STR})
@registry.kernel("Less", since=7, until=8, types={"T": FLOATS})
@registry.kernel("Less", since=9, until=12, types={"T": NUMERIC})
@registry.kernel("Less", since=13, types={"T": NUMERIC})
@registry.kernel("Greater", since=7, until=8, types={"T": FLOATS})
@registry.kernel("Greater", since=9, until=12, types={"T": NUMERIC})
@registry.kernel("Greater", since=13, types={"T": NUMERIC})
@registry.kernel("LessOrEqual", since=12, until=15, types={"T": NUMERIC})
@registry.kernel("LessOrEqual", since=16, types={"T": NUMERIC})
@registry.kernel("GreaterOrEqual", since=12, until=15, types={"T": NUMERIC})
@registry.kernel("GreaterOrEqual", since=16, types={"T": NUMERIC})
@registry.kernel("And", since=7, types={"T": BOOL})
@registry.kernel("Or", since=7, types={"T": BOOL})
@registry.kernel("Xor", since=7, types={"T": BOOL})
def compare(info: NodeInfo) -> Compute:
    """Broadcasting comparison or logical op giving a bool tensor."""
    fn = _COMPARE[info.op_type]

    def compute(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
        return (np.asarray(fn(a, b), dtype=np.bool_),)

    return compute


@registry.kernel("Not", since=1, types={"T": BOOL})
def not_(info: NodeInfo) -> Compute:
    """Logical negation."""
    return lambda x: (np.logical_not(x),)


@registry.kernel("Where", since=9, until=15, types={"T": ALL_STR})
@registry.kernel("Where", since=16, types={"T": ALL_STR})
def where(info: NodeInfo) -> Compute:
    """Select from X where the condition holds, else from Y (broadcasting)."""

    def compute(cond: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray]:
        return (np.where(cond, x, y).astype(x.dtype, copy=False),)

    return compute
