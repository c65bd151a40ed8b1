"""The general paths of a Conv: for float32 with 1-3 spatial dims, Winograd
where it takes the Conv, the depthwise kernel, a straight BLAS matmul for
1x1 windows, else Cython im2col and a BLAS matmul; for other dtypes and
ranks, numpy, looping over the kernel's offsets rather than elements.
"""

from __future__ import annotations

import math

import numpy as np

from .._common import f32_contiguous, threads_for_memory_bound
from .._window import Window, kernel_offsets, strided_slice
from . import common, selection, winograd
from .common import _COL_SCRATCH_MAX, _scratch


def _conv_f32(
    x: np.ndarray,
    w: np.ndarray,
    win: Window,
    group: int,
    threads: int,
    filters: winograd.WinogradFilters | None = None,
    bias: np.ndarray | None = None,
    out: np.ndarray | None = None,
) -> tuple[np.ndarray, bool]:
    """Convolution of float32 ``x`` (N, C, *S), 1-3 spatial dims, and whether
    it added ``bias`` (one value per output channel) too: the depthwise
    kernel starts from it instead of zeros, the other paths leave it to the
    caller. The result goes to ``out`` if given: a C-contiguous float32
    array of the output's shape (a FusedConvConcat's channels of one image).

    ``filters`` caches the Winograd filter transform of a constant ``w``;
    without it the transform is computed at each call that needs it.
    """
    n, c = x.shape[:2]
    m = w.shape[0]
    cg, mg = c // group, m // group
    out_sp = win.out
    p = math.prod(out_sp)
    if n * m * p == 0:
        return np.empty((n, m, *out_sp), np.float32), False
    if selection._use_winograd(x, w, win, group, filters is not None):
        u, packed = winograd._winograd_operands(w, filters)
        return winograd._conv_winograd(f32_contiguous(x), u, win, threads, packed, out=out), False
    if out is not None and not (out.flags.c_contiguous and out.dtype == np.float32):
        raise ValueError("a Conv's output buffer must be C-contiguous float32")
    y = np.empty((n, m, *out_sp), np.float32) if out is None else out
    ksize = math.prod(win.kernel)
    x = f32_contiguous(x)
    w = f32_contiguous(w)
    k3, s3, pb3, _, d3, o3 = win.padded3()
    threads = threads_for_memory_bound(c * ksize * p, threads)
    if group == c and mg == 1 and len(out_sp) <= 2:
        # the kernel starts each channel from its bias (or from zero)
        if bias is not None and bias.shape != (m,):
            raise ValueError(f"bias of shape {list(bias.shape)} for {m} output channels")
        b = np.zeros(m, np.float32) if bias is None else f32_contiguous(bias)
        shape3 = (c, *((1,) * (2 - len(out_sp))), *x.shape[2:])
        for i in range(n):
            common.ext.depthwise2d(
                x[i].reshape(shape3),
                w.reshape(c, k3[1], k3[2]),
                y[i].reshape(c, o3[1], o3[2]),
                s3[1], s3[2], pb3[1], pb3[2], d3[1], d3[2], threads, b,
            )  # fmt: skip
        return y, bias is not None
    w2 = w.reshape(group, mg, cg * ksize)
    if ksize == 1 and not any(win.pads_begin) and not any(win.pads_end):
        if any(s != 1 for s in win.strides):
            sub = (slice(None), slice(None), *(slice(None, None, s) for s in win.strides))
            x = np.ascontiguousarray(x[sub])
        cols = x.reshape(n, group, cg, p)
        for i in range(n):
            if group == 1:
                np.matmul(w2[0], cols[i, 0], out=y[i].reshape(m, p))
            else:
                np.matmul(w2, cols[i], out=y[i].reshape(group, mg, p))
        return y, False
    rows = c * ksize
    # im2col's buffer lives only for this call: small ones come from the
    # thread's scratch (fresh memory page-faults on first touch, which costs
    # as much as a small convolution); huge ones are allocated and freed.
    if rows * p <= _COL_SCRATCH_MAX:
        col = _scratch.get(rows * p).reshape(rows, p)
    else:
        col = np.empty((rows, p), np.float32)
    x5 = x.reshape(n, c, *((1,) * (3 - len(out_sp))), *x.shape[2:])
    for i in range(n):
        common.ext.im2col(x5[i], col, *k3, *s3, *pb3, *d3, *o3, threads)
        if group == 1:
            np.matmul(w2[0], col, out=y[i].reshape(m, p))
        else:
            np.matmul(w2, col.reshape(group, cg * ksize, p), out=y[i].reshape(group, mg, p))
    return y, False


def _conv_numpy(x: np.ndarray, w: np.ndarray, win: Window, group: int) -> np.ndarray:
    """Convolution without bias for any dtype and spatial rank."""
    n, c = x.shape[:2]
    m = w.shape[0]
    cg, mg = c // group, m // group
    ksize = math.prod(win.kernel)
    pad = [(0, 0), (0, 0), *zip(win.pads_begin, win.pads_end, strict=True)]
    xp = np.pad(x, pad)
    col = np.empty((n, c, ksize, *win.out), x.dtype)
    for k, off in enumerate(kernel_offsets(win.kernel)):
        start = [int(o) * d for o, d in zip(off, win.dilations, strict=True)]
        col[:, :, k] = xp[strided_slice(start, win.strides, win.out)]
    col = col.reshape(n, group, cg * ksize, math.prod(win.out))
    y = np.matmul(w.reshape(group, mg, cg * ksize), col)
    return y.reshape(n, m, *win.out).astype(x.dtype, copy=False)
