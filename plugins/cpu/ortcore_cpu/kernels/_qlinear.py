"""Native QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear for
float32 and uint8/int8, per tensor or per channel (``_ext/_qlinear.h``,
built with the 8-bit GEMM for this CPU's instructions).

Results equal numpy's bit for bit: ``saturate(rint(x / scale) +
zero_point)`` with a float32 division and rounding half to even (NaN gives
0, as numpy's cast does), ``(x - zero_point) * scale`` in float32. The
functions return None where they do not apply (other types, blocked
scales); the ONNX kernels then compute with numpy.
"""

from __future__ import annotations

import math

import numpy as np

from ..threads import share
from ._common import threads_for_memory_bound
from ._isa import best_build

__all__ = ["dequantize", "dynamic_quantize", "quantize"]

ext = best_build("qgemm")

_BYTES = {np.dtype(np.uint8): False, np.dtype(np.int8): True}


def _channels(shape: tuple[int, ...], size: int, axis: int) -> tuple[int, int] | None:
    """(C, inner) of a parameter of ``size`` values: per tensor (1, n) or
    along ``axis`` of ``shape``; None if it is neither."""
    n = math.prod(shape)
    if size == 1:
        return 1, max(n, 1)
    if not shape:
        return None
    axis = axis + len(shape) if axis < 0 else axis
    if not 0 <= axis < len(shape) or shape[axis] != size:
        return None
    return size, math.prod(shape[axis + 1 :])


def _threads(n: int, threads: int | None) -> int:
    return threads_for_memory_bound(n, share() if threads is None else threads)


def quantize(
    x: np.ndarray,
    scale: np.ndarray,
    zero_point: np.ndarray | None,
    dtype: np.dtype,
    axis: int = 1,
    threads: int | None = None,
) -> np.ndarray | None:
    """``saturate(rint(x / scale) + zero_point)`` as uint8/int8 ``dtype``
    for float32 ``x`` and ``scale`` (one value, or one per index of
    ``axis``); None where that does not apply."""
    dtype = np.dtype(dtype)
    if x.dtype != np.float32 or scale.dtype != np.float32 or dtype not in _BYTES:
        return None
    if zero_point is not None and (zero_point.dtype not in _BYTES or zero_point.size != scale.size):
        return None
    layout = _channels(x.shape, scale.size, axis)
    if layout is None:
        return None
    c, inner = layout
    zero = np.zeros(c, np.float32) if zero_point is None else zero_point.astype(np.float32)
    flat = np.ascontiguousarray(x).reshape(-1)
    y = np.empty(x.shape, dtype)
    ext.quantize(
        flat, scale.reshape(-1), zero.reshape(-1), _BYTES[dtype], y.reshape(-1).view(np.uint8),
        inner, _threads(flat.size, threads),
    )  # fmt: skip
    return y


def dequantize(
    x: np.ndarray,
    scale: np.ndarray,
    zero_point: np.ndarray | None,
    axis: int = 1,
    threads: int | None = None,
) -> np.ndarray | None:
    """``(x - zero_point) * scale`` in float32 for uint8/int8 ``x`` and a
    float32 ``scale`` (one value, or one per index of ``axis``); None where
    that does not apply."""
    if x.dtype not in _BYTES or scale.dtype != np.float32:
        return None
    if zero_point is not None and (zero_point.dtype not in _BYTES or zero_point.size != scale.size):
        return None
    layout = _channels(x.shape, scale.size, axis)
    if layout is None:
        return None
    c, inner = layout
    zero = np.zeros(c, np.int32) if zero_point is None else zero_point.astype(np.int32)
    flat = np.ascontiguousarray(x).reshape(-1).view(np.uint8)
    y = np.empty(x.shape, np.float32)
    ext.dequantize(
        flat, _BYTES[x.dtype], zero.reshape(-1), scale.reshape(-1), y.reshape(-1), inner,
        _threads(flat.size, threads),
    )  # fmt: skip
    return y


def _dynamic_reference(x: np.ndarray) -> tuple[np.ndarray, np.float32, np.uint8]:
    """DynamicQuantizeLinear in numpy, for what the native loops do not take."""
    hi = np.float32(max(0.0, float(np.max(x)))) if x.size else np.float32(0)
    lo = np.float32(min(0.0, float(np.min(x)))) if x.size else np.float32(0)
    scale = np.float32(1.0 if hi == lo else hi - lo) / np.float32(255)
    zp = np.rint(np.clip(np.float32(0) - lo / scale, 0, 255))
    y = np.clip(np.rint(x / scale) + zp, 0, 255).astype(np.uint8)
    return y, np.float32(scale), np.uint8(zp)


def dynamic_quantize(
    x: np.ndarray, *, threads: int | None = None
) -> tuple[np.ndarray, np.float32, np.uint8]:
    """ONNX DynamicQuantizeLinear: ``x`` to uint8 with a scale and zero
    point from its range extended to include 0 (``scale = (max - min) /
    255``, 1/255 for a range of 0; ``zero = rint(saturate(-min /
    scale))``), ``y = saturate(rint(x / scale) + zero)``, each step in
    float32 and rounded half to even as the ONNX reference computes; a NaN
    anywhere makes the range [0, 0].

    One pass finds the range, one quantizes, both native (float32 ``x``)
    on up to ``threads`` threads (default: this run's share of the cores).

    Returns:
        ``(y, scale, zero_point)``: uint8 ``y`` of ``x``'s shape, the
        float32 scale and the uint8 zero point.
    """
    x = np.asarray(x)
    if x.dtype != np.float32:
        return _dynamic_reference(x)
    flat = np.ascontiguousarray(x).reshape(-1)
    nt = _threads(flat.size, threads)
    hi = lo = np.float32(0)
    if flat.size:
        least, most, nan = ext.minmax(flat, nt)
        if not nan:  # NaN: max(0.0, nan) and min(0.0, nan) are 0.0, as the reference's
            hi = np.float32(max(0.0, float(most)))
            lo = np.float32(min(0.0, float(least)))
    scale = np.float32(np.float32(1.0 if hi == lo else hi - lo) / np.float32(255))
    zp = np.rint(np.clip(np.float32(0) - lo / scale, 0, 255))
    y = np.empty(x.shape, np.uint8)
    ext.quantize(
        flat, np.array([scale], np.float32), np.array([zp], np.float32), False, y.reshape(-1),
        max(flat.size, 1), nt,
    )  # fmt: skip
    return y, scale, np.uint8(zp)
