"""Scatter ops: ScatterElements, ScatterND, Scatter (deprecated), TensorScatter.

Each returns an updated copy of ``data``; duplicate indices with a reduction
combine through ``numpy.ufunc.at`` (unbuffered, so every update counts).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from ep_sdk import Compute, NodeInfo

from . import registry
from ._common import INDEX, normalize_axis
from ._versions import per_schema_version

_REDUCE: dict[str, Callable[..., None]] = {
    "add": np.add.at,
    "mul": np.multiply.at,
    "max": np.maximum.at,
    "min": np.minimum.at,
}


def _apply(
    out: np.ndarray, index: tuple[np.ndarray, ...], updates: np.ndarray, reduction: str
) -> None:
    """Write (or combine) ``updates`` into ``out`` at ``index``."""
    if reduction == "none":
        out[index] = updates
        return
    fn = _REDUCE.get(reduction)
    if fn is None:
        raise ValueError(f"unknown reduction {reduction!r}")
    if out.dtype == np.bool_:
        # numpy has no multiply/add for bool ufunc.at; and / or are the same thing.
        fn = {"add": np.logical_or.at, "max": np.logical_or.at}.get(reduction, np.logical_and.at)
    fn(out, index, updates)


def _wrap(indices: np.ndarray, dim: int, what: str) -> np.ndarray:
    """Indices in ``[0, dim)``, accepting negative ones; others are an error."""
    idx = indices.astype(np.int64, copy=False)
    if idx.size and (idx.min() < -dim or idx.max() >= dim):
        raise IndexError(f"{what}: indices out of range [-{dim}, {dim - 1}]")
    return np.where(idx < 0, idx + dim, idx)


def _scatter_elements(
    data: np.ndarray, indices: np.ndarray, updates: np.ndarray, axis: int, reduction: str, what: str
) -> np.ndarray:
    axis = normalize_axis(axis, data.ndim)
    out = data.copy()
    if indices.size == 0:
        return out
    grid: list[np.ndarray] = list(np.indices(indices.shape, sparse=True))
    grid[axis] = _wrap(indices, data.shape[axis], what)
    _apply(out, tuple(np.broadcast_arrays(*grid)), updates, reduction)
    return out


@registry.kernel("Scatter", since=9, until=10, types={"Tind": INDEX})
@per_schema_version("ScatterElements", types={"Tind": INDEX})
def scatter_elements(info: NodeInfo) -> Compute:
    """Copy of ``data`` with ``updates`` written along ``axis`` at ``indices``;
    ``reduction`` (16+: add, mul; 18+: max, min) combines instead of writing."""
    axis = int(info.attrs.get("axis", 0))
    reduction = info.attrs.get("reduction", "none") if info.opset >= 16 else "none"
    what = info.describe()
    return lambda data, indices, updates: (
        _scatter_elements(data, indices, updates, axis, reduction, what),
    )


@registry.kernel("Scatter", since=11, types={"Tind": INDEX})
def scatter_deprecated(info: NodeInfo) -> Compute:
    """Scatter at opset 11+ (deprecated alias of ScatterElements)."""
    return scatter_elements(info)


@per_schema_version("ScatterND")
def scatter_nd(info: NodeInfo) -> Compute:
    """Copy of ``data`` with slices ``updates[i...]`` written at the index
    tuples ``indices[i..., :]``; ``reduction`` as in ScatterElements."""
    reduction = info.attrs.get("reduction", "none") if info.opset >= 16 else "none"

    def compute(data: np.ndarray, indices: np.ndarray, updates: np.ndarray) -> tuple[np.ndarray]:
        out = data.copy()
        k = indices.shape[-1]
        if k > data.ndim:
            raise ValueError(f"{info.describe()}: index depth {k} exceeds rank {data.ndim}")
        idx = tuple(_wrap(indices[..., j], data.shape[j], info.describe()) for j in range(k))
        _apply(out, idx, updates, reduction)
        return (out,)

    return compute


@registry.kernel("TensorScatter", since=24, input_memory={2: "host"})
def tensor_scatter(info: NodeInfo) -> Compute:
    """Write ``update`` into a copy of the cache along ``axis`` at, per batch
    entry, ``write_indices[b]`` onwards (modulo the axis length in ``circular``
    mode)."""
    axis_attr = int(info.attrs.get("axis", -2))
    mode = info.attrs.get("mode", "linear")
    if mode not in ("linear", "circular"):
        raise ValueError(f"{info.describe()}: unknown mode {mode!r}")

    def compute(
        cache: np.ndarray, update: np.ndarray, write_indices: np.ndarray | None = None
    ) -> tuple[np.ndarray]:
        axis = normalize_axis(axis_attr, cache.ndim)
        if axis == 0:
            raise ValueError(f"{info.describe()}: axis must not be the batch axis")
        batch, max_len, seq = cache.shape[0], cache.shape[axis], update.shape[axis]
        start = (
            np.zeros(batch, np.int64)
            if write_indices is None
            else write_indices.astype(np.int64).reshape(-1)
        )
        pos = start[:, None] + np.arange(seq)
        if mode == "circular":
            pos %= max_len
        elif pos.size and pos.max() >= max_len:
            raise IndexError(f"{info.describe()}: writes past the cache length {max_len}")
        out = cache.copy()
        view = np.moveaxis(out, axis, 1)
        view[np.arange(batch)[:, None], pos] = np.moveaxis(update, axis, 1)
        return (out,)

    return compute
