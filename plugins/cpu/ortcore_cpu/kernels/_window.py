"""Sliding-window geometry shared by Conv, ConvTranspose and the pools:
output sizes and pads from ``auto_pad``, ``pads``, ``strides``, ``dilations``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
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


AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")

MAX_WINDOW_VALUE = 2**31 - 1
"""Largest kernel size, stride, dilation or pad the native loops take (their
index arithmetic must not overflow; no real window comes near it)."""


def check_window_attrs(attrs: Mapping[str, Any], *, kernel_required: bool = False) -> None:
    """Refuse window attributes no input shape can make valid, at session creation.

    The native sliding-window loops rely on kernel sizes, strides and
    dilations >= 1, pads >= 0 (onnxruntime refuses the same attributes) and
    all of them at most ``MAX_WINDOW_VALUE``.

    Raises:
        ValueError: naming the attribute and its value.
    """
    kernel = attrs.get("kernel_shape")
    if kernel_required and not kernel:
        raise ValueError("attribute kernel_shape is required")
    rank = len(kernel) if kernel else None
    for name in ("kernel_shape", "strides", "dilations", "pads"):
        values = attrs.get(name)
        if values is not None and any(int(v) > MAX_WINDOW_VALUE for v in values):
            raise ValueError(
                f"attribute {name} must contain values <= {MAX_WINDOW_VALUE}, got {list(values)}"
            )
    for name, low in (("kernel_shape", 1), ("strides", 1), ("dilations", 1)):
        values = attrs.get(name)
        if values is None or len(values) == 0:
            continue
        if any(int(v) < low for v in values):
            raise ValueError(f"attribute {name} must contain values >= {low}, got {list(values)}")
        if rank is not None and len(values) != rank:
            raise ValueError(f"attribute {name} has {len(values)} values, kernel_shape has {rank}")
    pads = attrs.get("pads")
    if pads is not None and len(pads) > 0:
        if any(int(v) < 0 for v in pads):
            raise ValueError(f"attribute pads must not contain negative values, got {list(pads)}")
        if len(pads) % 2 or (rank is not None and len(pads) != 2 * rank):
            raise ValueError(
                f"attribute pads must hold a begin and an end pad per spatial axis, "
                f"got {list(pads)}"
            )
    auto_pad = attrs.get("auto_pad", "NOTSET") or "NOTSET"
    if auto_pad not in AUTO_PADS:
        raise ValueError(
            f"attribute auto_pad must be one of {', '.join(AUTO_PADS)}, not {auto_pad!r}"
        )
    group = attrs.get("group")
    if group is not None and int(group) < 1:
        raise ValueError(f"attribute group must be >= 1, got {group}")


def _trunc_div(a: int, b: int) -> int:
    """``a / b`` rounded toward zero (C's integer division), for ``b > 0``."""
    return a // b if a >= 0 else -(-a // b)


def window(
    spatial: Sequence[int],
    kernel: Sequence[int],
    *,
    auto_pad: str = "NOTSET",
    pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
    dilations: Sequence[int] | None = None,
    ceil_mode: bool = False,
    partial: bool = True,
) -> Window:
    """Compute pads and output size for a convolution or pooling window.

    Output sizes follow onnxruntime and onnx shape inference: ``(padded -
    span) / stride + 1`` with the division rounded toward zero, so a window
    wider than the padded input still gives one output when the overshoot is
    less than a stride. ``partial=False`` (Conv) refuses a window wider than
    the padded input instead, as onnxruntime does. With ``ceil_mode``
    (pooling) a last window that would start in the end padding is dropped,
    as onnxruntime and PyTorch do.

    Raises:
        ValueError: bad geometry, or an output size below zero.
    """
    n = len(spatial)
    kernel = _ints(kernel, n, 1)
    strides_ = _ints(strides, n, 1)
    dil = _ints(dilations, n, 1)
    if any(s <= 0 for s in strides_) or any(d <= 0 for d in dil):
        raise ValueError("strides and dilations must be positive")
    if any(k <= 0 for k in kernel):
        raise ValueError(f"kernel sizes must be positive, got {list(kernel)}")
    span = [(k - 1) * d + 1 for k, d in zip(kernel, dil, strict=True)]
    auto_pad = auto_pad or "NOTSET"
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = [math.ceil(i / s) for i, s in zip(spatial, strides_, strict=True)]
        total = [
            max((o - 1) * s + k - i, 0)
            for o, s, k, i in zip(out, strides_, span, spatial, strict=True)
        ]
        begin, end = split_same_pads(total, auto_pad)
    elif auto_pad in ("VALID", "NOTSET"):
        if auto_pad == "VALID":
            begin = end = [0] * n
        else:
            p = _ints(pads, 2 * n, 0)
            begin, end = list(p[:n]), list(p[n:])
            if any(v < 0 for v in p):
                raise ValueError(f"pads must not contain negative values, got {list(p)}")
        out = []
        for i, k, s, b, e in zip(spatial, span, strides_, begin, end, strict=True):
            full = i + b + e - k
            if full < 0 and not partial:
                raise ValueError(
                    f"input spatial size {i} with pads {b}+{e} is smaller than the "
                    f"dilated kernel {k}"
                )
            o = (-(-full // s) if ceil_mode else _trunc_div(full, s)) + 1
            if ceil_mode and o > 0 and (o - 1) * s >= i + b:
                o -= 1
            if o < 0:
                raise ValueError(
                    f"calculated output size {o} is negative (input {i}, pads {b}+{e}, "
                    f"dilated kernel {k}, stride {s}); check kernel_shape, pads, strides "
                    "and dilations"
                )
            out.append(o)
    else:
        raise ValueError(f"unknown auto_pad {auto_pad!r}")
    return Window(kernel, strides_, dil, tuple(begin), tuple(end), tuple(out))


def windows_without_taps(win: Window, spatial: Sequence[int]) -> tuple[tuple[int, ...], ...]:
    """Per spatial axis, the output positions whose window has no tap on the
    input along that axis: every tap in the pads (a window of the begin
    pads, or with ``ceil_mode`` one that starts in the end pads), or a
    dilation that steps over the whole input. A window is empty when it is
    so on any axis (windows are products of their axes' taps)."""
    empty = []
    for i, size in enumerate(spatial):
        start = np.arange(win.out[i], dtype=np.int64) * win.strides[i] - win.pads_begin[i]
        d = win.dilations[i]
        first = np.maximum(-(start // d), 0)  # the first tap at or past 0: ceil(-start / d)
        inside = (first < win.kernel[i]) & (start + first * d < size)
        empty.append(tuple(int(o) for o in np.flatnonzero(~inside)))
    return tuple(empty)


@dataclass(frozen=True)
class PoolWindow(Window):
    """A pool's :class:`Window` for one input size, with the output
    positions whose windows have no tap on the input
    (:func:`windows_without_taps`)."""

    spatial: tuple[int, ...] = ()
    """The input's spatial size."""
    empty: tuple[tuple[int, ...], ...] = ()
    """Per axis, the output positions whose window has no tap on the input."""

    @classmethod
    def of(cls, win: Window, spatial: Sequence[int]) -> PoolWindow:
        """``win`` over an input of ``spatial`` size."""
        kept = {f.name: getattr(win, f.name) for f in fields(Window)}
        return cls(**kept, spatial=tuple(spatial), empty=windows_without_taps(win, spatial))


def fill_empty_windows(
    y: np.ndarray,
    win: PoolWindow,
    indices: np.ndarray | None = None,
    *,
    column_major: bool = False,
) -> None:
    """Give a max pool's windows with no tap on the input (``win.empty``)
    onnxruntime's answer, whatever loop pooled ``y`` (N, C, *out): the
    lowest finite value of the type it pools in (not -inf: its running max
    starts there and nothing raises it), so float16's is -inf (float32's,
    rounded) and, in ``indices``, the flat index onnxruntime's loops
    compute for no tap, that of position (-1, ..., -1) of the window's
    plane (storage order as ``column_major``)."""
    if not any(win.empty):
        return
    if y.dtype == np.float16:
        low: Any = -np.inf
    else:
        low = np.finfo(y.dtype).min if y.dtype.kind == "f" else np.iinfo(y.dtype).min
    nowhere = 0
    if indices is not None:
        sizes = win.spatial[::-1] if column_major else win.spatial
        nowhere = -sum(math.prod(sizes[i + 1 :]) for i in range(len(sizes)))
        plane = math.prod(win.spatial)
        base = np.arange(y.shape[0] * y.shape[1], dtype=np.int64) * plane
        base = base.reshape(y.shape[0], y.shape[1], *[1] * (y.ndim - 2)) + nowhere
    for axis, positions in enumerate(win.empty):
        if not positions:
            continue
        at: list[Any] = [slice(None)] * y.ndim
        at[2 + axis] = list(positions)
        y[tuple(at)] = low
        if indices is not None:
            indices[tuple(at)] = base


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
