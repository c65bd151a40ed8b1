"""Spatial sampling: GridSample and AffineGrid.

GridSample gathers, for every output point, the taps of its interpolation
stencil (1 for nearest, 2 for linear, 4 for cubic per spatial dim) with numpy
fancy indexing; only the tap combinations (at most 4**3) are looped over.
"""

from __future__ import annotations

import itertools

import numpy as np
from ep_sdk import Compute, NodeInfo, check_tensor_size

from . import registry
from ._common import FLOATS, INDEX, int_list
from ._versions import per_schema_version

_MODES = {"bilinear": "linear", "bicubic": "cubic"}
_CUBIC_A = -0.75


def _reflect(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Reflect ``x`` at the borders ``lo`` and ``hi`` until it lies between them."""
    rng = hi - lo
    if rng <= 0:
        return np.full_like(x, lo)
    below = x < lo
    dist = np.where(below, lo - x, x - hi)
    n = np.floor(dist / rng)
    r = dist - n * rng
    even = n % 2 == 0
    inside_lo = np.where(even, lo + r, hi - r)
    inside_hi = np.where(even, hi - r, lo + r)
    out = np.where(below, inside_lo, inside_hi)
    return np.where((x < lo) | (x > hi), out, x)


def _cubic_weights(t: np.ndarray) -> list[np.ndarray]:
    """Keys cubic weights (a = -0.75) of the taps at -1, 0, 1, 2 for fraction ``t``."""
    a = _CUBIC_A

    def far(d: np.ndarray) -> np.ndarray:
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    def near(d: np.ndarray) -> np.ndarray:
        return ((a + 2) * d - (a + 3)) * d * d + 1

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _taps(x: np.ndarray, mode: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """(integer index, weight) of each tap for float coordinates ``x``."""
    if mode == "nearest":
        return [(x.astype(np.int64), np.ones_like(x))]
    x0 = np.floor(x)
    t = x - x0
    base = x0.astype(np.int64)
    if mode == "linear":
        return [(base, 1 - t), (base + 1, t)]
    return [(base + k - 1, w) for k, w in enumerate(_cubic_weights(t))]


def grid_sample(
    x: np.ndarray, grid: np.ndarray, mode: str, padding: str, align: bool
) -> np.ndarray:
    """Sample ``x`` (N, C, *S) at ``grid`` (N, *O, len(S)), coordinates in [-1, 1]
    listed innermost dim first."""
    n, c = x.shape[:2]
    dims = x.shape[2:]
    nd = len(dims)
    out_sp = grid.shape[1:-1]
    work = np.float64 if x.dtype == np.float64 else np.float32
    g = grid.reshape(n, -1, nd)[..., ::-1].astype(work)
    taps = []
    for i, d in enumerate(dims):
        v: np.ndarray = g[..., i].astype(work)
        v = (v + 1) / 2 * (d - 1) if align else ((v + 1) * d - 1) / 2
        if mode == "nearest":
            v = np.rint(v)
        lo, hi = (0.0, d - 1.0) if align else (-0.5, d - 0.5)
        if padding == "border":
            v = np.where((v < lo) | (v > hi), np.clip(v, 0, d - 1), v)
        elif padding == "reflection":
            v = _reflect(v, lo, hi)
        if mode == "nearest":
            v = np.trunc(v)
        taps.append(_taps(v, mode))
    flat = x.reshape(n, c, -1).astype(work, copy=False)
    y = np.zeros((n, c, g.shape[1]), work)
    for combo in itertools.product(*taps):
        index = np.zeros(g.shape[:2], np.int64)
        weight = np.ones(g.shape[:2], work)
        valid = np.ones(g.shape[:2], bool)
        for (idx, w), d in zip(combo, dims, strict=True):
            if padding == "zeros":
                valid &= (idx >= 0) & (idx < d)
            elif padding == "reflection":
                lo, hi = (0.0, d - 1.0) if align else (-0.5, d - 0.5)
                idx = np.trunc(_reflect(idx.astype(work), lo, hi)).astype(np.int64)
            idx = np.clip(idx, 0, d - 1)
            index = index * d + idx
            weight = weight * w
        vals = np.take_along_axis(flat, index[:, None, :], axis=2)
        y += np.where(valid, weight, 0)[:, None, :] * vals
    return y.reshape(n, c, *out_sp)


@per_schema_version("GridSample", types={"T1": FLOATS, "T2": FLOATS})
def grid_sample_kernel(info: NodeInfo) -> Compute:
    """GridSample: nearest / (bi)linear / (bi)cubic, zeros / border / reflection
    padding, any number of spatial dims."""
    mode_attr = str(info.attrs.get("mode", "linear" if info.opset >= 20 else "bilinear"))
    mode = _MODES.get(mode_attr, mode_attr)
    padding = str(info.attrs.get("padding_mode", "zeros"))
    align = bool(info.attrs.get("align_corners", 0))
    if mode not in ("nearest", "linear", "cubic"):
        raise ValueError(f"{info.describe()}: unknown mode {mode_attr!r}")
    if padding not in ("zeros", "border", "reflection"):
        raise ValueError(f"{info.describe()}: unknown padding_mode {padding!r}")

    def compute(x: np.ndarray, grid: np.ndarray) -> tuple[np.ndarray]:
        if grid.shape[-1] != x.ndim - 2:
            raise ValueError(f"{info.describe()}: grid {grid.shape} does not match X {x.shape}")
        y = grid_sample(x, grid, mode, padding, align)
        return (y.astype(x.dtype, copy=False),)

    return compute


def _base_coords(length: int, align: bool, dtype: type) -> np.ndarray:
    if align:
        return np.linspace(-1, 1, length, dtype=dtype) if length > 1 else np.zeros(length, dtype)
    return ((np.arange(length, dtype=dtype) * 2 + 1) / length - 1).astype(dtype)


@registry.kernel(
    "AffineGrid", since=20, types={"T1": FLOATS, "T2": INDEX}, input_memory={1: "host"}
)
def affine_grid(info: NodeInfo) -> Compute:
    """AffineGrid: sampling grid (N, *S, nd) of ``theta`` (N, nd, nd+1) applied to
    normalized coordinates of a (N, C, *S) tensor, innermost dim first."""
    align = bool(info.attrs.get("align_corners", 0))

    def compute(theta: np.ndarray, size: np.ndarray) -> tuple[np.ndarray]:
        spatial = int_list(size)[2:]
        nd = len(spatial)
        work = np.float64 if theta.dtype == np.float64 else np.float32
        # The sizes are data: check the coordinates and the grid before allocating.
        check_tensor_size((*spatial, nd + 1), work, info.describe())
        check_tensor_size((theta.shape[0], *spatial, nd), work, info.describe())
        axes = [_base_coords(s, align, work) for s in spatial]
        mesh = np.meshgrid(*axes, indexing="ij")  # each (*S), dim order
        base = np.stack([*mesh[::-1], np.ones(spatial, work)], axis=-1).reshape(-1, nd + 1)
        grid = base @ np.swapaxes(theta.astype(work), 1, 2)  # (N, P, nd)
        return (grid.reshape(theta.shape[0], *spatial, nd).astype(theta.dtype),)

    return compute
