"""Ops that make tensors from attributes or scalars: Constant,
ConstantOfShape, Range."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from ep_sdk import Compute, NodeInfo, check_tensor_size

from ._common import DT, FLOATS, INDEX, int_list
from ._versions import per_schema_version

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


@per_schema_version("Constant")
def constant(info: NodeInfo) -> Compute:
    """The tensor of the ``value`` attribute (or, from opset 12, of
    ``value_float(s)``, ``value_int(s)``, ``value_string(s)``)."""
    value = _constant_value(info)
    value.setflags(write=False)
    return lambda: (value,)


@per_schema_version("ConstantOfShape", input_memory={0: "host"})
def constant_of_shape(info: NodeInfo) -> Compute:
    """A tensor of the shape input filled with ``value`` (default float32 0)."""
    value = info.attrs.get("value")
    fill = np.zeros((), np.float32) if value is None else np.asarray(value).reshape(-1)[0]

    def compute(shape: np.ndarray) -> tuple[np.ndarray]:
        dims = int_list(shape)
        check_tensor_size(dims, fill.dtype, info.describe())
        return (np.full(dims, fill, dtype=fill.dtype),)

    return compute


_RANGE_TYPES = FLOATS - {DT.FLOAT16} | INDEX | {DT.INT16}
_HOST3 = {0: "host", 1: "host", 2: "host"}


@per_schema_version("Range", until=26, types={"T": _RANGE_TYPES}, input_memory=_HOST3)
@per_schema_version(
    "Range", since=27, types={"T": _RANGE_TYPES | {DT.FLOAT16, DT.BFLOAT16}}, input_memory=_HOST3
)
def range_(info: NodeInfo) -> Compute:
    """start, start + delta, ... while below ``limit`` (above, for negative
    delta). Floats are computed in float64, float16 and bfloat16 (27+) in
    ``stash_type`` (float32 by default), integers in int64."""
    stash = int(info.attrs.get("stash_type", DT.FLOAT)) if info.opset >= 27 else DT.DOUBLE
    low_dtype = np.float64 if stash == DT.DOUBLE else np.float32

    def compute(start: np.ndarray, limit: np.ndarray, delta: np.ndarray) -> tuple[np.ndarray]:
        dtype = np.asarray(start).dtype
        if dtype.kind in "iu":
            work: type = np.int64
        elif dtype in (np.float32, np.float64):
            work = np.float64
        else:
            work = low_dtype
        s, lim, d = (np.asarray(v).astype(work).reshape(-1)[0] for v in (start, limit, delta))
        if d == 0:
            raise ValueError(f"{info.describe()}: delta must not be 0")
        if work is np.int64:
            n = max(-((int(s) - int(lim)) // int(d)), 0)  # exact integer ceil
        else:
            span = (float(lim) - float(s)) / float(d)
            if not math.isfinite(span):
                raise ValueError(f"{info.describe()}: start, limit and delta must be finite")
            n = max(math.ceil(span), 0)
        check_tensor_size((n,), dtype, info.describe())
        return ((s + np.arange(n, dtype=work) * d).astype(dtype),)

    return compute
