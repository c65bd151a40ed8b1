"""Indexing and slicing: Gather, GatherElements, GatherND, Compress, Slice,
Split, Pad, TopK.

Data-movement kernels accept every element type (no ``T`` constraint).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from ep_sdk import Compute, NodeInfo, check_tensor_size

from .._ext import movement
from ._common import (
    ALL_STR,
    BOOL,
    INDEX,
    NUMERIC,
    int_list,
    normalize_axis,
    scalar,
    thread_count,
    threads_for,
)
from ._versions import per_schema_version

_MIN_BLOCK = 16
"""Smallest contiguous block (bytes) the Cython Gather copies; below it numpy's
take is faster."""


def _gather_fast(x: np.ndarray, indices: np.ndarray, axis: int, threads: int) -> np.ndarray | None:
    """Gather of whole contiguous blocks in Cython (indices validated, negative
    ones wrapped); None when not applicable (object dtype, small blocks).

    Raises:
        IndexError: an index out of range.
    """
    inner = math.prod(x.shape[axis + 1 :]) * x.itemsize
    if x.dtype.hasobject or inner < _MIN_BLOCK or indices.dtype not in (np.int32, np.int64):
        return None
    out = np.empty((*x.shape[:axis], *indices.shape, *x.shape[axis + 1 :]), x.dtype)
    src = np.ascontiguousarray(x).reshape(-1).view(np.uint8)
    idx = np.ascontiguousarray(indices).reshape(-1)
    outer, n = math.prod(x.shape[:axis]), x.shape[axis]
    nthreads = threads_for(out.size // 8, threads)  # memory-bound: 8x the grain
    if not movement.gather(src, idx, out.reshape(-1).view(np.uint8), outer, n, inner, nthreads):
        raise IndexError(f"indices out of range [-{n}, {n - 1}]")
    return out


@per_schema_version("Gather", types={"Tind": INDEX})
def gather(info: NodeInfo) -> Compute:
    """Take entries along ``axis`` at the indices (negative ones count from the end)."""
    axis_attr = int(info.attrs.get("axis", 0))
    threads = thread_count(info)

    def compute(x: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray]:
        axis = normalize_axis(axis_attr, x.ndim)
        try:
            fast = _gather_fast(x, indices, axis, threads)
        except IndexError as e:
            raise IndexError(f"{info.describe()}: {e}") from None
        if fast is not None:
            return (fast,)
        n = x.shape[axis]
        if indices.size and (indices.min() < -n or indices.max() >= n):
            raise IndexError(f"{info.describe()}: indices out of range [-{n}, {n - 1}]")
        return (np.take(x, indices.astype(np.int64, copy=False), axis=axis),)

    return compute


def _wrap(indices: np.ndarray, dim: int | np.ndarray, what: str) -> np.ndarray:
    """Indices in ``[0, dim)``, accepting negative ones; others are an error."""
    idx = indices.astype(np.int64, copy=False)
    bad = (idx < -dim) | (idx >= dim)
    if np.any(bad):
        raise IndexError(f"{what}: indices out of range")
    return np.where(idx < 0, idx + dim, idx)


@per_schema_version("GatherElements", types={"Tind": INDEX})
def gather_elements(info: NodeInfo) -> Compute:
    """``out[i][j][k] = x[idx[i][j][k]][j][k]`` for ``axis=0`` (and so on)."""
    axis_attr = int(info.attrs.get("axis", 0))

    def compute(x: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray]:
        axis = normalize_axis(axis_attr, x.ndim)
        idx = _wrap(indices, x.shape[axis], info.describe())
        return (np.take_along_axis(x, idx, axis=axis),)

    return compute


@per_schema_version("GatherND", until=11, types={"T": ALL_STR})
@per_schema_version("GatherND", since=12)
def gather_nd(info: NodeInfo) -> Compute:
    """Gather slices of ``x`` at the index tuples in the last axis of
    ``indices``; the first ``batch_dims`` (12+) axes are shared batch axes."""
    b = int(info.attrs.get("batch_dims", 0)) if info.opset >= 12 else 0

    def compute(x: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray]:
        k = indices.shape[-1]
        if b + k > x.ndim:
            raise ValueError(f"{info.describe()}: index depth {k} too large for rank {x.ndim}")
        batch = math.prod(x.shape[:b])
        xb = x.reshape(batch, *x.shape[b:])
        dims = np.array(x.shape[b : b + k], dtype=np.int64)
        idx = _wrap(indices.reshape(batch, -1, k), dims, info.describe())
        picked = xb[(np.arange(batch)[:, None], *np.moveaxis(idx, 2, 0))]
        return (picked.reshape(*indices.shape[:-1], *x.shape[b + k :]),)

    return compute


@per_schema_version("Compress", types={"T1": BOOL})
def compress(info: NodeInfo) -> Compute:
    """Entries along ``axis`` (of the flattened input if none) whose condition
    is true; a shorter condition selects from the leading entries only."""
    axis_attr = info.attrs.get("axis")

    def compute(x: np.ndarray, condition: np.ndarray) -> tuple[np.ndarray]:
        cond = condition.reshape(-1)
        if axis_attr is None:
            return (np.compress(cond, x.reshape(-1)),)
        axis = normalize_axis(int(axis_attr), x.ndim)
        if cond.size > x.shape[axis]:
            raise ValueError(f"{info.describe()}: condition longer than axis {axis}")
        return (np.compress(cond, x, axis=axis),)

    return compute


def _slice(
    x: np.ndarray,
    starts: list[int],
    ends: list[int],
    axes: list[int] | None,
    steps: list[int] | None,
) -> np.ndarray:
    axes = list(range(len(starts))) if not axes else [normalize_axis(a, x.ndim) for a in axes]
    steps = steps or [1] * len(starts)
    index: list[slice] = [slice(None)] * x.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        if step == 0:
            raise ValueError("Slice: steps must not be 0")
        dim = x.shape[axis]
        start = start + dim if start < 0 else start
        end = end + dim if end < 0 else end
        if step > 0:
            start, end = min(max(start, 0), dim), min(max(end, 0), dim)
            index[axis] = slice(start, end, step)
        else:
            start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
            index[axis] = slice(start, None if end < 0 else end, step)
    return x[tuple(index)]


_SLICE_HOST = {1: "host", 2: "host", 3: "host", 4: "host"}
"""``starts``, ``ends``, ``axes`` and ``steps``: inputs from opset 10."""


@per_schema_version("Slice", until=9)
@per_schema_version("Slice", since=10, types={"Tind": INDEX}, input_memory=_SLICE_HOST)
def slice_(info: NodeInfo) -> Compute:
    """Slice: ``starts``/``ends``/``axes`` attributes before opset 10, inputs
    (plus ``steps``) from 10; out-of-range bounds are clamped."""
    if info.opset < 10:
        starts = list(info.attrs["starts"])
        ends = list(info.attrs["ends"])
        axes = info.attrs.get("axes")
        return lambda x: (_slice(x, starts, ends, list(axes) if axes else None, None),)

    def compute(
        x: np.ndarray,
        starts: np.ndarray,
        ends: np.ndarray,
        axes: np.ndarray | None = None,
        steps: np.ndarray | None = None,
    ) -> tuple[np.ndarray]:
        ax = int_list(axes) if axes is not None else None
        st = int_list(steps) if steps is not None else None
        return (_slice(x, int_list(starts), int_list(ends), ax, st),)

    return compute


def _split_sizes(
    dim: int, n_out: int, split: list[int] | None, num_outputs: int | None
) -> list[int]:
    if split:
        if sum(split) != dim:
            raise ValueError(f"Split: sizes {split} do not add up to {dim}")
        return split
    if num_outputs:
        chunk = math.ceil(dim / num_outputs)
        return [min(chunk, max(dim - i * chunk, 0)) for i in range(num_outputs)]
    if dim % n_out:
        raise ValueError(f"Split: dim {dim} is not divisible into {n_out} outputs")
    return [dim // n_out] * n_out


def _split(x: np.ndarray, axis: int, sizes: list[int]) -> tuple[np.ndarray, ...]:
    bounds = np.cumsum([0, *sizes])
    index: list[slice] = [slice(None)] * x.ndim
    outs = []
    for lo, hi in itertools.pairwise(bounds):
        index[axis] = slice(int(lo), int(hi))
        outs.append(x[tuple(index)])
    return tuple(outs)


@per_schema_version("Split", input_memory={1: "host"})
def split(info: NodeInfo) -> Compute:
    """Split along ``axis``: sizes from the ``split`` attribute (before 13) or
    input (from 13; opset 1 takes either), else equal parts; ``num_outputs``
    (18+) allows a smaller last part."""
    axis_attr = int(info.attrs.get("axis", 0))
    n_out = info.num_outputs
    num_outputs = info.attrs.get("num_outputs") if info.opset >= 18 else None
    split_attr = list(info.attrs.get("split") or []) if info.opset < 13 else []

    def compute(x: np.ndarray, split_in: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
        axis = normalize_axis(axis_attr, x.ndim)
        sizes = split_attr if split_attr else int_list(split_in)
        return _split(x, axis, _split_sizes(x.shape[axis], n_out, sizes, num_outputs))

    return compute


_PAD_HOST = {1: "host", 2: "host", 3: "host"}
"""``pads``, ``constant_value`` (11+) and ``axes`` (18+)."""
_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "edge", "wrap": "wrap"}


def _pad(
    x: np.ndarray, pads: list[int], mode: str, value: object, axes: list[int] | None
) -> np.ndarray:
    axes = list(range(x.ndim)) if axes is None else [normalize_axis(a, x.ndim) for a in axes]
    n = len(axes)
    if len(pads) != 2 * n:
        raise ValueError(f"Pad: expected {2 * n} pads, got {len(pads)}")
    before, after = [0] * x.ndim, [0] * x.ndim
    for i, a in enumerate(axes):
        before[a], after[a] = pads[i], pads[i + n]
    for a, (b, e, d) in enumerate(zip(before, after, x.shape, strict=True)):
        if d + b + e < 0 or -b > d or -e > d:
            raise ValueError(
                f"Pad: pads {b}, {e} on axis {a} crop more than its {d} elements "
                f"(output size {d + b + e})"
            )
    check_tensor_size(
        [d + b + e for b, e, d in zip(before, after, x.shape, strict=True)], x.dtype, "Pad"
    )
    crop = tuple(
        slice(-b if b < 0 else 0, d + e if e < 0 else d)
        for b, e, d in zip(before, after, x.shape, strict=True)
    )
    x = x[crop]
    widths = [(max(b, 0), max(e, 0)) for b, e in zip(before, after, strict=True)]
    if mode not in _PAD_MODES:
        raise ValueError(f"Pad: unknown mode {mode!r}")
    if mode == "constant":
        return np.pad(x, widths, mode="constant", constant_values=value)  # type: ignore[call-overload]
    return np.pad(x, widths, mode=_PAD_MODES[mode])  # type: ignore[call-overload]


@per_schema_version("Pad", until=12, types={"T": NUMERIC}, input_memory=_PAD_HOST)
@per_schema_version("Pad", since=13, input_memory=_PAD_HOST)
def pad(info: NodeInfo) -> Compute:
    """Pad (negative pads crop) with mode constant, reflect, edge or (19+) wrap.

    Pads (``paddings`` at opset 1) and value are attributes before opset 11
    and inputs from 11; an
    ``axes`` input selects the padded axes from 18.
    """
    mode = info.attrs.get("mode", "constant")
    if info.opset < 11:
        pads = [int(p) for p in info.attrs["pads" if info.opset > 1 else "paddings"]]
        value = float(info.attrs.get("value", 0.0))
        return lambda x: (_pad(x, pads, mode, np.asarray(value).astype(x.dtype), None),)

    def compute(
        x: np.ndarray,
        pads_in: np.ndarray,
        value: np.ndarray | None = None,
        axes: np.ndarray | None = None,
    ) -> tuple[np.ndarray]:
        fill = scalar(value) if value is not None and np.asarray(value).size else 0
        ax = int_list(axes) if axes is not None else None
        return (_pad(x, int_list(pads_in), mode, np.asarray(fill).astype(x.dtype), ax),)

    return compute


def _order_key(x: np.ndarray, largest: bool) -> np.ndarray:
    """A key whose ascending stable sort puts the wanted elements first,
    ties kept in index order."""
    if not largest:
        return x
    if x.dtype.kind in "iub":
        return ~x
    return -x


@per_schema_version("TopK", types={"T": NUMERIC}, input_memory={1: "host"})
def topk(info: NodeInfo) -> Compute:
    """The k largest (or, from opset 11, smallest) entries along ``axis`` and
    their int64 indices; ties go to the lower index. ``k`` is an attribute
    before opset 10 and an input from 10."""
    axis_attr = int(info.attrs.get("axis", -1))
    largest = bool(info.attrs.get("largest", 1))
    k_attr = info.attrs.get("k") if info.opset < 10 else None

    def compute(x: np.ndarray, k_in: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        axis = normalize_axis(axis_attr, x.ndim)
        k = int(k_attr) if k_attr is not None else int(scalar(k_in))
        if not 0 <= k <= x.shape[axis]:
            raise ValueError(f"{info.describe()}: k={k} out of range for dim {x.shape[axis]}")
        order = np.argsort(_order_key(x, largest), axis=axis, kind="stable")
        idx = np.take(order, np.arange(k), axis=axis)
        return np.take_along_axis(x, idx, axis=axis), idx.astype(np.int64)

    return compute
