"""Quantized pooling of onnxruntime's contrib domain: QLinearGlobalAveragePool
and QLinearAveragePool, both NCHW or (``channels_last``) NHWC.

The global pool sums in integers, removes the input zero point and requantizes
by ``x_scale / (y_scale * spatial size)`` (onnxruntime's order); the windowed
pool averages the dequantized values over AveragePool's windows
(``count_include_pad``, ``ceil_mode``, pads, ``auto_pad``) and quantizes the
averages.
"""

from __future__ import annotations

import math

import numpy as np
from ep_sdk import Compute, NodeInfo

from .. import registry
from .._qgemm import requantize

# pool's window helpers: the same geometry (pads, auto_pad, ceil_mode) as AveragePool
from .._window import check_window_attrs
from ..contrib import MS_DOMAIN
from ..pool import _counts, _divisor_ends, _numpy_windows, pool_windows
from ._params import EIGHT_BIT, saturate, unary_params


def _channels_first(x: np.ndarray, last: bool) -> np.ndarray:
    return np.moveaxis(x, -1, 1) if last and x.ndim >= 3 else x


def _channels_back(y: np.ndarray, last: bool) -> np.ndarray:
    return np.moveaxis(y, 1, -1) if last and y.ndim >= 3 else y


@registry.kernel("QLinearGlobalAveragePool", domain=MS_DOMAIN, types={0: EIGHT_BIT})
def qlinear_global_average_pool(info: NodeInfo) -> Compute:
    """Mean over the spatial positions of each channel: ``(N, C, 1, ...)``,
    or ``(N, 1, ..., C)`` with ``channels_last``."""
    last = bool(info.attrs.get("channels_last", 0))

    def compute(
        x: np.ndarray,
        x_scale: np.ndarray,
        x_zero: np.ndarray | None,
        y_scale: np.ndarray,
        y_zero: np.ndarray | None = None,
    ) -> tuple[np.ndarray]:
        sx, zx, sy, zy = unary_params(info, x, (x_scale, x_zero, y_scale, y_zero))
        if x.ndim < 3:
            raise ValueError(f"{info.describe()}: X must have 3 dimensions or more, got {x.shape}")
        xc = _channels_first(x, last)
        size = math.prod(xc.shape[2:])
        if size == 0:
            raise ValueError(f"{info.describe()}: X has no spatial positions ({x.shape})")
        acc = xc.reshape(*xc.shape[:2], size).sum(axis=-1, dtype=np.int64) - zx * size
        mult = np.float32(sx / (sy * np.float32(size)))
        y = requantize(acc.astype(np.int32), float(mult), zy, x.dtype)
        y = y.reshape(*xc.shape[:2], *([1] * (xc.ndim - 2)))
        return (_channels_back(y, last),)

    return compute


@registry.kernel("QLinearAveragePool", domain=MS_DOMAIN, types={0: EIGHT_BIT})
def qlinear_average_pool(info: NodeInfo) -> Compute:
    """AveragePool of the dequantized input (AveragePool's attributes, plus
    ``channels_last``), quantized as onnxruntime does: ``rint(mean / y_scale
    + y_zero_point)``. With ``count_include_pad`` every window divides by the
    whole kernel size, even one that ``ceil_mode`` lets run past the end pads
    (onnxruntime's quantized kernel; its float AveragePool of opset 19 stops
    at the pads)."""
    check_window_attrs(info.attrs, kernel_required=True)
    if info.attrs.get("dilations") and any(d != 1 for d in info.attrs["dilations"]):
        raise ValueError(f"{info.describe()}: QLinearAveragePool has no dilations")
    last = bool(info.attrs.get("channels_last", 0))
    include_pad = bool(info.attrs.get("count_include_pad", 0))
    window_for = pool_windows(info)

    def compute(
        x: np.ndarray,
        x_scale: np.ndarray,
        x_zero: np.ndarray | None,
        y_scale: np.ndarray,
        y_zero: np.ndarray | None = None,
    ) -> tuple[np.ndarray]:
        sx, zx, sy, zy = unary_params(info, x, (x_scale, x_zero, y_scale, y_zero))
        if x.ndim < 3:
            raise ValueError(f"{info.describe()}: X must have 3 dimensions or more, got {x.shape}")
        xc = _channels_first(x, last)
        spatial = tuple(xc.shape[2:])
        win = window_for(spatial)
        xf = (xc.astype(np.float32) - np.float32(zx)) * sx
        sums = _numpy_windows(xf, win, 0.0).sum(axis=2, dtype=np.float32)
        count = _counts(spatial, win, _divisor_ends(win, include_pad), include_pad)
        mean = sums / np.maximum(count, 1).astype(np.float32)
        y = saturate(mean / sy + np.float32(zy), x.dtype)
        return (np.ascontiguousarray(_channels_back(y, last)),)

    return compute


__all__ = ["qlinear_average_pool", "qlinear_global_average_pool"]
