"""Quantization types and the arithmetic of scales and zero points.

The formulas follow onnxruntime.quantization so that a model quantized here
gets the same scales, zero points and integer weights as one quantized there:
``r = s * (q - z)``, ``[rmin, rmax]`` widened to include 0, symmetric ranges
centred on 0, ``q = clip(round_half_even(r / s) + z)``.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, TypeVar

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto

__all__ = [
    "QuantFormat",
    "QuantType",
    "QuantizationMode",
    "compute_data_quant_params",
    "compute_scale_zp",
    "get_qmin_qmax_for_qType",
    "ms_domain",
    "quantize_array",
    "quantize_data",
    "write_calibration_table",
]

ms_domain = "com.microsoft"
__producer__ = "onnx.quantize"
__version__ = "0.1.0"


_E = TypeVar("_E", bound=Enum)


def _from_name(enum_cls: type[_E], name: object) -> _E:
    """``enum_cls[name]`` with an error that names the type and the choices."""
    if isinstance(name, enum_cls):
        return name
    try:
        return enum_cls[str(name)]
    except KeyError:
        choices = ", ".join(m.name for m in enum_cls)
        raise ValueError(
            f"unknown {enum_cls.__name__} {name!r}; expected one of: {choices}"
        ) from None


class QuantizationMode(Enum):
    """IntegerOps (dynamic: MatMulInteger, ConvInteger) or QLinearOps (static QOperator)."""

    IntegerOps = 0
    QLinearOps = 1

    def __str__(self) -> str:
        return self.name

    @staticmethod
    def from_string(mode: str) -> QuantizationMode:
        """The member named ``mode``; ValueError naming it otherwise."""
        return _from_name(QuantizationMode, mode)


class QuantType(Enum):
    """The integer (or float 8) type a tensor is quantized to."""

    QInt8 = 0
    QUInt8 = 1
    QFLOAT8E4M3FN = 2
    QInt16 = 3
    QUInt16 = 4
    QInt4 = 5
    QUInt4 = 6

    def __str__(self) -> str:
        return self.name

    @staticmethod
    def from_string(t: str) -> QuantType:
        """The member named ``t``; ValueError naming it otherwise."""
        return _from_name(QuantType, t)

    @property
    def tensor_type(self) -> int:
        """The ONNX ``TensorProto`` element type."""
        return _TENSOR_TYPES[self]


_TENSOR_TYPES = {
    QuantType.QInt8: TensorProto.INT8,
    QuantType.QUInt8: TensorProto.UINT8,
    QuantType.QInt16: TensorProto.INT16,
    QuantType.QUInt16: TensorProto.UINT16,
    QuantType.QInt4: TensorProto.INT4,
    QuantType.QUInt4: TensorProto.UINT4,
    QuantType.QFLOAT8E4M3FN: TensorProto.FLOAT8E4M3FN,
}


class QuantFormat(Enum):
    """QOperator (quantized operators) or QDQ (QuantizeLinear/DequantizeLinear around float ops)."""

    QOperator = 0
    QDQ = 1

    def __str__(self) -> str:
        return self.name

    @staticmethod
    def from_string(format: str) -> QuantFormat:
        """The member named ``format``; ValueError naming it otherwise."""
        return _from_name(QuantFormat, format)


def as_quant_type(value: object, what: str) -> QuantType:
    """A QuantType from a member, its name, or its ONNX element type; errors name ``what``."""
    if isinstance(value, QuantType):
        return value
    if isinstance(value, str):
        try:
            return QuantType.from_string(value)
        except ValueError as e:
            raise ValueError(f"{what}: {e}") from None
    for member, tt in _TENSOR_TYPES.items():
        if isinstance(value, int) and value == tt:
            return member
    raise ValueError(
        f"{what}: unknown QuantType {value!r}; expected a QuantType member or its name"
    )


NP_TYPES: dict[int, np.dtype] = {
    TensorProto.INT8: np.dtype(np.int8),
    TensorProto.UINT8: np.dtype(np.uint8),
    TensorProto.INT16: np.dtype(np.int16),
    TensorProto.UINT16: np.dtype(np.uint16),
    TensorProto.INT4: np.dtype(ml_dtypes.int4),
    TensorProto.UINT4: np.dtype(ml_dtypes.uint4),
    TensorProto.FLOAT8E4M3FN: np.dtype(ml_dtypes.float8_e4m3fn),
}

# Keyed by int: the qType arguments are TensorProto element types as plain ints.
_RANGE: dict[int, tuple[int, int]] = {
    TensorProto.UINT8: (0, 255),
    TensorProto.INT8: (-128, 127),
    TensorProto.UINT16: (0, 65535),
    TensorProto.INT16: (-32768, 32767),
    TensorProto.UINT4: (0, 15),
    TensorProto.INT4: (-8, 7),
}
_SYMMETRIC_RANGE: dict[int, tuple[int, int]] = {
    TensorProto.INT8: (-127, 127),
    TensorProto.INT16: (-32767, 32767),
}
_REDUCED_RANGE: dict[int, tuple[int, int]] = {
    TensorProto.UINT8: (0, 127),
    TensorProto.INT8: (-64, 64),
    TensorProto.UINT16: (0, 32767),
    TensorProto.INT16: (-16384, 16384),
    TensorProto.UINT4: (0, 7),
    TensorProto.INT4: (-4, 3),
}


def get_qmin_qmax_for_qType(
    qType: int,
    reduce_range: bool = False,
    symmetric: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """The representable ``(qmin, qmax)`` of an integer type, as 0-d arrays of that type."""
    if reduce_range:
        pair = _REDUCED_RANGE.get(qType)
    elif symmetric and qType in _SYMMETRIC_RANGE:
        pair = _SYMMETRIC_RANGE[qType]
    else:
        pair = _RANGE.get(qType)
    if pair is None:
        raise ValueError(
            f"cannot quantize to element type {onnx.helper.tensor_dtype_to_string(qType)}"
        )
    dtype = NP_TYPES[qType]
    return np.array(pair[0], dtype=dtype), np.array(pair[1], dtype=dtype)


def compute_scale_zp(
    rmin: np.ndarray,
    rmax: np.ndarray,
    qmin: np.ndarray,
    qmax: np.ndarray,
    symmetric: bool = False,
    min_real_range: float | None = None,
) -> list[np.ndarray]:
    """``[zero_point, scale]`` mapping ``[rmin, rmax]`` (with 0 added) onto ``[qmin, qmax]``."""
    rmin = np.asarray(rmin)
    rmax = np.asarray(rmax)
    if qmin > 0 or qmax < 0:
        raise ValueError(f"qmin and qmax must satisfy qmin <= 0 <= qmax, got {qmin}, {qmax}")
    rmin = np.minimum(rmin, np.array(0, dtype=rmin.dtype))
    rmax = np.maximum(rmax, np.array(0, dtype=rmax.dtype))
    if min_real_range is not None:
        rmax = np.maximum(rmax, rmin + np.asarray(min_real_range, dtype=rmin.dtype))
    if symmetric:
        absmax = np.maximum(np.abs(rmin), np.abs(rmax))
        rmin, rmax = -absmax, +absmax
    # float64 difference: a finite float32 range can overflow when subtracted.
    dr = np.asarray(rmax, dtype=np.float64) - np.asarray(rmin, dtype=np.float64)
    dq = float(qmax) - float(qmin)
    scale = np.asarray(dr / dq)
    finfo = np.finfo(rmax.dtype)
    min_scale = finfo.smallest_subnormal if rmax.dtype == np.float16 else finfo.tiny
    stored = scale.astype(rmax.dtype)
    if np.all((stored if rmax.dtype == np.float16 else scale) < min_scale):
        return [np.array(0, dtype=qmin.dtype), np.array(1.0, dtype=rmax.dtype)]
    if symmetric:
        # Independent of the scale: 0/128/0/32768 for int8/uint8/int16/uint16, the
        # same for every channel (what per-channel QLinearConv requires).
        zero_point = np.array(np.round((float(qmin) + float(qmax)) / 2.0), dtype=qmin.dtype)
    else:
        zero_point = np.array(np.round(float(qmin) - rmin / scale), dtype=qmin.dtype)
    return [zero_point, stored]


def quantize_array(
    qtype: int, arr: np.ndarray, scale: np.ndarray, zero_point: np.ndarray
) -> np.ndarray:
    """``clip(round(arr / scale) + zero_point)`` in the numpy dtype of ``qtype``."""
    if qtype == TensorProto.FLOAT8E4M3FN:
        return (arr.astype(np.float32) / scale).astype(ml_dtypes.float8_e4m3fn)
    qmin, qmax = get_qmin_qmax_for_qType(qtype)
    out = np.asarray((arr.astype(np.float32) / scale).round() + zero_point)
    np.clip(out, float(qmin), float(qmax), out=out)
    return out.astype(NP_TYPES[qtype])


def _float8_scale(std: np.ndarray) -> list[np.ndarray]:
    values = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    values = values[np.isfinite(values)]
    return [
        np.array(0, dtype=ml_dtypes.float8_e4m3fn),
        np.array(std / np.std(values), dtype=std.dtype),
    ]


def compute_data_quant_params(
    data: np.ndarray,
    quant_type: int,
    symmetric: bool,
    reduce_range: bool = False,
    min_real_range: float | None = None,
    rmin_override: float | None = None,
    rmax_override: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(zero_point, scale)`` for quantizing ``data`` (its min and max unless overridden)."""
    if not isinstance(data, np.ndarray):
        raise TypeError(f"weight must be a numpy array, not {type(data).__name__}")
    rmin = np.array(
        rmin_override if rmin_override is not None else (data.min() if data.size else 0.0),
        data.dtype,
    )
    rmax = np.array(
        rmax_override if rmax_override is not None else (data.max() if data.size else 0.0),
        data.dtype,
    )
    if quant_type == TensorProto.FLOAT8E4M3FN:
        if reduce_range:
            raise ValueError("reduce_range=True is not supported for float 8")
        zp, scale = _float8_scale(np.std(data))
        return zp, scale
    qmin, qmax = get_qmin_qmax_for_qType(quant_type, reduce_range, symmetric=symmetric)
    if not data.size:
        return np.array(0, dtype=qmin.dtype), np.array(1.0, dtype=data.dtype)
    zp, scale = compute_scale_zp(rmin, rmax, qmin, qmax, symmetric, min_real_range)
    return zp, scale


