"""Integer convolutions on the native 8-bit GEMM: QLinearConv's and
ConvInteger's 1-D and 2-D cases (NCHW).

Each group's weights (M/group, C/group * kh * kw) are packed once, as the
GEMM's A, when they are a constant initializer; the input's columns are
packed straight from its planes, as B, by the GEMM's im2col (padding reads
the input's zero point, so that it adds nothing), or read as they are for a
1x1 convolution of stride 1 without padding. The output channels are A's
rows, so each image's result lands in NCHW order. A depthwise convolution
(one input and one output channel per group) runs a direct loop instead.
Everything else (3-D, other types) stays on the numpy im2col.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ._common import threads_for
from ._qgemm import _SIGNED, EXACT_K, _zero_vector, ext

MACS_PER_UNIT = 128
"""Multiply-adds of a convolution that weigh as one unit of
:func:`threads_for`'s work (one element of a typical elementwise loop)."""

ConvPads = Callable[
    [Sequence[int], Sequence[int]], tuple[list[int], list[int], list[int], list[int]]
]


class QConv:
    """The native integer convolution of one node.

    Args:
        group: the node's ``group``.
        pads: ``pads(spatial, kernel)`` -> strides, dilations, pads at the
            start and pads at the end, for one input shape.
        constant_weight: whether the weight (and its zero point) are the
            same arrays at every run, so that their packing is kept.
    """

    def __init__(self, group: int, pads: ConvPads, constant_weight: bool) -> None:
        self.group = group
        self.pads = pads
        self.constant = constant_weight
        self._key: tuple[Any, Any] | None = None
        self._packed: Any = None

    def _weights(
        self, key: tuple[Any, Any], w: np.ndarray, wz: np.ndarray, depthwise: bool, threads: int
    ) -> Any:
        """The packed weights: per group A panels, or the depthwise filters
        less their zero points; kept for a constant weight, while ``key``
        (the weight and zero point the node was handed) is the same."""
        k = self._key
        if self.constant and k is not None and k[0] is key[0] and k[1] is key[1]:
            return self._packed
        m = w.shape[0]
        if depthwise:
            packed: Any = (w.reshape(m, -1).astype(np.int32) - wz[:, None]).astype(np.int32)
        else:
            g = self.group
            wg = w.reshape(g, m // g, -1)
            zg = wz.reshape(g, m // g)
            packed = [
                ext.pack_a(wg[i].view(np.uint8), _SIGNED[w.dtype], zg[i], False, True, threads)
                for i in range(g)
            ]
        if self.constant:
            self._key, self._packed = key, packed
        return packed

    def run(
        self,
        x: np.ndarray,
        x_zero: Any,
        w: np.ndarray,
        w_zero: Any,
        dtype: np.dtype,
        threads: int,
        mult: np.ndarray | None = None,
        bias: np.ndarray | None = None,
        y_zero: int = 0,
    ) -> np.ndarray | None:
        """The convolution as int32 (``dtype`` int32) or requantized to
        ``dtype`` as ``_qgemm_ref.requantize`` does (float32 ``mult`` and
        ``bias`` one value or one per output channel); None
        where it does not run natively."""
        if x.dtype not in _SIGNED or w.dtype not in _SIGNED or x.ndim not in (3, 4):
            return None
        if w.ndim != x.ndim or x.shape[1] != w.shape[1] * self.group:
            return None
        key = (w, w_zero)
        n, c = x.shape[:2]
        m = w.shape[0]
        g = self.group
        if m % g or (dtype != np.int32 and np.prod(w.shape[1:]) > EXACT_K):
            return None
        xz = _zero_vector(x_zero, 1)
        wz = _zero_vector(w_zero, m)
        if xz is None or wz is None:
            return None
        strides, dil, begin, end = self.pads(x.shape[2:], w.shape[2:])
        one_d = x.ndim == 3
        if one_d:  # 1-D: a 2-D convolution of height 1
            x = x[:, :, None]
            w = w[:, :, None]
            strides, dil, begin, end = [1, *strides], [1, *dil], [0, *begin], [0, *end]
        h, wd = x.shape[2:]
        kh, kw = w.shape[2:]
        oh = (h + begin[0] + end[0] - ((kh - 1) * dil[0] + 1)) // strides[0] + 1
        ow = (wd + begin[1] + end[1] - ((kw - 1) * dil[1] + 1)) // strides[1] + 1
        if oh < 0 or ow < 0:
            return None
        oh, ow = max(oh, 0), max(ow, 0)
        geometry = (kh, kw, strides[0], strides[1], dil[0], dil[1], begin[0], begin[1], oh, ow)
        y = np.empty((n, m, oh, ow), dtype)
        result = y[:, :, 0] if one_d else y
        if y.size == 0:
            return result
        x = np.ascontiguousarray(x)
        sx = _SIGNED[x.dtype]
        xzb = int(xz[0])
        depthwise = g == c and m == c
        packed = self._weights(key, w, wz, depthwise, threads)
        # a thread pays off by the products it computes (a few hundred per
        # ns with VNNI), not by the input it reads; a depthwise one by its
        # outputs (about 1 ns each)
        work = n * m * oh * ow if depthwise else n * oh * ow * w.size // MACS_PER_UNIT
        threads = threads_for(work, threads)
        epi: dict[str, Any] = {}
        if dtype != np.int32:
            mult = np.asarray(mult, np.float32).reshape(-1)
            epi = {"mult": mult, "yzp": int(y_zero)}
            if bias is not None:
                epi["ibias"] = np.asarray(bias).astype(np.int32).reshape(-1)
                if epi["ibias"].size not in (1, m):
                    return None
            if mult.size not in (1, m):
                return None
        xb = x.view(np.uint8)
        if depthwise:
            for i in range(n):
                ext.depthwise(xb[i], sx, xzb, packed, geometry, y[i], nthreads=threads, **epi)
            return result
        if kh == kw == 1 and not any(begin) and not any(end) and strides != [1, 1]:
            # a strided 1x1 convolution reads every sh-th row and sw-th column
            # only: those, copied, are a 1x1 convolution of stride 1
            xb = np.ascontiguousarray(xb[:, :, :: strides[0], :: strides[1]][:, :, :oh, :ow])
            geometry = (1, 1, 1, 1, 1, 1, 0, 0, oh, ow)
        cg, mg = c // g, m // g
        for i in range(n):
            for gi in range(g):
                out = y[i, gi * mg : (gi + 1) * mg].reshape(mg, oh * ow)
                gepi = dict(epi)
                for name in ("mult", "ibias"):
                    v = gepi.get(name)
                    if v is not None and v.size > 1:
                        gepi[name] = v[gi * mg : (gi + 1) * mg]
                xs = xb[i, gi * cg : (gi + 1) * cg]
                ext.conv(packed[gi], xs, sx, xzb, geometry, out, nthreads=threads, **gepi)
        return result
