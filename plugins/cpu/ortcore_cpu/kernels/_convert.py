"""Conversion into ml_dtypes' types with the same result under every ml_dtypes release.

``x.astype(t)`` for a type ``t`` of ml_dtypes runs ml_dtypes' own loops, and
releases before 0.7 answer differently (and refuse some pairs). :func:`convert`
gives ml_dtypes 0.7's results, which the CUDA provider's kernels compute too,
whatever release is installed:

* float64, int64 and uint64 to bfloat16, float8 and float4e2m1 round once,
  to nearest even (0.6 rounded to float32 first, then again). Here the value
  is rounded to float32 *to odd* (truncated, the last bit set if anything was
  dropped), which keeps enough to round correctly once more: float32 holds at
  least two bits more than any of these targets.
* A float to int4/uint4/int2/uint2, and bfloat16/float8/float4 to the standard
  integers: truncated toward zero, 0 when NaN or out of range (0.6 kept the
  low bits). ONNX leaves the out-of-range case undefined.
* An integer (and the 4- and 2-bit integers between themselves) to the 4- and
  2-bit integers keeps its low bits, two's complement, as Cast's spec says.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

__all__ = ["convert"]

_SMALL_INTS: dict[np.dtype, tuple[int, int]] = {
    np.dtype(t): (int(ml_dtypes.iinfo(t).min), int(ml_dtypes.iinfo(t).max))
    for t in (ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2, ml_dtypes.uint2)
}
_NARROW_FLOATS = frozenset(
    np.dtype(t)
    for t in (
        ml_dtypes.bfloat16,
        ml_dtypes.float8_e4m3fn,
        ml_dtypes.float8_e4m3fnuz,
        ml_dtypes.float8_e5m2,
        ml_dtypes.float8_e5m2fnuz,
        ml_dtypes.float4_e2m1fn,
    )
)
_ML_FLOATS = _NARROW_FLOATS | {np.dtype(ml_dtypes.float8_e8m0fnu)}
_EXOTIC = _ML_FLOATS | _SMALL_INTS.keys()
_STICKY = np.uint64(0x7FF)  # the bits of a 64-bit integer float64 cannot hold above 2**53


def _is_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or dtype in _ML_FLOATS


def _truncate_in_range(x: np.ndarray, dtype: np.dtype, lo: int, hi: int) -> np.ndarray:
    """A float ``x`` truncated toward zero into integer ``dtype``; 0 where NaN or out of range."""
    with np.errstate(invalid="ignore"):
        t = np.trunc(x.astype(np.float64))  # exact: every float here fits in float64
        ok = (t >= float(lo)) & (t < float(hi + 1))  # hi + 1 is a power of two: exact
    t = np.where(ok, t, 0.0)
    return t.astype(np.int64).astype(dtype) if dtype in _SMALL_INTS else t.astype(dtype)


def _float64_to_odd_float32(x: np.ndarray) -> np.ndarray:
    """float64 ``x`` rounded to float32 to odd (toward zero, the last bit set when inexact)."""
    with np.errstate(over="ignore", invalid="ignore"):
        y = x.astype(np.float32)
        away = np.abs(y.astype(np.float64)) > np.abs(x)  # rounded up in magnitude (or to inf)
        y = np.where(away, np.nextafter(y, np.float32(0)), y)
        inexact = np.isfinite(x) & (y.astype(np.float64) != x)
    return (y.view(np.uint32) | inexact.astype(np.uint32)).view(np.float32)


def _int_to_float64_odd(x: np.ndarray) -> np.ndarray:
    """Integer ``x`` as float64, exact below 2**53 and rounded to odd above: the
    low 11 bits (what float64 cannot hold of a 64-bit value) fold into one sticky
    bit, so a later rounding to odd at float32 is that of the exact value."""
    if x.dtype.itemsize < 8:
        return x.astype(np.float64)
    neg = x < 0
    mag = x.astype(np.uint64)
    mag = np.where(neg, np.uint64(0) - mag, mag)  # |x|, also for int64's minimum
    big = mag >= np.uint64(1 << 53)
    sticky = (mag & _STICKY) != 0
    folded = (mag & ~_STICKY) | (sticky.astype(np.uint64) << np.uint64(11))
    f = np.where(big, folded, mag).astype(np.float64)
    return np.where(neg, -f, f)


def convert(x: np.ndarray, dtype: np.dtype | type) -> np.ndarray:
    """``x.astype(dtype)`` with ml_dtypes 0.7's result under every ml_dtypes release
    (the rules are in this module's docstring). Pairs of numpy's own types are
    left to numpy; float8e8m0 targets to :func:`.casting.to_float8e8m0`'s callers."""
    target = np.dtype(dtype)
    src = x.dtype
    if target in _SMALL_INTS:
        if _is_float(src):
            return _truncate_in_range(x, target, *_SMALL_INTS[target])
        if src in _SMALL_INTS:  # refused between themselves before ml_dtypes 0.7
            x = x.astype(np.int64)
        return x.astype(target)
    if src in _ML_FLOATS and target.kind in "iu":
        info = np.iinfo(target)
        return _truncate_in_range(x, target, int(info.min), int(info.max))
    if target in _NARROW_FLOATS:
        if src.kind in "iu" and src.itemsize >= 4:
            x = _int_to_float64_odd(x)
        if x.dtype == np.float64:
            x = _float64_to_odd_float32(x)
    if src in _EXOTIC and target in _EXOTIC and src != target:
        x = x.astype(np.float32)  # exact; some pairs are refused before ml_dtypes 0.7
    return x.astype(target)