def quantize_data(
    data: np.ndarray,
    qType: int,
    symmetric: bool,
    reduce_range: bool = False,
    min_real_range: float | None = None,
    rmin_override: float | None = None,
    rmax_override: float | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(zero_point, scale, quantized data)`` of ``data``."""
    zp, scale = compute_data_quant_params(
        data, qType, symmetric, reduce_range, min_real_range, rmin_override, rmax_override
    )
    return zp, scale, quantize_array(qType, data, scale, zp)


def quantize_bias_int32(bias: np.ndarray, bias_scale: np.ndarray) -> np.ndarray:
    """``bias / bias_scale`` rounded half to even, saturated to int32, in ``bias``'s shape."""
    ratios = np.asarray(bias, np.float64) / np.asarray(bias_scale, np.float64)
    info = np.iinfo(np.int32)
    clipped = np.clip(ratios.round(), float(info.min), float(info.max))
    return clipped.astype(np.int32).reshape(np.shape(bias))


def write_calibration_table(calibration_cache: dict[str, Any], dir: str = ".") -> None:
    """Write ``{tensor: (min, max)}`` ranges to ``calibration.json`` and ``calibration.cache``.

    Both go in ``dir``.
    """
    import json
    import os

    def plain(v: Any) -> tuple[float, float]:
        # A TensorData (its range_value) or a (min, max) pair of numbers or 0-d/1-element arrays.
        lo, hi = v.range_value if hasattr(v, "range_value") else v
        return float(np.asarray(lo).ravel()[0]), float(np.asarray(hi).ravel()[0])

    table = {k: plain(v) for k, v in calibration_cache.items()}
    with open(os.path.join(dir, "calibration.json"), "w") as f:
        json.dump(table, f)
    with open(os.path.join(dir, "calibration.cache"), "w") as f:
        for k, (lo, hi) in table.items():
            f.write(f"{k} {max(abs(lo), abs(hi))}\n")
