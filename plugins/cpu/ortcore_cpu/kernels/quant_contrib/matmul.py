"""Quantized matrix products of onnxruntime's contrib domain:
DynamicQuantizeMatMul, MatMulIntegerToFloat and QGemm, every one an
``int_matmul`` of the shared interface (:mod:`.._qgemm`) and its float or
requantizing epilogue.

A's scale and zero point are per tensor; B's are per tensor or per column
(one per output column N). Batch dimensions broadcast as in MatMul.
"""

from __future__ import annotations

import numpy as np
from ep_sdk import Compute, NodeInfo

from .. import registry
from .._common import DT
from .._qgemm import int_matmul, int_matmul_to_float, requantize
from ..contrib import MS_DOMAIN
from ._params import EIGHT_BIT, RANGES, check_8bit, per_column, scalar_scale, scalar_zero


def _columns(info: NodeInfo, a: np.ndarray, b: np.ndarray) -> int:
    """N, after checking that A (..., M, K) and B (..., K, N) multiply."""
    if a.ndim < 1 or b.ndim < 1:
        raise ValueError(f"{info.describe()}: A and B must have at least one dimension")
    k_a = a.shape[-1]
    k_b = b.shape[-2] if b.ndim >= 2 else b.shape[0]
    if k_a != k_b:
        raise ValueError(
            f"{info.describe()}: A {a.shape} and B {b.shape} do not multiply "
            f"(K is {k_a} in A, {k_b} in B)"
        )
    return b.shape[-1] if b.ndim >= 2 else 1


def _bias(info: NodeInfo, bias: np.ndarray | None, n: int) -> np.ndarray | None:
    if bias is None:
        return None
    if bias.ndim != 1 or bias.shape[0] != n:
        raise ValueError(
            f"{info.describe()}: bias must be 1-D of {n} elements (B's columns), "
            f"got shape {bias.shape}"
        )
    return bias.astype(np.float32, copy=False)


def dynamic_quantize_uint8(x: np.ndarray) -> tuple[np.ndarray, np.float32, int]:
    """DynamicQuantizeLinear of a float32 tensor: uint8 values, the scale and
    zero point of its range widened to include 0 (onnxruntime's formula)."""
    x = x.astype(np.float32, copy=False)
    hi = np.float32(max(0.0, float(x.max()))) if x.size else np.float32(0)
    lo = np.float32(min(0.0, float(x.min()))) if x.size else np.float32(0)
    scale = np.float32(1.0) if hi == lo else np.float32((hi - lo) / np.float32(255))
    zero = int(np.clip(np.rint(np.float32(0) - lo / scale), 0, 255))
    q = np.clip(np.rint(x / scale) + np.float32(zero), 0, 255).astype(np.uint8)
    return q, scale, zero


@registry.kernel("DynamicQuantizeMatMul", domain=MS_DOMAIN, types={1: EIGHT_BIT})
def dynamic_quantize_matmul(info: NodeInfo) -> Compute:
    """``Y = dequantize(dynamic_quantize(A)) @ dequantize(B) + bias``: A
    (float32) quantized to uint8 over its whole range at run time, B
    quantized with ``b_scale``/``b_zero_point`` per tensor or per column."""

    def compute(
        a: np.ndarray,
        b: np.ndarray,
        b_scale: np.ndarray,
        b_zero: np.ndarray | None = None,
        bias: np.ndarray | None = None,
    ) -> tuple[np.ndarray]:
        check_8bit(info, b, "B")
        n = _columns(info, a, b)
        sb = per_column(info, b_scale, n, "b_scale")
        zb = per_column(info, b_zero, n, "b_zero_point")
        qa, sa, za = dynamic_quantize_uint8(a)
        y = int_matmul_to_float(
            qa, za, float(sa), b, zb, np.asarray(sb, np.float32), _bias(info, bias, n)
        )
        return (y,)

    return compute


