"""Shape and data-movement ops: Reshape, Flatten, Squeeze, Unsqueeze,
Transpose, Concat (and the Concat of GrowingConcat links, :func:`grow_concat`),
Shape, Size, Identity, Dropout, Expand, Tile.
(Cast lives in ``casting``.)

Reshape-like ops return views of their input (kernels never write into
their inputs); Transpose returns a contiguous copy. Data-movement kernels
accept every element type (no ``T`` constraint).
"""

from __future__ import annotations

import math
import threading

import numpy as np
from ep_sdk import Compute, NodeInfo, check_tensor_size

from .._ext import movement
from ._common import (
    int_list,
    normalize_axes,
    normalize_axis,
    thread_count,
    threads_for,
)
from ._versions import per_schema_version


def _reshape(x: np.ndarray, shape: list[int], allowzero: bool) -> np.ndarray:
    if not allowzero:
        shape = [x.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return x.reshape(shape)


@per_schema_version("Reshape", input_memory={1: "host"})
def reshape(info: NodeInfo) -> Compute:
    """Reshape to the shape input (attribute before opset 5); 0 copies the
    input dim unless ``allowzero=1`` (14+)."""
    allowzero = info.opset >= 14 and bool(info.attrs.get("allowzero", 0))
    if info.opset < 5:
        target = [int(d) for d in info.attrs["shape"]]
        return lambda x: (_reshape(x, target, False),)
    return lambda x, shape: (_reshape(x, int_list(shape), allowzero),)


@per_schema_version("Flatten")
def flatten(info: NodeInfo) -> Compute:
    """Flatten to 2-D at ``axis`` (negative axes from opset 11)."""
    axis_attr = int(info.attrs.get("axis", 1))

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        axis = axis_attr + x.ndim if axis_attr < 0 else axis_attr
        if not 0 <= axis <= x.ndim:
            raise ValueError(f"{info.describe()}: axis {axis_attr} out of range for rank {x.ndim}")
        return (x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:])),)

    return compute


def _squeeze(x: np.ndarray, axes: list[int] | None) -> np.ndarray:
    if not axes:
        return x.reshape([d for d in x.shape if d != 1])
    return np.squeeze(x, axis=normalize_axes(axes, x.ndim))


@per_schema_version("Squeeze", input_memory={1: "host"})
def squeeze(info: NodeInfo) -> Compute:
    """Remove size-1 dims: ``axes`` attribute before opset 13, optional input after."""
    if info.opset < 13:
        axes = info.attrs.get("axes")
        return lambda x: (_squeeze(x, list(axes) if axes is not None else None),)
    return lambda x, axes=None: (_squeeze(x, int_list(axes) if axes is not None else None),)


def _unsqueeze(x: np.ndarray, axes: list[int]) -> np.ndarray:
    rank = x.ndim + len(axes)
    shape = list(x.shape)
    for a in sorted(normalize_axes(axes, rank)):
        shape.insert(a, 1)
    return x.reshape(shape)


@per_schema_version("Unsqueeze", input_memory={1: "host"})
def unsqueeze(info: NodeInfo) -> Compute:
    """Insert size-1 dims at ``axes`` (of the output): an attribute before
    opset 13 (negative values from 11), an input from 13."""
    if info.opset < 13:
        axes = [int(a) for a in info.attrs["axes"]]
        return lambda x: (_unsqueeze(x, axes),)
    return lambda x, axes: (_unsqueeze(x, int_list(axes)),)


_CHEAP = 8
"""Copies are memory-bound: a thread is worth waking for 8x the usual grain."""

_NUMPY_ROWS_MAX = 8 << 20
"""Bytes up to which a transpose that keeps the last axis (whole rows move,
as in ShuffleNet's channel shuffle) is numpy's copy: 0.35-0.75x the time of
the Cython row copy, whose fixed cost (about 7 us) outweighs a second
thread below that size."""


def _as_bytes(x: np.ndarray) -> np.ndarray:
    """The bytes of a C-contiguous array as a flat uint8 view."""
    return x.reshape(-1).view(np.uint8)


