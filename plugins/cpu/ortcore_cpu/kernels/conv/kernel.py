"""The Conv kernel and its fused forms (FusedConv, FusedConvAdd,
FusedConvConcat, FusedConvShuffle, FusedConvPool: see :func:`build_conv`).

Per input and weight shape it plans once which path runs the Conv
(``selection.py``) and keeps the weight's packed forms for a constant weight;
the paths are called through their modules (``direct._conv_direct``), so
that a test or benchmark that stands a spy in for one in its module sees
every call.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, NamedTuple

import numpy as np
from ep_sdk import Compute, NodeInfo

from .. import registry
from .._common import FLOATS, FilterCache, constant_input, f32_contiguous, remember, thread_count
from .._window import PoolWindow, Window, check_window_attrs, window
from . import direct, im2col, pointwise, selection, winograd
from .common import _F32, Clamp, _add_bias
from .direct import _DirectCall
from .pointwise import _PointwiseCall


def _conv_attrs(info: NodeInfo) -> dict[str, Any]:
    a = info.attrs
    return {
        "auto_pad": a.get("auto_pad", "NOTSET"),
        "pads": a.get("pads"),
        "strides": a.get("strides"),
        "dilations": a.get("dilations"),
    }


@registry.kernel("Conv", since=1, until=10, types={"T": FLOATS})
@registry.kernel("Conv", since=11, until=21, types={"T": FLOATS})
@registry.kernel("Conv", since=22, types={"T": FLOATS})
def conv(info: NodeInfo) -> Compute:
    """Conv with groups, dilations, strides, explicit or automatic pads."""
    return build_conv(info)


class _Plan(NamedTuple):
    """How a Conv node runs an input and weight of given shapes and dtype."""

    win: Window
    fast: bool
    """Whether the float Cython paths take it."""
    call: _DirectCall | None
    """The direct or channel-vector kernel's call, if one of them runs it."""
    pointwise: _PointwiseCall | None
    """The packed GEMM's call, if it runs it as a 1x1 Conv."""


class PoolStage(NamedTuple):
    """The max pool a FusedConvPool applies to its Conv's output (see
    :func:`build_conv`)."""

    window_for: Callable[[tuple[int, ...]], PoolWindow]
    """The pool's window for the Conv output's spatial size."""
    pool: Compute
    """The MaxPool kernel, for the Convs the fused kernel does not take."""


