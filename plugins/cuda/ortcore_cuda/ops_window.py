"""Window geometry the window ops share (Conv, the pools, ConvTranspose, Col2Im, LpPool, ...).

Output sizes and pads from a node's kernel shape, strides, dilations, pads,
``auto_pad`` and ``ceil_mode``, in the two forms the kernels take: the 1-D
and 2-D kernels' keyword dict (:func:`window_2d`) and the N-D kernels'
``WinArgs`` record (:func:`window_args`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from ep_sdk import NodeInfo

from .kernels import image as im
from .tensor import CudaTensor

__all__ = [
    "SAME_AUTO_PADS",
    "divisor_ends",
    "pad3",
    "pool_plan",
    "window_2d",
    "win_args",
    "window_args",
]

SAME_AUTO_PADS = ("SAME_UPPER", "SAME_LOWER")
"""The ``auto_pad`` values that pad to keep the size (over the stride)."""


def pad3(values: Sequence[int], fill: int) -> list[int]:
    """``values`` with leading ``fill`` up to the window kernels' three dims."""
    return [fill] * (im.WIN_DIMS - len(values)) + [int(v) for v in values]


def win_args(
    inp: Sequence[int],
    out: Sequence[int],
    k: Sequence[int],
    s: Sequence[int],
    p: Sequence[int],
    d: Sequence[int],
) -> np.ndarray:
    """The ``WinArgs`` record of a window: input and output dims, kernel,
    strides, begin pads and dilations (padded to three dims)."""
    return im.WIN_ARGS.pack(
        inp=pad3(inp, 1),
        out=pad3(out, 1),
        k=pad3(k, 1),
        s=pad3(s, 1),
        p=pad3(p, 0),
        d=pad3(d, 1),
    )


def window_args(
    info: NodeInfo, x: CudaTensor, kernel: Sequence[int], *, pool: bool = False
) -> tuple[list[int], Any]:
    """The output dims and the ``WinArgs`` of a window op (Conv, MaxPool,
    AveragePool) on ``x`` (``N, C, *spatial``, up to three spatial dims),
    from the node's strides, dilations, pads, auto_pad and ceil_mode. A
    ``pool``'s sizes round toward zero (see :func:`pool_plan`) and its end
    pads are those its average counts to (:func:`divisor_ends`)."""
    nd = x.ndim - 2
    strides = list(info.attr("strides") or [1] * nd)
    dilations = list(info.attr("dilations") or [1] * nd)
    out, pads = pool_plan(
        x.shape[2:],
        list(kernel),
        strides=strides,
        dilations=dilations,
        pads=info.attr("pads"),
        auto_pad=str(info.attr("auto_pad", "NOTSET")),
        ceil_mode=bool(info.attr("ceil_mode", 0)),
        partial=pool,
    )
    args = win_args(x.shape[2:], out, kernel, strides, pads[:nd], dilations)
    ends = divisor_ends(info, pads[nd:], kernel, dilations) if pool else pads[nd:]
    args["e"] = pad3(ends, 0)
    return out, args


def divisor_ends(
    info: NodeInfo, ends: Sequence[int], kernel: Sequence[int], dilations: Sequence[int]
) -> list[int]:
    """The end pads within which an AveragePool with ``count_include_pad``
    counts a window's positions: the node's, or, for opsets 7-18 with
    ``ceil_mode`` 0, far enough that every position counts (onnxruntime's
    kernel of those opsets divides by the whole kernel; they differ only on
    a window wider than the padded input), as the CPU provider's."""
    whole = (
        info.op_type == "AveragePool"
        and info.opset < 19
        and not info.attr("ceil_mode", 0)
        and bool(info.attr("count_include_pad", 0))
    )
    if not whole:
        return list(ends)
    return [e + (k - 1) * d + 1 for e, k, d in zip(ends, kernel, dilations, strict=True)]


