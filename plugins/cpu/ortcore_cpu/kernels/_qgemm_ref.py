"""The numpy reference of :mod:`._qgemm`'s integer matrix products.

:mod:`._qgemm` runs them on the native 8-bit GEMM and falls back on these
for what it does not run natively; tests compare the two.

- :func:`int_matmul`: ``(a - a_zero) @ (b - b_zero)`` exactly, as int32;
- :func:`int_matmul_to_float`: the same product scaled to float32
  (``* a_scale * b_scale + bias``), the epilogue of dynamic quantization;
- :func:`requantize`: an int32 accumulator scaled in float32 (as
  onnxruntime does), rounded half to even,
  shifted by the output zero point and saturated into 8 bits.

This module is the numpy reference: products accumulate in float64, exact
for the sums of 8-bit products below 2**53 (K up to about 2**37).
"""

from __future__ import annotations

import numpy as np

__all__ = ["centered", "int_matmul", "int_matmul_to_float", "requantize"]


def centered(x: np.ndarray, zero: np.ndarray | int | None, axis: int = -1) -> np.ndarray:
    """``x - zero`` as float64; a 1-D zero point of more than one element
    runs along ``axis`` of ``x``."""
    out = x.astype(np.float64)
    if zero is None:
        return out
    z = np.asarray(zero, dtype=np.float64)
    if z.ndim == 1 and z.size > 1:
        shape = [1] * x.ndim
        shape[axis] = z.size
        z = z.reshape(shape)
    elif z.size == 1:
        z = z.reshape(())
    return out - z


def int_matmul(
    a: np.ndarray,
    a_zero: np.ndarray | int | None,
    b: np.ndarray,
    b_zero: np.ndarray | int | None,
) -> np.ndarray:
    """``(a - a_zero) @ (b - b_zero)`` as int32, batch dimensions broadcast
    as ``np.matmul`` does.

    Args:
        a: uint8 or int8, shape ``(..., M, K)`` (or ``(K,)``).
        a_zero: None, a scalar, or one zero point per row of ``a`` (``(M,)``).
        b: uint8 or int8, shape ``(..., K, N)`` (or ``(K,)``).
        b_zero: None, a scalar, or one zero point per column of ``b`` (``(N,)``).
    """
    a_axis = -2 if a.ndim >= 2 else -1
    acc = np.matmul(centered(a, a_zero, a_axis), centered(b, b_zero, -1))
    return np.asarray(acc).astype(np.int64).astype(np.int32)


def int_matmul_to_float(
    a: np.ndarray,
    a_zero: np.ndarray | int | None,
    a_scale: np.ndarray | float,
    b: np.ndarray,
    b_zero: np.ndarray | int | None,
    b_scale: np.ndarray | float,
    bias: np.ndarray | None = None,
) -> np.ndarray:
    """``int_matmul(a, a_zero, b, b_zero) * a_scale * b_scale (+ bias)`` in
    float32; ``b_scale`` is a scalar or one scale per column (``(N,)``),
    ``bias`` broadcasts against the last axis."""
    acc = int_matmul(a, a_zero, b, b_zero).astype(np.float32)
    scale = np.float32(np.asarray(a_scale, dtype=np.float32).reshape(())) * np.asarray(
        b_scale, dtype=np.float32
    )
    out = acc * (scale.reshape(()) if scale.size == 1 else scale)
    if bias is not None:
        out = out + np.asarray(bias, dtype=np.float32)
    return out.astype(np.float32, copy=False)


_RANGES = {np.dtype(np.uint8): (0, 255), np.dtype(np.int8): (-128, 127)}


def requantize(
    acc: np.ndarray,
    multiplier: np.ndarray | float,
    y_zero: np.ndarray | int | None,
    dtype: np.dtype | type,
) -> np.ndarray:
    """``acc`` (integers, int32 sums) requantized to ``dtype`` (uint8 or
    int8) as onnxruntime's MLAS does (``MlasRequantizeOutput``): ``acc``
    converted to float32, times the float32 ``multiplier`` (``a_scale *
    b_scale / y_scale`` computed in float32 arithmetic: a scalar, or one per
    output channel broadcasting against ``acc``), clamped to ``[lo - y_zero,
    hi - y_zero]`` (a NaN to ``lo - y_zero``), rounded half to even, plus
    ``y_zero`` (a scalar or broadcasting against ``acc``). Every step is
    rounded to float32, so a product that lands on a half in float32 rounds
    to even where the exact one would not."""
    lo, hi = _RANGES[np.dtype(dtype)]
    mult = np.asarray(multiplier)
    if mult.dtype != np.float32:
        # a Python float or float64 holding a float32 value: exact
        mult = mult.astype(np.float32)
    y = np.asarray(acc).astype(np.float32) * mult
    zp = np.zeros((), np.int32) if y_zero is None else np.asarray(y_zero).astype(np.int32)
    # np.fmax/np.fmin take the number where one side is NaN, as maxps/minps
    # with the bound second do
    y = np.fmin(np.fmax(y, (lo - zp).astype(np.float32)), (hi - zp).astype(np.float32))
    return (np.rint(y).astype(np.int32) + zp).astype(dtype)