def build_conv(
    info: NodeInfo,
    *,
    clamp: Clamp | None = None,
    residual: bool = False,
    concat: tuple[int, int] | None = None,
    shuffle: int = 1,
    pool: PoolStage | None = None,
) -> Compute:
    """The Conv kernel of ``info``; with ``clamp`` its output is clamped to
    ``(lo, hi)`` in the bias's pass (FusedConv's Relu and Clip). With
    ``residual`` it takes ``(x, w, z, b=None)`` and adds ``z`` (of the
    output's shape) in that pass too (FusedConvAdd). With ``concat``
    ``(channels, offset)`` it takes ``(x, w, b=None, into=None)`` and writes
    its output as the channels from ``offset`` of a tensor of ``channels``
    channels (FusedConvConcat, see :func:`concat_buffer`), which it returns.
    With ``shuffle`` > 1 (no residual or concat) its output's channels come
    out shuffled in that many groups (FusedConvShuffle, see
    :func:`shuffle_channels`): written so by the packed GEMM when the Conv
    is 1x1 in as many groups, else shuffled after. With ``pool`` (no
    residual, concat or shuffle) its output is max-pooled (FusedConvPool):
    in the direct kernel's pass where it takes the Conv (see
    :func:`_fused_pool`), else by ``pool.pool`` after."""
    if shuffle > 1 and (residual or concat is not None):
        raise ValueError(f"{info.describe()}: a channel shuffle with a residual or concat")
    if pool is not None and (residual or concat is not None or shuffle > 1):
        raise ValueError(f"{info.describe()}: a pool with a residual, concat or shuffle")
    check_window_attrs(info.attrs)
    group = int(info.attrs.get("group", 1))
    kernel_shape = info.attrs.get("kernel_shape")
    geometry = _conv_attrs(info)
    threads = thread_count(info)
    constant_weight = constant_input(info, 1)
    filters = winograd.WinogradFilters() if constant_weight else None
    packs = FilterCache(lambda w: direct.direct_filter(w, group)) if constant_weight else None
    vector_packs = FilterCache(direct.channel_vector_filter) if constant_weight else None
    pointwise_packs = (
        FilterCache(lambda w: pointwise._pack_pointwise(w, group)) if constant_weight else None
    )
    # per input and weight shape and dtype seen (a few per node): the window,
    # whether the Cython paths take it, the direct kernel's call and the
    # packed GEMM's where it takes it as a 1x1 Conv
    plans: dict[Hashable, _Plan] = {}

    def plan(x: np.ndarray, w: np.ndarray) -> _Plan:
        if x.shape[1] != w.shape[1] * group or w.shape[0] % group:
            raise ValueError(
                f"{info.describe()}: input channels {x.shape[1]} / weight {w.shape} "
                f"do not match group={group}"
            )
        win = window(x.shape[2:], kernel_shape or w.shape[2:], partial=False, **geometry)
        fast = x.dtype in (np.float32, np.float16) and 1 <= len(win.out) <= 3
        call = None
        gemm_call = None
        if fast and selection._use_pointwise(x, w, win, group, pointwise_packs is not None):
            gemm_call = pointwise._pointwise_call(x.shape, w.shape, win, group)
        elif fast and selection._use_channel_vector(x, w, win, group, filters is not None):
            call = direct._direct_call(x.shape, w.shape, win, group, vector=True, threads=threads)
        elif fast and selection._use_direct(x, w, win, group, filters is not None, threads):
            call = direct._direct_call(x.shape, w.shape, win, group)
        return _Plan(win, fast, call, gemm_call)

    def lookup(x: np.ndarray, w: np.ndarray) -> _Plan:
        key = (x.shape, w.shape, x.dtype)
        return plans.get(key) or remember(plans, key, plan(x, w))

    def run(
        x: np.ndarray,
        w: np.ndarray,
        b: np.ndarray | None,
        z: np.ndarray | None,
        out: np.ndarray | None = None,
        how: _Plan | None = None,
    ) -> np.ndarray:
        win, fast, call, gemm_call = how or lookup(x, w)
        if fast:
            f32 = x.dtype == _F32
            into = out if f32 else None
            if call is not None:
                cache = vector_packs if call.vector else packs
                y = direct._conv_direct(x, w, b, z, win, threads, clamp, cache, group, call, into)
                return y if f32 else y.astype(x.dtype)
            if gemm_call is not None and pointwise_packs is not None and selection.POINTWISE_GEMM:
                y = pointwise._conv_pointwise(
                    x, w, b, z, gemm_call, threads, clamp, pointwise_packs, into, group
                )
                return y if f32 else y.astype(x.dtype)
            if (
                selection.WINOGRAD_EPILOGUE
                and z is None
                and selection._use_winograd(x, w, win, group, filters is not None)
            ):
                # the output transform adds the bias and clamps
                u, packed = winograd._winograd_operands(w, filters)
                xc = f32_contiguous(x)
                y = winograd._conv_winograd(xc, u, win, threads, packed, b, clamp, into)
                return y.astype(x.dtype, copy=False)
            alone = clamp is None and z is None  # the bias is all the epilogue
            # into the node's buffer where every reshape of it is a view
            target = into if into is not None and into.flags.c_contiguous else None
            y, added = im2col._conv_f32(
                x, w, win, group, threads, filters, b if alone else None, target
            )
            if not added:
                _add_bias(y, b, threads, clamp, z)
            return y.astype(x.dtype, copy=False)
        y = im2col._conv_numpy(x, w, win, group)
        _add_bias(y, b, threads, clamp, z)
        return y

    if concat is not None:
        channels, offset = concat

        def compute_into(
            x: np.ndarray,
            w: np.ndarray,
            b: np.ndarray | None = None,
            into: np.ndarray | None = None,
        ) -> tuple[np.ndarray]:
            how = lookup(x, w)
            joined, part = concat_buffer(info, into, (x.shape[0], channels, *how.win.out),
                                         x.dtype, offset, w.shape[0])  # fmt: skip
            y = run(x, w, b, None, part, how)
            if y is not part:
                part[...] = y
            return (joined,)

        return compute_into

    if shuffle > 1:

        def compute_shuffled(
            x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None
        ) -> tuple[np.ndarray]:
            how = lookup(x, w)
            gemm_call, call = how.pointwise, how.call
            gemm_packs = pointwise_packs
            if (
                gemm_call is not None
                and group == shuffle
                and gemm_packs is not None
                and selection.POINTWISE_GEMM
            ):
                # the GEMM writes each group's rows where the shuffle puts them
                y = pointwise._conv_pointwise(x, w, b, None, gemm_call, threads, clamp, gemm_packs, None,
                                    group, interleave=True)  # fmt: skip
                return (y.astype(x.dtype, copy=False),)
            if (
                call is not None
                and call.flat
                and not call.vector
                and group == shuffle
                and x.dtype == _F32
            ):
                # so does the direct kernel (flat mode, all groups at once)
                y = direct._conv_direct(x, w, b, None, how.win, threads, clamp, packs, group, call,
                                 interleave=True)  # fmt: skip
                return (y,)
            return (pointwise.shuffle_channels(run(x, w, b, None, how=how), shuffle, threads),)

        return compute_shuffled

    if pool is not None:
        stage = pool

        def compute_pooled(
            x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None
        ) -> tuple[np.ndarray, ...]:
            how = lookup(x, w)
            if how.call is not None and group == 1:
                pool_win = stage.window_for(how.win.out)
                if direct._fused_pool(how.call, how.win, pool_win, x):
                    return (direct._conv_direct_pool(x, w, b, pool_win, threads, clamp, packs,
                                              how.call),)  # fmt: skip
            return tuple(stage.pool(run(x, w, b, None, how=how)))

        return compute_pooled

    if residual:

        def compute_residual(
            x: np.ndarray, w: np.ndarray, z: np.ndarray, b: np.ndarray | None = None
        ) -> tuple[np.ndarray]:
            return (run(x, w, b, z),)

        return compute_residual

    def compute(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> tuple[np.ndarray]:
        return (run(x, w, b, None),)

    return compute


class _ConcatBuffer(np.ndarray):
    """A tensor a FusedConvConcat kernel made (see :func:`concat_buffer`):
    the only kind of input a kernel writes into."""


def concat_buffer(
    info: NodeInfo,
    into: np.ndarray | None,
    shape: tuple[int, ...],
    dtype: np.dtype,
    offset: int,
    count: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The joined tensor of a FusedConvConcat chain, as the node returns it,
    and the channels ``[offset, offset + count)`` of it that ``info``'s Conv
    writes. The last node of the chain (its channels end the tensor's)
    returns a plain ndarray view; the others the buffer itself, for the next
    node to write into.

    ``into`` is the last node's output: written in place when a
    FusedConvConcat kernel made it, since nothing else reads it. Anything
    else (a model could feed a graph input or a constant there) is copied
    into a new tensor first, so that no kernel ever writes into a feed or a
    constant.

    Raises:
        ValueError: ``into`` is not of ``shape`` and ``dtype``, or the
            channels are not within ``shape``'s.
    """
    if offset < 0 or offset + count > shape[1]:
        raise ValueError(
            f"{info.describe()}: channels {offset}..{offset + count} of a tensor of {shape[1]}"
        )
    if into is not None and (into.shape != shape or into.dtype != dtype):
        raise ValueError(
            f"{info.describe()}: Into is {into.dtype}{list(into.shape)}, "
            f"the joined tensor {np.dtype(dtype)}{list(shape)}"
        )
    if type(into) is _ConcatBuffer:
        full = into
    else:
        full = np.empty(shape, dtype).view(_ConcatBuffer)
        if into is not None:
            full[...] = into
    part = full[:, offset : offset + count]
    return (full if offset + count < shape[1] else full.view(np.ndarray)), part
