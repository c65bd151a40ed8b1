"""The direct kernels, which compute a Conv in one pass over its output and
add the bias, the residual and the clamp as they write it: ``direct_conv2d``
(``_direct_conv.h``, vectorized along the output's width, in row or flat
mode) and ``channel_vector_conv2d`` (``_cvec_conv.h``, the output channels in
the vector lanes); their packed weights, their calls per input shape, and
the direct kernel with a fused max pool (``direct_conv2d_maxpool``). Which
Convs they take: ``selection.py``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .._common import FilterCache, f32_contiguous, threads_for
from .._window import PoolWindow, Window, fill_empty_windows
from . import common, selection
from .common import _COL_SCRATCH_MAX, _F32, Clamp, _epilogue, _scratch


def direct_filter(w: np.ndarray, group: int = 1) -> np.ndarray:
    """Weights (M, C, KH, KW), or (M, C, KW) of a 1-D Conv, packed for
    ``direct_conv2d``: float32 (ceil(M / B), C, KH, KW, B), B output channels
    side by side (zeros past M). With ``group`` > 1 each group's M / group
    filters are packed so, one group after the other."""
    if group > 1:
        mg = w.shape[0] // group
        return np.concatenate([direct_filter(w[g * mg : (g + 1) * mg]) for g in range(group)])
    block = int(common.ext.DIRECT_BLOCK)
    w = w.reshape(*w.shape[:2], *((1,) * (4 - w.ndim)), *w.shape[2:])
    m = w.shape[0]
    blocks = -(-m // block)
    packed = np.zeros((blocks * block, *w.shape[1:]), np.float32)
    packed[:m] = w
    packed = packed.reshape(blocks, block, *w.shape[1:])
    return np.ascontiguousarray(packed.transpose(0, 2, 3, 4, 1))


def channel_vector_filter(w: np.ndarray) -> np.ndarray:
    """2-D weights (M, C, KH, KW) packed for ``channel_vector_conv2d``:
    float32 (ceil(M / B), C, KH * KW, B), B output channels side by side
    (zeros past M)."""
    block = int(common.ext.CHANNEL_VECTOR_BLOCK)
    m, c = w.shape[:2]
    blocks = -(-m // block)
    packed = np.zeros((blocks * block, c, math.prod(w.shape[2:])), np.float32)
    packed[:m] = w.reshape(m, c, -1)
    packed = packed.reshape(blocks, block, *packed.shape[1:])
    return np.ascontiguousarray(packed.transpose(0, 2, 3, 1))


def _conv_direct(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None,
    z: np.ndarray | None,
    win: Window,
    threads: int,
    clamp: Clamp | None,
    packs: FilterCache | None,
    group: int = 1,
    call: _DirectCall | None = None,
    out: np.ndarray | None = None,
    interleave: bool = False,
) -> np.ndarray:
    """The direct convolution of float32 ``x`` (N, C, *S), 1 or 2 spatial
    dims, in ``group`` groups, with its bias, residual ``z`` and clamp, in
    one pass over the output. ``packs`` keeps ``direct_filter(w, group)``;
    ``call`` is :func:`_direct_call` of these shapes (computed if ``None``).
    The result goes to ``out`` if given: the output's shape, each image's
    channels C-contiguous (a slice of channels of a larger tensor). With
    ``interleave`` (flat mode, groups, no residual) the groups' channels
    come out shuffled (:func:`shuffle_channels`)."""
    if call is None:
        call = _direct_call(x.shape, w.shape, win, group)
    if packs is not None:
        wp = packs.transform(w)
    else:
        wp = channel_vector_filter(w) if call.vector else direct_filter(w, group)
    if call.sub is not None:  # a strided 1x1 window reads only these positions
        x = x[(slice(None), slice(None), *(slice(None, None, st) for st in call.sub))]
    x4 = f32_contiguous(x).reshape(call.x4)
    y = np.empty(call.y, np.float32) if out is None else out
    y4 = y.reshape(call.y4)
    bias, z, lo, hi = _epilogue(b, z, y.shape, clamp)
    z4 = None if z is None else z.reshape(call.y4)
    share = threads_for(call.work, threads)
    size = call.size
    scratch = _scratch.get(size) if size <= _COL_SCRATCH_MAX else np.empty(size, np.float32)
    if call.vector:
        for i in range(len(y4)):
            common.ext.channel_vector_conv2d(
                x4[i], wp, y4[i], bias, None if z4 is None else z4[i], scratch, *call.window,
                lo, hi, share,
            )  # fmt: skip
        return y
    for i in range(len(y4)):
        common.ext.direct_conv2d(
            x4[i], wp, y4[i], bias, None if z4 is None else z4[i], scratch,
            *call.args, lo, hi, share, call.flat, group, interleave,
        )  # fmt: skip
    return y


class _DirectCall(NamedTuple):
    """The shapes and arguments of the direct kernel's call for one input,
    weight and window (see :func:`_direct_call`)."""

    x4: tuple[int, ...]
    """The input as (N, C, H, W) (1-D: H = 1)."""
    y: tuple[int, ...]
    """The output's shape."""
    y4: tuple[int, ...]
    """The output as (N, M, OH, OW)."""
    args: tuple[int, int, int, int, int, int]
    """Strides, begin pads and dilations (rows, then columns)."""
    size: int
    """Floats of the kernel's scratch (the channel-vector kernel's: on as
    many threads as the node may use, each thread's copy of its rows)."""
    work: int
    """The call's work for :func:`threads_for` (its threads are picked at
    each call: the run's share of the cores changes)."""
    flat: bool
    """Whether it runs in flat mode."""
    sub: tuple[int, ...] | None = None
    """The strides of an unpadded 1x1 window, whose positions are taken from
    the input first (the kernel then runs it with stride 1, reading them in
    place, rather than copying every phase of the input); else ``None``."""
    vector: bool = False
    """Whether the channel-vector kernel runs it (``channel_vector_conv2d``,
    see :data:`CHANNEL_VECTOR`) rather than ``direct_conv2d``."""
    window: tuple[int, ...] = ()
    """The channel-vector kernel's window arguments: the window's size,
    then :attr:`args`."""


