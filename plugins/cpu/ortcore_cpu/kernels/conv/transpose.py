"""ConvTranspose: a matmul per group, then Cython col2im (float32 and float16,
1-3 spatial dims) or a numpy scatter-add over the kernel's offsets.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from ep_sdk import Compute, NodeInfo

from .. import registry
from .._common import FLOATS, thread_count, threads_for
from .._window import Window, check_window_attrs, kernel_offsets, split_same_pads, strided_slice
from . import common
from .common import _add_bias

_SAME = ("SAME_UPPER", "SAME_LOWER")


def _transpose_window(info: NodeInfo, spatial: tuple[int, ...], kernel: tuple[int, ...]) -> Window:
    """Pads and output size of ConvTranspose (ONNX spec formulas)."""
    a = info.attrs
    nsp = len(spatial)
    strides = tuple(a.get("strides") or (1,) * nsp)
    dil = tuple(a.get("dilations") or (1,) * nsp)
    out_pad = tuple(a.get("output_padding") or (0,) * nsp)
    auto_pad = a.get("auto_pad", "NOTSET") or "NOTSET"
    span = [(k - 1) * d + 1 for k, d in zip(kernel, dil, strict=True)]
    full = [
        s * (i - 1) + op + k for s, i, op, k in zip(strides, spatial, out_pad, span, strict=True)
    ]
    out_shape = list(a.get("output_shape") or [])
    if len(out_shape) > nsp:
        out_shape = out_shape[-nsp:]
    if out_shape or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        target = out_shape or [i * s for i, s in zip(spatial, strides, strict=True)]
        total = [f - t for f, t in zip(full, target, strict=True)]
        begin, end = split_same_pads(total, auto_pad)
        if out_shape:  # past the full output: zeros at the end, as onnxruntime
            if any(t <= -s for t, s in zip(total, strides, strict=True)):
                raise ValueError(
                    f"{info.describe()}: output_shape {out_shape} is a stride or more past "
                    f"the full output {full}"
                )
            begin = [b if t >= 0 else 0 for b, t in zip(begin, total, strict=True)]
            end = [e if t >= 0 else t for e, t in zip(end, total, strict=True)]
    elif auto_pad == "VALID":
        begin = end = [0] * nsp
    else:
        pads = list(a.get("pads") or [0] * (2 * nsp))
        begin, end = pads[:nsp], pads[nsp:]
    out = tuple(f - b - e for f, b, e in zip(full, begin, end, strict=True))
    return Window(kernel, strides, dil, tuple(begin), tuple(end), out)


def _conv_transpose(
    x: np.ndarray, w: np.ndarray, win: Window, group: int, threads: int
) -> np.ndarray:
    n, c = x.shape[:2]
    mg = w.shape[1]
    cg, m = c // group, mg * group
    ksize = math.prod(win.kernel)
    sp_in = x.shape[2:]
    p_in = math.prod(sp_in)
    dtype = np.float32 if x.dtype == np.float16 else x.dtype
    # col[n, g] = W_g^T @ x_g: (Mg * ksize, P_in) per group.
    wt = w.astype(dtype, copy=False).reshape(group, cg, mg * ksize).transpose(0, 2, 1)
    col = np.matmul(wt, x.astype(dtype, copy=False).reshape(n, group, cg, p_in))
    if dtype == np.float32 and len(sp_in) <= 3 and min(win.out, default=1) > 0:
        y = np.zeros((n, m, *win.out), np.float32)
        k3, s3, pb3, _, d3, o3 = Window(
            win.kernel, win.strides, win.dilations, win.pads_begin, win.pads_end, tuple(sp_in)
        ).padded3()
        lead = (1,) * (3 - len(sp_in))
        for i in range(n):
            y5 = y[i].reshape(m, *lead, *win.out)
            for g in range(group):
                common.ext.col2im(
                    np.ascontiguousarray(col[i, g]), y5[g * mg : (g + 1) * mg],
                    *k3, *s3, *pb3, *d3, *o3, threads_for(col[i, g].size, threads),
                )  # fmt: skip
        return y
    # numpy path: scatter-add every kernel offset into a buffer covering the
    # full (unpadded) output, then crop the pads.
    col = col.reshape(n, m, ksize, *sp_in)
    full = [
        max(s * (i - 1) + (k - 1) * d + 1, b + o)
        for s, i, k, d, b, o in zip(
            win.strides, sp_in, win.kernel, win.dilations, win.pads_begin, win.out, strict=True
        )
    ]
    buf = np.zeros((n, m, *full), dtype)
    for k, off in enumerate(kernel_offsets(win.kernel)):
        start = [int(o) * d for o, d in zip(off, win.dilations, strict=True)]
        buf[strided_slice(start, win.strides, sp_in)] += col[:, :, k]
    crop: tuple[Any, ...] = (
        Ellipsis,
        *(slice(b, b + o) for b, o in zip(win.pads_begin, win.out, strict=True)),
    )
    return np.ascontiguousarray(buf[crop])


@registry.kernel("ConvTranspose", since=1, until=10, types={"T": FLOATS})
@registry.kernel("ConvTranspose", since=11, until=21, types={"T": FLOATS})
@registry.kernel("ConvTranspose", since=22, types={"T": FLOATS})
def conv_transpose(info: NodeInfo) -> Compute:
    """ConvTranspose with groups, dilations, output_padding and output_shape."""
    check_window_attrs(info.attrs)
    out_pad = info.attrs.get("output_padding")
    if out_pad is not None and any(int(p) < 0 for p in out_pad):
        raise ValueError(f"attribute output_padding must not be negative, got {list(out_pad)}")
    group = int(info.attrs.get("group", 1))
    kernel_shape = info.attrs.get("kernel_shape")
    auto_pad = info.attrs.get("auto_pad", "NOTSET") or "NOTSET"
    threads = thread_count(info)

    def compute(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> tuple[np.ndarray]:
        kernel = tuple(int(k) for k in (kernel_shape or w.shape[2:]))
        win = _transpose_window(info, tuple(x.shape[2:]), kernel)
        if min(win.out, default=0) < 0:
            raise ValueError(
                f"{info.describe()}: calculated output size {list(win.out)} is negative; "
                "check pads, strides, dilations, output_padding and output_shape"
            )
        # A negative end pad (output_shape past the full output) is zero-filled.
        # SAME pads are negative where the kernel is narrower than the stride
        # (the output, input * stride, is wider than the full result): a
        # negative begin pad there is as many leading zeros, as onnx.reference.
        lead = tuple(max(-p, 0) for p in win.pads_begin)
        if any(lead) and (info.attrs.get("output_shape") or auto_pad not in _SAME):
            raise ValueError(f"{info.describe()}: output_shape needs negative pads")
        if any(lead):
            begin = tuple(p + s for p, s in zip(win.pads_begin, lead, strict=True))
            inner = tuple(o - s for o, s in zip(win.out, lead, strict=True))
            win = Window(win.kernel, win.strides, win.dilations, begin, win.pads_end, inner)
        y = _conv_transpose(x, w, win, group, threads)
        if any(lead):
            y = np.pad(y, [(0, 0), (0, 0), *((s, 0) for s in lead)])
        _add_bias(y, b, threads)
        return (y.astype(x.dtype, copy=False),)

    return compute
