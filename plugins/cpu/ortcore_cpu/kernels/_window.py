"""Sliding-window geometry shared by Conv, ConvTranspose and the pools:
output sizes and pads from ``auto_pad``, ``pads``, ``strides``, ``dilations``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

Int3 = tuple[int, int, int]


@dataclass(frozen=True)
class Window:
    """Geometry of a sliding window over ``len(kernel)`` spatial dims."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int, ...]
    pads_end: tuple[int, ...]
    out: tuple[int, ...]

    def padded3(self) -> tuple[Int3, Int3, Int3, Int3, Int3, Int3]:
        """Return (kernel, strides, pads_begin, pads_end, dilations, out) each
        widened to 3 dims with leading 1s (0s for pads)."""
        lead = 3 - len(self.kernel)
        one, zero = (1,) * lead, (0,) * lead
        return (
            cast(Int3, one + self.kernel),
            cast(Int3, one + self.strides),
            cast(Int3, zero + self.pads_begin),
            cast(Int3, zero + self.pads_end),
            cast(Int3, one + self.dilations),
            cast(Int3, one + self.out),
        )


def _ints(value: Sequence[int] | None, n: int, default: int) -> tuple[int, ...]:
    if value is None or len(value) == 0:
        return (default,) * n
    if len(value) != n:
        raise ValueError(f"expected {n} values, got {list(value)}")
    return tuple(int(v) for v in value)


def split_same_pads(total: Sequence[int], auto_pad: str) -> tuple[list[int], list[int]]:
    """Split each dim's total padding into (begin, end) pads for ``SAME_UPPER``
    (the extra one at the end) or ``SAME_LOWER`` (at the beginning)."""
    if auto_pad == "SAME_UPPER":
        begin = [t // 2 for t in total]
    else:
        begin = [t - t // 2 for t in total]
    return begin, [t - b for t, b in zip(total, begin, strict=True)]


def window(
    spatial: Sequence[int],
    kernel: Sequence[int],
    *,
    auto_pad: str = "NOTSET",
    pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
    dilations: Sequence[int] | None = None,
    ceil_mode: bool = False,
) -> Window:
    """Compute pads and output size for a convolution or pooling window.

    With ``ceil_mode`` (pooling) a last window that would start in the end
    padding is dropped, as onnxruntime and PyTorch do.
    """
    n = len(spatial)
    kernel = _ints(kernel, n, 1)
    strides_ = _ints(strides, n, 1)
    dil = _ints(dilations, n, 1)
    if any(s <= 0 for s in strides_) or any(d <= 0 for d in dil):
        raise ValueError("strides and dilations must be positive")
    span = [(k - 1) * d + 1 for k, d in zip(kernel, dil, strict=True)]
    auto_pad = auto_pad or "NOTSET"
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = [math.ceil(i / s) for i, s in zip(spatial, strides_, strict=True)]
        total = [
            max((o - 1) * s + k - i, 0)
            for o, s, k, i in zip(out, strides_, span, spatial, strict=True)
        ]
        begin, end = split_same_pads(total, auto_pad)
    elif auto_pad == "VALID":
        begin = end = [0] * n
        out = [
            max(math.ceil((i - k + 1) / s), 0)
            for i, k, s in zip(spatial, span, strides_, strict=True)
        ]
    elif auto_pad == "NOTSET":
        p = _ints(pads, 2 * n, 0)
        begin, end = list(p[:n]), list(p[n:])
        out = []
        for i, k, s, b, e in zip(spatial, span, strides_, begin, end, strict=True):
            full = i + b + e - k
            if full < 0:
                out.append(0)
                continue
            o = (math.ceil(full / s) if ceil_mode else full // s) + 1
            if ceil_mode and (o - 1) * s >= i + b:
                o -= 1
            out.append(o)
    else:
        raise ValueError(f"unknown auto_pad {auto_pad!r}")
    return Window(kernel, strides_, dil, tuple(begin), tuple(end), tuple(out))


def kernel_offsets(shape: Sequence[int]) -> np.ndarray:
    """Return every index of a kernel of ``shape`` as rows (row-major order)."""
    return np.stack(np.unravel_index(np.arange(math.prod(shape)), tuple(shape)), axis=1)


def strided_slice(
    offset: Sequence[int], steps: Sequence[int], count: Sequence[int]
) -> tuple[Any, ...]:
    """Index of the trailing dims picking ``count[i]`` elements from
    ``offset[i]`` every ``steps[i]`` (led by an Ellipsis)."""
    picks = (
        slice(o, o + s * (c - 1) + 1, s) if c > 0 else slice(0, 0)
        for o, s, c in zip(offset, steps, count, strict=True)
    )
    return (Ellipsis, *picks)
