"""Cast between numeric types, written out exactly: the oracle for conversions
that ml_dtypes' ``astype`` answers differently from one release to the next.

ml_dtypes 0.7 agrees with this module; earlier releases round float64 and
64-bit integers to bfloat16, float8 and float4e2m1 twice (through float32),
keep the low bits of out-of-range floats cast to integers, and refuse some
pairs of their own types. onnx's reference evaluator casts with ``astype``, so
its answers move with the installed release; :func:`cast_exact` does not:

* to bfloat16, float8 and float4e2m1: the exact value (a float64, or a Python
  integer beyond 2**53) rounded to the nearest value of the target's table of
  finite values, ties to the even encoding; past the largest value by half a
  step or more it overflows (infinity, or NaN where the type lacks one), or
  saturates to the largest value (float8 when asked, as infinities; float4e2m1
  always);
* to float8e8m0: ``onnx.numpy_helper.to_float8e8m0`` of the float32 value;
* from a float (any) to int4/uint4/int2/uint2, and from bfloat16, float8 and
  float4e2m1 to any integer: truncated toward zero, 0 when NaN or out of range
  (ONNX leaves it undefined; this is ml_dtypes 0.7 and ortcore's providers);
* from an integer to int4/uint4/int2/uint2: the low bits, two's complement.

Only conversions from float32 (and exact ones, such as decoding to float32) go
through ml_dtypes; those agree in every release.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

import ml_dtypes
import numpy as np
import onnx.numpy_helper

__all__ = ["cast_exact", "defined_casts_only"]

_FLOAT8 = frozenset(
    np.dtype(t)
    for t in (
        ml_dtypes.float8_e4m3fn,
        ml_dtypes.float8_e4m3fnuz,
        ml_dtypes.float8_e5m2,
        ml_dtypes.float8_e5m2fnuz,
    )
)
_FLOAT4 = np.dtype(ml_dtypes.float4_e2m1fn)
_E8M0 = np.dtype(ml_dtypes.float8_e8m0fnu)
_ROUNDED = _FLOAT8 | {np.dtype(ml_dtypes.bfloat16), _FLOAT4}
_SMALL_INTS = frozenset(
    np.dtype(t) for t in (ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2, ml_dtypes.uint2)
)
_EXOTIC = _ROUNDED | _SMALL_INTS | {_E8M0}


@cache
def _table(dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """The finite non-negative values of ``dtype``, increasing, as float64, and
    whether each one's encoding is even; then one more value, a step past the
    largest (encoded one past it), where rounding overflows."""
    count = 16 if dtype == _FLOAT4 else 1 << (8 * dtype.itemsize)
    bits = np.arange(count, dtype=f"u{dtype.itemsize}")
    values = bits.view(dtype).astype(np.float64)
    keep = np.isfinite(values) & ~np.signbit(values)
    values, bits = values[keep], bits[keep]
    order = np.argsort(values, kind="stable")
    values, bits = values[order], bits[order]
    past = values[-1] + (values[-1] - values[-2])
    even = np.append((bits & 1) == 0, (int(bits[-1]) + 1) % 2 == 0)
    return np.append(values, past), even


def _round_int(n: int, digits: int) -> int:
    """``n >= 0`` rounded to ``digits`` significant bits, ties to even."""
    shift = n.bit_length() - digits
    if shift <= 0:
        return n
    q, r = divmod(n, 1 << shift)
    half = 1 << (shift - 1)
    if r > half or (r == half and q & 1):
        q += 1
    return q << shift


def _magnitudes(x: np.ndarray, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """``|x|`` as float64 (exact, or for integers past 2**53 already rounded to the
    precision of ``dtype``, which they overflow or round to alike) and its sign."""
    if x.dtype.kind in "iu":
        digits = int(ml_dtypes.finfo(dtype).nmant) + 1
        mags = [float(_round_int(abs(int(v)), digits)) for v in x.reshape(-1)]
        return np.array(mags, np.float64).reshape(x.shape), x < 0
    wide = x.astype(np.float64)
    return np.abs(wide), np.signbit(wide)


def _to_rounded(x: np.ndarray, dtype: np.dtype, saturate: bool) -> np.ndarray:
    """``x`` (an integer, or a float decoded exactly) to bfloat16, float8 or
    float4e2m1; ``saturate``: infinities and overflow to the largest value."""
    values, even = _table(dtype)
    mag, negative = _magnitudes(x, dtype)
    finite = np.isfinite(mag)
    m = np.where(finite, mag, 0.0)
    i = np.clip(np.searchsorted(values, m, side="left"), 1, values.size - 1)
    lo, hi = values[i - 1], values[i]
    mid = (lo + hi) / 2  # exact: two neighbours of a table this narrow
    up = (m > mid) | ((m == mid) & even[i])
    r = np.where(up, hi, lo)
    big = values[-2] if saturate else np.inf
    r = np.where(r == values[-1], big, r)  # overflow
    r = np.where(finite, r, np.where(np.isinf(mag), big, mag))  # infinity, NaN
    with np.errstate(invalid="ignore"):
        out = np.where(negative, -r, r).astype(np.float32)
    if x.dtype.kind == "f":
        out = np.where(np.isnan(x), x.astype(np.float32), out)  # NaN keeps its sign
    return out.astype(dtype)  # every value here is float32's: exact (or inf, NaN)


def _truncated(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """A float ``x`` truncated toward zero into integer ``dtype``, 0 when NaN or out of range."""
    info = ml_dtypes.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    ints = [math.trunc(v) if math.isfinite(v) else 0 for v in x.astype(np.float64).flat]
    ints = [v if lo <= v <= hi else 0 for v in ints]  # Python integers: exact
    held = np.uint64 if hi >= 2**63 else np.int64
    return np.array(ints, held).reshape(x.shape).astype(dtype)


def _wrapped(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """An integer ``x`` into the 4- or 2-bit integer ``dtype``: its low bits."""
    info = ml_dtypes.iinfo(dtype)
    bits = int(info.bits)
    signed = int(info.min) < 0
    low = [int(v) & ((1 << bits) - 1) for v in x.astype(object).reshape(-1)]
    if signed:
        low = [v - (1 << bits) if v >> (bits - 1) else v for v in low]
    return np.array(low, np.int64).reshape(x.shape).astype(dtype)


def _is_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or dtype in _ROUNDED or dtype == _E8M0


def cast_exact(
    x: np.ndarray, dtype: np.dtype | type, saturate: bool = True, round_mode: str = "up"
) -> np.ndarray:
    """ONNX Cast of numeric (or bool) ``x`` to ``dtype`` by the rules above;
    ``saturate`` and ``round_mode`` as Cast's attributes."""
    target = np.dtype(dtype)
    if x.dtype == target:
        return x.copy()
    source = x
    exotic_float = x.dtype in _EXOTIC and x.dtype not in _SMALL_INTS
    if x.dtype == np.bool_ or (x.dtype in _EXOTIC and x.dtype not in _SMALL_INTS):
        x = x.astype(np.float32)  # exact
    elif x.dtype in _SMALL_INTS:
        x = x.astype(np.int64)  # exact
    with np.errstate(over="ignore", invalid="ignore"):
        if target == _E8M0:
            return onnx.numpy_helper.to_float8e8m0(x.astype(np.float32), saturate, round_mode)
        if target in _ROUNDED:
            return _to_rounded(x, target, saturate and target in _FLOAT8)
        if target in _SMALL_INTS:
            return _truncated(x, target) if _is_float(x.dtype) else _wrapped(x, target)
        if target.kind in "iu" and exotic_float:
            return _truncated(x, target)
        return source.astype(target)  # to numpy's floats and bool: alike in every release


