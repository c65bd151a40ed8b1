"""Normalization's per-channel parameters, and parameters that broadcast against
an input.
"""

from __future__ import annotations

from ..param_rules import Attr, BroadcastsTo, Dim, Holds, Shape, ShapeIs, eq, select
from ._entry import Example, OpRules
from ._pieces import _BN, _BN_8, _BN_EXAMPLE, _CHANNELS, _per_channel

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
)
"""The entries of this family, in the table's order."""
