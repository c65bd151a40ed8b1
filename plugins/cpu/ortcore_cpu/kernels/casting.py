"""Type conversion: Cast, CastLike and BitCast.

Numeric conversions go through numpy's ``astype``, or :func:`._convert.convert`
where a type of ml_dtypes is involved (ml_dtypes 0.7's results under every
release: float64 and 64-bit integers rounded once, out-of-range floats to
integers 0, integers to the 4- and 2-bit types wrapped); float8 targets
saturate unless ``saturate=0``; float8e8m0 rounds its exponent as
``round_mode`` says; strings parse and print the way numpy does.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from ep_sdk import Compute, NodeInfo, from_numpy, to_numpy
from onnx_ir import DataType

from ._convert import convert
from ._versions import by_schema

_FLOAT8 = frozenset(
    {DataType.FLOAT8E4M3FN, DataType.FLOAT8E4M3FNUZ, DataType.FLOAT8E5M2, DataType.FLOAT8E5M2FNUZ}
)


def to_float8e8m0(x: np.ndarray, saturate: bool, round_mode: str) -> np.ndarray:
    """Round float32 values to float8e8m0 (a bare power-of-two exponent)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    exponent = ((bits >> 23) & 0xFF).astype(np.uint16)
    special = exponent == 0xFF
    if round_mode == "nearest":
        guard = (bits & 0x400000) > 0
        rest = (bits & 0x3FFFFF) > 0
        up = guard & (rest | (exponent > 0))
    elif round_mode == "up":
        up = (bits & 0x7FFFFF) > 0
    elif round_mode == "down":
        up = np.zeros(bits.shape, bool)
    else:
        raise ValueError(f"unsupported round_mode {round_mode!r}")
    up &= ~special
    if saturate:
        up &= exponent != 0xFE
    exponent = (exponent + up).astype(np.uint8)
    exponent[special] = 0xFF
    return exponent.view(ml_dtypes.float8_e8m0fnu)


def _to_strings(x: np.ndarray) -> np.ndarray:
    if x.dtype.kind not in "biuf" or (x.dtype.kind == "f" and x.dtype.itemsize < 2):
        x = x.astype(np.float32)
    return x.astype(np.str_).astype(object)


def _parse(x: np.ndarray, target: np.dtype) -> np.ndarray:
    """Parse a string tensor into numbers of ``target`` (a numpy-native dtype)."""
    text = np.asarray(x, dtype=np.str_)
    if target.kind in "iu":
        try:
            return text.astype(target)
        except ValueError:
            pass  # "100.5": parse as a float, then truncate
    return text.astype(np.float64)


def cast_array(
    x: np.ndarray, to: DataType, saturate: bool = True, round_mode: str = "up"
) -> np.ndarray:
    """Convert ``x`` to ONNX element type ``to`` following Cast's rules."""
    target = to_numpy(to)
    if x.dtype == target:
        return x
    if to == DataType.STRING:
        return _to_strings(x)
    if x.dtype == object:
        parsed = _parse(x, target)
        if target == np.bool_:
            return parsed != 0
        return cast_array(parsed, to, saturate, round_mode)
    if x.dtype == np.bool_:
        x = x.astype(np.float32)  # 1.0 and 0.0, exact in every target
    with np.errstate(invalid="ignore", over="ignore"):
        if to in _FLOAT8 and saturate:
            info = ml_dtypes.finfo(target)
            if x.dtype.kind == "V":  # ml_dtypes' types: clipped as float32 (exact)
                x = x.astype(np.float32)
            return convert(np.clip(x, float(info.min), float(info.max)), target)
        if to == DataType.FLOAT8E8M0:
            return to_float8e8m0(x, saturate, round_mode)
        return convert(x, target)


def _to_type(value: object) -> DataType:
    """The ``to`` attribute: an int, or a type name in Cast-1."""
    if isinstance(value, str):
        return DataType[value.upper()]
    return DataType(int(value))  # type: ignore[call-overload]


def _cast_options(info: NodeInfo) -> tuple[bool, str]:
    return bool(info.attrs.get("saturate", 1)), str(info.attrs.get("round_mode", "up"))


@by_schema("Cast", params=("T1", "T2"))
def cast(info: NodeInfo) -> Compute:
    """Cast to element type ``to`` (opsets 1-5 name it by string)."""
    to = _to_type(info.attrs["to"])
    saturate, round_mode = _cast_options(info)
    return lambda x: (cast_array(x, to, saturate, round_mode),)


@by_schema("CastLike", params=("T1", "T2"))
def cast_like(info: NodeInfo) -> Compute:
    """Cast the first input to the element type of the second."""
    saturate, round_mode = _cast_options(info)
    static = info.input_types[1] if len(info.input_types) > 1 else None

    def compute(x: np.ndarray, like: np.ndarray) -> tuple[np.ndarray]:
        to = static if static is not None else from_numpy(like.dtype)
        return (cast_array(x, to, saturate, round_mode),)

    return compute


@by_schema("BitCast", params=("T1", "T2"))
def bit_cast(info: NodeInfo) -> Compute:
    """Reinterpret the bits of each element as type ``to`` (same width)."""
    to = _to_type(info.attrs["to"])
    target = to_numpy(to)

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        if x.dtype.itemsize != target.itemsize:
            raise ValueError(
                f"{info.describe()}: BitCast from {x.dtype} to {target} changes the bit width"
            )
        return ((x if x.flags.c_contiguous else x.copy()).view(target),)

    return compute


__all__ = ["bit_cast", "cast", "cast_array", "cast_like", "to_float8e8m0"]