def _simplify(shape: tuple[int, ...], perm: list[int]) -> tuple[list[int], list[int]]:
    """Drop unit dims and merge input dims that stay adjacent under ``perm``;
    returns the reduced input shape and permutation (same data movement)."""
    keep = [p for p in perm if shape[p] != 1]
    groups: list[list[int]] = []
    for p in keep:
        if groups and groups[-1][-1] + 1 == p:
            groups[-1].append(p)
        else:
            groups.append([p])
    order = sorted(range(len(groups)), key=lambda g: groups[g][0])
    new_shape = [math.prod(shape[d] for d in groups[g]) for g in order]
    rank_of = {g: i for i, g in enumerate(order)}
    return new_shape, [rank_of[g] for g in range(len(groups))]


def transpose_copy(x: np.ndarray, perm: list[int], threads: int) -> np.ndarray:
    """Contiguous ``x.transpose(perm)``: a tiled Cython copy for fixed-size
    element types, numpy otherwise."""
    if perm and perm[-1] == x.ndim - 1 and x.nbytes <= _NUMPY_ROWS_MAX:
        return np.ascontiguousarray(np.transpose(x, perm))
    out_shape = tuple(x.shape[p] for p in perm)
    if x.dtype.hasobject or x.size == 0 or x.ndim < 2:
        # not np.ascontiguousarray: it makes a 0-d array 1-d
        return np.asarray(np.transpose(x, perm), order="C")
    shape, p = _simplify(x.shape, perm)
    if p == list(range(len(p))):
        return np.array(x, order="C").reshape(out_shape)
    if len(p) > 8:
        return np.ascontiguousarray(np.transpose(x, perm))
    out = np.empty(out_shape, x.dtype)
    src = np.ascontiguousarray(x)
    nthreads = threads_for(x.size // _CHEAP, threads)
    movement.transpose(_as_bytes(src), _as_bytes(out), shape, p, x.itemsize, nthreads)
    return out


def _concat(xs: tuple[np.ndarray, ...], axis: int, threads: int) -> np.ndarray:
    """``np.concatenate(xs, axis)``; inputs of one fixed-size dtype are copied
    as parallel contiguous blocks in Cython."""
    first = xs[0]
    if first.dtype.hasobject or any(x.dtype != first.dtype for x in xs):
        return np.concatenate(xs, axis=axis)
    if any(x.ndim != first.ndim or x.shape[:axis] != first.shape[:axis] for x in xs):
        return np.concatenate(xs, axis=axis)
    if any(x.shape[axis + 1 :] != first.shape[axis + 1 :] for x in xs):
        return np.concatenate(xs, axis=axis)
    out_shape = list(first.shape)
    out_shape[axis] = sum(x.shape[axis] for x in xs)
    out = np.empty(out_shape, first.dtype)
    outer = math.prod(first.shape[:axis])
    if out.size == 0:
        return out
    parts = [_as_bytes(np.ascontiguousarray(x)) for x in xs]
    movement.concat(parts, _as_bytes(out), outer, threads_for(out.size // _CHEAP, threads))
    return out


_GROW_LOCK = threading.Lock()
"""Guards the ``filled`` mark of every :class:`_GrowBuffer`."""


class _GrowBuffer(np.ndarray):
    """The tensor a chain of GrowingConcat links fills (see
    :func:`grow_concat`); ``filled`` is the channels written so far. Only
    plain views of it leave the kernel."""

    filled: int


def _grow_buffer(a: np.ndarray) -> _GrowBuffer | None:
    """The _GrowBuffer ``a`` is a view of, else None."""
    base = a.base
    while base is not None and type(base) is not _GrowBuffer:
        base = getattr(base, "base", None)
    return base


def grow_concat(x: np.ndarray, y: np.ndarray, capacity: int, threads: int) -> np.ndarray:
    """``Concat(x, y)`` along axis 1 as a link of a chain that ends in
    ``capacity`` channels (``com.ortcore.GrowingConcat``).

    For one image (``N == 1``) the result is the first channels of a tensor of
    ``capacity`` channels, so that the next link can write its channels after
    them: when ``x`` is exactly the channels a link filled so far of such a
    tensor (the last link's result, or the same memory), ``y`` is written
    after them and nothing else is copied; else (a first link, or a tensor
    already extended by another link that read ``x`` too) a new tensor is
    made and ``x`` is copied into it. A link never writes into channels
    another result covers: every result is a prefix of the channels filled
    when it was made, and the next link must start at the end of them.
    Batches, mixed dtypes and more channels than ``capacity`` take a plain
    Concat.
    """
    if (
        x.ndim < 2
        or y.ndim != x.ndim
        or x.shape[0] != 1
        or y.shape[0] != 1
        or x.shape[2:] != y.shape[2:]
        or x.dtype != y.dtype
        or x.dtype.hasobject
        or x.shape[1] + y.shape[1] > capacity
    ):
        return _concat((x, y), 1, threads)
    c0, c1 = x.shape[1], x.shape[1] + y.shape[1]
    buf = _grow_buffer(x)
    with _GROW_LOCK:  # the check and the claim in one step (concurrent runs)
        claimed = (
            buf is not None
            and buf.filled == c0
            and buf.dtype == x.dtype
            and buf.shape[1] >= c1
            and buf.shape[2:] == x.shape[2:]
            and x.flags.c_contiguous
            and x.ctypes.data == buf.ctypes.data
        )
        if claimed:
            buf.filled = c1  # type: ignore[union-attr]
    if claimed:
        start, parts = c0, [y]
    else:
        buf = _GrowBuffer((1, capacity, *x.shape[2:]), x.dtype)
        buf.filled = c1
        start, parts = 0, [x, y]
    out = buf.view(np.ndarray)  # type: ignore[union-attr]
    dst = out[:, start:c1]
    if dst.size:
        srcs = [_as_bytes(np.ascontiguousarray(p)) for p in parts if p.size]
        movement.concat(srcs, _as_bytes(dst), 1, threads_for(dst.size // _CHEAP, threads))
    return out[:, :c1]


@per_schema_version("Transpose")
def transpose(info: NodeInfo) -> Compute:
    """Permute dims (default: reverse them); the result is contiguous."""
    perm = info.attrs.get("perm")
    threads = thread_count(info)

    perms: dict[int, list[int]] = {}  # the checked permutation per input rank

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        p = perms.get(x.ndim)
        if p is None:
            p = [normalize_axis(int(a), x.ndim) for a in perm] if perm else [*range(x.ndim)][::-1]
            if sorted(p) != list(range(x.ndim)):
                raise ValueError(
                    f"{info.describe()}: perm {p} is not a permutation of rank {x.ndim}"
                )
            perms[x.ndim] = p
        return (transpose_copy(x, p, threads),)

    return compute


@per_schema_version("Concat")
def concat(info: NodeInfo) -> Compute:
    """Join inputs along ``axis`` (default 1 before opset 4; negative from 11)."""
    axis_attr = int(info.attrs.get("axis", 1))
    threads = thread_count(info)

    def compute(*xs: np.ndarray) -> tuple[np.ndarray]:
        axis = normalize_axis(axis_attr, xs[0].ndim)
        return (_concat(xs, axis, threads),)

    return compute


@per_schema_version("Shape")
def shape(info: NodeInfo) -> Compute:
    """The input's shape as int64; ``start``/``end`` slice it from opset 15."""
    start = int(info.attrs.get("start", 0)) if info.opset >= 15 else 0
    end = info.attrs.get("end") if info.opset >= 15 else None

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        dims = x.shape[slice(start, None if end is None else int(end))]
        return (np.array(dims, dtype=np.int64),)

    return compute


@per_schema_version("Size")
def size(info: NodeInfo) -> Compute:
    """Number of elements, as an int64 scalar."""
    return lambda x: (np.array(x.size, dtype=np.int64),)


@per_schema_version("Identity")
def identity(info: NodeInfo) -> Compute:
    """Return the input unchanged (a tensor, or from opset 14 a sequence, from
    16 an optional)."""
    return lambda x: (x,)


_DROPOUT_HOST = {1: "host", 2: "host"}
"""``ratio`` and ``training_mode``, inputs from opset 12."""


@per_schema_version("Dropout", until=9, params=("T",))
@per_schema_version("Dropout", since=10, until=11, params=("T", "T1"))
@per_schema_version("Dropout", since=12, until=21, params=("T",), input_memory=_DROPOUT_HOST)
@per_schema_version("Dropout", since=22, input_memory=_DROPOUT_HOST)
def dropout(info: NodeInfo) -> Compute:
    """Dropout: identity at inference.

    The optional mask is of the input's type before opset 10 and bool after.
    From opset 12 ``ratio`` and ``training_mode`` are inputs; in training mode
    the mask is ``RandomState(seed).uniform(0, 1, shape) >= ratio`` (numpy's
    legacy generator, as onnx's reference; fresh entropy without ``seed``)
    and the kept elements are scaled by 1 / (1 - ratio).
    """
    want_mask = info.num_outputs > 1
    seed = info.attrs.get("seed")
    ratio_attr = float(info.attrs.get("ratio", 0.5))

    def compute(
        x: np.ndarray, ratio: np.ndarray | None = None, training: np.ndarray | None = None
    ) -> tuple[np.ndarray, ...]:
        train = training is not None and bool(np.asarray(training).reshape(-1)[0])
        r = float(np.asarray(ratio).reshape(-1)[0]) if ratio is not None else ratio_attr
        if not train or r == 0.0:
            if not want_mask:
                return (x,)
            mask_dtype = x.dtype if info.opset < 10 else np.bool_
            return (x, np.ones(x.shape, mask_dtype))
        rng = np.random.RandomState(None if seed is None else int(seed))
        mask = rng.uniform(0.0, 1.0, x.shape) >= r
        y = (x * mask * np.asarray(1.0 / (1.0 - r), x.dtype)).astype(x.dtype, copy=False)
        return (y, mask) if want_mask else (y,)

    return compute


@per_schema_version("Expand", input_memory={1: "host"})
def expand(info: NodeInfo) -> Compute:
    """Broadcast the input to (the broadcast of its shape and) the shape input."""

    def compute(x: np.ndarray, shape: np.ndarray) -> tuple[np.ndarray]:
        dims = tuple(int_list(shape))
        if any(d < 0 for d in dims):
            raise ValueError(f"{info.describe()}: shape {list(dims)} has a negative dimension")
        target = np.broadcast_shapes(x.shape, dims)
        check_tensor_size(target, x.dtype, info.describe())
        return (np.array(np.broadcast_to(x, target)),)

    return compute


@per_schema_version("Tile", input_memory={1: "host", 2: "host"})
def tile(info: NodeInfo) -> Compute:
    """Repeat the input ``repeats[i]`` times along each dim (opset 1: ``tiles``
    times along the single ``axis`` input)."""

    def _tiled(x: np.ndarray, reps: list[int]) -> np.ndarray:
        if len(reps) != x.ndim or any(r < 0 for r in reps):
            raise ValueError(
                f"{info.describe()}: repeats {reps} must hold one count >= 0 per input axis "
                f"({x.ndim})"
            )
        check_tensor_size(
            [d * r for d, r in zip(x.shape, reps, strict=True)], x.dtype, info.describe()
        )
        return np.tile(x, reps)

    if info.opset < 6:

        def tile_axis(x: np.ndarray, tiles: np.ndarray, axis: np.ndarray) -> tuple[np.ndarray]:
            reps = [1] * x.ndim
            reps[normalize_axis(int(np.ravel(axis)[0]), x.ndim)] = int(np.ravel(tiles)[0])
            return (_tiled(x, reps),)

        return tile_axis
    return lambda x, repeats: (_tiled(x, int_list(repeats)),)
