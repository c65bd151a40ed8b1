"""Checks and examples that several op families' entries share: windowed ops'
attributes, Conv and ConvTranspose, BatchNormalization's parameters,
quantization's scales and zero points, the recurrent ops.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..param_rules import (
    Attr,
    AttrIs,
    AttrLength,
    Blocked,
    BroadcastsTo,
    Check,
    Dim,
    Directions,
    Expr,
    Holds,
    Length,
    Rank,
    SameShape,
    Shape,
    ShapeIs,
    eq,
    le,
    select,
)
from ._entry import Example


def _window(
    x: str, n: Expr, names: tuple[str, ...] = ("kernel_shape", "strides", "dilations")
) -> tuple[Check, ...]:
    """A windowed op's per-axis attributes: one value per spatial axis (``n``),
    pads two."""
    return (
        *(AttrLength(f"attr:{a}", n=n) for a in names),
        AttrLength("attr:pads", n=2 * n),
    )


def _conv(x: str, w: str, b: str | None) -> tuple[Check, ...]:
    """Conv's rules: W's input channels times group are X's, its output
    channels a multiple of group, one bias value per output channel."""
    group = Attr("group", 1)
    out = Dim(w, 0, "output channels")
    return (
        Holds(w, a=Rank(w), b=Rank(x)),
        Holds(w, a=Dim(w, 1) * group, b=Dim(x, 1, "channels")),
        Holds(w, a=out, relation="divides", b=group),
        *((Length(b, n=out, noun="bias"),) if b else ()),
        *_window(x, Rank(w) - 2),
        AttrIs("attr:kernel_shape", shape=Shape(input=w, start=2)),
    )


def _conv_transpose(x: str, w: str, b: str) -> tuple[Check, ...]:
    group = Attr("group", 1)
    spatial = Rank(w) - 2
    return (
        Holds(w, a=Rank(w), b=Rank(x)),
        Holds(w, a=Dim(w, 0), b=Dim(x, 1, "channels")),
        Holds("attr:group", a=Dim(x, 1, "channels"), relation="divides", b=group),
        Length(b, n=Dim(w, 1) * group, noun="bias"),
        *_window(
            x, spatial, ("kernel_shape", "strides", "dilations", "output_padding", "output_shape")
        ),
        AttrIs("attr:kernel_shape", shape=Shape(input=w, start=2)),
    )


_WINDOW = {"kernel_shape": [3, 3], "strides": [1, 1], "dilations": [1, 1], "pads": [1, 1, 1, 1]}
_CONV_EXAMPLE = Example({"X": (1, 4, 5, 5), "W": (6, 2, 3, 3), "B": (6,)}, {"group": 2, **_WINDOW})

_BN = ("X", "scale", "B", "input_mean", "input_var")
_BN_8 = ("X", "scale", "B", "mean", "var")
_CHANNELS = Dim("X", 1, "channels", one_d=1)
_BN_EXAMPLE = Example(
    {"X": (2, 4, 3, 3), "scale": (4,), "B": (4,), "input_mean": (4,), "input_var": (4,)}
)


def _per_channel(names: tuple[str, ...], n: Expr, **kw: Any) -> tuple[Check, ...]:
    return tuple(Length(p, n=n, noun="bias" if p == "B" else "", **kw) for p in names)


def _quantize(x: str, scale: str, zp: str, blocked: bool) -> tuple[Check, ...]:
    """Q/DQ: a per-tensor scale (one value), a per-axis one (one per value
    along ``axis``), or (opset 21+, ``block_size``) a blocked one of x's
    shape but ``ceil(D / block_size)`` along ``axis``; zero point as scale."""
    axis = Attr("axis", 1)
    per_axis = Length(scale, n=Dim(x, axis, "values along axis"), one=True, scalar=True)
    block = Attr("block_size", 0)
    checks: list[Check] = [SameShape(zp, other=scale)]
    if not blocked:
        return (per_axis, *checks)
    blocked_shape = Blocked(x, axis, block)
    return (
        Length(scale, n=per_axis.n, one=True, scalar=True, when=eq(block, 0)),
        ShapeIs(scale, shape=blocked_shape, when=le(1, block)),
        *checks,
    )


def _row_param(p: str, a: str) -> tuple[Check, ...]:
    """A per-tensor or per-row parameter of matrix ``a`` (M, K): one value,
    M values, or (N-D) ``a``'s shape with K replaced by 1."""
    return (
        Length(p, n=Dim(a, -2, "rows"), one=True, scalar=True, when=le(Rank(p), 1)),
        BroadcastsTo(p, shape=Shape(input=a, stop=-1, tail=(1,)), when=le(2, Rank(p))),
    )


def _col_param(p: str, b: str) -> tuple[Check, ...]:
    """A per-tensor or per-column parameter of matrix ``b`` (K, N)."""
    return (
        Length(p, n=Dim(b, -1, "columns"), one=True, scalar=True, when=le(Rank(p), 1)),
        BroadcastsTo(p, shape=Shape(input=b, stop=-2, tail=(1, Dim(b, -1))), when=le(2, Rank(p))),
    )


def _recurrent(gates: int, cell: bool) -> tuple[Check, ...]:
    """RNN/GRU/LSTM: W, R, B, sequence_lens, initial_h (initial_c, P) from
    num_directions, hidden_size, X's feature size and batch (``layout``)."""
    nd, hs = Directions(), Attr("hidden_size", Dim("R", -1))
    layout0 = eq(Attr("layout", 0), 0)
    batch = select(layout0, Dim("X", 1), Dim("X", 0))
    states = [("initial_h",)] + ([("initial_c",)] if cell else [])
    checks: list[Check] = [
        ShapeIs("W", shape=Shape((nd, gates * hs, Dim("X", 2)))),
        ShapeIs("R", shape=Shape((nd, gates * hs, hs))),
        ShapeIs("B", shape=Shape((nd, 2 * gates * hs)), noun="bias"),
        Length("sequence_lens", n=batch),
    ]
    for (name,) in states:
        checks.append(ShapeIs(name, shape=Shape((nd, batch, hs)), when=layout0))
        checks.append(ShapeIs(name, shape=Shape((batch, nd, hs)), when=eq(Attr("layout", 0), 1)))
    if cell:
        checks.append(ShapeIs("P", shape=Shape((nd, 3 * hs))))
    return tuple(checks)


def _rnn_example(gates: int, cell: bool, layout: int = 0) -> Example:
    d, b, f, h = 2, 3, 4, 5
    ins: dict[str, Any] = {
        "X": (6, b, f) if layout == 0 else (b, 6, f),
        "W": (d, gates * h, f),
        "R": (d, gates * h, h),
        "B": (d, 2 * gates * h),
        "sequence_lens": np.array([6, 6, 6], dtype=np.int32),
        "initial_h": (d, b, h) if layout == 0 else (b, d, h),
    }
    if cell:
        ins.update({"initial_c": ins["initial_h"], "P": (d, 3 * h)})
    attrs = {"hidden_size": h, "direction": "bidirectional", **({"layout": 1} if layout else {})}
    return Example(ins, attrs, opset=14)
