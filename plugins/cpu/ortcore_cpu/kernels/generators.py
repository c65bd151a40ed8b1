"""Ops that make tensors from attributes or scalars: Constant,
ConstantOfShape, Range."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from ep_sdk import Compute, NodeInfo

from . import registry
from ._common import ALL, DT, FLOATS, INDEX, int_list, scalar

_CONSTANT_ATTRS: dict[str, Any] = {
    "value_float": np.float32,
    "value_floats": np.float32,
    "value_int": np.int64,
    "value_ints": np.int64,
    "value_string": object,
    "value_strings": object,
}


def _constant_value(info: NodeInfo) -> np.ndarray:
    for name, value in info.attrs.items():
        if value is None:
            continue
        if name == "value":
            return np.asarray(value)
        if name in _CONSTANT_ATTRS:
            return np.array(value, dtype=_CONSTANT_ATTRS[name])
        if name == "sparse_value":
            raise NotImplementedError(f"{info.describe()}: sparse_value is not supported")
    raise ValueError(f"{info.describe()}: Constant has no value attribute")


@registry.kernel("Constant", since=1, until=8)
@registry.kernel("Constant", since=9, until=10)
@registry.kernel("Constant", since=11, until=11)
@registry.kernel("Constant", since=12, until=12)
@registry.kernel("Constant", since=13, until=18)
@registry.kernel("Constant", since=19)
def constant(info: NodeInfo) -> Compute:
    """The tensor of the ``value`` attribute (or, from opset 12, of
    ``value_float(s)``, ``value_int(s)``, ``value_string(s)``)."""
    value = _constant_value(info)
    value.setflags(write=False)
    return lambda: (value,)


@registry.kernel("ConstantOfShape", since=9, until=19, types={"T2": ALL}, input_memory={0: "host"})
@registry.kernel("ConstantOfShape", since=20, types={"T2": ALL}, input_memory={0: "host"})
def constant_of_shape(info: NodeInfo) -> Compute:
    """A tensor of the shape input filled with ``value`` (default float32 0)."""
    value = info.attrs.get("value")
    fill = np.zeros((), np.float32) if value is None else np.asarray(value).reshape(-1)[0]

    def compute(shape: np.ndarray) -> tuple[np.ndarray]:
        return (np.full(int_list(shape), fill, dtype=fill.dtype),)

    return compute


_RANGE_TYPES = FLOATS - {DT.FLOAT16} | INDEX | {DT.INT16}


@registry.kernel(
    "Range", since=11, types={"T": _RANGE_TYPES}, input_memory={0: "host", 1: "host", 2: "host"}
)
def range_(info: NodeInfo) -> Compute:
    """start, start + delta, ... while below ``limit`` (above, for negative delta)."""

    def compute(start: np.ndarray, limit: np.ndarray, delta: np.ndarray) -> tuple[np.ndarray]:
        s, lim, d = scalar(start), scalar(limit), scalar(delta)
        n = max(math.ceil((lim - s) / d), 0)
        dtype = np.asarray(start).dtype
        return (
            (s + np.arange(n, dtype=np.float64 if dtype.kind == "f" else np.int64) * d).astype(
                dtype
            ),
        )

    return compute
