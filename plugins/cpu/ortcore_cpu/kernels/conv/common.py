"""What every convolution path shares: the build of the Cython helpers this
CPU runs fastest (``ext``), the epilogue (a Conv's bias, residual and clamp,
added in a pass of its own or checked for a kernel that adds them as it
writes) and each thread's scratch buffer.

The other modules of the package read ``ext`` as ``common.ext`` at each call,
so that a test can stand another build in for it here.
"""

from __future__ import annotations

import threading

import numpy as np

from .._common import f32_contiguous, threads_for_memory_bound
from .._isa import best_build

ext = best_build("conv")
"""The build of the Cython convolution helpers this CPU runs fastest (``_isa.py``)."""

_NO_BIAS = np.empty(0, np.float32)
_NO_CLAMP = (-np.inf, np.inf)

Clamp = tuple[float, float]
"""Bounds ``(lo, hi)`` a Conv's output is clamped to: its fused Relu or Clip."""


BIAS_PASS_WORK = 4
"""Elements of :func:`threads_for_memory_bound`'s work that one output value
of a Conv's separate bias pass (after a BLAS product: bias, residual and
clamp) weighs. Counted as half, ResNet-50's passes over 256 x 56 x 56
values ran on one thread inside the model (200 us each, three a run).
Counted as four (2-core Zen 3 VM, the same session's runs alternating):
ResNet-50 0.97x the time, SqueezeNet 0.99x, Inception v2 and ShuffleNet
0.995x, DenseNet and Inception v1 unchanged (two and sixteen did no better)."""


def _add_bias(
    y: np.ndarray,
    b: np.ndarray | None,
    threads: int,
    clamp: Clamp | None = None,
    z: np.ndarray | None = None,
) -> None:
    """Add the bias ``b`` (one value per output channel) and the residual ``z``
    (``y``'s shape) to ``y`` (N, M, ...) in place, then clamp ``y`` to
    ``clamp`` if given; one Cython pass for float32.

    Raises:
        ValueError: ``b`` is not of shape (M,), or ``z`` not of ``y``'s shape.
    """
    if b is not None and b.shape != y.shape[1:2]:
        raise ValueError(f"bias of shape {list(b.shape)} for {y.shape[1]} output channels")
    if z is not None and z.shape != y.shape:
        raise ValueError(f"residual Z of shape {list(z.shape)} for an output of {list(y.shape)}")
    if (b is None and clamp is None and z is None) or y.size == 0:
        return
    n, m = y.shape[:2]
    rows = y.reshape(n * m, -1)
    if y.dtype == np.float32 and y.flags.c_contiguous:
        lo, hi = clamp if clamp is not None else _NO_CLAMP
        bias = _NO_BIAS if b is None else f32_contiguous(b)
        share = threads_for_memory_bound(y.size * BIAS_PASS_WORK, threads)
        if z is None:
            ext.bias_clamp(rows, bias, lo, hi, share)
        else:
            ext.bias_add_clamp(rows, bias, f32_contiguous(z).reshape(n * m, -1), lo, hi, share)
        return
    if b is not None:
        rows += np.tile(b.astype(y.dtype), n)[:, None]
    if z is not None:
        y += z.astype(y.dtype, copy=False)
    if clamp is not None:
        np.clip(y, *clamp, out=y)


class _Scratch(threading.local):
    """Per-thread float32 buffer for Winograd's V and M and for small im2col
    buffers, kept between calls: fresh memory from the OS page-faults on
    first touch, which costs as much as the transforms themselves. Holds
    about ``_WINOGRAD_BLOCK_BYTES`` or ``_COL_SCRATCH_MAX`` floats, whichever
    a thread needed most (more only for images so wide that one Winograd tile
    row needs more)."""

    buf: np.ndarray | None = None

    def get(self, size: int) -> np.ndarray:
        """The first ``size`` elements of this thread's buffer (grown if needed)."""
        if self.buf is None or self.buf.size < size:
            self.buf = None
            self.buf = np.empty(size, np.float32)
        return self.buf[:size]


_scratch = _Scratch()

_COL_SCRATCH_MAX = 4 << 20
"""Floats (16 MiB) up to which im2col's buffer is the thread's scratch."""


_Epilogue = tuple[np.ndarray, "np.ndarray | None", float, float]
"""What a kernel that writes a Conv's output adds as it writes (checked by
:func:`_epilogue`): the bias (float32 (M,), or empty: none), the residual
(contiguous float32 of the output's shape, or None) and the clamp's bounds."""

_F32 = np.dtype(np.float32)


def _epilogue(
    b: np.ndarray | None, z: np.ndarray | None, shape: tuple[int, ...], clamp: Clamp | None
) -> _Epilogue:
    """The bias, residual and clamp bounds of a Conv whose output has
    ``shape`` (N, M, ...), checked against it (a plain tuple: this runs for
    every Conv of every run).

    Raises:
        ValueError: ``b`` is not of shape (M,), or ``z`` not of ``shape``.
    """
    if b is None:
        bias = _NO_BIAS
    elif b.shape != (shape[1],):
        raise ValueError(f"bias of shape {list(b.shape)} for {shape[1]} output channels")
    elif b.dtype == _F32 and b.flags.c_contiguous:
        bias = b
    else:
        bias = f32_contiguous(b)
    if z is not None:
        if z.shape != tuple(shape):
            raise ValueError(f"residual Z of shape {list(z.shape)} for an output of {list(shape)}")
        z = f32_contiguous(z)
    lo, hi = clamp if clamp is not None else _NO_CLAMP
    return bias, z, lo, hi
