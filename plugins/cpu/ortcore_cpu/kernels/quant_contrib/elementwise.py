"""Elementwise quantized contrib ops: QLinearAdd, QLinearMul (broadcasting),
QLinearSigmoid, QLinearLeakyRelu (256-entry lookup tables), QLinearSoftmax,
QLinearWhere, QLinearConcat, and com.microsoft's QuantizeLinear and
DequantizeLinear.

Each computes in float32 what onnxruntime's kernel computes (its scales'
ratios, its tables), then rounds half to even and saturates: results match
onnxruntime's exactly except where a value lands on a rounding tie through a
different order of float32 operations (one unit at most).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ep_sdk import Compute, NodeInfo

from .. import registry
from .._common import DT, normalize_axis
from ..contrib import MS_DOMAIN
from ..quantization import dequantize_linear, quantize_linear
from ._params import (
    EIGHT_BIT,
    apply_table,
    check_8bit,
    lookup_table,
    saturate,
    scalar_scale,
    scalar_zero,
    unary_params,
)

_T0: dict[str | int, frozenset[DT]] = {0: EIGHT_BIT}


def _binary(info: NodeInfo, mul: bool) -> Compute:
    def compute(
        a: np.ndarray,
        a_scale: np.ndarray,
        a_zero: np.ndarray | None,
        b: np.ndarray,
        b_scale: np.ndarray,
        b_zero: np.ndarray | None,
        c_scale: np.ndarray,
        c_zero: np.ndarray | None = None,
    ) -> tuple[np.ndarray]:
        check_8bit(info, a, "A")
        if b.dtype != a.dtype:
            raise TypeError(f"{info.describe()}: A is {a.dtype} but B is {b.dtype}")
        sa = scalar_scale(info, a_scale, "A_scale")
        sb = scalar_scale(info, b_scale, "B_scale")
        sc = scalar_scale(info, c_scale, "C_scale")
        za = np.float32(scalar_zero(info, a_zero, "A_zero_point", a.dtype))
        zb = np.float32(scalar_zero(info, b_zero, "B_zero_point", a.dtype))
        zc = np.float32(scalar_zero(info, c_zero, "C_zero_point", a.dtype))
        try:
            shape = np.broadcast_shapes(a.shape, b.shape)
        except ValueError:
            raise ValueError(
                f"{info.describe()}: A {a.shape} and B {b.shape} do not broadcast"
            ) from None
        if not np.prod(shape, dtype=np.int64):
            return (np.zeros(shape, a.dtype),)
        if mul:  # onnxruntime: (a - za) * (b - zb) * (sa * sb / sc) + zc
            fa = a.astype(np.float32) - za
            fb = b.astype(np.float32) - zb
            y = fa * fb * np.float32(sa * sb / sc) + zc
        else:
            y = _add_as_onnxruntime(a, b, sa, za, sb, zb, sc, zc)
        return (saturate(y, a.dtype),)

    return compute


def _add_as_onnxruntime(
    a: np.ndarray,
    b: np.ndarray,
    sa: float | np.floating[Any],
    za: np.float32,
    sb: float | np.floating[Any],
    zb: np.float32,
    sc: float | np.floating[Any],
    zc: np.float32,
) -> np.ndarray:
    """QLinearAdd's float32 value before rounding, in onnxruntime's order of
    operations (MLAS): ``fma(a, ra, fma(b, rb, zc - fma(ra, za, rb zb)))`` with
    ``ra = sa / sc`` and ``rb = sb / sc``. Written as ``(a - za) ra + (b - zb)
    rb + zc`` it lands on a half (-110.5) where onnxruntime's lies just beside
    it, and rounds the other way. A fused multiply-add is one rounding: an
    8-bit value times a float32 is exact in float64, and so is the sum with a
    float32 of like magnitude, so float64 then one cast to float32 is it."""
    ra = np.float32(np.float32(sa) / np.float32(sc))
    rb = np.float32(np.float32(sb) / np.float32(sc))
    # the constant part as onnxruntime's build computes it: its compiler fuses
    # ra za + rb zb into one multiply-add
    inner = np.float32(float(ra) * float(za) + float(np.float32(rb * zb)))
    fixed = np.float32(zc - inner)
    c = (b.astype(np.float64) * float(rb) + float(fixed)).astype(np.float32)
    return (a.astype(np.float64) * float(ra) + c.astype(np.float64)).astype(np.float32)


@registry.kernel("QLinearAdd", domain=MS_DOMAIN, types=_T0)
def qlinear_add(info: NodeInfo) -> Compute:
    """``C = (A_scale (A - A_zp) + B_scale (B - B_zp)) / C_scale + C_zp``,
    numpy broadcasting, every parameter per tensor."""
    return _binary(info, mul=False)


@registry.kernel("QLinearMul", domain=MS_DOMAIN, types=_T0)
def qlinear_mul(info: NodeInfo) -> Compute:
    """``C = (A - A_zp)(B - B_zp) A_scale B_scale / C_scale + C_zp``,
    numpy broadcasting, every parameter per tensor."""
    return _binary(info, mul=True)


def _unary_table(info: NodeInfo, fn: object) -> Compute:
    def compute(
        x: np.ndarray,
        x_scale: np.ndarray,
        x_zero: np.ndarray | None,
        y_scale: np.ndarray,
        y_zero: np.ndarray | None = None,
    ) -> tuple[np.ndarray]:
        names = ("X_scale", "X_zero_point", "Y_scale", "Y_zero_point")
        table = lookup_table(
            x.dtype,
            *unary_params(info, x, (x_scale, x_zero, y_scale, y_zero), names),
            fn,  # type: ignore[arg-type]
        )
        return (apply_table(x, table),)

    return compute


def _sigmoid(v: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return (np.float32(1) / (np.float32(1) + np.exp(-v))).astype(np.float32)


@registry.kernel("QLinearSigmoid", domain=MS_DOMAIN, types=_T0)
def qlinear_sigmoid(info: NodeInfo) -> Compute:
    """``quantize(sigmoid(dequantize(x)))`` through a 256-entry table."""
    return _unary_table(info, _sigmoid)


@registry.kernel("QLinearLeakyRelu", domain=MS_DOMAIN, types=_T0)
def qlinear_leaky_relu(info: NodeInfo) -> Compute:
    """``quantize(leaky_relu(dequantize(x), alpha))`` (``alpha`` 0.01 by
    default) through a 256-entry table."""
    alpha = np.float32(info.attrs.get("alpha", 0.01))
    return _unary_table(info, lambda v: np.where(v >= 0, v, v * alpha))


@registry.kernel("QLinearSoftmax", domain=MS_DOMAIN, types=_T0)
def qlinear_softmax(info: NodeInfo) -> Compute:
    """Softmax of a quantized tensor: ``exp((x - max) * X_scale)`` (the
    difference taken in integers, as onnxruntime's table does), normalized,
    quantized with ``y_scale``/``y_zero_point``. ``opset`` < 13 normalizes
    over every axis from ``axis`` on (the 2-D coercion), 13+ over ``axis``."""
    axis_attr = int(info.attrs.get("axis", -1))
    opset = int(info.attrs.get("opset", 13) or 13)

    def compute(
        x: np.ndarray,
        x_scale: np.ndarray,
        x_zero: np.ndarray | None,
        y_scale: np.ndarray,
        y_zero: np.ndarray | None = None,
    ) -> tuple[np.ndarray]:
        check_8bit(info, x, "X")
        sx = scalar_scale(info, x_scale, "X_scale")
        scalar_zero(info, x_zero, "x_zero_point", x.dtype)  # cancels in x - max
        sy = scalar_scale(info, y_scale, "y_scale")
        zy = scalar_zero(info, y_zero, "y_zero_point", x.dtype)
        if x.ndim == 0:
            raise ValueError(f"{info.describe()}: X must have at least one dimension")
        axis = normalize_axis(axis_attr, x.ndim)
        if x.size == 0:
            return (x.copy(),)
        if opset < 13:
            rows = int(np.prod(x.shape[:axis], dtype=np.int64))
            work = x.reshape(rows, -1).astype(np.int32)
            red = -1
        else:
            work, red = x.astype(np.int32), axis
        diff = (work - work.max(axis=red, keepdims=True)).astype(np.float32)
        e = np.exp(diff * sx)
        total = e.sum(axis=red, keepdims=True, dtype=np.float32)
        y = e / (total * sy) + np.float32(zy)
        return (saturate(y, x.dtype).reshape(x.shape),)

    return compute


@registry.kernel("QLinearWhere", domain=MS_DOMAIN, types={1: EIGHT_BIT})
def qlinear_where(info: NodeInfo) -> Compute:
    """``where(condition, requantize(X), requantize(Y))`` into Z's scale and
    zero point, broadcasting the three."""

    def compute(
        cond: np.ndarray,
        x: np.ndarray,
        x_scale: np.ndarray,
        x_zero: np.ndarray | None,
        y: np.ndarray,
        y_scale: np.ndarray,
        y_zero: np.ndarray | None,
        z_scale: np.ndarray,
        z_zero: np.ndarray | None = None,
    ) -> tuple[np.ndarray]:
        check_8bit(info, x, "X")
        if y.dtype != x.dtype:
            raise TypeError(f"{info.describe()}: X is {x.dtype} but Y is {y.dtype}")
        sz = scalar_scale(info, z_scale, "z_scale")
        zz = scalar_zero(info, z_zero, "z_zero_point", x.dtype)
        parts = []
        for v, s, z, name in ((x, x_scale, x_zero, "x"), (y, y_scale, y_zero, "y")):
            table = lookup_table(
                x.dtype,
                scalar_scale(info, s, f"{name}_scale"),
                scalar_zero(info, z, f"{name}_zero_point", x.dtype),
                sz,
                zz,
            )
            parts.append(apply_table(v, table))
        try:
            return (np.where(cond.astype(bool), parts[0], parts[1]).astype(x.dtype),)
        except ValueError:
            raise ValueError(
                f"{info.describe()}: condition {cond.shape}, X {x.shape} and Y {y.shape} "
                "do not broadcast"
            ) from None

    return compute


@registry.kernel("QLinearConcat", domain=MS_DOMAIN, types={1: EIGHT_BIT})
def qlinear_concat(info: NodeInfo) -> Compute:
    """Concatenate quantized tensors, each requantized into Y's scale and
    zero point: inputs ``Y_scale, Y_zero_point`` then one ``(X, X_scale,
    X_zero_point)`` triple per tensor."""
    if "axis" not in info.attrs:
        raise ValueError(f"{info.describe()}: QLinearConcat requires the axis attribute")
    axis_attr = int(info.attrs["axis"])

    def compute(y_scale: np.ndarray, y_zero: np.ndarray, *rest: np.ndarray) -> tuple[np.ndarray]:
        if not rest or len(rest) % 3:
            raise ValueError(
                f"{info.describe()}: after Y_scale and Y_zero_point, the inputs must come "
                f"in (X, X_scale, X_zero_point) triples; got {len(rest)} more"
            )
        check_8bit(info, y_zero, "Y_zero_point")
        dtype = y_zero.dtype
        sy = scalar_scale(info, y_scale, "Y_scale")
        zy = scalar_zero(info, y_zero, "Y_zero_point")
        parts = []
        for i in range(0, len(rest), 3):
            x, s, z = rest[i : i + 3]
            if x.dtype != dtype:
                raise TypeError(f"{info.describe()}: input {i // 3} is {x.dtype}, Y is {dtype}")
            sx = scalar_scale(info, s, f"the scale of input {i // 3}")
            zx = scalar_zero(info, z, f"the zero point of input {i // 3}", dtype)
            if sx == sy and zx == zy:
                parts.append(x)
            else:
                parts.append(apply_table(x, lookup_table(dtype, sx, zx, sy, zy)))
        axis = normalize_axis(axis_attr, parts[0].ndim)
        try:
            return (np.concatenate(parts, axis=axis),)
        except ValueError as exc:
            raise ValueError(f"{info.describe()}: {exc}") from None

    return compute


_QTYPES = frozenset({DT.UINT8, DT.INT8, DT.UINT16, DT.INT16, DT.UINT4, DT.INT4})


@registry.kernel("QuantizeLinear", domain=MS_DOMAIN, types={0: frozenset({DT.FLOAT, DT.FLOAT16})})
def ms_quantize_linear(info: NodeInfo) -> Compute:
    """com.microsoft QuantizeLinear: ONNX's (per tensor or per ``axis``,
    default 1), for the 8-, 16- and 4-bit types onnxruntime's tool writes
    in this domain."""
    return quantize_linear(info)


@registry.kernel("DequantizeLinear", domain=MS_DOMAIN, types={0: _QTYPES | {DT.INT32}})
def ms_dequantize_linear(info: NodeInfo) -> Compute:
    """com.microsoft DequantizeLinear: ONNX's (per tensor or per ``axis``)."""
    return dequantize_linear(info)


__all__ = [
    "ms_dequantize_linear",
    "ms_quantize_linear",
    "qlinear_add",
    "qlinear_concat",
    "qlinear_leaky_relu",
    "qlinear_mul",
    "qlinear_sigmoid",
    "qlinear_softmax",
    "qlinear_where",
]
