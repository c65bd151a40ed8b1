"""Bit operations on integers: BitShift, BitwiseAnd, BitwiseOr, BitwiseXor,
BitwiseNot (broadcasting; the result has the first input's dtype)."""

from __future__ import annotations

import numpy as np
from ep_sdk import Compute, NodeInfo

from ._versions import by_schema

_BINARY = {
    "BitwiseAnd": np.bitwise_and,
    "BitwiseOr": np.bitwise_or,
    "BitwiseXor": np.bitwise_xor,
}


@by_schema(*_BINARY)
def bitwise(info: NodeInfo) -> Compute:
    """Elementwise bitwise and / or / xor."""
    fn = _BINARY[info.op_type]
    return lambda a, b: (fn(a, b).astype(a.dtype, copy=False),)


@by_schema("BitwiseNot")
def bitwise_not(info: NodeInfo) -> Compute:
    """Elementwise bitwise complement (``not`` for bool)."""
    return lambda x: (np.invert(x),)


def _shift(a: np.ndarray, b: np.ndarray, left: bool) -> np.ndarray:
    """Shift ``a`` by ``b`` bits; shifts of the bit width or more (or negative
    ones) give 0, or -1 for a right shift of a negative signed value."""
    bits = a.dtype.itemsize * 8
    b = b.astype(np.int64)
    valid = (b >= 0) & (b < bits)
    count = np.where(valid, b, 0).astype(a.dtype.str.replace("i", "u"))
    if left:
        unsigned = a.view(count.dtype) if a.dtype.kind == "i" else a
        out = np.left_shift(unsigned, count).view(a.dtype)
        return np.where(valid, out, np.zeros((), a.dtype))
    out = np.right_shift(a, count.astype(a.dtype))
    fill = np.where(a < 0, -1, 0).astype(a.dtype) if a.dtype.kind == "i" else np.zeros((), a.dtype)
    return np.where(valid, out, fill)


@by_schema("BitShift")
def bit_shift(info: NodeInfo) -> Compute:
    """Shift each element of X left or right by the bits in Y (``direction``)."""
    direction = str(info.attrs.get("direction", ""))
    if direction not in ("LEFT", "RIGHT"):
        raise ValueError(f"{info.describe()}: direction must be LEFT or RIGHT, not {direction!r}")
    left = direction == "LEFT"
    return lambda a, b: (_shift(a, b, left).astype(a.dtype, copy=False),)


__all__ = ["bit_shift", "bitwise", "bitwise_not"]
