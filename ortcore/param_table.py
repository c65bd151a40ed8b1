"""Which parameter of which op must fit which dimension: one table, read off
the operators' schemas (``onnx.defs``; onnxruntime's contrib schemas for
``com.microsoft``; :mod:`ep_sdk.fused_ops` for ``com.ortcore``).

Every entry names an op, the opsets it covers, its inputs in schema order,
and its :class:`~ortcore.param_rules.Check` list (in the language of
:mod:`ortcore.param_rules`). :mod:`ortcore.param_checks` applies them to
every node, at load and, where shapes are symbolic, at run time.

The rules refuse what onnxruntime refuses (a BatchNormalization ``scale``
of 2 values for 4 channels; a per-axis scale of the wrong length) and allow
what onnx allows (a LayerNormalization ``Scale`` that broadcasts to ``X``,
a scalar or one-value zero point, a Gemm ``C`` that broadcasts to (M, N)).
Where onnx's text allows a form onnxruntime's CPU kernels do not implement
(a per-row zero point of MatMulInteger's ``A``, a per-channel zero point of
ConvInteger's ``w``), the rule follows onnx.

Each entry carries an ``example`` (and ``variants``): valid instances
(input shapes or values, attributes), which the tests turn into models that
must run, and into models that break each check and must be refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .param_rules import (
    Attr,
    AttrCount,
    AttrGiven,
    AttrIs,
    AttrLength,
    AttrStr,
    Blocked,
    Broadcast,
    BroadcastsTo,
    Check,
    Const,
    Dim,
    Directions,
    Expr,
    Holds,
    Len,
    Length,
    Outputs,
    Present,
    ProdDims,
    ProdValues,
    Rank,
    SameShape,
    Scalar,
    Shape,
    ShapeIs,
    Value,
    eq,
    le,
    select,
)

__all__ = ["RULED_OPS", "RULES", "Example", "OpRules", "rules_for"]

MS = "com.microsoft"
ML = "ai.onnx.ml"
FUSED = "com.ortcore"


@dataclass(frozen=True)
class Example:
    """A valid instance of an op: each input a shape (random float32 data),
    or an array; the attributes; the opset to build it at (default: the
    entry's first)."""

    inputs: Mapping[str, tuple[int, ...] | np.ndarray | None]
    attrs: Mapping[str, Any] = field(default_factory=dict)
    opset: int | None = None
    outputs: int = 1


@dataclass(frozen=True)
class OpRules:
    """The checks of one op over a range of opsets (``until`` inclusive)."""

    op: str
    inputs: tuple[str, ...]
    checks: tuple[Check, ...]
    example: Example
    since: int = 1
    until: int | None = None
    domain: str = ""
    variants: tuple[Example, ...] = ()
    """More valid instances, for checks the first does not reach (a ``when``
    that holds only for other attributes)."""

    @property
    def examples(self) -> tuple[Example, ...]:
        """``example`` and its ``variants``."""
        return (self.example, *self.variants)

    def covers(self, opset: int) -> bool:
        """Whether the entry applies at ``opset`` of its domain."""
        return self.since <= opset and (self.until is None or opset <= self.until)


def _u8(*shape: int) -> np.ndarray:
    return np.asarray(np.arange(int(np.prod(shape)), dtype=np.uint8).reshape(shape) % 7 + 1)


def _i64(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def _s(value: int) -> np.ndarray:
    return np.array(value, dtype=np.int64)


def _f(*shape: int, value: float = 0.5) -> np.ndarray:
    return np.full(shape, value, dtype=np.float32)


# -- shared pieces ---------------------------------------------------------


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


# -- the table ---------------------------------------------------------------

RULES: tuple[OpRules, ...] = (
    # normalization
    OpRules(
        "BatchNormalization",
        _BN_8,
        (
            *_per_channel(_BN_8[1:], _CHANNELS, when=eq(Attr("spatial", 1), 1)),
            *(
                ShapeIs(p, shape=Shape(input="X", start=1), when=eq(Attr("spatial", 1), 0))
                for p in _BN_8[1:]
            ),
        ),
        Example({"X": (2, 4, 3, 3), **{p: (4,) for p in _BN_8[1:]}}),
        since=6,
        until=8,
        variants=(Example({"X": (2, 4, 3), **{p: (4, 3) for p in _BN_8[1:]}}, {"spatial": 0}),),
    ),
    OpRules(
        "BatchNormalization",
        _BN_8,
        _per_channel(_BN_8[1:], _CHANNELS),
        Example({"X": (2, 4, 3, 3), **{p: (4,) for p in _BN_8[1:]}}),
        since=9,
        until=13,
    ),
    OpRules(
        "BatchNormalization",
        _BN,
        _per_channel(_BN[1:], _CHANNELS),
        _BN_EXAMPLE,
        since=14,
        variants=(Example(_BN_EXAMPLE.inputs, {"training_mode": 1}, outputs=3),),
    ),
    OpRules(
        "InstanceNormalization",
        ("input", "scale", "B"),
        _per_channel(("scale", "B"), Dim("input", 1, "channels")),
        Example({"input": (2, 4, 3, 3), "scale": (4,), "B": (4,)}),
        since=6,
    ),
    OpRules(
        "GroupNormalization",
        ("X", "scale", "bias"),
        (
            Holds(
                "attr:num_groups",
                a=Dim("X", 1, "channels"),
                relation="divides",
                b=Attr("num_groups"),
            ),
            *_per_channel(("scale", "bias"), Attr("num_groups"), one=True),
        ),
        Example({"X": (2, 4, 3, 3), "scale": (2,), "bias": (2,)}, {"num_groups": 2}),
        since=18,
        until=20,
    ),
    OpRules(
        "GroupNormalization",
        ("X", "scale", "bias"),
        (
            Holds(
                "attr:num_groups",
                a=Dim("X", 1, "channels"),
                relation="divides",
                b=Attr("num_groups"),
            ),
            *_per_channel(("scale", "bias"), Dim("X", 1, "channels"), one=True),
        ),
        Example({"X": (2, 4, 3, 3), "scale": (4,), "bias": (4,)}, {"num_groups": 2}),
        since=21,
    ),
    OpRules(
        "LayerNormalization",
        ("X", "Scale", "B"),
        (
            BroadcastsTo("Scale", shape=Shape(input="X")),
            BroadcastsTo("B", shape=Shape(input="X"), noun="bias"),
        ),
        Example({"X": (2, 3, 4), "Scale": (4,), "B": (4,)}),
        since=17,
    ),
    OpRules(
        "RMSNormalization",
        ("X", "scale"),
        (BroadcastsTo("scale", shape=Shape(input="X")),),
        Example({"X": (2, 3, 4), "scale": (4,)}),
        since=23,
    ),
    # convolutions
    OpRules("Conv", ("X", "W", "B"), _conv("X", "W", "B"), _CONV_EXAMPLE),
    OpRules(
        "ConvTranspose",
        ("X", "W", "B"),
        _conv_transpose("X", "W", "B"),
        Example(
            {"X": (1, 4, 3, 3), "W": (4, 3, 2, 2), "B": (3,)},
            {
                "kernel_shape": [2, 2],
                "strides": [2, 2],
                "dilations": [1, 1],
                "output_padding": [1, 0],
                "pads": [0, 1, 0, 0],
            },
        ),
        variants=(
            Example(
                {"X": (1, 4, 3, 3), "W": (4, 3, 2, 2), "B": (6,)},
                {"group": 2, "strides": [2, 2], "output_shape": [6, 7]},
            ),
        ),
    ),
    OpRules(
        "ConvInteger",
        ("x", "w", "x_zero_point", "w_zero_point"),
        (
            *_conv("x", "w", None),
            Scalar("x_zero_point"),
            Length("w_zero_point", n=Dim("w", 0, "output channels"), one=True, scalar=True),
        ),
        Example(
            {
                "x": _u8(1, 4, 4, 4),
                "w": _u8(6, 4, 3, 3),
                "x_zero_point": _u8(),
                "w_zero_point": _u8(6),
            },
            {"kernel_shape": [3, 3], "strides": [1, 1], "dilations": [1, 1], "pads": [1, 1, 1, 1]},
        ),
        since=10,
        variants=(Example({"x": _u8(1, 4, 4, 4), "w": _u8(6, 2, 3, 3)}, {"group": 2}),),
    ),
    OpRules(
        "QLinearConv",
        (
            "x",
            "x_scale",
            "x_zero_point",
            "w",
            "w_scale",
            "w_zero_point",
            "y_scale",
            "y_zero_point",
            "B",
        ),
        (
            *_conv("x", "w", "B"),
            Scalar("x_scale"),
            Scalar("x_zero_point"),
            Scalar("y_scale"),
            Scalar("y_zero_point"),
            Length("w_scale", n=Dim("w", 0, "output channels"), one=True, scalar=True),
            Length("w_zero_point", n=Dim("w", 0, "output channels"), one=True, scalar=True),
        ),
        Example(
            {
                "x": _u8(1, 4, 4, 4),
                "x_scale": _f(value=0.1),
                "x_zero_point": _u8(),
                "w": _u8(6, 2, 3, 3),
                "w_scale": _f(6, value=0.02),
                "w_zero_point": _u8(6),
                "y_scale": _f(value=0.5),
                "y_zero_point": _u8(),
                "B": np.arange(6, dtype=np.int32),
            },
            {"group": 2, **_WINDOW},
        ),
        since=10,
    ),
    OpRules(
        "DeformConv",
        ("X", "W", "offset", "B", "mask"),
        (
            *_conv("X", "W", "B"),
            Holds(
                "attr:offset_group",
                a=Dim("X", 1, "channels"),
                relation="divides",
                b=Attr("offset_group", 1),
            ),
            Holds(
                "offset",
                a=Dim("offset", 1),
                b=Attr("offset_group", 1) * ProdDims("W", 2) * (Rank("W") - 2),
            ),
            Holds("mask", a=Dim("mask", 1), b=Attr("offset_group", 1) * ProdDims("W", 2)),
            Holds("offset", a=Dim("offset", 0), b=Dim("X", 0, "batches")),
            Holds("mask", a=Dim("mask", 0), b=Dim("X", 0, "batches")),
        ),
        Example(
            {
                "X": (1, 4, 4, 4),
                "W": (2, 4, 2, 2),
                "offset": (1, 16, 3, 3),
                "B": (2,),
                "mask": (1, 8, 3, 3),
            },
            {
                "offset_group": 2,
                "kernel_shape": [2, 2],
                "strides": [1, 1],
                "dilations": [1, 1],
                "pads": [0, 0, 0, 0],
            },
        ),
        since=19,
        variants=(
            Example(
                {"X": (1, 4, 4, 4), "W": (4, 2, 2, 2), "offset": (1, 8, 3, 3), "B": (4,)},
                {"group": 2},
            ),
        ),
    ),
    # quantization
    OpRules(
        "QuantizeLinear",
        ("x", "y_scale", "y_zero_point"),
        _quantize("x", "y_scale", "y_zero_point", False),
        Example({"x": (2, 4, 3), "y_scale": _f(4), "y_zero_point": _u8(4)}, opset=13),
        since=10,
        until=20,
        variants=(Example({"x": (2, 4, 3), "y_scale": _f(), "y_zero_point": _u8(1)}, opset=13),),
    ),
    OpRules(
        "QuantizeLinear",
        ("x", "y_scale", "y_zero_point"),
        _quantize("x", "y_scale", "y_zero_point", True),
        Example(
            {"x": (2, 4, 6), "y_scale": _f(2, 4, 3), "y_zero_point": _u8(2, 4, 3)},
            {"axis": 2, "block_size": 2},
        ),
        since=21,
        variants=(
            Example({"x": (2, 4, 3), "y_scale": _f(4), "y_zero_point": _u8(4)}),
            Example({"x": (2, 4, 3), "y_scale": _f(), "y_zero_point": _u8(1)}),
        ),
    ),
    OpRules(
        "DequantizeLinear",
        ("x", "x_scale", "x_zero_point"),
        _quantize("x", "x_scale", "x_zero_point", False),
        Example({"x": _u8(2, 4, 3), "x_scale": _f(4), "x_zero_point": _u8(4)}, opset=13),
        since=10,
        until=20,
        variants=(Example({"x": _u8(2, 4, 3), "x_scale": _f(), "x_zero_point": _u8(1)}, opset=13),),
    ),
    OpRules(
        "DequantizeLinear",
        ("x", "x_scale", "x_zero_point"),
        _quantize("x", "x_scale", "x_zero_point", True),
        Example(
            {"x": _u8(2, 4, 6), "x_scale": _f(2, 4, 3), "x_zero_point": _u8(2, 4, 3)},
            {"axis": 2, "block_size": 2},
        ),
        since=21,
        variants=(
            Example({"x": _u8(2, 4, 3), "x_scale": _f(4), "x_zero_point": _u8(4)}),
            Example({"x": _u8(2, 4, 3), "x_scale": _f(), "x_zero_point": _u8(1)}),
        ),
    ),
    OpRules(
        "MatMulInteger",
        ("A", "B", "a_zero_point", "b_zero_point"),
        (
            *_row_param("a_zero_point", "A"),
            *_col_param("b_zero_point", "B"),
        ),
        Example({"A": _u8(3, 5), "B": _u8(5, 2), "a_zero_point": _u8(3), "b_zero_point": _u8(2)}),
        since=10,
    ),
    OpRules(
        "QLinearMatMul",
        ("a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale", "y_zero_point"),
        (
            *_row_param("a_scale", "a"),
            *_row_param("a_zero_point", "a"),
            *_col_param("b_scale", "b"),
            *_col_param("b_zero_point", "b"),
            Scalar("y_scale"),
            Scalar("y_zero_point"),
        ),
        Example(
            {
                "a": _u8(3, 5),
                "a_scale": _f(value=0.1),
                "a_zero_point": _u8(),
                "b": _u8(5, 2),
                "b_scale": _f(2, value=0.2),
                "b_zero_point": _u8(2),
                "y_scale": _f(value=4.0),
                "y_zero_point": _u8(),
            }
        ),
        since=10,
        variants=(
            Example(
                {
                    "a": _u8(2, 3, 5),
                    "a_scale": _f(2, 3, 1, value=0.1),
                    "a_zero_point": _u8(2, 3, 1),
                    "b": _u8(2, 5, 2),
                    "b_scale": _f(2, 1, 2, value=0.2),
                    "b_zero_point": _u8(2, 1, 2),
                    "y_scale": _f(value=4.0),
                    "y_zero_point": _u8(),
                },
                opset=21,
            ),
        ),
    ),
    # broadcasting parameters
    OpRules(
        "PRelu",
        ("X", "slope"),
        (BroadcastsTo("slope", shape=Shape(input="X"), leading_ones=True),),
        Example({"X": (2, 4, 3, 3), "slope": (4, 1, 1)}),
        since=7,
    ),
    OpRules(
        "Gemm",
        ("A", "B", "C"),
        (
            BroadcastsTo(
                "C",
                shape=Shape(
                    (
                        select(eq(Attr("transA", 0), 0), Dim("A", 0), Dim("A", 1)),
                        select(eq(Attr("transB", 0), 0), Dim("B", 1), Dim("B", 0)),
                    )
                ),
            ),
        ),
        Example({"A": (3, 5), "B": (2, 5), "C": (3, 1)}, {"transB": 1}),
        since=7,
    ),
    # recurrent
    OpRules(
        "RNN",
        ("X", "W", "R", "B", "sequence_lens", "initial_h"),
        _recurrent(1, False),
        _rnn_example(1, False),
        since=7,
        variants=(_rnn_example(1, False, layout=1),),
    ),
    OpRules(
        "GRU",
        ("X", "W", "R", "B", "sequence_lens", "initial_h"),
        _recurrent(3, False),
        _rnn_example(3, False),
        since=7,
        variants=(_rnn_example(3, False, layout=1),),
    ),
    OpRules(
        "LSTM",
        ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"),
        _recurrent(4, True),
        _rnn_example(4, True),
        since=7,
        variants=(_rnn_example(4, True, layout=1),),
    ),
    # per-axis lists
    OpRules(
        "Resize",
        ("X", "scales"),
        (Length("scales", n=Rank("X")),),
        Example({"X": (1, 2, 3, 3), "scales": _f(4, value=2.0)}),
        since=10,
        until=10,
    ),
    OpRules(
        "Resize",
        ("X", "roi", "scales", "sizes"),
        (
            Length("scales", n=Rank("X"), when=Present("scales", nonempty=True)),
            Length("sizes", n=Rank("X"), when=Present("sizes", nonempty=True)),
            Length(
                "roi",
                n=2 * Rank("X"),
                when=eq(AttrStr("coordinate_transformation_mode"), "tf_crop_and_resize"),
            ),
        ),
        Example({"X": (1, 2, 3, 3), "roi": None, "scales": np.array([1, 1, 2, 2], np.float32)}),
        since=11,
        until=17,
        variants=(
            Example(
                {
                    "X": (1, 2, 3, 3),
                    "roi": np.array([0, 0, 0, 0, 1, 1, 1, 1], np.float32),
                    "scales": np.zeros(0, np.float32),
                    "sizes": _i64(1, 2, 4, 5),
                },
                {"coordinate_transformation_mode": "tf_crop_and_resize", "mode": "linear"},
            ),
        ),
    ),
    OpRules(
        "Resize",
        ("X", "roi", "scales", "sizes"),
        (
            Length("scales", n=AttrCount("axes", Rank("X")), when=Present("scales", nonempty=True)),
            Length("sizes", n=AttrCount("axes", Rank("X")), when=Present("sizes", nonempty=True)),
            Length(
                "roi",
                n=2 * AttrCount("axes", Rank("X")),
                when=eq(AttrStr("coordinate_transformation_mode"), "tf_crop_and_resize"),
            ),
        ),
        Example(
            {"X": (1, 2, 3, 3), "roi": None, "scales": np.array([2, 2], np.float32)},
            {"axes": [2, 3]},
        ),
        since=18,
        variants=(
            Example(
                {
                    "X": (1, 2, 3, 3),
                    "roi": np.array([0, 0, 1, 1], np.float32),
                    "scales": None,
                    "sizes": _i64(4, 5),
                },
                {
                    "axes": [2, 3],
                    "coordinate_transformation_mode": "tf_crop_and_resize",
                    "mode": "linear",
                },
            ),
        ),
    ),
    OpRules(
        "Upsample",
        ("X",),
        (AttrLength("attr:scales", n=Rank("X")),),
        Example({"X": (1, 2, 3, 3)}, {"scales": [1.0, 1.0, 2.0, 2.0]}),
        since=7,
        until=8,
    ),
    OpRules(
        "Upsample",
        ("X", "scales"),
        (Length("scales", n=Rank("X")),),
        Example({"X": (1, 2, 3, 3), "scales": np.array([1, 1, 2, 2], np.float32)}),
        since=9,
        until=9,
    ),
    OpRules(
        "Pad",
        ("data",),
        (AttrLength("attr:pads", n=2 * Rank("data")),),
        Example({"data": (2, 3)}, {"pads": [0, 1, 1, 0]}),
        since=2,
        until=10,
    ),
    OpRules(
        "Pad",
        ("data", "pads", "constant_value"),
        (
            Length("pads", n=2 * Rank("data")),
            Scalar("constant_value"),
        ),
        Example({"data": (2, 3), "pads": _i64(0, 1, 1, 0), "constant_value": _f(value=2.0)}),
        since=11,
        until=17,
    ),
    OpRules(
        "Pad",
        ("data", "pads", "constant_value", "axes"),
        (
            Length("pads", n=2 * select(Present("axes"), Len("axes"), Rank("data"))),
            Scalar("constant_value"),
        ),
        Example(
            {"data": (2, 3), "pads": _i64(1, 2), "constant_value": _f(value=2.0), "axes": _i64(1)}
        ),
        since=18,
    ),
    OpRules(
        "Slice",
        ("data",),
        (
            AttrLength("attr:ends", n=AttrCount("starts")),
            AttrLength("attr:axes", n=AttrCount("starts")),
        ),
        Example({"data": (4, 5)}, {"starts": [1, 0], "ends": [3, 4], "axes": [0, 1]}),
        since=1,
        until=9,
    ),
    OpRules(
        "Slice",
        ("data", "starts", "ends", "axes", "steps"),
        (
            Holds(
                "starts",
                a=Len("starts"),
                relation="<=",
                b=Rank("data"),
                when=eq(Present("axes"), False),
            ),
            Length("ends", n=Len("starts")),
            Length("axes", n=Len("starts")),
            Length("steps", n=Len("starts")),
        ),
        Example(
            {
                "data": (4, 5),
                "starts": _i64(1, 0),
                "ends": _i64(3, 4),
                "axes": _i64(0, 1),
                "steps": _i64(1, 2),
            }
        ),
        since=10,
        variants=(Example({"data": (4, 5), "starts": _i64(1, 0), "ends": _i64(3, 4)}),),
    ),
    OpRules(
        "Tile",
        ("input", "repeats"),
        (Length("repeats", n=Rank("input")),),
        Example({"input": (2, 3), "repeats": _i64(2, 1)}),
        since=6,
    ),
    OpRules(
        "CenterCropPad",
        ("input_data", "shape"),
        (Length("shape", n=AttrCount("axes", Rank("input_data"))),),
        Example({"input_data": (4, 5, 2), "shape": _i64(3, 6)}, {"axes": [0, 1]}),
        since=18,
    ),
    OpRules(
        "Col2Im",
        ("input", "image_shape", "block_shape"),
        (
            Length("image_shape", n=Len("block_shape")),
            Holds("input", a=Dim("input", 1), relation="divides", b=ProdValues("block_shape")),
            *_window("input", Len("block_shape"), ("strides", "dilations")),
        ),
        Example(
            {"input": (1, 8, 9), "image_shape": _i64(4, 4), "block_shape": _i64(2, 2)},
            {"strides": [1, 1], "dilations": [1, 1], "pads": [0, 0, 0, 0]},
        ),
        since=18,
    ),
    OpRules(
        "MaxUnpool",
        ("X", "I", "output_shape"),
        (
            SameShape("I", other="X"),
            Length("output_shape", n=Rank("X")),
            *_window("X", Rank("X") - 2, ("kernel_shape", "strides")),
        ),
        Example(
            {
                "X": (1, 1, 2, 2),
                "I": np.array([[[[5, 7], [13, 15]]]], np.int64),
                "output_shape": _i64(1, 1, 4, 4),
            },
            {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [0, 0, 0, 0]},
        ),
        since=9,
    ),
    *(
        OpRules(
            pool,
            ("X",),
            _window("X", Rank("X") - 2),
            Example({"X": (1, 2, 5, 5)}, {**_WINDOW, "kernel_shape": [2, 2]}, opset=opset),
        )
        for pool, opset in (("MaxPool", 13), ("AveragePool", 19), ("LpPool", 18))
    ),
    # regions, grids, boxes, sequences
    OpRules(
        "RoiAlign",
        ("X", "rois", "batch_indices"),
        (
            ShapeIs("rois", shape=Shape((None, 4))),
            Length("batch_indices", n=Dim("rois", 0, "regions")),
        ),
        Example(
            {
                "X": (2, 3, 5, 5),
                "rois": np.array([[0, 0, 2, 2], [1, 1, 4, 4]], np.float32),
                "batch_indices": _i64(0, 1),
            }
        ),
        since=10,
    ),
    OpRules(
        "MaxRoiPool",
        ("X", "rois"),
        (ShapeIs("rois", shape=Shape((None, 5))),),
        Example(
            {"X": (2, 3, 5, 5), "rois": np.array([[0, 0, 0, 2, 2], [1, 1, 1, 4, 4]], np.float32)},
            {"pooled_shape": [2, 2]},
        ),
    ),
    OpRules(
        "GridSample",
        ("X", "grid"),
        (
            Holds("grid", a=Rank("grid"), b=Rank("X")),
            Holds("grid", a=Dim("grid", -1), b=Rank("X") - 2),
            Holds("grid", a=Dim("grid", 0), b=Dim("X", 0, "batches")),
        ),
        Example({"X": (2, 3, 4, 4), "grid": (2, 3, 3, 2)}),
        since=16,
    ),
    OpRules(
        "AffineGrid",
        ("theta", "size"),
        (ShapeIs("theta", shape=Shape((Value("size", 0), Len("size") - 2, Len("size") - 1))),),
        Example({"theta": (2, 2, 3), "size": _i64(2, 3, 4, 5)}),
        since=20,
    ),
    OpRules(
        "NonMaxSuppression",
        ("boxes", "scores", "max_output_boxes_per_class", "iou_threshold", "score_threshold"),
        (
            Holds("boxes", a=Dim("boxes", 2), b=Const(4)),
            Holds("scores", a=Dim("scores", 0), b=Dim("boxes", 0, "batches")),
            Holds("scores", a=Dim("scores", 2), b=Dim("boxes", 1, "boxes")),
            Scalar("max_output_boxes_per_class"),
            Scalar("iou_threshold"),
            Scalar("score_threshold"),
        ),
        Example(
            {
                "boxes": np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, 2, 1, 3]]], np.float32),
                "scores": np.array([[[0.9, 0.8, 0.7]]], np.float32),
                "max_output_boxes_per_class": _i64(2),
                "iou_threshold": _f(1, value=0.5),
                "score_threshold": _f(1, value=0.1),
            }
        ),
        since=10,
    ),
    OpRules(
        "ReverseSequence",
        ("input", "sequence_lens"),
        (Length("sequence_lens", n=Dim("input", Attr("batch_axis", 1), "batches")),),
        Example({"input": (4, 3, 2), "sequence_lens": _i64(4, 2, 1)}),
        since=10,
    ),
    OpRules(
        "Split",
        ("input",),
        (AttrLength("attr:split", n=Outputs()),),
        Example({"input": (6, 2)}, {"split": [2, 4]}, outputs=2),
        since=2,
        until=12,
    ),
    OpRules(
        "Split",
        ("input", "split"),
        (
            Length("split", n=Outputs()),
            Holds("split", a=ProdValues("split", total=True), b=Dim("input", Attr("axis", 0))),
        ),
        Example({"input": (6, 2), "split": _i64(2, 4)}, outputs=2),
        since=13,
    ),
    OpRules(
        "STFT",
        ("signal", "frame_step", "window", "frame_length"),
        (
            Scalar("frame_step"),
            Scalar("frame_length"),
            Length("window", n=Value("frame_length"), when=Present("frame_length")),
        ),
        Example(
            {"signal": (1, 16, 1), "frame_step": _s(4), "window": _f(8), "frame_length": _s(8)}
        ),
        since=17,
    ),
    # inputs that must be scalars
    OpRules(
        "Clip",
        ("input", "min", "max"),
        (Scalar("min"), Scalar("max")),
        Example({"input": (2, 3), "min": _f(value=0.2), "max": _f(value=0.7)}),
        since=11,
    ),
    OpRules(
        "TopK",
        ("X", "K"),
        (Scalar("K"),),
        Example({"X": (2, 5), "K": _i64(2)}, outputs=2),
        since=10,
    ),
    OpRules(
        "OneHot",
        ("indices", "depth", "values"),
        (Scalar("depth"), Length("values", n=Const(2))),
        Example({"indices": _i64(0, 2, 1), "depth": _s(3), "values": np.array([0, 1], np.float32)}),
        since=9,
    ),
    OpRules(
        "CumSum", ("x", "axis"), (Scalar("axis"),), Example({"x": (2, 3), "axis": _s(1)}), since=11
    ),
    OpRules(
        "Range",
        ("start", "limit", "delta"),
        (Scalar("start"), Scalar("limit"), Scalar("delta")),
        Example({"start": _f(value=0.0), "limit": _f(value=5.0), "delta": _f(value=1.5)}),
        since=11,
    ),
    OpRules(
        "Trilu", ("input", "k"), (Scalar("k"),), Example({"input": (3, 4), "k": _s(1)}), since=14
    ),
    OpRules(
        "DFT",
        ("input", "dft_length"),
        (Scalar("dft_length"),),
        Example({"input": (1, 8, 1), "dft_length": _s(8)}),
        since=17,
        until=19,
    ),
    OpRules(
        "DFT",
        ("input", "dft_length", "axis"),
        (Scalar("dft_length"), Scalar("axis")),
        Example({"input": (1, 8, 1), "dft_length": _s(8), "axis": _s(1)}),
        since=20,
    ),
    # onnxruntime's contrib ops the CPU provider runs
    OpRules(
        "BiasGelu",
        ("A", "B"),
        (Length("B", n=Dim("A", -1, "features"), noun="bias"),),
        Example({"A": (2, 3, 4), "B": (4,)}),
        domain=MS,
    ),
    OpRules(
        "FastGelu",
        ("X", "bias"),
        (Length("bias", n=Dim("X", -1, "features")),),
        Example({"X": (2, 3, 4), "bias": (4,)}),
        domain=MS,
    ),
    # ortcore's fused ops (ep_sdk.fused_ops): a model may hold them too
    OpRules("FusedConv", ("X", "W", "B"), _conv("X", "W", "B"), _CONV_EXAMPLE, domain=FUSED),
    OpRules(
        "FusedConvPool",
        ("X", "W", "B"),
        _conv("X", "W", "B"),
        Example(_CONV_EXAMPLE.inputs, {**_CONV_EXAMPLE.attrs, "pool_kernel_shape": [2, 2]}),
        domain=FUSED,
    ),
    OpRules(
        "FusedConvShuffle",
        ("X", "W", "B"),
        (
            *_conv("X", "W", "B"),
            Holds(
                "attr:shuffle_groups",
                a=Dim("W", 0, "output channels"),
                relation="divides",
                b=Attr("shuffle_groups", 1),
            ),
        ),
        Example(_CONV_EXAMPLE.inputs, {**_CONV_EXAMPLE.attrs, "shuffle_groups": 3}),
        domain=FUSED,
    ),
    OpRules(
        "FusedConvConcat",
        ("X", "W", "B", "Into"),
        _conv("X", "W", "B"),
        Example(_CONV_EXAMPLE.inputs, {**_CONV_EXAMPLE.attrs, "channels": 6}),
        domain=FUSED,
    ),
    OpRules(
        "FusedConvAdd",
        ("X", "W", "Z", "B"),
        (
            *_conv("X", "W", "B"),
            Holds("Z", a=Rank("Z"), b=Rank("X")),
            Holds("Z", a=Dim("Z", 0), b=Dim("X", 0, "batches")),
            Holds("Z", a=Dim("Z", 1), b=Dim("W", 0, "output channels")),
        ),
        Example(
            {"X": (1, 4, 5, 5), "W": (6, 2, 3, 3), "Z": (1, 6, 5, 5), "B": (6,)},
            _CONV_EXAMPLE.attrs,
        ),
        domain=FUSED,
    ),
    OpRules("FusedBatchNorm", _BN, _per_channel(_BN[1:], _CHANNELS), _BN_EXAMPLE, domain=FUSED),
    OpRules(
        "FusedGemm",
        ("A", "B", "C"),
        (
            BroadcastsTo(
                "C",
                shape=Shape(
                    (
                        select(eq(Attr("transA", 0), 0), Dim("A", 0), Dim("A", 1)),
                        select(eq(Attr("transB", 0), 0), Dim("B", 1), Dim("B", 0)),
                    )
                ),
            ),
        ),
        Example({"A": (3, 5), "B": (5, 2), "C": (2,)}),
        domain=FUSED,
    ),
    OpRules(
        "BiasGelu",
        ("X", "bias"),
        (BroadcastsTo("bias", shape=Shape(input="X")),),  # Add's broadcasting, X's shape kept
        Example({"X": (2, 3, 4), "bias": (4,)}),
        domain=FUSED,
    ),
    OpRules(
        "FusedLayerNorm",
        ("X", "Scale", "B"),
        (
            BroadcastsTo("Scale", shape=Shape(input="X")),
            BroadcastsTo("B", shape=Shape(input="X"), noun="bias"),
        ),
        Example({"X": (2, 3, 4), "Scale": (4,), "B": (4,)}),
        domain=FUSED,
    ),
    OpRules(
        "FusedRMSNorm",
        ("X", "scale"),
        (BroadcastsTo("scale", shape=Shape(input="X")),),
        Example({"X": (2, 3, 4), "scale": (4,)}),
        domain=FUSED,
    ),
    OpRules(
        "SkipLayerNormalization",
        ("X", "skip", "gamma", "beta", "bias"),
        (
            BroadcastsTo("gamma", shape=Broadcast("X", "skip")),
            BroadcastsTo("beta", shape=Broadcast("X", "skip")),
            BroadcastsTo("bias", shape=Broadcast("X", "skip")),
        ),
        Example({"X": (2, 3, 4), "skip": (2, 3, 4), "gamma": (4,), "beta": (4,), "bias": (4,)}),
        domain=FUSED,
    ),
    # ai.onnx.ml: per-feature attributes
    OpRules(
        "Scaler",
        ("X",),
        (
            AttrLength("attr:offset", n=Dim("X", -1, "features"), one=True),
            AttrLength("attr:scale", n=AttrCount("offset"), when=AttrGiven("offset")),
            AttrLength("attr:scale", n=Dim("X", -1, "features"), one=True),
        ),
        Example({"X": (3, 4)}, {"offset": [0.0, 1.0, 2.0, 3.0], "scale": [2.0, 1.0, 0.5, 3.0]}),
        domain=ML,
        variants=(Example({"X": (3, 4)}, {"scale": [2.0, 1.0, 0.5, 3.0]}),),
    ),
    OpRules(
        "Imputer",
        ("X",),
        (
            AttrLength("attr:imputed_value_floats", n=Dim("X", -1, "features"), one=True),
            AttrLength("attr:imputed_value_int64s", n=Dim("X", -1, "features"), one=True),
        ),
        Example(
            {"X": np.array([[1, np.nan, 3, 4]], np.float32)},
            {"imputed_value_floats": [0.0, 9.0, 0.0, 0.0], "replaced_value_float": float("nan")},
        ),
        domain=ML,
        variants=(
            Example(
                {"X": np.array([[1, -1, 3]], np.int64)},
                {"imputed_value_int64s": [7, 8, 9], "replaced_value_int64": -1},
            ),
        ),
    ),
    OpRules(
        "LinearRegressor",
        ("X",),
        (
            AttrLength("attr:coefficients", n=Attr("targets", 1) * Dim("X", -1, "features")),
            AttrLength("attr:intercepts", n=Attr("targets", 1)),
        ),
        Example(
            {"X": (3, 4)},
            {
                "coefficients": [1.0, 2.0, 3.0, 4.0, 0.5, 0.5, 0.5, 0.5],
                "intercepts": [1.0, -1.0],
                "targets": 2,
            },
        ),
        domain=ML,
    ),
)
"""Every rule, by op and opset range."""

_INDEX: dict[tuple[str, str], tuple[OpRules, ...]] = {}
for _entry in RULES:
    _INDEX[(_entry.domain, _entry.op)] = (*_INDEX.get((_entry.domain, _entry.op), ()), _entry)


RULED_OPS = frozenset(op for _, op in _INDEX)
"""The op types some entry covers (in any domain): a quick way past every other node."""


def rules_for(domain: str, op_type: str, opset: int) -> OpRules | None:
    """The entry for ``op_type`` of ``domain`` at ``opset`` (``"ai.onnx"`` is ``""``)."""
    entries = _INDEX.get(("" if domain == "ai.onnx" else domain, op_type))
    if entries is None:
        return None
    for entry in entries:
        if entry.covers(opset):
            return entry
    return None
