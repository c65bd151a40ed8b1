"""Scales, zero points and 8-bit rounding shared by the quantized contrib ops.

onnxruntime's contrib schemas say which parameters are per tensor (one
element) and which may be per column; each kernel checks its parameters here
so that a wrong shape fails naming the node, the input and the shape it has.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from ep_sdk import NodeInfo

from .._common import DT

EIGHT_BIT = frozenset({DT.UINT8, DT.INT8})
"""The 8-bit integer types every quantized contrib op takes."""

RANGES: dict[np.dtype, tuple[int, int]] = {
    np.dtype(np.uint8): (0, 255),
    np.dtype(np.int8): (-128, 127),
}


def check_8bit(info: NodeInfo, x: np.ndarray, what: str) -> None:
    """Raise unless ``x`` is uint8 or int8."""
    if x.dtype not in RANGES:
        raise TypeError(f"{info.describe()}: {what} must be uint8 or int8, got {x.dtype}")


def scalar_scale(info: NodeInfo, value: np.ndarray | None, what: str) -> np.float32:
    """A per-tensor scale (one element) as float32."""
    if value is None:
        raise ValueError(f"{info.describe()}: the scale {what} is required")
    v = np.asarray(value)
    if v.size != 1:
        raise ValueError(
            f"{info.describe()}: {what} must be a scalar (per tensor), got shape {v.shape}"
        )
    return np.float32(v.reshape(()))


def scalar_zero(
    info: NodeInfo, value: np.ndarray | None, what: str, dtype: np.dtype | None = None
) -> int:
    """A per-tensor zero point (one element; 0 when omitted) as an int; with
    ``dtype``, the zero point must be of that type (the quantized tensor's)."""
    if value is None:
        return 0
    v = np.asarray(value)
    if v.size != 1:
        raise ValueError(
            f"{info.describe()}: {what} must be a scalar (per tensor), got shape {v.shape}"
        )
    if dtype is not None and v.dtype != dtype:
        raise TypeError(f"{info.describe()}: {what} is {v.dtype} but the data is {dtype}")
    return int(v.reshape(()))


def unary_params(
    info: NodeInfo,
    x: np.ndarray,
    params: tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray | None],
    names: tuple[str, str, str, str] = ("x_scale", "x_zero_point", "y_scale", "y_zero_point"),
) -> tuple[np.float32, int, np.float32, int]:
    """An op of one 8-bit input X and one output: X checked, and its per-tensor
    scale and zero point and the output's, ``params`` and ``names`` in that
    order (the names the op's schema gives, for the errors)."""
    check_8bit(info, x, "X")
    x_scale, x_zero, y_scale, y_zero = params
    return (
        scalar_scale(info, x_scale, names[0]),
        scalar_zero(info, x_zero, names[1], x.dtype),
        scalar_scale(info, y_scale, names[2]),
        scalar_zero(info, y_zero, names[3], x.dtype),
    )


def per_column(
    info: NodeInfo, value: np.ndarray | None, columns: int, what: str
) -> np.ndarray | None:
    """A scale or zero point that is per tensor (one element, returned 0-D) or
    per column (1-D of ``columns`` elements)."""
    if value is None:
        return None
    v = np.asarray(value)
    if v.size == 1:
        return v.reshape(())
    if v.ndim != 1 or v.shape[0] != columns:
        raise ValueError(
            f"{info.describe()}: {what} must be a scalar or 1-D of {columns} elements "
            f"(one per column), got shape {v.shape}"
        )
    return v


def saturate(y: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Round half to even and saturate float values into ``dtype``."""
    lo, hi = RANGES[np.dtype(dtype)]
    return np.clip(np.rint(y), lo, hi).astype(dtype)


def lookup_table(
    dtype: np.dtype,
    x_scale: np.float32,
    x_zero: int,
    y_scale: np.float32,
    y_zero: int,
    fn: Callable[[np.ndarray], np.ndarray] | None = None,
) -> np.ndarray:
    """The 256-entry table ``quantize(fn(dequantize(v)))`` over every value
    ``v`` of ``dtype``, in float32 as onnxruntime builds its lookup tables;
    index it with ``x.view(np.uint8)``."""
    values = np.arange(256, dtype=np.uint8).view(dtype)
    real = (values.astype(np.float32) - np.float32(x_zero)) * np.float32(x_scale)
    if fn is not None:
        real = fn(real).astype(np.float32)
    q = np.rint(real / np.float32(y_scale)) + np.float32(y_zero)
    lo, hi = RANGES[np.dtype(dtype)]
    return np.clip(q, lo, hi).astype(dtype)


def apply_table(x: np.ndarray, table: np.ndarray) -> np.ndarray:
    """``table[x]`` for 8-bit ``x`` (viewed as unsigned indices)."""
    return table[np.ascontiguousarray(x).view(np.uint8)]
