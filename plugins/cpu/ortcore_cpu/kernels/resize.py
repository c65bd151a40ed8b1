"""Resize (and the older Upsample) with nearest, (n-)linear and cubic
interpolation, optionally antialiased when downsampling.

Interpolation is separable: the input is resized one axis at a time, each
with vectorized gathers and a (output, taps) weight matrix (no per-element
loops). Float32/float64 NCHW inputs resized on H and W only run in Cython
(both axes in one pass, any tap count).
"""

from __future__ import annotations

import math

import numpy as np
from ep_sdk import Compute, NodeInfo, check_tensor_size

from .._ext import resize as ext
from ._common import FLOATS, NUMERIC, normalize_axes, thread_count, threads_for
from ._versions import per_schema_version

_HOST = {1: "host", 2: "host", 3: "host"}


def _source_coords(
    out_len: int, in_len: int, scale: float, mode: str, roi: tuple[float, float] | None
) -> np.ndarray:
    """Input coordinate of every output index (ONNX coordinate_transformation_mode).

    As onnx's reference, the modes that divide by the output length use the
    unrounded length ``scale * in_len``.
    """
    x = np.arange(out_len, dtype=np.float64)
    width = scale * in_len
    if mode == "asymmetric":
        return x / scale
    if mode == "half_pixel":
        return (x + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (x + 0.5) / scale - 0.5 if width != 1 else np.full(out_len, -0.5)
    if mode == "align_corners":
        return x * (in_len - 1) / (width - 1) if width != 1 else np.zeros(out_len)
    if mode == "half_pixel_symmetric":
        adjustment = out_len / width
        offset = in_len / 2 * (1 - adjustment)
        return offset + (x + 0.5) / scale - 0.5
    if mode == "tf_crop_and_resize":
        lo, hi = roi if roi is not None else (0.0, 1.0)
        if width != 1:
            return lo * (in_len - 1) + x * (hi - lo) * (in_len - 1) / (width - 1)
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


def _filter_taps(
    coord: np.ndarray, mode: str, scale: float, cubic_a: float, antialias: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Tap indices (unclamped) and normalized weights, both (out_len, n), of
    the linear or cubic filter at each source coordinate.

    With ``antialias`` and ``scale < 1`` the filter is stretched by 1 / scale
    (as onnx's reference, after Pillow); otherwise it is the plain 2-tap
    linear or 4-tap cubic kernel. A coordinate on an integer uses the taps
    to its left (fraction 1), as the reference does.
    """
    s = min(scale, 1.0) if antialias else 1.0
    support = 1 if mode == "linear" else 2
    start = math.floor(-support / s) + 1
    offsets = start + np.arange(2 - 2 * start)
    frac = coord - np.floor(coord)
    frac = np.where(frac == 0, 1.0, frac)
    base = np.rint(coord - frac).astype(np.intp)
    t = np.abs((offsets[None, :] - frac[:, None]) * s)
    if mode == "linear":
        w = np.clip(1 - t, 0, 1)
    else:
        a = cubic_a
        w = np.where(
            t <= 1,
            ((a + 2) * t - (a + 3)) * t * t + 1,
            np.where(t < 2, ((a * t - 5 * a) * t + 8 * a) * t - 4 * a, 0.0),
        )
    w = w / w.sum(axis=1, keepdims=True)
    return base[:, None] + offsets[None, :], w


class _Resizer:
    """The attributes of one Resize node."""

    def __init__(self, info: NodeInfo) -> None:
        self.threads = thread_count(info)
        self.where = info.describe()
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
        self.antialias = bool(a.get("antialias", 0))
        if self.mode in ("bilinear", "trilinear"):  # Upsample's names
            self.mode = "linear"
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
            if len(factors) != len(axes) or not all(math.isfinite(f) and f > 0 for f in factors):
                raise ValueError(
                    f"{self.where}: scales {factors} must hold one finite value > 0 per "
                    f"resized axis ({len(axes)})"
                )
            out_sizes = [math.floor(i * f) for i, f in zip(in_sizes, factors, strict=True)]
        else:
            raise ValueError("Resize: one of scales and sizes must be given")
        if len(out_sizes) != len(axes) or any(o < 0 for o in out_sizes):
            raise ValueError(
                f"{self.where}: sizes {out_sizes} must hold one value >= 0 per resized axis "
                f"({len(axes)})"
            )
        out_shape = list(x.shape)
        for a, o in zip(axes, out_sizes, strict=True):
            out_shape[a] = o
        check_tensor_size(out_shape, x.dtype, self.where)
        roi_pairs: list[tuple[float, float] | None] = [None] * len(axes)
        if roi is not None and roi.size and self.coord_mode == "tf_crop_and_resize":
            r = [float(v) for v in roi]
            roi_pairs = [(r[i], r[i + len(axes)]) for i in range(len(axes))]
        fast = self._resize_2d(x, axes, out_sizes, factors)
        if fast is not None:
            return fast
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

    def _taps(self, coord: np.ndarray, n: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
        """Clamped source indices and weights, both (out_len, taps), of an
        axis of length ``n`` (one tap of weight 1 per output for nearest)."""
        if self.mode == "nearest":
            idx = np.clip(_nearest_index(coord, self.nearest_mode), 0, n - 1).astype(np.intp)
            return idx[:, None], np.ones((len(idx), 1))
        taps, weights = _filter_taps(coord, self.mode, scale, self.cubic_a, self.antialias)
        if self.exclude_outside:
            weights = np.where((taps >= 0) & (taps < n), weights, 0.0)
            total = weights.sum(axis=1, keepdims=True)
            weights /= np.where(total == 0, 1.0, total)
        return np.clip(taps, 0, n - 1), weights

    def _resize_2d(
        self, x: np.ndarray, axes: tuple[int, ...], out_sizes: list[int], factors: list[float]
    ) -> np.ndarray | None:
        """Resize of a float32/float64 4-D ``x`` on its last two axes only, in
        Cython; None for other cases."""
        if x.ndim != 4 or x.dtype not in (np.float32, np.float64) or x.size == 0:
            return None
        if self.coord_mode == "tf_crop_and_resize":
            return None
        plan = {a: (n, 1.0) for a, n in enumerate(x.shape)}
        plan.update({a: (o, f) for a, o, f in zip(axes, out_sizes, factors, strict=True)})
        if any(plan[a] != (x.shape[a], 1.0) for a in (0, 1)):
            return None
        taps = []
        for a in (2, 3):
            out_len, f = plan[a]
            n = x.shape[a]
            if out_len == n and f == 1.0:
                idx, w = np.arange(n, dtype=np.intp)[:, None], np.ones((n, 1))
            else:
                idx, w = self._taps(_source_coords(out_len, n, f, self.coord_mode, None), n, f)
            taps.append((np.ascontiguousarray(idx, np.intp), np.ascontiguousarray(w, x.dtype)))
        (ty, wy), (tx, wx) = taps
        out = np.empty((*x.shape[:2], ty.shape[0], tx.shape[0]), x.dtype)
        if out.size == 0:
            return out
        planes = x.shape[0] * x.shape[1]
        src = np.ascontiguousarray(x).reshape(planes, *x.shape[2:])
        dst = out.reshape(planes, *out.shape[2:])
        nthreads = threads_for(out.size, self.threads)
        if self.mode == "nearest":
            ext.resize_nearest(src, ty[:, 0].copy(), tx[:, 0].copy(), dst, nthreads)
        else:
            ext.resize_taps(src, ty, wy, tx, wx, dst, nthreads)
        return out

    def _resize_axis(
        self, x: np.ndarray, axis: int, out_len: int, scale: float, roi: tuple[float, float] | None
    ) -> np.ndarray:
        n = x.shape[axis]
        coord = _source_coords(out_len, n, scale, self.coord_mode, roi)
        shape = [1] * x.ndim
        shape[axis] = out_len
        if self.mode == "nearest":
            out = np.take(x, self._taps(coord, n, scale)[0][:, 0], axis=axis)
        else:
            taps, weights = self._taps(coord, n, scale)
            out = np.zeros((*x.shape[:axis], out_len, *x.shape[axis + 1 :]), x.dtype)
            for k in range(taps.shape[1]):
                w = weights[:, k].astype(x.dtype).reshape(shape)
                out += np.take(x, taps[:, k], axis=axis) * w
        if self.coord_mode == "tf_crop_and_resize":
            outside = ((coord < 0) | (coord > n - 1)).reshape(shape)
            out = np.where(outside, np.asarray(self.extrapolation, x.dtype), out)
        return np.asarray(out, dtype=x.dtype)


_T10 = NUMERIC


@per_schema_version("Resize", until=10, types={"T": _T10}, input_memory=_HOST)
@per_schema_version(
    "Resize", since=11, until=12, types={"T": _T10, "T2": FLOATS}, input_memory=_HOST
)
@per_schema_version("Resize", since=13, types={"T1": _T10, "T2": FLOATS}, input_memory=_HOST)
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


@per_schema_version("Upsample", types={"T": NUMERIC}, input_memory={1: "host"})
def upsample(info: NodeInfo) -> Compute:
    """Upsample (deprecated in 10): Resize-10 semantics (asymmetric
    coordinates, nearest rounds down). Scales come from ``height_scale`` /
    ``width_scale`` (opset 1, NCHW), the ``scales`` attribute (7-8) or the
    ``scales`` input (9+)."""
    resizer = _Resizer(info)
    if info.opset >= 9:
        return lambda x, scales: (resizer(x, None, scales, None),)
    if info.opset >= 7:
        fixed = np.asarray(info.attrs["scales"], dtype=np.float32)
    else:
        hw = [float(info.attrs["height_scale"]), float(info.attrs["width_scale"])]
        fixed = np.asarray([1.0, 1.0, *hw], dtype=np.float32)
    return lambda x: (resizer(x, None, fixed, None),)