def pool_plan(
    dims: Sequence[int],
    kernel: Sequence[int],
    *,
    strides: Sequence[int] | None = None,
    dilations: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    auto_pad: str = "NOTSET",
    ceil_mode: bool = False,
    partial: bool = False,
) -> tuple[list[int], list[int]]:
    """A window's output dims and pads (before for every dim, then after;
    ``auto_pad`` applied), as the 1-D and 2-D pools of ``ops_nn``. With
    ``partial`` (pools) a size rounds toward zero, so that a window wider
    than the padded input gives one output, as onnxruntime's pools."""
    n = len(dims)
    s = list(strides or [1] * n)
    d = list(dilations or [1] * n)
    p = list(pads or [0] * (2 * n))
    out = []
    for i in range(n):
        span = (kernel[i] - 1) * d[i] + 1
        if auto_pad in SAME_AUTO_PADS:
            o = -(-dims[i] // s[i])
            total = max((o - 1) * s[i] + span - dims[i], 0)
            first = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
            p[i], p[i + n] = first, total - first
        elif auto_pad == "VALID":
            p[i] = p[i + n] = 0
        padded = dims[i] + p[i] + p[i + n] - span
        toward_zero = ceil_mode or (partial and padded < 0)
        o = (-(-padded // s[i]) if toward_zero else padded // s[i]) + 1
        if ceil_mode and (o - 1) * s[i] >= dims[i] + p[i]:
            o -= 1
        out.append(o)
    return out, p


def window_2d(
    info: NodeInfo, x: CudaTensor, kernel: Sequence[int], *, pool: bool = False
) -> dict[str, int]:
    """Output size, strides, pads and dilations of a 1-D or 2-D window op on
    ``x`` (NCW or NCHW), as NCHW: 1-D runs as height 1. A ``pool``'s sizes
    round toward zero (a window wider than the padded input gives one
    output, as onnxruntime's and the CPU provider's) and come with the end
    pads ``eh``, ``ew`` its average counts to (:func:`divisor_ends`)."""
    dims = list(x.shape[2:])
    k = list(kernel)
    strides = list(info.attr("strides") or [1] * len(k))
    dilations = list(info.attr("dilations") or [1] * len(k))
    pads = list(info.attr("pads") or [0] * (2 * len(k)))
    auto = info.attr("auto_pad", "NOTSET")
    ceil = bool(info.attr("ceil_mode", 0))
    out = []
    for i, d in enumerate(dims):
        span = (k[i] - 1) * dilations[i] + 1
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-d // strides[i])
            total = max((o - 1) * strides[i] + span - d, 0)
            first = total // 2 if auto == "SAME_UPPER" else total - total // 2
            pads[i], pads[i + len(k)] = first, total - first
        elif auto == "VALID":
            pads[i] = pads[i + len(k)] = 0
        padded = d + pads[i] + pads[i + len(k)] - span
        toward_zero = ceil or (pool and padded < 0)
        o = (-(-padded // strides[i]) if toward_zero else padded // strides[i]) + 1
        if ceil and (o - 1) * strides[i] >= d + pads[i]:
            o -= 1  # the last window must start inside the input or its left pad
        out.append(o)
    if len(dims) == 1:  # 1-D as 2-D of height 1
        dims, k, out = [1, *dims], [1, *k], [1, *out]
        strides, dilations, pads = [1, *strides], [1, *dilations], [0, pads[0], 0, pads[1]]
    ends: dict[str, int] = {}
    if pool:
        eh, ew = divisor_ends(info, pads[2:], k, dilations)
        ends = {"eh": eh, "ew": ew}
    return {
        "h": dims[0],
        "w": dims[1],
        "kh": k[0],
        "kw": k[1],
        "oh": out[0],
        "ow": out[1],
        "sh": strides[0],
        "sw": strides[1],
        "ph": pads[0],
        "pw": pads[1],
        "dh": dilations[0],
        "dw": dilations[1],
        **ends,
    }
