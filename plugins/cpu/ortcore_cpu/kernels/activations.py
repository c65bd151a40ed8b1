"""Activation functions: Celu, ThresholdedRelu, Shrink, Softsign, Swish,
HardSwish, Mish, PRelu, Hardmax. Each keeps its input's dtype. Float32 runs
in Cython (:func:`~.unary.activation_f32`) but for PRelu and Hardmax."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from ep_sdk import Compute, NodeInfo

from ._common import normalize_axis
from ._paths import NATIVE, NUMPY, float32_path
from ._versions import by_schema
from .unary import Act, computes_in_float32, native_activation


@by_schema("Celu")
@float32_path(NATIVE)
def celu(info: NodeInfo) -> Compute:
    """Celu: max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    alpha = float(info.attrs.get("alpha", 1.0))
    return native_activation(
        info, Act.CELU,
        lambda x: np.maximum(x, 0) + np.minimum(0, alpha * np.expm1(x / np.asarray(alpha, x.dtype))),
        alpha,
    )  # fmt: skip


@by_schema("ThresholdedRelu")
@float32_path(NATIVE)
def thresholded_relu(info: NodeInfo) -> Compute:
    """ThresholdedRelu: x where x > alpha, else 0."""
    alpha = float(info.attrs.get("alpha", 1.0))
    return native_activation(
        info, Act.THRESHOLDED_RELU, lambda x: np.where(x > alpha, x, np.zeros((), x.dtype)), alpha
    )


@by_schema("Shrink")
@float32_path(NATIVE)
def shrink(info: NodeInfo) -> Compute:
    """Shrink: x + bias below -lambd, x - bias above lambd, else 0."""
    lambd = float(info.attrs.get("lambd", 0.5))
    bias = float(info.attrs.get("bias", 0.0))
    return native_activation(
        info, Act.SHRINK,
        lambda x: np.where(x < -lambd, x + bias, np.where(x > lambd, x - bias, 0)), lambd, bias,
    )  # fmt: skip


@by_schema("Softsign")
@float32_path(NATIVE)
def softsign(info: NodeInfo) -> Compute:
    """Softsign: x / (1 + |x|)."""
    return native_activation(info, Act.SOFTSIGN, lambda x: x / (1 + np.abs(x)))


def swish_numpy(alpha: float) -> Callable[[np.ndarray], np.ndarray]:
    """``x * sigmoid(alpha * x)`` in numpy."""
    return lambda x: x / (1 + np.exp(-alpha * x))


@by_schema("Swish")
@float32_path(NATIVE)
def swish(info: NodeInfo) -> Compute:
    """Swish: x * sigmoid(alpha * x) (SiLU at alpha 1, QuickGelu at 1.702)."""
    alpha = float(info.attrs.get("alpha", 1.0))
    return native_activation(info, Act.SWISH, swish_numpy(alpha), alpha)


@by_schema("HardSwish")
@float32_path(NATIVE)
def hard_swish(info: NodeInfo) -> Compute:
    """HardSwish: x * clip(x / 6 + 0.5, 0, 1)."""
    return native_activation(info, Act.HARD_SWISH, lambda x: x * np.clip(x / 6 + 0.5, 0, 1))


@by_schema("Mish")
@float32_path(NATIVE)
def mish(info: NodeInfo) -> Compute:
    """Mish: x * tanh(softplus(x))."""
    return native_activation(
        info, Act.MISH, lambda x: x * np.tanh(np.logaddexp(np.zeros((), x.dtype), x))
    )


def _slope_for(x: np.ndarray, slope: np.ndarray) -> np.ndarray:
    """Align ``slope`` with ``x``: numpy broadcasting, else (older models) a
    1-D slope applies along the channel axis 1 or the one axis of its length."""
    try:
        np.broadcast_shapes(x.shape, slope.shape)
        return slope
    except ValueError:
        pass
    if slope.ndim == 1 and x.ndim >= 2:
        n = slope.shape[0]
        axes = [1] if x.shape[1] == n else [i for i, d in enumerate(x.shape) if d == n]
        if len(axes) == 1:
            shape = [1] * x.ndim
            shape[axes[0]] = n
            return slope.reshape(shape)
    raise ValueError(f"PRelu slope of shape {slope.shape} does not broadcast to {x.shape}")


@by_schema("PRelu")
@float32_path(NUMPY)
def prelu(info: NodeInfo) -> Compute:
    """PRelu: x where x >= 0, else slope * x (slope broadcasts to x)."""

    def compute(x: np.ndarray, slope: np.ndarray) -> tuple[np.ndarray]:
        s = _slope_for(x, slope)
        if computes_in_float32(x.dtype):
            w, s = x.astype(np.float32), s.astype(np.float32)
            return (np.where(w > 0, w, w * s).astype(x.dtype),)
        with np.errstate(over="ignore"):
            out = np.where(x > 0, x, x * s)
        return (out.astype(x.dtype, copy=False),)

    return compute


@by_schema("Hardmax")
def hardmax(info: NodeInfo) -> Compute:
    """Hardmax: 1 at the first maximum along ``axis``, else 0. Before opset
    13 the input is viewed as 2-D, split before ``axis``."""
    axis = int(info.attrs.get("axis", -1 if info.opset >= 13 else 1))
    coerce = info.opset < 13

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        a = normalize_axis(axis, x.ndim)
        if x.size == 0:
            return (np.zeros(x.shape, x.dtype),)
        work = x.reshape(int(np.prod(x.shape[:a], dtype=np.int64)), -1) if coerce else x
        a = 1 if coerce else a
        if computes_in_float32(work.dtype):
            work = work.astype(np.float32)
        idx = np.expand_dims(np.argmax(work, axis=a), a)
        out = np.zeros(work.shape, x.dtype)
        np.put_along_axis(out, idx, np.ones((), x.dtype), axis=a)
        return (out.reshape(x.shape),)

    return compute


__all__ = [
    "celu",
    "hard_swish",
    "hardmax",
    "mish",
    "prelu",
    "shrink",
    "softsign",
    "swish",
    "swish_numpy",
    "thresholded_relu",
]
