"""Quantized matrix products of onnxruntime's contrib domain:
DynamicQuantizeMatMul, MatMulIntegerToFloat and QGemm, every one an
``int_matmul`` of the shared interface (:mod:`.._qgemm`) and its float or
requantizing epilogue.

A's scale and zero point are per tensor; B's are per tensor or per column
(one per output column N). Batch dimensions broadcast as in MatMul.

A constant B (the tool's weights are initializers) is packed once for the
native GEMM (:class:`._weights.ConstantB`), products use the session's
threads, and a per-column bias is added in the GEMM's epilogue.
"""

from __future__ import annotations

import numpy as np
from ep_sdk import Compute, NodeInfo

from .. import registry
from .._common import DT
from .._qgemm import (
    EXACT_K,
    dynamic_quantize,
    int_matmul,
    int_matmul_requantize,
    int_matmul_to_float,
    requantize,
)
from ..contrib import MS_DOMAIN
from ._params import EIGHT_BIT, RANGES, check_8bit, per_column, scalar_scale, scalar_zero
from ._weights import ConstantB


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


@registry.kernel("DynamicQuantizeMatMul", domain=MS_DOMAIN, types={1: EIGHT_BIT})
def dynamic_quantize_matmul(info: NodeInfo) -> Compute:
    """``Y = dequantize(dynamic_quantize(A)) @ dequantize(B) + bias``: A
    (float32) quantized to uint8 over its whole range at run time, B
    quantized with ``b_scale``/``b_zero_point`` per tensor or per column."""
    weight = ConstantB(info, 1, 3)

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
        per_column(info, b_zero, n, "b_zero_point")  # checked; passed as is to match `packed`
        qa, sa, za = dynamic_quantize(a)
        bm, packed = weight.get(b, b_zero)
        y = int_matmul_to_float(
            qa, int(za), float(sa), bm, b_zero, np.asarray(sb, np.float32), _bias(info, bias, n),
            threads=weight.product_threads(qa, bm), packed=packed,
        )  # fmt: skip
        return (y,)

    return compute


@registry.kernel("MatMulIntegerToFloat", domain=MS_DOMAIN, types={0: EIGHT_BIT, 1: EIGHT_BIT})
def matmul_integer_to_float(info: NodeInfo) -> Compute:
    """``Y = (A - a_zp)(B - b_zp) a_scale b_scale + bias`` in float (the
    scales' type): A's parameters per tensor, B's per tensor or per column."""
    weight = ConstantB(info, 1, 5)

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
        per_column(info, b_zero, n, "b_zero_point")  # checked; passed as is to match `packed`
        bm, packed = weight.get(b, b_zero)
        y = int_matmul_to_float(
            a, za, float(sa), bm, b_zero, np.asarray(sb, np.float32), _bias(info, bias, n),
            threads=weight.product_threads(a, bm), packed=packed,
        )  # fmt: skip
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
    weight = ConstantB(info, 3, 5, transpose=trans_b)

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
        am = np.ascontiguousarray(a.T) if trans_a else a
        bm, packed = weight.get(b, b_zero)
        n = _columns(info, am, bm)
        m = am.shape[0]
        sa = scalar_scale(info, a_scale, "a_scale")
        za = scalar_zero(info, a_zero, "a_zero_point", a.dtype)
        sb = per_column(info, b_scale, n, "b_scale")
        per_column(info, b_zero, n, "b_zero_point")  # checked; passed as is to match `packed`
        threads = weight.product_threads(am, bm)
        scale = alpha * sa * np.asarray(sb, np.float32)  # float32, per column or 0-D
        if c is not None:
            try:
                c_full = np.broadcast_to(c, (m, n))
            except ValueError:
                raise ValueError(
                    f"{info.describe()}: C {c.shape} does not broadcast to (M, N) = ({m}, {n})"
                ) from None
        # C along the rows (a bias per column, its usual form) is summed in
        # the GEMM's int32 epilogue; any other C after the product
        row_c = c is None or c.size == 1 or (c.size == n and c.shape[-1] == n)
        if y_scale is None:
            if c is None:
                y = int_matmul_to_float(
                    am, za, 1.0, bm, b_zero, scale, threads=threads, packed=packed
                )  # the product of the int32 sum and the scale, as below
                return (y,)
            acc = int_matmul(am, za, bm, b_zero, threads=threads, packed=packed)
            acc = acc + c_full.astype(np.int32)
            return ((acc.astype(np.float32) * scale).astype(np.float32),)
        sy = scalar_scale(info, y_scale, "y_scale")
        out = y_zero.dtype if y_zero is not None else _out_type(info, a.dtype)
        zy = scalar_zero(info, y_zero, "y_zero_point")
        if out not in RANGES:
            raise TypeError(f"{info.describe()}: y_zero_point must be uint8 or int8, got {out}")
        mult = (scale / sy).astype(np.float32)
        if row_c and am.shape[-1] <= EXACT_K:
            ibias = None if c is None else np.broadcast_to(c.reshape(-1), (n,)).astype(np.int32)
            y = int_matmul_requantize(
                am, za, bm, b_zero, mult, zy, out, bias=ibias, threads=threads, packed=packed
            )
            return (y,)
        acc = int_matmul(am, za, bm, b_zero, threads=threads, packed=packed)
        if c is not None:
            acc = acc + c_full.astype(np.int32)
        return (requantize(acc, mult, zy, out),)

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
    "matmul_integer_to_float",
    "qgemm",
]
