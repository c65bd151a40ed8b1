"""1x1 Convs on the provider's packed GEMM (``gemm.pointwise``: the weight
packed once, the input planes read in place, the bias, residual and clamp
added as the output is written; see :data:`POINTWISE_GEMM`), and
ShuffleNet's channel shuffle of a Conv's output.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .. import gemm, shape_ops
from .._common import FilterCache, f32_contiguous, threads_for
from .._window import Window
from .common import Clamp, _epilogue


class _PointwiseCall(NamedTuple):
    """The packed GEMM's call for a 1x1 Conv of one input and weight shape
    (see :func:`_pointwise_call`): worked out once, so that a run does only
    what the arrays need."""

    m: int
    """Output channels."""
    c: int
    """Input channels."""
    p: int
    """Output positions of an image."""
    y: tuple[int, ...]
    """The output's shape."""
    work: int
    """The call's work for :func:`threads_for`."""
    sub: tuple[slice, ...] | None
    """The slices of a strided window's positions, else ``None``."""


def _pointwise_call(
    x_shape: tuple[int, ...], w_shape: tuple[int, ...], win: Window, group: int
) -> _PointwiseCall:
    """:class:`_PointwiseCall` of an input and weight of these shapes."""
    m, c, p = w_shape[0], x_shape[1], math.prod(win.out)
    sub = None
    if any(st != 1 for st in win.strides):
        sub = (slice(None), slice(None), *(slice(None, None, st) for st in win.strides))
    return _PointwiseCall(m, c, p, (x_shape[0], m, *win.out), m * p * (c // group) // 8, sub)


def _conv_pointwise(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None,
    z: np.ndarray | None,
    call: _PointwiseCall,
    threads: int,
    clamp: Clamp | None,
    packs: FilterCache,
    out: np.ndarray | None = None,
    group: int = 1,
    interleave: bool = False,
) -> np.ndarray:
    """A 1x1 Conv (see :data:`POINTWISE_GEMM`) of float32 ``x`` (N, C, *S)
    in ``group`` groups with its bias, residual ``z`` and clamp; ``call``:
    :func:`_pointwise_call` of these shapes; ``packs`` keeps the weight
    packed (:func:`_pack_pointwise`). Strided windows read the positions
    they take, copied from the input first. The result goes to ``out`` if
    given (the output's shape, each image's channels C-contiguous). With
    ``interleave`` its channels come out shuffled in ``group`` groups
    (:func:`shuffle_channels`), written so by the GEMM."""
    if call.sub is not None:
        x = x[call.sub]
    x = f32_contiguous(x)
    y = np.empty(call.y, np.float32) if out is None else out
    bias, z, lo, hi = _epilogue(b, z, y.shape, clamp)
    ap = packs.transform(w)
    share = threads_for(call.work, threads)
    m, c, p = call.m, call.c, call.p
    if len(y) == 1 and y.flags.c_contiguous:  # one image: its planes as they are
        gemm.ext.pointwise(
            ap, m, x.reshape(c, p), y.reshape(m, p), bias,
            None if z is None else z.reshape(m, p), lo, hi, share, group, interleave,
        )  # fmt: skip
        return y
    for i in range(len(y)):
        yi = y[i]
        if not yi.flags.c_contiguous:
            raise ValueError("the output's channels of one image are not contiguous")
        gemm.ext.pointwise(
            ap, m, x[i].reshape(c, p), yi.reshape(m, p), bias,
            None if z is None else z[i].reshape(m, p), lo, hi, share, group, interleave,
        )  # fmt: skip
    return y


def shuffle_channels(y: np.ndarray, groups: int, threads: int) -> np.ndarray:
    """ShuffleNet's channel shuffle of ``y`` (N, C, ...): the Reshape to
    (N, groups, C / groups, ...), Transpose of axes 1 and 2 and Reshape
    back, as one copy; channel ``j * groups + i`` of the result is channel
    ``i * C / groups + j`` of ``y``.

    Raises:
        ValueError: C is not a multiple of ``groups``.
    """
    n, c = y.shape[:2]
    if groups < 1 or c % groups:
        raise ValueError(f"shuffle of {c} channels in {groups} groups")
    if groups == 1 or c == groups:
        return y
    split = y.reshape(n, groups, c // groups, -1)
    return shape_ops.transpose_copy(split, [0, 2, 1, 3], threads).reshape(y.shape)


def _pack_pointwise(w: np.ndarray, group: int = 1) -> np.ndarray:
    """A 1x1 Conv's weight (M, C / group, 1, ...) packed for
    ``gemm.pointwise``: each group's (M / group, C / group) a row."""
    return gemm.ext.pack_a_batch(f32_contiguous(w).reshape(group, w.shape[0] // group, -1))
