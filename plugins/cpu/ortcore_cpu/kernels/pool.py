"""Pooling: MaxPool (with Indices), AveragePool, LpPool, GlobalAveragePool,
GlobalMaxPool, GlobalLpPool.

Float32 with 1-3 spatial dims runs in Cython (float16 and 8-bit integers are
converted to float32 and back, which is exact); other cases use a numpy path
that loops over kernel offsets.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable

import numpy as np
from ep_sdk import Compute, NodeInfo, check_tensor_size

from . import registry
from ._common import (
    DT,
    FLOATS,
    f32_contiguous,
    remember,
    thread_count,
    threads_for,
    threads_for_memory_bound,
)
from ._isa import best_build
from ._window import (
    PoolWindow,
    Window,
    check_window_attrs,
    fill_empty_windows,
    kernel_offsets,
    strided_slice,
    window,
)

ext = best_build("pool")
"""The build of the Cython pooling kernels this CPU runs fastest (``_isa.py``)."""

POOL_TAP_WORK = 4
"""Elements of :func:`threads_for_memory_bound`'s work that one window tap
of a pooled output weighs. Counted as one, a 3x3 max pool over 256
channels of 27x27 ran on one thread inside SqueezeNet (105-126 us, where
two took 57): its taps cost about 0.5 ns each, four of the memory-bound
loops' elements. Counted as four (2-core Zen 3 VM, the same session's runs
alternating): SqueezeNet 0.98x the time, Inception v1 0.986x, Inception v2
0.99x, DenseNet, ResNet-50 and ShuffleNet unchanged (8 or 16 did no
better)."""

_EXACT_IN_F32 = (np.float32, np.float16, np.int8, np.uint8)
_NO_INDICES = np.empty((1, 1, 1, 1), np.int64)


def _window_of(info: NodeInfo, spatial: tuple[int, ...]) -> PoolWindow:
    a = info.attrs
    win = window(
        spatial,
        a["kernel_shape"],
        auto_pad=a.get("auto_pad", "NOTSET"),
        pads=a.get("pads"),
        strides=a.get("strides"),
        dilations=a.get("dilations"),
        ceil_mode=bool(a.get("ceil_mode", 0)),
    )
    return PoolWindow.of(win, spatial)


def pool_windows(info: NodeInfo) -> Callable[[tuple[int, ...]], PoolWindow]:
    """The node's window for an input's spatial size, kept for a few sizes
    (:func:`remember`): computing it (pads, output size, checks) took about
    5 us, as long as pooling a small plane."""
    kept: dict[Hashable, PoolWindow] = {}

    def get(spatial: tuple[int, ...]) -> PoolWindow:
        return kept.get(spatial) or remember(kept, spatial, _window_of(info, spatial))

    return get


def _planes(x: np.ndarray) -> np.ndarray:
    """View x (N, C, *S) as float32 (N*C, D, H, W)."""
    sp = x.shape[2:]
    return f32_contiguous(x).reshape(-1, *((1,) * (3 - len(sp))), *sp)


def _numpy_windows(x: np.ndarray, win: Window, fill: float) -> np.ndarray:
    """Return every kernel offset's strided view of ``x`` padded with ``fill``,
    stacked on a new axis 2."""
    sp = x.shape[2:]
    need = [
        (o - 1) * s + (k - 1) * d + 1
        for o, s, k, d in zip(win.out, win.strides, win.kernel, win.dilations, strict=True)
    ]
    extra = [max(nd - (i + b), 0) for nd, i, b in zip(need, sp, win.pads_begin, strict=True)]
    pad = [(0, 0), (0, 0), *zip(win.pads_begin, extra, strict=True)]
    xp = np.pad(x, pad, constant_values=fill)
    views = []
    for off in kernel_offsets(win.kernel):
        start = [int(o) * d for o, d in zip(off, win.dilations, strict=True)]
        sl = strided_slice(start, win.strides, win.out)
        views.append(xp[sl])
    return np.stack(views, axis=2)


@registry.kernel("MaxPool", since=1, until=7, types={"T": FLOATS})
@registry.kernel("MaxPool", since=8, until=9, types={"T": FLOATS})
@registry.kernel("MaxPool", since=10, until=10, types={"T": FLOATS})
@registry.kernel("MaxPool", since=11, until=11, types={"T": FLOATS})
@registry.kernel("MaxPool", since=12, until=21, types={"T": FLOATS | {DT.INT8, DT.UINT8}})
@registry.kernel("MaxPool", since=22, types={"T": FLOATS | {DT.INT8, DT.UINT8}})
def max_pool(info: NodeInfo) -> Compute:
    """MaxPool; the optional Indices output (opset 8+) honours ``storage_order``."""
    check_window_attrs(info.attrs, kernel_required=True)
    threads = thread_count(info)
    window_for = pool_windows(info)
    want_indices = info.num_outputs > 1
    column_major = bool(info.attrs.get("storage_order", 0))

    def compute(x: np.ndarray) -> tuple[np.ndarray, ...]:
        win = window_for(x.shape[2:])
        if x.dtype in _EXACT_IN_F32 and 1 <= len(win.out) <= 3:
            k3, s3, pb3, _, d3, o3 = win.padded3()
            out = np.empty((x.shape[0] * x.shape[1], *o3), np.float32)
            idx = np.empty(out.shape, np.int64) if want_indices else _NO_INDICES
            nt = threads_for_memory_bound(out.size * math.prod(k3) * POOL_TAP_WORK, threads)
            if out.size and want_indices:
                ext.max_pool_indices(_planes(x), out, idx, column_major, *k3, *s3, *pb3, *d3, nt)
            elif out.size:
                ext.max_pool(_planes(x), out, *k3, *s3, *pb3, *d3, nt)
            shape = (*x.shape[:2], *win.out)
            if x.dtype.kind in "iu":  # a window of padding only is -inf: the type's minimum
                np.maximum(out, np.iinfo(x.dtype).min, out=out)
            y = out.reshape(shape).astype(x.dtype, copy=False)
            indices = idx.reshape(shape) if want_indices else None
            fill_empty_windows(y, win, indices, column_major=column_major)
            return (y,) if indices is None else (y, indices)
        got = _max_pool_numpy(x, win, want_indices, column_major)
        fill_empty_windows(got[0], win, got[1] if want_indices else None,
                           column_major=column_major)  # fmt: skip
        return got

    return compute


def _max_pool_numpy(
    x: np.ndarray, win: Window, want_indices: bool, column_major: bool
) -> tuple[np.ndarray, ...]:
    fill = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    views = _numpy_windows(x, win, fill)
    y = views.max(axis=2) if views.shape[2] else np.full(views.shape[:2] + views.shape[3:], fill)
    if not want_indices:
        return (y.astype(x.dtype, copy=False),)
    arg = views.argmax(axis=2)
    offs = kernel_offsets(win.kernel)
    sp = x.shape[2:]
    grid = np.indices(win.out)
    coords = [
        grid[i] * win.strides[i] - win.pads_begin[i] + offs[arg, i] * win.dilations[i]
        for i in range(len(sp))
    ]
    order = list(range(len(sp)))[::-1] if column_major else list(range(len(sp)))
    flat = np.zeros(arg.shape, np.int64)
    for i in order:
        flat = flat * sp[i] + coords[i]
    plane = math.prod(sp)
    base = np.arange(x.shape[0] * x.shape[1], dtype=np.int64).reshape(*x.shape[:2], *[1] * len(sp))
    return y.astype(x.dtype, copy=False), flat + base * plane


@registry.kernel("AveragePool", since=1, until=6, types={"T": FLOATS})
@registry.kernel("AveragePool", since=7, until=9, types={"T": FLOATS})
@registry.kernel("AveragePool", since=10, until=10, types={"T": FLOATS})
@registry.kernel("AveragePool", since=11, until=18, types={"T": FLOATS})
@registry.kernel("AveragePool", since=19, until=21, types={"T": FLOATS})
@registry.kernel("AveragePool", since=22, types={"T": FLOATS})
def average_pool(info: NodeInfo) -> Compute:
    """AveragePool: ``count_include_pad`` (7+), ``ceil_mode`` (10+), ``dilations`` (19+)."""
    check_window_attrs(info.attrs, kernel_required=True)
    threads = thread_count(info)
    window_for = pool_windows(info)
    include_pad = bool(info.attrs.get("count_include_pad", 0))
    whole = include_pad and info.opset < 19 and not info.attrs.get("ceil_mode", 0)

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        win = window_for(x.shape[2:])
        if _covers_input(win, x.shape[2:]) and x.dtype != np.float64 and x.size:
            # one window over each whole plane: a global average, one pass per plane
            planes = f32_contiguous(x).reshape(x.shape[0] * x.shape[1], -1)
            mean = np.empty(planes.shape[0], np.float32)
            ext.global_pool(planes, mean, False, threads_for_memory_bound(x.size, threads))
            return (mean.reshape(*x.shape[:2], *win.out).astype(x.dtype, copy=False),)
        ends = _divisor_ends(win, whole)
        if 1 <= len(win.out) <= 3 and x.dtype != np.float64:
            k3, s3, pb3, _, d3, o3 = win.padded3()
            pe3 = (0,) * (3 - len(ends)) + ends
            out = np.empty((x.shape[0] * x.shape[1], *o3), np.float32)
            if out.size:
                nt = threads_for_memory_bound(out.size * math.prod(k3) * POOL_TAP_WORK, threads)
                ext.avg_pool(_planes(x), out, *k3, *s3, *pb3, *pe3, *d3, include_pad, nt)
            return (out.reshape(*x.shape[:2], *win.out).astype(x.dtype, copy=False),)
        views = _numpy_windows(x.astype(np.float64), win, 0.0)
        count = _counts(tuple(x.shape[2:]), win, ends, include_pad)
        return ((views.sum(axis=2) / np.maximum(count, 1)).astype(x.dtype),)

    return compute


def _divisor_ends(win: Window, whole: bool) -> tuple[int, ...]:
    """The end pads within which ``count_include_pad`` counts a window's
    positions: the node's, or with ``whole`` far enough that every position
    counts. onnxruntime's kernel of opsets 7-18 divides by the whole kernel
    when ``ceil_mode`` is 0, where its kernel of opset 19 stops at the end
    pads; they differ only on a window wider than the padded input (which
    gives one output, see :func:`window`). ortcore follows each."""
    if not whole:
        return win.pads_end
    return tuple(
        e + (k - 1) * d + 1 for e, k, d in zip(win.pads_end, win.kernel, win.dilations, strict=True)
    )


def _covers_input(win: Window, spatial: tuple[int, ...]) -> bool:
    """Whether the window is one unpadded, undilated window over all of ``spatial``."""
    return (
        len(spatial) >= 1
        and tuple(win.kernel) == tuple(spatial)
        and all(o == 1 for o in win.out)
        and not any(win.pads_begin)
        and not any(win.pads_end)
        and all(d == 1 for d in win.dilations)
    )


def _counts(
    spatial: tuple[int, ...], win: Window, ends: tuple[int, ...], include_pad: bool
) -> np.ndarray:
    """Divisor of every AveragePool window: its positions inside the data, or
    with ``include_pad`` those before the end pads ``ends`` (see
    :func:`_divisor_ends`); separable over the dims."""
    count = np.ones((), np.int64)
    for i, size in enumerate(spatial):
        pos = (
            np.arange(win.out[i])[:, None] * win.strides[i]
            - win.pads_begin[i]
            + np.arange(win.kernel[i])[None, :] * win.dilations[i]
        )
        ok = pos < size + ends[i] if include_pad else (pos >= 0) & (pos < size)
        count = np.multiply.outer(count, ok.sum(axis=1))
    return count


@registry.kernel("GlobalAveragePool", since=1, until=21, types={"T": FLOATS})
@registry.kernel("GlobalAveragePool", since=22, types={"T": FLOATS})
@registry.kernel("GlobalMaxPool", since=1, until=21, types={"T": FLOATS})
@registry.kernel("GlobalMaxPool", since=22, types={"T": FLOATS})
def global_pool(info: NodeInfo) -> Compute:
    """Mean or max over every spatial position, keeping the spatial dims as 1s."""
    threads = thread_count(info)
    take_max = info.op_type == "GlobalMaxPool"

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        shape = (*x.shape[:2], *([1] * (x.ndim - 2)))
        if x.dtype == np.float64:
            axes = tuple(range(2, x.ndim))
            if take_max:  # -inf over no positions, as the float32 kernel
                return (np.max(x, axis=axes, keepdims=True, initial=-np.inf),)
            with np.errstate(invalid="ignore"):
                return (np.mean(x, axis=axes, keepdims=True),)
        planes = f32_contiguous(x).reshape(x.shape[0] * x.shape[1], math.prod(x.shape[2:]))
        out = np.empty(planes.shape[0], np.float32)
        ext.global_pool(planes, out, take_max, threads_for(planes.size, threads))
        return (out.reshape(shape).astype(x.dtype, copy=False),)

    return compute


def _lp(sums: np.ndarray, p: float) -> np.ndarray:
    """``sums`` of ``|x|**p`` to the power ``1/p``."""
    return np.sqrt(sums) if p == 2 else np.power(sums, 1.0 / p)


@registry.kernel("LpPool", since=1, until=1, types={"T": FLOATS})
@registry.kernel("LpPool", since=2, until=10, types={"T": FLOATS})
@registry.kernel("LpPool", since=11, until=17, types={"T": FLOATS})
@registry.kernel("LpPool", since=18, until=21, types={"T": FLOATS})
@registry.kernel("LpPool", since=22, types={"T": FLOATS})
def lp_pool(info: NodeInfo) -> Compute:
    """LpPool: the p-norm of every window (pads count as zeros);
    ``ceil_mode`` and ``dilations`` from opset 18."""
    check_window_attrs(info.attrs, kernel_required=True)
    p = float(info.attrs.get("p", 2))
    window_for = pool_windows(info)

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        win = window_for(x.shape[2:])
        work = x.astype(np.float64 if x.dtype == np.float64 else np.float32)
        views = _numpy_windows(np.power(np.abs(work), p), win, 0.0)
        return (_lp(views.sum(axis=2), p).astype(x.dtype),)

    return compute


@registry.kernel("GlobalLpPool", since=1, until=1, types={"T": FLOATS})
@registry.kernel("GlobalLpPool", since=2, until=21, types={"T": FLOATS})
@registry.kernel("GlobalLpPool", since=22, types={"T": FLOATS})
def global_lp_pool(info: NodeInfo) -> Compute:
    """The p-norm over every spatial position, keeping the spatial dims as 1s."""
    p = float(info.attrs.get("p", 2))

    def compute(x: np.ndarray) -> tuple[np.ndarray]:
        work = x.astype(np.float64 if x.dtype == np.float64 else np.float32)
        sums = np.sum(np.power(np.abs(work), p), axis=tuple(range(2, x.ndim)), keepdims=True)
        return (_lp(sums, p).astype(x.dtype),)

    return compute


_UNPOOL_TYPES: dict[str | int, frozenset[DT]] = {"T1": FLOATS, "T2": frozenset({DT.INT64})}


@registry.kernel("MaxUnpool", since=9, until=10, types=_UNPOOL_TYPES, input_memory={2: "host"})
@registry.kernel("MaxUnpool", since=11, until=21, types=_UNPOOL_TYPES, input_memory={2: "host"})
@registry.kernel("MaxUnpool", since=22, types=_UNPOOL_TYPES, input_memory={2: "host"})
def max_unpool(info: NodeInfo) -> Compute:
    """Scatter X to the flat positions ``I`` (as MaxPool's Indices) of a zero
    tensor of the unpooled shape, then zero-pad it to ``output_shape`` if given."""
    a = info.attrs
    kernel = [int(k) for k in a["kernel_shape"]]
    nsp = len(kernel)
    strides = [int(s) for s in a.get("strides") or [1] * nsp]
    pads = [int(p) for p in a.get("pads") or [0] * (2 * nsp)]

    def compute(
        x: np.ndarray, indices: np.ndarray, output_shape: np.ndarray | None = None
    ) -> tuple[np.ndarray]:
        if x.ndim != nsp + 2:
            raise ValueError(
                f"{info.describe()}: input X {list(x.shape)} for kernel_shape {kernel}: "
                f"it must have {nsp + 2} dimensions"
            )
        shape = [*x.shape[:2]] + [
            (x.shape[2 + i] - 1) * strides[i] - pads[i] - pads[nsp + i] + kernel[i]
            for i in range(nsp)
        ]
        if any(d < 0 for d in shape):
            raise ValueError(
                f"{info.describe()}: input {list(x.shape)} with kernel_shape {kernel}, strides "
                f"{strides} and pads {pads} unpools to {shape}; check the attributes"
            )
        if indices.shape != x.shape:
            raise ValueError(
                f"{info.describe()}: input I {list(indices.shape)} must have the shape of "
                f"input X {list(x.shape)}"
            )
        check_tensor_size(shape, x.dtype, info.describe())
        y = np.zeros(math.prod(shape), x.dtype)
        flat = indices.reshape(-1)
        if flat.size and (flat.min() < 0 or flat.max() >= y.size):
            bad = int(flat[(flat < 0) | (flat >= y.size)][0])
            # numpy would take a negative index from the end: a silent wrong answer (a
            # MaxPool window with no tap on the input gives one, as onnxruntime's does)
            raise ValueError(
                f"{info.describe()}: index value out of bounds in input I: got {bad}, "
                f"valid range is [0, {y.size})"
            )
        y[flat] = x.reshape(-1)
        y = y.reshape(shape)
        if output_shape is None:
            return (y,)
        dims = [int(v) for v in np.asarray(output_shape).reshape(-1)]
        if len(dims) != len(shape) or any(d < s for d, s in zip(dims, shape, strict=True)):
            raise ValueError(
                f"{info.describe()}: output_shape {dims} is smaller than the unpooled shape {shape}"
            )
        check_tensor_size(dims, x.dtype, info.describe())
        out = np.zeros(dims, x.dtype)
        out[tuple(slice(0, s) for s in shape)] = y
        return (out,)

    return compute