def _integer_range(dtype: np.dtype) -> tuple[int, int] | None:
    """The smallest and largest value of an integer ``dtype`` (``None``: not one)."""
    if dtype in _SMALL_INTS:
        bits = 4 if dtype.name.endswith("4") else 2
        signed = dtype.name.startswith("int")
        return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return int(info.min), int(info.max)
    return None


def defined_casts_only(
    model: onnx.ModelProto, sets: list[tuple[list[Any], list[Any]]]
) -> list[tuple[list[Any], list[Any]]]:
    """A cast case's data sets with only what ONNX defines left to grade.

    ONNX leaves a float cast to an integer type undefined when the value is out
    of the type's range (NaN and infinities included), and onnx's generated
    node tests hold, there, whatever the installed ml_dtypes answered (its
    releases differ). For a model whose nodes are all Cast/CastLike and whose
    first input is a float tensor cast to an integer type, each such input
    value is replaced by its nearest value in range (NaN by 0) and the expected
    output recomputed by :func:`cast_exact`: a provider is graded on the
    defined conversions only, whatever it does out of range. Any other model's
    sets are returned as they are.
    """
    nodes = list(model.graph.node)
    if not nodes or any(n.op_type not in ("Cast", "CastLike") or n.domain for n in nodes):
        return sets
    if len(model.graph.output) != 1:
        return sets
    out_type = model.graph.output[0].type.tensor_type.elem_type
    target = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(out_type))
    bounds = _integer_range(target)
    if bounds is None:
        return sets
    fixed: list[tuple[list[Any], list[Any]]] = []
    for ins, outs in sets:
        x = ins[0] if ins else None
        if not isinstance(x, np.ndarray) or not _is_float(x.dtype) or len(outs) != 1:
            fixed.append((ins, outs))
            continue
        wide = x.astype(np.float64)
        with np.errstate(invalid="ignore"):
            out_of_range = ~((wide > bounds[0] - 1) & (wide < bounds[1] + 1))  # NaN too
        if not out_of_range.any():
            fixed.append((ins, outs))
            continue
        kept = np.where(np.isnan(wide), 0.0, np.clip(wide, bounds[0], bounds[1]))
        kept = kept.astype(x.dtype).astype(np.float64)  # a bound x's type cannot hold...
        kept[(kept <= bounds[0] - 1) | (kept >= bounds[1] + 1)] = 0.0  # ...is 0 instead
        x = np.where(out_of_range, kept, wide).astype(x.dtype)  # in range: exact in x's type
        fixed.append(([x, *ins[1:]], [cast_exact(x, target)]))
    return fixed