def _direct_call(
    x_shape: tuple[int, ...],
    w_shape: tuple[int, ...],
    win: Window,
    group: int,
    vector: bool = False,
    threads: int = 1,
) -> _DirectCall:
    """The direct kernel's call for an input and weight of these shapes
    (``vector``: the channel-vector kernel's on up to ``threads`` threads)."""
    n, c = x_shape[:2]
    m = w_shape[0]
    k3, s3, pb3, _, d3, o3 = win.padded3()
    oh, ow = o3[1], o3[2]
    flat = not vector and selection._flat(win, group, c)
    spatial = tuple(x_shape[2:])
    sub = None
    pointwise = all(k == 1 for k in win.kernel) and not any(win.pads_begin + win.pads_end)
    if pointwise and any(st > 1 for st in win.strides):
        sub, spatial = tuple(win.strides), tuple(win.out)
        s3, d3 = (1, 1, 1), (1, 1, 1)
    if not vector:
        size = common.ext.direct_conv2d_scratch(
            c, oh, ow, k3[1], k3[2], s3[1], s3[2], d3[1], d3[2], flat
        )
    else:  # the most any share of the threads needs
        size = max(
            common.ext.channel_vector_conv2d_scratch(
                c, oh, ow, m, k3[1], k3[2], s3[1], s3[2], d3[1], d3[2], t
            )
            for t in range(1, max(threads, 1) + 1)
        )
    return _DirectCall(
        x4=(n, c, *((1,) * (2 - len(win.out))), *spatial),
        y=(n, m, *win.out),
        y4=(n, m, oh, ow),
        args=(s3[1], s3[2], pb3[1], pb3[2], d3[1], d3[2]),
        size=int(size),
        work=m * oh * ow * (c // group) * k3[1] * k3[2] // 8,
        flat=flat,
        sub=sub,
        vector=vector,
        window=(k3[1], k3[2], s3[1], s3[2], pb3[1], pb3[2], d3[1], d3[2]),
    )


def _fused_pool(call: _DirectCall | None, win: Window, pool_win: Window, x: np.ndarray) -> bool:
    """Whether ``direct_conv2d_maxpool`` takes a Conv of this call and
    window, and its pool: the direct kernel's flat mode on one group and 2-D
    windows, float32."""
    return (
        call is not None
        and call.flat
        and not call.vector
        and call.sub is None
        and len(win.out) == 2
        and len(pool_win.out) == 2
        and x.dtype == _F32
    )


def _conv_direct_pool(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None,
    pool_win: PoolWindow,
    threads: int,
    clamp: Clamp | None,
    packs: FilterCache | None,
    call: _DirectCall,
) -> np.ndarray:
    """The direct convolution of float32 ``x`` (N, C, H, W), one group, with
    its bias and clamp, max-pooled by ``pool_win`` in the same pass
    (``direct_conv2d_maxpool``: the Conv's output is pooled a band at a
    time, in the cache, and never written whole)."""
    wp = packs.transform(w) if packs is not None else direct_filter(w)
    x4 = f32_contiguous(x).reshape(call.x4)
    y = np.empty((x.shape[0], w.shape[0], *pool_win.out), np.float32)
    bias, _, lo, hi = _epilogue(b, None, call.y, clamp)
    k3, s3, pb3, _, d3, _ = pool_win.padded3()
    size = call.size
    scratch = _scratch.get(size) if size <= _COL_SCRATCH_MAX else np.empty(size, np.float32)
    share = threads_for(call.work, threads)
    for i in range(len(y)):
        common.ext.direct_conv2d_maxpool(
            x4[i], wp, y[i], bias, scratch, *call.y4[2:], *call.args, lo, hi,
            k3[1], k3[2], s3[1], s3[2], pb3[1], pb3[2], d3[1], d3[2], share,
        )  # fmt: skip
    fill_empty_windows(y, pool_win)  # windows of pads only, as MaxPool's
    return y
