"""Resize with nearest, (n-)linear and cubic interpolation.

Interpolation is separable: the input is resized one axis at a time, each
with vectorized gathers and weights (no per-element loops).
"""

from __future__ import annotations

import math

import numpy as np
from ep_sdk import Compute, NodeInfo

from . import registry
from ._common import FLOATS, NUMERIC, normalize_axes

_HOST = {1: "host", 2: "host", 3: "host"}


def _source_coords(
    out_len: int, in_len: int, scale: float, mode: str, roi: tuple[float, float] | None
) -> np.ndarray:
    """Input coordinate of every output index (ONNX coordinate_transformation_mode)."""
    x = np.arange(out_len, dtype=np.float64)
    if mode == "asymmetric":
        return x / scale
    if mode == "half_pixel":
        return (x + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (x + 0.5) / scale - 0.5 if out_len > 1 else np.full(out_len, -0.5)
    if mode == "align_corners":
        return x * (in_len - 1) / (out_len - 1) if out_len > 1 else np.zeros(out_len)
    if mode == "half_pixel_symmetric":
        adjustment = out_len / (scale * in_len)
        offset = in_len / 2 * (1 - adjustment)
        return offset + (x + 0.5) / scale - 0.5
    if mode == "tf_crop_and_resize":
        lo, hi = roi if roi is not None else (0.0, 1.0)
        if out_len > 1:
            return lo * (in_len - 1) + x * (hi - lo) * (in_len - 1) / (out_len - 1)
        return np.full(out_len, (hi - lo) * (in_len - 1) / 2 + lo * (in_len - 1))
    raise ValueError(f"Resize: unknown coordinate_transformation_mode {mode!r}")


def _nearest_index(coord: np.ndarray, nearest_mode: str) -> np.ndarray:
    if nearest_mode == "round_prefer_floor":
        return np.ceil(coord - 0.5)
    if nearest_mode == "round_prefer_ceil":
        return np.floor(coord + 0.5)
    if nearest_mode == "floor":
        return np.floor(coord)
    if nearest_mode == "ceil":
        return np.ceil(coord)
    raise ValueError(f"Resize: unknown nearest_mode {nearest_mode!r}")


def _cubic_weights(t: np.ndarray, a: float) -> np.ndarray:
    """Weights of taps at offsets -1, 0, 1, 2 for fractional positions ``t``."""
    d = np.stack([t + 1, t, 1 - t, 2 - t], axis=1)
    w = np.where(
        d <= 1,
        ((a + 2) * d - (a + 3)) * d * d + 1,
        ((a * d - 5 * a) * d + 8 * a) * d - 4 * a,
    )
    return np.asarray(w)


class _Resizer:
    """The attributes of one Resize node."""

    def __init__(self, info: NodeInfo) -> None:
        a = info.attrs
        self.mode = a.get("mode", "nearest")
        if info.opset < 11:
            self.coord_mode, self.nearest_mode = "asymmetric", "floor"
        else:
            self.coord_mode = a.get("coordinate_transformation_mode", "half_pixel")
            self.nearest_mode = a.get("nearest_mode", "round_prefer_floor")
        self.cubic_a = float(a.get("cubic_coeff_a", -0.75))
        self.exclude_outside = bool(a.get("exclude_outside", 0))
        self.extrapolation = float(a.get("extrapolation_value", 0.0))
        self.policy = a.get("keep_aspect_ratio_policy", "stretch")
        self.axes = a.get("axes")
        if a.get("antialias", 0):
            raise NotImplementedError(f"{info.describe()}: antialias=1 is not supported")
        if self.mode not in ("nearest", "linear", "cubic"):
            raise ValueError(f"{info.describe()}: unknown mode {self.mode!r}")

    def __call__(
        self,
        x: np.ndarray,
        roi: np.ndarray | None,
        scales: np.ndarray | None,
        sizes: np.ndarray | None,
    ) -> np.ndarray:
        axes = normalize_axes(self.axes, x.ndim) if self.axes else tuple(range(x.ndim))
        in_sizes = [x.shape[a] for a in axes]
        if sizes is not None and sizes.size:
            out_sizes = [int(s) for s in sizes]
            factors = [o / i if i else 1.0 for o, i in zip(out_sizes, in_sizes, strict=True)]
            if self.policy != "stretch":
                pick = min if self.policy == "not_larger" else max
                f = pick(factors)
                factors = [f] * len(axes)
                out_sizes = [math.floor(i * f + 0.5) for i in in_sizes]
        elif scales is not None and scales.size:
            factors = [float(s) for s in scales]
            out_sizes = [math.floor(i * f) for i, f in zip(in_sizes, factors, strict=True)]
        else:
            raise ValueError("Resize: one of scales and sizes must be given")
        roi_pairs: list[tuple[float, float] | None] = [None] * len(axes)
        if roi is not None and roi.size and self.coord_mode == "tf_crop_and_resize":
            r = [float(v) for v in roi]
            roi_pairs = [(r[i], r[i + len(axes)]) for i in range(len(axes))]
        work = x.astype(np.float32) if x.dtype in (np.float16,) else x
        if work.dtype.kind in "iub":
            work = work.astype(np.float64)
        for axis, out_len, f, rp in zip(axes, out_sizes, factors, roi_pairs, strict=True):
            if out_len == x.shape[axis] and f == 1.0 and rp is None:
                continue
            work = self._resize_axis(work, axis, out_len, f, rp)
        if x.dtype.kind in "iu":
            info = np.iinfo(x.dtype)
            work = np.clip(np.rint(work), info.min, info.max)
        return work.astype(x.dtype, copy=False)

    def _resize_axis(
        self, x: np.ndarray, axis: int, out_len: int, scale: float, roi: tuple[float, float] | None
    ) -> np.ndarray:
        n = x.shape[axis]
        coord = _source_coords(out_len, n, scale, self.coord_mode, roi)
        shape = [1] * x.ndim
        shape[axis] = out_len
        if self.mode == "nearest":
            idx = np.clip(_nearest_index(coord, self.nearest_mode), 0, n - 1).astype(np.intp)
            out = np.take(x, idx, axis=axis)
        elif self.mode == "linear":
            c = np.clip(coord, 0, n - 1)
            i0 = np.floor(c).astype(np.intp)
            i1 = np.minimum(i0 + 1, n - 1)
            w = (c - i0).astype(x.dtype).reshape(shape)
            lo = np.take(x, i0, axis=axis)
            out = lo + (np.take(x, i1, axis=axis) - lo) * w
        else:
            base = np.floor(coord).astype(np.intp)
            weights = _cubic_weights(coord - base, self.cubic_a)
            taps = base[:, None] + np.arange(-1, 3)[None, :]
            if self.exclude_outside:
                weights = np.where((taps >= 0) & (taps < n), weights, 0.0)
                weights /= weights.sum(axis=1, keepdims=True)
            taps = np.clip(taps, 0, n - 1)
            out = sum(
                np.take(x, taps[:, k], axis=axis) * weights[:, k].astype(x.dtype).reshape(shape)
                for k in range(4)
            )
            out = np.asarray(out)
        if self.coord_mode == "tf_crop_and_resize":
            outside = ((coord < 0) | (coord > n - 1)).reshape(shape)
            out = np.where(outside, np.asarray(self.extrapolation, x.dtype), out)
        return np.asarray(out, dtype=x.dtype)


_T10 = NUMERIC


@registry.kernel("Resize", since=10, until=10, types={"T": _T10}, input_memory={1: "host"})
@registry.kernel("Resize", since=11, until=12, types={"T": _T10, "T2": FLOATS}, input_memory=_HOST)
@registry.kernel("Resize", since=13, until=17, types={"T1": _T10, "T2": FLOATS}, input_memory=_HOST)
@registry.kernel("Resize", since=18, until=18, types={"T1": _T10, "T2": FLOATS}, input_memory=_HOST)
@registry.kernel("Resize", since=19, types={"T1": _T10, "T2": FLOATS}, input_memory=_HOST)
def resize(info: NodeInfo) -> Compute:
    """Resize: opset 10 takes (X, scales) with asymmetric coordinates and floor
    rounding; 11+ takes (X, roi, scales, sizes) and the coordinate and
    rounding attributes; 18+ adds ``axes`` and ``keep_aspect_ratio_policy``."""
    resizer = _Resizer(info)
    if info.opset < 11:
        return lambda x, scales: (resizer(x, None, scales, None),)

    def compute(
        x: np.ndarray,
        roi: np.ndarray | None = None,
        scales: np.ndarray | None = None,
        sizes: np.ndarray | None = None,
    ) -> tuple[np.ndarray]:
        return (resizer(x, roi, scales, sizes),)

    return compute
