"""The pooling window rules ortcore follows, written out once, brute force:
onnxruntime's rules (its CPU kernels, version 1.32), with the exceptions
of ``pool_geometry.DECISIONS``. ``pool_geometry`` checks this oracle
against onnxruntime wherever onnxruntime runs a geometry, and ortcore
against it everywhere, the geometries onnxruntime refuses included.

Per axis, output ``o``'s window starts at ``o * stride - pad_begin`` and
has ``kernel`` taps ``dilation`` apart; a tap is on the input when it is
in ``[0, size)``; a window's taps are the product of its axes' taps, in
row-major order.

- Output size: ``(size + pads - span) / stride + 1``, the division rounded
  toward zero (up with ``ceil_mode``, then one less if the last window
  would start in the end pads); ``SAME_*``: ``ceil(size / stride)``, the
  padding ``(out - 1) * stride + span - size`` (at least 0) split with the
  odd one at the end (``SAME_UPPER``) or the beginning.
- MaxPool: the largest tap on the input, the first of equal ones; a window
  with no tap on the input gives the lowest finite value of the type
  pooled in (float32 for float16, so -inf there) and the index of position
  (-1, ..., -1).
- AveragePool: the sum of the taps on the input over their count, or with
  ``count_include_pad`` over the count of taps before the end of the end
  pads (every tap, for opsets 7-18 with ``ceil_mode`` 0); 0 for no tap.
- LpPool: ``(sum |tap| ** p) ** (1 / p)`` over the taps on the input.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def same_pads(size: int, kernel: int, stride: int, dilation: int, upper: bool) -> tuple[int, int]:
    """(begin, end) pads of ``SAME_UPPER`` (``upper``) or ``SAME_LOWER``, by the spec."""
    span = (kernel - 1) * dilation + 1
    total = max((-(-size // stride) - 1) * stride + span - size, 0)
    begin = total // 2 if upper else total - total // 2
    return begin, total - begin


def out_size(size: int, kernel: int, stride: int, dilation: int, begin: int, end: int,
             ceil_mode: bool) -> int:  # fmt: skip
    """Output size of one axis with explicit pads (see the module docstring)."""
    full = size + begin + end - (kernel - 1) * dilation - 1
    if ceil_mode:
        o = -(-full // stride) + 1
        return o - 1 if (o - 1) * stride >= size + begin else o
    return (full // stride if full >= 0 else -(-full // stride)) + 1


def _taps(size: int, out: int, kernel: int, stride: int, dilation: int,
          begin: int) -> np.ndarray:  # fmt: skip
    """(out, kernel) input positions of each output's taps."""
    return (np.arange(out)[:, None] * stride - begin) + np.arange(kernel)[None, :] * dilation


def pool(op: str, x: np.ndarray, *, kernel: Sequence[int], strides: Sequence[int],
         dilations: Sequence[int], begin: Sequence[int], end: Sequence[int], out: Sequence[int],
         count_include_pad: bool = False, whole_kernel: bool = False, p: int = 2,
         column_major: bool = False) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """``op`` (MaxPool, AveragePool, LpPool) of ``x`` (N, C, *spatial) over
    windows of explicit pads ``begin``, ``end`` and output sizes ``out``.
    Returns the output (float64, the integer types' as float64 too) and
    MaxPool's indices (zeros for the others)."""
    spatial = x.shape[2:]
    nd = len(spatial)
    taps = [_taps(spatial[i], out[i], kernel[i], strides[i], dilations[i], begin[i])
            for i in range(nd)]  # fmt: skip
    # every window's taps, (*out, *kernel) per axis, broadcast
    grids = []
    for i in range(nd):
        shape = [1] * (2 * nd)
        shape[i], shape[nd + i] = out[i], kernel[i]
        grids.append(taps[i].reshape(shape))
    inside = np.ones((1,) * (2 * nd), bool)
    for i in range(nd):
        inside = inside & (grids[i] >= 0) & (grids[i] < spatial[i])
    inside = np.broadcast_to(inside, (*out, *kernel))
    clipped = tuple(np.clip(g, 0, spatial[i] - 1) for i, g in enumerate(grids))
    vals = x.astype(np.float64)[(Ellipsis, *clipped)]  # (N, C, *out, *kernel)
    taps_per_window = math.prod(kernel)
    vals = vals.reshape(*x.shape[:2], *out, taps_per_window)
    mask = inside.reshape(*out, taps_per_window)
    none = ~mask.any(axis=-1)
    indices = np.zeros(vals.shape[:-1], np.int64)
    if op == "MaxPool":
        first = np.where(mask, vals, -np.inf).argmax(axis=-1)  # the first of equal maxima
        y = np.take_along_axis(vals, first[..., None], -1)[..., 0]
        if x.dtype == np.float16:
            low = -np.inf
        else:
            low = np.finfo(x.dtype).min if x.dtype.kind == "f" else np.iinfo(x.dtype).min
        y = np.where(none, float(low), y)
        coords = np.unravel_index(first, kernel)  # each axis's tap number
        flat = np.zeros(first.shape, np.int64)
        axes_order = range(nd - 1, -1, -1) if column_major else range(nd)
        for i in axes_order:
            at = np.broadcast_to(taps[i].reshape([out[i] if j == i else 1 for j in range(nd)]
                                                 + [kernel[i]]), (*out, kernel[i]))  # fmt: skip
            pos = np.take_along_axis(at[None, None], coords[i][..., None], -1)[..., 0]
            pos = np.where(none, -1, pos)
            flat = flat * spatial[i] + pos
        plane = np.arange(x.shape[0] * x.shape[1]).reshape(*x.shape[:2], *[1] * nd)
        indices = flat + plane * math.prod(spatial)
        return y, indices
    if op == "LpPool":
        sums = np.where(mask, np.abs(vals) ** p, 0.0).sum(axis=-1)
        return sums ** (1.0 / p), indices
    sums = np.where(mask, vals, 0.0).sum(axis=-1)
    if count_include_pad:
        count = np.ones((), np.int64)
        for i in range(nd):
            n = kernel[i] if whole_kernel else (taps[i] < spatial[i] + end[i]).sum(axis=1)
            count = np.multiply.outer(count, np.broadcast_to(n, (out[i],)))
    else:
        count = mask.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        y = np.where(none, 0.0, sums / np.maximum(count, 1))
    return y, indices