@registry.kernel("MatMulIntegerToFloat", domain=MS_DOMAIN, types={0: EIGHT_BIT, 1: EIGHT_BIT})
def matmul_integer_to_float(info: NodeInfo) -> Compute:
    """``Y = (A - a_zp)(B - b_zp) a_scale b_scale + bias`` in float (the
    scales' type): A's parameters per tensor, B's per tensor or per column."""

    def compute(
        a: np.ndarray,
        b: np.ndarray,
        a_scale: np.ndarray,
        b_scale: np.ndarray,
        a_zero: np.ndarray | None = None,
        b_zero: np.ndarray | None = None,
        bias: np.ndarray | None = None,
    ) -> tuple[np.ndarray]:
        check_8bit(info, a, "A")
        check_8bit(info, b, "B")
        n = _columns(info, a, b)
        sa = scalar_scale(info, a_scale, "a_scale")
        za = scalar_zero(info, a_zero, "a_zero_point", a.dtype)
        sb = per_column(info, b_scale, n, "b_scale")
        zb = per_column(info, b_zero, n, "b_zero_point")
        y = int_matmul_to_float(
            a, za, float(sa), b, zb, np.asarray(sb, np.float32), _bias(info, bias, n)
        )
        return (y.astype(np.asarray(b_scale).dtype, copy=False),)

    return compute


@registry.kernel("QGemm", domain=MS_DOMAIN, types={0: EIGHT_BIT, 3: EIGHT_BIT})
def qgemm(info: NodeInfo) -> Compute:
    """``acc = (op(A) - a_zp)(op(B) - b_zp) + C`` in int32 (C quantized with
    scale ``alpha a_scale b_scale`` and no zero point), then ``Y = alpha
    a_scale b_scale acc`` in float32, or with ``y_scale`` requantized into
    ``y_zero_point``'s type. ``transA``/``transB`` transpose A (M, K) and
    B (K, N); B's scale and zero point are per tensor or per column (N)."""
    alpha = np.float32(info.attrs.get("alpha", 1.0))
    trans_a = bool(info.attrs.get("transA", 0))
    trans_b = bool(info.attrs.get("transB", 0))

    def compute(
        a: np.ndarray,
        a_scale: np.ndarray,
        a_zero: np.ndarray | None,
        b: np.ndarray,
        b_scale: np.ndarray,
        b_zero: np.ndarray | None,
        c: np.ndarray | None = None,
        y_scale: np.ndarray | None = None,
        y_zero: np.ndarray | None = None,
    ) -> tuple[np.ndarray]:
        check_8bit(info, a, "A")
        check_8bit(info, b, "B")
        if a.ndim != 2 or b.ndim != 2:
            raise ValueError(f"{info.describe()}: A and B must be 2-D, got {a.shape} and {b.shape}")
        am = a.T if trans_a else a
        bm = b.T if trans_b else b
        n = _columns(info, am, bm)
        m = am.shape[0]
        sa = scalar_scale(info, a_scale, "a_scale")
        za = scalar_zero(info, a_zero, "a_zero_point", a.dtype)
        sb = per_column(info, b_scale, n, "b_scale")
        zb = per_column(info, b_zero, n, "b_zero_point")
        acc = int_matmul(am, za, bm, zb)
        if c is not None:
            try:
                acc = acc + np.broadcast_to(c.astype(np.int32), (m, n))
            except ValueError:
                raise ValueError(
                    f"{info.describe()}: C {c.shape} does not broadcast to (M, N) = ({m}, {n})"
                ) from None
        scale = alpha * sa * np.asarray(sb, np.float32)  # float32, per column or 0-D
        if y_scale is None:
            return ((acc.astype(np.float32) * scale).astype(np.float32),)
        sy = scalar_scale(info, y_scale, "y_scale")
        out = y_zero.dtype if y_zero is not None else _out_type(info, a.dtype)
        zy = scalar_zero(info, y_zero, "y_zero_point")
        if out not in RANGES:
            raise TypeError(f"{info.describe()}: y_zero_point must be uint8 or int8, got {out}")
        return (requantize(acc, (scale / sy).astype(np.float32), zy, out),)

    return compute


def _out_type(info: NodeInfo, default: np.dtype) -> np.dtype:
    """The declared output type when it is 8-bit, else ``default``."""
    declared = info.output_types[0] if info.output_types else None
    if declared == DT.UINT8:
        return np.dtype(np.uint8)
    if declared == DT.INT8:
        return np.dtype(np.int8)
    return np.dtype(default)


__all__ = [
    "dynamic_quantize_matmul",
    "dynamic_quantize_uint8",
    "matmul_integer_to_float",
    "qgemm",
]
